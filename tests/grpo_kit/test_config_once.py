"""The config is built once (issue #42): the GRPOConfig ``plan_run`` builds and checks is the very object the
trainer receives, TRL's constructor runs once per run, and an environment recipe's rows are loaded and its
environments played once, while planning, before the model loads."""

from __future__ import annotations

import pytest
from trl import GRPOConfig

from grpo_kit.models import tiny_model
from grpo_kit.rollout import environments
from grpo_kit.runs import execute, held_out, phases, plan_run
from grpo_kit.trainers import trl_path


@pytest.fixture
def constructions(monkeypatch) -> list[GRPOConfig]:
    """Every GRPOConfig built while the test runs: TRL's own __post_init__, called through."""
    built: list[GRPOConfig] = []
    real = GRPOConfig.__post_init__

    def counted(self) -> None:
        built.append(self)
        real(self)

    monkeypatch.setattr(GRPOConfig, "__post_init__", counted)
    return built


def test_the_config_the_plan_builds_is_the_one_that_trains(tmp_path, constructions):
    plan = plan_run(
        "smoltldr-length-small",
        overrides={"model": "tiny"},
        loop="trl",
        max_steps=1,
        output_dir=tmp_path / "run",
        eval_prompts=0,
    )
    assert isinstance(plan.path_config, GRPOConfig) and constructions == [plan.path_config]
    outcome = execute(plan, samples=0, eval_prompts=0, merge=False)
    assert outcome.result.global_step == 1
    assert outcome.result.trainer.args is plan.path_config  # the very object, not a rebuilt copy
    assert constructions == [plan.path_config]  # TRL's constructor ran once in the whole run


def test_an_environment_recipe_is_loaded_and_played_once_before_the_model(
    tmp_path, monkeypatch, constructions
):
    events: list[str] = []
    for module, name in ((held_out, "training_dataset"), (environments, "check_environments")):
        real = getattr(module, name)

        def recorded(*args, _real=real, _name=name, **kwargs):
            events.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, recorded)
    monkeypatch.setattr(phases, "training_dataset", held_out.training_dataset)
    real_load = phases.load_recipe_model

    def recorded_load(*args, **kwargs):
        events.append("model")
        return real_load(*args, **kwargs)

    monkeypatch.setattr(phases, "load_recipe_model", recorded_load)
    plan = plan_run(
        "counter-lock-env-cpu",
        overrides={"model": "tiny"},
        loop="trl",
        max_steps=1,
        output_dir=tmp_path / "run",
    )
    assert plan.train_dataset is not None
    outcome = execute(plan, samples=0, eval_prompts=0, merge=False)
    assert outcome.result.global_step == 1
    assert events == ["training_dataset", "check_environments", "model"]
    assert outcome.result.trainer.train_dataset is plan.train_dataset
    assert outcome.result.trainer.args is plan.path_config and constructions == [plan.path_config]


def test_a_trainer_built_without_a_plan_builds_its_config_once(tmp_path, constructions):
    model, tokenizer = tiny_model()
    trainer = trl_path.build_trainer(
        "smoltldr-length-small",
        model=model,
        tokenizer=tokenizer,
        output_dir=tmp_path,
        max_steps=1,
        device="cpu",
        eval_steps=None,  # no held-out rows here to evaluate during training
    )
    assert constructions == [trainer.args]


def test_settings_beside_a_built_config_are_refused(tmp_path):
    plan = plan_run(
        "smoltldr-length-small",
        overrides={"model": "tiny"},
        loop="trl",
        max_steps=1,
        output_dir=tmp_path / "run",
    )
    model, tokenizer = tiny_model()
    with pytest.raises(TypeError, match="learning_rate, max_steps given beside args="):
        trl_path.build_trainer(
            plan.recipe,
            args=plan.path_config,
            model=model,
            tokenizer=tokenizer,
            max_steps=3,
            learning_rate=1.0,
        )
