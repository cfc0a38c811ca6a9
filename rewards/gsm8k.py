"""The course's GSM8K reward set (LLM Course ch. 12.6, Unsloth practice), pitfalls fixed, scales kept.

The completion is expected in the ``XML_COT_FORMAT`` layout::

    <reasoning>
    ...
    </reasoning>
    <answer>
    ...
    </answer>

Defaults keep the course's scales: correctness 2.0, int 0.5, strict 0.5, soft 0.5, xmlcount 4 × 0.125,
so the maximum total is 4.0 and correctness outweighs all format rewards together.

Fixed pitfalls (each has a test that fails on the course's code, ``tests/rewards/test_rewards_course_pitfalls.py``):

* All five read ``completion[0]["content"]``: they crash on standard-format ``list[str]`` completions
  and read the first message, not the last assistant message. → :func:`~rewards.completion_text`.
* ``soft_format_reward_func`` / ``strict_format_reward_func`` lack ``re.DOTALL``: multi-line
  reasoning (i.e. real reasoning) never earns the format reward. → multi-line accepted.
* ``strict_format_reward_func`` demands ``\\n`` after ``</answer>``: a model that stops at EOS right
  after ``</answer>`` (the usual case) never earns it. → the final newline is optional.
* Reasoning that *mentions* ``<answer>`` (decided, not a course bug): the format rewards accept it —
  the layout decides, and the answer section itself may hold no tag.
* The format rewards and ``xmlcount`` pay for empty tags (``<reasoning>\\n\\n</reasoning>…``) and for the
  system prompt's own template echoed back (``<reasoning>\\n...\\n</reasoning>\\n<answer>\\n...\\n</answer>``):
  reward hacks. → a section must hold a letter or digit to earn its tags (:func:`~rewards._text.is_blank_section`).
* ``count_xml``: when the completion ends right at ``</answer>`` (usual: EOS follows it) the
  ``"\\n</answer>\\n"`` split finds nothing and it subtracts 0.001 × the length of the **whole** text,
  so longer reasoning is punished; and with no trailing text it *adds* 0.001. Trailing text was also
  charged twice. → 0.001 per character after ``</answer>`` (one newline free), charged once.
* ``int_reward_func`` uses ``str.isdigit``: ``-3`` is rejected while ``"²"`` (a superscript) passes.
  → an ASCII integer with optional sign (also U+2212 minus) and thousands commas or spaces (``1 000``;
  but ``7 2`` is not 72); ``72.0`` counts.
* ``correctness_reward_func`` compares strings: ``72.0``≠``72``, ``1,000``≠``1000``, ``−3``≠``-3``,
  and a right answer with its unit (``18 dollars``, ``\\$18``, ``\\boxed{\\$18}``) scores 0: a reward that
  teaches the model to drop units. → exact numeric equality (:func:`~rewards._text.parse_number` with
  ``units=True``: a trailing unit word, ``$``/``\\$`` and one ``\\boxed{}`` are accepted; ``7 2``, ``18 or 20``
  and ``18 or nineteen`` are not), string equality for non-numbers. Where this differs from math-verify,
  ``tests/rewards/test_rewards_number_table.py`` says which one is right and why.
  It also prints every batch (the data, too) and needs a ``prompts`` argument. → silent, needs only ``answer``.
* The 12.4 ``problem_reward`` calls an undefined ``extract_final_answer`` inside a bare ``except:``,
  so every completion silently scores 0.0. → :func:`correctness_reward` (reads ``answer``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ._text import (
    completion_texts,
    extract_hash_answer,
    extract_xml_answer,
    is_blank_section,
    parse_number,
    require_column,
)

__all__ = [
    "calculation_reward",
    "correctness_reward",
    "int_reward",
    "soft_format_reward",
    "strict_format_reward",
    "xmlcount_reward",
]

_XML_TAGS = ("<reasoning>", "</reasoning>", "<answer>", "</answer>")


def _between(text: str, start: str, end: str) -> str | None:
    i = text.find(start)
    if i == -1:
        return None
    j = text.find(end, i + len(start))
    return None if j == -1 else text[i + len(start) : j]


def _count_xml(text: str, per_tag: float, per_trailing_char: float) -> float:
    count = 0.0
    reasoning = _between(text, "<reasoning>\n", "\n</reasoning>")
    if reasoning is not None and _reasoning_ok(reasoning):
        if text.count("<reasoning>\n") == 1:
            count += per_tag
        if text.count("\n</reasoning>\n") == 1:
            count += per_tag
    answer = _between(text, "\n<answer>\n", "\n</answer>")
    if answer is not None and _answer_ok(answer):
        if text.count("\n<answer>\n") == 1:
            count += per_tag
        if text.count("\n</answer>") == 1:
            count += per_tag
            trailing = len(text) - text.rindex("\n</answer>") - len("\n</answer>")
            if trailing and text.endswith("\n", len(text) - trailing, len(text) - trailing + 1):
                trailing -= 1  # the layout's own final newline is free
            count -= trailing * per_trailing_char
    return count


def xmlcount_reward(completions: Sequence, **kwargs) -> list[float]:
    r"""0.125 for each of ``<reasoning>\n``, ``\n</reasoning>\n``, ``\n<answer>\n``, ``\n</answer>`` present
    exactly once around a non-blank section that holds no tag of its own (the reasoning may mention
    ``<answer>``), minus 0.001 per character after ``</answer>\n``."""
    texts = completion_texts(completions, "xmlcount_reward")
    return [_count_xml(t, 0.125, 0.001) for t in texts]


_REASONING_TAGS = ("<reasoning>", "</reasoning>")


def _reasoning_ok(reasoning: str) -> bool:
    """A letter or digit in it (not empty, not the prompt's ``...``), and no reasoning tag of its own: the
    "section" of ``<reasoning>\n</reasoning>\n<answer>\n</reasoning>`` is the tags in between, which is
    no reasoning (a hack SmolLM2-135M found for xmlcount on gsm8k-cpu once the ``...`` stopped paying)."""
    return not is_blank_section(reasoning) and not any(tag in reasoning for tag in _REASONING_TAGS)


def _answer_ok(answer: str) -> bool:
    """A letter or digit in it and no tag at all (the last ``<answer>`` is the answer)."""
    return not is_blank_section(answer) and not any(tag in answer for tag in _XML_TAGS)


def _sections_ok(reasoning: str, answer: str) -> bool:
    """Both sections non-blank (a letter or digit: not empty, not the prompt's ``...`` placeholder,
    :func:`~rewards._text.is_blank_section`); the reasoning opens and closes once, the answer holds no tag.

    The reasoning may *mention* ``<answer>`` (e.g. "I put the total in <answer> tags"): the layout, not
    the prose, decides the format, and :func:`~rewards.extract_xml_answer` reads the last ``<answer>``,
    which is the answer section here because the answer itself may contain no tag.
    """
    return _reasoning_ok(reasoning) and _answer_ok(answer)


def _soft_ok(text: str) -> bool:
    # String scanning (linear) rather than a lazy DOTALL regex that backtracks on tag-stuffed text.
    body = text.lstrip()
    if not body.startswith("<reasoning>"):
        return False
    end_reasoning = body.find("</reasoning>")
    if end_reasoning == -1:
        return False
    rest = body[end_reasoning + len("</reasoning>") :].lstrip()
    if not rest.startswith("<answer>"):
        return False
    end_answer = rest.find("</answer>")
    if end_answer == -1:
        return False
    return _sections_ok(body[len("<reasoning>") : end_reasoning], rest[len("<answer>") : end_answer])


def soft_format_reward(completions: Sequence, **kwargs) -> list[float]:
    """0.5 when the completion starts with ``<reasoning>…</reasoning>`` then ``<answer>…</answer>`` (any
    whitespace between, trailing text allowed — ``xmlcount_reward`` charges for it), sections non-blank,
    multi-line accepted; the reasoning may mention ``<answer>``."""
    texts = completion_texts(completions, "soft_format_reward")
    return [0.5 if _soft_ok(t) else 0.0 for t in texts]


_STRICT_HEAD = "<reasoning>\n"
_STRICT_MIDDLE = "\n</reasoning>\n<answer>\n"
_STRICT_TAIL = "\n</answer>"


def _strict_ok(text: str) -> bool:
    """``<reasoning>\\n{r}\\n</reasoning>\\n<answer>\\n{a}\\n</answer>`` plus at most one final ``\\n``.

    String scanning, linear in the text: the reasoning ends at the first ``</reasoning>`` (it may not
    contain a second one), the answer runs to the final ``</answer>``.
    """
    body = text.removesuffix("\n")  # optional final newline: a model stops at EOS
    if not (body.startswith(_STRICT_HEAD) and body.endswith(_STRICT_TAIL)):
        return False
    middle = body.find(_STRICT_MIDDLE)
    if middle < len(_STRICT_HEAD):  # not found (-1), or no room for a reasoning
        return False
    reasoning = body[len(_STRICT_HEAD) : middle]
    answer_start = middle + len(_STRICT_MIDDLE)
    if answer_start > len(body) - len(_STRICT_TAIL):
        return False
    return _sections_ok(reasoning, body[answer_start : len(body) - len(_STRICT_TAIL)])


def strict_format_reward(completions: Sequence, **kwargs) -> list[float]:
    r"""0.5 for exactly ``<reasoning>\n…\n</reasoning>\n<answer>\n…\n</answer>\n`` (the course's
    ``XML_COT_FORMAT``), sections non-blank; multi-line reasoning and answers accepted.

    The final ``\n`` is optional: the course's pattern demanded it, but a model usually stops at EOS right
    after ``</answer>`` and then never earned this reward. The reasoning may mention ``<answer>``.
    """
    texts = completion_texts(completions, "strict_format_reward")
    return [0.5 if _strict_ok(t) else 0.0 for t in texts]


def _is_integer_answer(answer: str) -> bool:
    value = parse_number(answer)
    return value is not None and value.denominator == 1


def int_reward(completions: Sequence, **kwargs) -> list[float]:
    """0.5 when the ``<answer>`` is an integer: ``72``, ``-3``, ``−3`` (U+2212), ``1,000``, ``72.0``, ``$72``;
    not ``3.5``, ``²`` or ``seventy``.

    A format reward, on purpose (the course's intent): it pays for the answer *written* as a bare integer,
    the form GSM8K's gold answers take, whether or not it is right. So ``18 dollars`` earns it nothing,
    while :func:`correctness_reward` credits ``18 dollars`` for a gold ``18``: being right with a unit
    is worth the 2.0, and writing the bare number is worth the extra 0.5."""
    texts = completion_texts(completions, "int_reward")
    return [0.5 if _is_integer_answer(extract_xml_answer(t)) else 0.0 for t in texts]


def _gold_value(gold) -> str | None:
    if gold is None:
        return None
    if not isinstance(gold, str):
        gold = str(gold)
    if "####" in gold:  # a raw GSM8K solution was passed instead of the prepared answer
        gold = extract_hash_answer(gold)
    gold = gold.strip() if gold is not None else ""
    return gold or None


def correctness_reward(completions: Sequence, answer: Sequence | None = None, **kwargs) -> list[float | None]:
    """2.0 when the ``<answer>`` equals the dataset's ``answer`` column, else 0.0; ``None`` when the gold
    answer is missing (the row is skipped, as TRL does for unparseable solutions).

    Numbers compare by exact value (``72.0`` = ``72``, ``1,000`` = ``1000``, ``−3`` = ``-3``), with a unit
    or money sign allowed (``18 dollars``, ``18 cm``, ``$18 per hour``, ``\\$18``, ``\\boxed{\\$18}``); two
    numbers (``18 or 20``, ``7 2``) never pass. Other answers compare by stripped string equality. A raw
    GSM8K solution (``… #### 72``) is accepted as gold.
    """
    texts = completion_texts(completions, "correctness_reward")
    golds = require_column(
        answer,
        "answer",
        "correctness_reward",
        len(texts),
        hint="(datasets_prep.load_gsm8k prepares it from the GSM8K solution.)",
    )
    rewards: list[float | None] = []
    for text, raw_gold in zip(texts, golds):
        gold = _gold_value(raw_gold)
        if gold is None:
            rewards.append(None)
            continue
        response = extract_xml_answer(text)
        gold_number, response_number = parse_number(gold, units=True), parse_number(response, units=True)
        if gold_number is not None:
            correct = response_number is not None and response_number == gold_number
        else:
            correct = response != "" and response == gold
        rewards.append(2.0 if correct else 0.0)
    return rewards


# A number as a calculation writes it: digits, thousands commas, a decimal part, an optional money sign; at
# most 15 digits before the point and 12 after (a longer run is no step of a grade-school problem, and would
# cost a big-integer conversion).
_CALC_NUMBER = r"(?<![\d.,])\$?(\d{1,3}(?:,\d{3}){1,4}(?:\.\d{1,12})?|\d{1,15}(?:\.\d{1,12})?)(?![\d,])"
_CALCULATION = re.compile(_CALC_NUMBER + r"\s*([-+*/×÷−x])\s*" + _CALC_NUMBER + r"\s*=\s*" + _CALC_NUMBER)
_OPERATIONS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "−": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "×": lambda a, b: a * b,
    "x": lambda a, b: a * b,
    "/": lambda a, b: a / b if b else None,
    "÷": lambda a, b: a / b if b else None,
}


def _value(number: str) -> Fraction:
    return Fraction(number.replace(",", ""))


def _problem_text(prompt: Any) -> str:
    """The question a prompt asks: a plain string, or the last user message of a conversation (a worked
    example before it is not the problem)."""
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content") for m in prompt or [] if isinstance(m, dict) and m.get("role") == "user"]
    return users[-1] if users and isinstance(users[-1], str) else ""


def _calculation_score(reasoning: str, problem_numbers: set[Fraction]) -> float:
    """0.5 for an ``a op b = c`` in ``reasoning`` that is right (exact arithmetic, no ``eval``) and takes ``a``
    or ``b`` from the problem; 0.25 when the best one takes a number from the problem but is wrong; else 0."""
    best = 0.0
    for match in _CALCULATION.finditer(reasoning[:2000]):
        a, op, b, c = _value(match[1]), match[2], _value(match[3]), _value(match[4])
        if a in problem_numbers or b in problem_numbers:
            if _OPERATIONS[op](a, b) == c:
                return 0.5
            best = 0.25
    return best


def calculation_reward(prompts: Sequence, completions: Sequence, **kwargs) -> list[float]:
    """Up to 0.5 for work shown in the ``<reasoning>`` section: 0.5 when it holds a right calculation on a
    number of the problem, ``a op b = c`` with ``op`` one of ``+ - − * × x / ÷``, ``c`` exactly ``a op b`` and
    ``a`` or ``b`` a number of the question (the prompt's last user message); 0.25 when its calculations on
    the problem's numbers are all wrong; else 0.

    Not in the course. The format rewards pay for any non-blank reasoning, and a small model trained on them
    learns to write one number there (``<reasoning>\n22\n</reasoning>\n<answer>\n22\n</answer>``, gsm8k-cpu):
    the layout without the reasoning it is for. This reward pays for a step of work, and half of it for the
    step's shape, so that a model which writes no calculation yet is paid for the first wrong one. It cannot
    tell a useful step from a useless one (``9 + 0 = 9``), and it reads only binary steps (``2 + 3 + 4 = 9``
    holds none)."""
    texts = completion_texts(completions, "calculation_reward")
    problems = require_column(prompts, "prompts", "calculation_reward", len(texts))
    rewards = []
    for text, prompt in zip(texts, problems):
        reasoning = _between(text, "<reasoning>", "</reasoning>")
        numbers = {_value(m[1]) for m in re.finditer(_CALC_NUMBER, _problem_text(prompt)[:5000])}
        rewards.append(0.0 if reasoning is None else _calculation_score(reasoning, numbers))
    return rewards
