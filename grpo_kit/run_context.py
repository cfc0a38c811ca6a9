"""The bookkeeping around the standalone loop's steps, kept out of ``loop.train()``.

``RunContext`` owns: resuming (weights, optimizer, scheduler, data position, RNG, a pending rollout),
the metrics (one window accumulator; every record goes through :meth:`RunContext.write_record`, the one
place that appends to ``log_history``, ``metrics.jsonl`` and any ``reporters``), per-step timing, the
progress bar, callbacks, checkpoints, Ctrl-C (``with run:`` turns it into a checkpoint and a normal
return) and the :class:`~grpo_kit.result.RunResult`.

Checkpoints go through ``grpo_kit.checkpoint``'s public functions only.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import torch

from grpo_kit.checkpoint import (
    capture_rng_state,
    jsonable_config,
    latest_checkpoint,
    load_checkpoint,
    restore_rng_state,
    rotate_checkpoints,
    save_checkpoint,
)
from grpo_kit.metrics_log import MetricsAccumulator, MetricsWriter
from grpo_kit.reporting import PlainProgress, check_report_to, make_reporter, stream_is_terminal
from grpo_kit.result import RunResult

__all__ = ["LoopState", "RunContext"]


@dataclass
class LoopState:
    """The subset of transformers' ``TrainerState`` that reward functions read (``trainer_state`` kwarg)."""

    global_step: int = 0
    max_steps: int = 0
    epoch: float = 0.0
    num_input_tokens_seen: int = 0
    prompts_seen: int = 0  # data position: how many prompts (not completions) have been consumed
    log_history: list[dict[str, Any]] = field(default_factory=list)


class RunContext:
    """Resume, metrics, timing, progress, callbacks, checkpoints and Ctrl-C for one ``loop.train()`` call."""

    def __init__(self, config, model, tokenizer, optimizer, scheduler, max_steps: int,
                 callbacks: Sequence[Callable] | None = None, reporters: Sequence[Any] = ()) -> None:
        self.config, self.model, self.tokenizer = config, model, tokenizer
        self.optimizer, self.scheduler = optimizer, scheduler
        self.callbacks, self.reporters = list(callbacks or ()), list(reporters)
        self.output_dir = Path(config.output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.state = LoopState(max_steps=max_steps)
        self.accumulator = MetricsAccumulator()
        self.step_losses: dict[int, float] = {}
        self.checkpoint: Path | None = None
        self.interrupted = False
        self.writer: MetricsWriter | None = None
        self._seconds: dict[str, float] = {}
        self._plain: PlainProgress | None = None
        self._snapshot: dict[str, Any] = {}

    # --- resume ---------------------------------------------------------------------------------------

    def resume(self, rollout_from_dict: Callable[[dict], Any]) -> Any:
        """Restore a checkpoint when the config asks for one (RNG last); returns the saved rollout or None."""
        checkpoint = _checkpoint_to_resume(self.config)
        saved_rollout = None
        if checkpoint is not None:
            saved, rng_state, saved_rollout = load_checkpoint(
                checkpoint, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler)
            for name in ("global_step", "prompts_seen", "epoch", "num_input_tokens_seen", "log_history"):
                setattr(self.state, name, saved[name])
            restore_rng_state(rng_state)
        self.checkpoint = checkpoint
        self.writer = MetricsWriter(self.output_dir / "metrics.jsonl",
                                    keep_up_to_step=self.state.global_step if checkpoint else None)
        self._take_snapshot(saved_rollout)
        return rollout_from_dict(saved_rollout) if saved_rollout is not None else None

    # --- metrics and timing -----------------------------------------------------------------------------

    def log(self, metrics: dict[str, float]) -> None:
        """Add metrics to the current logging window (averaged when the record is written)."""
        self.accumulator.update(metrics)

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Measure a phase of the step; logged as ``timing/<phase>_s``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self._seconds[phase] = time.perf_counter() - start
            self.log({f"timing/{phase}_s": self._seconds[phase]})

    def log_samples(self, prompt_mask: torch.Tensor, lengths: torch.Tensor, is_truncated: torch.Tensor,
                    num_generations: int) -> None:
        """TRL's completion metrics for one generation batch, and generation throughput."""
        self.state.num_input_tokens_seen += int(prompt_mask.sum() * num_generations + lengths.sum())
        lengths = lengths.float()  # (N,)
        terminated = lengths[~is_truncated]
        if terminated.numel() == 0:  # TRL's edge case: no completion ended with EOS
            terminated = torch.zeros(1)
        self.log({
            "num_tokens": self.state.num_input_tokens_seen,
            "completions/mean_length": lengths.mean().item(),
            "completions/min_length": lengths.min().item(),
            "completions/max_length": lengths.max().item(),
            "completions/clipped_ratio": is_truncated.float().mean().item(),
            "completions/mean_terminated_length": terminated.mean().item(),
            "completions/min_terminated_length": terminated.min().item(),
            "completions/max_terminated_length": terminated.max().item(),
            "timing/tokens_per_s": lengths.sum().item() / max(self._seconds.get("generation", 0.0), 1e-9),
        })

    def write_record(self, record: dict[str, Any]) -> None:
        """The one place a metrics record goes out: log_history, metrics.jsonl, reporters."""
        self.state.log_history.append(record)
        self.writer.write(record)
        for reporter in self.reporters:
            reporter.log(record, step=record["step"])
        if self._plain is not None:  # no terminal to draw a bar on: one line per logging step
            self._plain.update(record["step"], self.state.max_steps, record)

    # --- the step -------------------------------------------------------------------------------------

    def end_step(self, step_loss: float, grad_norm: float, rollout: dict[str, Any]) -> None:
        """After the optimizer step: metrics record, callbacks, progress, periodic checkpoint."""
        state, config = self.state, self.config
        state.global_step += 1
        self._take_snapshot(rollout)
        self.step_losses[state.global_step] = step_loss
        self.log({"loss": step_loss, "grad_norm": grad_norm, "learning_rate": self.scheduler.get_last_lr()[0],
                  "step_time": time.perf_counter() - self._step_start})
        self._step_start = time.perf_counter()
        if state.global_step % config.logging_steps == 0 or state.global_step == state.max_steps:
            self.write_record({"step": state.global_step, "epoch": round(state.epoch, 4), **self.accumulator.flush()})
        for callback in self.callbacks:
            callback(state, {"step": state.global_step, "loss": step_loss})
        self._progress.update(self._task, completed=state.global_step,
                              info=f"loss {step_loss:+.4f}{_last_reward_text(state.log_history)}")
        if config.save_steps and (state.global_step % config.save_steps == 0 or state.global_step == state.max_steps):
            self.checkpoint = self._save()

    def _take_snapshot(self, rollout: dict[str, Any] | None) -> None:
        """Everything that moves during a step besides weights/optimizer/scheduler (which only change at its
        end), taken when a step has finished: a Ctrl-C in the middle of the next step saves this."""
        self._snapshot = {"rng": capture_rng_state(), "rollout": rollout, "prompts_seen": self.state.prompts_seen,
                          "epoch": self.state.epoch, "num_input_tokens_seen": self.state.num_input_tokens_seen}

    def _save(self) -> Path:
        state, config, snapshot = self.state, self.config, self._snapshot
        # Mid-block of a reused generation batch, the batch itself is part of the state to continue exactly.
        pending = snapshot["rollout"] if state.global_step % config.num_iterations != 0 else None
        trainer_state = {
            "global_step": state.global_step, "max_steps": state.max_steps, "epoch": snapshot["epoch"],
            "prompts_seen": snapshot["prompts_seen"], "num_input_tokens_seen": snapshot["num_input_tokens_seen"],
            "log_history": state.log_history, "config": {f.name: getattr(config, f.name) for f in fields(config)},
        }
        path = save_checkpoint(self.output_dir / f"checkpoint-{state.global_step}", model=self.model,
                               tokenizer=self.tokenizer, optimizer=self.optimizer, scheduler=self.scheduler,
                               trainer_state=trainer_state, rng_state=snapshot["rng"], rollout=pending)
        rotate_checkpoints(self.output_dir, config.save_total_limit)
        return path

    # --- around the loop ------------------------------------------------------------------------------

    def __enter__(self):  # returns self
        if check_report_to(self.config.report_to):
            self.reporters.append(make_reporter(self.config.report_to, output_dir=self.output_dir,
                                                config=jsonable_config(self.config)))
        terminal = stream_is_terminal()
        self._plain = None if terminal or self.config.disable_tqdm else PlainProgress(start_step=self.state.global_step)
        self._progress = _progress_bar(self.config.disable_tqdm or not terminal)
        self._progress.__enter__()
        self._task = self._progress.add_task("GRPO", total=self.state.max_steps, completed=self.state.global_step,
                                             info="")
        self._step_start = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._progress.__exit__(exc_type, exc, tb)
        for reporter in self.reporters:
            reporter.close()
        if exc_type is None or not issubclass(exc_type, KeyboardInterrupt):
            return False
        # Ctrl-C: keep what the finished steps learned, so `resume_from_checkpoint` continues exactly here.
        self.interrupted = True
        self.optimizer.zero_grad(set_to_none=True)
        if self.state.global_step > 0:
            self.checkpoint = self._save()
            print(f"Interrupted after step {self.state.global_step}; checkpoint saved to {self.checkpoint}. "
                  "Resume with resume_from_checkpoint=True (CLI: --resume).")
        else:
            print("Interrupted before the first optimizer step finished; nothing to save.")
        return True

    def result(self) -> RunResult:
        png = None
        if any(r.get("reward") is not None for r in self.state.log_history):
            from grpo_kit.plots import plot_reward_curve

            png = plot_reward_curve(self.state.log_history, self.output_dir / "reward_curve.png")
        return RunResult(output_dir=self.output_dir, global_step=self.state.global_step,
                         log_history=self.state.log_history, metrics_path=self.writer.path, reward_curve_path=png,
                         checkpoint=self.checkpoint, interrupted=self.interrupted, step_losses=self.step_losses,
                         model=self.model, tokenizer=self.tokenizer)


def _checkpoint_to_resume(config) -> Path | None:
    target = config.resume_from_checkpoint
    if target in (None, False):
        return None
    if target is True:
        found = latest_checkpoint(config.output_dir)
        if found is None:
            raise FileNotFoundError(f"resume_from_checkpoint=True but {config.output_dir} has no checkpoint-<step> "
                                    "folder; run without resuming first, or pass a checkpoint path.")
        return found
    path = Path(target)
    if not path.is_dir():
        raise FileNotFoundError(f"resume_from_checkpoint={target!r} is not a folder; pass a checkpoint-<step> path.")
    return path


def _progress_bar(disable: bool):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), TextColumn("{task.fields[info]}"), disable=disable)


def _last_reward_text(log_history) -> str:
    for record in reversed(log_history):
        if record.get("reward") is not None:
            return f" | reward {record['reward']:.3f}"
    return ""
