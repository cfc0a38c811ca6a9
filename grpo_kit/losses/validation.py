"""The loss rules, kept under their old names: each delegates to ``grpo_kit.settings`` (the one place).

``check_loss_options`` is what ``compute_loss`` enforces on every call (``settings.check_loss_call``).
``validate_loss_settings`` runs the configuration-level rules (``settings.check_grpo_settings``) on keyword
arguments; ``validate_config`` on any object with GRPOConfig's field names (``GRPOConfig``,
``GRPOLoopConfig``).
"""

from __future__ import annotations

from typing import Any

from grpo_kit.settings import GRPO_DEFAULTS, IMPORTANCE_SAMPLING_LEVELS, check_grpo_settings, check_loss_call

__all__ = ["IMPORTANCE_SAMPLING_LEVELS", "check_loss_options", "validate_config", "validate_loss_settings"]

check_loss_options = check_loss_call


def validate_loss_settings(**settings: Any) -> None:
    """``settings.check_grpo_settings`` on keyword arguments with GRPOConfig's names and defaults;
    ``generation_batch_size`` alone is read as a batch of that many completions."""
    if settings.get("generation_batch_size") is not None and "per_device_train_batch_size" not in settings:
        settings["per_device_train_batch_size"] = settings["generation_batch_size"]
    unknown = sorted(set(settings) - set(GRPO_DEFAULTS))
    if unknown:
        raise TypeError(f"validate_loss_settings got unknown settings {unknown}; use GRPOConfig names.")
    check_grpo_settings(settings)


def validate_config(config: Any) -> None:
    """The configuration-level rules on the fields of ``config`` that carry GRPOConfig's names. A built
    ``GRPOConfig`` has derived ``generation_batch_size`` from ``steps_per_generation``; only the latter is read."""
    values = {name: getattr(config, name) for name in GRPO_DEFAULTS if hasattr(config, name)}
    if values.get("steps_per_generation") is not None:
        values.pop("generation_batch_size", None)
    check_grpo_settings(values)
