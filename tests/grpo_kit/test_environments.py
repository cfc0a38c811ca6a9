"""Environments on the recipe path: every environment check before the model loads, TRL's own trainer as the
peer for what an episode is (tools per environment, reset arguments, get_reward columns), and the evaluation
replaying episodes on the embedded model."""

from __future__ import annotations

import math
from typing import ClassVar

import pytest

from datasets_prep.environment_tasks import CounterEnv, LockEnv
from grpo_kit.recipes.catalogue import get_recipe
from grpo_kit.rollout.environments import (
    check_environments,
    environment_reward_funcs,
    environment_tools,
    factory_for_row,
    reset_episode,
    resolve_environment_factory,
)
from grpo_kit.rollout.tool_rollout import run_tool_calls
from grpo_kit.trainers import trl_path
from rewards.tools import count_tool_calls

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

from shared import RecordingLoader


def env_recipe(**overrides):
    small = {
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 12,
        "max_steps": 1,
        "dataset_size": 8,
    }
    return get_recipe("counter-lock-env-cpu", **{**small, **overrides})


class NoReset:
    def increment(self, step: int) -> int:
        """Add.

        Args:
            step: amount.
        """
        return step


class NoHints:
    def reset(self, **row) -> None:
        self.counter = 0

    def increment(self, step):
        """Add.

        Args:
            step: amount.
        """
        return step


class NoDocstring:  # not a CounterEnv subclass: inspect.getdoc (TRL's too) would inherit its docstring
    def reset(self, **row) -> None:
        self.counter = 0

    def increment(self, step: int) -> int:
        return step


class TextReward(CounterEnv):
    def get_reward(self) -> str:
        return "yes"


class RewardWithArgument(CounterEnv):
    def get_reward(self, completion) -> float:
        return 0.0


class RaisingTool(CounterEnv):
    def increment(self, step: int) -> int:
        """Add.

        Args:
            step: amount.
        """
        raise RuntimeError("the counter is jammed")


class StrictReset(CounterEnv):
    def reset(self, target: int) -> None:  # no **row: TRL passes every column
        self.counter, self.target = 0, target


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (NoReset, "has no reset method"),
        (NoHints, "no type hint for step"),
        (NoDocstring, "no docstring"),
        (TextReward, "must return a number"),
        (RewardWithArgument, "takes completion; TRL calls it with no argument"),
        (RaisingTool, r"increment\(step=1\) raised RuntimeError: the counter is jammed"),
        (StrictReset, r"end its signature with \*\*row"),
        ({"counter": CounterEnv}, r"names \['lock'\], which no environment is registered"),
        (3, "environment_factory must be a class"),
    ],
)
def test_bad_environments_fail_before_the_model_loads(tmp_path, factory, message):
    loader = RecordingLoader()
    with pytest.raises((ValueError, TypeError), match=message):
        trl_path.build_trainer(
            env_recipe(),
            model_loader=loader,
            output_dir=tmp_path,
            device="cpu",
            trainer_kwargs={"environment_factory": factory},
        )
    assert loader.calls == []


def test_unknown_environment_names_fail_when_the_recipe_is_made():
    with pytest.raises(ValueError, match=r"unknown environment\(s\) \['maze'\]"):
        env_recipe(environment=("counter", "maze"))
    with pytest.raises(ValueError, match="names one environment twice"):
        env_recipe(environment=("counter", "counter"))


def test_the_standalone_loop_refuses_an_environment_and_names_the_trl_loop(tmp_path):
    from grpo_kit.runs import plan_run

    with pytest.raises(ValueError, match="--loop trl"):
        plan_run("counter-lock-env-cpu", loop="standalone", output_dir=tmp_path / "run")


def test_a_dataset_without_the_routing_column_is_refused():
    from datasets import Dataset

    rows = Dataset.from_list([{"prompt": [{"role": "user", "content": "hi"}], "target": 3}])
    with pytest.raises(ValueError, match="need an 'environment' column"):
        check_environments(resolve_environment_factory(("counter", "lock")), rows)
    check_environments(CounterEnv, rows)  # one environment needs no routing


class _Recorded:
    """Mixin recording every reset's keyword arguments (one list per class, across instances)."""

    def reset(self, **row):
        type(self).resets.append(dict(row))
        return super().reset(**row)


class RecordedCounter(_Recorded, CounterEnv):
    resets: ClassVar[list] = []


class RecordedLock(_Recorded, LockEnv):
    resets: ClassVar[list] = []


def test_one_real_trl_step_plays_the_episodes_as_our_rollouts_do(tmp_path):
    RecordedCounter.resets.clear()
    RecordedLock.resets.clear()
    factory = {"counter": RecordedCounter, "lock": RecordedLock}
    result = trl_path.train_with_trl(
        env_recipe(),
        model_loader=RecordingLoader(),
        output_dir=tmp_path,
        device="cpu",
        plot=False,
        save_final=False,
        trainer_kwargs={"environment_factory": factory},
    )
    trainer = result.trainer
    # The tools TRL exposes per environment are ours (environment_tools), each environment only its own.
    for name, make in factory.items():
        assert [t.__name__ for t in trainer._env_tools[name]] == [
            t.__name__ for t in environment_tools(make())
        ]
    assert [t.__name__ for t in trainer._env_tools["counter"]] == ["increment"]
    # TRL's get_reward columns are ours: one per class, named after it, after the recipe's reward_funcs.
    assert trainer.reward_func_names[-2:] == [f.__name__ for f in environment_reward_funcs(factory)]
    # reset got the row's columns without the routing one, as factory_for_row gives them.
    rows = {r["target"]: dict(r) for r in env_recipe().load_dataset()}
    played = RecordedCounter.resets[-2:] + RecordedLock.resets[-2:]  # the probe's resets come first
    for kwargs in played:
        assert kwargs == factory_for_row(factory, rows[kwargs["target"]])[1]
        assert "environment" not in kwargs
    logged = result.log_history[0]
    assert "tools/call_frequency" in logged and "rewards/RecordedCounter/mean" in logged


def test_a_raising_tool_inside_a_rollout_is_a_failed_call_not_a_crash():
    env = RaisingTool()
    env.reset(target=5)
    call = {"type": "function", "function": {"name": "increment", "arguments": {"step": 5}}}
    message = {"role": "assistant", "content": "", "tool_calls": [call]}
    results = run_tool_calls(message, {t.__name__: t for t in environment_tools(env)})
    assert results == [{"role": "tool", "name": "increment", "content": "{'error': 'the counter is jammed'}"}]
    assert count_tool_calls([message, *results]) == (1, 1)


def test_reset_episode_gives_a_fresh_instance_and_appends_what_reset_returns():
    class Greeting(CounterEnv):
        def reset(self, target: int = 0, **row) -> str:
            super().reset(target=target)
            return f" Reach {target}."

    row = {"prompt": [{"role": "user", "content": "Go."}], "target": 4}
    first, prompt = reset_episode(Greeting, row)
    second, _ = reset_episode(Greeting, row)
    assert first is not second and first.target == second.target == 4
    assert prompt[-1]["content"] == "Go. Reach 4." and row["prompt"][-1]["content"] == "Go."


def test_the_get_reward_column_scores_only_its_own_class():
    counter_reward, lock_reward = environment_reward_funcs({"counter": CounterEnv, "lock": LockEnv})
    counter, lock = CounterEnv(), LockEnv()
    counter.reset(target=2)
    counter.increment(step=2)
    lock.reset(target=9)
    assert counter_reward(["", ""], environments=[counter, lock]) == [1.0, None]
    assert lock_reward(["", ""], environments=[counter, lock]) == [None, 0.0]
    assert counter_reward(["text alone"]) == [None]  # no episode: not scored (preflight's text probes)
    assert counter_reward.max_reward == 1.0 and counter_reward.reward_kind == "accuracy"


@pytest.fixture(scope="module")
def embedded():
    from grpo_kit.models import load_model

    return load_model("smollm2-135m-instruct")


def test_held_out_evaluation_replays_each_episode_on_the_embedded_model(embedded):
    from grpo_kit.runs.held_out import evaluate_held_out, held_out_rows

    recipe = get_recipe("counter-lock-env-cpu")
    model, tokenizer = embedded
    rows = held_out_rows(recipe, 4)
    report = evaluate_held_out(recipe, model, tokenizer, recipe.build_reward_funcs(tokenizer), rows)
    metrics = report.per_prompt
    assert report.reward_names == ["tool_call_reward", "CounterEnv", "LockEnv"]
    for i, row in enumerate(rows):
        own, other = (
            ("CounterEnv", "LockEnv") if row["environment"] == "counter" else ("LockEnv", "CounterEnv")
        )
        assert math.isnan(metrics[f"reward/{other}"][i])  # the other environment's column skips the row
        assert metrics["accuracy"][i] == metrics[f"reward/{own}"][i]  # success is the episode's get_reward
        assert metrics["tool_calls"][i] >= metrics["failed_calls"][i] >= 0 and metrics["turns"][i] >= 1
    # The greedy base model copies the worked example on these rows: the episodes really ran in the state.
    assert sum(metrics["accuracy"]) >= 2
