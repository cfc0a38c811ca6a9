"""``LOSS_TYPES``: each of TRL's loss types as (per-token objective, normalisation), by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from grpo_kit.core.losses.policy import (
    PolicyInputs,
    PolicySettings,
    PolicyTerm,
    cispo_objective,
    clipped_surrogate,
    sapo_objective,
    vespo_objective,
)
from grpo_kit.core.losses.validation import LOSS_TYPE_NAMES


@dataclass(frozen=True)
class LossType:
    """A named GRPO loss: which per-token objective, which normalisation, which paper."""

    name: str
    objective: Callable[[PolicyInputs, PolicySettings], PolicyTerm]
    normalization: str  # a key of aggregation.NORMALIZATIONS
    paper: str
    summary: str
    # Importance-sampling levels the paper (and TRL) recommend; the other level only warns, as in TRL.
    levels: tuple[str, ...] = ("token", "sequence")

    @property
    def paper_link(self) -> str:
        """``paper`` as a Markdown link named by the paper (``[Dr. GRPO](https://…)``); as written without a URL."""
        title, _, url = self.paper.partition(", https://")
        return f"[{title}](https://{url})" if url else self.paper


LOSS_TYPES: dict[str, LossType] = {
    loss.name: loss
    for loss in (
        LossType(
            "grpo",
            clipped_surrogate,
            "sequence_mean",
            "DeepSeekMath, https://huggingface.co/papers/2402.03300",
            "clipped surrogate, mean over each sequence's tokens, then over sequences (length-biased)",
        ),
        LossType(
            "bnpo",
            clipped_surrogate,
            "token_mean",
            "TRL's batch-normalised GRPO (TRL cites no paper for it)",
            "clipped surrogate, mean over the micro-batch's tokens",
        ),
        LossType(
            "dr_grpo",
            clipped_surrogate,
            "fixed_length",
            "Dr. GRPO, https://huggingface.co/papers/2503.20783",
            "clipped surrogate, sum divided by batch size × max_completion_length",
        ),
        LossType(
            "dapo",
            clipped_surrogate,
            "global_token_mean",
            "DAPO, https://huggingface.co/papers/2503.14476",
            "clipped surrogate, mean over all tokens of the generation batch (TRL's default)",
        ),
        LossType(
            "cispo",
            cispo_objective,
            "global_token_mean",
            "MiniMax-M1, https://huggingface.co/papers/2506.13585",
            "REINFORCE with a capped, gradient-free importance weight; DAPO's normalisation",
        ),
        LossType(
            "sapo",
            sapo_objective,
            "sequence_mean",
            "SAPO, https://huggingface.co/papers/2511.20347",
            "sigmoid-gated ratio instead of a hard clip; GRPO's normalisation",
        ),
        LossType(
            "luspo",
            clipped_surrogate,
            "sequence_sum",
            "LUSPO, https://huggingface.co/papers/2602.05261",
            "GSPO's sequence-level clipped surrogate, each sequence weighted by its length",
            levels=("sequence",),
        ),
        LossType(
            "vespo",
            vespo_objective,
            "global_token_mean",
            "VESPO, https://huggingface.co/papers/2602.10693",
            "REINFORCE weighted by a Gamma function of the sequence ratio; DAPO's normalisation",
            levels=("token",),
        ),
    )
}
if tuple(LOSS_TYPES) != LOSS_TYPE_NAMES:  # one list of names: the rules' (validation.py) and this table agree
    raise ImportError(
        f"LOSS_TYPES {tuple(LOSS_TYPES)} differ from validation.LOSS_TYPE_NAMES {LOSS_TYPE_NAMES}"
    )
