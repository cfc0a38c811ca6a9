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
  completion (:class:`RewardFunctionError`).

Pure Python: the training loop turns the table into a tensor, evaluation and samples average it.
"""

from __future__ import annotations

import inspect
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ._runtime import reward_name, run_coroutines

__all__ = ["RewardFunctionError", "call_reward_funcs", "check_reward_funcs"]

# What TRL's GRPOTrainer passes to every reward function besides the dataset's columns.
TRL_REWARD_KWARGS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")


class RewardFunctionError(RuntimeError):
    """A reward function raised or returned something unusable; the message names it and the row."""

    def __init__(self, message: str, *, func_name: str, row: int | None = None):
        super().__init__(message)
        self.func_name = func_name
        self.row = row


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
                "accept it; or grpo_kit.reward_models.as_reward_funcs(...) turns it into a reward function). "
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


def _as_floats(fn: Callable, output: Any, n: int) -> list[float]:
    name = reward_name(fn)
    if isinstance(output, (str, bytes, dict)) or not isinstance(output, Sequence):
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
            value = float(value)
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
    **columns: Any,
) -> list[list[float]]:
    """Every reward function on every completion: ``(N, F)`` rows of floats, ``NaN`` for ``None``.

    Called as TRL's GRPOTrainer calls them: ``fn(prompts=..., completions=..., completion_ids=...,
    **columns)`` where ``columns`` are the other dataset columns (one value per completion) and any
    extra keyword arguments a trainer passes (``trainer_state``, ``log_metric``, ...). ``async def``
    functions run concurrently, also inside a running event loop (Jupyter, marimo).

    Raises :class:`RewardFunctionError` naming the function (and the row) when one raises, returns
    the wrong number of rewards, a non-number, or ±inf.
    """
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
            result = fn(**kwargs)
        except Exception as error:
            raise _raised(fn, error, kwargs, completions) from error
        if inspect.isawaitable(result):
            pending.append((i, result))
        else:
            outputs[i] = result
    if pending:  # async reward functions run concurrently, as GRPOTrainer runs them

        async def settle(coro):
            try:
                return await coro, None
            except Exception as error:  # noqa: BLE001 - reported below with the function's name
                return None, error

        for (i, _), (result, error) in zip(pending, run_coroutines([settle(c) for _, c in pending])):
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
