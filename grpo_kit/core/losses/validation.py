"""The loss and advantage hyper-parameters and every rule about the loss, written once. No torch at import.

``LossSettings`` carries the loss hyper-parameters of a run from its config to ``compute_loss``; its defaults are
the pinned TRL's ``GRPOConfig`` defaults, and every other place that needs one (``compute_loss``'s keywords,
the setting declarations ``grpo_kit.config.declarations``, the rules below) reads it from here; so do the
entropy bonus' (:data:`ENTROPY_FIELDS`). ``check_beta`` and ``check_epsilons`` are the one rule of those ranges.

``AdvantageSettings`` does the same for the two advantage settings (``grpo_kit.core.advantages`` reads its defaults and
option lists from here, so that the settings can name them without importing torch).

``check_loss_options`` (``check_loss_call``) is what ``compute_loss`` enforces on every call: known names,
sane numbers, TRL's warnings. ``check_cispo_cap`` and ``warn_sequence_level_sums`` are the configuration-level
loss rules: ``grpo_kit.config.rules.check_grpo_settings`` runs them, with ``check_loss_call``, on every path.

Where TRL 1.15 merely *warns* (``luspo`` at token level, ``vespo`` at sequence level, a token-summing loss at
sequence level), so do we, with TRL's advice, and ``compute_loss`` computes what TRL computes.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ENTROPY_FIELDS",
    "IMPORTANCE_SAMPLING_LEVELS",
    "LOSS_TYPE_NAMES",
    "MULTI_OBJECTIVE_AGGREGATIONS",
    "SCALE_REWARDS_OPTIONS",
    "TRL_LUSPO_ADVICE",
    "TRL_VESPO_ADVICE",
    "AdvantageSettings",
    "LossSettings",
    "check_beta",
    "check_cispo_cap",
    "check_epsilons",
    "check_loss_call",
    "check_loss_options",
    "warn_like_trl",
    "warn_sequence_level_sums",
]

IMPORTANCE_SAMPLING_LEVELS = ("token", "sequence")
# TRL's loss types by name, in TRL's order. ``registry.LOSS_TYPES`` gives each its objective and normalisation
# (and refuses to import if its keys differ); the names live here so the rules need no torch and no registry.
LOSS_TYPE_NAMES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")

# TRL 1.15's warnings (GRPOTrainer.__init__), word for word, so a reader can search for them.
TRL_LUSPO_ADVICE = (
    "When using `'luspo'` loss, `importance_sampling_level` should be set to `'sequence'` to mirror "
    "the paper's setup."
)
TRL_VESPO_ADVICE = (
    "VESPO computes sequence-level importance weights internally. `importance_sampling_level` "
    "should be set to `'token'` (the default)."
)


SCALE_REWARDS_OPTIONS = ("group", "batch", "none")
MULTI_OBJECTIVE_AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")


@dataclass(frozen=True)
class AdvantageSettings:
    """How rewards become advantages, with TRL ``GRPOConfig``'s names and defaults: the one place they are
    written (``compute_advantages``' keywords and ``grpo_kit.config.declarations`` read them)."""

    scale_rewards: str = "group"
    multi_objective_aggregation: str = "sum_then_normalize"


@dataclass(frozen=True)
class LossSettings:
    """The loss hyper-parameters of a run, built once from its config and handed to every ``compute_loss``
    call (``compute_loss(..., settings=LossSettings.from_config(config))``). The only carrier of loss
    hyper-parameters from a config to ``compute_loss``, and the one place their defaults are written: names
    and defaults are TRL ``GRPOConfig``'s, except ``max_completion_length``, which ``compute_loss`` needs only
    for ``dr_grpo`` and does not assume (``None``; GRPOConfig's 512 is the declaration's)."""

    loss_type: str = "dapo"
    beta: float = 0.0
    epsilon: float = 0.2
    epsilon_high: float | None = None
    delta: float | None = None
    importance_sampling_level: str = "token"
    use_bias_correction_kl: bool = True
    max_completion_length: int | None = None
    gradient_accumulation_steps: int = 1
    sapo_temperature_pos: float = 1.0
    sapo_temperature_neg: float = 1.05
    vespo_k_pos: float = 2.0
    vespo_lambda_pos: float = 3.0
    vespo_k_neg: float = 3.0
    vespo_lambda_neg: float = 2.0

    @classmethod
    def from_config(cls, config: Any) -> LossSettings:
        """The fields of ``config`` (GRPOConfig, GRPOLoopConfig, ...) that carry these names."""
        return cls(
            **{f.name: getattr(config, f.name) for f in dataclasses.fields(cls) if hasattr(config, f.name)}
        )

    def kwargs(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


#: GRPOConfig's entropy-regularization fields and their defaults (TRL 1.15), written here only (torch-free, so that
#: the settings can read them): ``losses.entropy.EntropyControl`` and ``GRPOLoopConfig`` read them.
ENTROPY_FIELDS = {
    "entropy_coef": 0.0,
    "use_adaptive_entropy": False,
    "entropy_coef_min": 0.0,
    "entropy_coef_max": 1.0,
    "entropy_coef_delta": 0.005,
    "entropy_target": 0.2,
}


# --- the rules --------------------------------------------------------------------------------------


def check_beta(beta: float) -> None:
    """β is the KL coefficient, a magnitude: >= 0 (0 turns the KL term off). The one rule of its range
    (``grpo_kit.config.declarations`` runs it on every path; ``compute_loss`` on every call)."""
    if beta < 0:
        raise ValueError(
            f"beta={beta} is negative; the KL coefficient must be >= 0 (0 disables the KL term)."
        )


def check_epsilons(
    *, epsilon: float = LossSettings.epsilon, epsilon_high: float | None = LossSettings.epsilon_high
) -> None:
    """The clip ranges are magnitudes: >= 0."""
    if epsilon < 0 or (epsilon_high is not None and epsilon_high < 0):
        raise ValueError(f"epsilon={epsilon} and epsilon_high={epsilon_high} must be >= 0.")


def warn_like_trl(loss_type: str, importance_sampling_level: str) -> None:
    """The combinations TRL 1.15 accepts with a warning (its advice text); the loss is still TRL's."""
    if loss_type == "luspo" and importance_sampling_level != "sequence":
        warnings.warn(TRL_LUSPO_ADVICE, UserWarning, stacklevel=3)
    if loss_type == "vespo" and importance_sampling_level != "token":
        warnings.warn(TRL_VESPO_ADVICE, UserWarning, stacklevel=3)


def check_loss_call(
    *,
    loss_type: str,
    importance_sampling_level: str = LossSettings.importance_sampling_level,
    beta: float = LossSettings.beta,
    epsilon: float = LossSettings.epsilon,
    epsilon_high: float | None = LossSettings.epsilon_high,
    delta: float | None = LossSettings.delta,
    max_completion_length: int | None = LossSettings.max_completion_length,
) -> None:
    """The rules ``compute_loss`` enforces on every call: known names, sane numbers; TRL's warnings."""
    if loss_type not in LOSS_TYPE_NAMES:
        raise ValueError(f"unknown loss_type={loss_type!r}; choose one of {sorted(LOSS_TYPE_NAMES)}.")
    if importance_sampling_level not in IMPORTANCE_SAMPLING_LEVELS:
        raise ValueError(
            f"unknown importance_sampling_level={importance_sampling_level!r}; use 'token' or 'sequence'."
        )
    warn_like_trl(loss_type, importance_sampling_level)
    check_beta(beta)
    check_epsilons(epsilon=epsilon, epsilon_high=epsilon_high)
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


#: The name ``compute_loss`` calls it by.
check_loss_options = check_loss_call


def check_cispo_cap(loss_type: str, epsilon: float, epsilon_high: float | None) -> None:
    """cispo's ``epsilon_high`` is an absolute cap on the IS weight; TRL falls back to ``epsilon`` (0.2) when
    it is unset, which scales every on-policy token down. ``compute_loss`` reproduces that trap (parity);
    a configuration refuses it."""
    if loss_type != "cispo":
        return
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


def warn_sequence_level_sums(loss_type: str, importance_sampling_level: str) -> None:
    """A token-summing loss at sequence level weights each sequence by its length (TRL computes it so)."""
    if importance_sampling_level == "sequence" and loss_type in ("bnpo", "dr_grpo", "dapo", "cispo"):
        warnings.warn(
            f"loss_type={loss_type!r} sums per-token terms, so with importance_sampling_level='sequence' each "
            "sequence is weighted by its length; use loss_type='grpo' for GSPO's per-sequence objective.",
            UserWarning,
            stacklevel=3,
        )
