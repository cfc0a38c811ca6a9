"""Every configuration rule of ``grpo_kit.config.rules`` on every path that must run it, from one table.

Paths: the standalone loop's ``GRPOLoopConfig``, the TRL path's ``check_settings``, the Unsloth path's
``check_settings`` (no GPU needed) and ``compute_loss`` (the per-call subset). A rule is one row; the
row says which paths run it and what the message must contain (the fix).
"""

from __future__ import annotations

import dataclasses
import re
import warnings

import pytest
import torch

from grpo_kit.config.loop import GRPOLoopConfig
from grpo_kit.config.rules import GRPO_DEFAULTS
from grpo_kit.core.losses import compute_loss
from grpo_kit.recipes.catalogue import get_recipe
from grpo_kit.support.hardware import choose_precision
from grpo_kit.trainers import trl_path, unsloth_path

BASE = {"num_generations": 4, "per_device_train_batch_size": 8}
LOOP, TRL, UNSLOTH, LOSS = "loop", "trl", "unsloth", "compute_loss"
CONFIG_PATHS = (LOOP, TRL, UNSLOTH)
ALL_PATHS = (*CONFIG_PATHS, LOSS)


def _loss_args():
    g = torch.Generator().manual_seed(0)
    logps = -torch.rand(4, 5, generator=g, dtype=torch.float64)  # (B, T)
    return logps, torch.randn(4, generator=g, dtype=torch.float64), torch.ones(4, 5, dtype=torch.long)


def check_on(path: str, overrides: dict) -> None:
    """Run the checks of ``path`` on the base settings plus ``overrides``."""
    settings = {**BASE, **overrides}
    if path == LOOP:
        GRPOLoopConfig(**settings)
    elif path == TRL:
        recipe = get_recipe("smoltldr-length-small")
        cpu = choose_precision("cpu")
        training = trl_path.resolve_training(recipe, output_dir="x", precision=cpu, overrides=settings)
        trl_path.check_settings(recipe, training, world_size=1, precision=cpu)
    elif path == UNSLOTH:
        recipe = get_recipe("gsm8k-unsloth")
        unsloth_path.check_settings(
            recipe, unsloth_path.grpo_config_kwargs(recipe, output_dir="o", **settings)
        )
    else:
        loss_keys = {"loss_type", "importance_sampling_level", "beta", "epsilon", "epsilon_high", "delta"}
        kwargs = {k: v for k, v in overrides.items() if k in loss_keys}
        ref = _loss_args()[0] if kwargs.get("beta", 0) else None
        compute_loss(*_loss_args(), ref_per_token_logps=ref, **kwargs)


# (rule, overrides, error, message the fix is in, paths that run it)
RULES = [
    (
        "num_generations",
        {"num_generations": 1, "per_device_train_batch_size": 2},
        ValueError,
        "num_generations>=2",
        CONFIG_PATHS,
    ),
    ("whole groups", {"num_generations": 3}, ValueError, "multiple of 3", CONFIG_PATHS),
    ("beta >= 0", {"beta": -0.1}, ValueError, "KL coefficient must be >= 0", ALL_PATHS),
    ("epsilon >= 0", {"epsilon": -0.1}, ValueError, "must be >= 0", ALL_PATHS),
    (
        "multi_objective_aggregation",
        {"multi_objective_aggregation": "mean"},
        ValueError,
        "normalize_then_sum",
        CONFIG_PATHS,
    ),
    ("scale_rewards", {"scale_rewards": "std"}, ValueError, "scale_rewards='std'", CONFIG_PATHS),
    ("loss_type", {"loss_type": "ppo"}, ValueError, "choose one of", ALL_PATHS),
    (
        "importance_sampling_level",
        {"importance_sampling_level": "word"},
        ValueError,
        "'token' or 'sequence'",
        ALL_PATHS,
    ),
    ("cispo cap", {"loss_type": "cispo"}, ValueError, "set epsilon_high", CONFIG_PATHS),
    ("delta > 1", {"delta": 0.5}, ValueError, "must be > 1", ALL_PATHS),
    ("retired names", {"max_prompt_length": 256}, ValueError, "max_prompt_length", (TRL, UNSLOTH)),
    ("precision", {"fp16": True}, ValueError, "fp32", (TRL,)),
    ("report_to", {"report_to": "comet"}, ValueError, "trackio", (TRL, UNSLOTH)),
    # evaluation during training (settings.evaluation_interval): the schedules no path runs are refused
    ("eval_strategy epoch", {"eval_strategy": "epoch"}, ValueError, "set eval_steps=N", CONFIG_PATHS),
    ("eval_steps fraction", {"eval_steps": 0.25}, ValueError, "whole number", CONFIG_PATHS),
    ("eval_steps zero", {"eval_steps": 0}, ValueError, "whole number", CONFIG_PATHS),
    (
        "TRL's sampled evaluation",
        {"eval_steps": 2, "num_generations_eval": 2},
        ValueError,
        "num_generations_eval",
        (TRL, UNSLOTH),
    ),
]


@pytest.mark.parametrize(
    ("path", "overrides", "error", "message"),
    [
        pytest.param(path, overrides, error, message, id=f"{rule}-{path}")
        for rule, overrides, error, message, paths in RULES
        for path in paths
    ],
)
def test_every_rule_fails_on_every_path_with_its_fix(path, overrides, error, message):
    with pytest.raises(error, match=re.escape(message)):
        check_on(path, overrides)


# Where the pinned TRL 1.15 only warns, every path warns with TRL's advice and goes on.
WARNINGS = [
    ("luspo at token level", {"loss_type": "luspo"}, "should be set to `'sequence'`"),
    (
        "vespo at sequence level",
        {"loss_type": "vespo", "importance_sampling_level": "sequence"},
        "should be set to `'token'`",
    ),
]


@pytest.mark.parametrize(
    ("path", "overrides", "advice"),
    [
        pytest.param(path, overrides, advice, id=f"{rule}-{path}")
        for rule, overrides, advice in WARNINGS
        for path in ALL_PATHS
    ],
)
def test_trls_warnings_warn_on_every_path(path, overrides, advice):
    with pytest.warns(UserWarning, match=re.escape(advice)):
        check_on(path, overrides)


@pytest.mark.parametrize("path", ALL_PATHS)
def test_the_defaults_pass_every_path(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not even a warning
        check_on(path, {})


def test_defaults_are_grpo_configs():
    from trl import GRPOConfig

    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    assert {name: defaults[name] for name in GRPO_DEFAULTS} == GRPO_DEFAULTS


def test_loss_defaults_are_written_once_as_grpo_configs():
    """LossSettings holds the loss defaults (TRL's); the loop's config, compute_loss and GRPO_DEFAULTS read them."""
    import inspect

    from trl import GRPOConfig

    from grpo_kit.core.losses import LossSettings
    from grpo_kit.core.losses.entropy import ENTROPY_FIELDS, EntropyControl

    trl = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    ours = {f.name: f.default for f in dataclasses.fields(LossSettings)}
    assert ours.pop("max_completion_length") is None  # compute_loss assumes no generation limit
    assert {name: trl[name] for name in ours} == ours
    assert {name: trl[name] for name in ENTROPY_FIELDS} == ENTROPY_FIELDS
    loop = {f.name: f.default for f in dataclasses.fields(GRPOLoopConfig)}
    call = {name: p.default for name, p in inspect.signature(compute_loss).parameters.items()}
    entropy = {f.name: f.default for f in dataclasses.fields(EntropyControl)}
    assert {name: loop[name] for name in ours} == {name: call[name] for name in ours} == ours
    assert {name: loop[name] for name in ENTROPY_FIELDS} == {name: entropy[name] for name in ENTROPY_FIELDS}
    assert {name: loop[name] for name in GRPO_DEFAULTS if name in loop} == {
        name: value for name, value in GRPO_DEFAULTS.items() if name in loop
    }


def test_the_settings_and_the_loss_rules_load_without_torch():
    """The command line checks a configuration before torch loads (grpo_kit.core.losses imports lazily)."""
    import subprocess
    import sys

    code = (
        "import sys, grpo_kit.config.rules, grpo_kit.core.losses.validation, grpo_kit.recipes.catalogue; "
        "print([m for m in ('torch', 'transformers', 'trl') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_uncalled_reward_factory_fails_before_the_model_loads(tmp_path):
    from grpo_kit.loop import training as loop
    from grpo_kit.models import tiny_model
    from rewards import length_reward

    model, tokenizer = tiny_model(seed=0)
    config = GRPOLoopConfig(output_dir=str(tmp_path), max_steps=1, **BASE, disable_tqdm=True)
    with pytest.raises(TypeError, match=re.escape("length_reward(50)")):
        loop.train(model, tokenizer, [{"prompt": "Hi"}], [length_reward], config)
    calls = []
    with pytest.raises(TypeError, match=re.escape("length_reward(50)")):
        trl_path.build_trainer(
            get_recipe("smoltldr-length-small"),
            reward_funcs=[length_reward],
            device="cpu",
            output_dir=tmp_path,
            model_loader=lambda *a, **k: calls.append(a),
        )
    assert calls == []
