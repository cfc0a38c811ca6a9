"""Checks on loss settings that every training path shares, each with a message that names the fix.

``check_loss_options`` holds the rules ``compute_loss`` enforces on every call. ``validate_loss_settings``
adds the configuration-level rules a path runs once, before any model loads – including TRL's traps
that ``compute_loss`` must still reproduce for parity (``cispo`` with ``epsilon_high`` unset).
``validate_config`` reads the same settings from any object using GRPOConfig's field names
(``GRPOConfig``, ``GRPOLoopConfig``).
"""

from __future__ import annotations

import warnings
from typing import Any

from grpo_kit.advantages import check_multi_objective_aggregation, normalize_scale_rewards
from grpo_kit.losses.registry import LOSS_TYPES

IMPORTANCE_SAMPLING_LEVELS = ("token", "sequence")


def check_loss_options(
    *,
    loss_type: str,
    importance_sampling_level: str = "token",
    beta: float = 0.0,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    delta: float | None = None,
    max_completion_length: int | None = None,
) -> None:
    """The rules ``compute_loss`` enforces: known names, valid combinations, sane numbers."""
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"unknown loss_type={loss_type!r}; choose one of {sorted(LOSS_TYPES)}.")
    if importance_sampling_level not in IMPORTANCE_SAMPLING_LEVELS:
        raise ValueError(
            f"unknown importance_sampling_level={importance_sampling_level!r}; use 'token' or 'sequence'."
        )
    if loss_type == "luspo" and importance_sampling_level != "sequence":
        raise ValueError(
            "loss_type='luspo' is a sequence-level loss (LUSPO modifies GSPO); set "
            "importance_sampling_level='sequence'."
        )
    if loss_type == "vespo" and importance_sampling_level != "token":
        raise ValueError(
            "loss_type='vespo' builds its own sequence-level weight from the token log-ratios; set "
            "importance_sampling_level='token' (the default)."
        )
    if beta < 0:
        raise ValueError(f"beta={beta} is negative; the KL coefficient must be >= 0 (0 disables the KL term).")
    if epsilon < 0 or (epsilon_high is not None and epsilon_high < 0):
        raise ValueError(f"epsilon={epsilon} and epsilon_high={epsilon_high} must be >= 0.")
    if delta is not None and delta <= 1:
        raise ValueError(
            f"delta={delta} caps the importance ratio from above and must be > 1 (INTELLECT-2 recommends > 1 + "
            "epsilon_high); use delta=None to disable two-sided clipping."
        )
    if loss_type == "dr_grpo" and (max_completion_length is None or max_completion_length < 1):
        raise ValueError(
            "loss_type='dr_grpo' divides by batch size × max_completion_length; pass "
            "max_completion_length=<the generation limit> (a positive int)."
        )


def validate_loss_settings(
    *,
    loss_type: str = "dapo",
    importance_sampling_level: str = "token",
    beta: float = 0.0,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    delta: float | None = None,
    max_completion_length: int | None = 512,
    num_generations: int | None = 8,
    generation_batch_size: int | None = None,
    scale_rewards: str | bool = "group",
    multi_objective_aggregation: str = "sum_then_normalize",
) -> None:
    """Configuration-level checks shared by the loop and the TRL path; raise ``ValueError`` naming the fix.

    Defaults are GRPOConfig's. Beyond ``check_loss_options``: at least two generations per prompt, whole
    groups per generation batch, a known ``scale_rewards``/``multi_objective_aggregation``, and no
    ``cispo`` with an unset (or below-1) ``epsilon_high`` – TRL would silently cap every ratio at 0.2.
    Warns, like TRL, when a token-summing loss is used at sequence level.
    """
    check_loss_options(
        loss_type=loss_type,
        importance_sampling_level=importance_sampling_level,
        beta=beta,
        epsilon=epsilon,
        epsilon_high=epsilon_high,
        delta=delta,
        max_completion_length=max_completion_length,
    )
    if max_completion_length is not None and max_completion_length < 1:
        raise ValueError(f"max_completion_length={max_completion_length} must be a positive number of tokens.")
    if num_generations is not None and num_generations < 2:
        raise ValueError(
            f"num_generations={num_generations}: GRPO compares completions of the same prompt, so it needs at "
            "least 2 per prompt; set num_generations >= 2 (TRL's default is 8)."
        )
    if generation_batch_size is not None and num_generations and generation_batch_size % num_generations != 0:
        raise ValueError(
            f"the generation batch ({generation_batch_size} completions) is not divisible by num_generations="
            f"{num_generations}; choose a batch size that is a multiple of num_generations."
        )
    normalize_scale_rewards(scale_rewards)
    check_multi_objective_aggregation(multi_objective_aggregation)
    if loss_type == "cispo":
        if epsilon_high is None:
            raise ValueError(
                "loss_type='cispo' caps the importance ratio at epsilon_high, and TRL falls back to epsilon "
                f"(={epsilon}) when it is unset, which clips even on-policy tokens (ratio 1); set epsilon_high, "
                "e.g. 5.0 as recommended by ScaleRL."
            )
        if epsilon_high < 1:
            raise ValueError(
                f"loss_type='cispo' uses epsilon_high={epsilon_high} as an absolute cap on the ratio (not 1 + ε "
                "as in the clipped losses); a cap below 1 clips on-policy tokens. Set epsilon_high >= 1, e.g. 5.0."
            )
    if importance_sampling_level == "sequence" and loss_type in ("bnpo", "dr_grpo", "dapo", "cispo"):
        warnings.warn(
            f"loss_type={loss_type!r} sums per-token terms, so with importance_sampling_level='sequence' each "
            "sequence is weighted by its length; use loss_type='grpo' for GSPO's per-sequence objective.",
            UserWarning,
            stacklevel=2,
        )


_SETTING_NAMES = (
    "loss_type",
    "importance_sampling_level",
    "beta",
    "epsilon",
    "epsilon_high",
    "delta",
    "max_completion_length",
    "num_generations",
    "generation_batch_size",
    "scale_rewards",
    "multi_objective_aggregation",
)


def validate_config(config: Any) -> None:
    """``validate_loss_settings`` on the fields of ``config`` that carry GRPOConfig's names.

    Works for ``trl.GRPOConfig`` and ``grpo_kit.loop.GRPOLoopConfig``; fields a config lacks keep the defaults.
    """
    settings = {name: getattr(config, name) for name in _SETTING_NAMES if hasattr(config, name)}
    validate_loss_settings(**settings)
