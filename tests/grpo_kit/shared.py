"""What several test files of tests/grpo_kit use, written once (imported like trl_harness: pytest puts this folder
on the path): GSM8K-style completions and their reward functions, a recording model loader, a tiny recipe and a
tiny loop config, each sized so a GRPO step on the tiny model takes about a second."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import rewards
from grpo_kit.rollout.generation import GeneratedCompletion

# --- GSM8K-style completions: the course's format, right and wrong, and plain text --------------------------
GOOD = "<reasoning>\n3 + 4 = 7\n</reasoning>\n<answer>\n7\n</answer>\n"
WRONG = "<reasoning>\n3 + 4 = 8\n</reasoning>\n<answer>\n8\n</answer>\n"
PLAIN = "The answer is 7"
GSM8K_FUNCS = [
    rewards.xmlcount_reward,
    rewards.soft_format_reward,
    rewards.strict_format_reward,
    rewards.int_reward,
    rewards.correctness_reward,
]


def gsm8k_rows(n: int) -> list[dict]:
    """``n`` conversational "What is 3 + 4?" rows with their gold answer."""
    return [
        {"prompt": [{"role": "user", "content": f"What is 3 + 4? (#{i})"}], "answer": "7"} for i in range(n)
    ]


def canned(greedy: list[str], samples: list[list[str]] | None = None, *, clipped: set[int] = frozenset()):
    """A sampler answering prompt i with greedy[i] (num_generations=1) or samples[i] (k > 1)."""

    def sampler(prompts, num_generations):
        source = [[g] for g in greedy] if num_generations == 1 else samples
        assert len(source) == len(prompts)
        return [
            [
                GeneratedCompletion(
                    t,
                    len(t.split()) + 1,
                    ended=(i not in clipped or num_generations > 1),
                    ids=list(range(len(t.split()) + 1)),
                )
                for t in group[:num_generations]
            ]
            for i, group in enumerate(source)
        ]

    return sampler


class RecordingLoader:
    """A real model loader (the tiny model) that records each call: ``calls`` holds ``(name, kwargs)``."""

    def __init__(self):
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, name, **kwargs):
        from grpo_kit.models import tiny_model

        self.calls.append((name, kwargs))
        return tiny_model(seed=0)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def tiny_recipe(name: str = "smoltldr-length-small", **overrides: Any):
    """``name`` with two prompts of four completions per step, 8 tokens each, the signal watch's stop off."""
    from grpo_kit.recipes.catalogue import get_recipe

    defaults = {
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 8,
        "save_steps": 1000,
        "eval_steps": None,  # trains through the paths directly, with no held-out evaluation to schedule
        # the tiny model's completions are all clipped: the signal watch would stop a run at its third step
        "stop_on_no_signal": False,
    }
    return get_recipe(name, **{**defaults, **overrides})


def tiny_loop_config(output_dir: str | Path, **overrides: Any):
    """A GRPOLoopConfig of 2 steps: two prompts of four completions, 8 tokens each, a checkpoint every step, the
    signal watch's stop off."""
    from grpo_kit.config.loop import GRPOLoopConfig

    values = {
        "output_dir": str(output_dir),
        "max_steps": 2,
        "num_generations": 4,
        "per_device_train_batch_size": 8,
        "max_completion_length": 8,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_steps": 1,
        "disable_tqdm": True,
        # the tiny model writes no EOS, so every completion is clipped: the signal watch would stop a run of more
        # than 3 steps that tests something else (test_signal_watch.py tests the watch)
        "stop_on_no_signal": False,
        **overrides,
    }
    return GRPOLoopConfig(**values)


def numbered_curriculum_rows(recipe) -> tuple[Any, list[list[int]], Any]:
    """A curriculum recipe's training rows with a ``row`` column (their index), the list a reward function
    fills with the rows of each generation batch, and that reward function (0 for everything): what the two
    paths' "trained in dataset order" tests read back."""
    from grpo_kit.runs.held_out import training_dataset

    dataset = training_dataset(recipe)
    dataset = dataset.add_column("row", list(range(len(dataset))))
    G = recipe.training["num_generations"]
    trained: list[list[int]] = []

    def record(completions, row, **kwargs):
        trained.append(row[::G])  # each prompt's column repeated for its G completions
        return [0.0] * len(completions)

    return dataset, trained, record


# --- statistics ------------------------------------------------------------------------------------------------
def two_sample_chi_square_p(a, b, *, min_bins: int = 4) -> float:
    """p-value of "binned counts ``a`` and ``b`` (K,) come from one distribution" (a 2 × K contingency table; torch tensors)."""
    import torch

    rows = torch.stack([a, b]).double()
    rows = rows[:, rows.sum(0) > 0]  # (2, K)
    expected = rows.sum(1, keepdim=True) * rows.sum(0, keepdim=True) / rows.sum()  # (2, K)
    assert rows.size(1) >= min_bins and expected.min() >= 5, (
        "too few or too thin bins for the test to mean anything"
    )
    statistic = ((rows - expected) ** 2 / expected).sum()
    dof = rows.size(1) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2.0), statistic / 2))  # chi-square survival


def mann_whitney_p(a, b) -> float:
    """Two-sided p-value of the Mann-Whitney U test that samples ``a`` and ``b`` (lists of numbers) come from one
    distribution: the normal approximation with the tie correction (fine from ~20 per side)."""
    import math

    pooled = sorted((v, side) for side, values in ((0, a), (1, b)) for v in values)
    ranks, ties, i = [0.0] * len(pooled), 0.0, 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1  # average rank of a run of ties
        t = j - i + 1
        ties += t**3 - t
        i = j + 1
    n1, n2 = len(a), len(b)
    u = sum(r for r, (_, side) in zip(ranks, pooled) if side == 0) - n1 * (n1 + 1) / 2
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    z = (u - n1 * n2 / 2) / math.sqrt(variance)
    return math.erfc(abs(z) / math.sqrt(2))


def two_proportion_p(k1: int, n1: int, k2: int, n2: int) -> float:
    """Two-sided p-value of the pooled two-proportion z-test that ``k1/n1`` and ``k2/n2`` share one rate."""
    import math

    pooled = (k1 + k2) / (n1 + n2)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    return 1.0 if se == 0 else math.erfc(abs(k1 / n1 - k2 / n2) / se / math.sqrt(2))
