"""GRPO's loss types, each proven equal to the pinned TRL's ``GRPOTrainer._compute_loss``.

Read in this order: ``policy.py`` (importance ratio and the four per-token objectives),
``grpo_kit/core/kl.py`` (the k3 KL penalty), ``aggregation.py`` (the five normalisations that make eight loss
types out of four objectives), ``registry.py`` (``LOSS_TYPES``), ``compute.py`` (``compute_loss``).
``validation.py`` holds ``LossSettings`` (the loss hyper-parameters and their defaults) and the loss rules.

The names below are imported on first use: ``grpo_kit.config.rules`` reads ``losses.validation`` (no torch) while
the command line starts, and importing this package must not load torch for it.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Each public name -> the submodule that defines it (``tests/grpo_kit/test_losses.py`` checks it is ``__all__``).
_SOURCES = {
    "IMPORTANCE_SAMPLING_LEVELS": "validation",
    "LOSS_TYPES": "registry",
    "NORMALIZATIONS": "aggregation",
    "LossSettings": "validation",
    "LossType": "registry",
    "PolicyInputs": "policy",
    "PolicySettings": "policy",
    "PolicyTerm": "policy",
    "aggregate_loss": "aggregation",
    "check_loss_options": "validation",
    "cispo_objective": "policy",
    "clipped_surrogate": "policy",
    "compute_loss": "compute",
    "importance_log_weights": "policy",
    "sapo_objective": "policy",
    "vespo_gamma_weights": "policy",
    "vespo_objective": "policy",
}

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
    "vespo_gamma_weights",
    "vespo_objective",
]


def __getattr__(name: str) -> Any:
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_SOURCES[name]}"), name)
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
