"""GRPO's loss types, each proven equal to the pinned TRL's ``GRPOTrainer._compute_loss``.

Read in this order: ``policy.py`` (importance ratio and the four per-token objectives),
``grpo_kit/kl.py`` (the k3 KL penalty), ``aggregation.py`` (the five normalisations that make eight loss
types out of four objectives), ``registry.py`` (``LOSS_TYPES``), ``compute.py`` (``compute_loss``).
"""

from grpo_kit.losses.aggregation import NORMALIZATIONS, aggregate_loss
from grpo_kit.losses.compute import LossSettings, compute_loss
from grpo_kit.losses.policy import (
    PolicyInputs,
    PolicySettings,
    PolicyTerm,
    cispo_objective,
    clipped_surrogate,
    importance_log_weights,
    sapo_objective,
    vespo_gamma_weights,
    vespo_objective,
)
from grpo_kit.losses.registry import LOSS_TYPES, LossType
from grpo_kit.losses.validation import (
    IMPORTANCE_SAMPLING_LEVELS,
    check_loss_options,
    validate_config,
    validate_loss_settings,
)

__all__ = [
    "IMPORTANCE_SAMPLING_LEVELS",
    "LOSS_TYPES",
    "NORMALIZATIONS",
    "LossSettings",
    "LossType",
    "PolicyInputs",
    "PolicySettings",
    "PolicyTerm",
    "aggregate_loss",
    "check_loss_options",
    "cispo_objective",
    "clipped_surrogate",
    "compute_loss",
    "importance_log_weights",
    "sapo_objective",
    "validate_config",
    "validate_loss_settings",
    "vespo_gamma_weights",
    "vespo_objective",
]
