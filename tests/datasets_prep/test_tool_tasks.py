"""Calculator tool tasks: seeded, disjoint splits, correct answers, worked examples that TRL can render."""

from __future__ import annotations

import pytest

from datasets_prep.tool_tasks import (
    CALCULATOR_TOOLS,
    TASK_KINDS,
    add,
    load_tool_tasks,
    multiply,
    subtract,
    tool_task_rows,
)


def _solve(question: str) -> int:
    """Recompute the answer from the question text (independently of the generator's own arithmetic)."""
    import re

    numbers = [int(n) for n in re.findall(r"\d+", question)]
    if "+ " in question and "*" in question:
        return numbers[0] * numbers[1] + numbers[2]
    if any(w in question for w in ("*", "times", "product")):
        return numbers[0] * numbers[1]
    if any(w in question for w in ("+", "plus", "sum")):
        return numbers[0] + numbers[1]
    return numbers[0] - numbers[1]


@pytest.mark.parametrize("kind", sorted(TASK_KINDS))
def test_answers_are_the_arithmetic_of_the_question(kind):
    train, test = tool_task_rows(40, 20, seed=3, kinds=[kind])
    for row in train + test:
        assert row["task"] == kind
        assert row["answer"] == str(_solve(row["question"]))
        assert row["prompt"][-1] == {"role": "user", "content": row["question"]}


def test_same_seed_same_rows_other_seed_other_rows():
    assert tool_task_rows(10, 5, seed=1) == tool_task_rows(10, 5, seed=1)
    assert tool_task_rows(10, 5, seed=1) != tool_task_rows(10, 5, seed=2)


def test_train_and_test_are_disjoint_and_examples_are_never_asked():
    train, test = tool_task_rows(200, 100, seed=0, kinds=["choose"], n_examples=2)
    asked = {r["question"] for r in train} | {r["question"] for r in test}
    assert len(asked) == 300  # no question repeats, so the splits are disjoint
    for row in train + test:
        example_questions = [m["content"] for m in row["prompt"][:-1] if m["role"] == "user"]
        assert len(example_questions) == 2
        assert not asked & set(example_questions)


def test_held_out_questions_do_not_depend_on_the_number_of_training_rows():
    _, small = tool_task_rows(8, 16, seed=0)
    big_train, big = tool_task_rows(500, 16, seed=0)
    assert small == big
    assert not {r["question"] for r in big} & {r["question"] for r in big_train}


def test_worked_example_is_a_complete_tool_exchange_with_true_results():
    (row,), _ = tool_task_rows(1, 0, seed=0, kinds=["two_step"])
    roles = [m["role"] for m in row["prompt"]]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant", "user"]
    tools = {f.__name__: f for f in CALCULATOR_TOOLS}
    for call_msg, result_msg in ((row["prompt"][1], row["prompt"][2]), (row["prompt"][3], row["prompt"][4])):
        fn = call_msg["tool_calls"][0]["function"]
        assert result_msg["content"] == str(tools[fn["name"]](**fn["arguments"]))
    assert row["prompt"][5]["content"] == f"The answer is {row['prompt'][4]['content']}."


def test_choose_asks_for_every_operation_and_shows_each_in_examples():
    train, _ = tool_task_rows(60, 0, seed=0, kinds=["choose"])
    example_calls = {r["prompt"][1]["tool_calls"][0]["function"]["name"] for r in train}
    assert example_calls == {"add", "subtract", "multiply"}
    asked = {_solve(r["question"]) == int(r["answer"]) for r in train}
    assert asked == {True}
    assert any("sum" in r["question"] or "+" in r["question"] for r in train)
    assert any("minus" in r["question"] or "-" in r["question"] for r in train)


def test_load_tool_tasks_renders_with_the_tool_template():
    from grpo_kit.models import smollm2_tokenizer
    from grpo_kit.rollout.tool_template import enable_tool_calling

    splits = load_tool_tasks(4, 2, seed=0, system_prompt="Use the tools.")
    assert set(splits) == {"train", "test"}
    assert splits["train"].num_rows == 4 and splits["test"].num_rows == 2
    assert {"prompt", "answer", "task", "question"} <= set(splits["train"].column_names)
    tok = enable_tool_calling(smollm2_tokenizer())
    # Rows come back from Arrow with None for absent keys (tool_calls on plain messages): must still render.
    text = tok.apply_chat_template(
        splits["test"][0]["prompt"], tools=CALCULATOR_TOOLS, tokenize=False, add_generation_prompt=True
    )
    assert text.startswith("<|im_start|>system\nUse the tools.\n\nYou can call these tools:")
    assert "\nCALL multiply(a=" in text and "<|im_start|>tool\nRESULT " in text
    assert text.endswith(splits["test"][0]["question"] + "<|im_end|>\n<|im_start|>assistant\n")


def test_calculator_tools_compute():
    assert (add(2, 3), subtract(2, 3), multiply(2, 3)) == (5, -1, 6)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"kinds": ["divide"]}, ValueError, "choose from"),
        ({"kinds": "multiply"}, TypeError, "list of task kinds"),
        ({"kinds": []}, ValueError, "choose from"),
        ({"n_examples": -1}, ValueError, "n_examples"),
        ({"n_train": 2.5}, ValueError, "n_train"),
    ],
)
def test_bad_arguments_name_the_fix(kwargs, error, match):
    args = {"n_train": 4, "n_test": 2, **kwargs}
    with pytest.raises(error, match=match):
        tool_task_rows(**args)
