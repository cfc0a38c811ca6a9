"""Running a built ``GRPOTrainer`` (the TRL and Unsloth paths): where a resume starts
(:func:`resume_point`, through ``checkpoint.resume_target``), and ``trainer.train()`` with the callbacks every
path shares: metrics.jsonl, a clean Ctrl-C / SIGTERM (checkpoint, then stop), no step past ``keep_up_to_step``,
trainable weights that turn NaN/inf stop the run, steps in a row without learning signal stop it saved (the
signal watch, ``grpo_kit.evaluation.signal_watch``), files shareable; then the reward curve and the
:class:`~grpo_kit.artifacts.result.RunResult`. ``grpo_kit.trainers.builder`` builds the trainer this runs.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

from grpo_kit.artifacts.checkpoint import latest_checkpoint
from grpo_kit.artifacts.result import RunResult

__all__ = ["resume_point", "run_trainer"]


def resume_point(output_dir: Path, resume_from_checkpoint) -> tuple[Path | None, int | None]:
    """(checkpoint folder or None, its global step or None): ``checkpoint.resume_target``'s checkpoint (a planned
    run's is already resolved: its folder), which on this path must be TRL's. Call it before anything loads: a
    missing checkpoint is a configuration error."""
    from grpo_kit.artifacts.checkpoint import resume_target

    resume = resume_target(output_dir, resume_from_checkpoint)
    if resume is None:
        return None, None
    state_file = resume / "trainer_state.json"
    if not state_file.is_file():
        raise FileNotFoundError(f"{resume} is not a TRL checkpoint (no trainer_state.json).")
    return resume, json.loads(state_file.read_text())["global_step"]


def run_trainer(
    trainer,
    *,
    output_dir: Path,
    resume: Path | None = None,
    keep_up_to_step: int | None = None,
    title: str = "TRL",
    plot: bool = True,
    evaluate: Any = None,
    watch: Any = None,
) -> RunResult:
    """``trainer.train()`` with metrics.jsonl, a clean Ctrl-C (checkpoint, then stop) and the reward curve
    (``title``: e.g. "smoltldr-length-small (TRL)"). ``evaluate(model, step) -> {"eval/...": value}``: the held-out
    evaluation ``eval_strategy="steps"`` schedules (``grpo_kit.runs.during_training``), run where Trainer would run
    its own sampled one, which it replaces. ``watch``: the run's
    ``SignalWatch`` (None: no watch), which reads every training record and may stop the run saved."""
    output_dir = Path(output_dir)
    metrics_path = output_dir / "metrics.jsonl"
    metrics_callback, interrupt_callback, shareable_callback = _make_callbacks(metrics_path, keep_up_to_step)
    trainer.add_callback(_finite_weights_callback())
    if evaluate is not None:  # after DefaultFlowCallback, which says when (eval_steps and the last step)
        trainer.add_callback(_held_out_callback(evaluate, metrics_callback))
    trainer.add_callback(metrics_callback)
    trainer.add_callback(interrupt_callback)
    trainer.add_callback(shareable_callback)
    if watch is not None:
        trainer.add_callback(_signal_watch_callback(watch))
    interrupt_callback.install()
    try:
        trainer.train(resume_from_checkpoint=os.fspath(resume) if resume else None)
    finally:
        interrupt_callback.uninstall()
    log_history = list(trainer.state.log_history)
    curve = None
    if plot and trainer.is_world_process_zero() and any(r.get("reward") is not None for r in log_history):
        from grpo_kit.artifacts.plots import can_plot, plot_reward_curve

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
        checkpoint=latest_checkpoint(output_dir),
        interrupted=interrupt_callback.stopped or (watch is not None and watch.stopped_at is not None),
        no_signal=watch.record() if watch is not None else None,
        step_losses={r["step"]: r["loss"] for r in log_history if "loss" in r and "step" in r},
        trainer=trainer,
        model=trainer.model,
        tokenizer=trainer.processing_class,
    )


def _finite_weights_callback():
    """After every optimizer step, before Trainer decides to save: trainable weights that hold NaN/inf stop
    the run (:class:`~grpo_kit.artifacts.checkpoint.NonFiniteWeightsError`), so no checkpoint or export is written from
    them. Simplification: GRPOTrainer cannot undo a step, so the TRL path stops where the loop would skip."""
    from transformers import TrainerCallback

    from grpo_kit.artifacts.checkpoint import (
        NonFiniteWeightsError,
        non_finite_parameters,
        trainable_parameters,
    )

    class FiniteWeightsCallback(TrainerCallback):
        def __init__(self) -> None:
            self.named: list = []

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if model is None:
                return control
            self.named = self.named or trainable_parameters(model)
            bad = non_finite_parameters(self.named)
            if bad:
                found = latest_checkpoint(Path(args.output_dir))
                where = f"the last good state is {found}" if found else "no checkpoint was written before it"
                raise NonFiniteWeightsError(
                    f"step {state.global_step}: {len(bad)} of {len(self.named)} trainable weight tensors became "
                    f"NaN/inf (first: {bad[0]}); nothing was saved from them and {where}. Lower learning_rate, "
                    "keep adam_epsilon > 0 (1e-8)."
                )
            return control

    return FiniteWeightsCallback()


def _signal_watch_callback(watch: Any):
    """Every training record Trainer logs goes to the signal watch; when it says stop, Trainer saves this step's
    checkpoint (``on_log`` comes before its save) and stops: the run ends resumable, as after Ctrl-C. Every rank
    reads the same gathered metrics, so all stop at the same step; rank zero prints."""
    from transformers import TrainerCallback

    from grpo_kit.support.interrupts import stops_reported_by_caller

    class SignalWatchCallback(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            if state.global_step > 0:  # resumed: the streak the run had (Trainer restored its log history)
                watch.replay(state.log_history, state.max_steps)

        def on_log(self, args, state, control, logs=None, **kwargs):
            record = state.log_history[-1] if state.log_history else {}
            if any(str(key).startswith("eval/") for key in record) or not watch.observe(
                record, state.max_steps
            ):
                return control
            control.should_save = True
            control.should_training_stop = True
            if state.is_world_process_zero and not stops_reported_by_caller():  # the CLI prints its own
                print(
                    f"{watch.line()} Checkpoint saved to {Path(args.output_dir) / f'checkpoint-{state.global_step}'}."
                )
            return control

    return SignalWatchCallback()


def _held_out_callback(evaluate: Any, metrics_callback: Any):
    """At a step where ``DefaultFlowCallback`` set ``should_evaluate`` (``eval_strategy="steps"``: every
    ``eval_steps`` and the last step): ``evaluate(model, step)``, its record appended to the log history and
    metrics.jsonl as Trainer logs an evaluation (TRL's ``eval/`` names), and Trainer's own evaluation (sampled
    completions of ``eval_dataset``, TRL's loss) switched off for that step: one evaluation, grpo-kit's."""
    from transformers import TrainerCallback

    class HeldOutCallback(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if not control.should_evaluate:
                return control
            control.should_evaluate = False
            if state.is_world_process_zero:
                record = {
                    **evaluate(model, state.global_step),
                    "step": state.global_step,
                    "epoch": state.epoch,
                }
                state.log_history.append(record)
                metrics_callback.write(record)
            return control

    return HeldOutCallback()


def _make_callbacks(metrics_path: Path, keep_up_to_step: int | None):
    from transformers import TrainerCallback

    from grpo_kit.artifacts.metrics_log import MetricsWriter

    class MetricsJsonlCallback(TrainerCallback):
        """Appends each ``trainer.state.log_history`` record (TRL's metric names) to metrics.jsonl."""

        def __init__(self) -> None:
            self.writer: MetricsWriter | None = None

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not state.is_world_process_zero or not state.log_history:
                return
            self.write(dict(state.log_history[-1]))

        def write(self, record: dict[str, Any]) -> None:
            if self.writer is None:
                self.writer = MetricsWriter(metrics_path, keep_up_to_step=keep_up_to_step)
            self.writer.write(record)

    class InterruptCallback(TrainerCallback):
        """Ctrl-C or SIGTERM -> finish this step, save a checkpoint TRL can resume, stop. A second one aborts."""

        def __init__(self) -> None:
            self.requested = False
            self.stopped = False
            self._previous: dict[int, Any] = {}

        def install(self) -> None:
            if threading.current_thread() is not threading.main_thread():
                return  # signal handlers can only be set from the main thread
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._on_signal)

        def uninstall(self) -> None:
            for signum, previous in self._previous.items():
                signal.signal(signum, previous)
            self._previous = {}

        def _on_signal(self, signum, frame):
            from grpo_kit.support.interrupts import Terminated, note_signal

            note_signal(signum)
            if self.requested:  # a second signal: give up on the clean stop
                self.uninstall()
                raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt
            self.requested = True
            name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
            print(
                f"\n{name}: finishing this step and saving a checkpoint ({name} again to abort)…", flush=True
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

    class ShareableCheckpointsCallback(TrainerCallback):
        """Give a saved checkpoint's files the umask's mode (transformers' safetensors writes them 0600)."""

        def on_save(self, args, state, control, **kwargs):
            from grpo_kit.support.paths import make_shareable

            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if state.is_world_process_zero and folder.is_dir():
                for path in folder.rglob("*"):
                    if path.is_file() and not path.is_symlink():
                        make_shareable(path)

    return MetricsJsonlCallback(), InterruptCallback(), ShareableCheckpointsCallback()
