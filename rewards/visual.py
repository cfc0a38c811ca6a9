"""The reward of the image tasks (``datasets_prep.images``): is the answer word the right one?

:func:`visual_answer_reward` reads the first of the row's answer words (``choices``, comma-separated) that the
completion names, as a whole word, case-insensitive, number words read as digits ("three" -> "3"), and scores
1.0 when it is the gold ``answer``, else 0.0. Only the first named word counts, so listing every choice scores
like a guess. Without ``choices`` the completion's first word is compared. Pure Python: no torch import. Never
raises on model output; calling mistakes (no ``answer`` column) raise with the fix.

 A two-part task (``colour_side``: ``answer`` "red, left", ``choices`` "red,green,blue,yellow|left,right", the
parts' words separated by ``|``) scores 1.0 only when every part's first named word is right: both, not one.

:func:`visual_choice_reward` is its format reward: 1.0 when the completion names any of the row's answer words,
right or wrong. Weighted small beside the answer reward, it keeps "names no answer at all" below "names a wrong
one", so pushing a wrong answer down does not push the model out of answering (the collapse it guards against is
in docs/results.md, "GRPO that sees").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ._text import completion_texts, require_column

__all__ = ["first_answer_word", "visual_answer_reward", "visual_choice_reward"]

_NUMBER_WORDS = {"one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7"}
_PARTS = "|"  # between the parts of a two-part answer's choices (datasets_prep.images.CHOICES_SEPARATOR)
_WORD = re.compile(r"[a-z]+|\d+")


def _normalise(word: str) -> str:
    word = word.strip().lower()
    return _NUMBER_WORDS.get(word, word)


def first_answer_word(text: str, choices: Sequence[str] = ()) -> str | None:
    """The first word of ``text`` that is one of ``choices`` (normalised), or its first word without choices."""
    allowed = {_normalise(choice) for choice in choices if choice.strip()}
    for word in _WORD.findall(text.lower()):
        word = _normalise(word)
        if not allowed or word in allowed:
            return word
    return None


def visual_answer_reward(completions: Sequence, answer: Sequence | None = None, **kwargs: Any) -> list[float]:
    """1.0 when the first answer word the completion names equals ``answer``, else 0.0 (TRL's contract)."""
    texts = completion_texts(completions, "visual_answer_reward")
    golds = require_column(
        answer, "answer", "visual_answer_reward", len(texts), "(the gold word of each image)"
    )
    choices = kwargs.get("choices") or [""] * len(texts)
    rewards = []
    for text, gold, options in zip(texts, golds, choices):
        parts = str(options or "").split(_PARTS)
        golds_of_parts = str(gold).split(",") if len(parts) > 1 else [str(gold)]
        right = len(golds_of_parts) == len(parts)
        for part, part_gold in zip(parts, golds_of_parts):
            word = first_answer_word(text, [option for option in part.split(",") if option.strip()])
            right = right and word is not None and word == _normalise(part_gold)
        rewards.append(1.0 if right else 0.0)
    return rewards


def visual_choice_reward(
    completions: Sequence, choices: Sequence | None = None, **kwargs: Any
) -> list[float]:
    """1.0 when the completion names one of the row's ``choices`` (any, right or wrong), else 0.0 (TRL's contract)."""
    texts = completion_texts(completions, "visual_choice_reward")
    options_per_row = require_column(
        choices,
        "choices",
        "visual_choice_reward",
        len(texts),
        "(the answer words of each image, comma-separated)",
    )
    rewards = []
    for text, options in zip(texts, options_per_row):
        options = [option for option in re.split(r"[,|]", str(options or "")) if option.strip()]
        rewards.append(1.0 if options and first_answer_word(text, options) is not None else 0.0)
    return rewards
