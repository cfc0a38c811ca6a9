"""Issue 24 (7): a reward function that blocks, sync or async, is stopped at ``reward_timeout`` with an error
naming it, in ``call_reward_funcs`` (the loop) and in ``bounded_reward_func`` (what TRL's trainer calls)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from rewards import RewardFunctionError
from rewards.calling import bounded_reward_func, call_reward_funcs


def stuck_judge(completions, **kwargs):
    time.sleep(60)
    return [1.0] * len(completions)


def busy_judge(completions, **kwargs):
    while True:  # a pure-Python loop that never ends
        pass


async def stuck_async_judge(completions, **kwargs):
    await asyncio.sleep(60)
    return [1.0] * len(completions)


async def blocking_async_judge(completions, **kwargs):
    time.sleep(60)  # noqa: ASYNC251 - blocks the event loop itself, on purpose
    return [1.0] * len(completions)


def quick(completions, **kwargs):
    return [0.5] * len(completions)


@pytest.mark.parametrize("fn", [stuck_judge, busy_judge, stuck_async_judge, blocking_async_judge])
def test_a_blocking_reward_function_is_stopped_at_the_timeout(fn):
    started = time.monotonic()
    with pytest.raises(
        RewardFunctionError, match=rf"{fn.__name__} did not return within 0.5 s \(reward_timeout\)"
    ):
        call_reward_funcs([quick, fn], ["p", "q"], ["a", "b"], timeout=0.5)
    assert time.monotonic() - started < 10


def test_the_timeout_is_kept_off_the_main_thread_too():
    errors = []

    def worker():
        try:
            call_reward_funcs([stuck_judge], ["p"], ["a"], timeout=0.5)
        except RewardFunctionError as error:
            errors.append(error)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(10)
    assert not thread.is_alive() and errors and "reward_timeout" in str(errors[0])


def test_functions_in_time_are_untouched_and_bad_timeouts_are_refused():
    assert call_reward_funcs([quick], ["p"], ["a"], timeout=5) == [[0.5]]
    for bad in (0, -1, float("inf"), "10", True):
        with pytest.raises(ValueError, match="reward_timeout"):
            call_reward_funcs([quick], ["p"], ["a"], timeout=bad)


def test_bounded_reward_func_keeps_the_name_and_kind_trl_reads():
    sync, coro = bounded_reward_func(stuck_judge, 0.5), bounded_reward_func(stuck_async_judge, 0.5)
    assert sync.__name__ == "stuck_judge" and coro.__name__ == "stuck_async_judge"
    assert asyncio.iscoroutinefunction(coro) and not asyncio.iscoroutinefunction(sync)
    with pytest.raises(RewardFunctionError, match="stuck_judge did not return within 0.5 s"):
        sync(completions=["a"], prompts=["p"])
    with pytest.raises(RewardFunctionError, match="stuck_async_judge did not return within 0.5 s"):
        asyncio.run(coro(completions=["a"], prompts=["p"]))
    assert bounded_reward_func(quick, 5)(completions=["a"]) == [0.5]
    assert bounded_reward_func(quick, None) is quick
