"""Weights are checked, not only losses (issue 24, finding 1): a NaN model is never trained on, saved,
exported or called verified, and the numbers that make one are refused before any model loads."""

from __future__ import annotations

import math
import re

import pytest
import torch
from shared import tiny_loop_config

from grpo_kit.artifacts.checkpoint import NonFiniteWeightsError, non_finite_parameters, trainable_parameters
from grpo_kit.config.loop import GRPOLoopConfig
from grpo_kit.loop.bookkeeping import BadStepsError, BadStepWarning
from grpo_kit.loop.training import train
from grpo_kit.models import tiny_model

LORA = {"r": 4, "lora_alpha": 8, "lora_dropout": 0.0}


def _prompts(n: int = 4) -> list[dict]:
    return [{"prompt": f"Question {i}:"} for i in range(n)]


def _tied_reward(completions, **kwargs):
    """Every completion scores the same: every group ties, every advantage and gradient is 0."""
    return [1.0] * len(completions)


def _config(tmp_path, **overrides) -> GRPOLoopConfig:
    # groups of 2, 3 tokens, a large learning rate: a bad step is easy to provoke
    small = {
        "num_generations": 2,
        "per_device_train_batch_size": 4,
        "max_completion_length": 3,
        "learning_rate": 1e-2,
    }
    return tiny_loop_config(tmp_path, **{**small, "max_bad_steps": 2, **overrides})


# --- refused before a model loads --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"adam_epsilon": 0.0}, "adam_epsilon=0.0 is out of range"),
        ({"learning_rate": math.inf}, "learning_rate=inf is out of range"),
        ({"learning_rate": math.nan}, "learning_rate=nan is out of range"),
        ({"learning_rate": "abc"}, "learning_rate='abc' is not a number"),
        ({"max_grad_norm": math.inf}, "max_grad_norm=inf"),
        ({"adam_beta2": 1.0}, "adam_beta2=1.0"),
        ({"weight_decay": math.nan}, "weight_decay=nan"),
        ({"seed": 2**70}, "seed=1180591620717411303424"),
    ],
)
def test_non_finite_or_out_of_range_numbers_are_refused_before_loading(overrides, named):
    with pytest.raises((ValueError, TypeError), match=re.escape(named)):
        GRPOLoopConfig(num_generations=2, per_device_train_batch_size=2, **overrides)


@pytest.mark.parametrize("training", [{"adam_epsilon": 0}, {"learning_rate": float("inf")}, {"seed": -1}])
def test_the_trl_path_refuses_them_too(training):
    from grpo_kit.trainers.builder import check_training

    with pytest.raises(ValueError, match=next(iter(training))):
        check_training({"num_generations": 2, "per_device_train_batch_size": 2, **training})


# --- a non-finite update is a bad step: undone, never saved ----------------------------------------------


def test_a_non_finite_update_is_undone_and_never_saved(tmp_path):
    """adam_epsilon=0 on tied groups: AdamW computes 0/0 (the issue's repro). The setting is refused by the
    config, so it is forced here to reach the guard behind it."""
    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    before = {name: p.detach().clone() for name, p in trainable_parameters(model)}
    config = _config(tmp_path)
    config.adam_epsilon = 0.0  # past the settings check: the loop's own guard must catch the NaN update
    with pytest.warns(BadStepWarning, match="NaN/inf .* it was undone"), pytest.raises(BadStepsError):
        train(model, tokenizer, _prompts(), _tied_reward, config)
    after = dict(trainable_parameters(model))
    assert non_finite_parameters(list(after.items())) == []
    assert all(torch.equal(before[name], after[name]) for name in before)  # rolled back exactly
    assert not list(tmp_path.glob("checkpoint-*"))  # nothing was saved from a bad state


def test_saving_non_finite_weights_is_refused(tmp_path):
    from grpo_kit.artifacts.checkpoint import save_checkpoint

    model, tokenizer = tiny_model(seed=0, lora=LORA)
    with torch.no_grad():
        trainable_parameters(model)[0][1].fill_(float("nan"))
    optimizer = torch.optim.AdamW([p for _, p in trainable_parameters(model)])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    with pytest.raises(NonFiniteWeightsError, match="saving checkpoint-1: refused"):
        save_checkpoint(
            tmp_path / "checkpoint-1",
            model=model,
            tokenizer=tokenizer,
            optimizer=optimizer,
            scheduler=scheduler,
            trainer_state={},
            rng_state={},
        )
    assert not list(tmp_path.iterdir())


def test_overflowing_rewards_are_a_bad_step_not_nan_statistics(tmp_path):
    """±1e308 are finite floats, but their mean and std overflow: every advantage would be NaN."""

    def huge(completions, **kwargs):
        return [1e308 if i % 2 else -1e308 for i in range(len(completions))]

    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    before = {name: p.detach().clone() for name, p in trainable_parameters(model)}
    with pytest.warns(BadStepWarning, match="overflow"), pytest.raises(BadStepsError):
        train(model, tokenizer, _prompts(), huge, _config(tmp_path))
    assert all(torch.equal(before[name], p) for name, p in trainable_parameters(model))


# --- never exported, never "verified" --------------------------------------------------------------------


def _nan_lora_model():
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    with torch.no_grad():
        for _, p in trainable_parameters(model):
            p.fill_(float("nan"))
    return model, tokenizer


@pytest.mark.parametrize("kind", ["adapter", "merged"])
def test_a_nan_model_is_not_exported(tmp_path, kind):
    from grpo_kit.export import save_adapter, save_merged

    model, tokenizer = _nan_lora_model()
    save = save_adapter if kind == "adapter" else save_merged
    with pytest.raises(NonFiniteWeightsError, match="refused"):
        save(model, tokenizer, tmp_path / kind)
    assert not (tmp_path / kind).exists()


def test_verification_refuses_two_nan_models_that_agree():
    from grpo_kit.export import compare_greedy, prompt_ids

    model, tokenizer = _nan_lora_model()
    with pytest.raises(NonFiniteWeightsError, match="verifying an export"):
        compare_greedy(model, model, prompt_ids(tokenizer), tie_tolerance=1e-3)


def test_the_trl_path_callback_stops_before_a_nan_state_is_saved(tmp_path):
    from transformers import TrainerControl, TrainerState

    from grpo_kit.trainers.run import _finite_weights_callback

    class Args:
        output_dir = str(tmp_path)

    callback = _finite_weights_callback()
    model, _ = tiny_model(seed=0, lora=LORA)
    state, control = TrainerState(global_step=3), TrainerControl()
    assert callback.on_step_end(Args(), state, control, model=model) is control  # finite: carry on
    with torch.no_grad():
        trainable_parameters(model)[0][1].fill_(float("inf"))
    (tmp_path / "checkpoint-2").mkdir()  # a complete save (a half-written one is skipped by resume)
    (tmp_path / "checkpoint-2" / "trainer_state.json").write_text("{}")
    with pytest.raises(NonFiniteWeightsError, match=r"step 3: 1 of .* last good state is .*checkpoint-2"):
        callback.on_step_end(Args(), state, control, model=model)
