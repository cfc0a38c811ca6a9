"""How much each token and each completion weighs in the gradient, per loss type (``grpo-kit losses``).

One group of completions of very different lengths, two rewarded and two not. For every loss type we call
``compute_loss`` and let autograd answer: the *effective weight* of token t of completion i is

    w_{i,t} = −∂ loss / ∂ log π_θ(o_{i,t})

(positive: the update raises that token's probability). Summed over a completion's tokens it is the
weight of the whole completion. At the on-policy point (ratio 1, where every step of a
``num_iterations=1`` run sits) the weights are

    grpo, sapo                 w_{i,t} = A_i / (B · L_i)     a short completion's tokens weigh more:
                                                             every completion gets the same total, whatever its length
    bnpo, dapo, cispo, vespo   w_{i,t} = A_i / Σ_j L_j       every token equal, a completion weighs ∝ L_i
    dr_grpo                    w_{i,t} = A_i / (B · L_max)   every token equal, a completion weighs ∝ L_i
    luspo (sequence level)     w_{i,t} = A_i / B             every token equal, a completion weighs ∝ L_i

So with ``grpo`` a wrong *long* answer is punished less per token than a wrong short one, and a right short
answer is rewarded more per token than a right long one – the length bias Dr. GRPO
(https://huggingface.co/papers/2503.20783) and DAPO (https://huggingface.co/papers/2503.14476) remove.
Off-policy (``num_iterations > 1``) the clip/cap/gate of each objective comes on top of this.

    python -m grpo_kit.teaching.loss_demo --out loss_weights.png
    grpo-kit losses --lengths 4 32 16 128 --rewards 1 0 1 0
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from grpo_kit.core.advantages import compute_advantages, stack_rewards
from grpo_kit.core.losses import LOSS_TYPES, compute_loss

DEFAULT_LENGTHS = (8, 64, 8, 64)
DEFAULT_REWARDS = (1.0, 1.0, 0.0, 0.0)
# cispo's ε_max: above every on-policy ratio, so cispo shows its normalisation, not TRL's 0.2 trap.
CISPO_EPSILON_HIGH = 5.0


@dataclass(frozen=True)
class LossWeights:
    """The gradient weights one loss type gives the demo batch."""

    loss_type: str
    token_weights: torch.Tensor  # (B, T) −∂loss/∂logp, 0 on padding
    per_token: torch.Tensor  # (B,) weight of one token of each completion (equal within a completion here)
    per_sequence: torch.Tensor  # (B,) sum over the completion's tokens

    @property
    def short_to_long_token_ratio(self) -> float:
        """|per-token weight| of the shortest completion ÷ that of the longest: 1 means no length bias."""
        lengths = (self.token_weights != 0).sum(-1)  # (B,)
        return (self.per_token[lengths.argmin()].abs() / self.per_token[lengths.argmax()].abs()).item()


def demo_batch(lengths: Sequence[int] = DEFAULT_LENGTHS, rewards: Sequence[float] = DEFAULT_REWARDS):
    """Right-padded mask ``(B, T)``, advantages ``(B,)`` of one group, random on-policy log-probs ``(B, T)``."""
    if len(lengths) != len(rewards) or len(lengths) < 2:
        raise ValueError("give one reward per completion and at least two completions (one GRPO group).")
    if min(lengths) < 1:
        raise ValueError("every completion needs at least one token (lengths >= 1).")
    max_length = max(lengths)
    mask = (torch.arange(max_length).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()  # (B, T)
    advantages = compute_advantages(
        stack_rewards([list(rewards)]).double(), num_generations=len(lengths)
    )  # (B,)
    per_token_logps = (
        -torch.rand(len(lengths), max_length, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        * 3
    )  # (B, T) any values: on-policy the ratio is 1
    return per_token_logps, advantages, mask


def on_policy_loss(
    loss_type: str, per_token_logps: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """``compute_loss`` of one loss type on the demo batch, on-policy, with the importance-sampling level the loss
    type is meant for (and cispo's ε_max above every on-policy ratio): the loss :func:`loss_weights` differentiates,
    the value a run logs."""
    loss, _ = compute_loss(
        per_token_logps,
        advantages,
        mask,
        loss_type=loss_type,
        importance_sampling_level=LOSS_TYPES[loss_type].levels[0],
        max_completion_length=mask.size(1),
        epsilon_high=CISPO_EPSILON_HIGH if loss_type == "cispo" else None,
    )
    return loss


def loss_weights(
    loss_type: str, per_token_logps: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor
) -> LossWeights:
    """−∂loss/∂logp for one loss type, on-policy, with the level the loss type is meant for."""
    leaf = per_token_logps.detach().clone().requires_grad_(True)  # (B, T)
    loss = on_policy_loss(loss_type, leaf, advantages, mask)
    (grad,) = torch.autograd.grad(loss, leaf)
    weights = -grad * mask  # (B, T)
    per_sequence = weights.sum(-1)  # (B,)
    per_token = per_sequence / mask.sum(-1).clamp(min=1)  # (B,)
    return LossWeights(loss_type, weights, per_token, per_sequence)


def _one_token_rows_loss(logps: torch.Tensor, advantage: float, **loss_settings):
    """``compute_loss`` on one completion of one token per row of ``logps`` ``(R, 1)``, old log-prob 0 (so
    log π_θ = log ρ), every row with ``advantage``; normalised over the R tokens (``num_items_in_batch``)."""
    return compute_loss(
        logps,
        torch.full((logps.size(0),), advantage),  # (R,)
        torch.ones_like(logps, dtype=torch.long),  # (R, 1) completion mask
        old_per_token_logps=torch.zeros_like(logps),  # (R, 1): log π_old = 0
        max_completion_length=1,
        num_items_in_batch=logps.size(0),
        **loss_settings,
    )


def ratio_sweep(ratios: torch.Tensor, advantage: float, **loss_settings) -> tuple[torch.Tensor, dict]:
    """How hard a loss pushes a token, across probability ratios: one one-token completion per ratio
    ρ = π_θ/π_old in ``ratios`` ``(R,)``, all with ``advantage``, through ``compute_loss(**loss_settings)``.
    Returns −∂loss/∂log π_θ of each row on its own (the batch's 1/R undone) ``(R,)`` and the loss's metrics
    (``clip_ratio/…``). Divided by ``ratios`` it is ∂objective/∂ρ: the slope of the clipped (or gated) objective."""
    logps = torch.log(ratios).unsqueeze(1).clone().requires_grad_(True)  # (R, 1)
    loss, metrics = _one_token_rows_loss(logps, advantage, **loss_settings)
    loss.backward()
    return (-logps.grad.squeeze(1) * len(ratios)).detach(), metrics


def ratio_objective(ratios: torch.Tensor, advantage: float, **loss_settings) -> torch.Tensor:
    """The objective at each ratio in ``ratios`` ``(R,)`` on its own: minus the loss of a one-token batch whose
    token has that ratio and ``advantage`` (see :func:`ratio_sweep`)."""
    with torch.no_grad():
        return torch.tensor(
            [
                -_one_token_rows_loss(torch.log(r).view(1, 1), advantage, **loss_settings)[0].item()
                for r in ratios
            ]
        )  # (R,)


def all_loss_weights(
    lengths: Sequence[int] = DEFAULT_LENGTHS,
    rewards: Sequence[float] = DEFAULT_REWARDS,
    loss_types: Sequence[str] | None = None,
) -> tuple[list[LossWeights], torch.Tensor, torch.Tensor]:
    """Weights for each loss type, plus the advantages ``(B,)`` and mask ``(B, T)`` they were computed for."""
    per_token_logps, advantages, mask = demo_batch(lengths, rewards)
    names = list(LOSS_TYPES) if loss_types is None else list(loss_types)
    unknown = [name for name in names if name not in LOSS_TYPES]
    if unknown:
        raise ValueError(f"unknown loss types {unknown}; choose from {sorted(LOSS_TYPES)}.")
    return [loss_weights(name, per_token_logps, advantages, mask) for name in names], advantages, mask


def weights_table(results: Sequence[LossWeights], advantages: torch.Tensor, mask: torch.Tensor):
    """A rich Table: per loss type and completion, the relative weight of one token and the completion's share.

    Token weights are shown relative to the batch's mean |token weight| (the loss type's overall scale,
    which the learning rate absorbs, is its own column), so the length bias reads directly.
    """
    from rich.table import Table

    lengths = mask.sum(-1).tolist()
    table = Table(title="Gradient weight per token and per completion, on-policy")
    table.add_column("loss type", style="bold")
    for length, advantage in zip(lengths, advantages.tolist()):
        table.add_column(f"L={length}\nA={advantage:+.2f}", justify="right")
    table.add_column("short÷\nlong", justify="right")
    for result in results:
        mean_token = (result.token_weights.abs().sum() / mask.sum()).item()
        total = result.per_sequence.abs().sum().item()
        cells = [
            f"{token / mean_token:+.2f} {abs(sequence) / total:>4.0%}"
            for token, sequence in zip(result.per_token.tolist(), result.per_sequence.tolist())
        ]
        ratio = result.short_to_long_token_ratio
        style = "red" if abs(ratio - 1) > 1e-6 else "green"
        table.add_row(result.loss_type, *cells, f"[{style}]{ratio:.1f}×[/{style}]")
    table.caption = (
        "Per cell: one token's weight w = −∂loss/∂log π ÷ the batch's mean |w|, then the completion's share "
        "of Σ|w|. short÷long: |w| of a token of the shortest ÷ longest completion. Red = length bias "
        "(grpo, sapo); green = every token weighs the same, so long completions get more of the gradient."
    )
    return table


def plot_weights(
    results: Sequence[LossWeights], advantages: torch.Tensor, mask: torch.Tensor, out: str | Path
) -> Path:
    """Two panels as PNG: per-token weight (relative to the batch's mean |token weight|) and each
    completion's share of the total |gradient weight|."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lengths = mask.sum(-1).tolist()
    labels = [f"L={length}, A={adv:+.2f}" for length, adv in zip(lengths, advantages.tolist())]
    figure = Figure(figsize=(12, 4.8))
    FigureCanvasAgg(figure)
    token_axis, sequence_axis = figure.subplots(1, 2)
    width = 0.8 / len(labels)
    positions = torch.arange(len(results), dtype=torch.float64)
    for index, label in enumerate(labels):
        offsets = (positions + (index - (len(labels) - 1) / 2) * width).tolist()
        token_values = []
        share_values = []
        for result in results:
            mean_token = (result.token_weights.abs().sum() / mask.sum()).item()
            token_values.append(result.per_token[index].item() / mean_token)
            share_values.append(
                result.per_sequence[index].abs().item() / result.per_sequence.abs().sum().item()
            )
        token_axis.bar(offsets, token_values, width, label=label)
        sequence_axis.bar(offsets, share_values, width, label=label)
    names = [result.loss_type for result in results]
    token_axis.set_title("weight of one token (÷ mean |token weight| of the batch)")
    token_axis.axhline(0, color="black", linewidth=0.8)
    sequence_axis.set_title("share of the gradient per completion (|Σ token weights|)")
    for axis in (token_axis, sequence_axis):
        axis.set_xticks(positions.tolist(), names, rotation=30)
        axis.grid(axis="y", alpha=0.3)
    handles, legend_labels = token_axis.get_legend_handles_labels()
    figure.legend(handles, legend_labels, loc="lower center", ncol=len(labels), fontsize="small")
    figure.suptitle("GRPO loss types: how completion length changes each token's gradient weight (on-policy)")
    figure.tight_layout(rect=(0, 0.06, 1, 1))  # leave room for the legend below the panels
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grpo-kit losses",
        description="Show the gradient weight each token and each completion gets under every GRPO loss type.",
    )
    parser.add_argument(
        "--lengths",
        type=int,
        nargs="+",
        default=list(DEFAULT_LENGTHS),
        help="completion lengths in tokens, one group (default: 8 64 8 64)",
    )
    parser.add_argument(
        "--rewards",
        type=float,
        nargs="+",
        default=list(DEFAULT_REWARDS),
        help="one reward per completion (default: 1 1 0 0)",
    )
    parser.add_argument(
        "--loss-types",
        nargs="+",
        choices=sorted(LOSS_TYPES),
        default=None,
        help="loss types to show (default: all)",
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the plot to this PNG file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; with ``--out`` also save the plot. Returns the exit status."""
    from rich.console import Console

    args = build_parser().parse_args(argv)
    try:
        results, advantages, mask = all_loss_weights(args.lengths, args.rewards, args.loss_types)
    except ValueError as error:
        build_parser().error(str(error))
    console = Console()
    console.print(weights_table(results, advantages, mask))
    if args.out is not None:
        console.print(f"plot written to {plot_weights(results, advantages, mask, args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
