"""Rewards for tool use: a correct final answer, well-formed tool calls, and both at once.

With ``GRPOTrainer(tools=...)`` a completion is a list of messages, e.g.::

    [{"role": "assistant", "content": "", "tool_calls": [{"type": "function",
        "function": {"name": "multiply", "arguments": {"a": 37, "b": 48}}}]},
     {"role": "tool", "name": "multiply", "content": "1776"},
     {"role": "assistant", "content": "The answer is 1776."}]

TRL runs the tools itself; a call to an unknown tool or with arguments the tool rejects comes back as a
tool message whose content is ``str({"error": ...})``. That is what "well-formed" is judged on: a call
is well-formed when the tool ran and returned a result. Plain-text completions (``list[str]``, or an
assistant message whose call TRL could not parse) are judged on the ``CALL name(key=value, ...)`` line
of grpo-kit's tool template (:mod:`grpo_kit.rollout.tool_template`), by syntax only.

* :func:`tool_answer_reward` -- 1.0 when the last number of the final assistant message equals ``answer``.
* :func:`tool_call_reward` -- 1.0 when the completion made at least one call and every call succeeded.
* :func:`tool_success_reward` -- the product: the issue's "tool-use success" (a well-formed call *and*
  a correct final answer), which is what the evaluation reports.

Pure Python: no torch import. Never raises on odd model output (0.0 instead); calling mistakes (no
``answer`` column, a single string for ``completions``) raise with the fix.
"""

from __future__ import annotations

import re
from typing import Any

from ._text import completion_texts, parse_number, require_column

__all__ = [
    "count_tool_calls",
    "final_answer_text",
    "tool_answer_reward",
    "tool_call_reward",
    "tool_success_reward",
]

_NUMBER_IN_TEXT = re.compile(r"[-\u2212]?\d[\d,]*(?:\.\d+)?")
# One well-formed call line: CALL name(key=value, ...), values without parentheses (the template's syntax).
_CALL_LINE = re.compile(
    r"^[ \t]*CALL[ \t]+\w+\((?:\s*\w+\s*=\s*[^,()=\s][^,()=]*(?:,\s*\w+\s*=\s*[^,()=\s][^,()=]*)*)?\)"
)
_TURN_MARKERS = ("<|im_start|>", "<|im_end|>")
_ANY_CALL = re.compile(r"^[ \t]*CALL\b", re.MULTILINE)


def _messages(completion: Any) -> list[dict]:
    """The message dicts of a conversational completion ([] for a plain string or anything odd)."""
    if isinstance(completion, dict):
        return [completion]
    if isinstance(completion, list):
        return [m for m in completion if isinstance(m, dict)]
    return []


def _is_error_result(message: dict) -> bool:
    """TRL writes a failed call's result as ``str({"error": ...})``."""
    content = message.get("content")
    text = content if isinstance(content, str) else str(content)
    return text.lstrip().startswith(("{'error'", '{"error"'))


def _ran_past_turn(content: Any) -> bool:
    """Chat markup inside a call turn: the model wrote the call, then kept going into a made-up next turn
    instead of ending its turn (the parser keeps the call and leaves the rest as content)."""
    return isinstance(content, str) and any(marker in content for marker in _TURN_MARKERS)


def count_tool_calls(completion: Any) -> tuple[int, int]:
    """``(calls, failures)`` in one completion.

    Conversational: each entry of an assistant message's ``tool_calls`` is a call; a failure is a tool
    result TRL marked as an error, or a call left without any result. A ``CALL`` line TRL could not parse
    (left as text) counts as a failed call, and so do a call whose turn runs on into chat markup
    (``CALL f(a=1)<|im_start|>user ...``: the model did not end its turn) and a call with no result (TRL stopped the loop:
    ``max_tool_calling_iterations`` or the length budget). Plain text: every ``CALL`` line is a call, failed unless it is
    well-formed.
    """
    messages = _messages(completion)
    if not messages:
        text = completion if isinstance(completion, str) else ""
        lines = [line for line in text.splitlines() if _ANY_CALL.match(line)]
        return len(lines), sum(1 for line in lines if not _CALL_LINE.match(line))
    parsed = unparsed = run_on = 0
    for message in messages:
        if message.get("role") != "assistant":
            continue
        tool_calls = message.get("tool_calls")
        if isinstance(tool_calls, list) and tool_calls:
            parsed += len(tool_calls)
            if _ran_past_turn(message.get("content")):
                run_on += len(tool_calls)
        elif isinstance(message.get("content"), str):
            unparsed += len(_ANY_CALL.findall(message["content"]))
    results = [m for m in messages if m.get("role") == "tool"]
    errors = sum(1 for m in results if _is_error_result(m))
    without_result = max(0, parsed - len(results))  # e.g. max_tool_calling_iterations ran out
    calls = parsed + unparsed
    return calls, min(calls, unparsed + errors + without_result + run_on)


def final_answer_text(completion: Any) -> str:
    """The final assistant message's text (the text after the last tool result), "" when the completion
    ends on a call or a tool result."""
    messages = _messages(completion)
    if not messages:
        return completion if isinstance(completion, str) else ""
    last = messages[-1]
    if last.get("role") != "assistant" or last.get("tool_calls"):
        return ""
    return completion_texts([[last]], "final_answer_text")[0]


def _answer_matches(text: str, answer: Any) -> bool:
    if not isinstance(text, str) or len(text) > 10_000:
        return False
    numbers = _NUMBER_IN_TEXT.findall(text)
    if not numbers:
        return False
    value, expected = parse_number(numbers[-1].rstrip(",")), parse_number(str(answer).strip())
    return value is not None and expected is not None and value == expected


def tool_answer_reward(completions, answer=None, **kwargs) -> list[float]:
    """1.0 when the last number in the final assistant message equals ``answer`` (exactly), else 0.0.

    Reads the text after the tool results, so the numbers inside calls and results do not count: a
    completion that stops after a call has no final answer and scores 0.
    """
    completion_texts(completions, "tool_answer_reward")  # validates the calling contract
    answers = require_column(answer, "answer", "tool_answer_reward", len(completions))
    return [1.0 if _answer_matches(final_answer_text(c), a) else 0.0 for c, a in zip(completions, answers)]


def tool_call_reward(completions, **kwargs) -> list[float]:
    """1.0 when the completion made at least one tool call and none failed, else 0.0."""
    completion_texts(completions, "tool_call_reward")
    scores = []
    for completion in completions:
        calls, failures = count_tool_calls(completion)
        scores.append(1.0 if calls > 0 and failures == 0 else 0.0)
    return scores


def tool_success_reward(completions, answer=None, **kwargs) -> list[float]:
    """1.0 for a well-formed call *and* a correct final answer (:func:`tool_call_reward` ×
    :func:`tool_answer_reward`), else 0.0."""
    correct = tool_answer_reward(completions, answer=answer)
    called = tool_call_reward(completions)
    return [c * k for c, k in zip(correct, called)]
