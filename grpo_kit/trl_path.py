"""Recipe -> TRL ``GRPOConfig`` + ``GRPOTrainer``: TRL does the training.

    from grpo_kit import trl_path
    result = trl_path.train("smoltldr-length-small", output_dir="runs/tldr")   # CPU, offline
    result.metrics_path, result.reward_curve_path

What this module adds around TRL:

* **Early checks.** Everything TRL would reject late (after minutes of model loading, or at the first
  loss computation) is checked first, by :func:`check_settings`, with a message that names the fix:
  unknown or retired ``GRPOConfig`` fields (``max_prompt_length``, ``warmup_ratio``), the rule that the
  generation batch (``per_device_train_batch_size × world size × gradient_accumulation_steps``) holds whole
  groups of ``num_generations``, loss-type settings (luspo/cispo/vespo, shared with the standalone loop
  through ``grpo_kit.losses``), QLoRA / 8-bit optimizers / vLLM without CUDA, reporting backends that
  are not installed. Then ``GRPOConfig`` itself is built (its own ``__post_init__`` checks run) — all
  before the model loader is called.
* **Precision** from :mod:`grpo_kit.hardware`: bf16 only on compute capability >= 8, fp16 on older GPUs,
  fp32 on CPU (TRL's config would otherwise default to ``bf16=True``).
* **LoRA** through ``peft_config``; **QLoRA** through a ``BitsAndBytesConfig`` (CUDA only).
* **vLLM** ``colocate`` / ``server`` passed through (``use_vllm``, ``vllm_mode``, ``vllm_server_host``,
  ``vllm_server_port``, ``vllm_gpu_memory_utilization``).
* **Outputs**: ``metrics.jsonl`` (TRL's ``log_history`` records, TRL's names), ``reward_curve.png``,
  the adapter/model and tokenizer in ``output_dir``.
* **Ctrl-C**: the first SIGINT finishes the current step and saves a regular TRL checkpoint
  (``checkpoint-N`` with optimizer, scheduler and RNG state) that ``resume_from_checkpoint`` continues;
  a second SIGINT aborts at once.

Runs unchanged under ``torchrun`` / ``accelerate launch`` (see docs/distributed.md).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_kit.hardware import Precision, detect_precision
from grpo_kit.recipes import Recipe, check_training_fields, get_recipe

__all__ = [
    "TRLRunResult",
    "build_grpo_config",
    "build_trainer",
    "check_settings",
    "resolve_training",
    "train",
]

VLLM_MODES = ("colocate", "server")
REPORT_BACKENDS = {"none": None, "trackio": "trackio", "wandb": "wandb", "tensorboard": "tensorboard"}


@dataclass
class TRLRunResult:
    """What :func:`train` leaves behind."""

    output_dir: Path
    metrics_path: Path
    reward_curve_path: Path | None
    log_history: list[dict[str, Any]]
    global_step: int
    interrupted: bool  # True when Ctrl-C stopped the run (a checkpoint was saved)
    checkpoint: Path | None  # the last checkpoint-N folder, if any
    trainer: Any  # the GRPOTrainer


# --- settings ----------------------------------------------------------------------------------------


def _world_size() -> int:
    """The number of training processes (torchrun / accelerate set WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def resolve_training(
    recipe: Recipe,
    *,
    output_dir: str | os.PathLike,
    max_steps: int | None = None,
    report_to: str | Sequence[str] = "none",
    vllm_mode: str | None = None,
    vllm_server_host: str | None = None,
    vllm_server_port: int | None = None,
    vllm_gpu_memory_utilization: float | None = None,
    precision: Precision | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The GRPOConfig keyword arguments for this run: recipe.training, then precision, then the
    arguments and ``overrides`` (GRPOConfig names), which win."""
    precision = precision or detect_precision()
    training: dict[str, Any] = dict(recipe.grpo_training())
    training.update(precision.trainer_kwargs())
    training["output_dir"] = os.fspath(output_dir)
    training["report_to"] = report_to
    if max_steps is not None:
        training["max_steps"] = max_steps
    if vllm_mode is not None:
        training["use_vllm"] = True
        training["vllm_mode"] = vllm_mode
    for key, value in (
        ("vllm_server_host", vllm_server_host),
        ("vllm_server_port", vllm_server_port),
        ("vllm_gpu_memory_utilization", vllm_gpu_memory_utilization),
    ):
        if value is not None:
            training[key] = value
    overrides = dict(overrides or {})
    # Asking for one 16-bit mode switches the other off (GRPOConfig refuses both at once).
    for wanted, other in (("fp16", "bf16"), ("bf16", "fp16")):
        if overrides.get(wanted) and other not in overrides:
            training[other] = False
    training.update(overrides)
    return training


def _default(name: str) -> Any:
    from trl import GRPOConfig

    for f in dataclasses.fields(GRPOConfig):
        if f.name == name:
            return f.default
    raise KeyError(name)


def _get(training: Mapping[str, Any], name: str) -> Any:
    return training[name] if name in training else _default(name)


def _check_batch(training: Mapping[str, Any], world_size: int) -> None:
    """TRL's generation-batch rule, checked before anything loads (TRL checks it in GRPOConfig and
    again, for the per-process split, inside the trainer)."""
    num_generations = _get(training, "num_generations")
    per_device = _get(training, "per_device_train_batch_size")
    grad_accum = _get(training, "gradient_accumulation_steps")
    generation_batch_size = _get(training, "generation_batch_size")
    steps_per_generation = _get(training, "steps_per_generation")
    if num_generations is None or num_generations < 2:
        raise ValueError(
            f"num_generations={num_generations}: GRPO compares each completion with the others of its group, so "
            "it needs at least 2 completions per prompt; set num_generations>=2 (8 is TRL's default)."
        )
    if generation_batch_size is not None and steps_per_generation is not None:
        raise ValueError("set either generation_batch_size or steps_per_generation, not both "
                         "(one is derived from the other).")
    global_batch = per_device * world_size
    if generation_batch_size is not None:
        if generation_batch_size % global_batch:
            raise ValueError(
                f"generation_batch_size ({generation_batch_size}) must be a multiple of per_device_train_batch_size "
                f"({per_device}) × world size ({world_size}) = {global_batch}; set generation_batch_size="
                f"{max(1, round(generation_batch_size / global_batch)) * global_batch}."
            )
        formula = f"generation_batch_size = {generation_batch_size}"
    else:
        steps = steps_per_generation or grad_accum
        name = "steps_per_generation" if steps_per_generation else "gradient_accumulation_steps"
        generation_batch_size = global_batch * steps
        formula = (f"per_device_train_batch_size ({per_device}) × world size ({world_size}) × {name} ({steps}) "
                   f"= {generation_batch_size}")
    if generation_batch_size % num_generations:
        per_device_fix = num_generations // _gcd(num_generations, world_size * (steps_per_generation or grad_accum))
        divisors = [g for g in range(2, generation_batch_size + 1) if generation_batch_size % g == 0]
        raise ValueError(
            f"The generation batch must hold whole groups of num_generations completions, but {formula} is not "
            f"divisible by num_generations ({num_generations}). Fix: set per_device_train_batch_size to a multiple "
            f"of {per_device_fix}, or raise gradient_accumulation_steps"
            + (f", or set num_generations to one of {divisors}." if divisors else ".")
        )
    if _get(training, "eval_strategy") not in ("no", None) and _get(training, "do_eval"):
        eval_generations = _get(training, "num_generations_eval") or num_generations
        eval_batch = _get(training, "per_device_eval_batch_size") * world_size
        if eval_batch % eval_generations:
            raise ValueError(
                f"per_device_eval_batch_size × world size = {eval_batch} is not divisible by the evaluation group "
                f"size ({eval_generations}); set per_device_eval_batch_size to a multiple of {eval_generations}."
            )


def _gcd(a: int, b: int) -> int:
    import math

    return math.gcd(a, b)


def _check_loss_settings(training: Mapping[str, Any]) -> None:
    """Loss-type rules shared with the standalone loop (``grpo_kit.losses.validate_loss_settings``: luspo needs
    sequence level, vespo token level, cispo an explicit epsilon_high, ...), plus the TRL-only rule on
    vLLM importance-sampling correction. TRL notices an unknown loss_type only at the first loss computation
    and the vespo/vLLM rule only after loading the model."""
    from grpo_kit.losses import validate_loss_settings

    validate_loss_settings(**{name: _get(training, name) for name in (
        "loss_type", "importance_sampling_level", "beta", "epsilon", "epsilon_high", "delta",
        "max_completion_length", "num_generations", "scale_rewards", "multi_objective_aggregation",
    )})
    if (_get(training, "loss_type") == "vespo" and _get(training, "use_vllm")
            and _get(training, "vllm_importance_sampling_correction")
            and _get(training, "vllm_importance_sampling_mode") not in ("token_truncate", "token_mask")):
        raise ValueError(
            "loss_type='vespo' with vLLM importance-sampling correction needs vllm_importance_sampling_mode="
            f"'token_truncate' or 'token_mask' (it is {_get(training, 'vllm_importance_sampling_mode')!r})."
        )


def _check_report_to(report_to: Any) -> None:
    backends = [report_to] if isinstance(report_to, str) else list(report_to or ["none"])
    for backend in backends:
        if backend not in REPORT_BACKENDS and backend != "all":
            raise ValueError(f"report_to={backend!r}: use one of {', '.join(REPORT_BACKENDS)} (or a list of them).")
        module = REPORT_BACKENDS.get(backend)
        if module and importlib.util.find_spec(module) is None:
            raise ImportError(f"report_to={backend!r} needs the {module} package: `pip install {module}` "
                              "(or use report_to='none').")
    if "all" in backends:
        raise ValueError("report_to='all' depends on what happens to be installed; name the backends "
                         f"({', '.join(b for b in REPORT_BACKENDS if b != 'none')}).")


def _needs_bitsandbytes(optim: Any) -> bool:
    name = str(getattr(optim, "value", optim))
    return "8bit" in name or "paged" in name or name.startswith(("lion_", "ademamix"))


def check_settings(recipe: Recipe, training: Mapping[str, Any], *, world_size: int | None = None,
                   precision: Precision | None = None) -> None:
    """Every check that can run before the model loads. Raises ValueError/ImportError/RuntimeError
    whose message names the fix."""
    world_size = _world_size() if world_size is None else world_size
    precision = precision or detect_precision()
    check_training_fields({k: v for k, v in training.items() if k != "reward_weights"}, where="training")
    _check_batch(training, world_size)
    _check_loss_settings(training)
    _check_report_to(training.get("report_to", "none"))
    on_cuda = precision.device == "cuda"

    if recipe.quantization is not None and not on_cuda:
        raise RuntimeError(
            f"recipe {recipe.name!r} loads the model in {recipe.quantization} (QLoRA, bitsandbytes), which needs a "
            "CUDA GPU. On this machine pass quantization=None (plain LoRA in fp32)"
            + (" or use the CPU-sized recipe 'gsm8k-cpu'." if recipe.name == "gsm8k-unsloth" else ".")
        )
    if recipe.quantization is not None and importlib.util.find_spec("bitsandbytes") is None:
        raise ImportError("QLoRA needs bitsandbytes: `pip install 'grpo-kit[unsloth]'` (bitsandbytes==0.50.2).")
    optim = training.get("optim")
    if optim is not None and _needs_bitsandbytes(optim):
        if not on_cuda:
            raise RuntimeError(f"optim={optim!r} is a bitsandbytes optimizer and needs a CUDA GPU; on CPU set "
                               "optim='adamw_torch'.")
        if importlib.util.find_spec("bitsandbytes") is None:
            raise ImportError(f"optim={optim!r} needs bitsandbytes: `pip install bitsandbytes==0.50.2`, "
                              "or set optim='adamw_torch'.")
    if training.get("bf16") and on_cuda and not precision.bf16:
        raise ValueError(f"bf16=True on this GPU emulates bf16 ({precision.reason}) Set fp16=True instead.")
    if training.get("bf16") and precision.device == "cpu":
        raise ValueError("bf16=True on CPU: leave precision to grpo-kit (fp32 on CPU) or run on a GPU.")
    if training.get("fp16") and not on_cuda:
        raise ValueError("fp16=True needs a CUDA GPU; on CPU train in fp32 (fp16=False).")

    if training.get("use_vllm"):
        mode = training.get("vllm_mode", _default("vllm_mode"))
        if mode not in VLLM_MODES:
            raise ValueError(f"vllm_mode={mode!r}: use 'colocate' (vLLM inside each training process) or 'server' "
                             "(a separate `trl vllm-serve` process).")
        if not on_cuda:
            raise RuntimeError("use_vllm needs a CUDA GPU (vLLM does not run on CPU); drop vllm_mode to generate "
                               "with transformers.")
        if importlib.util.find_spec("vllm") is None:
            raise ImportError("use_vllm needs vLLM: `pip install 'grpo-kit[unsloth]'` (it pins a vllm that matches "
                              "torch 2.13.0).")
        utilization = training.get("vllm_gpu_memory_utilization")
        if utilization is not None and not 0 < utilization <= 1:
            raise ValueError(f"vllm_gpu_memory_utilization={utilization} must be in (0, 1]; 0.3 is TRL's default.")


def build_grpo_config(training: Mapping[str, Any]):
    """``GRPOConfig(**training)``; its own __post_init__ checks run here, still before the model loads."""
    from trl import GRPOConfig

    return GRPOConfig(**training)


def _quantization_config(recipe: Recipe, precision: Precision):
    from transformers import BitsAndBytesConfig

    if recipe.quantization == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=precision.torch_dtype,
    )


# --- TRL on a machine without Triton ----------------------------------------------------------------


class TorchChunkedLogProb:
    """Plain-torch stand-in for ``trl.kernels.ChunkedLogProbFunction`` (same arguments, same outputs).

    TRL 1.15's GRPOTrainer always computes per-token log-probs through a fused LM head whose inner
    step is a Triton kernel. The CPU build of torch ships without Triton, so TRL sets the kernel to
    None and the first training step fails with ``'NoneType' object has no attribute 'apply'``.
    This computes the same quantities from the full logits with ordinary autograd ops: fine for the
    CPU-sized models grpo-kit trains there; GPUs keep TRL's kernel (it is only installed when the
    kernel is missing).

    Per token with hidden state h and target y: z = (h Wᵀ + b) · logit_scale, soft-capped
    (c · tanh(z / c)) when the model has final_logit_softcapping, divided by temperature;
    log p(y) = z_y − logsumexp(z). Optional outputs: entropy −Σ p log p, log Σ p², mean z,
    and whether y is the (first) argmax.
    """

    @staticmethod
    def apply(hidden, weight, bias, targets, temperature, chunk_size, final_logit_softcapping=None,
              logit_scale=1.0, outputs=("entropy",)):
        import torch

        logits = hidden.float() @ weight.float().t()  # (N, V)
        if bias is not None:
            logits = logits + bias.float()
        z = logits * logit_scale
        if final_logit_softcapping is not None:
            z = final_logit_softcapping * torch.tanh(z / final_logit_softcapping)
        z = z / temperature  # (N, V)
        log_z = torch.logsumexp(z, dim=-1)  # (N,)
        log_probs = z.gather(-1, targets.long().unsqueeze(-1)).squeeze(-1) - log_z  # (N,)
        log_p = z - log_z.unsqueeze(-1)  # (N, V)
        entropy = -(log_p.exp() * log_p).sum(-1) if "entropy" in outputs else None  # (N,)
        log_sum_sq = torch.logsumexp(2 * log_p, dim=-1) if "log_sum_sq_probs" in outputs else None  # (N,)
        mean_logits = z.mean(-1) if "mean_logits" in outputs else None  # (N,)
        is_top1 = (z.argmax(-1) == targets) if "is_top1" in outputs else None  # (N,)
        return log_probs, entropy, log_sum_sq, mean_logits, is_top1


def ensure_logprob_kernel() -> bool:
    """Install :class:`TorchChunkedLogProb` where TRL has no Triton kernel. Returns True if installed."""
    from trl.trainer import utils as trl_utils

    if getattr(trl_utils, "_ChunkedLogProbFunction", None) is None:
        trl_utils._ChunkedLogProbFunction = TorchChunkedLogProb
        return True
    return trl_utils._ChunkedLogProbFunction is TorchChunkedLogProb


# --- callbacks ---------------------------------------------------------------------------------------


def _make_callbacks(metrics_path: Path, keep_up_to_step: int | None):
    from transformers import TrainerCallback

    from grpo_kit.metrics_log import MetricsWriter

    class MetricsJsonlCallback(TrainerCallback):
        """Appends each ``trainer.state.log_history`` record (TRL's metric names) to metrics.jsonl."""

        def __init__(self) -> None:
            self.writer: MetricsWriter | None = None

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not state.log_history:
                return
            if self.writer is None:
                self.writer = MetricsWriter(metrics_path, keep_up_to_step=keep_up_to_step)
            self.writer.write(dict(state.log_history[-1]))

    class InterruptCallback(TrainerCallback):
        """Ctrl-C -> finish this step, save a checkpoint TRL can resume, stop. A second Ctrl-C aborts."""

        def __init__(self) -> None:
            self.requested = False
            self.stopped = False
            self._previous = None

        def install(self) -> None:
            if threading.current_thread() is not threading.main_thread():
                return  # signal handlers can only be set from the main thread
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)

        def uninstall(self) -> None:
            if self._previous is not None:
                signal.signal(signal.SIGINT, self._previous)
                self._previous = None

        def _on_sigint(self, signum, frame):
            if self.requested:  # second Ctrl-C: give up on the clean stop
                self.uninstall()
                raise KeyboardInterrupt
            self.requested = True
            print("\nCtrl-C: finishing this step and saving a checkpoint (Ctrl-C again to abort)…", flush=True)

        def _any_rank_requested(self) -> bool:
            # Under torchrun every rank must stop at the same step, or the others wait forever in a collective.
            import torch.distributed as dist

            if not (dist.is_available() and dist.is_initialized()):
                return self.requested
            import torch

            device = "cuda" if dist.get_backend() == "nccl" else "cpu"
            flag = torch.tensor([1.0 if self.requested else 0.0], device=device)  # (1,)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            return bool(flag.item())

        def on_step_end(self, args, state, control, **kwargs):
            if self._any_rank_requested():
                self.requested = self.stopped = True
                control.should_save = True
                control.should_training_stop = True
            return control

    return MetricsJsonlCallback(), InterruptCallback()


# --- trainer -----------------------------------------------------------------------------------------


def build_trainer(
    recipe: Recipe | str,
    *,
    model: Any = None,
    tokenizer: Any = None,
    train_dataset: Any = None,
    reward_funcs: Sequence[Callable] | None = None,
    output_dir: str | os.PathLike | None = None,
    max_steps: int | None = None,
    report_to: str | Sequence[str] = "none",
    vllm_mode: str | None = None,
    vllm_server_host: str | None = None,
    vllm_server_port: int | None = None,
    vllm_gpu_memory_utilization: float | None = None,
    callbacks: Sequence[Any] | None = None,
    model_loader: Callable[..., tuple[Any, Any]] | None = None,
    device: str | None = None,
    **overrides: Any,
):
    """A ready ``trl.GRPOTrainer`` for ``recipe`` (a Recipe or a recipe name).

    model / tokenizer: an already loaded pair (e.g. ``grpo_kit.models.tiny_model()``); by default
        ``model_loader(recipe.model, dtype=..., quantization=...)`` loads it, after every check passed.
    train_dataset: a ``datasets.Dataset`` with a ``prompt`` column; default ``recipe.load_dataset()``.
    reward_funcs: default the recipe's functions (weights from the recipe).
    output_dir: default ``outputs/<recipe name>``.
    max_steps, report_to ("none" | "trackio" | "wandb" | "tensorboard"), vllm_*: as in GRPOConfig;
        ``vllm_mode`` ("colocate" | "server") turns ``use_vllm`` on.
    callbacks: extra ``transformers.TrainerCallback`` objects.
    device: "cpu" forces CPU (fp32) on a GPU machine; default: the best device found.
    overrides: any GRPOConfig field (``learning_rate=1e-5``, ``num_generations=4``, ...).
    """
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    precision = detect_precision(device)
    output_dir = Path(output_dir or Path("outputs") / recipe.name)
    training = resolve_training(
        recipe, output_dir=output_dir, max_steps=max_steps, report_to=report_to, vllm_mode=vllm_mode,
        vllm_server_host=vllm_server_host, vllm_server_port=vllm_server_port,
        vllm_gpu_memory_utilization=vllm_gpu_memory_utilization, precision=precision, overrides=overrides,
    )
    if reward_funcs is not None and len(reward_funcs) != len(recipe.rewards):
        # The weights come from the recipe; a different number of functions needs its own weights.
        training["reward_weights"] = overrides.get("reward_weights", [1.0] * len(reward_funcs))
    check_settings(recipe, training, precision=precision)
    args = build_grpo_config(training)  # TRL's own config checks, still before loading anything

    if model is None:
        if model_loader is None:
            from grpo_kit.models import load_model as model_loader
        quantization = _quantization_config(recipe, precision) if recipe.quantization else None
        model, loaded_tokenizer = model_loader(recipe.model, dtype=precision.dtype, quantization=quantization)
        tokenizer = tokenizer or loaded_tokenizer
        if quantization is not None:
            from peft import prepare_model_for_kbit_training

            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=args.gradient_checkpointing)
    elif tokenizer is None:
        raise ValueError("a model was given without its tokenizer; pass tokenizer= too.")

    if train_dataset is None:
        train_dataset = recipe.load_dataset()
    if reward_funcs is None:
        reward_funcs = recipe.build_reward_funcs(tokenizer)

    from trl import GRPOTrainer

    from grpo_kit.checkpoint import is_peft_model

    ensure_logprob_kernel()

    peft_config = None
    if recipe.lora is not None and not is_peft_model(model):
        peft_config = recipe.lora.to_peft_config()

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=list(reward_funcs),
        args=args,
        train_dataset=train_dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=list(callbacks or []),
    )
    use_plain_progress_bar(trainer)
    trainer.grpo_kit_recipe = recipe
    return trainer


def use_plain_progress_bar(trainer) -> None:
    """Swap transformers' IPython progress widget for its tqdm bar.

    transformers picks ``NotebookProgressCallback`` whenever ``marimo`` has been imported
    (``is_in_notebook``), even in a plain script or test process; that widget draws nothing in marimo
    and crashes in ``on_train_end`` after an interrupted run (Ctrl-C → checkpoint). tqdm works everywhere.
    """
    notebook_bars = [cb for cb in trainer.callback_handler.callbacks if type(cb).__name__ == "NotebookProgressCallback"]
    if not notebook_bars:
        return
    from transformers.trainer_callback import ProgressCallback

    for callback in notebook_bars:
        trainer.remove_callback(callback)
    trainer.add_callback(ProgressCallback)


def _last_checkpoint(output_dir: Path) -> Path | None:
    checkpoints = sorted(
        (p for p in output_dir.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
        key=lambda p: int(p.name.split("-")[-1]),
    )
    return checkpoints[-1] if checkpoints else None


def _resume_point(output_dir: Path, resume_from_checkpoint) -> tuple[Path | None, int | None]:
    """(checkpoint folder or None, its global step or None); True means the latest checkpoint-N."""
    resume = resume_from_checkpoint
    if resume is True:
        resume = _last_checkpoint(output_dir)
        if resume is None:
            raise FileNotFoundError(f"resume_from_checkpoint=True but {output_dir} has no checkpoint-N folder.")
    if not resume:
        return None, None
    import json

    state_file = Path(resume) / "trainer_state.json"
    if not state_file.is_file():
        raise FileNotFoundError(f"{resume} is not a TRL checkpoint (no trainer_state.json).")
    return Path(resume), json.loads(state_file.read_text())["global_step"]


def train(
    recipe: Recipe | str,
    *,
    resume_from_checkpoint: str | os.PathLike | bool | None = None,
    save_final: bool = True,
    plot: bool = True,
    **kwargs: Any,
) -> TRLRunResult:
    """Build the trainer (see :func:`build_trainer` for the arguments), train, and write the outputs.

    resume_from_checkpoint: a ``checkpoint-N`` folder, or True for the latest one in ``output_dir``.
    save_final: save the adapter (or model) and tokenizer to ``output_dir`` at the end.
    plot: draw ``reward_curve.png`` from the log history.
    """
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    output_dir = Path(kwargs.pop("output_dir", None) or Path("outputs") / recipe.name)
    resume, keep_up_to_step = _resume_point(output_dir, resume_from_checkpoint)  # before anything loads
    trainer = build_trainer(recipe, output_dir=output_dir, **kwargs)
    metrics_path = output_dir / "metrics.jsonl"
    metrics_callback, interrupt_callback = _make_callbacks(metrics_path, keep_up_to_step)
    trainer.add_callback(metrics_callback)
    trainer.add_callback(interrupt_callback)
    interrupt_callback.install()
    try:
        trainer.train(resume_from_checkpoint=os.fspath(resume) if resume else None)
    finally:
        interrupt_callback.uninstall()

    log_history = list(trainer.state.log_history)
    curve = None
    if trainer.is_world_process_zero():
        if save_final and not interrupt_callback.stopped:
            trainer.save_model(os.fspath(output_dir))
            if trainer.processing_class is not None:
                trainer.processing_class.save_pretrained(os.fspath(output_dir))
        if plot and any(r.get("reward") is not None for r in log_history):
            from grpo_kit.plots import plot_reward_curve

            curve = plot_reward_curve(log_history, output_dir / "reward_curve.png",
                                      title=f"GRPO reward — {trainer.grpo_kit_recipe.name} (TRL)")
    return TRLRunResult(
        output_dir=output_dir,
        metrics_path=metrics_path,
        reward_curve_path=curve,
        log_history=log_history,
        global_step=trainer.state.global_step,
        interrupted=interrupt_callback.stopped,
        checkpoint=_last_checkpoint(output_dir),
        trainer=trainer,
    )
