"""Tools on the recipe path: tool sets resolved from the recipe, every tool check before the model loads, and
one real GRPOTrainer(tools=...) step with the tiny model."""

from __future__ import annotations

import pytest

from datasets_prep.tool_tasks import CALCULATOR_TOOLS, multiply
from grpo_kit.models.embedded import smollm2_tokenizer
from grpo_kit.recipes.catalogue import get_recipe
from grpo_kit.rollout.tool_sets import TOOL_SETS, check_tool_setup, resolve_tools
from grpo_kit.trainers import trl_path

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


from shared import RecordingLoader


def tool_recipe(**overrides):
    small = {
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 12,
        "max_steps": 1,
        "dataset_size": 8,
    }
    return get_recipe("calculator-tool-cpu", **{**small, **overrides})


def no_hints(a, b) -> int:
    """Multiply.

    Args:
        a: first.
        b: second.
    """
    return a * b


def no_docstring(a: int, b: int) -> int:
    return a * b


def test_recipe_names_a_tool_set_that_resolves_to_functions():
    recipe = get_recipe("calculator-tool-cpu")
    assert recipe.tools == "calculator" and "calculator" in TOOL_SETS
    assert resolve_tools(recipe.tools) == list(CALCULATOR_TOOLS)
    assert recipe.training["max_tool_calling_iterations"] == 1
    assert recipe.reward_weights == [1.0, 0.0, 0.0]


def test_unknown_tool_set_or_template_fails_when_the_recipe_is_made():
    with pytest.raises(ValueError, match="unknown tool set 'abacus'.*calculator"):
        get_recipe("calculator-tool-cpu", tools="abacus")
    with pytest.raises(ValueError, match="unknown tool_template 'qwen'.*chatml"):
        get_recipe("calculator-tool-cpu", tool_template="qwen")


def test_recipe_dataset_is_the_tool_tasks_train_split_and_held_out_is_disjoint():
    recipe = get_recipe("calculator-tool-cpu", dataset_size=16)
    import datasets_prep

    train = recipe.load_dataset()
    test = datasets_prep.load_tool_task_split("test", **dict(recipe.dataset_kwargs))
    assert len(train) == 16 and len(test) == 32
    assert not set(train["question"]) & set(test["question"])
    with pytest.raises(ValueError, match="drop dataset_source"):
        datasets_prep.load_tool_task_split("train", source="x.jsonl")


@pytest.mark.parametrize(
    ("trainer_kwargs", "overrides", "message"),
    [
        ({"tools": [no_hints]}, {}, "no type hint for a, b"),
        ({"tools": [no_docstring]}, {}, "no docstring"),
        ({}, {"max_tool_calling_iterations": 0}, "would never run a tool"),
        ({"tools": "abacus"}, {}, "unknown tool set"),
        ({"environment_factory": 3}, {}, "environment_factory must be a class"),
    ],
)
def test_bad_tools_fail_before_the_model_loads(tmp_path, trainer_kwargs, overrides, message):
    loader = RecordingLoader()
    with pytest.raises((ValueError, TypeError), match=message):
        trl_path.build_trainer(
            tool_recipe(**overrides),
            model_loader=loader,
            output_dir=tmp_path,
            device="cpu",
            trainer_kwargs=trainer_kwargs,
        )
    assert loader.calls == []


def test_tokenizer_without_tool_support_fails_before_the_model_loads_and_names_the_helper(tmp_path):
    loader = RecordingLoader()
    recipe = tool_recipe(tool_template=None)  # keep SmolLM2's own template: it has no tool support
    with pytest.raises(ValueError, match="enable_tool_calling"):
        trl_path.build_trainer(
            recipe, model_loader=loader, tokenizer=smollm2_tokenizer(), output_dir=tmp_path, device="cpu"
        )
    assert loader.calls == []


def test_loaded_tokenizer_without_tool_support_is_refused_before_the_trainer_is_built(tmp_path):
    loader = RecordingLoader()
    with pytest.raises(ValueError, match="enable_tool_calling"):
        trl_path.build_trainer(
            tool_recipe(tool_template=None), model_loader=loader, output_dir=tmp_path, device="cpu"
        )


def test_no_tools_means_no_tool_checks():
    assert check_tool_setup(None, None, {"max_tool_calling_iterations": 0}, {"x": 1}) == {"x": 1}


def test_one_real_grpo_step_with_the_calculator_tools(tmp_path):
    loader = RecordingLoader()
    result = trl_path.train_with_trl(
        tool_recipe(), model_loader=loader, output_dir=tmp_path, device="cpu", plot=False, save_final=False
    )
    trainer = result.trainer
    assert loader.names == ["smollm2-135m-instruct"]
    assert [t.__name__ for t in trainer.tools] == [f.__name__ for f in CALCULATOR_TOOLS]
    assert "CALL" in trainer.processing_class.chat_template  # the recipe's tool_template was installed
    logged = result.log_history[0]
    assert result.global_step == 1
    assert 0.0 <= logged["tools/call_frequency"] and "tools/failure_frequency" in logged
    assert "rewards/tool_success_reward/mean" in logged


def test_a_list_of_tools_overrides_the_recipes_tool_set(tmp_path):
    kwargs = check_tool_setup("calculator", None, {}, {"tools": [multiply]})
    assert kwargs["tools"] == [multiply]


def test_cli_plan_checks_tools_before_the_model_loads(tmp_path):
    from grpo_kit.runs import plan_run

    with pytest.raises(ValueError, match="would never run a tool"):
        plan_run(
            "calculator-tool-cpu",
            loop="trl",
            overrides={"max_tool_calling_iterations": 0},
            output_dir=tmp_path / "a",
        )
    with pytest.raises(ValueError, match="standalone loop has no tool loop.*--loop trl"):
        plan_run("calculator-tool-cpu", loop="standalone", output_dir=tmp_path / "b")
