"""What every room of ``rewards`` needs to call a reward function: its logged name and a way to run
``async def`` reward functions from sync code (also inside a running event loop).

Kept apart from :mod:`rewards.compose` and :mod:`rewards.calling` so that both can use it and
``compose`` can call :func:`rewards.calling.check_reward_funcs` without an import cycle.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable

__all__ = ["reward_name", "run_coroutines"]


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
