r"""open-r1's reward functions under open-r1's contract: ``from rewards.open_r1 import …``.

The reasoning-model community's most copied reward set is huggingface/open-r1's
``src/open_r1/rewards.py`` (read at commit 1416fa0, 2026-04-02). Its functions share names with TRL's
but not their contract: ``get_repetition_penalty_reward(ngram_size, max_penalty)(completions)`` splits
the completion's *words*, ``get_cosine_scaled_reward(...)(completions, solution)`` measures
*characters*, ``format_reward`` checks ``<think>…</think><answer>…</answer>``. The top-level names
(``from rewards import get_cosine_scaled_reward``) stay TRL's; this module gives open-r1's, so that an
open-r1 recipe moved here scores the same numbers under the same names. open-r1's own tests pass
against it (``tests/rewards/test_rewards_open_r1_suite.py``).

Each function does what open-r1's does; the differences, all deliberate:

* A completion is ``list[str]`` or conversational ``list[list[dict]]`` (open-r1 reads
  ``completion[0]["content"]``, which is the same text for the one-message completions GRPOTrainer
  passes; for longer lists we read the last assistant message, :func:`rewards.completion_text`).
* Nothing is printed (open-r1 prints every unparseable gold and every failed ``verify``).
* math-verify runs bounded in worker processes (:mod:`rewards.math_verify_bounded`, profile
  ``"open_r1"`` or ``"open_r1_length"``: open-r1's exact ``parse``/``verify`` calls), and the plain
  answers math-verify's own rules decide are decided without it (:mod:`rewards.math_verify_fast`).
* Known open-r1 bugs keep open-r1's behaviour by default; the fix is one argument away and each
  docstring names it: the cosine reward counts characters while its docstring says tokens
  (``length_unit="tokens"``), climbs back up past ``max_len`` (``clamp=True``) and never parses a plain
  gold such as ``72`` (``plain_gold=True``).
* Calls that would crash in open-r1 score instead: ``len_reward([])`` is ``[]``; a weighted reward
  passes ``None`` through; ``ngram_size < 1`` is refused when the factory is called.
* Code *execution* rewards (``code_reward``, ``binary_code_reward``, ``ioi_code_reward``,
  ``cf_code_reward``: e2b, Morph, Piston sandboxes) are not here. Model output is never executed.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from ._text import completion_texts
from .math_verify_bounded import verify_batch
from .trl_compat import _ids_column, _solutions, cosine_scaled, get_soft_overlong_punishment

__all__ = [
    "accuracy_reward",
    "code_format_reward",
    "create_weighted_reward",
    "format_reward",
    "get_code_format_reward",
    "get_cosine_scaled_reward",
    "get_repetition_penalty_reward",
    "get_soft_overlong_punishment",
    "len_reward",
    "reasoning_steps_reward",
    "tag_count_reward",
]


def accuracy_reward(
    completions: Sequence, solution: Sequence[str] | None = None, **kwargs
) -> list[float | None]:
    r"""1.0 when math-verify finds the completion's answer equal to ``solution``, else 0.0; ``None`` when
    the gold cannot be parsed (or ``verify`` raises): the row is skipped.

    open-r1's calls: the gold with math-verify's defaults (``first_match``), the answer with
    ``LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False)`` normalised with
    ``units=True, equations=True``, ``verify(gold, answer)`` (TRL's: no ``equations``, the gold parsed in
    math-verify's default mode). So a plain "the answer is 72" scores 0.0, as in open-r1 and TRL.
    """
    texts = completion_texts(completions, "accuracy_reward")
    golds = _solutions(solution, "accuracy_reward", len(texts))
    return [r.reward for r in verify_batch(texts, golds, profile="open_r1")]


def _length_correctness(
    texts: list[str], solution: Any, fn_name: str, plain_gold: bool = False
) -> list[float | None]:
    """open-r1's correctness inside ``len_reward`` and the cosine reward: the gold parsed as LaTeX only
    (``plain_gold=True``: by math-verify's defaults, as accuracy_reward does), the answer normalised with
    ``boxed=True``, ``verify(answer, gold)``; ``None`` for an unparseable gold."""
    golds = _solutions(solution, fn_name, len(texts))
    profile = "open_r1_length_plain_gold" if plain_gold else "open_r1_length"
    return [r.reward for r in verify_batch(texts, golds, profile=profile)]


_THINK_ANSWER = re.compile(r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$", re.DOTALL | re.MULTILINE)


def format_reward(completions: Sequence, **kwargs) -> list[float]:
    r"""1.0 when the completion is ``<think>\n…\n</think>\n<answer>\n…\n</answer>``, else 0.0 (open-r1's
    pattern, ``re.DOTALL | re.MULTILINE``).

    open-r1's quirk, kept: with ``re.MULTILINE`` the final ``$`` matches at any line end, so text after
    ``</answer>`` on a later line still scores 1.0. TRL's ``think_format_reward`` and the course's
    ``format_reward`` (``from rewards import format_reward``) are other rewards.
    """
    texts = completion_texts(completions, "format_reward")
    return [1.0 if _THINK_ANSWER.match(text) else 0.0 for text in texts]


format_reward.lint_acknowledged = {  # type: ignore[attr-defined]
    "empty-tags": "open-r1 parity: its `.*?` accepts empty <think>/<answer> lines; pair it with accuracy_reward.",
}


def tag_count_reward(completions: Sequence, **kwargs) -> list[float]:
    r"""0.25 for each of ``<think>\n``, ``\n</think>\n``, ``\n<answer>\n``, ``\n</answer>`` found exactly once
    (the partial credit that leads to :func:`format_reward`; after willccbb's GRPO demo)."""
    texts = completion_texts(completions, "tag_count_reward")
    markers = ("<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>")
    return [sum(0.25 for marker in markers if text.count(marker) == 1) for text in texts]


tag_count_reward.lint_acknowledged = {  # type: ignore[attr-defined]
    "empty-tags": "open-r1 parity: it counts the tags, not what they hold (partial credit toward format_reward).",
}


_STEP = re.compile(r"(Step \d+:|^\d+\.|\n-|\n\*|First,|Second,|Next,|Finally,)")


def reasoning_steps_reward(completions: Sequence, **kwargs) -> list[float]:
    r"""min(1, #steps / 3): a step is ``Step N:``, a numbered item, a ``-``/``*`` bullet after a newline, or
    "First,", "Second,", "Next,", "Finally,".

    open-r1's quirk, kept: its pattern has no ``re.MULTILINE``, so ``^\d+\.`` counts a numbered item only
    at the very start of the text ("1. …\n2. …" counts one step).
    """
    texts = completion_texts(completions, "reasoning_steps_reward")
    return [min(1.0, len(_STEP.findall(text)) / 3) for text in texts]


def len_reward(completions: Sequence, solution: Sequence[str] | None = None, **kwargs) -> list[float]:
    r"""Kimi k1.5's length reward (https://huggingface.co/papers/2501.12599, §2.3.3), over the batch.

    λ = 0.5 − (len − min_len) / (max_len − min_len), lengths in characters over the batch; correct:
    λ, wrong: min(0, λ); all lengths equal: 0.0 each. An unparseable gold counts as correct (open-r1).
    Simplification kept from open-r1: the batch (not each prompt's group) sets min_len and max_len.
    """
    texts = completion_texts(completions, "len_reward")
    correct = _length_correctness(texts, solution, "len_reward")
    if not texts:
        return []
    lengths = [len(text) for text in texts]
    shortest, longest = min(lengths), max(lengths)
    if longest == shortest:
        return [0.0] * len(texts)
    rewards = []
    for length, verdict in zip(lengths, correct):
        lam = 0.5 - (length - shortest) / (longest - shortest)
        rewards.append(float(lam if verdict is None or verdict else min(0, lam)))
    return rewards


len_reward.lint_acknowledged = {  # type: ignore[attr-defined]
    "constant": "batch-relative (Kimi k1.5): lengths are compared within one call, so one completion scores 0.0.",
}


class _CosineScaledReward:
    r"""Correctness scaled by length on a cosine schedule (Appendix C.1, https://huggingface.co/papers/2502.03373).

    R = v_min + ½ (v_max − v_min)(1 + cos(|y| / L_max · π)); correct: (v_min, v_max) =
    (min_value_correct, max_value_correct); wrong: (max_value_wrong, min_value_wrong); an unparseable
    gold scores 1.0 (open-r1).
    """

    __name__ = "cosine_scaled_reward"

    def __init__(
        self,
        values: tuple[float, float, float, float],
        max_len: float,
        length_unit: str,
        clamp: bool,
        plain_gold: bool,
    ):
        self.min_value_wrong, self.max_value_wrong, self.min_value_correct, self.max_value_correct = values
        self.max_len = max_len
        self.unit = length_unit
        if length_unit == "tokens":
            self.length_unit = "tokens"  # what rewards.lint reads
        else:  # shown by rewards.lint as acknowledged, not silenced as a declared unit would be
            self.lint_acknowledged = {
                "chars-vs-tokens": "open-r1 parity: counts characters though its docstring says tokens; "
                "length_unit='tokens' counts completion_ids.",
            }
        self.clamp = clamp
        self.plain_gold = plain_gold

    def __call__(
        self,
        completions: Sequence,
        solution: Sequence[str] | None = None,
        completion_ids: Any = None,
        **kwargs,
    ) -> list[float]:
        texts = completion_texts(completions, self.__name__)
        if self.unit == "tokens":
            ids = _ids_column(completion_ids, self.__name__)
            if len(ids) != len(texts):
                raise ValueError(f"{self.__name__}: {len(ids)} completion_ids for {len(texts)} completions.")
            lengths = [len(row) for row in ids]
        else:
            lengths = [len(text) for text in texts]
        rewards = []
        for verdict, length in zip(
            _length_correctness(texts, solution, self.__name__, self.plain_gold), lengths
        ):
            if verdict is None:
                rewards.append(1.0)  # open-r1: "Skip unparseable examples"
                continue
            progress = min(length / self.max_len, 1.0) if self.clamp else length / self.max_len
            rewards.append(cosine_scaled(self, progress, verdict))
        return rewards


def get_cosine_scaled_reward(
    min_value_wrong: float = -1.0,
    max_value_wrong: float = -0.5,
    min_value_correct: float = 0.5,
    max_value_correct: float = 1.0,
    max_len: int = 1000,
    *,
    length_unit: str = "chars",
    clamp: bool = False,
    plain_gold: bool = False,
) -> Callable:
    """open-r1's cosine-scaled reward factory (its argument order; TRL's takes ``max_len`` first).

    open-r1's bugs, kept by default: its docstring speaks of tokens but it counts characters
    (``length_unit="tokens"`` counts ``completion_ids``, as TRL's does), and past ``max_len`` the cosine
    climbs back, so a wrong completion twice ``max_len`` long is penalised as hard as an empty one
    (``clamp=True`` stops the schedule at ``max_len``, as TRL's does); and it parses the gold as LaTeX
    only, so a plain gold such as GSM8K's ``72`` never parses and every completion scores 1.0 (open-r1's
    "skip"); ``plain_gold=True`` reads the gold as its ``accuracy_reward`` does. ``rewards lint`` reports
    the default as constant on its probes (gold ``72``); with the three fixes it is clean.
    """
    if length_unit not in ("chars", "tokens"):
        raise ValueError(f'length_unit must be "chars" (open-r1) or "tokens", got {length_unit!r}')
    if not isinstance(max_len, (int, float)) or not max_len > 0:
        raise ValueError(f"max_len must be a positive length, got {max_len!r}")
    values = (min_value_wrong, max_value_wrong, min_value_correct, max_value_correct)
    return _CosineScaledReward(values, max_len, length_unit, bool(clamp), bool(plain_gold))


get_cosine_scaled_reward.is_reward_factory = True  # type: ignore[attr-defined]


def _english_words(text: str) -> list[str]:
    return text.lower().split()


def _chinese_words(text: str) -> list[str]:
    import jieba  # optional, as in open-r1: checked when the factory is called

    return list(jieba.cut(text))


class _RepetitionPenalty:
    """Repeated-n-gram penalty over *words* (Appendix C.2, https://huggingface.co/papers/2502.03373).

    R(y) = (1 − #unique n-grams / #n-grams) × max_penalty; 0.0 for an empty completion or one shorter
    than ``ngram_size`` words. Words: lower-cased whitespace split (``language="en"``) or jieba (``"zh"``).
    """

    __name__ = "repetition_penalty_reward"

    def __init__(self, ngram_size: int, max_penalty: float, language: str):
        self.ngram_size = ngram_size
        self.max_penalty = max_penalty
        self.language = language

    def __call__(self, completions: Sequence, **kwargs) -> list[float]:
        split = _english_words if self.language == "en" else _chinese_words
        rewards = []
        for text in completion_texts(completions, self.__name__):
            words = split(text) if text else []
            if len(words) < self.ngram_size or not words:
                rewards.append(0.0)
                continue
            ngrams = list(zip(*[words[i:] for i in range(self.ngram_size)]))
            rewards.append((1 - len(set(ngrams)) / len(ngrams)) * self.max_penalty)
        return rewards


def get_repetition_penalty_reward(ngram_size: int, max_penalty: float, language: str = "en") -> Callable:
    """open-r1's word-n-gram repetition penalty factory (TRL's counts token ids: ``from rewards import``).

    ``language="zh"`` splits words with jieba (optional: ``pip install jieba``), as open-r1 does.
    """
    if max_penalty > 0:
        raise ValueError(f"max_penalty {max_penalty} should not be positive")
    if not isinstance(ngram_size, int) or ngram_size < 1:
        raise ValueError(f"ngram_size must be an int ≥ 1, got {ngram_size!r}")
    if language == "zh":
        if importlib.util.find_spec("jieba") is None:
            raise ValueError("Please install jieba to use Chinese language")
    elif language != "en":
        raise ValueError(
            f"Word splitting for language `{language}` is not yet implemented. "
            "Please implement your own zip-ngram function."
        )
    return _RepetitionPenalty(ngram_size, max_penalty, language)


get_repetition_penalty_reward.is_reward_factory = True  # type: ignore[attr-defined]


class _CodeFormat:
    r"""1.0 when the completion is ``<think>\n…\n</think>\n<answer>\n…```<language>…```…\n</answer>``.

    A ``language`` column, when the dataset has one, sets each row's language (mixed-language training).
    Deliberate difference: the language is matched as text (``re.escape``); open-r1 pastes it into the
    pattern, so a dataset value could be a regular expression.
    """

    __name__ = "code_format_reward"

    def __init__(self, language: str):
        self.language = language

    def __call__(self, completions: Sequence, **kwargs) -> list[float]:
        texts = completion_texts(completions, self.__name__)
        languages = kwargs.get("language") or [self.language] * len(texts)
        rewards = []
        for text, language in zip(texts, languages):
            pattern = (
                rf"^<think>\n.*?\n</think>\n<answer>\n.*?```{re.escape(str(language))}.*?```.*?\n</answer>$"
            )
            rewards.append(1.0 if re.match(pattern, text, re.DOTALL | re.MULTILINE) else 0.0)
        return rewards


def get_code_format_reward(language: str = "python") -> Callable:
    """open-r1's code format reward factory: think/answer tags with a fenced ``language`` block in the answer.

    A regular expression only: the code is never run."""
    if not isinstance(language, str) or not language:
        raise ValueError(f'language must be a language name such as "python", got {language!r}')
    return _CodeFormat(language)


get_code_format_reward.is_reward_factory = True  # type: ignore[attr-defined]

code_format_reward = get_code_format_reward("python")  # open-r1's registry default (code_language="python")


class _Weighted:
    """``func``'s rewards times ``weight``; ``None`` (a skipped row) stays ``None``."""

    def __init__(self, func: Callable, weight: float):
        self.func = func
        self.weight = weight
        functools.update_wrapper(self, func)

    def __call__(self, *args, **kwargs) -> list[float | None]:
        return [None if r is None else r * self.weight for r in self.func(*args, **kwargs)]


def create_weighted_reward(func: Callable, weight: float) -> Callable:
    """open-r1's ``create_weighted_reward`` (#213, reverted in #317 for GRPOConfig's ``reward_weights``):
    ``func``'s rewards times ``weight``, under ``func``'s name.

    Deliberate difference: a ``None`` (row skipped) stays ``None``; open-r1's raised a ``TypeError``.
    Prefer ``reward_weights`` in GRPOConfig (TRL) or :func:`rewards.combine`.
    """
    if not callable(func):
        raise TypeError(f"create_weighted_reward: func must be a reward function, got {type(func).__name__}")
    if not isinstance(weight, (int, float)) or not math.isfinite(weight):
        raise ValueError(f"create_weighted_reward: weight must be a finite number, got {weight!r}")
    return _Weighted(func, weight)
