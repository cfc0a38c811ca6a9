"""Turning what a trainer passes into the text a reward function scores, and small extraction helpers.

TRL calls a reward function as ``fn(completions=..., prompts=..., completion_ids=..., **columns)``.
``completions`` is either a list of strings (standard format) or a list of message lists
(conversational format: ``[{"role": "assistant", "content": "..."}]``). Every reward function in
this package goes through :func:`completion_texts`, so all of them accept both formats and reject
the same calling mistakes with the same clear messages.

The helpers never raise on model output: odd text gives ``None`` (nothing found) or ``""``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

__all__ = [
    "completion_text",
    "completion_texts",
    "extract_boxed",
    "extract_hash_answer",
    "extract_xml_answer",
    "is_blank_section",
    "numbers_equal",
    "parse_number",
    "require_column",
]


def completion_text(completion: Any) -> str:
    """The text a reward function scores for one completion.

    - ``str`` → itself.
    - a message list (conversational format) → ``content`` of the last ``assistant`` message
      (the last message when none has a role; TRL's own functions read ``completion[0]``, which
      is the same for the usual one-message completion but wrong after tool calls).
    - a single message dict → its ``content``.
    Content given as a list of parts (multimodal chat format) is joined from its ``text`` parts;
    ``None`` content is ``""``.
    """
    if isinstance(completion, str):
        return completion
    if type(completion) is list and len(completion) == 1 and type(completion[0]) is dict:
        # The usual conversational completion: one message, chosen whatever its role.
        content = completion[0].get("content")
        return content if type(content) is str else _content_text(content)
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, Sequence) and not isinstance(completion, (bytes, bytearray)):
        if len(completion) == 0:
            return ""
        messages = [m for m in completion if isinstance(m, dict)]
        if len(messages) != len(completion):
            raise TypeError(
                "a conversational completion must be a list of message dicts like "
                "[{'role': 'assistant', 'content': '...'}]; got a list containing "
                f"{type(next(m for m in completion if not isinstance(m, dict))).__name__}. "
                "Pass completions as list[str] or list[list[dict]]."
            )
        assistant = [m for m in messages if m.get("role") == "assistant"]
        chosen = assistant[-1] if assistant else messages[-1]
        return _content_text(chosen.get("content"))
    raise TypeError(
        f"a completion must be a str or a list of message dicts, got {type(completion).__name__}. "
        "Pass completions as list[str] or list[list[dict]]."
    )


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal parts: [{"type": "text", "text": "..."}, ...]
        return "".join(part.get("text") or "" if isinstance(part, dict) else str(part) for part in content)
    return str(content)


def completion_texts(completions: Any, fn_name: str) -> list[str]:
    """Validate ``completions`` (the calling contract) and return one text per completion."""
    if isinstance(completions, (str, bytes)):
        raise TypeError(
            f"{fn_name}: completions must be a list (one entry per completion), got a single "
            f"{type(completions).__name__}. Wrap it: {fn_name}([text], ...)."
        )
    if completions is None or not isinstance(completions, Sequence):
        raise TypeError(
            f"{fn_name}: completions must be a list[str] or list[list[dict]] "
            f"(one entry per completion), got {type(completions).__name__}."
        )
    return [completion_text(c) for c in completions]


def require_column(value: Any, name: str, fn_name: str, n: int, hint: str = "") -> list:
    """Check a per-row column TRL passes as a keyword argument (``solution``, ``answer``, …)."""
    if value is None:
        raise ValueError(
            f"{fn_name} needs the `{name}` column: give your dataset a column named `{name}` "
            f"(GRPOTrainer passes every column as a keyword argument) or call "
            f"{fn_name}(completions, {name}=[...]).{(' ' + hint) if hint else ''}"
        )
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(
            f"{fn_name}: `{name}` must be a list with one entry per completion, got "
            f"{type(value).__name__}. Wrap it: {name}=[value] * len(completions)."
        )
    if len(value) != n:
        raise ValueError(
            f"{fn_name}: `{name}` has {len(value)} entries but there are {n} completions; pass one "
            f"`{name}` per completion (repeat each row's value num_generations times)."
        )
    return list(value)


def is_blank_section(text: str) -> bool:
    """True when a tag's section holds no letter or digit: empty, whitespace, or a placeholder such as the
    ``...`` that the course's GSM8K system prompt puts inside both tags.

    A section like that earns no format reward: a model that echoes the system prompt's template
    (``<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>``) has reasoned and answered nothing,
    exactly as with empty tags. Measured: SmolLM2-135M trained on gsm8k-cpu learned to write that echo for
    every problem while the placeholder still paid (issue #27)."""
    return not any(ch.isalnum() for ch in text)


def extract_xml_answer(text: str) -> str:
    """The text between the last ``<answer>`` and the next ``</answer>``, stripped (the course's helper).

    Without tags the whole text is returned stripped, exactly as in the course, so a bare ``72``
    still counts as the answer ``72``.
    """
    if not isinstance(text, str):
        return ""
    answer = text.split("<answer>")[-1]
    answer = answer.split("</answer>")[0]
    return answer.strip()


def extract_hash_answer(text: str) -> str | None:
    """The final answer of a GSM8K solution: what follows ``####`` (``None`` without one)."""
    if not isinstance(text, str) or "####" not in text:
        return None
    return text.split("####")[1].strip()


def extract_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` with balanced braces; ``None`` if there is none or it never closes."""
    if not isinstance(text, str):
        return None
    start = text.rfind("\\boxed{")
    while start != -1:
        depth = 0
        for i in range(start + len("\\boxed{") - 1, len(text)):
            ch = text[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start + len("\\boxed{") : i]
        # Unclosed: an earlier \boxed{ may still be complete.
        start = text.rfind("\\boxed{", 0, start)
    return None


_MINUS_SIGNS = str.maketrans({"\u2212": "-", "\u2012": "-", "\u2013": "-", "\ufe63": "-", "\uff0d": "-"})
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)")
_PLAIN_INT = re.compile(r"-?[0-9]+")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")
# "1 000" and "12 345 678": a space only between groups of exactly three digits ("7 2" is not 72).
_SPACED_THOUSANDS = re.compile(r"\d{1,3}(?: \d{3})+(?:\.\d*)?")
# A unit after a number: "dollars", "cm", "per hour", "km/h", "m^2", "%", "\%", "\text{ dollars}".
# Letters only (no digit: "18 or 20" is two numbers), at most four words.
_UNIT_WORD = r"[A-Za-z]+(?:\^[23]|[\u00b2\u00b3])?"
_UNIT_WORDS = rf"{_UNIT_WORD}(?:(?:\s+|\s*/\s*){_UNIT_WORD}){{0,3}}"
_TRAILING_UNIT = re.compile(
    rf"(?<=[\d}}.])\s*(?:(?P<words>{_UNIT_WORDS})|\\(?:text|mbox|mathrm)\{{\s*(?P<latex>{_UNIT_WORDS})\s*\}}|\\?%)$"
)
# Words that turn "18 <words>" into another answer, not a unit: "18 or nineteen", "18 plus tax".
# fmt: off
_NOT_UNIT_WORDS = frozenset((
    "or", "and", "not", "nor", "no", "plus", "minus", "times", "than", "but", "either", "neither", "maybe",
    "perhaps", "approximately", "about", "roughly", "nearly", "almost", "over", "under", "least", "most",
    "is", "are", "equals", "was", "were", "to",
    # number words
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
    "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
    "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety", "hundred", "hundreds", "thousand",
    "thousands", "million", "millions", "billion", "billions", "dozen", "dozens", "half", "halves",
    "quarter", "quarters", "third", "thirds", "point",
))
# fmt: on


def _without_unit(s: str) -> str | None:
    """``s`` without a trailing unit (``"18 dollars"`` → ``"18"``); ``None`` when what follows the number
    holds a word that makes it another answer (``"18 or nineteen"``)."""
    match = _TRAILING_UNIT.search(s)
    if match is None:
        return s
    words = match.group("words") or match.group("latex") or ""
    if any(word.lower() in _NOT_UNIT_WORDS for word in re.split(r"[\s/^\u00b2\u00b3\d]+", words) if word):
        return None
    return s[: match.start()].rstrip()


def _box(s: str) -> str | None:
    r"""The content of the ``\boxed{…}`` that ``s`` starts with when that box is all of ``s``, else ``None``
    (``\boxed{18} or \boxed{20}`` is two answers)."""
    depth = 0
    for i in range(len("\\boxed{") - 1, len(s)):
        if s[i] == "{":
            depth += 1
        elif s[i] == "}":
            depth -= 1
            if depth == 0:
                return s[len("\\boxed{") : i] if i == len(s) - 1 else None
    return None


def parse_number(text: Any, *, units: bool = False) -> Fraction | None:
    r"""Exact value of a plainly written number, or ``None``.

    Accepts ASCII digits with an optional sign (``-``, ``+`` or the Unicode minus ``−``), a decimal
    point, thousands commas (``1,000``) or spaces (``1 000``: groups of exactly three digits after a
    space, so ``7 2`` or ``1 2 3`` are *not* numbers — the course deleted every space), a money sign
    ``$`` or its LaTeX escape ``\$`` (``$18``, ``\$18``, ``-$18``), a trailing full stop, and a number
    that is all of one ``\boxed{}`` (``\boxed{\$18}``; ``\boxed{18} or \boxed{20}`` is not a number).
    ``Fraction`` keeps it exact, so ``72.0 == 72`` and ``0.1 + 0.2`` style float errors cannot happen.
    Superscripts and other Unicode "digits" (``"²".isdigit()`` is True) are rejected.

    ``units=True`` (what :func:`~rewards.correctness_reward` uses) also accepts a unit after the number,
    inside or outside the box: ``18 dollars``, ``18 dollars.``, ``18 cm``, ``$18 per hour``, ``25%``,
    ``\boxed{18 dollars}``, ``\boxed{18}\text{ dollars}``. A unit is up to four words of letters (no digit,
    so ``18 or 20`` is refused) and none of them a number word or connective (``18 or nineteen``,
    ``18 plus tax`` are refused). The unit is not checked against the question: ``18 cm`` for a gold
    ``18`` (dollars) is credited, as math-verify does.
    """
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return Fraction(text)
    if not isinstance(text, str) or len(text) > 200:
        return None
    s = text.strip()
    if _PLAIN_INT.fullmatch(s):  # the common case (GSM8K), without the general normalisation below
        return Fraction(int(s))
    s = s.translate(_MINUS_SIGNS).removesuffix(".")
    for _ in range(2):  # outside the box, then inside it
        if units:
            s = _without_unit(s)
            if s is None:
                return None
        if not s.startswith("\\boxed{"):
            break
        s = _box(s)
        if s is None:
            return None
        s = s.strip().removesuffix(".")
    sign = ""
    if s and s[0] in "+-":
        sign, s = s[0], s[1:]
    s = s.removeprefix("\\$").removeprefix("$")
    if not sign and s and s[0] in "+-":  # "$-18"
        sign, s = s[0], s[1:]
    if _SPACED_THOUSANDS.fullmatch(s):
        s = s.replace(" ", "")
    s = sign + s
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    if not s.isascii() or not _NUMBER.fullmatch(s):
        return None
    return Fraction(s)


def numbers_equal(a: Any, b: Any, *, units: bool = False) -> bool:
    """True when both parse as numbers (see :func:`parse_number`) with the same exact value."""
    x, y = parse_number(a, units=units), parse_number(b, units=units)
    return x is not None and y is not None and x == y
