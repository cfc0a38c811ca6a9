"""Environments a recipe can name, TRL's rules for them, and every check that can run before a model loads.

A recipe says ``environment="counter"`` (a name in :data:`ENVIRONMENTS`) for one environment, or
``environment=("counter", "lock")`` for several: then TRL gets a dict of factories and each row's
``environment`` column picks its environment (TRL docs, "Training an agent" -> "Multiple environments").
What TRL's ``GRPOTrainer(environment_factory=...)`` does with them, and what this module mirrors so that
evaluation and pre-flight replay an episode the way training runs it:

* one fresh instance per rollout; ``reset(**row)`` with the row's columns (in the dict case without the
  ``environment`` column); a string it returns is appended to the last user message;
* the tools are the instance's public methods (listed on the class: :func:`environment_tools`), not
  ``reset`` / ``get_reward`` and nothing starting with ``_``; in the dict case only that environment's;
* ``get_reward()`` scores the finished episode from the instance's state, one reward column per class,
  weight 1, named after the class (:func:`environment_reward_funcs`), summed with the ``reward_funcs``.

:func:`check_environments` runs TRL's step-1 failures before the model loads, each with its fix: no
``reset``, a tool without type hints or docstring, an ``environment`` value with no factory, a
``get_reward`` that takes arguments or returns a non-number, a tool that raises on a probe call, and the
transformers version (5.2 or later). The probe plays the first row of each environment on a fresh
instance: ``reset(**row)``, each tool once with simple arguments of its hinted types, then ``get_reward()``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "ENVIRONMENTS",
    "check_environment_names",
    "check_environments",
    "environment_reward_funcs",
    "environment_tools",
    "factory_for_row",
    "reset_episode",
    "resolve_environment_factory",
]

#: Environment name -> "module:attribute" of its class (imported only when used).
ENVIRONMENTS: dict[str, str] = {
    "counter": "datasets_prep.environment_tasks:CounterEnv",
    "lock": "datasets_prep.environment_tasks:LockEnv",
}

#: The oldest transformers TRL accepts ``environment_factory`` with (TRL 1.15's own check, at step 0).
MIN_TRANSFORMERS = "5.2.0"
_RESERVED = ("reset", "get_reward")
# Arguments the probe calls each tool with, by type hint.
_PROBE_VALUES: dict[Any, Any] = {int: 1, float: 1.0, str: "a", bool: True}

EnvironmentFactory = Callable[[], Any]


def _names(environment: str | Sequence[str] | None) -> list[str]:
    if environment is None:
        return []
    return [environment] if isinstance(environment, str) else list(environment)


def check_environment_names(environment: str | Sequence[str] | None, *, where: str) -> None:
    """Recipe-time check of the names (cheap: imports nothing)."""
    if environment is not None and not isinstance(environment, (str, tuple)):
        raise ValueError(
            f"{where}: environment must be a name or a tuple of names, e.g. environment=('counter', 'lock'); "
            f"got {type(environment).__name__}."
        )
    names = _names(environment)
    if isinstance(environment, tuple) and not names:
        raise ValueError(f"{where}: environment=() names no environment; use None for a recipe without one.")
    unknown = [n for n in names if n not in ENVIRONMENTS]
    if unknown:
        raise ValueError(f"{where}: unknown environment(s) {unknown}; use names from {sorted(ENVIRONMENTS)}.")
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: environment {names} names one environment twice.")


def _load(name: str) -> type:
    module, attribute = ENVIRONMENTS[name].split(":")
    return getattr(importlib.import_module(module), attribute)


def resolve_environment_factory(
    environment: str | Sequence[str] | None,
) -> EnvironmentFactory | dict[str, EnvironmentFactory] | None:
    """A recipe's ``environment`` as TRL's ``environment_factory``: one name -> its class; a tuple of names
    -> ``{name: class}`` (rows route by their ``environment`` column); None -> None."""
    check_environment_names(environment, where="environment")
    if environment is None:
        return None
    if isinstance(environment, str):
        return _load(environment)
    return {name: _load(name) for name in environment}


def _factories(factory: Any) -> dict[str | None, EnvironmentFactory]:
    """TRL's normalisation: a single callable is the one unnamed (None) environment."""
    return dict(factory) if isinstance(factory, Mapping) else {None: factory}


def environment_tools(instance: Any) -> list[Callable]:
    """The tools an environment exposes, as TRL lists them: the public functions on the instance's class
    (properties are not evaluated), bound to the instance, without ``reset`` and ``get_reward``."""
    return [
        getattr(instance, name)
        for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
        if name not in _RESERVED and not name.startswith("_")
    ]


def factory_for_row(factory: Any, row: Mapping[str, Any]) -> tuple[EnvironmentFactory, dict[str, Any]]:
    """The factory a row's episode uses and the keyword arguments ``reset`` gets (the row's columns; with a
    dict of factories without its ``environment`` column, which only routes)."""
    if isinstance(factory, Mapping):
        name = row.get("environment")
        if name not in factory:
            raise ValueError(
                f"a row has environment={name!r}, which is not among the environments {sorted(factory)}; "
                "fix the dataset's 'environment' column or add that environment to the recipe."
            )
        return factory[name], {k: v for k, v in row.items() if k != "environment"}
    return factory, dict(row)


def reset_episode(factory: Any, row: Mapping[str, Any]) -> tuple[Any, Any]:
    """A fresh instance for one rollout and the prompt it plays: ``(instance, prompt)``. ``reset(**row)``'s
    string (if any) is appended to the last user message, as TRL's trainer does; the row is not changed."""
    make, kwargs = factory_for_row(factory, row)
    instance = make()
    observation = instance.reset(**kwargs)
    prompt = row.get("prompt", [{"role": "user", "content": ""}])
    if isinstance(observation, str):
        prompt = list(prompt[:-1]) + [{**prompt[-1], "content": prompt[-1]["content"] + observation}]
    return instance, prompt


def environment_reward_funcs(factory: Any) -> list[Callable]:
    """TRL's extra reward sources: one function per environment class that defines ``get_reward``, named
    after the class and scoring only its own instances (None for the others, as TRL does). They carry the
    class's ``max_reward`` (when it has one) and count as accuracy in the evaluation. For evaluation and
    pre-flight only: TRL's trainer adds its own."""
    funcs, seen = [], []
    for make in _factories(factory).values():
        cls = make if isinstance(make, type) else type(make())
        if not callable(getattr(cls, "get_reward", None)) or cls in seen:
            continue
        seen.append(cls)

        def get_reward(completions, environments=None, _cls=cls, **kwargs):
            if environments is None:  # text without its episode (a probe, a --prompt answer): not scored
                return [None] * len(completions)
            return [e.get_reward() if type(e) is _cls else None for e in environments]

        get_reward.__name__ = get_reward.__qualname__ = cls.__name__
        get_reward.reward_kind = "accuracy"
        if isinstance(getattr(cls, "max_reward", None), (int, float)):
            get_reward.max_reward = float(cls.max_reward)
        funcs.append(get_reward)
    return funcs


def _probe_arguments(tool: Callable) -> dict[str, Any]:
    hints = {p.name: p.annotation for p in inspect.signature(tool).parameters.values()}
    return {name: _PROBE_VALUES.get(hint, 1) for name, hint in hints.items()}


def _check_transformers() -> None:
    import transformers
    from packaging.version import Version

    if Version(transformers.__version__) < Version(MIN_TRANSFORMERS):
        raise ImportError(
            f"environments need transformers >= {MIN_TRANSFORMERS} (TRL's environment_factory); this is "
            f"{transformers.__version__}. Fix: pip install -c constraints.txt -e ."
        )


def _probe(name: str | None, make: EnvironmentFactory, row: Mapping[str, Any] | None) -> None:
    """Build one instance and play ``row`` on it: every failure TRL would only hit during step 1."""
    from grpo_kit.rollout.tool_template import check_tools

    label = "environment" if name is None else f"environment {name!r}"
    if not callable(make):
        raise TypeError(
            f"{label}: the factory must be a class or a function returning an environment; got "
            f"{type(make).__name__}."
        )
    instance = make()
    cls = type(instance).__name__
    if not callable(getattr(type(instance), "reset", None)):
        raise ValueError(  # noqa: TRY004 -- TRL raises ValueError for a missing reset too
            f"{label}: {cls} has no reset method; TRL calls reset(**row) at the start of every rollout. "
            "Add def reset(self, **row) -> str | None."
        )
    tools = environment_tools(instance)
    try:
        check_tools(tools)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{label}: {cls}'s public methods are its tools. {error}") from None
    reward = getattr(type(instance), "get_reward", None)
    if reward is not None:
        required = [
            p.name
            for p in list(inspect.signature(reward).parameters.values())[1:]
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        if required:
            raise ValueError(
                f"{label}: {cls}.get_reward takes {', '.join(required)}; TRL calls it with no argument. "
                "Read what it needs from the instance's own state."
            )
    if row is None:
        return
    _, kwargs = factory_for_row({name: make} if name is not None else make, row)
    try:
        instance.reset(**kwargs)
    except Exception as error:  # noqa: BLE001 -- named with the fix below
        raise ValueError(
            f"{label}: {cls}.reset(**row) raised {type(error).__name__}: {error} on the dataset's first row "
            f"(columns {sorted(kwargs)}); reset must accept every column (end its signature with **row)."
        ) from None
    for tool in tools:
        arguments = _probe_arguments(tool)
        try:
            tool(**arguments)
        except Exception as error:  # noqa: BLE001 -- named with the fix below
            call = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
            raise ValueError(
                f"{label}: the tool {cls}.{tool.__name__}({call}) raised {type(error).__name__}: {error} "
                "after reset on the first row. During training TRL shows the model the error and counts a "
                "failed call; return the problem as text instead (e.g. 'step must be positive')."
            ) from None
    if reward is not None:
        value = instance.get_reward()
        if inspect.isawaitable(value):
            value.close()  # an async get_reward: TRL awaits it; its value is checked during the run
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(
                f"{label}: {cls}.get_reward() returned {type(value).__name__} {value!r}; it must return a "
                "number (float), the episode's reward."
            )


def check_environments(factory: Any, dataset: Any = None) -> None:
    """Every ``environment_factory`` failure TRL would hit at step 1, before the model loads: for each
    environment, a probe instance (:func:`_probe`), played on the dataset's first row routed to it; with a
    dict of factories, every value of the ``environment`` column must name one. Needs no model."""
    if factory is None:
        return
    _check_transformers()
    factories = _factories(factory)
    rows: dict[str | None, Mapping[str, Any]] = {}
    if dataset is not None and len(dataset):
        if isinstance(factory, Mapping):
            if "environment" not in dataset.column_names:
                raise ValueError(
                    f"several environments ({sorted(factories)}) need an 'environment' column in the dataset "
                    "to route each row; add it, or name one environment."
                )
            values = dataset["environment"]
            unknown = sorted({str(v) for v in values if v not in factories})
            if unknown:
                raise ValueError(
                    f"the dataset's 'environment' column names {unknown}, which no environment is registered "
                    f"for ({sorted(factories)}); add them to the recipe's environment, or fix the rows."
                )
            for i, value in enumerate(values):
                rows.setdefault(value, dataset[i])
        else:
            rows[None] = dataset[0]
    for name, make in factories.items():
        _probe(name, make, rows.get(name))
