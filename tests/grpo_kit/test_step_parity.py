"""One optimizer step of ``grpo_kit.loop.training`` gives the trainable weights one step of TRL's ``GRPOTrainer`` gives.

The loss-parity tests (test_losses.py) prove ``compute_loss`` equal to TRL's on the same tensors. This checks the
rest of a step: prompt rendering, reward calls, advantages, old and reference log-probs, micro-batches and
gradient accumulation, clipping, the optimizer's parameter groups and the schedule. Both sides start from the same
tiny model with the same seeded LoRA adapter (``grpo_kit.runs.models.load_recipe_model``, as a run loads it) and
the same recipe: ``to_loop_config(recipe)`` for the loop, ``trl_path.build_trainer(recipe)`` (the TRL path users run) for TRL.

Same completions: the loop samples; its completions are replayed into TRL through TRL's own ``rollout_func`` hook,
looked up by the prompt ids TRL's tokenizer call produces, so a prompt TRL renders differently finds no
completions and fails the test. What the replay leaves out is the sampler itself (``test_sampling.py`` compares it
with ``generate``). fp32 on CPU; the trainable weights must agree to 1e-5 after every case.
"""

from __future__ import annotations

import pytest
import torch
from shared import tiny_recipe

from grpo_kit.loop import training as loop
from grpo_kit.runs import to_loop_config
from grpo_kit.runs.models import (
    load_recipe_model,  # the recipe's model with its seeded LoRA adapter, as a run loads it
)
from grpo_kit.trainers import trl_path
from rewards import completion_text

pytestmark = pytest.mark.filterwarnings("ignore:.*rollout_func.*:UserWarning")

# name -> recipe overrides. The main job's recipe with the tiny model's sizes: 2 prompts × 4 completions per step;
# each other case changes one thing. Two optimizer steps each (the second reuses the rollout when num_iterations=2).
CASES = {
    "main job": {},
    "num_iterations=2": {"num_iterations": 2},
    "beta=0.04": {"beta": 0.04},
    "gradient_accumulation_steps=2": {"gradient_accumulation_steps": 2},
    "completions of different lengths": {},  # EOS written into the draws (ENDS_EARLY)
}
# The random tiny model never ends a completion, so every case above trains on equal lengths, where a loss
# normalised per sequence, per token or per batch cannot be told apart; in this case completion j of a draw ends
# with an EOS at position 2 + (3 j mod T), or not at all, as the embedded model's completions do.
ENDS_EARLY = {"completions of different lengths"}
STEPS = 2


def distinct_characters(completions, **kwargs) -> list[float]:
    """The reward both sides use: the random tiny model never stops before ``max_completion_length``, so the
    recipe's length reward would give every completion the same score and every advantage 0 (nothing to compare)."""
    return [float(len(set(completion_text(c)))) for c in completions]


def _trainable(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def _train_loop(recipe, rows, steps, output_dir, monkeypatch, ends_early=False):
    """The loop's run; returns its trainable weights and {prompt ids: [completion ids, ...]} as it sampled them."""
    sampled: dict[tuple[int, ...], list[list[int]]] = {}
    real_sample = loop._sample
    if ends_early:
        real_draw = loop.sample_completions

        def drawn_with_ends(*args, eos_token_ids, **kwargs):
            ids = real_draw(*args, eos_token_ids=eos_token_ids, **kwargs)  # (N, T)
            for j in range(ids.size(0)):
                end = 2 + (3 * j) % ids.size(1)
                if end < ids.size(1):  # the others run to max_completion_length
                    ids[j, end] = eos_token_ids[0]
            return ids

        monkeypatch.setattr(loop, "sample_completions", drawn_with_ends)

    def recording_sample(model, tokenizer, unique_rows, config, eos_token_ids):
        samples = real_sample(model, tokenizer, unique_rows, config, eos_token_ids)
        G = config.num_generations
        for i in range(samples.prompt_ids.size(0)):  # (N/G, P), left-padded
            prompt = tuple(samples.prompt_ids[i][samples.prompt_mask[i].bool()].tolist())
            for j in range(i * G, (i + 1) * G):  # (N, T): up to and including the first EOS
                completion = samples.completion_ids[j][: int(samples.lengths[j])].tolist()
                sampled.setdefault(prompt, []).append(completion)
        return samples

    monkeypatch.setattr(loop, "_sample", recording_sample)
    model, tokenizer = load_recipe_model(recipe)
    config = to_loop_config(recipe, output_dir=str(output_dir), max_steps=steps, save_steps=1000)
    result = loop.train(model, tokenizer, rows, [distinct_characters], config)
    assert result.global_step == steps and not result.interrupted
    return _trainable(model), sampled, result


def _train_trl(recipe, rows, steps, output_dir, sampled):
    """TRL's run on the loop's completions, replayed through ``rollout_func``."""
    served: dict[tuple[int, ...], int] = {}

    def replay(prompts, trainer):
        prompt_ids, _, _ = trainer._tokenize_prompts(prompts)  # TRL's own rendering of each prompt
        completions = []
        for ids in prompt_ids:
            key = tuple(ids)
            assert key in sampled, "TRL rendered a prompt into ids the loop never sampled for"
            group = sampled[key]
            completions.append(group[served.get(key, 0) % len(group)])
            served[key] = served.get(key, 0) + 1
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completions,
            "logprobs": [[0.0] * len(c) for c in completions],  # unused without vLLM
        }

    model, tokenizer = load_recipe_model(recipe)
    trainer = trl_path.build_trainer(
        recipe,
        model=model,
        tokenizer=tokenizer,
        train_dataset=rows,
        reward_funcs=[distinct_characters],
        output_dir=output_dir,
        max_steps=steps,
        report_to="none",
        save_steps=1000,
        disable_tqdm=True,
        trainer_kwargs={"rollout_func": replay},
    )
    trainer.train()
    # TRL asked for each recorded completion once: it generated as often as the loop sampled
    assert served == {key: len(group) for key, group in sampled.items()}
    return _trainable(model), trainer


@pytest.mark.parametrize("case", list(CASES))
def test_one_step_of_the_loop_equals_one_step_of_trl(case, tmp_path, monkeypatch):
    overrides, steps = CASES[case], STEPS
    recipe = tiny_recipe(model="tiny", per_device_train_batch_size=8, **overrides)
    G = recipe.training["num_generations"]
    prompts_per_step = (
        recipe.training["per_device_train_batch_size"]
        * recipe.training.get("gradient_accumulation_steps", 1)
        // G
    )
    # Exactly one generation batch of prompts: both sides see the same prompts whatever order they shuffle into.
    rows = recipe.load_dataset().select(range(prompts_per_step))
    before = _trainable(load_recipe_model(recipe)[0])
    loop_weights, sampled, loop_result = _train_loop(
        recipe, rows, steps, tmp_path / "loop", monkeypatch, ends_early=case in ENDS_EARLY
    )
    if case in ENDS_EARLY:
        lengths = {len(c) for group in sampled.values() for c in group}
        assert len(lengths) >= 4, lengths  # several lengths, the longest cut by max_completion_length
    trl_weights, trainer = _train_trl(recipe, rows, steps, tmp_path / "trl", sampled)

    assert set(loop_weights) == set(trl_weights)
    moved = max((loop_weights[n] - before[n]).abs().max().item() for n in before)
    assert moved > 1e-4, "the step must move the weights for the comparison to mean anything"
    worst = max(loop_weights, key=lambda n: (loop_weights[n] - trl_weights[n]).abs().max().item())
    difference = (loop_weights[worst] - trl_weights[worst]).abs().max().item()
    assert difference <= 1e-5, f"{worst}: loop and TRL differ by {difference:.3g} after {steps} steps"
    # Adam's first update is lr · sign(g) wherever |g| >> eps, so the weights alone would not see a gradient off by
    # a constant factor (a loss normalisation, the accumulation scale): the logged pre-clipping norms must agree too.
    trl_records = [r for r in trainer.state.log_history if "loss" in r]
    loop_records = [r for r in loop_result.log_history if "loss" in r]
    assert [r["grad_norm"] for r in loop_records] == pytest.approx(
        [r["grad_norm"] for r in trl_records], rel=1e-4
    )
    assert min(r["grad_norm"] for r in trl_records) > 0
    assert [r["loss"] for r in loop_records] == pytest.approx([r["loss"] for r in trl_records], abs=1e-5)
