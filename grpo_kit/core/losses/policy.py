"""The per-token policy objectives behind GRPO's eight loss types.

Every GRPO loss starts from the *importance ratio* between the policy being trained and the policy that
sampled the completions,

    r_t(θ) = π_θ(o_t | q, o_<t) / π_old(o_t | q, o_<t) = exp(log π_θ − log π_old),

taken per token (``importance_sampling_level="token"``) or once per sequence as the exponential of the
*mean* token log-ratio (``"sequence"``, GSPO, https://huggingface.co/papers/2507.18071). With one
gradient step per generation (``num_iterations=1``) π_old = π_θ.detach(): the ratio's value is 1 but its
gradient is ∇log π_θ, which is what makes the surrogate a policy gradient.

The eight loss types are four per-token objectives × five ways to average them (``aggregation.py``):

    clipped_surrogate  grpo, bnpo, dr_grpo, dapo, luspo   (PPO's clip, https://huggingface.co/papers/1707.06347)
    cispo_objective    cispo                              (MiniMax-M1, https://huggingface.co/papers/2506.13585)
    sapo_objective     sapo                               (SAPO, https://huggingface.co/papers/2511.20347)
    vespo_objective    vespo                              (VESPO, https://huggingface.co/papers/2602.10693)

Each function returns the per-token loss (``(B, T)``, or ``(B, 1)`` when a sequence-level ratio does not
touch the per-token log-probs) and TRL's metrics for it. Shapes: ``B`` completions, ``T`` completion tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from grpo_kit.core.losses.metrics import global_masked_mean, masked_seq_mean, nanmax, nanmin
from grpo_kit.core.losses.validation import LossSettings


@dataclass(frozen=True)
class PolicyInputs:
    """The tensors every objective may read."""

    per_token_logps: torch.Tensor  # (B, T) log π_θ, carries the gradient
    log_ratio: torch.Tensor  # (B, T) log π_θ − log π_old
    importance_weights: torch.Tensor  # (B, T) token level or (B, 1) sequence level: r(θ), "coef_1" in TRL
    advantages: torch.Tensor  # (B, 1)
    mask: torch.Tensor  # (B, T) long, 1 for completion tokens that count (TRL: an integer mask)


@dataclass(frozen=True)
class PolicySettings:
    """The hyper-parameters of the objectives, TRL's fallbacks resolved. No defaults of its own: build it from
    a :class:`LossSettings` (``PolicySettings.from_loss_settings``), where the defaults live."""

    epsilon_low: float
    epsilon_high: float  # TRL: epsilon_high if set, else epsilon
    delta: float | None
    sapo_temperature_pos: float
    sapo_temperature_neg: float
    vespo_k_pos: float
    vespo_lambda_pos: float
    vespo_k_neg: float
    vespo_lambda_neg: float

    @classmethod
    def from_loss_settings(cls, settings: LossSettings) -> PolicySettings:
        """The objectives' view of ``settings``: ``epsilon_high=None`` falls back to ``epsilon``, as in TRL."""
        return cls(
            epsilon_low=settings.epsilon,
            epsilon_high=settings.epsilon if settings.epsilon_high is None else settings.epsilon_high,
            delta=settings.delta,
            sapo_temperature_pos=settings.sapo_temperature_pos,
            sapo_temperature_neg=settings.sapo_temperature_neg,
            vespo_k_pos=settings.vespo_k_pos,
            vespo_lambda_pos=settings.vespo_lambda_pos,
            vespo_k_neg=settings.vespo_k_neg,
            vespo_lambda_neg=settings.vespo_lambda_neg,
        )


@dataclass(frozen=True)
class PolicyTerm:
    per_token_loss: torch.Tensor  # (B, T) or (B, 1)
    metrics: dict[str, float] = field(default_factory=dict)


def importance_log_weights(log_ratio: torch.Tensor, mask: torch.Tensor, level: str) -> torch.Tensor:
    """log r: the token log-ratios ``(B, T)``, or their masked mean per sequence ``(B, 1)`` (GSPO).

    A fully masked sequence gets log-weight 0 (ratio 1): the mean divides by ``max(length, 1)``.
    """
    if level == "token":
        return log_ratio  # (B, T)
    sequence_mean = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # (B,)
    return sequence_mean.unsqueeze(-1)  # (B, 1)


def clipped_surrogate(x: PolicyInputs, s: PolicySettings) -> PolicyTerm:
    """PPO's clipped surrogate, as in GRPO (DeepSeekMath, https://huggingface.co/papers/2402.03300, Eq. 3):

        L_t = −min( r_t · A,  clip(r_t, 1 − ε_low, 1 + ε_high) · A )

    ``ε_high > ε_low`` is DAPO's "clip-higher" (https://huggingface.co/papers/2503.14476). With ``delta``
    set, r_t is also capped at δ in the unclipped branch (two-sided clipping, INTELLECT-2,
    https://huggingface.co/papers/2505.07291), so a negative advantage cannot push a huge ratio further.

    Metrics (TRL's): ``clip_ratio/low_mean`` – share of tokens whose ratio fell below 1 − ε_low with A < 0
    (the clip is active: no gradient); ``clip_ratio/high_mean`` – ratio above 1 + ε_high with A > 0;
    ``clip_ratio/region_mean`` – either; ``clip_ratio/low_min`` / ``clip_ratio/high_max`` – the smallest /
    largest per-sequence share. TRL quirk kept for parity: the metrics look at r_t *after* the δ cap,
    so with δ ≤ 1 + ε_high ``high`` clipping is never reported.
    """
    ratio = x.importance_weights  # (B, T) or (B, 1)
    clipped_ratio = torch.clamp(ratio, 1 - s.epsilon_low, 1 + s.epsilon_high)  # (B, T) or (B, 1)
    if s.delta is not None:
        ratio = torch.clamp(ratio, max=s.delta)
    per_token_loss = -torch.min(ratio * x.advantages, clipped_ratio * x.advantages)  # (B, T) or (B, 1)

    is_low_clipped = (ratio < 1 - s.epsilon_low) & (x.advantages < 0)  # (B, T) or (B, 1)
    is_high_clipped = (ratio > 1 + s.epsilon_high) & (x.advantages > 0)
    is_region_clipped = is_low_clipped | is_high_clipped
    metrics = {
        "clip_ratio/low_mean": global_masked_mean(is_low_clipped.float(), x.mask),
        "clip_ratio/high_mean": global_masked_mean(is_high_clipped.float(), x.mask),
        "clip_ratio/region_mean": global_masked_mean(is_region_clipped.float(), x.mask),
        "clip_ratio/low_min": nanmin(masked_seq_mean(is_low_clipped.float(), x.mask)),
        "clip_ratio/high_max": nanmax(masked_seq_mean(is_high_clipped.float(), x.mask)),
    }
    return PolicyTerm(per_token_loss, metrics)


def cispo_objective(x: PolicyInputs, s: PolicySettings) -> PolicyTerm:
    """CISPO: clip the importance *weight*, not the update (MiniMax-M1, https://huggingface.co/papers/2506.13585):

        L_t = −sg(min(r_t, ε_max)) · A · log π_θ(o_t)

    ``sg`` stops the gradient, so every token keeps a REINFORCE gradient A·∇log π scaled by the capped
    ratio: unlike PPO's clip, no token is silenced. ε_max is ``epsilon_high`` and is an *absolute* cap
    (ScaleRL recommends 5.0, https://huggingface.co/papers/2510.13786).

    TRL traps kept for parity: ``epsilon_high=None`` falls back to ``epsilon`` (0.2), so every on-policy
    token (r = 1) is capped at 0.2 – ``validation.check_cispo_cap`` rejects that configuration. The metric
    ``cispo_clip_ratio`` counts capped tokens only where A > 0, although the cap applies to all tokens.
    """
    capped_ratio = torch.clamp(x.importance_weights, max=s.epsilon_high).detach()  # (B, T) or (B, 1)
    per_token_loss = -capped_ratio * x.advantages * x.per_token_logps  # (B, T)
    is_capped = (x.importance_weights > s.epsilon_high) & (x.advantages > 0)  # (B, T) or (B, 1)
    return PolicyTerm(per_token_loss, {"cispo_clip_ratio": global_masked_mean(is_capped.float(), x.mask)})


def sapo_objective(x: PolicyInputs, s: PolicySettings) -> PolicyTerm:
    """SAPO: a soft, temperature-controlled gate instead of a hard clip (https://huggingface.co/papers/2511.20347):

        L_t = −(4/τ) · σ(τ · (r_t − 1)) · A,     τ = τ_pos if A > 0 else τ_neg

    At r = 1 the gate's slope is 4·σ(0)·(1 − σ(0)) = 1, so on-policy it is the plain policy gradient; far
    off-policy the sigmoid flattens and the gradient fades smoothly. τ_neg > τ_pos makes negative
    advantages fade faster. No metrics (TRL logs none for SAPO).
    """
    # torch.where with Python floats gives the default dtype (float32), exactly as TRL does.
    temperatures = torch.where(x.advantages > 0, s.sapo_temperature_pos, s.sapo_temperature_neg)  # (B, 1)
    soft_ratio = (
        torch.sigmoid(temperatures * (x.importance_weights - 1)) * 4 / temperatures
    )  # (B, T) or (B, 1)
    return PolicyTerm(-soft_ratio * x.advantages)


@torch.no_grad()
def vespo_gamma_weights(x: PolicyInputs, s: PolicySettings) -> torch.Tensor:
    """VESPO's per-sequence weight φ(w) = e^λ · w^k · e^(−λw) ``(B, 1)``, with φ(1) = 1; no gradient.

    ``w`` is the *sequence* importance ratio exp(Σ_t log r_t) (a sum, not GSPO's mean). k and λ depend on
    the sign of A (A ≥ 0 uses the ``pos`` pair). Computed in log space with TRL's clamps (log w in
    [log 1e-8, 20]); non-finite φ becomes 0.
    """
    lower_clamp = math.log(1e-8)
    log_ratio = torch.clamp(x.log_ratio, -20.0, 20.0)  # (B, T)
    sequence_log_ratio = torch.sum(log_ratio * x.mask, dim=-1, keepdim=True)  # (B, 1)
    log_w = torch.clamp(sequence_log_ratio, lower_clamp, 20.0)  # (B, 1)
    w = torch.exp(log_w)  # (B, 1)
    is_nonnegative = x.advantages >= 0  # (B, 1)
    k = torch.where(is_nonnegative, s.vespo_k_pos, s.vespo_k_neg)  # (B, 1) float32, as in TRL
    lam = torch.where(is_nonnegative, s.vespo_lambda_pos, s.vespo_lambda_neg).clamp(min=1e-4)  # (B, 1)
    log_phi = lam + k * log_w - lam * w  # (B, 1)
    return torch.exp(log_phi).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)  # (B, 1)


def vespo_objective(x: PolicyInputs, s: PolicySettings) -> PolicyTerm:
    """VESPO: a smooth Gamma-shaped weight on sequence-level ratios (https://huggingface.co/papers/2602.10693):

        L_t = −sg(φ(w)) · A · log π_θ(o_t),    φ(w) = e^λ · w^k · e^(−λw)

    φ peaks at w = k/λ and vanishes for w → 0 and w → ∞, down-weighting stale sequences without a hard
    cut. It ignores ``importance_sampling_level`` (only the KL bias correction reads it; "sequence" warns, as in TRL).
    Metric ``vespo/phi_seq_mean``: mean φ over all sequences, fully masked ones (φ = 1) included (TRL).
    """
    phi = vespo_gamma_weights(x, s)  # (B, 1)
    per_token_loss = -phi * x.advantages * x.per_token_logps  # (B, T)
    return PolicyTerm(per_token_loss, {"vespo/phi_seq_mean": global_masked_mean(phi, x.mask)})
