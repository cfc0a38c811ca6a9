"""The bookkeeping around the standalone loop's steps, kept out of ``loop.train()``.

``RunContext`` owns: resuming (weights, optimizer, scheduler, data position, RNG, a pending rollout),
the metrics (one window accumulator; every record goes through :meth:`RunContext.write_record`, the one
place that appends to ``log_history``, ``metrics.jsonl`` and any ``reporters``), per-step timing, the
progress bar, callbacks, checkpoints, Ctrl-C and SIGTERM (``with run:`` turns either into a checkpoint and a
normal return; :mod:`grpo_kit.support.interrupts`), the guards against bad steps and the :class:`~grpo_kit.artifacts.result.RunResult`.

Bad steps: rewards that are all NaN/None, rewards whose statistics overflow (±1e308: the mean or std is not
finite), a non-finite loss or grad-norm, an optimizer step that makes a trainable weight NaN/inf (undone),
or a reward function that raised with ``on_reward_error="skip"``. Training on them teaches nothing (NaN
advantages give zero loss) or destroys the weights (one NaN update makes every later step NaN), so the step is skipped before the
optimizer moves, reported with the reward functions' names, and counted as ``skipped_steps``;
``max_bad_steps`` in a row stop the run after saving the last good checkpoint (:class:`BadStepsError`).
Each guard (``checked_rewards``, ``check_advantages``, ``checked_step``) raises :class:`BadStep` on a bad
step, so ``loop.train()`` handles every bad step in one place.

Every checkpoint stores the run's configuration (``run_config.json``); resuming from a checkpoint written
with another configuration is refused, listing the fields that differ.

Checkpoints go through ``grpo_kit.artifacts.checkpoint``'s public functions only.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NoReturn

import torch

from grpo_kit.artifacts.checkpoint import (
    CheckpointError,
    capture_rng_state,
    config_diff,
    drop_extended_max_steps,
    jsonable_config,
    load_checkpoint,
    non_finite_parameters,
    read_checkpoint_config,
    restore_rng_state,
    resume_target,
    rotate_checkpoints,
    save_checkpoint,
    trainable_parameters,
)
from grpo_kit.artifacts.metrics_log import MetricsAccumulator, MetricsWriter
from grpo_kit.artifacts.result import RunResult
from grpo_kit.evaluation.signal_watch import SignalWatch
from grpo_kit.support.interrupts import Terminated, sigterm_as_interrupt, stops_reported_by_caller
from grpo_kit.support.reporting import PlainProgress, check_report_to, make_reporter, stream_is_terminal

__all__ = [
    "BOOKKEEPING_FIELDS",
    "BadStep",
    "BadStepWarning",
    "BadStepsError",
    "LoopState",
    "RunContext",
    "loop_config_record",
]

#: Fields that say where a run writes and how often it reports or saves, not what it computes: a resume may
#: change them (e.g. continue from a periodic checkpoint with another save_steps).
BOOKKEEPING_FIELDS = frozenset(
    {
        "output_dir",
        "resume_from_checkpoint",
        "disable_tqdm",
        "logging_steps",
        "save_steps",
        "save_total_limit",
        "report_to",
        "run_name",
        "logging_dir",
        "no_signal_steps",  # the signal watch reads the metrics; it changes nothing a step computes
        "stop_on_no_signal",
    }
)


class BadStepWarning(RuntimeWarning):
    """A training step was skipped: its rewards, loss or gradient were unusable."""


class BadStep(Exception):
    """Raised by a guard when the step in progress is bad (already counted and warned): the loop drops it."""


class BadStepsError(RuntimeError):
    """``max_bad_steps`` steps in a row were skipped; the message names the cause and the saved checkpoint."""


def loop_config_record(config) -> dict[str, Any]:
    """The loop config as a checkpoint stores it: what the run computes (not where it writes)."""
    return {
        f.name: jsonable_config(getattr(config, f.name))
        for f in fields(config)
        if f.name not in BOOKKEEPING_FIELDS
    }


@dataclass
class LoopState:
    """The subset of transformers' ``TrainerState`` that reward functions read (``trainer_state`` kwarg)."""

    global_step: int = 0
    max_steps: int = 0
    epoch: float = 0.0
    num_input_tokens_seen: int = 0
    prompts_seen: int = 0  # data position: how many prompts (not completions) have been consumed
    log_history: list[dict[str, Any]] = field(default_factory=list)


def is_eval_record(record: Mapping[str, Any]) -> bool:
    """A record of the held-out evaluation during training (TRL's ``eval/`` prefix), not a training step's."""
    return any(str(key).startswith("eval/") for key in record)


class RunContext:
    """Resume, metrics, timing, progress, callbacks, checkpoints and Ctrl-C for one ``loop.train()`` call."""

    def __init__(
        self,
        config,
        model,
        tokenizer,
        optimizer,
        scheduler,
        max_steps: int,
        callbacks: Sequence[Callable] | None = None,
        reporters: Sequence[Any] = (),
        run_config: Mapping[str, Any] | None = None,
        evaluate: Callable[[Any, int], Mapping[str, float]] | None = None,
    ) -> None:
        self.config, self.model, self.tokenizer = config, model, tokenizer
        # evaluate(model, step) -> an "eval/..." record, when the config schedules it (eval_strategy="steps")
        self.evaluate = evaluate
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
        self._seconds: dict[str, float] = {}  # per phase, this step so far (grpo_kit.loop.bookkeeping.timed)
        self._last_seconds: dict[str, float] = {}  # per phase, its latest run
        self._plain: PlainProgress | None = None
        self._snapshot: dict[str, Any] = {}
        # The entropy-bonus coefficient (grpo_kit.core.losses.entropy.EntropyControl): part of every checkpoint.
        self.entropy_control: Any = None
        # What every checkpoint records about the run: the loop config, plus what the caller adds (the recipe).
        self.run_config = {**dict(run_config or {}), "loop_config": loop_config_record(config)}
        self.skipped_steps = 0
        self._bad_in_a_row = 0
        self._trainable: list[tuple[str, torch.Tensor]] = []
        # The state before the optimizer step in progress (optimizer_step_kept); None between steps.
        self._undo: tuple | None = None
        self._undo_buffers: list[torch.Tensor] = []
        # Steps in a row without learning signal: one line, and with stop_on_no_signal a saved stop.
        self.watch = SignalWatch.from_settings(vars(config))
        self.stopped_for_no_signal = False

    # --- resume ---------------------------------------------------------------------------------------

    def resume(self, rollout_from_dict: Callable[[dict], Any]) -> Any:
        """Restore a checkpoint when the config asks for one (RNG last); returns the saved rollout or None."""
        checkpoint = resume_target(self.config.output_dir, self.config.resume_from_checkpoint)
        saved_rollout = None
        if checkpoint is not None:
            self._check_same_run(checkpoint)
            saved, rng_state, saved_rollout = load_checkpoint(
                checkpoint, model=self.model, optimizer=self.optimizer, scheduler=self.scheduler
            )
            for name in ("global_step", "prompts_seen", "epoch", "num_input_tokens_seen", "log_history"):
                setattr(self.state, name, saved[name])
            self.watch.replay(self.state.log_history, self.state.max_steps)  # the streak the run had
            if self.entropy_control is not None and "entropy_control" in saved:
                self.entropy_control.load_state_dict(saved["entropy_control"])
            restore_rng_state(rng_state)
        self.checkpoint = checkpoint
        self.writer = MetricsWriter(
            self.output_dir / "metrics.jsonl", keep_up_to_step=self.state.global_step if checkpoint else None
        )
        self._take_snapshot(saved_rollout)
        if checkpoint is not None:
            self._evaluate_if_missed()
        return rollout_from_dict(saved_rollout) if saved_rollout is not None else None

    def _evaluate_if_missed(self) -> None:
        """A stop inside the evaluation after step N (Ctrl-C, SIGTERM) saved checkpoint-N without it: run it now,
        on that checkpoint's weights, before training continues, so the curve (and ``--keep-best``'s choice) has
        every scheduled point. The evaluation forks the RNG: the steps after it draw as they would have."""
        step = self.state.global_step
        if self.evaluate is None or step == 0 or not self.evaluation_due():
            return
        if any(is_eval_record(r) and r.get("step") == step for r in self.state.log_history):
            return
        record = self.evaluate(self.model, step)
        self.write_record({"step": step, "epoch": round(self.state.epoch, 4), **record})

    def _check_same_run(self, checkpoint: Path) -> None:
        """Refuse to continue a checkpoint that another configuration wrote (it would mix two runs)."""
        stored = read_checkpoint_config(checkpoint)
        if stored is None or "loop_config" not in stored:
            return  # written before checkpoints stored their configuration
        diff = config_diff(stored["loop_config"], self.run_config["loop_config"])
        drop_extended_max_steps(diff, "max_steps", checkpoint)  # a longer run continues the same one
        if diff:
            fields_text = "; ".join(
                f"{name}: {old!r} (checkpoint) -> {new!r} (now)" for name, (old, new) in diff.items()
            )
            raise CheckpointError(
                f"{checkpoint} was written by a run with another configuration ({fields_text}); "
                "resume with the same settings, or train into a new output folder."
            )

    # --- bad steps --------------------------------------------------------------------------------------

    def checked_rewards(self, score: Callable[[], torch.Tensor], reward_names: Sequence[str]) -> torch.Tensor:
        """``score()`` -> the ``(N, F)`` rewards; :class:`BadStep` when they are all NaN.

        A reward function that raises (``rewards.RewardFunctionError``: name, row, completion start) stops the
        run after a checkpoint with ``on_reward_error="stop"``, and is a bad step with ``"skip"``.
        """
        from rewards import RewardFunctionError

        try:
            rewards = score()  # (N, F)
        except RewardFunctionError as error:
            if self.config.on_reward_error == "skip":
                self._skip_step(str(error))  # raises BadStep
            saved = self._save_last_good()
            raise RewardFunctionError(
                f"{error} {_saved_text(saved)} Fix the function, or set "
                "on_reward_error='skip' to skip such steps.",
                func_name=error.func_name,
                row=error.row,
            ) from error
        if torch.isnan(rewards).all():  # TRL averages NaN away per row: a row of all NaN has no reward at all
            self._skip_step(
                f"every reward is NaN/None: {', '.join(reward_names)} returned no number for any of "
                f"the {rewards.size(0)} completions"
            )
        return rewards

    def check_advantages(self, rewards: torch.Tensor, advantages: Any, reward_names: Sequence[str]) -> None:
        """:class:`BadStep` unless the ``(N, F)`` rewards (NaN = None) and their statistics are usable.

        Rewards are finite float64 numbers when they leave ``rewards.call_reward_funcs``, but ±1e308 overflow
        in float32 or in the group mean and std, and then every advantage is NaN (TRL trains on it)."""
        stats = {name: advantages.metrics.get(name) for name in ("reward", "reward_std")}
        overflow = bool(torch.isinf(rewards).any()) or not bool(torch.isfinite(advantages.advantages).all())
        overflow = overflow or any(v is not None and not math.isfinite(v) for v in stats.values())
        if not overflow:
            return
        largest = (
            rewards[~torch.isnan(rewards)].abs().max().item() if (~torch.isnan(rewards)).any() else math.nan
        )
        self._skip_step(
            f"the rewards of {', '.join(reward_names)} overflow (largest |reward| {largest:g}; reward mean "
            f"{stats['reward']}, std {stats['reward_std']}), so the advantages are not finite; keep rewards "
            "within about ±1e6"
        )

    def checked_step(
        self, step: Callable[[], None], step_loss: float, grad_norm: float, reward_names: Sequence[str]
    ) -> None:
        """Run ``step()`` (the optimizer step) when the loss and gradient norm are finite, then check the
        trainable weights; :class:`BadStep` (gradients dropped, no update kept) when one is not finite.

        A finite loss and gradient can still give a non-finite update (``adam_epsilon=0`` divides 0 by 0 on a
        step whose gradients are all zero; a huge ``learning_rate`` overflows). Then the step is undone: the
        trainable weights and their optimizer state are put back from the copy taken just before it, and the
        step counts as bad. Simplification: the copy is one fused copy of the trainable weights and their
        AdamW moments into buffers allocated once (with LoRA a few MB; without LoRA as much memory again as
        the weights and moments).
        """
        if not (math.isfinite(step_loss) and math.isfinite(grad_norm)):
            self._skip_step(
                f"loss {step_loss} / grad_norm {grad_norm} is not finite (rewards from "
                f"{', '.join(reward_names)}; a NaN weight or an extreme reward scale are the usual causes)"
            )  # raises BadStep: the optimizer does not move
        self._trainable = self._trainable or trainable_parameters(self.model)
        self._remember_before_step([p for _, p in self._trainable])
        step()
        bad = non_finite_parameters(self._trainable)
        if not bad:
            self._undo = None
            return
        self._undo_step()
        self._skip_step(
            f"the optimizer step made {len(bad)} of {len(self._trainable)} trainable weight tensors NaN/inf "
            f"(first: {bad[0]}); it was undone (rewards from {', '.join(reward_names)}; learning_rate="
            f"{self.config.learning_rate}, adam_epsilon={self.config.adam_epsilon}: a very large learning rate "
            "or adam_epsilon=0 are the usual causes)"
        )

    def _remember_before_step(self, params: list[torch.Tensor]) -> None:
        """Copy the weights and the optimizer state (AdamW updates both in place) into reused buffers."""
        state = self.optimizer.state
        slots = [(p, k, v) for p in params if p in state for k, v in state[p].items() if torch.is_tensor(v)]
        sources = [p.detach() for p in params] + [v for _, _, v in slots]
        buffers = self._undo_buffers
        if len(buffers) != len(sources) or any(b.shape != s.shape for b, s in zip(buffers, sources)):
            buffers = self._undo_buffers = [torch.empty_like(s) for s in sources]
        with torch.no_grad():
            torch._foreach_copy_(buffers, sources)
        self._undo = (params, sources, slots)

    def _undo_step(self) -> None:
        """Put the weights and optimizer state back as they were before the optimizer step in progress."""
        if self._undo is None:
            return
        params, sources, slots = self._undo
        with torch.no_grad():
            torch._foreach_copy_(sources, self._undo_buffers[: len(sources)])
        had_state = {id(p) for p, _, _ in slots}
        for p in params:
            if id(p) not in had_state:
                self.optimizer.state.pop(p, None)  # the step created it: gone with the step
        for p, key, tensor in slots:
            self.optimizer.state[p][key] = tensor  # the very tensors restored above
        self._undo = None

    def _skip_step(self, reason: str) -> NoReturn:
        """Drop the step's gradients, count it, warn and raise :class:`BadStep`; after max_bad_steps in a
        row save and stop (:class:`BadStepsError`). Only the guards call it: the warning points at the line
        that called the guard."""
        reason = reason.rstrip(".")
        self.optimizer.zero_grad(set_to_none=True)
        self.skipped_steps += 1
        self._bad_in_a_row += 1
        self.log({"skipped_steps": self.skipped_steps})
        step = self.state.global_step + 1
        warnings.warn(f"step {step} skipped: {reason}.", BadStepWarning, stacklevel=3)
        if self._bad_in_a_row >= self.config.max_bad_steps:
            saved = self._save_last_good()
            raise BadStepsError(
                f"{self._bad_in_a_row} bad steps in a row (max_bad_steps="
                f"{self.config.max_bad_steps}); the last one: {reason}. {_saved_text(saved)}"
            )
        raise BadStep(reason)

    def _save_last_good(self) -> Path | None:
        """Checkpoint the state after the last finished step (bad steps changed nothing); None before step 1."""
        if self.state.global_step == 0:
            return None
        if self.checkpoint is None or self.checkpoint.name != f"checkpoint-{self.state.global_step}":
            self.checkpoint = self._save()
        return self.checkpoint

    # --- metrics and timing -----------------------------------------------------------------------------

    def log(self, metrics: dict[str, float]) -> None:
        """Add metrics to the current logging window (averaged when the record is written)."""
        self.accumulator.update(metrics)

    @contextlib.contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        """Measure a phase of the step; logged as ``timing/<phase>_s`` when the optimizer step ends, summed
        over the step (a phase timed once per micro-batch adds up; a skipped bad step's time goes to the next
        step, as ``step_time`` does)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self._last_seconds[phase] = time.perf_counter() - start
            self._seconds[phase] = self._seconds.get(phase, 0.0) + self._last_seconds[phase]

    def log_samples(
        self,
        prompt_mask: torch.Tensor,
        lengths: torch.Tensor,
        is_truncated: torch.Tensor,
        num_generations: int,
    ) -> None:
        """TRL's completion metrics for one generation batch, and generation throughput."""
        self.state.num_input_tokens_seen += int(prompt_mask.sum() * num_generations + lengths.sum())
        lengths = lengths.float()  # (N,)
        terminated = lengths[~is_truncated]
        if terminated.numel() == 0:  # TRL's edge case: no completion ended with EOS
            terminated = torch.zeros(1)
        self.log(
            {
                "num_tokens": self.state.num_input_tokens_seen,
                "completions/mean_length": lengths.mean().item(),
                "completions/min_length": lengths.min().item(),
                "completions/max_length": lengths.max().item(),
                "completions/clipped_ratio": is_truncated.float().mean().item(),
                "completions/mean_terminated_length": terminated.mean().item(),
                "completions/min_terminated_length": terminated.min().item(),
                "completions/max_terminated_length": terminated.max().item(),
                "timing/tokens_per_s": lengths.sum().item()
                / max(self._last_seconds.get("generation", 0.0), 1e-9),
            }
        )

    def write_record(self, record: dict[str, Any]) -> None:
        """The one place a metrics record goes out: log_history, metrics.jsonl, reporters."""
        self.state.log_history.append(record)
        self.writer.write(record)
        for reporter in self.reporters:
            reporter.log(record, step=record["step"])
        if self._plain is not None and not is_eval_record(record):  # no terminal: one line per logging step
            self._plain.update(record["step"], self.state.max_steps, record)
        if not is_eval_record(record) and self.watch.observe(record, self.state.max_steps):
            self.stopped_for_no_signal = True  # end_step saves and the loop ends

    # --- the step -------------------------------------------------------------------------------------

    def end_step(self, step_loss: float, grad_norm: float, rollout: dict[str, Any]) -> None:
        """After the optimizer step: metrics record, callbacks, progress, periodic checkpoint."""
        state, config = self.state, self.config
        state.global_step += 1
        self._bad_in_a_row = 0
        self._take_snapshot(rollout)
        self.step_losses[state.global_step] = step_loss
        self.log(
            {
                "loss": step_loss,
                "grad_norm": grad_norm,
                "learning_rate": self.scheduler.get_last_lr()[0],
                "step_time": time.perf_counter() - self._step_start,
                **{f"timing/{phase}_s": seconds for phase, seconds in self._seconds.items()},
            }
        )
        self._seconds.clear()
        if state.global_step % config.logging_steps == 0 or state.global_step == state.max_steps:
            self.write_record(
                {"step": state.global_step, "epoch": round(state.epoch, 4), **self.accumulator.flush()}
            )
        if self.evaluation_due():  # TRL's schedule: every eval_steps, and the last step
            record = self.evaluate(self.model, state.global_step)
            self.write_record({"step": state.global_step, "epoch": round(state.epoch, 4), **record})
        for callback in self.callbacks:  # after the step's records, its evaluation included
            callback(state, {"step": state.global_step, "loss": step_loss})
        self._step_start = time.perf_counter()  # callbacks and evaluation are not the next step's time
        self._progress.update(
            self._task,
            completed=state.global_step,
            info=f"loss {step_loss:+.4f}{_last_reward_text(state.log_history)}",
        )
        if config.save_steps and (
            state.global_step % config.save_steps == 0 or state.global_step == state.max_steps
        ):
            self.checkpoint = self._save()
        if self.stopped_for_no_signal:  # the signal watch: saved and resumable, as after Ctrl-C
            self.interrupted = True
            if self.checkpoint is None or self.checkpoint.name != f"checkpoint-{state.global_step}":
                self.checkpoint = self._save()
            if not stops_reported_by_caller():  # the CLI prints its own one line, with the resume command
                print(f"{self.watch.line()} Checkpoint saved to {self.checkpoint}.")

    def evaluation_due(self) -> bool:
        """Whether the held-out rows are evaluated after this step: ``eval_strategy="steps"``, every ``eval_steps``
        optimizer steps and at the last one (``transformers.DefaultFlowCallback``'s rule, which the TRL path
        follows)."""
        config, step = self.config, self.state.global_step
        if config.eval_strategy != "steps":
            return False
        return step % config.eval_steps == 0 or step == self.state.max_steps

    def _take_snapshot(self, rollout: dict[str, Any] | None) -> None:
        """Everything that moves during a step besides weights/optimizer/scheduler (which only change at its
        end), taken when a step has finished: a Ctrl-C in the middle of the next step saves this."""
        self._snapshot = {
            "rng": capture_rng_state(),
            "rollout": rollout,
            "prompts_seen": self.state.prompts_seen,
            "epoch": self.state.epoch,
            "num_input_tokens_seen": self.state.num_input_tokens_seen,
            "entropy_control": None if self.entropy_control is None else self.entropy_control.state_dict(),
        }

    def _save(self) -> Path:
        state, config, snapshot = self.state, self.config, self._snapshot
        # Mid-block of a reused generation batch, the batch itself is part of the state to continue exactly.
        pending = snapshot["rollout"] if state.global_step % config.num_iterations != 0 else None
        trainer_state = {
            "global_step": state.global_step,
            "max_steps": state.max_steps,
            "epoch": snapshot["epoch"],
            "prompts_seen": snapshot["prompts_seen"],
            "num_input_tokens_seen": snapshot["num_input_tokens_seen"],
            "log_history": state.log_history,
            # every field, JSON-safe (resume_from_checkpoint may be a Path: --resume <run>/checkpoint-N)
            "config": {f.name: jsonable_config(getattr(config, f.name)) for f in fields(config)},
        }
        if snapshot.get("entropy_control") is not None:  # TRL keeps it in entropy_ctrl_state.json
            trainer_state["entropy_control"] = snapshot["entropy_control"]
        path = save_checkpoint(
            self.output_dir / f"checkpoint-{state.global_step}",
            model=self.model,
            tokenizer=self.tokenizer,
            optimizer=self.optimizer,
            scheduler=self.scheduler,
            trainer_state=trainer_state,
            rng_state=snapshot["rng"],
            rollout=pending,
            config=self.run_config,
        )
        rotate_checkpoints(self.output_dir, config.save_total_limit)
        return path

    # --- around the loop ------------------------------------------------------------------------------

    def __enter__(self):  # returns self
        self._sigterm = sigterm_as_interrupt()  # SIGTERM (kill, timeout, docker stop) saves like Ctrl-C
        self._sigterm.__enter__()
        if check_report_to(self.config.report_to):
            self.reporters.append(
                make_reporter(
                    self.config.report_to, output_dir=self.output_dir, config=jsonable_config(self.config)
                )
            )
        terminal = stream_is_terminal()
        self._plain = (
            None if terminal or self.config.disable_tqdm else PlainProgress(start_step=self.state.global_step)
        )
        self._progress = _progress_bar(self.config.disable_tqdm or not terminal)
        self._progress.__enter__()
        self._task = self._progress.add_task(
            "GRPO", total=self.state.max_steps, completed=self.state.global_step, info=""
        )
        self._step_start = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            self._progress.__exit__(exc_type, exc, tb)
            for reporter in self.reporters:
                reporter.close()
            if exc_type is None or not issubclass(exc_type, KeyboardInterrupt):
                return False
            # Ctrl-C or SIGTERM: keep what the finished steps learned, so `resume_from_checkpoint` continues
            # exactly here. A second signal while saving stops the save: the checkpoint is written under a
            # temporary name, which a resume skips (naming it).
            self.interrupted = True
            self._undo_step()  # a signal inside an optimizer step: the state before it is the one to keep
            self.optimizer.zero_grad(set_to_none=True)
            what = "Terminated (SIGTERM)" if issubclass(exc_type, Terminated) else "Interrupted"
            if self.state.global_step > 0:
                self.checkpoint = self._save()
                ending = (
                    f"{what} after step {self.state.global_step}; checkpoint saved to {self.checkpoint}. "
                    "Resume with resume_from_checkpoint=True (CLI: --resume)."
                )
            else:
                ending = f"{what} before the first optimizer step finished; nothing to save."
            if not stops_reported_by_caller():  # the CLI prints its own one line, with the resume command
                print(ending)
            return True
        finally:
            self._sigterm.__exit__(None, None, None)

    def result(self) -> RunResult:
        from grpo_kit.artifacts.plots import can_plot, plot_reward_curve

        png = None
        if any(r.get("reward") is not None for r in self.state.log_history) and can_plot("reward_curve.png"):
            png = plot_reward_curve(self.state.log_history, self.output_dir / "reward_curve.png")
        return RunResult(
            output_dir=self.output_dir,
            global_step=self.state.global_step,
            log_history=self.state.log_history,
            metrics_path=self.writer.path,
            reward_curve_path=png,
            checkpoint=self.checkpoint,
            interrupted=self.interrupted,
            no_signal=self.watch.record(),
            step_losses=self.step_losses,
            model=self.model,
            tokenizer=self.tokenizer,
        )


def _saved_text(checkpoint: Path | None) -> str:
    if checkpoint is None:
        return "No step had finished, so there is no checkpoint."
    return f"The last good state is saved in {checkpoint} (resume from it once fixed)."


def _progress_bar(disable: bool):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
        disable=disable,
    )


def _last_reward_text(log_history) -> str:
    for record in reversed(log_history):
        if record.get("reward") is not None:
            return f" | reward {record['reward']:.3f}"
    return ""
