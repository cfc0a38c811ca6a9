"""The 0.1 flat module paths (``grpo_kit.settings``, ``from grpo_kit import trl_path``, ...) answer for one release
with the module at its new home, and a DeprecationWarning that names it; nothing of ours imports them any more."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import grpo_kit

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("old", "new"), sorted(grpo_kit.MOVED.items()))
def test_an_old_path_is_the_module_at_its_new_home(old, new):
    sys.modules.pop(f"grpo_kit.{old}", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        moved = importlib.import_module(f"grpo_kit.{old}")
    assert moved is importlib.import_module(f"grpo_kit.{new}")
    assert moved.__spec__.name == f"grpo_kit.{new}"  # the alias leaves the real module's own spec
    said = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert said == [f"grpo_kit.{old} moved to grpo_kit.{new}; the old path goes in the next release"]


def test_from_grpo_kit_import_an_old_name():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from grpo_kit import trl_path

    from grpo_kit.trainers import trl_path as new

    assert trl_path is new


def test_python_dash_m_runs_an_old_path():
    done = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-m", "grpo_kit.doctor", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and "doctor" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize(("package", "module"), [("loop", "training"), ("recipes", "catalogue")])
def test_the_two_old_modules_that_became_packages_keep_their_names(package, module):
    old = importlib.import_module(f"grpo_kit.{package}")
    new = importlib.import_module(f"grpo_kit.{package}.{module}")
    assert old.__all__ and all(getattr(old, name) is getattr(new, name) for name in old.__all__)


def test_an_unknown_name_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("grpo_kit.no_such_module")


def _old_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module == "grpo_kit":
            names = [f"grpo_kit.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if _is_old(n)]
    return found


def _is_old(name: str) -> bool:
    parts = name.split(".")
    return len(parts) > 1 and parts[0] == "grpo_kit" and parts[1] in grpo_kit.MOVED


def test_nothing_of_ours_imports_an_old_path():
    places = [ROOT / d for d in ("grpo_kit", "tests", "notebooks", "benchmarks", "scripts")]
    files = [p for place in places for p in place.rglob("*.py") if p != Path(__file__).resolve()]
    assert [hit for path in files for hit in _old_imports(path)] == []
