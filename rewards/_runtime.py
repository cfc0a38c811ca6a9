"""What every room of ``rewards`` needs to call a reward function: its logged name and a way to run
``async def`` reward functions from sync code (also inside a running event loop).

Kept apart from :mod:`rewards.compose` and :mod:`rewards.calling` so that both can use it and
``compose`` can call :func:`rewards.calling.check_reward_funcs` without an import cycle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

__all__ = ["DeadlineExceeded", "deadline", "reward_name", "run_coroutines"]


def reward_name(fn: Callable) -> str:
    """The name TRL logs a reward function under (``rewards/{name}/mean``)."""
    return getattr(fn, "__name__", None) or type(fn).__name__


def run_coroutines(coros: list) -> list:
    """Run coroutines concurrently and return their results, whether or not a loop is running here."""

    async def gather():
        return await asyncio.gather(*coros)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(gather())
    # Inside a running loop (Jupyter, marimo, an async trainer): asyncio.run would fail here, so the
    # coroutines get their own loop on a helper thread while this thread waits.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        return executor.submit(asyncio.run, gather()).result()


class DeadlineExceeded(BaseException):
    """Raised inside code whose time is up (a BaseException: ``except Exception`` in that code cannot eat it)."""


@contextlib.contextmanager
def deadline(seconds: float | None) -> Iterator[list[bool]]:
    """Within ``seconds``, or :class:`DeadlineExceeded` is raised in this (main) thread; yields ``[fired]``.

    A watchdog thread sends ``SIGUSR1`` to the main thread when the time is up and the handler raises, so
    pure-Python loops and ``time.sleep`` stop; C code that never returns to Python is noticed when it returns
    (``fired[0]`` is then True). Off the main thread (no signals there) nothing is bounded: ``fired`` stays
    False. ``seconds=None``: no bound."""
    fired = [False]
    usable = (
        seconds is not None
        and hasattr(signal, "pthread_kill")
        and threading.current_thread() is threading.main_thread()
    )
    if not usable:
        yield fired
        return

    def on_signal(signum, frame):
        if fired[0]:
            raise DeadlineExceeded

    main_id = threading.main_thread().ident
    done = threading.Event()

    def watchdog():
        if not done.wait(seconds):
            fired[0] = True
            signal.pthread_kill(main_id, signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, on_signal)
    thread = threading.Thread(target=watchdog, name="reward-timeout", daemon=True)
    thread.start()
    try:
        yield fired
    finally:
        done.set()
        thread.join()
        signal.signal(signal.SIGUSR1, previous)
