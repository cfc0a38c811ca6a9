"""Recipe -> TRL ``GRPOConfig`` + ``GRPOTrainer``: TRL does the training.

    from grpo_kit.trainers import trl_path
    result = trl_path.train_with_trl("smoltldr-length-quick", output_dir="runs/tldr")   # CPU, offline
    # a recipe that evaluates during training (eval_steps: the main job) trains through grpo-kit train /
    # runs.execute, which hold its held-out rows; here it is refused, naming that fix
    result.metrics_path, result.reward_curve_path

The trainer is assembled by ``grpo_kit.trainers.builder`` (shared with the Unsloth path); this module is
the TRL *backend*: how the model is loaded (``grpo_kit.models.load_model`` in the precision
``grpo_kit.support.hardware`` picks: bf16 only on compute capability >= 8, fp16 on older GPUs, fp32 on CPU;
QLoRA through a ``BitsAndBytesConfig``, on CUDA or bitsandbytes' CPU backend), LoRA through ``peft_config``,
the hardware checks
(``grpo_kit.config.rules.check_precision``), vLLM ``colocate`` / ``server`` pass-through, and a plain-torch
log-prob kernel where TRL has no Triton. Every configuration rule lives in ``grpo_kit.config.rules`` and
runs before the model loader is called. Ctrl-C finishes the step and saves a checkpoint that
``resume_from_checkpoint`` continues. Runs unchanged under ``torchrun`` / ``accelerate launch``
(see docs/distributed.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grpo_kit.artifacts.result import RunResult
from grpo_kit.config.rules import check_precision
from grpo_kit.recipes.catalogue import Recipe
from grpo_kit.support.hardware import Precision, detect_precision
from grpo_kit.trainers.builder import (
    ModelBackend,
    assemble_grpo_trainer,
    build_and_train,
    check_config,
    grpo_config_kwargs,
    use_one_line_progress,
)
from grpo_kit.trainers.builder import grpo_config as build_grpo_config

__all__ = [
    "TorchChunkedLogProb",
    "backend",
    "build_grpo_config",
    "build_trainer",
    "check_settings",
    "ensure_logprob_kernel",
    "resolve_training",
    "train_with_trl",
    "use_one_line_progress",
]


def resolve_training(
    recipe: Recipe,
    *,
    output_dir: str | os.PathLike,
    max_steps: int | None = None,
    report_to: str | Sequence[str] | None = None,
    vllm_mode: str | None = None,
    vllm_server_host: str | None = None,
    vllm_server_port: int | None = None,
    vllm_gpu_memory_utilization: float | None = None,
    precision: Precision | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``trainer_builder.grpo_config_kwargs`` plus the vLLM arguments (``vllm_mode`` turns ``use_vllm`` on)."""
    settings = {
        "output_dir": output_dir,
        "max_steps": max_steps,
        "report_to": report_to,
        **_vllm_overrides(vllm_mode, vllm_server_host, vllm_server_port, vllm_gpu_memory_utilization),
        **dict(overrides or {}),
    }  # overrides win, as GRPOConfig names
    return grpo_config_kwargs(recipe, precision=precision or detect_precision(), **settings)


def _vllm_overrides(mode, host, port, utilization) -> dict[str, Any]:
    values = {"use_vllm": True, "vllm_mode": mode} if mode is not None else {}
    for key, value in (
        ("vllm_server_host", host),
        ("vllm_server_port", port),
        ("vllm_gpu_memory_utilization", utilization),
    ):
        if value is not None:
            values[key] = value
    return values


def check_settings(
    recipe: Recipe,
    training: Mapping[str, Any],
    *,
    world_size: int | None = None,
    precision: Precision | None = None,
    dataset: Any = None,
    load_dataset: Callable[[], Any] | None = None,
) -> Any:
    """Every check that can run before the model loads: ``trainer_builder.check_config`` with this path's
    hardware rules (``grpo_kit.config.rules``). The environments are played on ``dataset`` (default: loaded by
    ``load_dataset``, else ``recipe.load_dataset``, for a recipe with an environment only), which is returned
    so the run trains on the rows it was checked with. Raises ValueError/ImportError/RuntimeError whose message
    names the fix."""
    from grpo_kit.trainers import builder as trainer_builder

    return check_config(
        recipe,
        training,
        _check_hardware,
        precision or detect_precision(),
        world_size=trainer_builder.world_size() if world_size is None else world_size,
        dataset=dataset,
        load_dataset=load_dataset,
    )[1]


def _check_hardware(recipe: Recipe, training: Mapping[str, Any], precision: Precision) -> None:
    refuse_unsloths_patches()
    check_precision(training, precision, quantization=recipe.quantization, recipe_name=recipe.name)


def refuse_unsloths_patches() -> None:
    """``import unsloth`` replaces TRL's GRPOConfig/GRPOTrainer for the rest of the process (on CPU its config
    also rewrites ``optim='adamw_8bit'`` to ``adamw_torch_fused``): a TRL-path run after it would train Unsloth's
    trainer while its run folder says TRL. Refused before the model loads."""
    import sys

    if "unsloth" in sys.modules:
        raise RuntimeError(
            "Unsloth was imported in this process and has patched TRL's GRPOTrainer, so the TRL path would run "
            "Unsloth's: start the TRL run in a fresh process (or use --loop unsloth)."
        )


def _quantization_config(recipe: Recipe, precision: Precision):
    from transformers import BitsAndBytesConfig

    if recipe.quantization == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=precision.torch_dtype,
    )


def backend(
    *, model_loader: Callable[..., tuple[Any, Any]] | None = None, device: str | None = None
) -> ModelBackend:
    """The TRL path's model handling: ``model_loader(name, dtype=..., quantization=...)`` (default
    ``grpo_kit.models.load_model``), QLoRA preparation, LoRA via ``peft_config``; ``device="cpu"`` forces
    fp32 on CPU on a GPU machine."""

    def load(recipe: Recipe, precision: Precision, args) -> tuple[Any, Any]:
        loader = model_loader
        if loader is None:
            from grpo_kit.models import load_model as loader
        quantization = _quantization_config(recipe, precision) if recipe.quantization else None
        model, tokenizer = loader(recipe.model, dtype=precision.dtype, quantization=quantization)
        # a VLM's trainable_parts: assemble_grpo_trainer chooses them, for a loaded or a handed-in model
        if quantization is not None:
            from peft import prepare_model_for_kbit_training

            model = prepare_model_for_kbit_training(
                model, use_gradient_checkpointing=args.gradient_checkpointing
            )
        return model, tokenizer

    def peft_config(recipe: Recipe, model) -> Any:
        from grpo_kit.models.lora import is_peft_model

        ensure_logprob_kernel()
        return recipe.lora.to_peft_config() if recipe.lora is not None and not is_peft_model(model) else None

    return ModelBackend(
        name="TRL",
        precision=lambda: detect_precision(device),
        check=_check_hardware,
        load=load,
        peft_config=peft_config,
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
    def apply(
        hidden,
        weight,
        bias,
        targets,
        temperature,
        chunk_size,
        final_logit_softcapping=None,
        logit_scale=1.0,
        outputs=("entropy",),
    ):
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
    """Install :class:`TorchChunkedLogProb` where TRL has no Triton kernel. Returns True if installed.

    TRL 1.15 leaves ``_ChunkedLogProbFunction`` None without Triton (CPU); TRL 1.16 ships its own plain-torch
    fallback there, so this returns False and TRL's own function runs (the twin is then unused; it stays
    while the pinned TRL is 1.15)."""
    from trl.trainer import utils as trl_utils

    if getattr(trl_utils, "_ChunkedLogProbFunction", None) is None:
        trl_utils._ChunkedLogProbFunction = TorchChunkedLogProb
        return True
    return trl_utils._ChunkedLogProbFunction is TorchChunkedLogProb


# --- trainer -----------------------------------------------------------------------------------------


def build_trainer(
    recipe: Recipe | str,
    *,
    vllm_mode: str | None = None,
    vllm_server_host: str | None = None,
    vllm_server_port: int | None = None,
    vllm_gpu_memory_utilization: float | None = None,
    model_loader: Callable[..., tuple[Any, Any]] | None = None,
    device: str | None = None,
    **kwargs: Any,
):
    """A ready ``trl.GRPOTrainer`` for ``recipe`` (a Recipe or a recipe name).

    args: a GRPOConfig already built and checked (``plan_run``'s ``plan.path_config``): it trains as it is.
    model / tokenizer: an already loaded pair (e.g. ``grpo_kit.models.tiny_model()``); by default
        ``model_loader(recipe.model, dtype=..., quantization=...)`` loads it, after every check passed.
    train_dataset, reward_funcs, output_dir, max_steps, report_to, callbacks, trainer_kwargs and GRPOConfig
        overrides (``learning_rate=1e-5``, ...): see ``builder.assemble_grpo_trainer``.
    vllm_*: as in GRPOConfig; ``vllm_mode`` ("colocate" | "server") turns ``use_vllm`` on.
    device: "cpu" forces CPU (fp32) on a GPU machine; default: the best device found.
    """
    kwargs.update(_vllm_overrides(vllm_mode, vllm_server_host, vllm_server_port, vllm_gpu_memory_utilization))
    return assemble_grpo_trainer(recipe, backend(model_loader=model_loader, device=device), **kwargs)


def train_with_trl(
    recipe: Recipe | str,
    *,
    args: Any = None,
    resume_from_checkpoint: str | os.PathLike | bool | None = None,
    save_final: bool = True,
    plot: bool = True,
    **kwargs: Any,
) -> RunResult:
    """Build the trainer (see :func:`build_trainer` for the arguments), train, and write the outputs.

    args: a GRPOConfig built and checked by ``grpo_kit.runs.plan_run`` (``plan.path_config``): that very object
        trains, in its ``output_dir``, and no setting is checked or built again.
    resume_from_checkpoint: a ``checkpoint-N`` folder, or True for the latest one in ``output_dir``.
    save_final: save the adapter (or model) and tokenizer to ``output_dir`` at the end.
    plot: draw ``reward_curve.png`` from the log history.
    """
    result = build_and_train(
        recipe,
        build_trainer,
        path="TRL",
        args=args,
        resume_from_checkpoint=resume_from_checkpoint,
        plot=plot,
        **kwargs,
    )
    trainer = result.trainer
    if save_final and not result.interrupted and trainer.is_world_process_zero():
        trainer.save_model(os.fspath(result.output_dir))
        if trainer.processing_class is not None:
            trainer.processing_class.save_pretrained(os.fspath(result.output_dir))
    return result
