"""Recipes: the course's numbers, overrides, clear errors, and the bridge to the standalone loop."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

from grpo_kit.config.rules import LOOP_ONLY_FIELDS, grpo_config_field_names
from grpo_kit.recipes.catalogue import (
    RECIPES,
    LoraSettings,
    Recipe,
    RewardSpec,
    get_recipe,
)
from grpo_kit.runs import to_loop_config


def test_every_recipe_is_valid_for_the_pinned_grpo_config():
    from trl import GRPOConfig

    for recipe in RECIPES.values():
        recipe.validate()
        # Every training dict really builds a GRPOConfig (TRL's own __post_init__ checks included),
        # with the recipe's reward weights, on CPU.
        # grpo-kit's own settings (stop_on_no_signal, ...) stay out of GRPOConfig, as trainers.builder leaves them
        trl_fields = {k: v for k, v in recipe.grpo_training().items() if k not in LOOP_ONLY_FIELDS}
        config = GRPOConfig(output_dir="unused", use_cpu=True, bf16=False, **trl_fields)
        assert config.reward_weights == recipe.reward_weights
        assert config.generation_batch_size % config.num_generations == 0


def test_smoltldr_length_is_course_12_5():
    r = get_recipe("smoltldr-length")
    assert r.model == "smollm2-135m-instruct"
    assert r.lora == LoraSettings(r=16, lora_alpha=32, target_modules="all-linear")
    assert r.reward_names == ["length_reward"] and r.rewards[0].kwargs["ideal_length"] == 50
    t = r.training
    assert (t["learning_rate"], t["num_generations"], t["max_completion_length"]) == (2e-5, 8, 96)
    assert "max_prompt_length" not in t  # retired in TRL 1.x


def test_small_variant_is_reachable_and_cpu_sized():
    small = get_recipe("smoltldr-length", small=True)
    assert small is RECIPES["smoltldr-length-small"]
    assert small.dataset_source == "synthetic" and small.quantization is None
    t = small.training
    # At most 32 x 8 x 64 completion tokens: about 4 minutes of training on 2 cores (README; the clipped
    # answers shrink as the model learns). The 5-minute target is measured by `make train`, not here.
    assert t["max_steps"] * t["per_device_train_batch_size"] * t["max_completion_length"] <= 32 * 8 * 64
    # A chat prompt: the instruct model answers instead of continuing the post or stopping at once.
    assert small.load_dataset(size=2)[0]["prompt"][0]["role"] == "user"
    assert "8bit" not in t["optim"]
    assert get_recipe("gsm8k-unsloth", small=True).name == "gsm8k-cpu"
    with pytest.raises(ValueError, match="no small variant"):
        get_recipe("deepmath-accuracy", small=True)


def test_gsm8k_unsloth_is_course_12_6():
    r = get_recipe("gsm8k-unsloth")
    assert r.model == "unsloth/gemma-3-1b-it" and r.quantization == "4bit"
    assert r.lora.r == 32 and r.lora.lora_alpha == 32
    assert r.reward_names == [
        "xmlcount_reward",
        "soft_format_reward",
        "strict_format_reward",
        "int_reward",
        "correctness_reward",
    ]
    assert r.reward_weights == [1.0] * 5  # the course passes no reward_weights
    t = r.training
    expected = {
        "learning_rate": 5e-6,
        "adam_beta1": 0.9,
        "adam_beta2": 0.99,
        "weight_decay": 0.1,
        "warmup_steps": 0.1,
        "lr_scheduler_type": "cosine",
        "optim": "paged_adamw_8bit",
        "max_steps": 250,
        "num_generations": 6,
        "max_grad_norm": 0.1,
    }
    assert {k: t[k] for k in expected} == expected
    # The course's max_prompt_length=256 is gone; the completion keeps the rest of max_seq_length=1024.
    assert t["max_completion_length"] == r.unsloth.max_seq_length - 256


def test_gsm8k_cpu_uses_the_same_rewards_on_the_embedded_model():
    cpu, gpu = get_recipe("gsm8k-cpu"), get_recipe("gsm8k-unsloth")
    assert cpu.rewards == gpu.rewards
    assert cpu.model == "smollm2-135m-instruct" and cpu.dataset_source == "synthetic"
    assert cpu.quantization is None and "8bit" not in cpu.training["optim"]


def test_gsm8k_cpu_fades_its_worked_example_out_and_ends_training_on_the_course_prompt():
    """Issue 27, item 5: one pass over the rows in order, the example on every row of the first steps, on none
    of the last third, and a second held-out set asked without it."""
    from datasets_prep import worked_example_rows
    from grpo_kit.runs.held_out import training_dataset

    recipe = get_recipe("gsm8k-cpu")
    t = recipe.training
    assert t["shuffle_dataset"] is False and recipe.dataset_kwargs["worked_example"] is True
    fade = recipe.dataset_kwargs["worked_example_fade"]
    per_step = t["per_device_train_batch_size"] * t["gradient_accumulation_steps"] // t["num_generations"]
    assert (t["max_steps"], per_step) == (40, 2) and recipe.dataset_size == t["max_steps"] * per_step == 80
    assert fade <= 4 * recipe.dataset_size // 5  # the fade ends before the last fifth of training
    assert recipe.curriculum == {"worked_example_fade": fade} and recipe.held_out_kwargs == {
        "worked_example_fade": None
    }
    # step s trains rows 2(s-1) and 2s-1 (tests/grpo_kit/test_loop.py and test_trl_path.py: both paths)
    shown = [len(p) == 4 for p in training_dataset(recipe)["prompt"]]
    assert shown == worked_example_rows(80, fade)
    by_step = [sum(shown[2 * s : 2 * s + 2]) for s in range(40)]
    assert by_step[:5] == [2] * 5  # with both problems at first: GRPO has a signal
    assert 0 < sum(by_step[5:29]) < 48 and by_step[28] > 0  # fewer and fewer, the last at step 29
    assert by_step[29:] == [0] * 11  # steps 30-40: the course's own prompt only
    assert recipe.transfer_eval == "gsm8k-handwritten"


def test_a_fade_without_ordered_rows_is_refused_naming_the_fix():
    fix = "set shuffle_dataset=False in training, or drop the fade"
    with pytest.raises(ValueError, match=fix) as info:
        get_recipe("gsm8k-cpu", shuffle_dataset=True)
    assert "\n" not in str(info.value) and "worked_example_fade=64" in str(info.value)
    training = {k: v for k, v in RECIPES["gsm8k-cpu"].training.items() if k != "shuffle_dataset"}
    with pytest.raises(ValueError, match=r"shuffle_dataset=True shuffles the rows \(TRL's default True\)"):
        dataclasses.replace(RECIPES["gsm8k-cpu"], training=training)  # unset is TRL's default: shuffled
    # no fade, no curriculum: shuffling is fine (the example on every row, or on none)
    for kwargs in ({"worked_example": True}, {"worked_example": False}, {"worked_example_fade": None}):
        recipe = get_recipe("gsm8k-cpu", shuffle_dataset=True, dataset_kwargs=kwargs)
        assert recipe.curriculum == {} and recipe.held_out_kwargs == {}


@pytest.mark.parametrize(
    ("kwargs", "fix"),
    [
        ({"worked_example": True, "worked_example_fade": 0.4}, "must be an int >= 1"),
        ({"worked_example": False, "worked_example_fade": 48}, "needs worked_example=True"),
        ({"worked_example": "yes"}, "must be True or False"),
    ],
)
def test_a_bad_fade_is_refused_when_the_recipe_is_built(kwargs, fix):
    with pytest.raises(ValueError, match=f"recipe 'gsm8k-cpu': dataset_kwargs: .*{fix}"):
        get_recipe("gsm8k-cpu", dataset_kwargs=kwargs)


def test_deepmath_accuracy_is_trl_quick_start():
    r = get_recipe("deepmath-accuracy")
    assert (r.model, r.dataset, r.reward_names, r.lora) == (
        "Qwen/Qwen2.5-0.5B-Instruct",
        "deepmath",
        ["accuracy_reward"],
        None,
    )


def test_overrides_go_to_recipe_fields_or_training():
    base = get_recipe("gsm8k-cpu")
    r = get_recipe("gsm8k-cpu", learning_rate=1e-5, max_steps=3, model="tiny", lora={"r": 4})
    assert r.training["learning_rate"] == 1e-5 and r.training["max_steps"] == 3
    assert r.model == "tiny" and r.lora.r == 4 and r.lora.lora_alpha == base.lora.lora_alpha
    assert base.training["learning_rate"] == 5e-4  # the registry is not mutated
    assert get_recipe("gsm8k-cpu", lora=None).lora is None


def test_a_rewards_override_takes_names_and_weighted_entries_and_refuses_the_rest():
    """What `--set rewards='[...]'` parses to (JSON: names and {"name", "weight", "kwargs"} objects)."""
    r = get_recipe(
        "shapes-vlm-cpu", rewards=["visual_answer_reward", {"name": "visual_choice_reward", "weight": 0.2}]
    )
    assert [(spec.name, spec.weight) for spec in r.rewards] == [
        ("visual_answer_reward", 1.0),
        ("visual_choice_reward", 0.2),
    ]
    for bad in ({"weight": 1.0}, {"name": "visual_answer_reward", "wieght": 1.0}, 3):
        with pytest.raises(ValueError, match="is not understood; give a reward name"):
            get_recipe("shapes-vlm-cpu", rewards=[bad])


def test_unknown_recipe_lists_the_recipes():
    with pytest.raises(ValueError) as err:
        get_recipe("smoltldr-lenght")
    message = str(err.value)
    assert "smoltldr-length" in message and all(name in message for name in RECIPES)


def test_unknown_override_names_the_options():
    with pytest.raises(ValueError, match="learning_rate") as err:
        get_recipe("smoltldr-length", learning_rat=1e-5)
    assert "Recipe fields" in str(err.value) and "dataset_source" in str(err.value)


@pytest.mark.parametrize(
    ("field", "fix"),
    [
        ("max_prompt_length", "max_completion_length"),
        ("warmup_ratio", "warmup_steps"),
        ("num_generation", "num_generations"),
    ],
)
def test_retired_fields_name_the_fix(field, fix):
    with pytest.raises(ValueError, match=fix):
        get_recipe("smoltldr-length", **{field: 1})


def test_training_keys_are_grpo_config_fields():
    names = grpo_config_field_names()
    assert {"num_generations", "max_completion_length", "loss_type", "learning_rate"} <= names
    assert "max_prompt_length" not in names  # what the retired-field message relies on


def test_recipe_rejects_bad_construction():
    base = RECIPES["gsm8k-cpu"]
    with pytest.raises(ValueError, match="quantization"):
        dataclasses.replace(base, quantization="3bit")
    with pytest.raises(ValueError, match="synthetic"):
        dataclasses.replace(base, dataset="deepmath", dataset_source="synthetic")
    with pytest.raises(ValueError, match="RewardSpec"):
        dataclasses.replace(base, training={"reward_weights": [1.0]})
    with pytest.raises(ValueError, match="reward"):
        Recipe(name="x", description="", model="m", dataset="gsm8k")


def test_reward_functions_are_built_from_the_rewards_library():
    import rewards

    funcs = get_recipe("gsm8k-cpu").build_reward_funcs()
    assert funcs == [
        rewards.xmlcount_reward,
        rewards.soft_format_reward,
        rewards.strict_format_reward,
        rewards.int_reward,
        rewards.correctness_reward,
    ]
    length = get_recipe("smoltldr-length").build_reward_funcs()[0]
    # The factory got ideal_length=50 in characters: a 50-character completion scores the maximum, 0.
    assert length(["x" * 50, "x" * 40]) == [0.0, -10.0]
    with pytest.raises(ValueError, match="unknown reward function"):
        RewardSpec("no_such_reward").build()


def test_synthetic_datasets_load_offline_with_prompts():
    small = get_recipe("smoltldr-length-small")
    tldr = small.load_dataset()
    assert len(tldr) == small.dataset_size
    instruction = small.dataset_kwargs["instruction"]
    assert tldr[0]["prompt"][0]["content"].startswith(instruction)
    plain = get_recipe("smoltldr-length-small", dataset_kwargs={}).load_dataset(size=4)
    assert isinstance(plain[0]["prompt"], str)  # the course's plain-text prompts
    gsm = get_recipe("gsm8k-cpu").load_dataset(size=8)
    assert len(gsm) == 8 and gsm[0]["prompt"][-1]["role"] == "user" and gsm[0]["answer"].lstrip("-").isdigit()


def test_to_loop_config_keeps_same_named_fields_and_says_what_it_drops():
    recipe = get_recipe("gsm8k-cpu", weight_decay=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = to_loop_config(recipe, max_steps=2)
    for name in (
        "learning_rate",
        "num_generations",
        "max_completion_length",
        "per_device_train_batch_size",
        "weight_decay",
        "lr_scheduler_type",
        "max_grad_norm",
        "temperature",
    ):
        assert getattr(config, name) == recipe.training[name]
    assert config.reward_weights == recipe.reward_weights and config.max_steps == 2
    dropped = [str(w.message) for w in caught if "standalone loop has no" in str(w.message)]
    assert dropped and "optim" in dropped[0]
    with pytest.raises(ValueError, match="GRPOLoopConfig"):
        to_loop_config(recipe, use_vllm=True)


def test_replace_validates_again():
    recipe = get_recipe("smoltldr-length-small")
    assert recipe.replace(description="x").description == "x"
    with pytest.raises(ValueError, match="max_prompt_length"):
        recipe.replace(training={**recipe.training, "max_prompt_length": 256})
    with pytest.raises(ValueError, match="quantization"):
        recipe.replace(quantization="3bit")


def test_every_shipped_recipe_has_a_short_summary_and_says_what_its_metric_measures():
    from grpo_kit.recipes.catalogue import RECIPES

    for recipe in RECIPES.values():
        assert 0 < len(recipe.summary) <= 27, recipe.name  # the `grpo-kit recipes` table fits 80 columns
        assert len(recipe.measures) > 40, recipe.name
    for name in ("smoltldr-length", "smoltldr-length-small"):  # the length reward measures length only
        measures = RECIPES[name].measures
        assert measures.startswith("Length only") and "summar" in measures


def test_dataset_kwargs_that_are_not_a_mapping_are_one_line_naming_the_json_form(capsys):
    """`--set dataset_kwargs={tasks: [colour]}` is not JSON, so it arrives as a string: refused before anything
    loads, the line showing the JSON form, not a TypeError later."""
    from grpo_kit.cli import main

    assert main(["train", "--recipe", "shapes-vlm-cpu", "--set", "dataset_kwargs={tasks: [colour]}"]) == 2
    captured = capsys.readouterr()
    err = " ".join((captured.out + captured.err).split())
    assert "dataset_kwargs='{tasks: [colour]}' must be a mapping" in err and '{"tasks": ["colour"]}' in err
    assert "Traceback" not in err
