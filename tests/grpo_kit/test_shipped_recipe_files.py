"""Recipes are data: every shipped recipe is a recipe file in the package, read by the loader of ``--config``, and
no Recipe is written out in Python beyond that loader."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grpo_kit.recipes.catalogue import (
    DEFAULT_RECIPE,
    LESSON_VARIANTS,
    RECIPES,
    SHIPPED,
    SMALL_VARIANTS,
    get_recipe,
    shipped_recipe_file,
)
from grpo_kit.recipes.files import load_recipe_file

GRPO_KIT = Path(__file__).resolve().parents[2] / "grpo_kit"
#: The one place a Recipe is constructed from its fields: the recipe-file loader.
LOADER = "recipes/files.py"


def test_the_catalogue_is_the_folder_of_recipe_files():
    assert sorted(path.stem for path in SHIPPED.glob("*.yaml")) == sorted(RECIPES)
    assert sorted(path.name for path in SHIPPED.iterdir()) == sorted(f"{name}.yaml" for name in RECIPES)
    names = set(RECIPES)
    assert DEFAULT_RECIPE in names and set(LESSON_VARIANTS) <= names
    assert set(SMALL_VARIANTS) | set(SMALL_VARIANTS.values()) <= names


@pytest.mark.parametrize("name", list(RECIPES))
def test_each_shipped_file_loads_through_load_recipe_file_as_the_catalogue_recipe(name):
    recipe = load_recipe_file(shipped_recipe_file(name))  # every rule, GRPOConfig's names included
    assert recipe == get_recipe(name) == RECIPES[name]
    assert recipe.name == name and recipe.summary and recipe.description
    assert get_recipe(name) is RECIPES[name]  # read once


def test_small_and_lesson_variants_are_catalogue_recipes():
    for big, small in SMALL_VARIANTS.items():
        assert get_recipe(big, small=True) is RECIPES[small]
    for name in LESSON_VARIANTS:
        recipe = RECIPES[name]
        assert recipe.training["max_steps"] <= 8, name  # a lesson's run fits the lesson
    with pytest.raises(KeyError):
        RECIPES["no-such-recipe"]


def _recipe_calls(root: Path = GRPO_KIT) -> list[str]:
    """``file:line`` of every call of ``Recipe(...)`` (a name or an attribute) in ``root``'s Python files."""
    calls = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
                if called == "Recipe":
                    calls.append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return calls


def test_no_recipe_is_written_out_in_python_beyond_the_loader():
    calls = _recipe_calls()
    assert [call.split(":")[0] for call in calls] == [LOADER], calls


def test_the_scan_finds_a_recipe_written_in_python(tmp_path):
    (tmp_path / "mine.py").write_text('from grpo_kit.recipes import recipe\nr = recipe.Recipe(name="x")\n')
    (tmp_path / "other.py").write_text("x = Recipe(name='y', model='m')\n")
    assert _recipe_calls(tmp_path) == ["mine.py:2", "other.py:1"]
