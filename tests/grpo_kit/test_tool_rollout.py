"""The evaluation tool loop: TRL's parser on real token ids, tool results like TRL's, multi-turn completions
scored by grpo_kit.evaluation and compared with the paired bootstrap."""

from __future__ import annotations

import pytest

from datasets_prep.tool_tasks import CALCULATOR_TOOLS, load_tool_task_split
from grpo_kit.evaluation import compare, evaluate
from grpo_kit.models import tiny_model
from grpo_kit.models.embedded import smollm2_tokenizer
from grpo_kit.rollout.generation import Decoding, GeneratedCompletion
from grpo_kit.rollout.tool_rollout import (
    _parse_turn,
    completion_text,
    generate_with_tools,
    run_tool_calls,
    tool_generate,
)
from grpo_kit.rollout.tool_template import enable_tool_calling
from rewards import tool_call_reward, tool_success_reward

TOOLS = {f.__name__: f for f in CALCULATOR_TOOLS}


@pytest.fixture(scope="module")
def tok():
    return enable_tool_calling(smollm2_tokenizer())


@pytest.fixture(scope="module")
def rows():
    return load_tool_task_split("test", n_train=0, n_test=4, seed=0)


def _completion(tok, text):
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return GeneratedCompletion(text, len(ids), True, ids)


def test_a_call_is_parsed_with_the_template_parser_and_the_tool_runs(tok, rows):
    message = _parse_turn(
        tok, rows[0]["prompt"], _completion(tok, "CALL multiply(a=37, b=48)<|im_end|>"), CALCULATOR_TOOLS
    )
    assert message["tool_calls"][0]["function"] == {"name": "multiply", "arguments": {"a": 37, "b": 48}}
    assert run_tool_calls(message, TOOLS) == [{"role": "tool", "name": "multiply", "content": "1776"}]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("CALL divide(a=1, b=2)<|im_end|>", "Tool divide not found"),
        ("CALL multiply(x=1, y=2)<|im_end|>", "unexpected keyword"),
        ("CALL multiply(3, 4)<|im_end|>", "missing 2 required"),
    ],
)
def test_bad_calls_come_back_as_error_results_not_exceptions(tok, rows, text, error):
    message = _parse_turn(tok, rows[0]["prompt"], _completion(tok, text), CALCULATOR_TOOLS)
    [result] = run_tool_calls(message, TOOLS)
    assert result["role"] == "tool" and "'error'" in result["content"] and error in result["content"]


def test_completion_text_shows_call_result_and_answer():
    messages = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "multiply", "arguments": {"a": 3, "b": 4}}}
            ],
        },
        {"role": "tool", "name": "multiply", "content": "12"},
        {"role": "assistant", "content": "The answer is 12."},
    ]
    assert completion_text(messages) == "CALL multiply(a=3, b=4)\nRESULT 12\nThe answer is 12."


def test_evaluate_scores_multi_turn_messages_and_compare_sees_the_change(rows):
    def rollout(row, good: bool):
        a, b = 1, int(row["answer"])
        answer = a * b if good else a * b + 1
        messages = [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": "multiply", "arguments": {"a": a, "b": b}}}
                ],
            },
            {"role": "tool", "name": "multiply", "content": str(answer)},
            {"role": "assistant", "content": f"The answer is {answer}."},
        ]
        return GeneratedCompletion(completion_text(messages), 20, True, [], messages)

    def sampler_for(good: bool):
        return lambda prompts, n: [[rollout(r, good)] * n for r in rows]

    funcs = [tool_success_reward, tool_call_reward]
    before = evaluate(
        None, None, rows, funcs, num_prompts=4, k=2, sampler=sampler_for(False), reward_weights=[1.0, 0.0]
    )
    after = evaluate(
        None, None, rows, funcs, num_prompts=4, k=2, sampler=sampler_for(True), reward_weights=[1.0, 0.0]
    )
    assert (
        before.metrics["reward/tool_success_reward"] == 0.0
        and before.metrics["reward/tool_call_reward"] == 1.0
    )
    assert after.metrics["mean@2"] == 1.0
    assert compare(before, after, metric="mean@2").mean_diff == pytest.approx(1.0)


def test_generate_with_tools_returns_the_generate_shape_with_messages(tok, rows):
    model, _ = tiny_model(seed=0)
    groups = generate_with_tools(
        model,
        tok,
        [rows[0]["prompt"], rows[1]["prompt"]],
        2,
        Decoding(max_new_tokens=6, temperature=1.0, seed=0),
        tools=CALCULATOR_TOOLS,
    )
    again = generate_with_tools(
        model,
        tok,
        [rows[0]["prompt"], rows[1]["prompt"]],
        2,
        Decoding(max_new_tokens=6, temperature=1.0, seed=0),
        tools=CALCULATOR_TOOLS,
    )
    assert [len(g) for g in groups] == [2, 2]
    assert all(c.messages and c.messages[0]["role"] == "assistant" for g in groups for c in g)
    assert [c.text for g in groups for c in g] == [c.text for g in again for c in g]  # seeded


def test_tool_generate_plugs_into_evaluate_with_the_tiny_model(tok, rows):
    model, _ = tiny_model(seed=0)
    report = evaluate(
        model,
        tok,
        rows,
        [tool_success_reward],
        num_prompts=2,
        k=2,
        max_new_tokens=6,
        generate_fn=tool_generate(CALCULATOR_TOOLS),
    )
    assert report.num_prompts == 2 and set(report.per_prompt["mean@2"]) <= {0.0, 1.0}


def test_zero_tool_iterations_is_refused(tok, rows):
    with pytest.raises(ValueError, match="would never run a tool"):
        generate_with_tools(
            None, tok, [rows[0]["prompt"]], tools=CALCULATOR_TOOLS, max_tool_calling_iterations=0
        )


def test_preflight_scores_multi_turn_rollouts_and_sees_the_zero_variance_groups(rows):
    from grpo_kit.evaluation import preflight

    def rollout(answer):
        messages = [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "multiply", "arguments": {"a": 1, "b": int(answer)}},
                    }
                ],
            },
            {"role": "tool", "name": "multiply", "content": answer},
            {"role": "assistant", "content": f"The answer is {answer}."},
        ]
        return GeneratedCompletion(completion_text(messages), 20, True, [], messages)

    # Prompt 0: all four right (zero variance); prompt 1: two right, two wrong.
    groups = [[rollout(rows[0]["answer"])] * 4, [rollout(rows[1]["answer"])] * 2 + [rollout("7")] * 2]
    report = preflight.check(
        None,
        None,
        rows.select(range(2)),
        [tool_success_reward, tool_call_reward],
        num_prompts=2,
        num_generations=4,
        sampler=lambda prompts, g: groups,
    )
    assert report.zero_std_share == 0.5
    assert report.reward_mean["tool_call_reward"] == 1.0
    assert report.reward_mean["tool_success_reward"] == 0.75


@pytest.mark.parametrize("text", ["CALL multiply(a=37, b=48)<|im_end|>", "The answer is 5.<|im_end|>"])
def test_turns_parse_as_the_trainer_parses_them(tok, rows, text):
    """GRPOTrainer calls TRL's parse_response with the prompt as prefix and, on TRL >= 1.16, ``tools=`` (the
    arguments typed from the tool's schema); the evaluation's parser call is the same."""
    import inspect

    from trl.chat_template_utils import parse_response

    from datasets_prep.chat import prompt_to_text
    from grpo_kit.rollout.tool_rollout import parser_accepts_tools

    assert parser_accepts_tools() == ("tools" in inspect.signature(parse_response).parameters)
    completion = _completion(tok, text)
    prefix = tok(prompt_to_text(rows[0]["prompt"], tok, tools=CALCULATOR_TOOLS), add_special_tokens=False)[
        "input_ids"
    ]
    trainers = {"tools": list(CALCULATOR_TOOLS)} if parser_accepts_tools() else {}
    expected = parse_response(tok, list(completion.ids), prefix=prefix, **trainers)
    expected.setdefault("role", "assistant")
    expected.setdefault("content", "")
    assert _parse_turn(tok, rows[0]["prompt"], completion, CALCULATOR_TOOLS) == expected
