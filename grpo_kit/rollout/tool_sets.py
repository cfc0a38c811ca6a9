"""Tool sets a recipe can name, and the tool checks every GRPOTrainer path runs before the model loads.

A recipe says ``tools="calculator"`` (a name in :data:`TOOL_SETS`) and, for a model whose own chat template
has no tool support, ``tool_template="chatml"`` (a name in :data:`TOOL_TEMPLATES`: a function that installs
a tool-calling template on the tokenizer). ``grpo_kit.trainers.builder.assemble_grpo_trainer`` then:

1. resolves the tools (:func:`resolve_tools`) and checks them with ``tool_template.check_tools``, checks
   ``max_tool_calling_iterations`` and, when a tokenizer was passed in, installs the template and runs
   ``check_tool_tokenizer`` -- all before any weights are read (:func:`check_tool_setup`);
2. after the model loads (its tokenizer comes with it), installs the template and checks the tokenizer
   again (:func:`prepare_tool_tokenizer`), still before ``GRPOTrainer`` is built.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grpo_kit.rollout.tool_template import (
    check_max_tool_calling_iterations,
    check_tool_tokenizer,
    check_tools,
    enable_tool_calling,
)

__all__ = [
    "TOOL_SETS",
    "TOOL_TEMPLATES",
    "check_tool_names",
    "check_tool_setup",
    "prepare_tool_tokenizer",
    "resolve_tools",
]

#: Tool-set name -> "module:attribute" of a list of tool functions (imported only when used).
TOOL_SETS: dict[str, str] = {"calculator": "datasets_prep.tool_tasks:CALCULATOR_TOOLS"}

#: Template name -> function that installs a tool-calling chat template on a tokenizer (in place).
TOOL_TEMPLATES: dict[str, Callable[[Any], Any]] = {"chatml": enable_tool_calling}


def _unknown(kind: str, name: Any, known: Mapping[str, Any]) -> ValueError:
    return ValueError(f"unknown {kind} {name!r}; use one of {sorted(known)} (or None).")


def check_tool_names(tools: str | None, tool_template: str | None, *, where: str) -> None:
    """Recipe-time check of the two names (cheap: imports nothing)."""
    if tools is not None and tools not in TOOL_SETS:
        raise ValueError(f"{where}: " + str(_unknown("tool set", tools, TOOL_SETS)))
    if tool_template is not None and tool_template not in TOOL_TEMPLATES:
        raise ValueError(f"{where}: " + str(_unknown("tool_template", tool_template, TOOL_TEMPLATES)))


def resolve_tools(tools: str | Sequence[Callable] | None) -> list[Callable] | None:
    """A tool-set name -> its list of functions; a list passes through; None stays None."""
    if tools is None or not isinstance(tools, str):
        return tools if tools is None else list(tools)
    if tools not in TOOL_SETS:
        raise _unknown("tool set", tools, TOOL_SETS)
    module, attribute = TOOL_SETS[tools].split(":")
    return list(getattr(importlib.import_module(module), attribute))


def prepare_tool_tokenizer(tokenizer: Any, tool_template: str | None) -> Any:
    """Install ``tool_template`` (if any) on ``tokenizer`` and check that TRL can run a tool loop with it."""
    if tool_template is not None:
        if tool_template not in TOOL_TEMPLATES:
            raise _unknown("tool_template", tool_template, TOOL_TEMPLATES)
        TOOL_TEMPLATES[tool_template](tokenizer)
    check_tool_tokenizer(tokenizer)
    return tokenizer


def check_tool_setup(
    recipe_tools: str | None,
    tool_template: str | None,
    training: Mapping[str, Any],
    trainer_kwargs: Mapping[str, Any],
    tokenizer: Any = None,
    *,
    environment: str | Sequence[str] | None = None,
    dataset: Any = None,
) -> dict[str, Any]:
    """The ``GRPOTrainer`` keyword arguments with ``tools`` and ``environment_factory`` resolved, after every
    tool check that needs no model: the tools' signatures and docstrings, the environments
    (``grpo_kit.rollout.environments.check_environments``, played on ``dataset``'s first rows), ``max_tool_calling_iterations``
    and, when ``tokenizer`` is given, its chat template. ``trainer_kwargs["tools"]`` (functions or a tool-set
    name) wins over the recipe's ``tools``, ``trainer_kwargs["environment_factory"]`` over its
    ``environment``. Runs no check when there are neither tools nor an environment."""
    from grpo_kit.rollout.environments import check_environments, resolve_environment_factory

    kwargs = dict(trainer_kwargs)
    tools = resolve_tools(kwargs.get("tools", recipe_tools))
    if kwargs.get("environment_factory") is None and environment is not None:
        kwargs["environment_factory"] = resolve_environment_factory(environment)
    factory = kwargs.get("environment_factory")
    if tools is None and factory is None:
        return kwargs
    if tools is not None:
        kwargs["tools"] = check_tools(tools)
    if factory is not None and not callable(factory) and not isinstance(factory, Mapping):
        raise TypeError(
            "environment_factory must be a class or a function returning an environment (with reset() and "
            f"the tools as methods), or a dict of them; got {type(factory).__name__}."
        )
    check_environments(factory, dataset)
    check_max_tool_calling_iterations(training.get("max_tool_calling_iterations"))
    if tokenizer is not None:
        prepare_tool_tokenizer(tokenizer, tool_template)
    return kwargs
