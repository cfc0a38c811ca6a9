"""One declaration per setting (grpo_kit.config.declarations): the loop's config, the path table, the command
line, recipes and ``--set`` all read it, and give one verdict for one value."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from grpo_kit.config.declarations import LORA_DEFAULTS, PATHS, SETTINGS
from grpo_kit.config.loop import GRPOLoopConfig
from grpo_kit.config.trainers import IMPLEMENTED_BY

GRPO_KIT = Path(__file__).resolve().parents[2] / "grpo_kit"


def test_the_loops_fields_take_default_and_help_from_the_declaration():
    for field in dataclasses.fields(GRPOLoopConfig):
        setting = SETTINGS[field.name]
        assert field.default == setting.default, field.name
        assert field.metadata["help"] == setting.help, field.name


def test_the_path_table_is_each_declarations_applied_by():
    partial = {name: s.applied_by for name, s in SETTINGS.items() if s.applied_by != PATHS}
    assert IMPLEMENTED_BY == partial
    assert IMPLEMENTED_BY["max_bad_steps"] == ("standalone",) and IMPLEMENTED_BY["use_vllm"] == (
        "trl",
        "unsloth",
    )


def test_the_max_steps_flag_is_the_declarations():
    from grpo_kit.cli.parser import build_parser

    parser = build_parser()
    train = next(a for a in parser._subparsers._group_actions if "train" in a.choices).choices["train"]
    flag = next(action for action in train._actions if action.dest == "max_steps")
    assert flag.option_strings == ["--max-steps"] and flag.type is int and flag.default is None
    assert flag.help.startswith(SETTINGS["max_steps"].help)


@pytest.mark.parametrize("value", [-1, 0, -2, 3])
def test_max_steps_gets_one_verdict_from_the_flag_and_from_set(value, tmp_path):
    """``--max-steps N`` (plan_run's max_steps) and ``--set max_steps=N`` (an override) run the same rule: -1 (TRL's
    num_train_epochs) and N >= 1 are accepted, 0 and other negatives refused with the same message."""
    from grpo_kit.runs import plan_run

    verdicts = []
    for given in ({"max_steps": value}, {"overrides": {"model": "tiny", "max_steps": value}}):
        kwargs = {"overrides": {"model": "tiny"}, **given}
        try:
            plan = plan_run(**kwargs, output_dir=tmp_path / f"run{len(verdicts)}")
            verdicts.append(("planned", plan.path_config.max_steps))
        except ValueError as error:
            verdicts.append(("refused", str(error)))
    assert verdicts[0] == verdicts[1]
    assert verdicts[0][0] == ("planned" if value in (-1, 3) else "refused")
    if verdicts[0][0] == "refused":
        assert "at least 1, or -1" in verdicts[0][1]


def test_max_steps_zero_is_one_line_from_the_flag_and_from_set(tmp_path, capsys):
    from grpo_kit.cli import main

    lines = []
    for argv in (["--max-steps", "0"], ["--set", "max_steps=0"]):
        assert main(["train", "--set", "model=tiny", "--output-dir", str(tmp_path / "run"), *argv]) == 2
        lines.append(" ".join(capsys.readouterr().out.split()))
    assert lines[0] == lines[1] and "max_steps=0: give the optimizer steps to run" in lines[0]
    assert not (tmp_path / "run").exists()


def test_a_recipe_file_gets_the_declared_range(tmp_path):
    from grpo_kit.recipes.files import recipe_from_text

    text = (
        "name: t\nmodel: tiny\ndataset: smoltldr\nrewards: [length_reward]\ntraining: {learning_rate: -1.0}\n"
    )
    with pytest.raises(ValueError, match="learning_rate=-1.0 is out of range"):
        recipe_from_text(text, fmt="yaml", base_dir=tmp_path)


def test_beta_has_one_range_on_every_path():
    """β >= 0 (the KL coefficient): the rule compute_loss runs is the one the declaration runs."""
    from grpo_kit.core.losses.validation import check_loss_call

    with pytest.raises(ValueError, match="KL coefficient must be >= 0"):
        SETTINGS["beta"].validate(-0.1)
    with pytest.raises(ValueError, match="KL coefficient must be >= 0"):
        check_loss_call(loss_type="dapo", beta=-0.1)
    SETTINGS["beta"].validate(0.0)
    SETTINGS["beta"].validate(0.04)


def test_lora_has_one_set_of_defaults_and_the_main_jobs_is_unchanged():
    from grpo_kit.models.lora import check_lora
    from grpo_kit.recipes.catalogue import DEFAULT_RECIPE, get_recipe
    from grpo_kit.recipes.recipe import LoraSettings

    assert dataclasses.asdict(LoraSettings()) == LORA_DEFAULTS
    config = check_lora({})
    assert {name: getattr(config, name) for name in ("r", "lora_alpha", "lora_dropout")} == {
        "r": 16,
        "lora_alpha": 32,
        "lora_dropout": 0.0,
    }
    # the main job's adapter, as it trained before the defaults were joined
    main_job = get_recipe(DEFAULT_RECIPE).lora.to_peft_config()
    assert (main_job.r, main_job.lora_alpha, main_job.lora_dropout) == (16, 32, 0.0)
    assert main_job.target_modules == "all-linear"


def test_grpo_config_is_constructed_in_one_place():
    calls = []
    for path in sorted(GRPO_KIT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "GRPOConfig":
                calls.append(f"{path.relative_to(GRPO_KIT).as_posix()}:{node.lineno}")
    assert len(calls) == 1 and calls[0].startswith("trainers/builder.py:"), calls
