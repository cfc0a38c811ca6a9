"""grpo_kit.run: a run is planned (every check) before a model loads, and the same recipe gives the same run."""

from __future__ import annotations

import pytest
import torch

from grpo_kit import run


def test_the_same_recipe_gives_the_same_lora_initialisation():
    # Before run.load_model seeded get_peft_model, LoRA's random A matrices differed from process to
    # process, so `grpo-kit train` twice with one seed logged different grad_norm/loss from step 1.
    recipe = run.plan_run(
        "smoltldr-length-small", overrides={"model": "tiny"}, max_steps=1, output_dir="unused"
    ).recipe
    torch.manual_seed(1)
    first, _ = run.load_model(recipe)
    torch.manual_seed(2)  # whatever the global RNG did before
    second, _ = run.load_model(recipe)
    a = {n: p for n, p in first.named_parameters() if "lora_A" in n}
    assert a and all(torch.equal(p, dict(second.named_parameters())[n]) for n, p in a.items())


def test_plan_checks_before_anything_loads(tmp_path):
    plan = run.plan_run(
        "smoltldr-length-small", overrides={"model": "tiny", "loop": "trl"}, max_steps=2, output_dir=tmp_path
    )
    assert (plan.loop, plan.output_dir, plan.path_config.max_steps) == ("trl", tmp_path, 2)
    with pytest.raises(ValueError, match="choose one of"):
        run.plan_run("smoltldr-length-small", loop="vllm")
    with pytest.raises(FileNotFoundError, match="no checkpoint-N"):
        run.plan_run("smoltldr-length-small", output_dir=tmp_path, resume=True, overrides={"model": "tiny"})


def test_run_paths_and_base_model_name(tmp_path):
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text('{"base_model_name_or_path": "some/base"}')
    adapter_dir, model_dir = run.run_paths(tmp_path)
    assert (adapter_dir, model_dir) == (tmp_path / "adapter", None)
    assert run.base_model_name(tmp_path, adapter_dir) == "some/base"
    (tmp_path / "run.json").write_text('{"model": "tiny"}')
    assert run.base_model_name(tmp_path, adapter_dir) == "tiny"
    with pytest.raises(FileNotFoundError, match="holds no adapter"):
        run.run_paths(tmp_path / "adapter" / "nothing")
