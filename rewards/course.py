"""The Hugging Face course's length and format rewards (LLM Course ch. 12.4–12.5), pitfalls fixed.

What was wrong in the course and what we do instead (each has a test that fails on the original,
``tests/rewards/test_rewards_course_pitfalls.py``):

``reward_len`` (``-abs(ideal_length - len(completion))``)
    * ``len`` counts **characters**, while the text promises an ideal of 20/50 **tokens**: the model
      learns one-sentence answers. → :func:`length_reward` makes the unit explicit: ``unit="tokens"``
      (the default, the course's intent) counts the ``completion_ids`` GRPOTrainer passes, or uses a
      tokenizer given at construction; ``unit="chars"`` counts characters on purpose.
    * With conversational completions ``len(completion)`` is the number of *messages* (1): every
      completion gets the same reward and nothing is learned. → we measure the message text.
    * It returns ``int``s. → floats.

``reward_format`` (``re.match(r"^<think>.*?</think><answer>.*?</answer>$", c)``)
    * Without ``re.DOTALL`` ``.`` stops at a newline: multi-line reasoning never matches. → DOTALL.

``format_reward`` (``re.search(r"<think>(.*?)</think>\\s*<answer>(.*?)</answer>", c, re.DOTALL)``)
    * Empty tags ``<think></think><answer></answer>`` earn 0.5: a reward hack. → 0.0 unless both
      sections hold a letter or digit (a ``...`` placeholder is blank too).
    * Kept from the course on purpose: the ``len(think) > 20`` tier. Reasoning of 20 characters or
      fewer (``<think>8*9</think><answer>72</answer>``) earns 0.5, not the full 1.0, so that trivial
      reasoning is never the best-paid way to write the format.
    * ``re.search`` accepts any text before and after the block. → the completion must be the block
      (surrounding whitespace allowed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._text import completion_texts, is_blank_section

__all__ = ["format_reward", "length_reward"]

_UNITS = ("tokens", "chars")


class _LengthReward:
    """R(y) = −|ideal_length − |y||, with |y| in tokens or characters."""

    def __init__(self, ideal_length: int, unit: str, tokenizer: Any):
        self.ideal_length = ideal_length
        self.length_unit = unit
        self.tokenizer = tokenizer
        self.__name__ = f"length_reward_{ideal_length}_{unit}"

    def __repr__(self) -> str:
        return f"length_reward(ideal_length={self.ideal_length}, unit={self.length_unit!r})"

    def _token_counts(self, texts: list[str], completion_ids: Any) -> list[int]:
        if completion_ids is not None:
            if isinstance(completion_ids, (str, bytes)) or not isinstance(completion_ids, Sequence):
                raise TypeError(
                    f"{self.__name__}: completion_ids must be a list of token-id lists, "
                    f"got {type(completion_ids).__name__}."
                )
            if len(completion_ids) != len(texts):
                raise ValueError(
                    f"{self.__name__}: {len(completion_ids)} completion_ids for {len(texts)} completions."
                )
            return [len(ids) for ids in completion_ids]
        if not texts:
            return []  # HF tokenizers raise IndexError on an empty batch
        if self.tokenizer is not None:
            encoded = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
            return [len(ids) for ids in encoded]
        raise ValueError(
            f"{self.__name__} counts tokens but got neither completion_ids nor a tokenizer: run it under "
            "GRPOTrainer (it passes completion_ids), pass completion_ids=[...], or build it with "
            "length_reward(ideal_length, unit='tokens', tokenizer=tokenizer). For characters use unit='chars'."
        )

    def __call__(self, completions: Sequence, completion_ids: Any = None, **kwargs) -> list[float]:
        texts = completion_texts(completions, self.__name__)
        if self.length_unit == "chars":
            lengths = [len(t) for t in texts]
        else:
            lengths = self._token_counts(texts, completion_ids)
        return [-float(abs(self.ideal_length - n)) for n in lengths]


def length_reward(ideal_length: int = 50, unit: str = "tokens", tokenizer: Any = None) -> _LengthReward:
    """A reward that peaks (0.0) at ``ideal_length`` and falls by 1 per token (or character) away from it.

    Args:
        ideal_length: the target length.
        unit: ``"tokens"`` (default; uses the ``completion_ids`` TRL passes, else ``tokenizer``) or
            ``"chars"`` (characters of the completion text, as the course's ``len(completion)`` did).
        tokenizer: any Hugging Face tokenizer, used when ``completion_ids`` are not passed.

    The returned callable is picklable and named ``length_reward_{ideal_length}_{unit}`` (TRL logs
    ``rewards/length_reward_50_tokens/mean``).
    """
    if unit not in _UNITS:
        raise ValueError(f"unit must be 'tokens' or 'chars', got {unit!r}")
    if isinstance(ideal_length, bool) or not isinstance(ideal_length, int) or ideal_length < 0:
        raise ValueError(f"ideal_length must be a non-negative int, got {ideal_length!r}")
    if tokenizer is not None and not callable(tokenizer):
        raise TypeError(
            "tokenizer must be a Hugging Face tokenizer (callable: tokenizer(texts)['input_ids'])"
        )
    if unit == "chars" and tokenizer is not None:
        raise ValueError("a tokenizer only makes sense with unit='tokens'; drop it or set unit='tokens'")
    return _LengthReward(ideal_length, unit, tokenizer)


length_reward.is_reward_factory = True  # type: ignore[attr-defined]

_TAGS = ("<think>", "</think>", "<answer>", "</answer>")
_THINK_TAGS = ("<think>", "</think>")
SUBSTANTIAL_REASONING_CHARS = 20  # the course: len(think_content) > 20 earns the full reward


def _think_answer_score(text: str) -> float:
    """1.0 for substantial reasoning, 0.5 for reasoning of ≤ 20 characters (stripped), 0.0 otherwise."""
    reasoning = _think_answer_reasoning(text)
    if reasoning is None:
        return 0.0
    return 1.0 if len(reasoning) > SUBSTANTIAL_REASONING_CHARS else 0.5


def _think_answer_reasoning(text: str) -> str | None:
    """The stripped reasoning of a well-formed ``<think>…</think><answer>…</answer>``, else ``None``.

    The reasoning may mention the answer tags (the layout decides); the answer may hold no tag."""
    # String scanning instead of a lazy regex: linear even on adversarial 1 MB outputs full of tags.
    body = text.strip()
    if not (body.startswith("<think>") and body.endswith("</answer>")):
        return None
    end_think = body.find("</think>")
    if end_think == -1:
        return None
    reasoning = body[len("<think>") : end_think]
    rest = body[end_think + len("</think>") :].lstrip()
    if not rest.startswith("<answer>"):
        return None
    answer = rest[len("<answer>") : -len("</answer>")] if len(rest) >= len("<answer></answer>") else None
    if answer is None or is_blank_section(reasoning) or is_blank_section(answer):
        return None
    if any(tag in reasoning for tag in _THINK_TAGS) or any(tag in answer for tag in _TAGS):
        return None
    return reasoning.strip()


def format_reward(completions: Sequence, **kwargs) -> list[float]:
    """``<think>reasoning</think><answer>answer</answer>``: 1.0 when the reasoning has more than 20
    characters, 0.5 when it is shorter (the course's tier), 0.0 when the format is wrong or a section blank.

    Multi-line reasoning and answers are accepted (the course's regex lacked ``re.DOTALL``); whitespace
    around and between the blocks is allowed; anything else around them, repeated or nested tags, or
    an empty section gives 0.0. The reasoning may mention ``<answer>``.

    The course's (LLM Course 12.4). open-r1's ``format_reward`` (``<think>\\n…\\n</think>\\n<answer>\\n…\\n</answer>``,
    1.0 or 0.0) is ``from rewards.open_r1 import format_reward``.
    """
    texts = completion_texts(completions, "format_reward")
    return [_think_answer_score(text) for text in texts]
