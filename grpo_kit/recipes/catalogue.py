"""The recipe catalogue: named, documented GRPO configurations shared by the three training paths.

Every shipped recipe is a recipe file, ``grpo_kit/recipes/shipped/<name>.yaml``, read by the loader that reads
your own (``grpo_kit.recipes.files``, ``grpo-kit train --config``) the first time it is asked for. This module
holds the index: :data:`RECIPES` (every name, in the order ``grpo-kit recipes`` lists them), the CPU-sized
siblings (:data:`SMALL_VARIANTS`), the configurations the lessons run (:data:`LESSON_VARIANTS`),
:data:`DEFAULT_RECIPE`, and :func:`get_recipe`, which picks one and applies overrides. How each recipe was tuned
and measured is in docs/results.md. The recipe type and its rules live in ``grpo_kit.recipes.recipe``; its public
names are re-exported here, so ``from grpo_kit.recipes.catalogue import Recipe, LoraSettings`` keeps working.

    >>> from grpo_kit.recipes.catalogue import get_recipe
    >>> r = get_recipe("smoltldr-length", small=True, learning_rate=1e-5)
    >>> r.name, r.training["learning_rate"]
    ('smoltldr-length-small', 1e-05)

Recipes are named after what they teach (ARCHITECTURE.md). Course numbers refer to the Hugging
Face LLM course, chapter 12 ("Implementing GRPO in TRL" and "Practical exercise: GRPO with Unsloth").
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from grpo_kit.recipes.recipe import (
    CURRICULUM_KWARGS,
    DATASET_LOADERS,
    GUIDED_SAMPLING_KWARGS,
    IMAGE_DATASETS,
    REWARD_MODEL_PREFIX,
    SYNTHETIC_ROWS,
    LoraSettings,
    Recipe,
    RewardSpec,
    UnslothSettings,
    WarmupSFT,
    apply_overrides,
)

__all__ = [
    "CURRICULUM_KWARGS",
    "DATASET_LOADERS",
    "DEFAULT_RECIPE",
    "GUIDED_SAMPLING_KWARGS",
    "IMAGE_DATASETS",
    "LESSON_VARIANTS",
    "RECIPES",
    "REWARD_MODEL_PREFIX",
    "SHIPPED",
    "SMALL_VARIANTS",
    "SYNTHETIC_ROWS",
    "LoraSettings",
    "Recipe",
    "RewardSpec",
    "UnslothSettings",
    "WarmupSFT",
    "get_recipe",
    "shipped_recipe_file",
]

#: The folder of the shipped recipe files, one ``<name>.yaml`` each.
SHIPPED = Path(__file__).resolve().parent / "shipped"

#: What the lessons run besides the recipes they name (lesson 4's two CPU runs, lessons 6, 8 and 9 at CI size):
#: each is a recipe file too, so it is listed, planned and tested like the rest (``grpo-kit train --recipe NAME``
#: runs exactly the lesson's configuration).
LESSON_VARIANTS = (
    "smoltldr-course-cpu",
    "smoltldr-length-quick",
    "calculator-tool-smoke",
    "counter-lock-env-smoke",
    "gsm8k-unsloth-cpu-smoke",
)
_NAMES = (
    "smoltldr-length",
    "smoltldr-length-small",
    "gsm8k-unsloth",
    "gsm8k-cpu",
    "gsm8k-unsloth-cpu",
    "gsm8k-cpu-guided",
    "gsm8k-cpu-sft",
    "calculator-tool-cpu",
    "counter-lock-env-cpu",
    "deepmath-accuracy",
    "shapes-vlm-cpu",
    "shapes-vlm-aligned-cpu",
    "shapes-vlm-gpu",
    *LESSON_VARIANTS,
)
#: Recipes with a CPU-sized sibling reachable through get_recipe(name, small=True).
SMALL_VARIANTS = {"smoltldr-length": "smoltldr-length-small", "gsm8k-unsloth": "gsm8k-cpu"}

DEFAULT_RECIPE = "smoltldr-length-small"


def shipped_recipe_file(name: str) -> Path:
    """The recipe file of the shipped recipe ``name``."""
    return SHIPPED / f"{name}.yaml"


class _Catalogue(Mapping[str, Recipe]):
    """The shipped recipes by name, in :data:`_NAMES`' order; each file is read once, when first asked for, by
    ``grpo_kit.recipes.files`` (the training names are checked when a run is planned, so listing the catalogue
    needs no TRL)."""

    def __init__(self, names: tuple[str, ...]):
        self._names = names
        self._read: dict[str, Recipe] = {}

    def __getitem__(self, name: str) -> Recipe:
        if name not in self._names:
            raise KeyError(name)
        if name not in self._read:
            from grpo_kit.recipes.files import recipe_from_text

            path = shipped_recipe_file(name)
            self._read[name] = recipe_from_text(
                path.read_text(encoding="utf-8"),
                where=f"grpo_kit/recipes/shipped/{path.name}",
                base_dir=SHIPPED,
                default_name=name,
                check_training=False,
            )
        return self._read[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __repr__(self) -> str:
        return f"RECIPES({', '.join(self._names)})"


RECIPES: Mapping[str, Recipe] = _Catalogue(_NAMES)


def get_recipe(name: str, *, small: bool = False, **overrides: Any) -> Recipe:
    """The recipe called ``name`` with ``overrides`` applied.

    Overrides are Recipe fields (``model="..."``, ``dataset_source="data.jsonl"``, ``lora=None``,
    ``lora={"r": 8}`` to change some LoRA fields) or GRPOConfig fields, which go into ``training``
    (``learning_rate=1e-5``, ``max_steps=3``). ``small=True`` picks the CPU-sized sibling.
    """
    if isinstance(name, Recipe):
        recipe = name
    else:
        if name not in RECIPES:
            close = difflib.get_close_matches(str(name), list(RECIPES), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown recipe {name!r}.{hint} Recipes: {', '.join(RECIPES)}")
        recipe = RECIPES[name]
    if small:
        if recipe.name.endswith("-small") or recipe.name in SMALL_VARIANTS.values():
            pass
        elif recipe.name in SMALL_VARIANTS:
            recipe = RECIPES[SMALL_VARIANTS[recipe.name]]
        else:
            raise ValueError(
                f"recipe {recipe.name!r} has no small variant; small=True works for {', '.join(SMALL_VARIANTS)}."
            )
    return apply_overrides(recipe, overrides)
