"""The one way grpo-kit calls reward functions: checked before training, scored as TRL scores them.

* :func:`check_reward_funcs` — run where reward functions are *accepted* (every training path,
  ``combine``, ``lint``), before any model loads. It refuses what would fail only at the first
  reward computation: something not callable, a reward *factory* passed uncalled
  (``length_reward`` instead of ``length_reward(50)``), a function that cannot take TRL's keyword
  arguments.
* :func:`call_reward_funcs` — call every function TRL's way (``fn(prompts=..., completions=...,
  completion_ids=..., **columns)``), sync or ``async def``, and return an ``(N, F)`` table of floats
  with ``NaN`` where a function returned ``None`` (TRL's convention). Lengths and values are checked;
  a function that raises is reported with its name, the first row that fails and the start of that
  completion (:class:`RewardFunctionError`). ``timeout=`` bounds each call's wall-clock time.

Timeouts (simplification): in the main thread a watchdog thread sends ``SIGUSR1`` to it when the time is up,
and the handler raises inside the reward function, so pure-Python loops and ``time.sleep`` are stopped; C code
that never returns to Python (and a function that swallows ``BaseException``) is only noticed when it
returns. Outside the main thread the call runs in a daemon thread that is abandoned when it overruns.
``async def`` functions are also bounded with ``asyncio.wait_for``.

Pure Python: the training loop turns the table into a tensor, evaluation and samples average it.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ._runtime import DeadlineExceeded, deadline, reward_name, run_coroutines

__all__ = ["RewardFunctionError", "bounded_reward_func", "call_reward_funcs", "check_reward_funcs"]

# What TRL's GRPOTrainer passes to every reward function besides the dataset's columns.
TRL_REWARD_KWARGS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")


class RewardFunctionError(RuntimeError):
    """A reward function raised or returned something unusable; the message names it and the row."""

    def __init__(self, message: str, *, func_name: str, row: int | None = None):
        super().__init__(message)
        self.func_name = func_name
        self.row = row


def _call_bounded(fn: Callable, kwargs: dict[str, Any], seconds: float | None) -> tuple[Any, bool]:
    """``(fn(**kwargs), timed_out)``; see the module docstring for how the bound is kept."""
    if seconds is None:
        return fn(**kwargs), False
    if threading.current_thread() is threading.main_thread():
        try:
            with deadline(seconds) as fired:
                result = fn(**kwargs)
        except DeadlineExceeded:
            return None, True
        return result, fired[0]
    box: dict[str, Any] = {}

    def target():
        try:
            box["result"] = fn(**kwargs)
        except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = error

    worker = threading.Thread(target=target, name="reward-function", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        return None, True
    if "error" in box:
        raise box["error"]
    return box.get("result"), False


def _check_timeout(seconds: Any) -> None:
    if seconds is not None and (
        isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds < math.inf
    ):
        raise ValueError(
            f"reward_timeout={seconds!r}: give the seconds a reward function may take (a positive number, "
            "e.g. 600), or None for no bound."
        )


def _timed_out(fn: Callable, seconds: float) -> RewardFunctionError:
    name = reward_name(fn)
    return RewardFunctionError(
        f"reward function {name} did not return within {seconds:g} s (reward_timeout). A reward function must "
        "not wait without a bound: give its network calls, subprocesses and locks their own timeouts, make it "
        "faster, or raise reward_timeout (--set reward_timeout=SECONDS).",
        func_name=name,
    )


def bounded_reward_func(fn: Callable, seconds: float | None) -> Callable:
    """``fn`` with the wall-clock bound ``call_reward_funcs(timeout=seconds)`` keeps, for trainers that call
    reward functions themselves (TRL's GRPOTrainer): same name, sync or ``async`` like ``fn``; overrunning
    raises :class:`RewardFunctionError`. ``seconds=None`` returns ``fn`` itself."""
    import functools

    _check_timeout(seconds)
    if seconds is None or isinstance(fn, str) or hasattr(fn, "forward"):  # reward models are TRL's own
        return fn
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - an async __call__ of a callable object
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call):

        @functools.wraps(fn)
        async def bounded_async(*args, **kwargs):
            try:
                return await asyncio.wait_for(fn(*args, **kwargs), seconds)
            except TimeoutError:
                raise _timed_out(fn, seconds) from None

        return bounded_async

    @functools.wraps(fn)
    def bounded(**kwargs):
        result, timed_out = _call_bounded(fn, kwargs, seconds)
        if timed_out:
            raise _timed_out(fn, seconds)
        return result

    bounded.__name__ = reward_name(fn)  # TRL logs rewards/{__name__}/mean
    return bounded


def _is_torch_module(fn: Any) -> bool:
    """A ``torch.nn.Module`` (a model), told apart without importing torch: it is loaded if a model exists."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(fn, torch.nn.Module)


def _is_factory(fn: Any) -> bool:
    return bool(getattr(fn, "is_reward_factory", False))


def check_reward_funcs(
    funcs: Callable | Sequence[Callable], *, where: str = "reward_funcs"
) -> list[Callable]:
    """The reward functions as a list, or a ``TypeError`` naming the function and the fix.

    Accepts one function or a list. Call it before loading a model: every problem it finds would
    otherwise surface only after the model loaded and the first completions were sampled.
    """
    single = callable(funcs) or isinstance(funcs, (str, bytes, os.PathLike))
    if single:
        funcs = [funcs]
    if not isinstance(funcs, Sequence) or len(funcs) == 0:
        raise TypeError(f"{where} must be a reward function or a non-empty list of them, got {funcs!r}")
    checked = []
    for i, fn in enumerate(funcs):
        at = where if single else f"{where}[{i}]"
        if isinstance(fn, (str, os.PathLike)) or _is_torch_module(fn):
            # TRL accepts a reward *model* here; loading one needs torch, which this package never imports.
            what = (
                f"the model id or path {str(fn)!r}" if not _is_torch_module(fn) else f"a {type(fn).__name__}"
            )
            raise TypeError(
                f"{at} is {what}: a reward model, which grpo_kit scores (train, evaluate and the TRL path "
                "accept it; or grpo_kit.rollout.reward_models.as_reward_funcs(...) turns it into a reward function). "
                "rewards.call_reward_funcs calls functions fn(completions, **kwargs) only."
            )
        if isinstance(fn, bytes) or not callable(fn):
            raise TypeError(
                f"{at} is {type(fn).__name__} {fn!r}, not a reward function. Pass callables "
                "fn(completions, **kwargs) -> list[float | None], e.g. rewards.correctness_reward, or a "
                "reward model (id, path or AutoModelForSequenceClassification) to a grpo_kit training path."
            )
        name = reward_name(fn)
        if _is_factory(fn):
            raise TypeError(
                f"{at} is the reward factory {name} itself, not a reward function. Call it to get "
                f"one: {name}(...) (e.g. length_reward(50), get_soft_overlong_punishment(100, 20))."
            )
        _check_signature(fn, name, at)
        checked.append(fn)
    return checked


def _check_signature(fn: Callable, name: str, where: str) -> None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # builtins, some C callables: nothing to check
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    names = {p.name for p in params if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    if "completions" not in names:
        raise TypeError(
            f"{where} ({name}) takes no `completions` argument: a reward function is called as "
            f"{name}(completions=..., prompts=..., completion_ids=..., **columns). If {name} builds a reward "
            f"function, call it first ({name}(...)); otherwise give it the signature "
            f"def {name}(completions, **kwargs)."
        )
    raise TypeError(
        f"{where} ({name}) has no **kwargs: trainers also pass prompts, completion_ids and every dataset "
        f"column as keyword arguments. Add **kwargs to its signature: def {name}(completions, ..., **kwargs)."
    )


def _head(completion: Any, limit: int = 60) -> str:
    if isinstance(completion, str):
        text = completion
    elif isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        text = str(completion[-1].get("content", ""))
    else:
        text = repr(completion)
    return text[:limit] + ("…" if len(text) > limit else "")


def _row_kwargs(kwargs: dict[str, Any], row: int, n: int) -> dict[str, Any]:
    return {
        k: [v[row]] if isinstance(v, Sequence) and not isinstance(v, (str, bytes)) and len(v) == n else v
        for k, v in kwargs.items()
    }


def _failing_row(fn: Callable, kwargs: dict[str, Any], n: int) -> int | None:
    """The first row on which ``fn`` raises when called alone (sync functions only), else ``None``."""
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - an async __call__ of a callable object
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(call):
        return None
    for row in range(n):
        try:
            fn(**_row_kwargs(kwargs, row, n))
        except Exception:  # noqa: BLE001 - any exception marks the failing row
            return row
    return None


def _raised(
    fn: Callable, error: BaseException, kwargs: dict[str, Any], completions: Sequence
) -> RewardFunctionError:
    name = reward_name(fn)
    row = _failing_row(fn, kwargs, len(completions))
    where = f" on row {row} (completion starts {_head(completions[row])!r})" if row is not None else ""
    return RewardFunctionError(
        f"reward function {name} raised {type(error).__name__}: {error}{where}. A reward function must "
        "return a number or None for any text the model writes; catch the case and return None (skip) or 0.0.",
        func_name=name,
        row=row,
    )


_TEXT = (str, bytes, bytearray)


def _is_reward_list(output: Any) -> bool:
    """A list/tuple, or what TRL's ``torch.tensor(output)`` also takes: a 1-D numpy array or tensor."""
    if isinstance(output, (*_TEXT, dict, set, frozenset)):
        return False
    if isinstance(output, Sequence):
        return True
    shape = getattr(output, "shape", None)  # numpy.ndarray, torch.Tensor: no import needed to recognise them
    return shape is not None and len(shape) == 1 and hasattr(output, "__iter__")


def _is_real_number(value: Any) -> bool:
    """A real number as TRL's ``torch.tensor`` reads one: not text (``"1.0"``), not complex, not an array."""
    if isinstance(value, (*_TEXT, complex)):
        return False
    dtype = getattr(value, "dtype", None)  # numpy / torch scalars and 0-d arrays
    if dtype is not None and (getattr(value, "shape", ()) != () or getattr(dtype, "is_complex", False)):
        return False
    return getattr(dtype, "kind", "f") != "c"


def _as_floats(fn: Callable, output: Any, n: int) -> list[float]:
    name = reward_name(fn)
    if not _is_reward_list(output):
        raise RewardFunctionError(
            f"reward function {name} returned {type(output).__name__}; return a list with one float (or None) "
            f"per completion ({n}).",
            func_name=name,
        )
    if len(output) != n:
        raise RewardFunctionError(
            f"reward function {name} returned {len(output)} rewards for {n} completions; return exactly one "
            "reward (or None) per completion.",
            func_name=name,
        )
    values = []
    for row, value in enumerate(output):
        if value is None:
            values.append(math.nan)
            continue
        try:
            if not _is_real_number(value):
                raise TypeError(value)
            value = float(value)  # int, float, bool, numpy scalars, 0-d arrays and tensors
        except (TypeError, ValueError):
            raise RewardFunctionError(
                f"reward function {name} returned {type(value).__name__} {value!r} on row {row}; return a float "
                "or None.",
                func_name=name,
                row=row,
            ) from None
        if math.isinf(value):
            raise RewardFunctionError(
                f"reward function {name} returned {value} on row {row}: an infinite reward makes every advantage "
                "in its group NaN. Clip it to a finite bound, or return None to skip the row.",
                func_name=name,
                row=row,
            )
        values.append(value)
    return values


def call_reward_funcs(
    funcs: Sequence[Callable],
    prompts: Sequence[Any],
    completions: Sequence[Any],
    *,
    completion_ids: Sequence[Sequence[int]] | None = None,
    timeout: float | None = None,
    **columns: Any,
) -> list[list[float]]:
    """Every reward function on every completion: ``(N, F)`` rows of floats, ``NaN`` for ``None``.

    Called as TRL's GRPOTrainer calls them: ``fn(prompts=..., completions=..., completion_ids=...,
    **columns)`` where ``columns`` are the other dataset columns (one value per completion) and any
    extra keyword arguments a trainer passes (``trainer_state``, ``log_metric``, ...). ``async def``
    functions run concurrently, also inside a running event loop (Jupyter, marimo).

    ``timeout``: seconds each function (sync) or all ``async`` ones together may take; None waits without a
    bound. Overrunning is a :class:`RewardFunctionError` naming the function and ``reward_timeout``.

    Each function returns a list, tuple or 1-D numpy array/tensor (as TRL accepts) of real numbers (Python or
    numpy scalars) or ``None``. Raises :class:`RewardFunctionError` naming the function (and the row) when one
    raises, returns the wrong number of rewards, text (``"1.0"``) or another non-number, or ±inf.
    """
    _check_timeout(timeout)
    n = len(completions)
    if len(prompts) != n:
        raise ValueError(f"call_reward_funcs needs one prompt per completion; got {len(prompts)} and {n}")
    kwargs = dict(
        prompts=list(prompts), completions=list(completions), completion_ids=completion_ids, **columns
    )
    outputs: list[Any] = [None] * len(funcs)
    pending: list[tuple[int, Any]] = []
    for i, fn in enumerate(funcs):
        try:
            result, timed_out = _call_bounded(fn, kwargs, timeout)
        except Exception as error:
            raise _raised(fn, error, kwargs, completions) from error
        if timed_out:
            if inspect.isawaitable(result):
                result.close()
            raise _timed_out(fn, timeout)
        if inspect.isawaitable(result):
            pending.append((i, result))
        else:
            outputs[i] = result
    if pending:  # async reward functions run concurrently, as GRPOTrainer runs them

        async def settle(coro):
            try:
                return await (coro if timeout is None else asyncio.wait_for(coro, timeout)), None
            except Exception as error:  # noqa: BLE001 - reported below with the function's name
                return None, error

        try:  # an async function that blocks the event loop is stopped by the deadline (main thread)
            with deadline(None if timeout is None else timeout + 1.0) as fired:
                settled = run_coroutines([settle(c) for _, c in pending])
        except DeadlineExceeded:
            settled = [(None, TimeoutError())] * len(pending)
        if fired[0]:
            settled = [(None, TimeoutError()) if e is None and r is None else (r, e) for r, e in settled]
        for (i, _), (result, error) in zip(pending, settled):
            if isinstance(error, TimeoutError) and timeout is not None:
                raise _timed_out(funcs[i], timeout) from None
            if error is not None:
                name = reward_name(funcs[i])
                raise RewardFunctionError(
                    f"reward function {name} raised {type(error).__name__}: {error}. A reward function must "
                    "return a number or None for any text the model writes.",
                    func_name=name,
                ) from error
            outputs[i] = result
    columns_out = [_as_floats(fn, out, n) for fn, out in zip(funcs, outputs)]
    return [list(row) for row in zip(*columns_out)] if columns_out else [[] for _ in range(n)]
