"""The averages TRL logs next to the loss, with TRL's exact definitions (quirks included).

Two kinds of means, as in ``GRPOTrainer._compute_loss`` (one process, so no all-reduce):

* ``global_masked_mean`` – over every completion token of the micro-batch. A ``(B, 1)`` tensor (one value
  per sequence, the sequence-level case) is averaged over all ``B`` rows *including fully masked ones*.
  TRL decides this from the shape, so a token-level tensor with ``T == 1`` is treated the same way.
* ``masked_seq_mean`` – one mean per sequence; a fully masked row gives NaN, which ``nanmin``/``nanmax``
  skip when TRL reduces it to ``clip_ratio/low_min`` and ``clip_ratio/high_max``.
"""

from __future__ import annotations

import torch


def global_masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean of ``values`` (B, T) over the mask's tokens, or of ``values`` (B, 1) over all rows."""
    if values.shape[1] == 1:  # one value per sequence: every row counts, masked or not (TRL)
        total, count = values.sum(), torch.tensor(float(values.shape[0]), device=values.device)
    else:
        total, count = (values * mask).sum(), mask.sum().float()
    return (total / count.clamp(min=1.0)).item()


def masked_seq_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Per-sequence mean ``(B,)`` over the mask's tokens; NaN for a fully masked row."""
    if values.shape[1] == 1:
        return values.squeeze(1)  # (B,)
    return (values * mask).sum(-1) / mask.sum(-1)  # (B,)


def nanmin(values: torch.Tensor) -> float:
    """Minimum ignoring NaN; NaN when everything is NaN (``trl.trainer.utils.nanmin``)."""
    kept = values[~torch.isnan(values)]
    return float("nan") if kept.numel() == 0 else kept.min().item()


def nanmax(values: torch.Tensor) -> float:
    """Maximum ignoring NaN; NaN when everything is NaN (``trl.trainer.utils.nanmax``)."""
    kept = values[~torch.isnan(values)]
    return float("nan") if kept.numel() == 0 else kept.max().item()
