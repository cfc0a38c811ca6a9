"""The standalone loop: it learns, resumes bit for bit, validates early, logs TRL's names, never NaNs.

Everything runs on ``tiny_model()`` (a random 2-layer Llama with the real SmolLM2 tokenizer).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch
from shared import numbered_curriculum_rows

from grpo_kit.artifacts.metrics_log import read_metrics
from grpo_kit.config.loop import GRPOLoopConfig
from grpo_kit.core.logprobs import per_token_logps
from grpo_kit.loop.training import LoopState, train
from grpo_kit.models import tiny_model

LORA = {"r": 8, "lora_alpha": 16, "lora_dropout": 0.0}


def prompts(n: int = 8, conversational: bool = False) -> list[dict]:
    if conversational:
        return [{"prompt": [{"role": "user", "content": f"Question {i}?"}], "idx": i} for i in range(n)]
    return [{"prompt": f"Question {i}:", "idx": i} for i in range(n)]


def even_token_share(completion_ids, **kwargs):
    return [sum(t % 2 == 0 for t in ids) / max(len(ids), 1) for ids in completion_ids]


def losses(result) -> list[float]:
    """The loss of every step run in that call, in step order."""
    return [result.step_losses[step] for step in sorted(result.step_losses)]


def small_config(tmp_path: Path, **overrides) -> GRPOLoopConfig:
    settings = {
        "output_dir": str(tmp_path),
        "max_steps": 2,
        "num_generations": 4,
        "per_device_train_batch_size": 8,
        "max_completion_length": 6,
        "learning_rate": 1e-2,
        "logging_steps": 1,
        "save_steps": 0,
        "disable_tqdm": True,
        "stop_on_no_signal": False,  # every completion of the tiny model is clipped (test_signal_watch.py)
    }
    settings.update(overrides)
    return GRPOLoopConfig(**settings)


# --- validation: before any model exists -------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "fix"),
    [
        ({"num_generations": 1}, "num_generations>=2"),
        ({"num_generations": 3, "per_device_train_batch_size": 8}, "multiple of 3"),
        ({"loss_type": "cispo"}, "set epsilon_high"),
        ({"loss_type": "ppo"}, "choose one of"),
        ({"temperature": 0.0}, "temperature"),
        ({"top_entropy_quantile": 1.5}, "top_entropy_quantile"),
        ({"lr_scheduler_type": "warm"}, "lr_scheduler_type"),
        ({"scale_rewards": "std"}, "scale_rewards"),
    ],
)
def test_invalid_config_fails_before_model_load(overrides, fix):
    settings = {"num_generations": 4, "per_device_train_batch_size": 8, **overrides}
    with pytest.raises(ValueError, match=re.escape(fix)):
        GRPOLoopConfig(**settings)


def test_cispo_with_epsilon_high_is_accepted_and_true_false_scale_rewards_map():
    assert GRPOLoopConfig(loss_type="cispo", epsilon_high=5.0).epsilon_high == 5.0
    assert GRPOLoopConfig(scale_rewards=False).scale_rewards == "none"
    assert GRPOLoopConfig(scale_rewards=True).scale_rewards == "group"


def test_beta_without_lora_is_refused_before_sampling(tmp_path):
    model, tokenizer = tiny_model(seed=0)
    calls = []

    def reward(completions, **kwargs):
        calls.append(1)
        return [0.0] * len(completions)

    with pytest.raises(ValueError, match="Load it with LoRA"):
        train(model, tokenizer, prompts(), reward, small_config(tmp_path, beta=0.04))
    assert calls == []


# --- learning ------------------------------------------------------------------------------------------


def test_reward_for_one_token_rises(tmp_path):
    """Reward = share of completion tokens equal to TARGET. The random tiny model samples among its top 10
    tokens; TARGET is the one it samples most at the start (a few %). GRPO must make it common."""
    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0)
    data = prompts(8)
    encoded = tokenizer([d["prompt"] for d in data], return_tensors="pt", padding=True)
    with torch.no_grad():
        sampled = model.generate(
            **encoded,
            do_sample=True,
            top_k=10,
            max_new_tokens=8,
            num_return_sequences=8,
            pad_token_id=tokenizer.pad_token_id,
        )[:, encoded["input_ids"].size(1) :]
    target, count = collections.Counter(sampled.flatten().tolist()).most_common(1)[0]
    start_share = count / sampled.numel()

    def prefers_target(completion_ids, **kwargs):
        return [sum(t == target for t in ids) / len(ids) for ids in completion_ids]

    config = small_config(
        tmp_path,
        max_steps=20,
        num_generations=8,
        per_device_train_batch_size=16,
        max_completion_length=8,
        learning_rate=3e-3,
        top_k=10,
        logging_steps=5,
        lr_scheduler_type="constant",
    )
    result = train(model, tokenizer, data, prefers_target, config)
    rewards = [r["reward"] for r in result.log_history]
    assert start_share < 0.1
    assert rewards[-1] > 0.4, rewards  # from a few % to a clear majority of tokens in 20 steps
    assert rewards[-1] > rewards[0] + 0.2, rewards


# --- resume ---------------------------------------------------------------------------------------------


class StopAfter:
    """A callback that presses Ctrl-C right after optimizer step ``step``."""

    def __init__(self, step: int):
        self.step = step

    def __call__(self, state: LoopState, metrics: dict) -> None:
        if state.global_step == self.step:
            raise KeyboardInterrupt


def test_killed_and_resumed_run_reproduces_the_losses_exactly(tmp_path):
    # num_iterations=2 (reused generation batches + old log-probs), beta>0 (reference via disabled adapter),
    # gradient accumulation, dropout in LoRA: every piece of state a resume has to restore.
    settings = {
        "max_steps": 6,
        "num_iterations": 2,
        "beta": 0.04,
        "gradient_accumulation_steps": 2,
        "per_device_train_batch_size": 4,
        "learning_rate": 5e-3,
        "warmup_steps": 0.2,
    }
    lora = {**LORA, "lora_dropout": 0.1}

    def run(out, callbacks=None, **extra):
        torch.manual_seed(0)
        model, tokenizer = tiny_model(seed=0, lora=lora)
        return train(
            model,
            tokenizer,
            prompts(conversational=True),
            [even_token_share],
            small_config(out, **settings, **extra),
            callbacks=callbacks,
        )

    full = run(tmp_path / "full")
    assert len(losses(full)) == 6 and all(math.isfinite(x) for x in losses(full))

    killed = run(tmp_path / "killed", callbacks=[StopAfter(3)], save_steps=2)
    assert killed.interrupted and killed.global_step == 3
    assert killed.checkpoint.name == "checkpoint-3"
    assert (killed.checkpoint / "rollout.json").exists()  # step 3 is mid-way through a reused batch
    assert [killed.step_losses[s] for s in (1, 2, 3)] == losses(full)[:3]

    resumed = run(tmp_path / "killed", resume_from_checkpoint=True, save_steps=2)
    assert not resumed.interrupted and sorted(resumed.step_losses) == [4, 5, 6]
    assert [resumed.step_losses[s] for s in (4, 5, 6)] == losses(full)[3:]  # exact, not approximate

    from_periodic = run(tmp_path / "killed", resume_from_checkpoint=str(tmp_path / "killed" / "checkpoint-2"))
    assert [from_periodic.step_losses[s] for s in (3, 4, 5, 6)] == losses(full)[2:]

    # Ctrl-C in the middle of step 5, while its generation batch is being scored: the prompts already drawn
    # and the random numbers already used must not leak into the checkpoint of step 4.
    def interrupting_reward(completion_ids, trainer_state, **kwargs):
        if trainer_state.global_step == 4:
            raise KeyboardInterrupt
        return even_token_share(completion_ids)

    def run_with(out, reward_fn, **extra):
        torch.manual_seed(0)
        model, tokenizer = tiny_model(seed=0, lora=lora)
        reward_fn.__name__ = "even_token_share"  # the same metric names as the uninterrupted run
        return train(
            model,
            tokenizer,
            prompts(conversational=True),
            [reward_fn],
            small_config(out, **settings, **extra),
        )

    mid_step = run_with(tmp_path / "mid", interrupting_reward, save_steps=100)
    assert mid_step.interrupted and mid_step.checkpoint.name == "checkpoint-4"
    after = run_with(
        tmp_path / "mid",
        lambda completion_ids, **kw: even_token_share(completion_ids),
        resume_from_checkpoint=True,
    )
    assert [after.step_losses[s] for s in (5, 6)] == losses(full)[4:]

    records = read_metrics(tmp_path / "killed" / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]  # no duplicated steps after resuming
    assert [r["loss"] for r in records] == [
        r["loss"] for r in read_metrics(tmp_path / "full" / "metrics.jsonl")
    ]


# --- logging --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("caller_reports", [False, True])
def test_an_interrupted_loop_prints_its_line_unless_the_caller_prints_one(tmp_path, capsys, caller_reports):
    """Python API: the loop says where its checkpoint is. Under the CLI (caller_reports_stops) the CLI's
    line with the exact resume command is the only one, so the loop saves without printing."""
    import contextlib

    from grpo_kit.support.interrupts import caller_reports_stops

    def interrupting_reward(completion_ids, trainer_state, **kwargs):
        if trainer_state.global_step == 1:
            raise KeyboardInterrupt
        return even_token_share(completion_ids)

    model, tokenizer = tiny_model(seed=0, lora=LORA)
    with caller_reports_stops() if caller_reports else contextlib.nullcontext():
        result = train(model, tokenizer, prompts(), [interrupting_reward], small_config(tmp_path))
    assert result.interrupted and result.checkpoint.name == "checkpoint-1"
    out = capsys.readouterr().out
    assert ("Interrupted after step 1; checkpoint saved to" in out) != caller_reports, out
    assert "Interrupted" not in out if caller_reports else out.count("Interrupted") == 1, out


def test_metrics_use_trls_names_and_a_reward_curve_is_drawn(tmp_path):
    import trl.trainer.grpo_trainer as grpo_trainer_module

    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    config = small_config(tmp_path, beta=0.04, logging_steps=2, max_steps=2)
    result = train(model, tokenizer, prompts(), [even_token_share], config)
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert len(records) == 1 and records[0]["step"] == 2
    names = set(records[0]) - {"step", "epoch"}
    expected = {
        "reward",
        "reward_std",
        "rewards/even_token_share/mean",
        "rewards/even_token_share/std",
        "frac_reward_zero_std",
        "completions/mean_length",
        "completions/clipped_ratio",
        "kl",
        "entropy",
        "clip_ratio/region_mean",
        "clip_ratio/low_mean",
        "clip_ratio/high_mean",
        "loss",
        "grad_norm",
        "learning_rate",
        "num_tokens",
    }
    assert expected <= names
    # Every name we log is spelled exactly as in the pinned TRL's GRPOTrainer (or Trainer's loss/grad_norm/...).
    source = Path(grpo_trainer_module.__file__).read_text()
    trainer_names = {"loss", "grad_norm", "learning_rate"}
    # grpo-kit's own per-step timing (issue 10), under a prefix TRL does not use.
    phases = ("generation", "scoring", "old_ref_logprobs", "training", "forward", "backward", "optimizer")
    timing = {f"timing/{phase}_s" for phase in phases} | {"timing/tokens_per_s"}
    assert {n for n in names if n.startswith("timing/")} == timing
    assert all(records[0][n] > 0 for n in timing)
    # forward + backward + optimizer are the training phase; with scoring and generation, no more than the step
    for r in records:
        inner = r["timing/forward_s"] + r["timing/backward_s"] + r["timing/optimizer_s"]
        assert inner <= r["timing/training_s"] <= r["step_time"]
        assert r["timing/generation_s"] + r["timing/scoring_s"] + r["timing/training_s"] <= r["step_time"]
    for name in names - trainer_names - timing:
        literal = name if not name.startswith("rewards/") else "/mean" if name.endswith("/mean") else "/std"
        assert f'"{literal}"' in source or f'/{literal.strip("/")}"' in source, name
    assert records[0]["completions/clipped_ratio"] == 1.0  # the random model never says EOS in 6 tokens
    assert records[0]["completions/mean_length"] == 6.0
    png = result.reward_curve_path
    assert png is not None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])["step"] == 2


def test_a_run_without_matplotlib_keeps_its_metrics_and_skips_only_the_png(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    result = train(model, tokenizer, prompts(), [even_token_share], small_config(tmp_path, max_steps=1))
    assert result.reward_curve_path is None and not (tmp_path / "reward_curve.png").exists()
    assert [r["step"] for r in read_metrics(tmp_path / "metrics.jsonl")] == [1]
    assert "matplotlib is not installed: reward_curve.png skipped" in capsys.readouterr().out


def test_reward_functions_get_trl_kwargs_columns_and_may_be_async(tmp_path):
    seen = {}

    def sync_reward(prompts, completions, completion_ids, trainer_state, idx, **kwargs):
        seen["conversational"] = isinstance(completions[0], list) and completions[0][0]["role"] == "assistant"
        seen["idx"] = idx
        seen["step"] = trainer_state.global_step
        seen["ids"] = all(isinstance(ids, list) for ids in completion_ids)
        kwargs["log_metric"]("my_metric", 7.0)
        return [float(i) for i in idx]

    async def async_reward(completions, **kwargs):
        return [1.0] * len(completions)

    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0)
    config = small_config(tmp_path, max_steps=1, reward_weights=[1.0, 0.5], shuffle_dataset=False)
    result = train(model, tokenizer, prompts(conversational=True), [sync_reward, async_reward], config)
    record = result.log_history[-1]
    assert seen["conversational"] and seen["ids"] and seen["step"] == 0
    assert seen["idx"] == [0, 0, 0, 0, 1, 1, 1, 1]  # each prompt's column repeated for its G completions
    assert record["rewards/async_reward/mean"] == 1.0
    assert record["reward"] == pytest.approx(0.5 + 0.5 * 1.0)
    assert record["my_metric"] == 7.0


def test_a_curriculum_recipe_is_trained_in_dataset_order(tmp_path):
    """gsm8k-cpu fades its worked example out over its first rows, so the loop must take them in order:
    with the recipe's own settings (shuffle_dataset=False, 2 prompts a step) step s trains rows 2(s-1) and
    2s-1, read back from the rows the reward functions are called with."""
    import warnings

    from grpo_kit.loop.training import _next_rows
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.runs import to_loop_config

    recipe = get_recipe("gsm8k-cpu")
    dataset, trained, record = numbered_curriculum_rows(recipe)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the GRPOConfig fields the loop has no counterpart for
        config = to_loop_config(
            recipe,
            output_dir=str(tmp_path),
            max_steps=3,
            max_completion_length=4,
            save_steps=0,
            disable_tqdm=True,
            reward_weights=[1.0],  # one recording function instead of the recipe's five
        )
    assert config.shuffle_dataset is False and config.prompts_per_generation == 2
    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0)
    train(model, tokenizer, dataset, [record], config)
    assert trained == [[0, 1], [2, 3], [4, 5]]
    # the whole run: one pass, in order; a second pass would start over at row 0 (and its example)
    state = LoopState()
    steps = [
        [r["row"] for r in _next_rows(dataset, state, config)]
        for _ in range(recipe.training["max_steps"] + 1)
    ]
    assert steps[:-1] == [[2 * s, 2 * s + 1] for s in range(40)] and steps[-1] == [0, 1]
    shuffled, state = dataclasses.replace(config, shuffle_dataset=True), LoopState()
    assert [r["row"] for _ in range(40) for r in _next_rows(dataset, state, shuffled)] != list(range(80))


def test_guided_sampling_draws_from_the_sampling_prompt_and_trains_under_the_prompt(tmp_path):
    """A row with a ``sampling_prompt`` (gsm8k's ``worked_example_guides``): the completions are the ones the
    sampling prompt gives, with the same seed, and the update scores them under ``prompt``."""
    from datasets_prep import SAMPLING_PROMPT
    from grpo_kit.core.sampling import stop_token_ids
    from grpo_kit.loop.training import _encode_prompts, _sample

    model, tokenizer = tiny_model(seed=0, lora=LORA)
    config = small_config(tmp_path, max_completion_length=8)
    eos = stop_token_ids(model, tokenizer)
    rows = [
        {"prompt": [{"role": "user", "content": f"Q{i}?"}], SAMPLING_PROMPT: worked, "idx": i}
        for i, worked in enumerate(prompts(2, conversational=True))
    ]
    for row in rows:  # a longer prompt to sample from: an example exchange before the question
        row[SAMPLING_PROMPT] = [
            {"role": "user", "content": "Example?"},
            {"role": "assistant", "content": "Example answer."},
            *row[SAMPLING_PROMPT]["prompt"],
        ]
    torch.manual_seed(0)
    guided = _sample(model, tokenizer, rows, config, eos)
    torch.manual_seed(0)
    plain = _sample(model, tokenizer, [{"prompt": r[SAMPLING_PROMPT]} for r in rows], config, eos)
    assert torch.equal(guided.completion_ids, plain.completion_ids)  # drawn from the sampling prompt
    assert guided.completions == plain.completions
    trained_under, _ = _encode_prompts(model, tokenizer, [r["prompt"] for r in rows], config)
    assert torch.equal(guided.prompt_ids, trained_under)  # scored under the prompt
    assert guided.prompt_ids.size(1) < plain.prompt_ids.size(1)
    assert guided.prompts == [r["prompt"] for r in rows for _ in range(4)]

    seen = {}

    def record(prompts, completions, **kwargs):
        seen["prompts"], seen["sampled_from"] = prompts, kwargs[SAMPLING_PROMPT]
        return [float(len(c[0]["content"])) for c in completions]

    config = small_config(tmp_path, max_steps=1, shuffle_dataset=False)
    result = train(model, tokenizer, rows, [record], config)
    assert result.global_step == 1 and math.isfinite(losses(result)[0])
    assert seen["prompts"] == [r["prompt"] for r in rows for _ in range(4)]  # the reward sees the prompt
    assert seen["sampled_from"] == [r[SAMPLING_PROMPT] for r in rows for _ in range(4)]  # and the column


# --- no NaN, whatever the rewards ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["all_none", "constant"])
def test_degenerate_rewards_give_zero_advantage_not_nan(tmp_path, kind):
    def reward(completions, **kwargs):
        return [None if kind == "all_none" else 1.0] * len(completions)

    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    before = [p.detach().clone() for p in model.parameters() if p.requires_grad]
    if kind == "all_none":  # issue 12: no reward at all is a bad step, skipped and named, not silent training
        from grpo_kit.loop.bookkeeping import BadStepsError, BadStepWarning

        with pytest.warns(BadStepWarning, match="reward returned no number"), pytest.raises(BadStepsError):
            train(model, tokenizer, prompts(), reward, small_config(tmp_path, max_steps=1))
    else:
        result = train(model, tokenizer, prompts(), reward, small_config(tmp_path, max_steps=1))
        record = result.log_history[-1]
        assert losses(result) == [0.0]  # advantage 0 for every completion: nothing to learn, no NaN
        assert record["grad_norm"] == 0.0
        assert record["frac_reward_zero_std"] == 1.0 and record["reward"] == 1.0
    after = [p for p in model.parameters() if p.requires_grad]
    assert all(torch.equal(a, b) for a, b in zip(before, after))


@pytest.mark.parametrize(
    "overrides",
    [
        {"mask_truncated_completions": True},
        {"top_entropy_quantile": 0.2},
        # micro-batches smaller than a group: completions are shuffled one by one and scored row by row
        {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 4},
    ],
)
def test_masking_options_run_without_nan(tmp_path, overrides):
    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    result = train(
        model, tokenizer, prompts(), [even_token_share], small_config(tmp_path, max_steps=1, **overrides)
    )
    assert all(math.isfinite(x) for x in losses(result))
    if "mask_truncated_completions" in overrides:
        # Every completion is truncated (no EOS within 6 tokens), so nothing is left to train on.
        assert losses(result) == [0.0] and result.log_history[-1]["grad_norm"] == 0.0
    else:
        assert result.log_history[-1]["grad_norm"] > 0


# --- the reference policy is the base model, via disable_adapter ------------------------------------------


def test_reference_logps_come_from_the_base_model_with_the_adapter_disabled(tmp_path):
    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    config = small_config(tmp_path, beta=0.04, max_steps=4, learning_rate=3e-2)
    result = train(model, tokenizer, prompts(), [even_token_share], config)
    assert result.log_history[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # step 1: policy == reference
    assert result.log_history[-1]["kl"] > 1e-4  # the adapter moved the policy away

    ids = tokenizer(["Question 1: a b c d"], return_tensors="pt")["input_ids"]
    mask = torch.ones_like(ids)
    base, _ = tiny_model(seed=0)  # the same weights, never trained, no adapter at all
    with torch.no_grad():
        policy, _ = per_token_logps(model, ids, mask, 4)
        with model.disable_adapter():
            reference, _ = per_token_logps(model, ids, mask, 4)
        untouched, _ = per_token_logps(base, ids, mask, 4)
    assert not torch.allclose(policy, reference, atol=1e-4)
    torch.testing.assert_close(reference, untouched)  # disabling the adapter gives back the base model


def test_reward_curve_reads_trl_log_history_and_trainer_state(tmp_path):
    from grpo_kit.artifacts.plots import load_log_history, plot_reward_curve

    history = [
        {"step": 1, "reward": -3.0, "reward_std": 1.0, "rewards/a/mean": -1.0, "rewards/b/mean": -2.0},
        {"step": 2, "reward": -1.0, "reward_std": 0.5, "rewards/a/mean": -0.5, "rewards/b/mean": -0.5},
        {"step": 2, "train_runtime": 12.0},
    ]  # TRL's closing summary has no reward
    png = plot_reward_curve(history, tmp_path / "list.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    assert load_log_history(tmp_path / "trainer_state.json") == history
    assert plot_reward_curve(tmp_path, tmp_path / "dir.png").exists()  # a TRL checkpoint folder
    with pytest.raises(ValueError, match="no logged 'reward'"):
        plot_reward_curve([{"step": 1, "loss": 0.1}], tmp_path / "none.png")
