"""A Recipe written back as a recipe file: :func:`recipe_to_dict` (plain data in the file's canonical keys) and
:func:`recipe_to_text` (YAML; ``grpo-kit recipes --show NAME --as-yaml``). ``grpo_kit.recipes.files`` reads them
back: ``recipe_from_text(recipe_to_text(r)) == r``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from grpo_kit.recipes.recipe import Recipe

__all__ = ["recipe_to_dict", "recipe_to_text"]


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def recipe_to_dict(recipe: Recipe) -> dict[str, Any]:
    """Every field of ``recipe`` as plain data (tuples as lists), in the recipe file's canonical keys: what
    :func:`recipe_from_dict` reads back to an equal Recipe."""
    data: dict[str, Any] = {}
    for f in dataclasses.fields(Recipe):
        value = getattr(recipe, f.name)
        if f.name == "rewards":
            value = [{"name": s.name, "weight": s.weight, "kwargs": _plain(s.kwargs)} for s in value]
        elif f.name in ("lora", "unsloth", "warmup_sft"):
            value = None if value is None else _plain(dataclasses.asdict(value))
        elif f.name == "dataset" and value == "prompts":
            value = "prompts"
        data[f.name] = _plain(value)
    return data


def recipe_to_text(recipe: Recipe) -> str:
    """``recipe`` as a YAML recipe file (every field; ``grpo-kit recipes --show NAME --as-yaml``)."""
    import yaml

    header = f"# grpo-kit recipe {recipe.name}: grpo-kit train --config THIS_FILE\n"
    return header + yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False, allow_unicode=True, width=100)
