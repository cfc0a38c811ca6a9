"""The KL penalty of GRPO: Schulman's k3 estimator, optionally importance-weighted.

GRPO keeps the policy near a frozen reference model with a per-token penalty ``β · KL``. The exact KL
needs the whole vocabulary; with only the sampled token's log-probabilities one uses the *k3* estimator
(J. Schulman, "Approximating KL divergence", http://joschu.net/blog/kl-approx.html; used by DeepSeekMath,
https://huggingface.co/papers/2402.03300, Eq. 4):

    KL_t ≈ exp(log π_ref − log π_θ) − (log π_ref − log π_θ) − 1      (≥ 0, unbiased for KL(π_θ‖π_ref))

The tokens were sampled from π_old, not π_θ. DeepSeek-V3.2 (https://huggingface.co/papers/2512.02556)
multiplies k3 by the importance ratio π_θ/π_old so its gradient is the unbiased reverse-KL gradient; TRL
does this by default (``use_bias_correction_kl=True``). The ratio is differentiable, so the correction
changes the gradient even on-policy where its value is exactly 1.
"""

from __future__ import annotations

import torch


def k3_kl(per_token_logps: torch.Tensor, ref_per_token_logps: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(π_θ‖π_ref); same shape as the inputs, ``(B, T)``."""
    log_ratio_ref = ref_per_token_logps - per_token_logps  # (B, T) log π_ref − log π_θ
    return torch.exp(log_ratio_ref) - log_ratio_ref - 1  # (B, T)


def bias_corrected_kl(per_token_kl: torch.Tensor, importance_weights: torch.Tensor) -> torch.Tensor:
    """k3 times the importance ratio π_θ/π_old: ``(B, T)`` times ``(B, T)`` (token level) or ``(B, 1)`` (sequence).

    At sequence level one ratio per sequence is broadcast onto every token's KL (TRL's behaviour; the
    unbiasedness argument only holds at token level).
    """
    return per_token_kl * importance_weights  # (B, T)
