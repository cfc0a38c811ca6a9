"""grpo_kit.runs.folder: a run folder's run.json written and read in one place (checked), and a trained model
found in a run folder, its adapter/ or an exported folder, with the base model its run.json names."""

from __future__ import annotations

import json

import pytest
import torch

from grpo_kit.models import tiny_model
from grpo_kit.runs import RunFolder, RunJsonError, TrainedModel


def test_a_trained_model_loads_from_its_run_folder_on_the_base_run_json_names(tmp_path):
    with pytest.raises(FileNotFoundError, match="holds no adapter"):
        TrainedModel.locate(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a folder"):
        TrainedModel.locate(tmp_path / "missing")
    model, tokenizer = tiny_model(seed=0, lora={"r": 4, "lora_alpha": 8, "lora_dropout": 0.0})
    run = tmp_path / "run"
    model.save_pretrained(run / "adapter")
    tokenizer.save_pretrained(run / "adapter")
    (run / "run.json").write_text(json.dumps({"model": "tiny"}))
    loaded, loaded_tokenizer = TrainedModel.locate(run).load()
    assert hasattr(loaded, "peft_config") and loaded_tokenizer.pad_token_id == tokenizer.pad_token_id
    ids = torch.tensor([[1, 2, 3]])
    with torch.no_grad():
        assert torch.allclose(loaded(ids).logits, model(ids).logits, atol=1e-5)


def test_a_run_folder_is_the_one_reader_and_writer_of_run_json(tmp_path):
    folder = RunFolder(tmp_path / "run")
    assert not folder.holds_a_run() and folder.summary() == {}
    folder.write_summary({"recipe": "smoltldr-length-small", "model": "tiny", "steps": 2})
    assert folder.holds_a_run() and folder.summary()["steps"] == 2
    folder.run_json.write_text(json.dumps({"recipe": ["not", "a", "name"]}))
    with pytest.raises(RunJsonError, match="'recipe' is list"):
        folder.summary()


def test_the_recipe_a_run_trained_with_is_read_back_and_checked(tmp_path):
    model, _ = tiny_model(seed=0, lora={"r": 4, "lora_alpha": 8, "lora_dropout": 0.0})
    model.save_pretrained(tmp_path / "adapter")
    folder = RunFolder(tmp_path)
    folder.write_summary(
        {"recipe": "smoltldr-length-small", "model": "tiny", "training": {"max_completion_length": 24}}
    )
    trained = TrainedModel.locate(tmp_path / "adapter")  # run.json one folder up
    recipe = trained.recipe()
    assert (recipe.name, recipe.model, recipe.training["max_completion_length"]) == (
        "smoltldr-length-small",
        "tiny",
        24,
    )
    assert trained.recipe("gsm8k-cpu").name == "gsm8k-cpu"  # another recipe: the catalogue's
    folder.write_summary({"recipe": "smoltldr-length-small", "training": {"num_generations": 0}})
    with pytest.raises(ValueError, match="from .*run.json"):
        TrainedModel.locate(tmp_path).recipe()
