"""The environment tasks: rows disjoint and seeded, episodes deterministic in the row, state the reward reads."""

from __future__ import annotations

import pytest

from datasets_prep.environment_tasks import (
    CounterEnv,
    LockEnv,
    environment_task_rows,
    load_environment_task_split,
)
from grpo_kit.models.embedded import smollm2_tokenizer
from grpo_kit.rollout.tool_template import enable_tool_calling


def test_held_out_rows_are_disjoint_and_do_not_depend_on_the_training_size():
    train, test = environment_task_rows(40, 8, seed=0, environments=["counter", "lock"])
    _, test_again = environment_task_rows(200, 8, seed=0, environments=["counter", "lock"])
    assert test == test_again
    assert not {r["target"] for r in train} & {r["target"] for r in test}
    assert [r["environment"] for r in test[:4]] == ["counter", "lock", "counter", "lock"]
    examples = {r["prompt"][1]["tool_calls"][0]["function"]["arguments"].popitem()[1] for r in train + test}
    assert not examples & {r["target"] for r in train + test}  # a worked example never gives a task away


def test_the_counter_keeps_every_call_so_a_second_call_overshoots():
    env = CounterEnv()
    env.reset(target=347, prompt=[], question="ignored columns are fine")
    assert env.increment(step=347) == 347 and env.get_reward() == 1.0
    assert env.increment(step=347) == 694 and env.get_reward() == 0.0
    env.reset(target=347)  # a new episode starts from 0 again
    assert env.counter == 0 and env.calls == 0


def test_the_lock_opens_on_its_code_only():
    env = LockEnv()
    env.reset(target=175)
    assert env.enter_code(code=176) == "Wrong code. The lock stays closed." and env.get_reward() == 0.0
    assert env.enter_code(code=175) == "The lock is open." and env.get_reward() == 1.0
    assert env.wrong_codes == 1


def test_a_mixed_column_of_calls_renders_without_the_other_tools_arguments():
    # datasets stores both tools' calls as one Arrow struct {step, code}; the template must not show None.
    rows = load_environment_task_split("test", n_train=0, n_test=2, environments=["counter", "lock"])
    assert rows[0]["prompt"][1]["tool_calls"][0]["function"]["arguments"]["code"] is None  # what Arrow does
    tokenizer = enable_tool_calling(smollm2_tokenizer())
    text = tokenizer.apply_chat_template(rows[0]["prompt"], tokenize=False)
    assert "CALL increment(step=" in text and "null" not in text and "code=" not in text


def test_bad_arguments_name_the_fix():
    with pytest.raises(ValueError, match="choose from"):
        environment_task_rows(4, 2, environments=["maze"])
    with pytest.raises(TypeError, match=r"environments=\['counter'\]"):
        environment_task_rows(4, 2, environments="counter")
    with pytest.raises(ValueError, match="drop dataset_source"):
        load_environment_task_split("train", source="rows.jsonl")
    with pytest.raises(ValueError, match="'train' or 'test'"):
        load_environment_task_split("validation")
