"""Every recipe starts: the whole catalogue x {standalone, trl} through the CLI with the tiny model.

A recipe added to ``grpo_kit.recipes.catalogue.RECIPES`` is covered here without editing this file. Planning takes
no flag but the model (the recipe's own length; `--max-steps` absent used to overwrite it with None);
the real start adds only `--max-steps 1` and a small evaluation so the catalogue fits in CI. A loop a
recipe does not allow (8-bit quantization or tools on the loop) is refused before the model loads with one
line naming the fix (4-bit QLoRA runs on either loop, on CPU too: bitsandbytes' CPU backend); offline, a Hub recipe stops at its dataset with the one-line offline
error.
"""

from __future__ import annotations

import json

import pytest

from grpo_kit import runs
from grpo_kit.cli import main
from grpo_kit.recipes.catalogue import RECIPES

CASES = [(name, loop) for name in RECIPES for loop in ("standalone", "trl")]


def _refused_because(recipe, loop: str) -> str | None:
    if recipe.sees_images:  # images: the standalone loop is text-only, and so is the tiny model (test_vlm.py)
        return "text-only"
    if loop == "standalone" and recipe.quantization == "8bit":
        return "8bit"
    if loop == "standalone" and recipe.training.get("optim", "adamw_torch") != "adamw_torch":
        return "the standalone loop always runs as optim='adamw_torch'"
    if loop == "standalone" and recipe.tools:
        return "tools"
    if loop == "standalone" and recipe.environment:
        return "in an environment"
    if loop != "standalone" and recipe.guided_sampling:
        return "only the standalone loop does"
    return None


@pytest.mark.parametrize(("name", "loop"), CASES)
def test_every_recipe_plans_with_no_flag_but_the_model(name, loop, tmp_path):
    recipe = RECIPES[name]
    why = _refused_because(recipe, loop)
    if why is not None:
        with pytest.raises((ValueError, RuntimeError), match=why):
            runs.plan_run(name, overrides={"model": "tiny"}, loop=loop, output_dir=tmp_path / "run")
        return
    plan = runs.plan_run(name, overrides={"model": "tiny"}, loop=loop, output_dir=tmp_path / "run")
    assert plan.recipe.training.get("max_steps") == recipe.training.get("max_steps")  # never None
    assert plan.invocation["max_steps"] == recipe.training.get("max_steps")
    if recipe.training.get("max_steps") is None:  # the recipe trains for its epochs
        assert plan.path_config.max_steps == -1


@pytest.mark.parametrize(("name", "loop"), CASES)
def test_every_recipe_starts_from_the_cli(name, loop, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a Hub dataset comes from the cache or stops with one line
    out_dir = tmp_path / "run"
    argv = ["train", "--recipe", name, "--loop", loop, "--set", "model=tiny", "--output-dir", str(out_dir)]
    status = main([*argv, "--max-steps", "1", "--eval-prompts", "2", "--samples", "1", "--no-merge"])
    out = capsys.readouterr().out.replace("\n", " ")
    if _refused_because(RECIPES[name], loop) is not None:
        assert status == 2 and "error:" in out and not out_dir.exists()
        return
    if status == 1 and "cannot load" in out:  # offline, a Hub dataset not in the cache
        assert RECIPES[name].dataset_source is None and "HF_HUB_OFFLINE" in out
        return
    assert status == 0, out
    summary = json.loads((out_dir / "run.json").read_text())
    assert summary["steps"] == 1 and summary["loop"] == loop
    assert summary["training"]["max_steps"] == 1  # the applied value, read back from the path's config
    assert summary["evaluation"]["num_prompts"] == 2
