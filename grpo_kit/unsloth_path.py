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
4. ``model.save_lora(dir)``; ``model.fast_generate(prompts, sampling_params=SamplingParams(...),
   lora_request=model.load_lora(dir))`` — vLLM generation with the adapter (``lora_request=None``: without).
   :func:`vllm_generate` is that call shaped as a ``generate_fn`` (``grpo_kit.generation.generate``'s
   signature), so ``grpo_kit.evaluation.evaluate(..., generate_fn=vllm_generate(adapter_dir))`` decodes with
   vLLM; :func:`compare_with_and_without_adapter` is two of its calls.

Everything up to the GPU boundary is pure and tested on CPU: :func:`from_pretrained_kwargs`,
:func:`get_peft_model_kwargs`, ``grpo_config_kwargs`` (``grpo_kit.trainer_builder``),
:func:`sampling_params_kwargs` (a ``Decoding`` as ``vllm.SamplingParams`` arguments) and
:func:`check_settings`; :func:`vllm_generate` is tested on CPU against a stand-in for the vLLM engine
(``vllm`` is imported only when it generates). Without CUDA, :func:`require_cuda` raises *before*
``unsloth`` is imported (importing it on a CPU machine fails deep inside Unsloth), pointing to ``--loop trl``.

Install (GPU, Linux): ``pip install torch==2.13.0 ".[unsloth]"`` — without ``-c constraints.txt``,
whose numpy pin is for the CPU environment (see the comment on the ``unsloth`` extra in pyproject.toml).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grpo_kit.generation import Decoding, GeneratedCompletion
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
    "COURSE_SAMPLING",
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
    "vllm_generate",
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


#: The course's vLLM sampling for the adapter comparison (LLM course 12.6:
#: ``SamplingParams(temperature=0.8, top_p=0.95, max_tokens=1024)``).
COURSE_SAMPLING = Decoding(max_new_tokens=1024, temperature=0.8, top_p=0.95)


def sampling_params_kwargs(
    decoding: Decoding = COURSE_SAMPLING,
    *,
    num_generations: int = 1,
    stop_token_ids: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` that decode as ``decoding`` says (``num_generations``
    completions per prompt), the way ``grpo_kit.generation.generate`` reads it: greedy is vLLM's temperature 0
    (one completion: greedy copies are identical, and older vLLM refuses n > 1 there) and keeps the repetition
    penalty; a sampling filter that is off (top_k 0, min_p None) is left to vLLM's default, which is off too.
    ``stop_token_ids``: the ids that end a completion besides the tokenizer's EOS."""
    d = decoding
    if not d.temperature >= 0 or not 0 < d.top_p <= 1 or d.max_new_tokens < 1 or num_generations < 1:
        raise ValueError(
            f"temperature={d.temperature} must be >= 0, top_p={d.top_p} in (0, 1], "
            f"max_new_tokens={d.max_new_tokens} >= 1 and num_generations={num_generations} >= 1."
        )
    kwargs: dict[str, Any] = {"n": 1 if d.greedy else num_generations, "max_tokens": d.max_new_tokens}
    if d.greedy:
        kwargs.update(temperature=0.0, top_p=1.0)
    else:
        kwargs.update(temperature=d.temperature, top_p=d.top_p, seed=d.seed)
        if d.top_k:
            kwargs["top_k"] = d.top_k
        if d.min_p is not None:
            kwargs["min_p"] = d.min_p
    kwargs["repetition_penalty"] = d.repetition_penalty
    if stop_token_ids:
        kwargs["stop_token_ids"] = list(stop_token_ids)
    return kwargs


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


def _require_vllm_engine(model: Any) -> None:
    if not (hasattr(model, "fast_generate") and hasattr(model, "vllm_engine")):
        raise ValueError(
            "model has no vLLM engine (fast_generate): load it with fast_inference=True through load_model()."
        )


def vllm_generate(
    lora_dir: str | os.PathLike | None = None,
) -> Callable[[Any, Any, Sequence[Any], int, Decoding], list[list[GeneratedCompletion]]]:
    """Generation with the model's vLLM engine, as a ``generate_fn``: the signature of
    ``grpo_kit.generation.generate`` ``(model, tokenizer, prompts, num_generations, decoding)``, so
    ``grpo_kit.evaluation.evaluate(..., generate_fn=vllm_generate(adapter_dir))`` evaluates with vLLM.

    Each call is one ``model.fast_generate(prompts, sampling_params=SamplingParams(**sampling_params_kwargs(
    decoding, ...)), lora_request=...)`` (Unsloth's ``fast_generate`` is vLLM's ``LLM.generate``), with the
    adapter saved in ``lora_dir`` (``model.load_lora``) or, with ``lora_dir=None``, the base weights: vLLM
    holds the base model, and an adapter reaches it only through a ``lora_request``. Prompts are rendered as
    the trainers render them (``generation.prompt_texts``) and passed as token ids, tokenized as
    ``generation.generate`` tokenizes them (a chat template brings its own BOS; vLLM would add a second one
    to a text prompt); completions end at the same stop ids (``sampling.stop_token_ids``). Each completion
    keeps vLLM's token ids, ``ended`` when vLLM stopped on one of them (``finish_reason == "stop"``).
    ``decoding.seed`` seeds the sampled completions; ``batch_size`` does not apply (vLLM batches itself).
    """

    def generate_fn(
        model: Any, tokenizer: Any, prompts: Sequence[Any], num_generations: int, decoding: Decoding
    ) -> list[list[GeneratedCompletion]]:
        _require_vllm_engine(model)
        if not prompts:
            return []
        from vllm import SamplingParams

        from datasets_prep.chat import is_conversational_prompt
        from grpo_kit.generation import prompt_texts
        from grpo_kit.sampling import stop_token_ids

        texts = prompt_texts(tokenizer, prompts, decoding.chat_template_kwargs)
        inputs = []  # vLLM's TokensPrompt: the ids generation.generate would feed the model
        for prompt, text in zip(prompts, texts):
            ids = tokenizer(text, add_special_tokens=not is_conversational_prompt(prompt))["input_ids"]
            inputs.append({"prompt_token_ids": ids})
        params = SamplingParams(
            **sampling_params_kwargs(
                decoding, num_generations=num_generations, stop_token_ids=stop_token_ids(model, tokenizer)
            )
        )
        lora_request = model.load_lora(os.fspath(lora_dir)) if lora_dir is not None else None
        outputs = model.fast_generate(inputs, sampling_params=params, lora_request=lora_request)
        groups = []
        for output in outputs:  # one RequestOutput per prompt, in the prompts' order
            group = [
                GeneratedCompletion(
                    c.text, len(c.token_ids), c.finish_reason == "stop", [int(i) for i in c.token_ids]
                )
                for c in output.outputs
            ]
            if decoding.greedy:  # one greedy completion stands for all of them
                group = [group[0]] * num_generations
            groups.append(group)
        return groups

    return generate_fn


def compare_with_and_without_adapter(
    model: Any,
    tokenizer: Any,
    lora_dir: str | os.PathLike,
    questions: Sequence[str],
    *,
    system_prompt: str | None = None,
    decoding: Decoding = COURSE_SAMPLING,
) -> list[dict[str, str]]:
    """Answer each question with the base model and with the trained adapter (:func:`vllm_generate`, without
    and with ``lora_dir``), decoded as ``decoding`` says (default: the course's sampling, T = 0.8, top-p 0.95,
    1024 tokens; ``Decoding(..., greedy=True)`` for greedy).

    Returns ``[{"question", "without_adapter", "with_adapter"}, ...]``. ``system_prompt`` defaults to
    none; pass ``datasets_prep.SYSTEM_PROMPT`` for the GSM8K format.
    """
    _require_vllm_engine(model)
    prompts = [
        ([{"role": "system", "content": system_prompt}] if system_prompt else [])
        + [{"role": "user", "content": q}]
        for q in questions
    ]
    without = vllm_generate()(model, tokenizer, prompts, 1, decoding)
    with_adapter = vllm_generate(lora_dir)(model, tokenizer, prompts, 1, decoding)
    return [
        {"question": q, "without_adapter": a[0].text, "with_adapter": b[0].text}
        for q, a, b in zip(questions, without, with_adapter)
    ]
