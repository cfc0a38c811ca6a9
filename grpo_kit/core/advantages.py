"""Group-relative advantages: GRPO's replacement for a learned value function.

For every prompt the policy samples a *group* of ``G = num_generations`` completions. Each completion gets
one reward per reward function; the advantage of a completion is how much better its reward is than the
*other members of its group*:

    r_i = Σ_f w_f · R_{i,f}                          (weighted nansum over reward functions)
    A_i = (r_i − mean_group(r)) / (std(r) + 1e-4)     (DeepSeekMath, https://huggingface.co/papers/2402.03300)

Everything here reproduces the pinned TRL 1.15.0 ``GRPOTrainer._generate_and_score_completions``
(``tests/grpo_kit/test_advantages.py`` drives that very method and compares):

* ``None`` from a reward function arrives as NaN. A function that returns NaN for a row is simply left
  out of that row's weighted sum (``nansum``). A row where *every* function is NaN is *unscorable*: it is
  excluded from the group mean/std and its advantage is 0, so it neither biases the baseline nor moves
  the policy.
* ``scale_rewards``: ``"group"`` (or ``True``) divides by the group's std, ``"batch"`` divides by the
  std of the whole batch (PPO-Lite, https://huggingface.co/papers/2508.08221) while still subtracting
  the *group* mean, ``"none"`` (or ``False``) does not divide at all (Dr. GRPO,
  https://huggingface.co/papers/2503.20783: dividing by the group std over-weights easy/hard prompts).
* std is ``nanstd`` with Bessel's correction (divide by n − 1); a group with fewer than two scorable
  completions has NaN std, hence advantage 0.
* ``multi_objective_aggregation="normalize_then_sum"`` (GDPO, https://huggingface.co/papers/2601.05242)
  normalises each reward function inside its group first, sums the normalised rewards with the weights,
  then normalises the sum over the whole batch.
* A group whose rewards are all equal has std 0, so ``A = 0 / 1e-4 = 0``: no signal, never NaN.

Only torch is imported: the standalone loop must run without TRL.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from grpo_kit.core.losses.validation import (  # names and defaults, written where the settings read them without torch
    MULTI_OBJECTIVE_AGGREGATIONS,
    SCALE_REWARDS_OPTIONS,
    AdvantageSettings,
)

# Added to the std before dividing, exactly as TRL: a zero-variance group gives 0 / 1e-4 = 0.
STD_EPSILON = 1e-4


@dataclass(frozen=True)
class AdvantageResult:
    """Advantages plus what TRL logs about the rewards of one generation batch.

    ``metrics`` uses TRL's names: ``reward``, ``reward_std``, ``frac_reward_zero_std`` and, per reward
    function, ``rewards/{name}/mean`` and ``rewards/{name}/std``.
    """

    advantages: torch.Tensor  # (N,) never NaN
    rewards: torch.Tensor  # (N,) weighted sum of the raw rewards, NaN for unscorable rows
    metrics: dict[str, float] = field(default_factory=dict)


def nanstd(tensor: torch.Tensor, dim: int | None = None, keepdim: bool = False) -> torch.Tensor:
    """Standard deviation ignoring NaNs, with Bessel's correction; NaN where fewer than 2 values remain.

    Same arithmetic, in the same order, as ``trl.trainer.utils.nanstd`` (so float32 results match bit for bit).
    """
    mean = torch.nanmean(tensor, dim=dim, keepdim=True)
    variance = torch.nanmean((tensor - mean) ** 2, dim=dim, keepdim=True)
    count = torch.sum(~torch.isnan(tensor), dim=dim, keepdim=True)  # how many values are not NaN
    correction = count / (count - 1)
    correction = torch.where(count > 1, correction, torch.full_like(correction, float("nan")))
    variance = variance * correction  # Bessel: the group mean was estimated from the same values
    std = torch.sqrt(variance)
    if keepdim:
        return std
    return std.squeeze(dim) if dim is not None else std.squeeze()


def normalize_scale_rewards(scale_rewards: str | bool) -> str:
    """Map GRPOConfig's booleans onto the named options: True → "group", False → "none"."""
    if isinstance(scale_rewards, bool):
        return "group" if scale_rewards else "none"
    if scale_rewards not in SCALE_REWARDS_OPTIONS:
        raise ValueError(
            f"scale_rewards={scale_rewards!r} is not supported; use one of {list(SCALE_REWARDS_OPTIONS)} "
            "(or True for 'group', False for 'none')."
        )
    return scale_rewards


def check_multi_objective_aggregation(multi_objective_aggregation: str) -> str:
    if multi_objective_aggregation not in MULTI_OBJECTIVE_AGGREGATIONS:
        raise ValueError(
            f"multi_objective_aggregation={multi_objective_aggregation!r} is not supported; use one of "
            f"{list(MULTI_OBJECTIVE_AGGREGATIONS)}."
        )
    return multi_objective_aggregation


def stack_rewards(rewards_by_func: Sequence[Sequence[float | None]]) -> torch.Tensor:
    """Turn what reward functions return (one list per function, ``None`` allowed) into ``(N, F)`` floats.

    ``stack_rewards([accuracy(completions), fmt(completions)])`` → a float32 tensor with NaN for ``None``,
    the input ``compute_advantages`` expects (TRL builds the same float32 matrix).
    """
    if len(rewards_by_func) == 0:
        raise ValueError("stack_rewards needs at least one reward function's output (got an empty list).")
    lengths = {len(values) for values in rewards_by_func}
    if len(lengths) != 1:
        raise ValueError(
            f"every reward function must return one reward per completion; got lists of lengths {sorted(lengths)}."
        )
    columns = [
        torch.tensor([math.nan if value is None else float(value) for value in values], dtype=torch.float32)
        for values in rewards_by_func
    ]
    return torch.stack(columns, dim=1)  # (N, F)


def _check_inputs(
    rewards_per_func: torch.Tensor,
    num_generations: int,
    reward_weights: torch.Tensor | Sequence[float] | None,
) -> torch.Tensor:
    if not isinstance(rewards_per_func, torch.Tensor):
        raise TypeError(
            "rewards_per_func must be a torch.Tensor of shape (N, F) with NaN for None; "
            "build it from the reward functions' lists with grpo_kit.core.advantages.stack_rewards(...)."
        )
    if rewards_per_func.dim() != 2:
        raise ValueError(
            f"rewards_per_func must have shape (N, F) (completions × reward functions); got shape "
            f"{tuple(rewards_per_func.shape)}. For a single reward function use rewards.unsqueeze(1)."
        )
    if not rewards_per_func.is_floating_point():
        raise TypeError(
            "rewards_per_func must be a floating-point tensor (NaN marks a reward function's None)."
        )
    if isinstance(num_generations, bool) or not isinstance(num_generations, int) or num_generations < 1:
        raise ValueError(
            f"num_generations must be a positive int (completions per prompt); got {num_generations!r}."
        )
    num_completions, num_funcs = rewards_per_func.shape
    if num_completions % num_generations != 0:
        raise ValueError(
            f"{num_completions} completions cannot be split into groups of num_generations={num_generations}; "
            "pass the G completions of each prompt next to each other, a whole number of groups."
        )
    if reward_weights is None:
        reward_weights = [1.0] * num_funcs
    # float32 like TRL's `self.reward_weights`, so weighted sums round the same way.
    weights = torch.as_tensor(reward_weights, dtype=torch.float32).to(rewards_per_func.device)
    if weights.dim() != 1 or weights.numel() != num_funcs:
        raise ValueError(
            f"reward_weights has {weights.numel()} values but there are {num_funcs} reward functions; "
            "give one weight per reward function (or None for all 1.0)."
        )
    return weights


def compute_advantages_with_metrics(
    rewards_per_func: torch.Tensor,
    num_generations: int,
    *,
    reward_weights: torch.Tensor | Sequence[float] | None = None,
    scale_rewards: str | bool = AdvantageSettings.scale_rewards,
    multi_objective_aggregation: str = AdvantageSettings.multi_objective_aggregation,
    reward_func_names: Sequence[str] | None = None,
) -> AdvantageResult:
    """``compute_advantages`` plus TRL's reward metrics (see the module docstring for the maths).

    ``reward_func_names`` names the per-function metrics (``rewards/{name}/mean``); TRL uses each
    function's ``__name__``. Default: ``reward_0``, ``reward_1``, …
    """
    weights = _check_inputs(rewards_per_func, num_generations, reward_weights)
    scale_rewards = normalize_scale_rewards(scale_rewards)
    check_multi_objective_aggregation(multi_objective_aggregation)
    num_funcs = rewards_per_func.size(1)
    if reward_func_names is None:
        reward_func_names = [f"reward_{i}" for i in range(num_funcs)]
    if len(reward_func_names) != num_funcs:
        raise ValueError(
            f"reward_func_names has {len(reward_func_names)} names for {num_funcs} reward functions."
        )
    weights = weights.unsqueeze(0)  # (1, F)

    # A row where every function said None: keep it out of the baseline, force its advantage to 0 below.
    unscorable = torch.isnan(rewards_per_func).all(dim=1)  # (N,)

    if multi_objective_aggregation == "sum_then_normalize":
        rewards = (rewards_per_func * weights).nansum(dim=1)  # (N,)
        rewards[unscorable] = torch.nan
        grouped = rewards.view(-1, num_generations)  # (N/G, G)
        group_mean = torch.nanmean(grouped, dim=1).repeat_interleave(num_generations, dim=0)  # (N,)
        if scale_rewards in ("group", "none"):
            # With "none" the std is only used to count zero-variance groups for logging.
            if num_generations > 1:
                std = nanstd(grouped, dim=1).repeat_interleave(num_generations, dim=0)  # (N,)
            else:
                std = torch.zeros_like(rewards)  # (N,) a "group" of one has no spread
        else:  # "batch": group mean, batch std
            std = (
                nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
            )  # (N,)
        advantages = rewards - group_mean  # (N,)
        if scale_rewards != "none":
            advantages = advantages / (std + STD_EPSILON)
    else:  # "normalize_then_sum" (GDPO): per function inside the group, then the weighted sum over the batch
        grouped = rewards_per_func.view(-1, num_generations, num_funcs)  # (N/G, G, F)
        mean_k = torch.nanmean(grouped, dim=1, keepdim=True)  # (N/G, 1, F)
        std_k = nanstd(grouped, dim=1, keepdim=True) if num_generations > 1 else torch.zeros_like(mean_k)
        normalized = ((grouped - mean_k) / (std_k + STD_EPSILON)).view(-1, num_funcs)  # (N, F)
        rewards = (normalized * weights).nansum(dim=1)  # (N,)
        rewards[unscorable] = torch.nan
        std = nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)  # (N,)
        advantages = (rewards - torch.nanmean(rewards)) / (std + STD_EPSILON)  # (N,)
        # Note (TRL): scale_rewards is ignored here; the batch normalisation always happens.

    # isclose(NaN, 0) is False: a group with < 2 scorable completions does not count as "zero std".
    is_std_zero = torch.isclose(std, torch.zeros_like(std))  # (N,)
    advantages = torch.nan_to_num(advantages, nan=0.0)  # unscorable rows / single-member groups: no signal

    metrics: dict[str, float] = {}
    for i, name in enumerate(reward_func_names):
        metrics[f"rewards/{name}/mean"] = torch.nanmean(rewards_per_func[:, i]).item()
        metrics[f"rewards/{name}/std"] = nanstd(rewards_per_func[:, i]).item()
    # The logged reward is always the weighted sum of the *raw* rewards, also under normalize_then_sum.
    raw_rewards = (rewards_per_func * weights).nansum(dim=1)  # (N,)
    raw_rewards[unscorable] = torch.nan
    metrics["reward"] = torch.nanmean(raw_rewards).item()
    metrics["reward_std"] = nanstd(raw_rewards).item()
    metrics["frac_reward_zero_std"] = is_std_zero.float().mean().item()
    return AdvantageResult(advantages=advantages, rewards=raw_rewards, metrics=metrics)


def compute_advantages(
    rewards_per_func: torch.Tensor,
    num_generations: int,
    *,
    reward_weights: torch.Tensor | Sequence[float] | None = None,
    scale_rewards: str | bool = AdvantageSettings.scale_rewards,
    multi_objective_aggregation: str = AdvantageSettings.multi_objective_aggregation,
) -> torch.Tensor:
    """Group-relative advantages ``(N,)`` from rewards ``(N, F)`` (NaN = a reward function's ``None``).

    Rows are ordered group by group: completions ``[g·G, (g+1)·G)`` answer the same prompt.
    Never returns NaN: zero-variance groups and unscorable rows get 0. Equal to TRL 1.15.0
    (see the module docstring); use ``compute_advantages_with_metrics`` for the logged statistics.
    """
    return compute_advantages_with_metrics(
        rewards_per_func,
        num_generations,
        reward_weights=reward_weights,
        scale_rewards=scale_rewards,
        multi_objective_aggregation=multi_objective_aggregation,
    ).advantages
