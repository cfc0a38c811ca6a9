"""``metrics.jsonl``: one JSON object per logging step, with TRL's metric names.

Each line looks like an entry of TRL's ``trainer.state.log_history``::

    {"step": 10, "epoch": 0.31, "loss": 0.0012, "grad_norm": 0.41, "learning_rate": 9.1e-07,
     "reward": -12.5, "reward_std": 8.1, "rewards/length_reward/mean": -12.5, "frac_reward_zero_std": 0.0,
     "completions/mean_length": 41.2, "completions/clipped_ratio": 0.12, "entropy": 2.3,
     "clip_ratio/region_mean": 0.0, ...}

so the same plotting and comparison code reads our loop's logs and TRL's. ``MetricsAccumulator`` is
TRL's ``_metrics`` + ``log()``: values appended during the logging window are averaged, NaN
values are dropped first, and a metric whose every value was NaN is logged as ``None`` (JSON has no NaN).
"""

from __future__ import annotations

import json
import math
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Any

__all__ = ["TRL_METRIC_NAMES", "MetricsAccumulator", "MetricsWriter", "read_metrics"]

# The names the loop logs; they mean what they mean in trl 1.15.0's GRPOTrainer.
TRL_METRIC_NAMES = (
    "loss",
    "grad_norm",
    "learning_rate",
    "num_tokens",
    "completions/mean_length",
    "completions/min_length",
    "completions/max_length",
    "completions/clipped_ratio",
    "completions/mean_terminated_length",
    "completions/min_terminated_length",
    "completions/max_terminated_length",
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "entropy",
    "step_time",
    # conditional: rewards/{name}/mean|std per reward function, kl (beta > 0), clip_ratio/* (clipped losses),
    # cispo_clip_ratio (cispo), vespo/phi_seq_mean (vespo)
)


class MetricsAccumulator:
    """Collect metric values during a logging window; ``flush()`` averages them like TRL's ``log()``."""

    # Metrics that are a running total: the latest value is the one to log, not the window mean.
    LATEST_VALUE = frozenset({"num_tokens"})

    def __init__(self) -> None:
        self._values: dict[str, list[float]] = defaultdict(list)

    def add(self, name: str, value: float) -> None:
        self._values[name].append(float(value))

    def update(self, metrics: dict[str, float]) -> None:
        for name, value in metrics.items():
            self.add(name, value)

    def flush(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for name, values in self._values.items():
            if name in self.LATEST_VALUE:
                out[name] = values[-1]
                continue
            valid = [v for v in values if not math.isnan(v)]
            out[name] = sum(valid) / len(valid) if valid else None
        self._values.clear()
        return out


class MetricsWriter:
    """Append-only ``metrics.jsonl``. On resume, lines past the checkpoint's step are dropped first."""

    def __init__(self, path: str | Path, *, keep_up_to_step: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if keep_up_to_step is None:
            self.path.write_text("")  # a fresh run starts a fresh log
        else:
            # A run killed after its last checkpoint may have logged steps that the resumed run will redo,
            # and one killed while writing may have left half a line: both go.
            kept = [r for r in _read_for_resume(self.path) if r.get("step", 0) <= keep_up_to_step]
            self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(_json_safe(record)) + "\n")


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl`` (missing file -> [])."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _read_for_resume(path: Path) -> list[dict[str, Any]]:
    """:func:`read_metrics`, except that a cut last line (the run was killed mid-write) is dropped with a
    warning; a broken line before the last one is a ``ValueError`` naming it."""
    if not path.exists():
        return []
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            records.append(json.loads(line))
        except ValueError:
            if number < len(lines):
                raise ValueError(
                    f"{path} line {number} is not JSON ({line[:40]!r}); the metrics log is damaged before its "
                    "end. Repair or delete that line, then resume."
                ) from None
            warnings.warn(
                f"{path}: its last line was cut off (the run stopped while writing it: {line[:40]!r}); "
                "dropped, the log continues from the checkpoint.",
                UserWarning,
                stacklevel=3,
            )
    return records


def _json_safe(record: dict[str, Any]) -> dict[str, Any]:
    """NaN/inf are not JSON; log them as None, as TRL does for all-NaN metrics."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in record.items()}
