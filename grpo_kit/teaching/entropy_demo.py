"""Entropy collapse in miniature, for lesson 5: GRPO on a one-prompt, six-answer policy, with and without a bonus.

The "model" is one softmax over ``V`` answer tokens (its logits are the only parameters); a completion is
``T`` tokens drawn from it; answer ``k`` is worth ``1 − k/(V−1)``, so the best answer is token 0 but the
second best is nearly as good. GRPO sharpens the policy towards token 0 step after step, and the per-token
entropy H (ln V = 1.79 nats at the start) falls towards 0: the policy stops exploring. The loss, the
advantages and the bonus are the library's own (``compute_advantages``, ``compute_loss(entropies=...,
entropy_coef=...)``, ``EntropyControl``), so ``entropy_coef`` and ``use_adaptive_entropy`` act here exactly
as in ``grpo_kit.loop.training`` and TRL. Simplifications: no language model, every token has the same entropy, Adam on
the logits, one group per step. A run takes well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from grpo_kit.core.advantages import compute_advantages
from grpo_kit.core.losses import compute_loss
from grpo_kit.core.losses.entropy import EntropyControl

__all__ = ["EntropyRun", "plot_entropy_runs", "toy_entropy_run"]


@dataclass
class EntropyRun:
    """What a toy run logged per optimizer step, under TRL's names."""

    label: str
    entropy: list[float] = field(default_factory=list)  # mean per-token entropy (nats), before the step
    entropy_coef: list[float] = field(default_factory=list)  # the coefficient applied in the step (0 if off)
    reward: list[float] = field(default_factory=list)


def toy_entropy_run(
    control: EntropyControl,
    *,
    label: str = "",
    steps: int = 40,
    num_generations: int = 8,
    tokens_per_completion: int = 4,
    vocab: int = 6,
    learning_rate: float = 0.1,
    seed: int = 0,
) -> EntropyRun:
    """GRPO steps on the toy policy; the same seed draws the same first completions whatever the bonus."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.zeros(vocab, requires_grad=True)  # (V,) uniform at the start: H = ln V
    optimizer = torch.optim.Adam([logits], lr=learning_rate)
    value = torch.linspace(1.0, 0.0, vocab)  # (V,) answer 0 best
    G, T = num_generations, tokens_per_completion
    mask = torch.ones(G, T, dtype=torch.long)  # (G, T) every token counts
    run = EntropyRun(label)
    for _ in range(steps):
        with torch.no_grad():
            probs = torch.softmax(logits, -1)
            tokens = torch.multinomial(probs, G * T, replacement=True, generator=generator).view(G, T)
        rewards = value[tokens].mean(1, keepdim=True)  # (G, 1) one reward function
        advantages = compute_advantages(rewards, G)  # (G,)
        log_probs = torch.log_softmax(logits, -1)  # (V,)
        entropy = -(log_probs.exp() * log_probs).sum()  # () H of the policy, with its graph
        entropies = entropy.expand(G, T)  # (G, T) the same at every position of this toy
        coef = control.applied_coef()
        loss, metrics = compute_loss(
            log_probs[tokens], advantages, mask, entropies=entropies, entropy_coef=coef
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        control.observe(entropies, mask)
        control.end_step()
        run.entropy.append(metrics["entropy"])
        run.entropy_coef.append(coef or 0.0)
        run.reward.append(rewards.mean().item())
    return run


def plot_entropy_runs(runs: list[EntropyRun], path: str | Path, *, target: float | None = None) -> Path:
    """Per-token entropy per step, one line per run (and the adaptive target, when given)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.5))
    for run in runs:
        ax.plot(range(1, len(run.entropy) + 1), run.entropy, label=run.label)
    if target is not None:
        ax.axhline(target, color="grey", linestyle=":", label=f"entropy_target = {target:g}")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("entropy (nats per token)")
    ax.set_title("Entropy collapse on a toy policy (grpo_kit.teaching.entropy_demo)")
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
