"""The loop's ``gradient_checkpointing=True``: the same training, less memory held between forward and backward.

What it must keep: the completions drawn (sampling never checkpoints: a checkpointing layer drops the key/value
cache decoding reads), and the losses and weights of a run without it, to float rounding (the layer is recomputed
in the backward pass with the same inputs and the same dropout draws). What it must change: the tensors autograd
keeps for the backward pass of the log-prob forward. Its time and peak RSS are measured in
``benchmarks/bench_loop_vs_trl.py --gradient-checkpointing``, not here.
"""

from __future__ import annotations

import pytest
import torch
from shared import tiny_loop_config

from grpo_kit import runs
from grpo_kit.config.trainers import applied_settings, refusal
from grpo_kit.core.logprobs import per_token_logps_grouped
from grpo_kit.loop.training import train
from grpo_kit.models import tiny_model


def _even_token_share(completion_ids, **kwargs):
    return [sum(t % 2 == 0 for t in ids) / max(len(ids), 1) for ids in completion_ids]


def _run(tmp_path, checkpointing: bool, dropout: float):
    model, tokenizer = tiny_model(seed=0, lora={"r": 8, "lora_alpha": 16, "lora_dropout": dropout})
    config = tiny_loop_config(
        tmp_path / str(checkpointing), learning_rate=1e-2, save_steps=0, gradient_checkpointing=checkpointing
    )
    rows = [{"prompt": f"Question {i}:"} for i in range(8)]
    start = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    drawn = []

    def reward(completion_ids, **kwargs):
        drawn.append([list(ids) for ids in completion_ids])
        return _even_token_share(completion_ids)

    result = train(model, tokenizer, rows, [reward], config)
    weights = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    assert max((weights[n] - start[n]).abs().max().item() for n in weights) > 1e-4  # it trained
    return result, drawn, weights


@pytest.mark.parametrize("dropout", [0.0, 0.1], ids=["no dropout", "LoRA dropout 0.1"])
def test_checkpointing_trains_the_same_steps(tmp_path, dropout):
    plain, plain_drawn, plain_weights = _run(tmp_path, False, dropout)
    checkpointed, drawn, weights = _run(tmp_path, True, dropout)
    assert checkpointed.global_step == plain.global_step == 2
    assert drawn == plain_drawn  # step 2 samples from the updated weights: equal updates, equal draws
    for ours, theirs in zip(checkpointed.log_history, plain.log_history):
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=1e-4, abs=1e-6)
        assert ours["grad_norm"] == pytest.approx(theirs["grad_norm"], rel=1e-4)
    for name, value in weights.items():
        torch.testing.assert_close(value, plain_weights[name], rtol=1e-4, atol=1e-6)


def _saved_bytes_of_a_log_prob_pass(checkpointing: bool) -> int:
    model, tokenizer = tiny_model(seed=0, lora={"r": 4, "lora_dropout": 0.0})
    model.train()
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    enc = tokenizer(
        ["Hi", "A much longer prompt here"], return_tensors="pt", padding=True, padding_side="left"
    )
    G, T = 4, 16
    completion_ids = torch.randint(0, 1000, (2 * G, T), generator=torch.Generator().manual_seed(0))
    saved = []

    def pack(tensor):  # the vocabulary-wide logits are kept either way (after the last layer): not counted
        if tensor.size(-1) != model.config.vocab_size:
            saved.append(tensor.numel() * tensor.element_size())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        logps, _ = per_token_logps_grouped(
            model, enc["input_ids"], enc["attention_mask"], completion_ids, torch.ones_like(completion_ids), G
        )
    logps.sum().backward()  # the recomputation happens here, and must work
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    return sum(saved)


def test_checkpointing_keeps_fewer_tensors_for_the_backward_pass():
    """The decoder layers' saved activations: with checkpointing only each layer's inputs (measured on the tiny
    model: 0.39x the bytes)."""
    plain, checkpointed = _saved_bytes_of_a_log_prob_pass(False), _saved_bytes_of_a_log_prob_pass(True)
    assert checkpointed < 0.5 * plain, (checkpointed, plain)


def test_a_run_on_either_path_applies_gradient_checkpointing_from_the_recipe(tmp_path):
    for loop in ("standalone", "trl"):
        assert refusal("gradient_checkpointing", True, loop) is None
        plan = runs.plan_run(
            overrides={"model": "tiny", "gradient_checkpointing": True},
            loop=loop,
            max_steps=1,
            output_dir=tmp_path / loop,
        )
        assert plan.path_config.gradient_checkpointing is True
        assert applied_settings(plan.recipe.training, plan.path_config)["gradient_checkpointing"] is True
