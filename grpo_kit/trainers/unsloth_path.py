"""Recipe -> Unsloth ``FastLanguageModel`` (4-bit QLoRA [+ vLLM on a GPU]) -> TRL ``GRPOTrainer``: the course's
fast path (LLM course 12.6), on one CUDA GPU or, through Unsloth's own CPU backend, on a CPU.

    from grpo_kit.trainers import unsloth_path
    result = unsloth_path.train_with_unsloth("gsm8k-unsloth", output_dir="runs/gsm8k")          # a GPU
    result = unsloth_path.train_with_unsloth("gsm8k-unsloth-cpu", output_dir="runs/gsm8k-cpu")  # a CPU
    unsloth_path.compare_with_and_without_adapter(result.model, result.tokenizer, result.adapter_dir,
                                                  ["Calculate pi."])               # vLLM: a GPU

The steps, with the real Unsloth API (unsloth 2026.10.9):

1. ``FastLanguageModel.from_pretrained(model_name, max_seq_length, load_in_4bit=True,
   fast_inference=True, max_lora_rank, gpu_memory_utilization)`` — 4-bit weights, and a vLLM engine
   inside the process for generation (``fast_inference``; ``max_lora_rank`` and ``gpu_memory_utilization``
   size that engine, so they are passed only with it).
2. ``FastLanguageModel.get_peft_model(model, r, target_modules, lora_alpha,
   use_gradient_checkpointing="unsloth", random_state)``.
3. TRL's ``GRPOConfig`` + ``GRPOTrainer``. Importing ``unsloth`` patches TRL's trainers (in this version
   ``PatchFastRL`` runs at import; older tutorials call it by hand); the patched trainer switches
   ``use_vllm`` on by itself when the model carries a vLLM engine.
4. ``model.save_lora(dir)``; ``model.fast_generate(prompts, sampling_params=SamplingParams(...),
   lora_request=model.load_lora(dir))`` — vLLM generation with the adapter (``lora_request=None``: without).
   :func:`vllm_generate` is that call shaped as a ``generate_fn`` (``grpo_kit.rollout.generation.generate``'s
   signature), so ``grpo_kit.evaluation.evaluate(..., generate_fn=vllm_generate(adapter_dir))`` decodes with
   vLLM; :func:`compare_with_and_without_adapter` is two of its calls.

**On a CPU** (measured with unsloth 2026.10.9 on a 2-core x86 machine): when torch sees no accelerator,
``import unsloth`` loads its CPU backend (``unsloth/_cpu_init.py``, banner "no GPU found, training on CPU") and
``FastLanguageModel`` is ``unsloth_zoo.cpu.FastCPUModel``: stock transformers + PEFT, with bitsandbytes' CPU
NF4 kernels for ``load_in_4bit=True``. Steps 1-3 run there as written with ``fast_inference=False``; GRPO goes
through TRL's trainer (generation by transformers). What needs a GPU is checked once, by
:func:`check_machine`, before ``unsloth`` is imported: ``fast_inference`` (vLLM inside Unsloth, hence
``fast_generate``, ``load_lora``, :func:`vllm_generate`) and 8-bit loading. A recipe asking for either on a
CPU is **refused** with one line naming the setting (``--set unsloth.fast_inference=false``; quantization
``4bit`` or None), never turned off quietly: Unsloth's CPU backend itself would load 16-bit weights for
``load_in_8bit`` with a printed note only. Step 4's ``save_lora`` does not exist there; the adapter is saved
with PEFT's ``save_pretrained`` (the same files). A 4-bit load that comes back without ``Linear4bit`` layers
(Unsloth falls back to 16-bit where bitsandbytes' CPU 4-bit does not run) is refused too. In a run
(``grpo_kit.runs.execute``) the merged export is the 16-bit base plus the adapter, built by
``grpo_kit.export`` (the CPU backend refuses to merge into 4-bit weights, and so should anyone).

Everything up to the import of ``unsloth`` is pure and tested without it: :func:`from_pretrained_kwargs`,
:func:`get_peft_model_kwargs`, ``grpo_config_kwargs`` (``grpo_kit.trainers.builder``),
:func:`sampling_params_kwargs` (a ``Decoding`` as ``vllm.SamplingParams`` arguments), :func:`check_settings`
and :func:`check_machine`; :func:`vllm_generate` is tested on CPU against a stand-in for the vLLM engine
(``vllm`` is imported only when it generates).

Install: a GPU (Linux): ``pip install torch==2.13.0 ".[unsloth]"`` — without ``-c constraints.txt``, whose
numpy pin is for the CPU environment (see the comment on the ``unsloth`` extra in pyproject.toml). A CPU:
``make unsloth-cpu`` (the ``unsloth-cpu`` extra, no vllm, then PyPI's CUDA-built torchvision, triton,
xformers and torchao removed: ``import unsloth`` stops on ``torchvision::nms`` otherwise).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grpo_kit.artifacts.result import RunResult
from grpo_kit.config.rules import training_value
from grpo_kit.recipes.catalogue import Recipe, get_recipe
from grpo_kit.rollout.generation import Decoding, GeneratedCompletion
from grpo_kit.support.hardware import Precision, cuda_available
from grpo_kit.trainers.builder import (
    ModelBackend,
    assemble_grpo_trainer,
    build_and_train,
    check_config,
    grpo_config,
    grpo_config_kwargs,
    world_size,
)

__all__ = [
    "COURSE_SAMPLING",
    "backend",
    "build_config",
    "build_unsloth_trainer",
    "check_machine",
    "check_settings",
    "compare_with_and_without_adapter",
    "from_pretrained_kwargs",
    "get_peft_model_kwargs",
    "grpo_config_kwargs",
    "load_facts",
    "load_unsloth_model",
    "sampling_params_kwargs",
    "train_with_unsloth",
    "vllm_generate",
]

#: What only a CUDA GPU runs on this path; everything else runs on Unsloth's CPU backend too.
GPU_ONLY = "fast_inference (vLLM inside Unsloth: fast_generate, load_lora, vllm_generate) and 8-bit loading"

INSTALL = {
    "cuda": 'pip install torch==2.13.0 ".[unsloth]"  (without -c constraints.txt; see pyproject.toml)',
    "cpu": "make unsloth-cpu  (the unsloth-cpu extra, then PyPI's CUDA-built torchvision, triton, xformers, torchao removed)",
}


# --- the pure mapping (tested on CPU) ------------------------------------------------------------


def from_pretrained_kwargs(recipe: Recipe, *, model_name: str | None = None) -> dict[str, Any]:
    """Keyword arguments for ``FastLanguageModel.from_pretrained`` (``model_name``: the folder or Hub id to load,
    default the recipe's model as written)."""
    if recipe.lora is None:
        raise ValueError(
            f"recipe {recipe.name!r} has lora=None; the Unsloth path trains a LoRA adapter. "
            "Give it lora={'r': 16} or use --loop trl for full fine-tuning."
        )
    kwargs = {
        "model_name": model_name or recipe.model,
        "max_seq_length": recipe.unsloth.max_seq_length,
        "load_in_4bit": recipe.quantization == "4bit",
        "load_in_8bit": recipe.quantization == "8bit",
        "fast_inference": recipe.unsloth.fast_inference,
    }
    if recipe.unsloth.fast_inference:  # they size the vLLM engine; without one Unsloth drops them
        kwargs["max_lora_rank"] = recipe.lora.r  # vLLM reserves LoRA slots of this rank
        kwargs["gpu_memory_utilization"] = recipe.unsloth.gpu_memory_utilization
    return kwargs


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
    """``grpo_kit.rollout.vllm_generation.sampling_params_kwargs`` (a ``Decoding`` as ``vllm.SamplingParams`` arguments),
    with the course's sampling as the default decoding."""
    from grpo_kit.rollout import vllm_generation

    return vllm_generation.sampling_params_kwargs(
        decoding, num_generations=num_generations, stop_token_ids=stop_token_ids
    )


#: The optimizers Unsloth's CPU backend runs as asked (it runs adamw_torch as adamw_torch_fused, run.json says).
CPU_BACKEND_OPTIMIZERS = ("adamw_torch", "adamw_torch_fused")


def check_settings(
    recipe: Recipe,
    training: dict[str, Any],
    precision: Precision | None = None,
    *,
    dataset: Any = None,
    load_dataset: Callable[[], Any] | None = None,
) -> Any:
    """Checks that need no GPU; run before Unsloth loads anything. Raises ValueError naming the fix.
    The batch and loss rules are the TRL path's (``grpo_kit.config.rules``): Unsloth would silently raise
    per_device_train_batch_size to num_generations; we ask for it explicitly instead. With ``precision``
    (the machine's), also the hardware rules of ``settings.check_precision`` (an 8-bit optimizer or bf16 on a
    CPU: Unsloth's CPU backend would swap the optimizer for AdamW without a word). The one check pass
    (``trainer_builder.check_config``): the tools and environments too, played on ``dataset`` (or the rows
    ``load_dataset`` / ``recipe.load_dataset`` gives, for a recipe with an environment), which is returned."""
    _, dataset = check_config(
        recipe,
        training,
        None,
        None,
        world_size=world_size(),
        dataset=dataset,
        load_dataset=load_dataset,
    )
    _check_unsloth(recipe, training, precision)
    return dataset


def _check_unsloth(recipe: Recipe, training: dict[str, Any], precision: Precision | None = None) -> None:
    if recipe.lora is None:
        raise ValueError(
            f"recipe {recipe.name!r} has lora=None; the Unsloth path trains a LoRA adapter "
            "(get_recipe(..., lora={'r': 16})), or use --loop trl for full fine-tuning."
        )
    # quantization is None | "4bit" | "8bit" by the Recipe's own rule (checked on creation, recipe_schema.py).
    max_seq = recipe.unsloth.max_seq_length
    completion = training_value(training, "max_completion_length")
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
    optim = training.get("optim")
    if precision is not None and precision.device == "cpu" and optim not in (None, *CPU_BACKEND_OPTIMIZERS):
        # bitsandbytes' 8-bit optimizers run on CPU (--loop trl), but Unsloth's CPU backend would swap them.
        raise RuntimeError(
            f"recipe {recipe.name!r} has optim={optim!r}; Unsloth's CPU backend trains with AdamW "
            "(adamw_torch_fused) whatever optim says: set --set optim=adamw_torch, or use --loop trl, where "
            "bitsandbytes' 8-bit optimizers run on CPU."
        )
    if precision is not None:
        from grpo_kit.config.rules import check_precision

        # quantization is this path's own affair (check_machine): Unsloth loads it, not a BitsAndBytesConfig.
        check_precision(training, precision, quantization=None, recipe_name=recipe.name)


def check_machine(recipe: Recipe) -> str:
    """The one check of what this machine can run on the Unsloth path, before ``unsloth`` is imported (importing
    it picks Unsloth's backend for good). Returns ``"cuda"`` or ``"cpu"``: the backend Unsloth will use.

    Needs a CUDA GPU (:data:`GPU_ONLY`): ``fast_inference`` (Unsloth's CPU backend raises on it) and 8-bit
    loading (the CPU backend would load 16-bit weights instead). On a CPU a recipe asking for either is
    refused here, naming the setting to change; nothing is switched off behind the user's back. Then the
    packages: unsloth and unsloth_zoo, and vllm with ``fast_inference``; a missing one is named with the
    install command for this machine."""
    device = "cuda" if cuda_available() else "cpu"
    if device == "cpu" and recipe.unsloth.fast_inference:
        raise RuntimeError(
            f"recipe {recipe.name!r} has unsloth.fast_inference=True (vLLM inside Unsloth), which needs a CUDA "
            "GPU, and torch sees none. Unsloth's CPU backend trains with transformers generation: set "
            "--set unsloth.fast_inference=false, or use --recipe gsm8k-unsloth-cpu."
        )
    if device == "cpu" and recipe.quantization == "8bit":
        raise RuntimeError(
            f"recipe {recipe.name!r} loads 8-bit weights, which Unsloth does only on a CUDA GPU (its CPU backend "
            "would load 16-bit weights instead); on CPU set --set quantization=4bit (QLoRA, bitsandbytes' CPU "
            "NF4) or quantization=none."
        )
    wanted = ("unsloth", "unsloth_zoo", *(("vllm",) if recipe.unsloth.fast_inference else ()))
    missing = [m for m in wanted if importlib.util.find_spec(m) is None]
    if missing:
        raise ImportError(
            f"the Unsloth path needs {' and '.join(missing)}, not installed here: {INSTALL[device]}. "
            "Or train with --loop trl."
        )
    return device


# --- the part that imports Unsloth ------------------------------------------------------------------


def _import_unsloth(recipe: Recipe):
    """:func:`check_machine`, then import unsloth (it must come before trl/transformers are used, so its patches
    apply; on a CPU it loads its CPU backend)."""
    check_machine(recipe)
    import unsloth  # noqa: F401  (import-time patches of transformers/peft/TRL; the backend is chosen here)
    from unsloth import FastLanguageModel

    return FastLanguageModel


def _count_linear_layers(model: Any) -> tuple[int, int]:
    """(bitsandbytes ``Linear4bit`` layers, all ``Linear``-like layers holding a weight) in ``model``; a LoRA
    wrapper counts as its base layer, its A/B matrices not at all."""
    import torch

    four_bit = total = 0
    for name, module in model.named_modules():
        if ".lora_" in name or name.endswith(("lora_A", "lora_B")):
            continue
        kind = type(module).__name__
        if kind == "Linear4bit" and not hasattr(module, "base_layer"):
            four_bit += 1
            total += 1
        elif isinstance(module, torch.nn.Linear) and not hasattr(module, "base_layer"):
            total += 1
    return four_bit, total


def load_facts(model: Any) -> dict[str, Any]:
    """What Unsloth loaded, for ``run.json``: its version and backend (``"cpu"``: ``unsloth_zoo.cpu.FastCPUModel``,
    else its GPU loader), the ``FastLanguageModel`` class, the weights' dtype, and how many linear layers are
    bitsandbytes ``Linear4bit`` (the 4-bit load, measured on the model rather than read from the recipe)."""
    import unsloth
    from unsloth import FastLanguageModel

    four_bit, total = _count_linear_layers(model)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    # On a CPU, FastLanguageModel is an empty subclass of the class that does the work (FastCPUModel).
    loader = FastLanguageModel.__mro__[1] if unsloth.DEVICE_TYPE == "cpu" else FastLanguageModel
    return {
        "version": unsloth.__version__,
        "backend": unsloth.DEVICE_TYPE,
        "fast_language_model": f"{loader.__module__}.{loader.__name__}",
        "dtype": str(getattr(base, "dtype", "")).removeprefix("torch."),
        "load_in_4bit": four_bit > 0,
        "linear4bit_layers": four_bit,
        "linear_layers": total,
        "fast_inference": hasattr(model, "vllm_engine"),
    }


def load_unsloth_model(recipe: Recipe | str, *, model_name: str | None = None) -> tuple[Any, Any]:
    """``FastLanguageModel.from_pretrained`` + ``get_peft_model`` for the recipe -> (model, tokenizer).

    ``model_name`` defaults to the recipe's model resolved as every path resolves it
    (``grpo_kit.models.resolve_model``: the embedded SmolLM2 alias is its converted folder). The tokenizer is
    prepared as on the other paths (left padding, a pad token, a chat template). A 4-bit recipe whose model
    came back without ``Linear4bit`` layers is refused (Unsloth loads 16-bit where bitsandbytes cannot)."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    FastLanguageModel = _import_unsloth(recipe)
    if model_name is None:
        from grpo_kit.models import resolve_model

        model_name = resolve_model(recipe.model)[0]
    model, tokenizer = FastLanguageModel.from_pretrained(
        **from_pretrained_kwargs(recipe, model_name=model_name)
    )
    if recipe.quantization == "4bit" and _count_linear_layers(model)[0] == 0:
        raise RuntimeError(
            f"Unsloth loaded {model_name} in 16 bits although 4-bit was asked (bitsandbytes' 4-bit does not run "
            "on this machine or for this model); set --set quantization=none to train a 16-bit LoRA."
        )
    import torch

    from grpo_kit.models import prepare_tokenizer

    tokenizer = prepare_tokenizer(tokenizer)
    # The adapter's random init must come from the run's seed, not from whatever drew random numbers before
    # (grpo_kit.models.add_lora does the same on the other paths); forked, so other streams stay as they were.
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(int(training_value(recipe.training, "seed")))
        model = FastLanguageModel.get_peft_model(model, **get_peft_model_kwargs(recipe))
    return model, tokenizer


def backend(*, model_name: str | None = None) -> ModelBackend:
    """The Unsloth path's model handling: its own checks, then :func:`load_unsloth_model` (4-bit weights
    [+ vLLM engine] + ``get_peft_model``). LoRA is already in the model, so no ``peft_config``. The precision is the
    machine's (``hardware.detect_precision``: a GPU's rule, fp32 flags on a CPU, where Unsloth's CPU backend
    picks the weights' dtype itself and ``load_facts`` records it)."""

    def precision() -> Precision:
        from grpo_kit.support.hardware import detect_precision

        return detect_precision()

    def check(recipe: Recipe, training: dict[str, Any], precision: Precision) -> None:
        _check_unsloth(recipe, training, precision)

    def load(recipe: Recipe, precision: Precision, args) -> tuple[Any, Any]:
        return load_unsloth_model(recipe, model_name=model_name)

    return ModelBackend(
        name="Unsloth", precision=precision, check=check, load=load, peft_config=lambda recipe, model: None
    )


def build_unsloth_trainer(recipe: Recipe | str, *, model_name: str | None = None, **kwargs: Any):
    """A GRPOTrainer (patched by Unsloth) for the recipe: :func:`check_machine`, ``import unsloth``, the
    settings checks, then the model loads (unless ``model``/``tokenizer`` from :func:`load_unsloth_model` are
    given). The other arguments are ``builder.assemble_grpo_trainer``'s."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    # unsloth first: it patches transformers/peft/TRL at import, so it must precede their use (the
    # checks import trl). Importing loads no model; the checks still run before any weights do.
    _import_unsloth(recipe)
    return assemble_grpo_trainer(recipe, backend(model_name=model_name), **kwargs)


def build_config(
    recipe: Recipe | str,
    *,
    output_dir: str | os.PathLike,
    precision: Precision | None = None,
    dataset: Any = None,
    load_dataset: Callable[[], Any] | None = None,
    **overrides: Any,
) -> tuple[Any, Any]:
    """The run's GRPOConfig for this path, built once before any model loads (``grpo_kit.runs.plan_run``):
    :func:`check_machine`, ``import unsloth`` (its patched ``GRPOConfig`` is the class built), the settings
    (``grpo_config_kwargs`` at the machine's precision), :func:`check_settings`, then the config. Returns (the
    config, the dataset the environments were played on, or None); pass both to :func:`train_with_unsloth`."""
    from grpo_kit.support.hardware import detect_precision

    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    _import_unsloth(recipe)  # first: it patches TRL's GRPOConfig/GRPOTrainer at import
    precision = precision or detect_precision()
    training = grpo_config_kwargs(recipe, output_dir=output_dir, precision=precision, **overrides)
    dataset = check_settings(recipe, training, precision, dataset=dataset, load_dataset=load_dataset)
    return grpo_config(training), dataset


def train_with_unsloth(
    recipe: Recipe | str,
    *,
    lora_dir: str | os.PathLike | None = None,
    plot: bool = True,
    resume_from_checkpoint: str | os.PathLike | bool | None = None,
    save_final: bool = True,
    args: Any = None,
    **kwargs: Any,
) -> RunResult:
    """Build (see :func:`build_unsloth_trainer`; ``model``/``tokenizer``/``train_dataset``/``reward_funcs``
    may be given), train, save the adapter; metrics.jsonl, the reward curve and Ctrl-C checkpoints as in the TRL path
    (``resume_from_checkpoint``: a checkpoint-N folder or True for the latest in output_dir). ``args``: a
    GRPOConfig from :func:`build_config` (``plan.path_config``), which trains as it is, in its ``output_dir``.
    The adapter folder is ``result.adapter_dir``: ``model.save_lora`` on a GPU, PEFT's ``save_pretrained`` where
    the model has no ``save_lora`` (Unsloth's CPU backend); ``save_final=False``: not saved
    (``grpo_kit.runs.execute`` exports it itself, verified)."""
    result = build_and_train(
        recipe,
        build_unsloth_trainer,
        path="Unsloth",
        args=args,
        resume_from_checkpoint=resume_from_checkpoint,
        plot=plot,
        **kwargs,
    )
    if not save_final or result.interrupted:
        return result
    result.adapter_dir = Path(lora_dir or result.output_dir / "grpo_saved_lora")
    save = getattr(result.model, "save_lora", None) or result.model.save_pretrained
    save(os.fspath(result.adapter_dir))
    result.tokenizer.save_pretrained(os.fspath(result.adapter_dir))
    return result


def _require_vllm_engine(model: Any) -> None:
    if not (hasattr(model, "fast_generate") and hasattr(model, "vllm_engine")):
        raise ValueError(
            "model has no vLLM engine (fast_generate): load it with fast_inference=True through "
            "load_unsloth_model()."
        )


def vllm_generate(
    lora_dir: str | os.PathLike | None = None,
) -> Callable[[Any, Any, Sequence[Any], int, Decoding], list[list[GeneratedCompletion]]]:
    """Generation with the model's vLLM engine, as a ``generate_fn``: the signature of
    ``grpo_kit.rollout.generation.generate`` ``(model, tokenizer, prompts, num_generations, decoding)``, so
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
    The request and the outputs are ``grpo_kit.rollout.vllm_generation.completions``'s, shared with a vLLM engine of
    our own (``vllm_generation.engine_generate``, the vLLM lane on a CPU).
    """

    def generate_fn(
        model: Any, tokenizer: Any, prompts: Sequence[Any], num_generations: int, decoding: Decoding
    ) -> list[list[GeneratedCompletion]]:
        _require_vllm_engine(model)
        if not prompts:
            return []
        from grpo_kit.core.sampling import stop_token_ids
        from grpo_kit.rollout.vllm_generation import completions

        lora_request = model.load_lora(os.fspath(lora_dir)) if lora_dir is not None else None
        return completions(
            model.fast_generate,
            tokenizer,
            prompts,
            num_generations,
            decoding,
            stop_token_ids(model, tokenizer),
            lora_request,
        )

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
