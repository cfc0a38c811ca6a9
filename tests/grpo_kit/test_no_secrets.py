"""No secret in a run folder (issue 24, finding 2): ``--set hub_token=…`` lands in no file of a run, on
either loop (``run.json``, ``run_config.json``, checkpoints, the TRL path's ``training_args.bin``); it is
redacted, the configuration hash ignores it, and a printed resume command does not show it."""

from __future__ import annotations

import json

import pytest

from grpo_kit import runs
from grpo_kit.artifacts.checkpoint import (
    CREDENTIAL_PLACEHOLDER,
    config_diff,
    config_hash,
    jsonable_config,
    read_checkpoint_config,
)

SECRET = "hf_" + "grpokitIssue24NotARealToken"  # split: the repo itself holds no token-shaped string


def _files_holding(folder, needle: str) -> list[str]:
    data = needle.encode()
    return sorted(
        str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and data in p.read_bytes()
    )


OVERRIDES = {
    "model": "tiny",
    "hub_token": SECRET,
    "max_completion_length": 4,
    "per_device_train_batch_size": 4,
    "num_generations": 2,
    "save_steps": 1,
    "logging_steps": 1,
}


def test_the_standalone_loop_refuses_a_token_without_showing_it(tmp_path):
    """The standalone loop never talks to the Hub: ``hub_token`` is refused before anything loads (no silent
    no-op), and the refusal names the setting, never its value."""
    with pytest.raises(ValueError, match="hub_token") as refused:
        plan = runs.plan_run(
            "smoltldr-length-small",
            overrides=OVERRIDES,
            loop="standalone",
            max_steps=1,
            output_dir=tmp_path / "run",
            eval_prompts=0,
        )
        runs.execute(plan, samples=1, merge=False, eval_prompts=0)
    assert SECRET not in str(refused.value) and SECRET[3:] not in str(refused.value)
    assert CREDENTIAL_PLACEHOLDER in str(refused.value) and "--loop trl" in str(refused.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("loop", ["trl"])
def test_a_token_lands_in_no_file_of_a_run(tmp_path, loop):
    plan = runs.plan_run(
        "smoltldr-length-small",
        overrides=OVERRIDES,
        loop=loop,
        max_steps=1,
        output_dir=tmp_path / "run",
        eval_prompts=0,
    )
    outcome = runs.execute(plan, samples=1, merge=False, eval_prompts=0)
    folder = outcome.plan.output_dir
    written = [p for p in folder.rglob("*") if p.is_file()]
    assert any(p.name == "run_config.json" for p in written) and (folder / "run.json").is_file()
    if loop == "trl":
        assert any(p.name == "training_args.bin" for p in written)
        assert outcome.result.trainer.args.hub_token == SECRET  # the trainer keeps it for its own Hub calls
    assert _files_holding(folder, SECRET) == []
    assert _files_holding(folder, SECRET[3:]) == []  # not even encoded differently around the prefix
    assert json.loads((folder / "run.json").read_text())["training"]["hub_token"] == CREDENTIAL_PLACEHOLDER
    assert "hub_token" not in plan.resume_command() and SECRET not in plan.resume_command()
    assert read_checkpoint_config(folder)["recipe"]["training"]["hub_token"] == CREDENTIAL_PLACEHOLDER


def test_the_configuration_hash_and_diff_ignore_credentials():
    with_token = {"recipe": {"training": {"learning_rate": 1e-5, "hub_token": SECRET}}}
    other_token = {"recipe": {"training": {"learning_rate": 1e-5, "hub_token": "hf_other"}}}
    without = {"recipe": {"training": {"learning_rate": 1e-5}}}
    assert config_hash(with_token) == config_hash(other_token) == config_hash(without)
    assert config_diff(with_token, without) == {}
    assert SECRET not in json.dumps(jsonable_config(with_token))
    nested = {"recipe": {"training": {"model_init_kwargs": {"token": SECRET, "dtype": "float32"}}}}
    assert SECRET not in json.dumps(jsonable_config(nested))
    assert jsonable_config(nested)["recipe"]["training"]["model_init_kwargs"]["dtype"] == "float32"
    changed = {"recipe": {"training": {"learning_rate": 2e-5, "hub_token": SECRET}}}
    assert config_hash(changed) != config_hash(with_token)  # everything else still counts
