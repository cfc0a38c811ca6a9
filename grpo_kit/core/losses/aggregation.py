"""One function that turns per-token losses into the scalar loss: the five normalisations of GRPO.

How the per-token losses are averaged decides how much each *token* and each *sequence* weighs in the
gradient – the whole difference between ``grpo``, ``bnpo``, ``dr_grpo`` and ``dapo`` (they share one
per-token objective). With ``m`` the completion mask, ``L_i`` the length of completion ``i`` and ``B`` the
micro-batch size:

    "sequence_mean"      (1/B) Σ_i (1/L_i) Σ_t m·ℓ         grpo, sapo. A token of a short completion weighs
                                                           more than one of a long completion: length bias
                                                           (Dr. GRPO, https://huggingface.co/papers/2503.20783).
    "token_mean"         Σ m·ℓ / Σ m                        bnpo: every token of the micro-batch equal.
    "fixed_length"       Σ m·ℓ / (B · max_completion_length) dr_grpo: a constant, so every token equal.
    "global_token_mean"  Σ m·ℓ / (N_gen · GA / S)            dapo, cispo, vespo: every token of the whole
                                                           generation batch equal (DAPO,
                                                           https://huggingface.co/papers/2503.14476).
    "sequence_sum"       (1/B) Σ_i Σ_t m·ℓ                  luspo: each sequence weighted by its length.

Gradient accumulation over ``GA`` micro-batches: TRL turns off the HF Trainer's own loss scaling, so every
normalisation except ``global_token_mean`` divides by ``GA`` itself. ``global_token_mean`` divides by
``N_gen`` – the active tokens of the *whole generation batch* (``num_items_in_batch``), which spans
``S = steps_per_generation`` micro-batches – rescaled by ``GA / S`` to one accumulation window.
"""

from __future__ import annotations

import torch

NORMALIZATIONS = ("sequence_mean", "token_mean", "fixed_length", "global_token_mean", "sequence_sum")


def aggregate_loss(
    per_token_loss: torch.Tensor,
    mask: torch.Tensor,
    normalization: str,
    *,
    gradient_accumulation_steps: int = 1,
    max_completion_length: int | None = None,
    num_items_in_batch: torch.Tensor | None = None,
    steps_per_generation: int | None = None,
) -> torch.Tensor:
    """The scalar loss of one micro-batch from ``per_token_loss`` ``(B, T)`` (or ``(B, 1)``) and ``mask`` ``(B, T)``.

    The arithmetic follows TRL's order of operations so values agree to the last bit.
    """
    if normalization == "sequence_mean":
        per_sequence = (per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # (B,)
        return per_sequence.mean() / gradient_accumulation_steps
    if normalization == "token_mean":
        return (per_token_loss * mask).sum() / mask.sum().clamp(min=1.0) / gradient_accumulation_steps
    if normalization == "fixed_length":
        if max_completion_length is None:
            raise ValueError("the 'fixed_length' normalisation (dr_grpo) needs max_completion_length.")
        batch_size = per_token_loss.size(0)
        return (
            (per_token_loss * mask).sum() / (batch_size * max_completion_length) / gradient_accumulation_steps
        )
    if normalization == "global_token_mean":
        if num_items_in_batch is None:
            num_items_in_batch = mask.sum()
        steps = gradient_accumulation_steps if steps_per_generation is None else steps_per_generation
        normalizer = num_items_in_batch.clamp(min=1.0) * gradient_accumulation_steps / steps
        return (per_token_loss * mask).sum() / normalizer
    if normalization == "sequence_sum":
        # (B, 1) sequence-level losses are broadcast onto the mask first: sequence i counts L_i times.
        return (per_token_loss * mask).sum(-1).mean() / gradient_accumulation_steps
    raise ValueError(f"unknown normalization {normalization!r}; use one of {list(NORMALIZATIONS)}.")
