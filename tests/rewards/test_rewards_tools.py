"""Tool-use rewards on the completions TRL's tool loop produces, on plain text, and on odd output."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rewards.tools import (
    count_tool_calls,
    final_answer_text,
    tool_answer_reward,
    tool_call_reward,
    tool_success_reward,
)


def _call(name, **arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def _assistant_call(name, **arguments):
    return {"role": "assistant", "content": "", "tool_calls": [_call(name, **arguments)]}


def _tool(content, name="multiply"):
    return {"role": "tool", "name": name, "content": content}


def _answer(text):
    return {"role": "assistant", "content": text}


# What TRL 1.15's tool loop leaves in `completions` (tool results are str(result); failures str({"error": ...})).
GOOD = [_assistant_call("multiply", a=37, b=48), _tool("1776"), _answer("The answer is 1776.")]
WRONG_ANSWER = [_assistant_call("multiply", a=37, b=48), _tool("1776"), _answer("The answer is 1767.")]
UNKNOWN_TOOL = [
    _assistant_call("divide", a=37, b=48),
    _tool("{'error': 'Tool divide not found.'}", "divide"),
    _answer("The answer is 1776."),
]
BAD_ARGS = [
    _assistant_call("multiply", x=37, y=48),
    _tool("{'error': \"multiply() got an unexpected keyword argument 'x'\"}"),
    _answer("The answer is 1776."),
]
NO_CALL_RIGHT = [_answer("37 * 48 = 1776")]
STOPPED_AFTER_CALL = [_assistant_call("multiply", a=37, b=48)]  # max_tool_calling_iterations ran out
UNPARSED_CALL = [_answer("CALL multiply(37 48")]  # TRL's parser fell back to plain text
# Seen after a short training run: the call, then the model kept writing a made-up user turn.
RUN_ON_CALL = [
    {
        "role": "assistant",
        "content": "<|im_start|>user\nA creature",
        "tool_calls": [_call("multiply", a=37, b=48)],
    },
    _tool("1776"),
    _answer("The answer is 1776."),
]


@pytest.mark.parametrize(
    ("completion", "answer", "call", "success"),
    [
        (GOOD, 1.0, 1.0, 1.0),
        (WRONG_ANSWER, 0.0, 1.0, 0.0),
        (UNKNOWN_TOOL, 1.0, 0.0, 0.0),
        (BAD_ARGS, 1.0, 0.0, 0.0),
        (NO_CALL_RIGHT, 1.0, 0.0, 0.0),
        (STOPPED_AFTER_CALL, 0.0, 0.0, 0.0),
        (UNPARSED_CALL, 0.0, 0.0, 0.0),
        (RUN_ON_CALL, 1.0, 0.0, 0.0),
    ],
)
def test_rewards_on_trl_tool_loop_completions(completion, answer, call, success):
    assert tool_answer_reward([completion], answer=["1776"]) == [answer]
    assert tool_call_reward([completion]) == [call]
    assert tool_success_reward([completion], answer=["1776"]) == [success]


def test_numbers_in_calls_and_results_are_not_the_final_answer():
    # The tool result is right, but the model's final turn states another number: no credit.
    completion = [_assistant_call("multiply", a=37, b=48), _tool("1776"), _answer("So it is 12.")]
    assert final_answer_text(completion) == "So it is 12."
    assert tool_answer_reward([completion], answer=["1776"]) == [0.0]
    # Ending on the tool result (no final turn) has no answer either.
    assert tool_answer_reward([GOOD[:2]], answer=["1776"]) == [0.0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("The answer is 1,776.", 1.0), ("1776.0", 1.0), ("−1776", 0.0), ("1776 or 1777", 0.0), ("", 0.0)],
)
def test_final_answer_is_the_last_number_compared_exactly(text, expected):
    assert tool_answer_reward([[_answer(text)]], answer=["1776"]) == [expected]


def test_negative_answers():
    assert tool_answer_reward([[_answer("It is −42.")]], answer=["-42"]) == [1.0]


def test_count_tool_calls_counts_each_call_and_failure():
    two_calls = [
        {"role": "assistant", "content": "", "tool_calls": [_call("multiply", a=2, b=3), _call("nope")]},
        _tool("6"),
        _tool("{'error': 'Tool nope not found.'}", "nope"),
        _answer("6"),
    ]
    assert count_tool_calls(two_calls) == (2, 1)
    assert count_tool_calls(GOOD) == (1, 0)
    assert count_tool_calls(NO_CALL_RIGHT) == (0, 0)
    assert count_tool_calls(STOPPED_AFTER_CALL) == (1, 1)
    assert count_tool_calls(UNPARSED_CALL) == (1, 1)
    assert count_tool_calls(RUN_ON_CALL) == (1, 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CALL multiply(a=37, b=48)\nThe answer is 1776.", (1, 0)),
        ("CALL multiply(37, 48)", (1, 1)),
        ("CALL multiply(a=37", (1, 1)),
        ("CALL add(a=1, b=2)\nCALL multiply(a=3, b=4)", (2, 0)),
        ("no call at all: 1776", (0, 0)),
    ],
)
def test_plain_text_calls_are_judged_by_the_template_syntax(text, expected):
    assert count_tool_calls(text) == expected


def test_plain_text_completions():
    texts = ["CALL multiply(a=37, b=48)\nThe answer is 1776.", "CALL multiply(37, 48)\n1776", "1776"]
    assert tool_call_reward(texts) == [1.0, 0.0, 0.0]
    assert tool_success_reward(texts, answer=["1776"] * 3) == [1.0, 0.0, 0.0]


ODD = [
    [],
    [{}],
    [{"role": "assistant", "content": None, "tool_calls": None}],
    [{"role": "assistant", "content": [{"type": "text", "text": "1776"}]}],
    [{"role": "assistant", "content": "", "tool_calls": "CALL"}],
    [{"role": "tool", "content": {"error": "x"}}],
    [_answer("9" * 5000)],
    [_answer("CALL " * 2000)],
    "",
    "\x00\ufffd",
]


def test_odd_output_never_raises_and_scores_in_range():
    answers = ["1776"] * len(ODD)
    for fn in (tool_answer_reward, tool_success_reward):
        scores = fn(ODD, answer=answers)
        assert len(scores) == len(ODD) and all(s in (0.0, 1.0) for s in scores)
    assert all(s in (0.0, 1.0) for s in tool_call_reward(ODD))
    # Multimodal parts are read as text; a failed result dict counts as an error.
    assert tool_answer_reward([ODD[3]], answer=["1776"]) == [1.0]


def test_calling_mistakes_name_the_fix():
    with pytest.raises(ValueError, match="`answer` column"):
        tool_answer_reward([GOOD])
    with pytest.raises(ValueError, match="`answer` column"):
        tool_success_reward([GOOD])
    with pytest.raises(TypeError, match="Wrap it"):
        tool_call_reward("CALL multiply(a=1, b=2)")
    with pytest.raises(ValueError, match="2 entries but there are 1"):
        tool_answer_reward([GOOD], answer=["1", "2"])


def test_importing_the_tool_rewards_does_not_import_torch():
    code = "import rewards.tools, sys; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
