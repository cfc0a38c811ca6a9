"""The signal watch: a run that has stopped learning says so, and stops saved, on every training path.

GRPO learns only from groups whose rewards differ (``grpo_kit.evaluation.preflight``). The watch reads each
training record the run logs (TRL's names, which the standalone loop logs too): a step where every group has
zero reward variance (``frac_reward_zero_std`` = 1) or where pre-flight's no-go share of completions hit
``max_completion_length`` (``completions/clipped_ratio``) taught nothing. After ``no_signal_steps`` such steps
in a row it names the cause and the fix in pre-flight's NO-GO words; with ``stop_on_no_signal`` (the default)
the run then stops at that step, its checkpoint saved (the same ending as Ctrl-C, resumable), unless it was the
last step anyway. ``stop_on_no_signal=false`` keeps training: the line is printed once and ``no_signal``
(:meth:`SignalWatch.record`) lands in the run's result and ``run.json``.

A record that averages ``logging_steps`` steps counts as that many steps: a share of 1 over the window means
every step in it was flat. The watch only reads the metrics: the steps it watches compute what they would
without it. The loop feeds it in ``grpo_kit.loop.bookkeeping.RunContext``; TRL and Unsloth through a
``TrainerCallback`` (``grpo_kit.trainers.run``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grpo_kit.config.rules import training_value
from grpo_kit.evaluation.preflight import CLIPPED_NO_GO, clipped_finding, zero_std_finding

__all__ = ["KEEP_TRAINING", "SignalWatch"]

#: The setting that keeps a run without signal training, as the stop line spells it.
KEEP_TRAINING = "--set stop_on_no_signal=false"
_ALL_FLAT = 1.0 - 1e-9  # frac_reward_zero_std is a mean of 0/1 flags: every group flat


class SignalWatch:
    """Counts the steps in a row without learning signal; :meth:`observe` each training record."""

    def __init__(
        self,
        steps: int,
        stop: bool,
        max_completion_length: int,
        logging_steps: int = 1,
        say: Callable[[str], Any] = print,
    ) -> None:
        self.steps, self.stop, self.max_completion_length = steps, stop, max_completion_length
        self.logging_steps, self.say = logging_steps, say
        self._in_a_row = 0
        self._first_step: int | None = None
        self._last_step = 0
        self._lowest: dict[str, float] = {}
        self._spoken: tuple[int, int, int] | None = None  # (first step, last step, steps) of the streak named
        self.finding = None  # the preflight.Finding once the watch has spoken
        self.stopped_at: int | None = None  # the step the run stopped at, when it stopped

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], say: Callable[[str], Any] = print) -> SignalWatch:
        """A watch at a run's ``no_signal_steps``, ``stop_on_no_signal``, ``max_completion_length`` and
        ``logging_steps`` (a recipe's ``training``, or a config's fields through ``vars``)."""
        logging_steps = training_value(settings, "logging_steps")
        return cls(
            int(training_value(settings, "no_signal_steps")),
            bool(training_value(settings, "stop_on_no_signal")),
            int(training_value(settings, "max_completion_length")),
            max(int(logging_steps), 1) if logging_steps >= 1 else 1,  # TRL's float: a fraction of the run
            say,
        )

    def observe(self, record: Mapping[str, Any], max_steps: int) -> bool:
        """Read one logged record (an evaluation's or a partial one is skipped); True when the run should stop
        now: the watch has just found ``steps`` steps in a row without signal, stopping is on and steps remain.
        Otherwise the line with the cause and the fix is printed (once per run)."""
        zero_std, clipped = record.get("frac_reward_zero_std"), record.get("completions/clipped_ratio")
        step = record.get("step")
        if step is None or (zero_std is None and clipped is None):
            return False
        # a record stands for the steps since the previous one (at most logging_steps: a resumed run's first)
        span = max(min(int(step) - self._last_step, self.logging_steps), 1)
        self._last_step = int(step)
        flat = {"zero_std": zero_std, "clipped": clipped}
        flat = {
            code: float(value)
            for code, value in flat.items()
            if value is not None and value >= (_ALL_FLAT if code == "zero_std" else CLIPPED_NO_GO)
        }
        if not flat:
            self._in_a_row, self._first_step, self._lowest = 0, None, {}
            return False
        self._first_step = self._first_step or int(step) - span + 1
        self._in_a_row += span
        self._lowest = {code: min(value, self._lowest.get(code, value)) for code, value in flat.items()}
        if self.finding is not None and self._spoken[0] == self._first_step:  # the named streak goes on
            self._spoken = (self._first_step, self._last_step, self._in_a_row)
        if self._in_a_row < self.steps or self.finding is not None:
            return False
        self._spoken = (self._first_step, self._last_step, self._in_a_row)
        share = self._lowest.get("clipped")  # no EOS is the cause upstream: flat rewards follow from it
        self.finding = (
            clipped_finding(share, self.max_completion_length, no_go=True)
            if share is not None
            else zero_std_finding(self._lowest["zero_std"], no_go=True)
        )
        if self.stop and int(step) < max_steps:
            self.stopped_at = int(step)
            return True
        self.say(self.line())
        return False

    def replay(self, records: Sequence[Mapping[str, Any]], max_steps: int) -> None:
        """A resumed run's watch: the records logged before its checkpoint are read again, silently (nothing is
        printed, nothing stops: those steps are past), so the streak and the finding are the ones the run had, and
        run.json names the same cause as a run nobody stopped."""
        say, stop = self.say, self.stop
        self.say, self.stop = (lambda _line: None), False
        try:
            for record in records:
                if not any(str(key).startswith("eval/") for key in record):
                    self.observe(record, max_steps)
        finally:
            self.say, self.stop = say, stop

    def line(self) -> str:
        """The one line: how long there was no signal, the cause and the fix (pre-flight's words)."""
        first, last, steps = self._spoken
        finding = self.finding
        if self.stopped_at is not None:
            return (
                f"Stopped at step {self.stopped_at}, no learning signal for {steps} steps in a row: "
                f"{finding.message} Fix: {finding.fix.rstrip('.')} (keep training anyway: {KEEP_TRAINING})."
            )
        return (
            f"No learning signal for {steps} steps in a row (steps {first}-{last}): {finding.message} "
            f"Fix: {finding.fix}"
        )

    def record(self) -> dict[str, Any] | None:
        """What ``run.json["no_signal"]`` holds (None while the watch has not spoken)."""
        if self.finding is None:
            return None
        return {
            "cause": self.finding.code,
            "message": self.finding.message,
            "fix": self.finding.fix,
            "steps": self._spoken[2],
            "first_step": self._spoken[0],
            "last_step": self._spoken[1],
            "stopped_at": self.stopped_at,
            "line": self.line(),
        }
