"""grpo_kit.runs.plan: a run is planned (every check) before a model loads, and the same recipe gives the same run."""

from __future__ import annotations

import pytest
import torch

from grpo_kit import runs


def test_the_same_recipe_gives_the_same_lora_initialisation():
    # Before runs.load_recipe_model seeded get_peft_model, LoRA's random A matrices differed from process to
    # process, so `grpo-kit train` twice with one seed logged different grad_norm/loss from step 1.
    recipe = runs.plan_run(
        "smoltldr-length-small", overrides={"model": "tiny"}, max_steps=1, output_dir="unused"
    ).recipe
    torch.manual_seed(1)
    first, _ = runs.load_recipe_model(recipe)
    torch.manual_seed(2)  # whatever the global RNG did before
    second, _ = runs.load_recipe_model(recipe)
    a = {n: p for n, p in first.named_parameters() if "lora_A" in n}
    assert a and all(torch.equal(p, dict(second.named_parameters())[n]) for n, p in a.items())


def test_plan_checks_before_anything_loads(tmp_path):
    plan = runs.plan_run(
        "smoltldr-length-small", overrides={"model": "tiny", "loop": "trl"}, max_steps=2, output_dir=tmp_path
    )
    assert (plan.loop, plan.output_dir, plan.path_config.max_steps) == ("trl", tmp_path, 2)
    with pytest.raises(ValueError, match="choose one of"):
        runs.plan_run("smoltldr-length-small", loop="vllm")
    with pytest.raises(FileNotFoundError, match="no checkpoint-N"):
        runs.plan_run("smoltldr-length-small", output_dir=tmp_path, resume=True, overrides={"model": "tiny"})


def test_trained_model_located_and_its_base_model_named(tmp_path):
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text('{"base_model_name_or_path": "some/base"}')
    trained = runs.TrainedModel.locate(tmp_path)
    assert (trained.adapter_dir, trained.model_dir, trained.run) == (tmp_path / "adapter", None, None)
    assert trained.base_model_name() == "some/base"
    assert trained.base_model_name("given/base") == "given/base"
    (tmp_path / "run.json").write_text('{"model": "tiny"}')
    for source in (
        tmp_path,
        tmp_path / "adapter",
    ):  # the run folder, or its adapter/: run.json names the base
        assert runs.TrainedModel.locate(source).base_model_name() == "tiny"
    (tmp_path / "adapter" / "nothing").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no adapter"):
        runs.TrainedModel.locate(tmp_path / "adapter" / "nothing")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        runs.TrainedModel.locate(tmp_path / "missing")


def test_guided_sampling_is_refused_off_the_standalone_loop_before_anything_loads(tmp_path):
    """Only the standalone loop samples from a ``sampling_prompt``; GRPOTrainer would sample from ``prompt``."""
    import dataclasses

    from datasets_prep import load_gsm8k, synthetic_gsm8k
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.trainers import trl_path

    recipe = get_recipe("gsm8k-cpu")
    guided = dataclasses.replace(
        recipe, dataset_kwargs={**recipe.dataset_kwargs, "worked_example_guides": True}
    )
    assert guided.guided_sampling and not recipe.guided_sampling
    # held-out rows carry the example in their prompt (the with-example figure), in dataset order or not
    assert guided.held_out_kwargs == {"worked_example_fade": None, "worked_example_guides": False}
    loaded = []

    def loader(*args, **kwargs):
        loaded.append(args)
        raise AssertionError("the model was loaded before the refusal")

    refusal = "only the standalone loop does; the TRL path would sample from 'prompt'. Use --loop standalone"
    with pytest.raises(ValueError, match=refusal):
        trl_path.build_trainer(guided, model_loader=loader, output_dir=tmp_path)
    guided_rows = load_gsm8k(source=synthetic_gsm8k(4), worked_example=True, worked_example_guides=True)
    with pytest.raises(ValueError, match=refusal):  # a dataset with the column, whatever the recipe says
        trl_path.build_trainer(recipe, train_dataset=guided_rows, model_loader=loader, output_dir=tmp_path)
    assert not loaded


def test_a_lora_target_the_model_lacks_is_refused_from_its_config_before_the_weights_load(tmp_path):
    def plan(targets):
        overrides = {"model": "tiny", "lora": {"target_modules": targets}}
        return runs.plan_run("smoltldr-length-small", overrides=overrides, output_dir=tmp_path / "run")

    with pytest.raises(ValueError, match=r"lora.target_modules=\['nope_proj'\] names no module of tiny"):
        plan(["nope_proj"])
    assert not (tmp_path / "run").exists()  # nothing written
    assert list(plan(["q_proj", "v_proj"]).recipe.lora.target_modules) == ["q_proj", "v_proj"]
    assert plan(r".*self_attn\.(q|v)_proj").recipe.lora is not None  # peft's regex rule, as peft matches it
