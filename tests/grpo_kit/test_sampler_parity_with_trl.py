"""Whole completions, the loop's sampler against TRL's, on the embedded model under the main job's settings.

``test_step_parity.py`` replays the loop's completions into TRL, so how completions are drawn is outside it;
``test_sampling.py`` compares the first token on the tiny model. Here each trainer draws with its own code:
- the loop: ``grpo_kit.loop.training._sample`` (one prefill per prompt, LoRA merged, inverse-CDF sampling);
- TRL: ``GRPOTrainer._generate`` of the trainer the TRL path builds (``generate`` with the model in training mode,
  TRL's GenerationConfig and stop ids).

Both draw G = 8 completions for each of 16 prompts of ``smoltldr-length-small`` (max 64 tokens, temperature 1,
no top-k/top-p), from the same model: SmolLM2-135M with the recipe's LoRA, its B matrices set to small random
values so that the merged and the unmerged adapter are both exercised. Compared, two-sided, each at level 0.01:
- the length distribution (tokens up to and including EOS), Mann-Whitney U;
- the EOS rate (completions that stop before 64 tokens), two-proportion z-test;
- the token at positions 1, 2 and 3 (or "ended"), a chi-square test on the tokens seen 10+ times in both samples
  together, the rest pooled.

Power. With 128 completions a side (lengths: SD ~20 tokens) the length test detects a shift of 0.4 standard
deviations (~8 tokens) with probability ~0.7 at level 0.01; the EOS test, a rate of 0.75 against 0.55 with ~0.8.
The second test shows it on a real difference: the loop's sampler at temperature 0.7 against TRL's at 1.0 is
rejected (by the first token's test: p = 0.0004 on this machine, while length and EOS rate do not tell the two
apart). Measured on the same draws, the loop against TRL: 39.3 and 36.9 tokens on average, EOS 75.8 % and
78.1 %, every p above 0.07.

The main job trains with ``lora_dropout=0``: TRL sampling in training mode and the loop sampling with the adapter
merged draw from the same distribution, so there is no dropout mode to compare.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter

import pytest
import torch
from shared import mann_whitney_p, two_proportion_p, two_sample_chi_square_p

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900), pytest.mark.xdist_group("embedded_sampling")]

PROMPTS, G, LEVEL = 16, 8, 0.01


@pytest.fixture(scope="module")
def both_samplers():
    """The main job's model (its LoRA B random, small), 16 training prompts, and a function per trainer that draws
    G completions of each prompt: ``draw(side, **overrides) -> list of completion id lists``."""
    from grpo_kit import runs
    from grpo_kit.core.sampling import stop_token_ids
    from grpo_kit.loop import training as loop
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.trainers import trl_path

    recipe = get_recipe("smoltldr-length-small", seed=42)
    assert recipe.lora.lora_dropout == 0  # the module docstring's last paragraph rests on it
    model, tokenizer = runs.load_recipe_model(recipe)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=generator) * 0.01)
    dataset = recipe.load_dataset()
    rows = [dict(dataset[i]) for i in range(PROMPTS)]
    trainer = trl_path.build_trainer(
        recipe,
        model=model,
        tokenizer=tokenizer,
        train_dataset=dataset,
        reward_funcs=recipe.build_reward_funcs(tokenizer),
        output_dir="unused",
        save_strategy="no",
        report_to="none",
        eval_steps=None,
    )
    trainer.model.train()  # as TRL samples during training
    eos = stop_token_ids(model, tokenizer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        config = runs.to_loop_config(recipe, output_dir="unused", save_steps=0, num_generations=G)

    drawn_before: dict[tuple, list[list[int]]] = {}

    def draw(side: str, seed: int, **overrides) -> list[list[int]]:
        key = (side, seed, *sorted(overrides.items()))
        if key not in drawn_before:
            drawn_before[key] = _draw(side, seed, **overrides)
        return drawn_before[key]

    def _draw(side: str, seed: int, **overrides) -> list[list[int]]:
        torch.manual_seed(seed)
        drawn = []
        for i in range(0, PROMPTS, 2):  # the main job's 2 prompts per step
            if side == "loop":
                samples = loop._sample(
                    model, tokenizer, rows[i : i + 2], dataclasses.replace(config, **overrides), eos
                )
                drawn += [ids[: int(n)].tolist() for ids, n in zip(samples.completion_ids, samples.lengths)]
            else:
                prompts = [row["prompt"] for row in rows[i : i + 2] for _ in range(G)]
                drawn += [list(ids) for ids in trainer._generate(prompts)[1]]
        return drawn

    return draw, eos, recipe.training["max_completion_length"]


def _positions(completions: list[list[int]], k: int) -> list[object]:
    return [ids[k - 1] if len(ids) >= k else "ended" for ids in completions]


def _binned(a: list[object], b: list[object], min_count: int = 10) -> tuple[torch.Tensor, torch.Tensor]:
    """Counts (K,) of ``a`` and ``b`` over the values seen ``min_count``+ times in both together, plus one bin for the
    rest (chosen from the pooled sample, the same for both sides)."""
    pooled = Counter(a) + Counter(b)
    kept = sorted((v for v, n in pooled.items() if n >= min_count), key=str)
    index = {v: i for i, v in enumerate(kept)}

    def counts(values):
        return torch.bincount(
            torch.tensor([index.get(v, len(kept)) for v in values]), minlength=len(kept) + 1
        )

    return counts(a), counts(b)


def _differences(
    ours: list[list[int]], theirs: list[list[int]], eos: list[int], limit: int
) -> dict[str, float]:
    """The p-value of every comparison in the module docstring."""
    p = {"length": mann_whitney_p([len(c) for c in ours], [len(c) for c in theirs])}
    ended = [sum(1 for c in side if c[-1] in eos) for side in (ours, theirs)]
    p["eos rate"] = two_proportion_p(ended[0], len(ours), ended[1], len(theirs))
    for k in (1, 2, 3):
        p[f"token {k}"] = two_sample_chi_square_p(
            *_binned(_positions(ours, k), _positions(theirs, k)), min_bins=2
        )
    assert all(len(c) <= limit for c in ours + theirs)
    return p


def test_the_loop_draws_whole_completions_as_trl_does(both_samplers):
    draw, eos, limit = both_samplers
    ours, theirs = draw("loop", seed=1), draw("trl", seed=2)
    assert len(ours) == len(theirs) == PROMPTS * G
    p = _differences(ours, theirs, eos, limit)
    assert min(p.values()) > LEVEL, p


def test_a_colder_sampler_is_told_apart(both_samplers):
    """The comparison's power on a real difference: the loop at temperature 0.7 against TRL at 1.0."""
    draw, eos, limit = both_samplers
    colder, theirs = draw("loop", seed=3, temperature=0.7), draw("trl", seed=2)
    p = _differences(colder, theirs, eos, limit)
    assert min(p.values()) < LEVEL, p
