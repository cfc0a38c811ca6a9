"""One ``GRPOTrainer`` builder for the TRL and Unsloth paths: they differ only in how the model is loaded
(and patched), which a :class:`ModelBackend` says; the GRPOConfig, the checks, the trainer assembly, the
metrics/Ctrl-C callbacks and the :class:`~grpo_kit.result.RunResult` are shared here.

    backend = ModelBackend(name="TRL", precision=..., check=..., load=..., peft_config=...)
    trainer = build_trainer(recipe, backend, output_dir="runs/x", learning_rate=1e-5)
    result = run_trainer(trainer, output_dir="runs/x", title="TRL")

``build_trainer(..., trainer_kwargs={"tools": [...], "environment_factory": ...})`` forwards extra
``GRPOTrainer`` arguments unchanged; a recipe's ``tools="calculator"`` fills ``tools`` (``grpo_kit.tool_sets``),
and the tools, ``max_tool_calling_iterations`` and the tokenizer's tool template are checked before the model
loads.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_kit.hardware import Precision
from grpo_kit.recipes import Recipe, get_recipe
from grpo_kit.result import RunResult
from grpo_kit.settings import (
    LOOP_ONLY_FIELDS,
    check_grpo_settings,
    check_report_to,
    check_training_fields,
)
from grpo_kit.tool_sets import check_tool_setup, prepare_tool_tokenizer

__all__ = [
    "ModelBackend",
    "build_trainer",
    "check_training",
    "grpo_config_kwargs",
    "last_checkpoint",
    "resume_point",
    "run_trainer",
    "use_plain_progress_bar",
    "world_size",
]


@dataclass(frozen=True)
class ModelBackend:
    """What differs between the TRL and the Unsloth path: everything about the model."""

    name: str  # "TRL" | "Unsloth": shown in the reward curve's title
    precision: Callable[[], Precision]  # the precision to train in
    check: Callable[
        [Recipe, dict[str, Any], Precision], None
    ]  # path-only checks; may import/patch; no weights
    load: Callable[
        [Recipe, Precision, Any], tuple[Any, Any]
    ]  # (recipe, precision, GRPOConfig) -> (model, tok)
    peft_config: Callable[[Recipe, Any], Any]  # LoRA for GRPOTrainer(peft_config=...), or None


def world_size() -> int:
    """The number of training processes (torchrun / accelerate set WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def grpo_config_kwargs(
    recipe: Recipe,
    *,
    output_dir: str | os.PathLike,
    max_steps: int | None = None,
    report_to: str | Sequence[str] | None = None,
    precision: Precision | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """The GRPOConfig keyword arguments for this run: ``recipe.training`` and reward weights, then precision
    flags (given explicitly: TRL's config would default to bf16), then the arguments and ``overrides``
    (GRPOConfig names), which win. Asking for one 16-bit mode switches the other off."""
    training: dict[str, Any] = dict(recipe.grpo_training())
    if precision is not None:
        training.update(precision.trainer_kwargs())
    training["output_dir"] = os.fspath(output_dir)
    if report_to is not None or "report_to" not in training:  # the recipe's (--set report_to=...) otherwise
        training["report_to"] = "none" if report_to is None else report_to
    if max_steps is not None:
        training["max_steps"] = max_steps
    for wanted, other in (("fp16", "bf16"), ("bf16", "fp16")):
        if overrides.get(wanted) and other not in overrides:
            training[other] = False
    training.update(overrides)
    for name in LOOP_ONLY_FIELDS:  # the standalone loop's own settings; GRPOTrainer has no such field
        training.pop(name, None)
    return training


def check_training(training: Mapping[str, Any], *, world_size: int = 1) -> None:
    """The checks every GRPOTrainer path makes on its GRPOConfig keyword arguments (``grpo_kit.settings``)."""
    check_training_fields({k: v for k, v in training.items() if k != "reward_weights"}, where="training")
    check_grpo_settings(training, world_size=world_size)
    check_report_to(training.get("report_to", "none"))


def build_trainer(
    recipe: Recipe | str,
    backend: ModelBackend,
    *,
    model: Any = None,
    tokenizer: Any = None,
    train_dataset: Any = None,
    reward_funcs: Sequence[Callable] | None = None,
    output_dir: str | os.PathLike | None = None,
    max_steps: int | None = None,
    report_to: str | Sequence[str] | None = None,
    callbacks: Sequence[Any] | None = None,
    trainer_kwargs: Mapping[str, Any] | None = None,
    **overrides: Any,
):
    """A ready ``trl.GRPOTrainer``: settings → checks (shared, then the backend's) → GRPOConfig → model
    (``backend.load`` unless ``model``/``tokenizer`` are given) → trainer. Nothing loads before every check
    passed. ``trainer_kwargs`` go to ``GRPOTrainer`` unchanged (``tools=``, ``environment_factory=``, ...).
    ``reward_funcs`` may hold reward models as TRL's do (ids, paths, sequence-classification models, with
    ``trainer_kwargs["reward_processing_classes"]``): checked here, then handed to TRL, which scores them."""
    from grpo_kit.reward_models import as_reward_funcs, unwrap_for_trl

    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    precision = backend.precision()
    output_dir = Path(output_dir or Path("outputs") / recipe.name)
    training = grpo_config_kwargs(
        recipe,
        output_dir=output_dir,
        max_steps=max_steps,
        report_to=report_to,
        precision=precision,
        **overrides,
    )
    trainer_kwargs = dict(trainer_kwargs or {})
    reward_processing_classes = trainer_kwargs.pop("reward_processing_classes", None)
    if reward_funcs is not None:
        # A reward model that is not sequence-classification is refused here, before the policy loads.
        reward_funcs = as_reward_funcs(reward_funcs, reward_processing_classes)
        if len(reward_funcs) != len(recipe.rewards):
            # The weights come from the recipe; a different number of functions needs its own weights.
            training["reward_weights"] = overrides.get("reward_weights", [1.0] * len(reward_funcs))
    check_training(training, world_size=world_size())
    # Tools, max_tool_calling_iterations and a given tokenizer's template are checked before any weights load.
    trainer_kwargs = check_tool_setup(recipe.tools, recipe.tool_template, training, trainer_kwargs, tokenizer)
    backend.check(recipe, training, precision)
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(**training)  # TRL's own config checks, still before loading anything
    if model is None:
        model, loaded_tokenizer = backend.load(recipe, precision, args)
        if tokenizer is None and ("tools" in trainer_kwargs or "environment_factory" in trainer_kwargs):
            prepare_tool_tokenizer(loaded_tokenizer, recipe.tool_template)  # the loaded tokenizer's template
        tokenizer = tokenizer or loaded_tokenizer
    elif tokenizer is None:
        raise ValueError("a model was given without its tokenizer; pass tokenizer= too.")
    if train_dataset is None:
        train_dataset = recipe.load_dataset()
    if reward_funcs is None:
        reward_funcs = recipe.build_reward_funcs(tokenizer)
    # Reward models go to TRL as models with their tokenizers: TRL scores them (grpo_kit.reward_models).
    reward_funcs, reward_processing_classes = unwrap_for_trl(list(reward_funcs))
    if reward_processing_classes is not None:
        trainer_kwargs["reward_processing_classes"] = reward_processing_classes
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=train_dataset,
        processing_class=tokenizer,
        peft_config=backend.peft_config(recipe, model),
        callbacks=list(callbacks or []),
        **trainer_kwargs,
    )
    use_plain_progress_bar(trainer)
    return trainer


def use_plain_progress_bar(trainer) -> None:
    """Swap transformers' IPython progress widget for its tqdm bar.

    transformers picks ``NotebookProgressCallback`` whenever ``marimo`` has been imported
    (``is_in_notebook``), even in a plain script or test process; that widget draws nothing in marimo
    and crashes in ``on_train_end`` after an interrupted run (Ctrl-C → checkpoint). tqdm works everywhere.
    """
    notebook_bars = [
        cb for cb in trainer.callback_handler.callbacks if type(cb).__name__ == "NotebookProgressCallback"
    ]
    if not notebook_bars:
        return
    from transformers.trainer_callback import ProgressCallback

    for callback in notebook_bars:
        trainer.remove_callback(callback)
    trainer.add_callback(ProgressCallback)


# --- running it -------------------------------------------------------------------------------------


def last_checkpoint(output_dir: Path) -> Path | None:
    checkpoints = sorted(
        (p for p in Path(output_dir).glob("checkpoint-*") if p.name.split("-")[-1].isdigit()),
        key=lambda p: int(p.name.split("-")[-1]),
    )
    return checkpoints[-1] if checkpoints else None


def resume_point(output_dir: Path, resume_from_checkpoint) -> tuple[Path | None, int | None]:
    """(checkpoint folder or None, its global step or None); True means the latest checkpoint-N. Call it
    before anything loads: a missing checkpoint is a configuration error."""
    resume = resume_from_checkpoint
    if resume is True:
        resume = last_checkpoint(output_dir)
        if resume is None:
            raise FileNotFoundError(
                f"resume_from_checkpoint=True but {output_dir} has no checkpoint-N folder."
            )
    if not resume:
        return None, None
    state_file = Path(resume) / "trainer_state.json"
    if not state_file.is_file():
        raise FileNotFoundError(f"{resume} is not a TRL checkpoint (no trainer_state.json).")
    return Path(resume), json.loads(state_file.read_text())["global_step"]


def run_trainer(
    trainer,
    *,
    output_dir: Path,
    resume: Path | None = None,
    keep_up_to_step: int | None = None,
    title: str = "TRL",
    plot: bool = True,
) -> RunResult:
    """``trainer.train()`` with metrics.jsonl, a clean Ctrl-C (checkpoint, then stop) and the reward curve
    (``title``: e.g. "smoltldr-length-small (TRL)")."""
    output_dir = Path(output_dir)
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
    if plot and trainer.is_world_process_zero() and any(r.get("reward") is not None for r in log_history):
        from grpo_kit.plots import can_plot, plot_reward_curve

        if can_plot("reward_curve.png"):
            curve = plot_reward_curve(
                log_history, output_dir / "reward_curve.png", title=f"GRPO reward — {title}"
            )
    return RunResult(
        output_dir=output_dir,
        global_step=trainer.state.global_step,
        log_history=log_history,
        metrics_path=metrics_path,
        reward_curve_path=curve,
        checkpoint=last_checkpoint(output_dir),
        interrupted=interrupt_callback.stopped,
        step_losses={r["step"]: r["loss"] for r in log_history if "loss" in r and "step" in r},
        trainer=trainer,
        model=trainer.model,
        tokenizer=trainer.processing_class,
    )


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
            print(
                "\nCtrl-C: finishing this step and saving a checkpoint (Ctrl-C again to abort)…", flush=True
            )

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
