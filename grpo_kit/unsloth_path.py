"""Recipe -> Unsloth ``FastLanguageModel`` (4-bit QLoRA + vLLM) -> TRL ``GRPOTrainer``: the course's fast path
(LLM course 12.6), for one CUDA GPU.

    from grpo_kit import unsloth_path
    result = unsloth_path.train("gsm8k-unsloth", output_dir="runs/gsm8k")
    unsloth_path.compare_with_and_without_adapter(result.model, result.tokenizer, result.adapter_dir,
                                                  ["Calculate pi."])

The steps, with the real Unsloth API (unsloth 2026.10.9):

1. ``FastLanguageModel.from_pretrained(model_name, max_seq_length, load_in_4bit=True,
   fast_inference=True, max_lora_rank, gpu_memory_utilization)`` — 4-bit weights, and a vLLM engine
   inside the process for generation (``fast_inference``).
2. ``FastLanguageModel.get_peft_model(model, r, target_modules, lora_alpha,
   use_gradient_checkpointing="unsloth", random_state)``.
3. TRL's ``GRPOConfig`` + ``GRPOTrainer``. Importing ``unsloth`` patches TRL's trainers (in this version
   ``PatchFastRL`` runs at import; older tutorials call it by hand); the patched trainer switches
   ``use_vllm`` on by itself when the model carries a vLLM engine.
4. ``model.save_lora(dir)``; ``model.fast_generate(text, sampling_params=SamplingParams(...),
   lora_request=model.load_lora(dir))`` — with and without the adapter, to compare.

Everything up to the GPU boundary is pure and tested on CPU: :func:`from_pretrained_kwargs`,
:func:`get_peft_model_kwargs`, ``grpo_config_kwargs`` (``grpo_kit.trainer_builder``), :func:`sampling_params_kwargs` and
:func:`check_settings`. Without CUDA, :func:`require_cuda` raises *before* ``unsloth`` is imported
(importing it on a CPU machine fails deep inside Unsloth), pointing to ``--loop trl``.

Install (GPU, Linux): ``pip install torch==2.13.0 ".[unsloth]"`` — without ``-c constraints.txt``,
whose numpy pin is for the CPU environment (see the comment on the ``unsloth`` extra in pyproject.toml).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_kit.hardware import Precision, cuda_available
from grpo_kit.recipes import Recipe, get_recipe
from grpo_kit.result import RunResult
from grpo_kit.trainer_builder import (
    ModelBackend,
    check_training,
    grpo_config_kwargs,
    resume_point,
    run_trainer,
    world_size,
)
from grpo_kit.trainer_builder import build_trainer as build_grpo_trainer

__all__ = [
    "backend",
    "build_trainer",
    "check_settings",
    "compare_with_and_without_adapter",
    "from_pretrained_kwargs",
    "get_peft_model_kwargs",
    "grpo_config_kwargs",
    "load_model",
    "require_cuda",
    "sampling_params_kwargs",
    "train",
]

CPU_FIX = (
    "Unsloth's fast path needs a CUDA GPU (its kernels are Triton/CUDA, generation uses vLLM). "
    "On this machine train with `grpo-kit train --loop trl` (TRL GRPOTrainer, plain LoRA) "
    "or `--loop standalone`; for the GSM8K course recipe on CPU use `--recipe gsm8k-cpu`."
)


# --- the pure mapping (tested on CPU) ------------------------------------------------------------


def from_pretrained_kwargs(recipe: Recipe, *, model_name: str | None = None) -> dict[str, Any]:
    """Keyword arguments for ``FastLanguageModel.from_pretrained``."""
    if recipe.lora is None:
        raise ValueError(
            f"recipe {recipe.name!r} has lora=None; the Unsloth path trains a LoRA adapter. "
            "Give it lora={'r': 16} or use --loop trl for full fine-tuning."
        )
    return {
        "model_name": model_name or recipe.model,
        "max_seq_length": recipe.unsloth.max_seq_length,
        "load_in_4bit": recipe.quantization == "4bit",
        "load_in_8bit": recipe.quantization == "8bit",
        "fast_inference": recipe.unsloth.fast_inference,
        "max_lora_rank": recipe.lora.r,  # vLLM reserves LoRA slots of this rank
        "gpu_memory_utilization": recipe.unsloth.gpu_memory_utilization,
    }


def get_peft_model_kwargs(recipe: Recipe) -> dict[str, Any]:
    """Keyword arguments (besides the model) for ``FastLanguageModel.get_peft_model``."""
    lora = recipe.lora
    if lora is None:
        raise ValueError(f"recipe {recipe.name!r} has no LoRA settings; the Unsloth path needs lora=.")
    return {
        "r": lora.r,
        "target_modules": lora.target_modules
        if isinstance(lora.target_modules, str)
        else list(lora.target_modules),
        "lora_alpha": lora.lora_alpha,
        "lora_dropout": lora.lora_dropout,
        "use_gradient_checkpointing": recipe.unsloth.use_gradient_checkpointing,
        "random_state": recipe.unsloth.random_state,
    }


def sampling_params_kwargs(
    recipe: Recipe | None = None,
    *,
    temperature: float = 0.8,
    top_p: float = 0.95,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` (the course's 0.8 / 0.95; max_tokens defaults to the
    recipe's max_completion_length, else 1024 as in the course)."""
    if max_tokens is None:
        max_tokens = (recipe.training.get("max_completion_length") if recipe is not None else None) or 1024
    if not temperature >= 0 or not 0 < top_p <= 1 or max_tokens < 1:
        raise ValueError(
            f"temperature={temperature} must be >= 0, top_p={top_p} in (0, 1], max_tokens={max_tokens} >= 1."
        )
    return {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}


def check_settings(recipe: Recipe, training: dict[str, Any]) -> None:
    """Checks that need no GPU; run before Unsloth loads anything. Raises ValueError naming the fix.
    The batch and loss rules are the TRL path's (``grpo_kit.settings``): Unsloth would silently raise
    per_device_train_batch_size to num_generations; we ask for it explicitly instead."""
    check_training(training, world_size=world_size())
    _check_unsloth(recipe, training)


def _check_unsloth(recipe: Recipe, training: dict[str, Any], precision: Precision | None = None) -> None:
    if recipe.lora is None:
        raise ValueError(
            f"recipe {recipe.name!r} has lora=None; the Unsloth path trains a LoRA adapter "
            "(get_recipe(..., lora={'r': 16})), or use --loop trl for full fine-tuning."
        )
    if recipe.quantization not in (None, "4bit", "8bit"):
        raise ValueError(
            f"quantization={recipe.quantization!r}: use '4bit' (QLoRA), '8bit' or None (16-bit LoRA)."
        )
    max_seq = recipe.unsloth.max_seq_length
    completion = training.get("max_completion_length", 256)
    if completion >= max_seq:
        raise ValueError(
            f"max_completion_length ({completion}) leaves no room for the prompt in max_seq_length ({max_seq}); "
            f"lower max_completion_length (the course uses max_seq_length - 256 = {max_seq - 256}) or raise "
            "unsloth={'max_seq_length': ...}."
        )
    if not 0 < recipe.unsloth.gpu_memory_utilization < 1:
        raise ValueError(
            f"gpu_memory_utilization={recipe.unsloth.gpu_memory_utilization} must be in (0, 1); "
            "the course uses 0.6 (lower it on out-of-memory)."
        )
    if training.get("use_vllm") is False and recipe.unsloth.fast_inference:
        raise ValueError(
            "use_vllm=False contradicts fast_inference=True (Unsloth then generates with vLLM); "
            "set unsloth={'fast_inference': False} to generate with transformers instead."
        )


def require_cuda(*, need_vllm: bool = True) -> None:
    """Raise before ``unsloth`` is imported when there is no CUDA GPU (or Unsloth / vLLM is not installed)."""
    if not cuda_available():
        raise RuntimeError("No CUDA GPU is visible. " + CPU_FIX)
    wanted = ("unsloth", "vllm") if need_vllm else ("unsloth",)
    missing = [m for m in wanted if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(
            f'{" and ".join(missing)} not installed: `pip install torch==2.13.0 ".[unsloth]"` '
            "(without -c constraints.txt; see pyproject.toml). " + CPU_FIX
        )


# --- the GPU part ----------------------------------------------------------------------------------


def _import_unsloth(*, need_vllm: bool = True):
    """Import unsloth (it must come before trl/transformers are used, so its patches apply)."""
    require_cuda(need_vllm=need_vllm)
    import unsloth  # noqa: F401  (import-time patches of transformers/peft/TRL)
    from unsloth import FastLanguageModel

    return FastLanguageModel


def load_model(recipe: Recipe | str, *, model_name: str | None = None) -> tuple[Any, Any]:
    """``FastLanguageModel.from_pretrained`` + ``get_peft_model`` for the recipe -> (model, tokenizer)."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    FastLanguageModel = _import_unsloth(need_vllm=recipe.unsloth.fast_inference)
    model, tokenizer = FastLanguageModel.from_pretrained(
        **from_pretrained_kwargs(recipe, model_name=model_name)
    )
    import torch

    # The adapter's random init must come from the run's seed, not from whatever drew random numbers before
    # (grpo_kit.models.add_lora does the same on the other paths); forked, so other streams stay as they were.
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(int(recipe.training.get("seed", 42)))
        model = FastLanguageModel.get_peft_model(model, **get_peft_model_kwargs(recipe))
    return model, tokenizer


def backend(*, model_name: str | None = None) -> ModelBackend:
    """The Unsloth path's model handling: its own checks, then :func:`load_model` (4-bit weights + vLLM
    engine + ``get_peft_model``). LoRA is already in the model, so no ``peft_config``."""

    def precision() -> Precision:
        from grpo_kit.hardware import detect_precision

        return detect_precision("cuda")

    def check(recipe: Recipe, training: dict[str, Any], precision: Precision) -> None:
        _check_unsloth(recipe, training)

    def load(recipe: Recipe, precision: Precision, args) -> tuple[Any, Any]:
        return load_model(recipe, model_name=model_name)

    return ModelBackend(
        name="Unsloth", precision=precision, check=check, load=load, peft_config=lambda recipe, model: None
    )


def build_trainer(recipe: Recipe | str, *, model_name: str | None = None, **kwargs: Any):
    """A GRPOTrainer (patched by Unsloth) for the recipe: CUDA check, the settings checks, ``import unsloth``,
    then the model loads (unless ``model``/``tokenizer`` from :func:`load_model` are given). The other
    arguments are ``trainer_builder.build_trainer``'s."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    # unsloth first: it patches transformers/peft/TRL at import, so it must precede their use (the
    # checks import trl). Importing loads no model; the checks still run before any weights do.
    _import_unsloth(need_vllm=recipe.unsloth.fast_inference)
    return build_grpo_trainer(recipe, backend(model_name=model_name), **kwargs)


def train(
    recipe: Recipe | str,
    *,
    lora_dir: str | os.PathLike | None = None,
    plot: bool = True,
    resume_from_checkpoint: str | os.PathLike | bool | None = None,
    **kwargs: Any,
) -> RunResult:
    """Build (see :func:`build_trainer`), train, ``model.save_lora``; metrics.jsonl, the reward curve and
    Ctrl-C checkpoints as in the TRL path (``resume_from_checkpoint``: a checkpoint-N folder or True for
    the latest in output_dir). The adapter folder is ``result.adapter_dir``."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    output_dir = Path(kwargs.pop("output_dir", None) or Path("outputs") / recipe.name)
    resume, keep_up_to_step = resume_point(output_dir, resume_from_checkpoint)
    trainer = build_trainer(recipe, output_dir=output_dir, **kwargs)
    result = run_trainer(
        trainer,
        output_dir=output_dir,
        resume=resume,
        keep_up_to_step=keep_up_to_step,
        title=f"{recipe.name} (Unsloth)",
        plot=plot,
    )
    result.adapter_dir = Path(lora_dir or output_dir / "grpo_saved_lora")
    result.model.save_lora(os.fspath(result.adapter_dir))
    result.tokenizer.save_pretrained(os.fspath(result.adapter_dir))
    return result


def compare_with_and_without_adapter(
    model: Any,
    tokenizer: Any,
    lora_dir: str | os.PathLike,
    questions: Sequence[str],
    *,
    system_prompt: str | None = None,
    sampling: dict[str, Any] | None = None,
) -> list[dict[str, str]]:
    """Answer each question with the base model and with the trained adapter (vLLM ``fast_generate``).

    Returns ``[{"question", "without_adapter", "with_adapter"}, ...]``. ``system_prompt`` defaults to
    none; pass ``datasets_prep.SYSTEM_PROMPT`` for the GSM8K format.
    """
    if not hasattr(model, "fast_generate"):
        raise ValueError(
            "model has no fast_generate: load it with fast_inference=True (vLLM) through load_model()."
        )
    from vllm import SamplingParams

    def chat(question: str) -> str:
        messages = ([{"role": "system", "content": system_prompt}] if system_prompt else []) + [
            {"role": "user", "content": question}
        ]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    texts = [chat(q) for q in questions]
    params = SamplingParams(**(sampling or sampling_params_kwargs()))
    without = model.fast_generate(texts, sampling_params=params, lora_request=None)
    with_adapter = model.fast_generate(
        texts, sampling_params=params, lora_request=model.load_lora(os.fspath(lora_dir))
    )
    return [
        {"question": q, "without_adapter": a.outputs[0].text, "with_adapter": b.outputs[0].text}
        for q, a, b in zip(questions, without, with_adapter)
    ]
