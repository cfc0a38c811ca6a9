"""No silent no-ops: every setting a training path does not implement is refused before the model loads,
naming the path that has it (grpo_kit.config.trainers), and run.json records what was applied."""

from __future__ import annotations

import json

import pytest

from grpo_kit import runs
from grpo_kit.config.rules import LOOP_ONLY_FIELDS, grpo_config_field_names
from grpo_kit.config.trainers import (
    IMPLEMENTED_BY,
    LOOP_BEHAVES_AS,
    PATHS,
    applied_settings,
    check_path_settings,
    loop_fields,
    refusal,
)

# A value each partial setting can take (its refusal must not depend on the value).
VALUES = {"push_to_hub": True, "log_completions": True, "sync_ref_model": True, "use_vllm": True}


def _value(name):
    return VALUES.get(name, 0.05 if "coef" in name or "threshold" in name or "alpha" in name else 2)


REFUSED = [(name, path) for name, paths in IMPLEMENTED_BY.items() for path in PATHS if path not in paths]


def test_the_table_names_real_settings_and_agrees_with_the_loop_config():
    known = grpo_config_field_names() | LOOP_ONLY_FIELDS
    assert set(IMPLEMENTED_BY) <= known and set(LOOP_BEHAVES_AS) <= grpo_config_field_names()
    for name, paths in IMPLEMENTED_BY.items():
        # a GRPOLoopConfig field the table calls unimplemented on the loop (or the reverse) is a stale line
        assert ("standalone" in paths) == (name in loop_fields()), (
            f"{name}: edit its line in path_settings.IMPLEMENTED_BY"
        )
    assert set(LOOP_BEHAVES_AS).isdisjoint(loop_fields())


@pytest.mark.parametrize(("name", "path"), REFUSED)
def test_every_refused_setting_on_every_path_names_the_path_that_has_it(name, path):
    message = refusal(name, _value(name), path)
    assert message is not None and name in message
    assert any(f"--loop {other}" in message for other in IMPLEMENTED_BY[name])
    with pytest.raises(ValueError, match=name):
        check_path_settings({name: _value(name)}, path)


@pytest.mark.parametrize(("name", "path"), REFUSED)
def test_plan_refuses_it_before_the_model_loads(name, path, tmp_path, monkeypatch):
    monkeypatch.setattr(
        "grpo_kit.runs.phases.load_recipe_model", lambda recipe: pytest.fail("the model loaded first")
    )
    with pytest.raises(ValueError, match=name):
        runs.plan_run(overrides={"model": "tiny", name: _value(name)}, loop=path, output_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_the_loop_accepts_a_trl_field_only_at_the_value_it_behaves_as():
    assert refusal("optim", "adamw_torch", "standalone") is None
    message = refusal("optim", "adamw_8bit", "standalone")
    assert "adamw_torch" in message and "--loop trl" in message
    assert refusal("warmup_ratio_unknown_to_the_loop", 1, "standalone") is not None  # no silent default
    assert (
        refusal("optim", "adamw_8bit", "trl") is None and refusal("learning_rate", 1e-5, "standalone") is None
    )


def test_a_setting_the_default_loop_lacks_is_refused_naming_trl_through_the_cli(tmp_path, capsys):
    from grpo_kit.cli import main

    argv = [
        "train",
        "--set",
        "model=tiny",
        "--set",
        "off_policy_mask_threshold=0.5",
        "--output-dir",
        str(tmp_path),
    ]
    assert main(argv) == 2
    out = capsys.readouterr().out.replace("\n", " ")
    assert "off_policy_mask_threshold" in out and "--loop trl" in out
    assert not any(tmp_path.iterdir())  # refused before the model loads: nothing written


def test_entropy_coef_is_applied_by_the_default_loop_and_recorded(tmp_path):
    """The loop implements TRL's entropy bonus (grpo_kit.core.losses.entropy): accepted, and what the plan applies."""
    assert "entropy_coef" not in IMPLEMENTED_BY and refusal("entropy_coef", 0.05, "standalone") is None
    plan = runs.plan_run(
        overrides={"model": "tiny", "entropy_coef": 0.05}, max_steps=1, output_dir=tmp_path / "r"
    )
    assert plan.path_config.entropy_coef == 0.05
    assert applied_settings(plan.recipe.training, plan.path_config)["entropy_coef"] == 0.05


def test_applied_settings_are_read_back_from_the_resolved_config(tmp_path):
    plan = runs.plan_run(overrides={"model": "tiny"}, max_steps=3, output_dir=tmp_path / "r")
    applied = applied_settings(plan.recipe.training, plan.path_config)
    assert applied["max_steps"] == 3 == plan.path_config.max_steps
    assert applied["optim"] == "adamw_torch" and applied["learning_rate"] == plan.path_config.learning_rate
    trl_plan = runs.plan_run(overrides={"model": "tiny"}, loop="trl", max_steps=3, output_dir=tmp_path / "t")
    trl_applied = applied_settings(trl_plan.recipe.training, trl_plan.path_config)
    assert trl_applied["optim"] == "adamw_torch" and trl_applied["max_steps"] == 3
    assert trl_applied["gradient_checkpointing"] is False
    json.dumps(trl_applied)  # run.json can hold it
