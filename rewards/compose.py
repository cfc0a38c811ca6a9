"""Composing reward functions: weighted sums, per-task routing, and ``async def`` support.

* :func:`combine` — one reward function from several, ``Σ_i w_i r_i`` per completion with TRL's
  ``nansum`` semantics for ``None`` (a missing reward is skipped, not counted as 0) except that a row
  where *every* reward is ``None`` stays ``None`` (TRL's nansum would silently make it 0.0).
* :func:`route` — a mixed dataset (a ``task`` column saying ``"math"``/``"code"``/…): each row is
  scored by its task's function, rows of other tasks get ``None``.
* :func:`as_sync` / :func:`call_reward` — call any reward function, sync or ``async def``, from sync code (also inside
  a running event loop, e.g. a notebook) and checks what it returns.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._runtime import reward_name, run_coroutines
from ._text import completion_texts
from .calling import check_reward_funcs

__all__ = ["call_reward", "combine", "reward_name", "route"]


def _check_output(fn: Callable, output: Any, n: int) -> list[float | None]:
    name = reward_name(fn)
    if isinstance(output, (str, bytes)) or not isinstance(output, Sequence):
        raise TypeError(
            f"reward function {name} returned {type(output).__name__}; it must return a list of floats"
        )
    if len(output) != n:
        raise ValueError(f"reward function {name} returned {len(output)} rewards for {n} completions")
    return list(output)


def call_reward(fn: Callable, completions: Sequence, **kwargs) -> list[float | None]:
    """``fn(completions=..., **kwargs)`` for a sync or async reward function, output length checked."""
    output = fn(completions=completions, **kwargs)
    if inspect.isawaitable(output):
        output = run_coroutines([output])[0]
    return _check_output(fn, output, len(completions))


class _SyncReward:
    """A sync reward function that runs an ``async def`` one to completion (see :func:`as_sync`)."""

    def __init__(self, fn: Callable):
        self.fn = fn
        self.__name__ = reward_name(fn)

    def __call__(self, completions: Sequence, **kwargs) -> list[float | None]:
        return call_reward(self.fn, completions, **kwargs)


def as_sync(fn: Callable) -> Callable:
    """A sync version of a (possibly ``async def``) reward function, same ``__name__``, output checked.

    For callers that cannot await (a hand-written loop, ``datasets.map``); GRPOTrainer, combine, route
    and lint accept async functions directly.
    """
    if not callable(fn):
        raise TypeError(f"as_sync needs a reward function, got {type(fn).__name__}")
    return _SyncReward(fn)


def _number(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


class _Combined:
    """Σ_i w_i r_i per completion; ``None``/NaN rewards are skipped; all missing → ``None``."""

    def __init__(self, fns: tuple[Callable, ...], weights: list[float]):
        self.fns = fns
        self.weights = weights
        parts = [reward_name(f) if w == 1.0 else f"{w:g}*{reward_name(f)}" for f, w in zip(fns, weights)]
        self.__name__ = "+".join(parts)

    def __call__(self, completions: Sequence, **kwargs) -> list[float | None]:
        completion_texts(completions, self.__name__)  # the calling contract, checked once up front
        n = len(completions)
        outputs: list[Any] = [None] * len(self.fns)
        pending: list[tuple[int, Any]] = []
        for i, fn in enumerate(self.fns):
            result = fn(completions=completions, **kwargs)
            if inspect.isawaitable(result):
                pending.append((i, result))
            else:
                outputs[i] = result
        if pending:  # async reward functions run concurrently, as GRPOTrainer runs them
            for (i, _), result in zip(pending, run_coroutines([c for _, c in pending])):
                outputs[i] = result
        columns = [_check_output(fn, out, n) for fn, out in zip(self.fns, outputs)]
        combined: list[float | None] = []
        for row in range(n):
            values = [(w, _number(col[row])) for w, col in zip(self.weights, columns)]
            present = [w * v for w, v in values if v is not None]
            combined.append(math.fsum(present) if present else None)
        return combined


def combine(*fns: Callable, weights: Sequence[float] | None = None) -> Callable:
    """One reward function computing ``Σ_i weights[i] · fns[i](...)`` per completion.

    ``None`` (or NaN) rewards are skipped like TRL's ``nansum``; a completion every function skipped
    stays ``None``. Sync and ``async def`` functions can be mixed. The result is named
    ``"f+2*g"`` (TRL logs ``rewards/f+2*g/mean``).
    """
    if len(fns) == 1 and isinstance(fns[0], (list, tuple)):
        fns = tuple(fns[0])
    if not fns:
        raise ValueError("combine needs at least one reward function: combine(f, g, weights=[1.0, 0.5])")
    fns = tuple(check_reward_funcs(list(fns), where="combine"))  # an uncalled factory fails here, not later
    if weights is None:
        weights = [1.0] * len(fns)
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence) or len(weights) != len(fns):
        raise ValueError(f"combine: weights must be a list with one number per function ({len(fns)})")
    weights = [float(w) for w in weights]
    if any(not math.isfinite(w) for w in weights):
        raise ValueError("combine: weights must be finite numbers")
    return _Combined(tuple(fns), weights)


def _is_row_column(value: Any, n: int) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and len(value) == n


class _Routed:
    """Scores each row with the function of its task (``kwargs[column][row]``); other rows → ``None``."""

    def __init__(self, column: str, routes: dict[Any, Callable]):
        self.column = column
        self.routes = routes
        self.__name__ = f"route_by_{column}"

    def __call__(self, completions: Sequence, **kwargs) -> list[float | None]:
        completion_texts(completions, self.__name__)
        n = len(completions)
        if self.column not in kwargs or kwargs[self.column] is None:
            raise ValueError(
                f"{self.__name__} needs the `{self.column}` column: give your dataset a `{self.column}` "
                f"column naming each row's task ({', '.join(map(repr, self.routes))}), or pass "
                f"{self.column}=[...]."
            )
        tasks = kwargs[self.column]
        if not _is_row_column(tasks, n):
            raise ValueError(
                f"{self.__name__}: `{self.column}` must be a list with one task per completion ({n})"
            )
        rewards: list[float | None] = [None] * n
        log_extra = kwargs.pop("log_extra", None)
        logged: dict[str, list] = {}
        calls, coros = [], []
        for task, fn in self.routes.items():
            rows = [i for i, t in enumerate(tasks) if t == task]
            if not rows:
                continue
            sub_kwargs = {k: [v[i] for i in rows] if _is_row_column(v, n) else v for k, v in kwargs.items()}
            if log_extra is not None:  # gather each route's columns, log them once at full length
                sub_kwargs["log_extra"] = _scatter_logger(logged, rows, n)
            result = fn(completions=[completions[i] for i in rows], **sub_kwargs)
            is_async = inspect.isawaitable(result)
            if is_async:
                coros.append(result)
            calls.append((fn, rows, result, is_async))
        awaited = iter(run_coroutines(coros)) if coros else iter(())
        for fn, rows, result, is_async in calls:
            output = _check_output(fn, next(awaited) if is_async else result, len(rows))
            for i, value in zip(rows, output):
                rewards[i] = value
        if log_extra is not None:
            for key, values in logged.items():
                log_extra(key, values)
        return rewards


def _scatter_logger(logged: dict[str, list], rows: list[int], n: int) -> Callable[[str, list], None]:
    def log(key: str, values: list) -> None:
        column = logged.setdefault(key, [None] * n)
        for i, value in zip(rows, values):
            column[i] = value

    return log


def route(column: str, routes: Mapping[Any, Callable]) -> Callable:
    """A reward function that sends each row to ``routes[row[column]]``; rows of other tasks get ``None``.

    Example: ``route("task", {"math": accuracy_reward, "summary": length_reward(50)})`` with a dataset
    whose ``task`` column says which. Per-row keyword arguments (columns, ``completion_ids``,
    ``prompts``) are sliced for each route; ``log_extra`` columns are reassembled at full length.
    """
    if not isinstance(column, str) or not column:
        raise TypeError("route: column must be the name of a dataset column, e.g. route('task', {...})")
    if not isinstance(routes, Mapping) or not routes:
        raise ValueError("route: routes must be a non-empty dict {task value: reward function}")
    for task, fn in routes.items():
        check_reward_funcs(fn, where=f"route: the function for task {task!r}")
    return _Routed(column, dict(routes))
