"""Runs you can trust (issue 12): run folders that cannot be mixed, resume that checks the configuration,
the same seed gives the same run with LoRA (standalone loop and TRL), bad steps are skipped and named,
reward errors carry their context. Each test fails on the code before issue 12."""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch
from shared import tiny_loop_config

from grpo_kit import runs
from grpo_kit.artifacts.checkpoint import CheckpointError, read_checkpoint_config
from grpo_kit.config.loop import GRPOLoopConfig
from grpo_kit.loop import training as loop
from grpo_kit.loop.bookkeeping import BadStepsError, BadStepWarning
from grpo_kit.models import tiny_model
from grpo_kit.runs.plan import prepare_run_dir
from rewards import RewardFunctionError

TINY = {"model": "tiny"}


def _plan(tmp_path, **kwargs):
    return runs.plan_run(
        "smoltldr-length-small",
        overrides={**TINY, **kwargs.pop("overrides", {})},
        output_dir=tmp_path / "run",
        **kwargs,
    )


def _config(tmp_path, **overrides) -> GRPOLoopConfig:
    return tiny_loop_config(tmp_path / "loop", **overrides)


def _dataset():
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [f"Count to {i}:" for i in range(8)]})


def _length(completions, **kwargs):
    """Characters of each completion (text, or the assistant message of a chat completion)."""
    return [float(len(c if isinstance(c, str) else c[-1]["content"])) for c in completions]


def _lora_model(seed=0):
    from peft import LoraConfig

    from grpo_kit.models import add_lora

    model, tokenizer = tiny_model(seed=0)
    return add_lora(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"), seed=seed), tokenizer


# --- finding 2: a run folder holds one run ------------------------------------------------------------


def test_training_into_a_folder_with_a_run_refuses_unless_resume_or_overwrite(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "metrics.jsonl").write_text('{"step": 30}\n' * 30)
    with pytest.raises(FileExistsError, match="already holds a run.*--resume.*--overwrite"):
        _plan(tmp_path, max_steps=2)
    assert (folder / "metrics.jsonl").read_text().count("\n") == 30  # untouched

    plan = _plan(tmp_path, max_steps=2, overwrite=True)
    assert plan.set_aside is not None and plan.set_aside.name.startswith("run.old-")
    prepare_run_dir(plan)
    assert (plan.set_aside / "metrics.jsonl").read_text().count("\n") == 30  # moved aside, not lost
    assert sorted(p.name for p in folder.iterdir()) == ["run_config.json"]
    with pytest.raises(ValueError, match="choose one"):
        _plan(tmp_path, resume=True, overwrite=True)


# --- finding 3: resume continues the same run -----------------------------------------------------------


def test_resume_compares_the_configuration_and_alone_takes_the_stored_one(tmp_path):
    first = _plan(tmp_path, max_steps=3, overrides={"lora": {"r": 4}})
    prepare_run_dir(first)
    (first.output_dir / "checkpoint-3").mkdir()  # a checkpoint without its own run_config.json (e.g. TRL's)
    (first.output_dir / "checkpoint-3" / "trainer_state.json").write_text("{}")

    with pytest.raises(CheckpointError, match=r"recipe.training.max_steps: 3 \(stored\) -> 2 \(now\)"):
        _plan(tmp_path, max_steps=2, overrides={"lora": {"r": 4}}, resume=True)
    with pytest.raises(CheckpointError, match=r"recipe.lora.r: 4 \(stored\) -> 16"):
        _plan(tmp_path, max_steps=3, resume=True)

    alone = runs.plan_run(output_dir=first.output_dir, resume=True)  # --resume, no other flag
    assert alone.recipe == first.recipe and alone.invocation == first.invocation
    assert alone.resume_command() == f"grpo-kit train --output-dir {first.output_dir} --resume"


def test_a_resumed_plan_keeps_the_checkpoint_it_resolved_and_the_loop_is_handed_that_folder(tmp_path):
    first = _plan(tmp_path, max_steps=3)
    prepare_run_dir(first)
    for step in (2, 3):
        (first.output_dir / f"checkpoint-{step}").mkdir()
        (first.output_dir / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")

    latest = _plan(tmp_path, max_steps=3, resume=True)
    assert latest.resume == first.output_dir / "checkpoint-3"
    assert latest.path_config.resume_from_checkpoint == latest.resume  # not True: nothing resolves it again
    named = runs.plan_run(resume=first.output_dir / "checkpoint-2")  # alone: the run is the checkpoint's
    assert named.output_dir == first.output_dir and named.invocation == first.invocation
    assert named.resume == named.path_config.resume_from_checkpoint == first.output_dir / "checkpoint-2"
    with pytest.raises(FileNotFoundError, match="has no checkpoint-N folder"):
        runs.plan_run(output_dir=tmp_path / "missing", resume=True)


def test_every_checkpoint_stores_the_config_and_the_loop_refuses_another(tmp_path):
    model, tokenizer = _lora_model()
    loop.train(
        model,
        tokenizer,
        _dataset(),
        _length,
        _config(tmp_path, max_steps=1),
        run_config={"recipe": "anything"},
    )
    stored = read_checkpoint_config(tmp_path / "loop" / "checkpoint-1")
    assert stored["recipe"] == "anything" and stored["loop_config"]["max_steps"] == 1

    model, tokenizer = _lora_model()
    with pytest.raises(CheckpointError, match=r"learning_rate: 0.001 \(checkpoint\) -> 0.002 \(now\)"):
        loop.train(
            model,
            tokenizer,
            _dataset(),
            _length,
            _config(tmp_path, max_steps=2, learning_rate=2e-3, resume_from_checkpoint=True),
        )


# --- finding 4: the same seed gives the same run, with LoRA --------------------------------------------


def _numbers(log_history):
    return [
        {
            k: v
            for k, v in r.items()
            if not k.startswith("timing/")
            and k not in ("step_time", "train_runtime")
            and "per_second" not in k
        }
        for r in log_history
    ]


def _adapter(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def test_standalone_loop_same_seed_same_run_with_lora(tmp_path):
    results = []
    for attempt, noise in enumerate((1, 2)):
        torch.manual_seed(noise)  # whatever ran before must not matter
        plan = runs.plan_run(
            "smoltldr-length-small",
            overrides={
                **TINY,
                "max_completion_length": 8,
                "per_device_train_batch_size": 4,
                "eval_steps": None,
            },
            max_steps=2,
            output_dir=tmp_path / f"run{attempt}",
        )
        plan.path_config.disable_tqdm = True
        model, tokenizer = runs.load_recipe_model(plan.recipe)
        # Characters, not tokens: the tiny model's completions all hit the token limit, so a token-length
        # reward would be constant, the gradient zero and the comparison empty.
        result = runs.train_on_path(plan, model, tokenizer, plan.recipe.load_dataset(), [_length])
        results.append((_adapter(result.model), _numbers(result.log_history)))
    (first, log1), (second, log2) = results
    assert log1 == log2 and len(log1) == 2 and all(r["grad_norm"] > 0 for r in log1)
    assert first.keys() == second.keys() and all(torch.equal(first[n], second[n]) for n in first)


def test_trl_path_same_seed_same_run_with_lora(tmp_path):
    from grpo_kit.trainers import trl_path

    recipe = runs.plan_run(
        "smoltldr-length-small",
        overrides={
            **TINY,
            "max_completion_length": 8,
            "per_device_train_batch_size": 4,
            "save_steps": 1000,
            "eval_steps": None,
        },
        max_steps=2,
        output_dir=tmp_path / "unused",
    ).recipe
    results = []
    for attempt, noise in enumerate((1, 2)):
        torch.manual_seed(noise)
        model, tokenizer = tiny_model(seed=0)  # no adapter yet: the TRL path adds it from peft_config
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = trl_path.train_with_trl(
                recipe,
                model=model,
                tokenizer=tokenizer,
                output_dir=tmp_path / f"trl{attempt}",
                reward_funcs=[_length],
                max_steps=2,
                device="cpu",
                save_final=False,
                plot=False,
            )
        results.append((_adapter(result.trainer.model), _numbers(result.log_history)))
    (first, log1), (second, log2) = results
    assert [r["loss"] for r in log1 if "loss" in r] == [r["loss"] for r in log2 if "loss" in r]
    assert log1 == log2 and any(r.get("grad_norm", 0) > 0 for r in log1)
    assert first and first.keys() == second.keys() and all(torch.equal(first[n], second[n]) for n in first)


# --- finding 5: bad steps are skipped, named, and stop the run after max_bad_steps -------------------------


def test_all_nan_rewards_skip_the_step_and_stop_after_max_bad_steps(tmp_path):
    calls = []

    def sometimes_none(completions, **kwargs):
        calls.append(1)
        return [1.0 * len(c) for c in completions] if len(calls) == 1 else [None] * len(completions)

    model, tokenizer = _lora_model()
    with (
        pytest.warns(BadStepWarning, match="sometimes_none returned no number"),
        pytest.raises(BadStepsError, match=r"2 bad steps in a row.*checkpoint-1"),
    ):
        loop.train(
            model,
            tokenizer,
            _dataset(),
            sometimes_none,
            _config(tmp_path, max_steps=5, max_bad_steps=2, save_steps=100),
        )
    folder = tmp_path / "loop"
    assert sorted(p.name for p in folder.glob("checkpoint-*")) == ["checkpoint-1"]  # the last good step
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1]


def _nan_gradients(model):
    """A gradient that overflowed: every LoRA gradient becomes NaN (the loss itself stays finite)."""
    for name, param in model.named_parameters():
        if "lora_B" in name:
            param.register_hook(lambda grad: grad * float("nan"))


def _nan_logits_when_training(model):
    """Weights that overflow in the training forward pass only (sampling runs without gradients)."""

    def poison(module, inputs, output):
        return output * float("nan") if torch.is_grad_enabled() else output

    model.get_output_embeddings().register_forward_hook(poison)


@pytest.mark.parametrize(
    ("inject", "what"), [(_nan_gradients, "grad_norm nan"), (_nan_logits_when_training, "loss nan")]
)
def test_a_non_finite_update_is_skipped_without_touching_the_weights(tmp_path, inject, what):
    model, tokenizer = _lora_model()
    inject(model)
    before = _adapter(model)
    with (
        pytest.warns(BadStepWarning, match=f"{what}.*not finite.*_length"),
        pytest.raises(BadStepsError, match="3 bad steps in a row.*No step had finished"),
    ):
        loop.train(model, tokenizer, _dataset(), _length, _config(tmp_path, max_steps=5))
    after = _adapter(model)
    assert all(torch.equal(before[n], after[n]) for n in before)  # no NaN update reached the weights
    assert not list((tmp_path / "loop").glob("checkpoint-*"))  # nothing saved from a bad step


def test_skipped_steps_are_counted_in_the_metrics(tmp_path):
    calls = []

    def none_once(completions, **kwargs):
        calls.append(1)
        return [None] * len(completions) if len(calls) == 2 else [float(len(c)) for c in completions]

    model, tokenizer = _lora_model()
    with pytest.warns(BadStepWarning):
        result = loop.train(model, tokenizer, _dataset(), none_once, _config(tmp_path, max_steps=2))
    assert result.global_step == 2 and len(calls) == 3
    assert result.log_history[-1]["skipped_steps"] == 1 and "skipped_steps" not in result.log_history[0]


# --- finding 10: a reward function that raises ---------------------------------------------------------


def _raises_on_second_call():
    calls = []

    def flaky_judge(completions, **kwargs):
        calls.append(1)
        if len(calls) >= 2:
            raise KeyError("score")
        return [float(len(c)) for c in completions]

    return flaky_judge


def test_reward_error_stops_after_saving_a_checkpoint_naming_function_row_and_completion(tmp_path):
    model, tokenizer = _lora_model()
    with pytest.raises(RewardFunctionError) as caught:
        loop.train(
            model,
            tokenizer,
            _dataset(),
            _raises_on_second_call(),
            _config(tmp_path, max_steps=3, save_steps=100),
        )
    message = str(caught.value)
    assert "flaky_judge" in message and "row 0" in message and "checkpoint-1" in message
    assert caught.value.func_name == "flaky_judge"
    assert (tmp_path / "loop" / "checkpoint-1" / "trainer_state.json").is_file()


def test_reward_error_with_skip_is_a_bad_step(tmp_path):
    model, tokenizer = _lora_model()
    with pytest.warns(BadStepWarning, match="flaky_judge"), pytest.raises(BadStepsError, match="flaky_judge"):
        loop.train(
            model,
            tokenizer,
            _dataset(),
            _raises_on_second_call(),
            _config(tmp_path, max_steps=4, on_reward_error="skip", max_bad_steps=2),
        )
    with pytest.raises(ValueError, match="'stop' or 'skip'"):
        _config(tmp_path, on_reward_error="ignore")


def test_loop_only_settings_pass_the_recipe_checks():
    plan = runs.plan_run(
        "smoltldr-length-small",
        overrides={**TINY, "max_bad_steps": 5, "on_reward_error": "skip"},
        max_steps=1,
        output_dir="unused",
    )
    assert (plan.path_config.max_bad_steps, plan.path_config.on_reward_error) == (5, "skip")
    assert not math.isnan(plan.path_config.learning_rate)


# --- issue 24 (7): a reward function that blocks is bounded by reward_timeout ------------------------------


def test_a_stuck_reward_function_stops_the_run_at_reward_timeout_or_is_a_bad_step(tmp_path):
    import time

    def stuck_judge(completions, **kwargs):
        time.sleep(60)
        return [0.0] * len(completions)

    model, tokenizer = _lora_model()
    started = time.monotonic()
    with pytest.raises(
        RewardFunctionError, match=r"stuck_judge did not return within 1 s \(reward_timeout\)"
    ):
        loop.train(model, tokenizer, _dataset(), [stuck_judge], _config(tmp_path, reward_timeout=1))
    with (
        pytest.warns(BadStepWarning, match="reward_timeout"),
        pytest.raises(BadStepsError, match="stuck_judge"),
    ):
        loop.train(
            model,
            tokenizer,
            _dataset(),
            [stuck_judge],
            _config(tmp_path, reward_timeout=1, on_reward_error="skip", max_bad_steps=1),
        )
    assert time.monotonic() - started < 60
    assert GRPOLoopConfig().reward_timeout == 600.0  # generous by default
    with pytest.raises(ValueError, match="reward_timeout"):
        _config(tmp_path, reward_timeout=0)
