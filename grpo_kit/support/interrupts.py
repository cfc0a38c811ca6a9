"""Endings that come from outside the run: SIGTERM and a closed stdout.

* **SIGTERM** (``kill``, ``timeout``, ``docker stop``, SLURM preemption) is turned into :class:`Terminated`, a
  ``KeyboardInterrupt``: every place that saves a checkpoint on Ctrl-C saves one on SIGTERM too, and the CLI
  exits with ``128 + signal`` (143) instead of 130 (:func:`exit_status`).
* **A closed stdout** (``grpo-kit train | head``) makes the next ``print`` raise ``BrokenPipeError``; through
  :func:`guard_stdout` the first such write points file descriptor 1 at ``/dev/null`` instead, so progress
  printing stops and training goes on to its checkpoint, exports and ``run.json``.

Simplification: the handlers are installed from the main thread only (Python allows nothing else); a run in
another thread keeps the process's handlers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator

__all__ = [
    "Terminated",
    "caller_reports_stops",
    "exit_status",
    "forget_signals",
    "guard_stdout",
    "note_signal",
    "received_signal",
    "sigterm_as_interrupt",
    "stops_reported_by_caller",
]

_received: list[int] = []  # the signals that ended (or are ending) this process's run, in order
_reporters: list[object] = []  # callers (the CLI) that print the ending line of an interrupted run themselves


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: handled like Ctrl-C (checkpoint, resume command), exit status 143."""


def note_signal(signum: int) -> None:
    """Record that ``signum`` asked the run to stop (the TRL path's graceful stop records it here too)."""
    _received.append(int(signum))


def forget_signals() -> None:
    """Start a new run's record (a process that runs several, such as a test session or a notebook)."""
    _received.clear()


def received_signal() -> int | None:
    """The last SIGINT/SIGTERM that asked this process to stop, or None."""
    return _received[-1] if _received else None


def exit_status(default: int = 130) -> int:
    """``128 + signal`` for the signal that stopped the run (143 for SIGTERM), else ``default``."""
    signum = received_signal()
    return 128 + signum if signum is not None else default


@contextlib.contextmanager
def caller_reports_stops() -> Iterator[None]:
    """While inside, the caller prints the one line that ends an interrupted run (the CLI's, with the
    exact resume command), so the training loop saves its checkpoint without a line of its own."""
    token = object()
    _reporters.append(token)
    try:
        yield
    finally:
        _reporters.remove(token)


def stops_reported_by_caller() -> bool:
    """True inside :func:`caller_reports_stops`: the loop stays quiet about an interruption."""
    return bool(_reporters)


def _raise_terminated(signum, frame):
    note_signal(signum)
    raise Terminated(f"signal {signal.Signals(signum).name}")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside: SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``) in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class _GuardedStream:
    """``sys.stdout`` that survives its reader going away: on ``BrokenPipeError`` fd 1 becomes /dev/null."""

    def __init__(self, stream):
        self._stream = stream
        self.closed_by_reader = False

    def _detach(self) -> None:
        self.closed_by_reader = True
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)

    def write(self, text):
        if self.closed_by_reader:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._detach()
            return len(text)

    def flush(self):
        if self.closed_by_reader:
            return None
        try:
            return self._stream.flush()
        except BrokenPipeError:
            self._detach()
            return None

    def __getattr__(self, name):
        return getattr(self._stream, name)


@contextlib.contextmanager
def guard_stdout() -> Iterator[None]:
    """While inside, a closed stdout silences printing instead of raising ``BrokenPipeError``."""
    original = sys.stdout
    if original is None or isinstance(original, _GuardedStream):
        yield
        return
    sys.stdout = _GuardedStream(original)
    try:
        yield
    finally:
        guarded, sys.stdout = sys.stdout, original
        if isinstance(guarded, _GuardedStream) and guarded.closed_by_reader:
            with contextlib.suppress(OSError, ValueError):
                original.flush()  # fd 1 is /dev/null now: the buffer drains without an error at exit
