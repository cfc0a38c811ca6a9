"""What each reward function measures and its best score: :class:`RewardInfo` by function name.

The evaluation (``grpo_kit.evaluation``: which metric a report card leads with) and the plots (the dashed
"best possible" line of a reward curve) both read it; it sits below them so neither imports the other.
No torch at import.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["REWARD_INFO", "RewardInfo", "reward_info", "reward_upper_bound"]


@dataclass(frozen=True)
class RewardInfo:
    """What a reward function measures (``kind``: "format", "accuracy", "length" or "other") and its
    maximum (``None`` when unbounded or unknown)."""

    kind: str = "other"
    max_reward: float | None = None


REWARD_INFO: dict[str, RewardInfo] = {
    # rewards.gsm8k (course 12.6 scales)
    "xmlcount_reward": RewardInfo("format", 0.5),
    "soft_format_reward": RewardInfo("format", 0.5),
    "strict_format_reward": RewardInfo("format", 0.5),
    "int_reward": RewardInfo("other", 0.5),
    "correctness_reward": RewardInfo("accuracy", 2.0),
    # rewards.course and TRL's reward functions
    "format_reward": RewardInfo("format", 1.0),
    "think_format_reward": RewardInfo("format", 1.0),
    "accuracy_reward": RewardInfo("accuracy", 1.0),
    "reasoning_accuracy_reward": RewardInfo("accuracy", 1.0),
    # rewards.visual (the image tasks of datasets_prep.images)
    "visual_answer_reward": RewardInfo("accuracy", 1.0),
    "visual_choice_reward": RewardInfo("format", 1.0),
}


def reward_info(fn: Callable) -> RewardInfo:
    """Kind and maximum of a reward function: its own attributes first, then :data:`REWARD_INFO`."""
    from rewards.compose import reward_name

    name = reward_name(fn)
    base = REWARD_INFO.get(name, RewardInfo())
    if hasattr(fn, "ideal_length"):  # rewards.length_reward: -|ideal - length|, best at 0
        base = RewardInfo("length", 0.0)
    return RewardInfo(getattr(fn, "reward_kind", base.kind), getattr(fn, "max_reward", base.max_reward))


def reward_upper_bound(
    names: Sequence[str], weights: Sequence[float] | None = None, *, kinds: dict[str, str] | None = None
) -> float | None:
    """The highest total reward the recipe's functions can give (``None`` when one maximum is unknown).

    A function's maximum comes from :data:`REWARD_INFO` by name, and is 0 for a length
    reward (``-|target - length|``; ``kinds[name] == "length"`` or a ``length_reward_*`` name). Without
    ``weights`` the bound is only known when every maximum is 0 (true for any non-negative weights)."""
    maxima = []
    for name in names:
        if (kinds or {}).get(name) == "length" or name.startswith("length_reward"):
            maxima.append(0.0)
        elif name in REWARD_INFO and REWARD_INFO[name].max_reward is not None:
            maxima.append(REWARD_INFO[name].max_reward)
        else:
            return None
    if not maxima:
        return None
    if weights is None:
        return 0.0 if all(m == 0.0 for m in maxima) else None
    if any(w < 0 for w in weights):
        return None
    return float(sum(w * m for w, m in zip(weights, maxima)))
