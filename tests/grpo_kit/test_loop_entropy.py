"""Entropy regularization in the standalone loop: applied, logged under TRL's names, resumed exactly.

The loss arithmetic is proven equal to TRL in ``test_entropy_regularization.py``; here the loop wires it:
the entropies keep their graph, the adaptive coefficient moves once per optimizer step and survives a kill.
"""

from __future__ import annotations

import json

import pytest
import torch
from test_loop import LORA, StopAfter, even_token_share, losses, prompts, small_config

from grpo_kit.artifacts.metrics_log import read_metrics
from grpo_kit.config.loop import GRPOLoopConfig
from grpo_kit.loop.training import train
from grpo_kit.models import tiny_model


def run(out, callbacks=None, **overrides):
    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    return train(
        model, tokenizer, prompts(), [even_token_share], small_config(out, **overrides), callbacks=callbacks
    )


def test_static_bonus_is_applied_and_logged_like_trl(tmp_path):
    plain = run(tmp_path / "plain", max_steps=1)
    bonus = run(tmp_path / "bonus", max_steps=1, entropy_coef=0.5)
    [plain_record] = read_metrics(tmp_path / "plain" / "metrics.jsonl")
    [record] = read_metrics(tmp_path / "bonus" / "metrics.jsonl")
    assert "policy_loss" not in plain_record and "entropy_coef" not in plain_record
    assert record["entropy_coef"] == 0.5
    # Same samples (same seed, same weights before the first update), so L = L_policy − c·H exactly.
    assert record["entropy"] == pytest.approx(plain_record["entropy"])
    assert record["policy_loss"] == pytest.approx(plain_record["loss"], abs=1e-6)
    assert losses(bonus)[0] == pytest.approx(losses(plain)[0] - 0.5 * record["entropy"], abs=1e-5)


def test_adaptive_coefficient_moves_each_step_and_resumes_bit_identically(tmp_path):
    # A target above any entropy the tiny model reaches: the coefficient rises by delta every step.
    settings = {
        "max_steps": 4,
        "use_adaptive_entropy": True,
        "entropy_coef": 0.01,
        "entropy_coef_delta": 0.013,
        "entropy_coef_max": 0.04,
        "entropy_target": 50.0,
    }
    full = run(tmp_path / "full", **settings)
    coefs = [r["entropy_coef"] for r in read_metrics(tmp_path / "full" / "metrics.jsonl")]
    assert coefs == pytest.approx([0.023, 0.036, 0.04, 0.04])  # clamped at entropy_coef_max

    killed = run(tmp_path / "killed", callbacks=[StopAfter(2)], save_steps=100, **settings)
    assert killed.interrupted and killed.checkpoint.name == "checkpoint-2"
    saved = json.loads((killed.checkpoint / "trainer_state.json").read_text())["entropy_control"]
    assert saved["entropy_coef"] == coefs[1]  # bit for bit through JSON
    resumed = run(tmp_path / "killed", resume_from_checkpoint=True, **settings)
    assert [resumed.step_losses[s] for s in (3, 4)] == losses(full)[2:]  # exact
    resumed_coefs = [r["entropy_coef"] for r in read_metrics(tmp_path / "killed" / "metrics.jsonl")]
    assert resumed_coefs == coefs


def test_adaptive_bonus_stays_off_above_the_target(tmp_path):
    """TRL's default target 0.2 never fires on a random model (entropy ≈ ln V): c only decays, no bonus."""
    run(tmp_path, max_steps=2, use_adaptive_entropy=True, entropy_coef=0.01)
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["entropy_coef"] for r in records] == pytest.approx([0.005, 0.0])
    assert all(r["policy_loss"] == pytest.approx(r["loss"], abs=1e-6) for r in records)


@pytest.mark.parametrize(
    "overrides, fix",
    [
        (
            {"use_adaptive_entropy": True, "entropy_coef_min": 0.2, "entropy_coef_max": 0.1},
            "entropy_coef_min",
        ),
        ({"use_adaptive_entropy": True, "entropy_coef_delta": -1.0}, "entropy_coef_delta"),
    ],
)
def test_bad_entropy_settings_fail_before_the_model_loads(overrides, fix):
    with pytest.raises(ValueError, match=fix):
        GRPOLoopConfig(num_generations=4, per_device_train_batch_size=8, **overrides)


def test_a_recipe_with_entropy_and_completions_settings_reaches_the_loop_without_a_warning():
    import warnings

    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.runs import to_loop_config

    recipe = get_recipe(
        "smoltldr-length-small",
        entropy_coef=0.05,
        use_adaptive_entropy=True,
        entropy_target=2.0,
        log_completions=True,
        num_completions_to_print=2,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = to_loop_config(recipe, output_dir="unused")
    dropped = " ".join(str(w.message) for w in caught)  # "the standalone loop has no ..., they are ignored"
    for name in ("entropy", "log_completions", "num_completions_to_print"):
        assert name not in dropped, dropped
    assert (config.entropy_coef, config.use_adaptive_entropy, config.entropy_target) == (0.05, True, 2.0)
    assert config.log_completions and config.num_completions_to_print == 2
