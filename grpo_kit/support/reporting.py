"""Where a standalone run's metrics go besides ``metrics.jsonl``: TRL's ``report_to``, and plain progress lines.

``report_to`` takes the values and meaning of ``transformers.TrainingArguments.report_to`` (what TRL's
``GRPOConfig`` inherits): ``"none"`` (or ``None``, ``[]``) reports nowhere, ``"all"`` to every supported
backend whose package is installed, a name or a list of names to those. The standalone loop supports the
three backends a GRPO user reaches for:

* ``"trackio"`` — local-first: a SQLite file under ``$TRACKIO_DIR`` (default ``~/.cache/huggingface/trackio``),
  works offline; watch a run live with ``trackio show``.
* ``"tensorboard"`` — event files under ``<output_dir>/runs``; ``tensorboard --logdir <output_dir>/runs``.
* ``"wandb"`` — Weights & Biases; ``WANDB_MODE=offline`` keeps it on disk.

Metric names are the ones a TRL run shows in these tools: the record's TRL names (``reward``, ``loss``,
``rewards/<fn>/mean``, …) passed through transformers' own ``rewrite_logs`` (``train/reward``), so a standalone
run and a ``GRPOTrainer`` run line up on the same chart.

``PlainProgress`` is the progress display where a rich bar cannot draw (stdout not a terminal: CI logs,
``make train | tee``, some notebook front-ends): one flushed line per logging step.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "REPORT_BACKENDS",
    "PlainProgress",
    "Reporter",
    "check_report_to",
    "make_reporter",
    "stream_is_terminal",
]

INSTALL_HINT = 'pip install "grpo-kit[logging]"'
# backend name -> the module its package provides (looked up with find_spec: nothing is imported to check).
REPORT_BACKENDS: dict[str, str] = {"trackio": "trackio", "tensorboard": "tensorboard", "wandb": "wandb"}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def check_report_to(value: str | Sequence[str] | None) -> list[str]:
    """``report_to`` as TRL reads it -> the backends to report to; errors name the fix.

    Raises ``ValueError`` for an unknown name and ``ImportError`` (naming the extra) when a named backend's
    package is missing. ``"all"`` never raises for missing packages: it means "whatever is installed".
    """
    if value is None:
        return []
    names = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"report_to must be a string or a list of strings, got {value!r}.")
    if names in ([], ["none"]):
        return []
    if names == ["all"]:
        return [name for name, module in REPORT_BACKENDS.items() if _installed(module)]
    if "none" in names or "all" in names:
        raise ValueError(f"report_to={value!r}: 'none' and 'all' stand alone, not inside a list.")
    unknown = [n for n in names if n not in REPORT_BACKENDS]
    if unknown:
        raise ValueError(
            f"report_to: {unknown} is not supported by grpo-kit; use one of {sorted(REPORT_BACKENDS)}, "
            "'all' or 'none' (or a list of them)."
        )
    missing = [n for n in names if not _installed(REPORT_BACKENDS[n])]
    if missing:
        raise ImportError(f"report_to={value!r} needs {missing}, not installed: {INSTALL_HINT}")
    return list(dict.fromkeys(names))


def _scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """The record's numbers under the names a TRL run shows (``train/reward``); None/NaN/text dropped."""
    from transformers.integrations.integration_utils import rewrite_logs

    numbers = {
        k: float(v)
        for k, v in record.items()
        if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }
    return rewrite_logs(numbers)


class _TensorBoard:
    def __init__(
        self, output_dir: Path, project: str, run_name: str | None, config: Mapping[str, Any]
    ) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(output_dir / "runs"))
        self.writer.add_text("config", "\n".join(f"    {k}: {v}" for k, v in config.items()))

    def log(self, scalars: dict[str, float], step: int) -> None:
        for name, value in scalars.items():
            self.writer.add_scalar(name, value, step)
        self.writer.flush()  # a live `tensorboard --logdir` sees each step

    def close(self) -> None:
        self.writer.close()


class _Trackio:
    def __init__(
        self, output_dir: Path, project: str, run_name: str | None, config: Mapping[str, Any]
    ) -> None:
        import trackio

        self.trackio = trackio
        # auto_log_*: no background system-metric threads; embed: no dashboard inside a notebook cell.
        self.run = trackio.init(
            project=project,
            name=run_name,
            config=dict(config),
            embed=False,
            auto_log_cpu=False,
            auto_log_gpu=False,
        )

    def log(self, scalars: dict[str, float], step: int) -> None:
        self.trackio.log(scalars, step=step)

    def close(self) -> None:
        self.trackio.finish()


class _Wandb:
    def __init__(
        self, output_dir: Path, project: str, run_name: str | None, config: Mapping[str, Any]
    ) -> None:
        import wandb

        # mode comes from WANDB_MODE (offline/online/disabled), as with TRL.
        self.run = wandb.init(project=project, name=run_name, config=dict(config), dir=str(output_dir))

    def log(self, scalars: dict[str, float], step: int) -> None:
        self.run.log(scalars, step=step)

    def close(self) -> None:
        self.run.finish()


_BACKENDS: dict[str, Callable[..., Any]] = {"trackio": _Trackio, "tensorboard": _TensorBoard, "wandb": _Wandb}


class Reporter:
    """Fans one logged record out to the chosen backends. ``log(record, step)`` per logging step, then ``close()``."""

    def __init__(self, backends: Mapping[str, Any]) -> None:
        self.backends = dict(backends)

    def log(self, record: Mapping[str, Any], step: int) -> None:
        if not self.backends:
            return
        scalars = _scalars(record)
        for backend in self.backends.values():
            backend.log(scalars, step)

    def close(self) -> None:
        for backend in self.backends.values():
            backend.close()
        self.backends = {}

    def __enter__(self) -> Reporter:  # noqa: PYI034 (Self needs Python 3.11)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_reporter(
    report_to: str | Sequence[str] | None,
    *,
    output_dir: str | Path,
    project: str = "grpo-kit",
    run_name: str | None = None,
    config: Mapping[str, Any] | None = None,
) -> Reporter:
    """A ``Reporter`` for ``report_to`` (validated by ``check_report_to``); ``run_name`` defaults to the folder name."""
    names = check_report_to(report_to)
    output_dir = Path(output_dir)
    run_name = run_name or output_dir.name
    return Reporter({name: _BACKENDS[name](output_dir, project, run_name, config or {}) for name in names})


def stream_is_terminal(stream: TextIO | None = None) -> bool:
    """Whether a rich progress bar can draw on ``stream`` (default stdout); else use ``PlainProgress``."""
    stream = sys.stdout if stream is None else stream
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


class PlainProgress:
    """One flushed line per logging step: ``step 3/24 · reward -12.50 · loss 0.0012 · 4.9 s/step · ETA 1m 42s``.

    s/step is the mean wall time per step over the last ``window`` progress lines (fewer at the start: from
    ``start_step``, the step a resumed run starts from), and the ETA is that times the steps left. Recent
    steps, not the mean since the start: on a shared machine the speed changes during a run, and the
    recent steps are what the next ones will be like (simplification: no weighting within the window).
    """

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        start_step: int = 0,
        clock: Callable[[], float] = time.monotonic,
        window: int = 5,
    ):
        from collections import deque

        self.stream = sys.stdout if stream is None else stream
        self.clock = clock
        self.start_step = start_step
        self.start_time = clock()
        # (step, time) of the reference point and the last `window` lines: the speed is read across them.
        self.points: deque[tuple[int, float]] = deque([(start_step, self.start_time)], maxlen=window + 1)

    def format(self, step: int, total: int, record: Mapping[str, Any]) -> str:
        parts = [f"step {step}/{total}"]
        for name in ("reward", "loss"):
            value = record.get(name)
            if isinstance(value, (int, float)) and math.isfinite(value):
                parts.append(f"{name} {value:.4g}")
        now = self.clock()
        if step > self.points[-1][0]:
            self.points.append((step, now))
        old_step, old_time = self.points[0]
        done = self.points[-1][0] - old_step
        if done > 0:
            per_step = (self.points[-1][1] - old_time) / done
            parts += [f"{per_step:.1f} s/step", f"ETA {_duration(per_step * max(total - step, 0))}"]
        return " · ".join(parts)

    def update(self, step: int, total: int, record: Mapping[str, Any]) -> None:
        print(self.format(step, total, record), file=self.stream, flush=True)
