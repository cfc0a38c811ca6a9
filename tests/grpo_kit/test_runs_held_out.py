"""Held-out is held out: for every recipe the evaluation rows share no prompt with the training rows, they
come from the recipe (test split, their own seed, or rows reserved before training), fewer than asked is
said, and a recipe with tools is evaluated with its tools."""

from __future__ import annotations

import json

import pytest

from grpo_kit.recipes.catalogue import RECIPES, get_recipe
from grpo_kit.runs.held_out import (
    HELD_OUT_SEEDS,
    evaluate_held_out,
    held_out_rows,
    held_out_source,
    prompt_key,
    reserved_count,
    training_dataset,
)


def _offline_skip(error: Exception):
    pytest.skip(f"the recipe's dataset is on the Hub and not reachable here: {str(error)[:80]}")


@pytest.mark.parametrize("name", list(RECIPES))
def test_held_out_and_training_prompts_are_disjoint_by_content(name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a Hub recipe is checked where its data is cached
    recipe = RECIPES[name]
    try:
        training = training_dataset(recipe)
        rows = held_out_rows(recipe, recipe.eval_prompts, training=training)
    except OSError as error:
        _offline_skip(error)

    def key(row):  # an image task asks one question of many pictures: a row is its prompt and its picture
        image = row.get("image")
        return prompt_key(row["prompt"]) + (image.tobytes().hex() if image is not None else "")

    train_keys = {key(r) for r in training}
    held_keys = [key(r) for r in rows]
    assert rows and train_keys.isdisjoint(held_keys)
    assert len(set(held_keys)) == len(held_keys)  # and no held-out prompt twice


def test_each_recipe_says_where_its_held_out_rows_come_from():
    sources = {name: held_out_source(r) for name, r in RECIPES.items()}
    assert sources["calculator-tool-cpu"] == "test split"  # generated apart from the training questions
    assert sources["smoltldr-length-small"] == sources["gsm8k-cpu"] == "generated"  # a seed of their own
    assert sources["gsm8k-unsloth"] == "test split"  # GSM8K's test split on the Hub
    assert sources["deepmath-accuracy"] == "reserved"  # no test split: rows set aside before training
    assert (
        sources["shapes-vlm-cpu"] == "test split"
    )  # pictures drawn from another seed (datasets_prep.images)


def test_synthetic_held_out_rows_come_from_their_own_seed():
    import datasets_prep

    recipe = get_recipe("gsm8k-cpu")
    rows = held_out_rows(recipe, 8)
    seed = HELD_OUT_SEEDS["gsm8k"]
    own = recipe.load_dataset(source=datasets_prep.synthetic_gsm8k(32, seed=seed), size=32)
    assert [r["answer"] for r in rows] == list(own["answer"][: len(rows)])
    # synthetic posts: the seeded stream after the 64 training rows (where the README's figures come from)
    tldr = get_recipe("smoltldr-length-small")
    stream = tldr.load_dataset(size=96)
    assert [r["prompt"] for r in held_out_rows(tldr, 8)] == list(stream["prompt"][64:72])


def test_calculator_held_out_is_its_test_split_not_its_training_tail():
    import datasets_prep

    recipe = get_recipe("calculator-tool-cpu")
    rows = held_out_rows(recipe, 16)
    test = datasets_prep.load_tool_task_split("test", **dict(recipe.dataset_kwargs))
    assert [prompt_key(r["prompt"]) for r in rows] == [prompt_key(p) for p in test["prompt"][:16]]


def test_rows_are_reserved_before_training_when_there_is_no_test_split(tmp_path):
    rows = [{"question": f"What is {i} + {i}?", "answer": f"#### {2 * i}"} for i in range(40)] + [
        {"question": "What is 0 + 0?", "answer": "#### 0"}
    ]  # repeats a training question
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows))
    recipe = get_recipe("gsm8k-cpu", dataset_source=str(data), dataset_size=None, eval_prompts=8)
    assert held_out_source(recipe) == "reserved" and reserved_count(recipe) == 8
    training = training_dataset(recipe)
    assert len(training) == len(rows) - 8  # the last 8 rows never reach training
    with pytest.warns(UserWarning, match="8 held-out prompts asked for, 7 exist"):
        held = held_out_rows(recipe, 8)
    assert {prompt_key(p) for p in training["prompt"]}.isdisjoint(prompt_key(r["prompt"]) for r in held)


def test_with_a_fading_example_held_out_rows_carry_it_and_a_training_question_is_caught_without_it(tmp_path):
    """A curriculum renders a row by its place: held-out rows are rendered without it (the example on every
    one), and a held-out question that is a training question is dropped even when the training row, past the
    fade, shows no example."""
    rows = [{"question": f"What is {i} + {i}?", "answer": f"#### {2 * i}"} for i in range(40)] + [
        {"question": "What is 30 + 30?", "answer": "#### 60"}
    ]  # repeats training row 30, which the fade below leaves without the example
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows))
    recipe = get_recipe(
        "gsm8k-cpu",
        dataset_source=str(data),
        dataset_size=None,
        eval_prompts=8,
        dataset_kwargs={"worked_example": True, "worked_example_fade": 20},
    )
    assert held_out_source(recipe) == "reserved"
    training = training_dataset(recipe)
    assert len(training[0]["prompt"]) == 4 and len(training[30]["prompt"]) == 2  # the fade, in order
    with pytest.warns(UserWarning, match="8 held-out prompts asked for, 7 exist"):
        held = held_out_rows(recipe, 8)
    assert all(len(r["prompt"]) == 4 for r in held)  # rows 33-39, each with the example, not the fade's tail
    assert "What is 30 + 30?" not in [r["prompt"][-1]["content"] for r in held]
    # without a curriculum the rule stays the prompt's whole content
    plain = recipe.replace(dataset_kwargs={"worked_example": True})
    assert [r["prompt"] for r in held_out_rows(plain, 7)] == [r["prompt"] for r in held]


def test_fewer_rows_than_asked_is_said_and_fewer_are_used():
    recipe = get_recipe("calculator-tool-cpu")  # 32 test questions
    with pytest.warns(UserWarning, match="40 held-out prompts asked for, 32 exist"):
        assert len(held_out_rows(recipe, 40)) == 32


def test_a_recipe_with_tools_is_evaluated_with_its_tools():
    from grpo_kit.evaluation import evaluate
    from grpo_kit.models import tiny_model
    from grpo_kit.rollout.generation import Decoding
    from grpo_kit.rollout.tool_rollout import tool_generate
    from grpo_kit.rollout.tool_sets import resolve_tools

    recipe = get_recipe("calculator-tool-cpu", max_completion_length=4)
    model, tokenizer = tiny_model(seed=0)
    rows = held_out_rows(recipe, 2)
    funcs = recipe.build_reward_funcs(tokenizer)
    report = evaluate_held_out(recipe, model, tokenizer, funcs, rows)
    # the same multi-turn rollouts lesson 8 runs (grpo_kit.rollout.tool_rollout), with the recipe's budget
    by_hand = evaluate(
        model,
        tokenizer,
        rows,
        funcs,
        num_prompts=2,
        reward_weights=recipe.reward_weights,
        decoding=Decoding(max_new_tokens=4),
        generate_fn=tool_generate(resolve_tools("calculator"), max_tool_calling_iterations=1),
    )
    assert report.completions == by_hand.completions and report.per_prompt == by_hand.per_prompt
    assert report.num_prompts == 2 and "tool_success_reward" in report.reward_names


def test_another_generator_evaluates_with_the_recipe_s_decoding():
    """``generate_fn`` (lesson 6 on a GPU: the model's vLLM engine) replaces the generation, nothing else: it gets
    the recipe's decoding, and its completions are scored as the library's own are."""
    from grpo_kit.models import tiny_model
    from grpo_kit.rollout.generation import generate
    from grpo_kit.runs.held_out import evaluate_held_out

    recipe = get_recipe("smoltldr-length-small", model="tiny", max_completion_length=8)
    model, tokenizer = tiny_model(seed=0)
    rows = held_out_rows(recipe, 3)
    funcs = recipe.build_reward_funcs(tokenizer)
    seen = []

    def recording(model, tokenizer, prompts, num_generations, decoding):
        seen.append((len(prompts), num_generations, decoding.max_new_tokens, decoding.greedy))
        return generate(model, tokenizer, prompts, num_generations, decoding)

    own = evaluate_held_out(recipe, model, tokenizer, funcs, rows)
    given = evaluate_held_out(recipe, model, tokenizer, funcs, rows, generate_fn=recording)
    assert seen == [(3, 1, 8, True)]  # the greedy answers, at the recipe's completion budget
    assert given.completions == own.completions and given.per_prompt == own.per_prompt


def _own_recipe(folder, source: str, held_out: str | None = None, **fields):
    """A recipe file over ``folder/source`` (your own rows, loader ``prompts``), read back as a recipe."""
    from grpo_kit.recipes.files import load_recipe_file

    lines = ["name: own", "model: tiny", "dataset:", f"  source: {source}", "  prompt: question"]
    lines += [f"  held_out: {held_out}"] if held_out else []
    lines += ["rewards: [format_reward]", *(f"{key}: {value}" for key, value in fields.items())]
    (folder / "own.yaml").write_text("\n".join(lines) + "\n")
    return load_recipe_file(folder / "own.yaml")


def _write_rows(path, n: int, start: int = 0) -> None:
    path.write_text(
        "".join(json.dumps({"question": f"What is {i} + 1?"}) + "\n" for i in range(start, start + n))
    )


def test_a_20_row_dataset_is_refused_naming_its_size_or_trains_on_rows_the_carve_leaves(tmp_path):
    _write_rows(tmp_path / "small.jsonl", 20)
    recipe = _own_recipe(
        tmp_path, "small.jsonl"
    )  # no held_out: the last eval_prompts (32) rows would be reserved
    assert held_out_source(recipe) == "reserved" and reserved_count(recipe) == 32
    with pytest.raises(ValueError, match=r"has 20 rows, too few to hold out its last 32") as refused:
        training_dataset(recipe)
    message = str(refused.value)
    assert (
        "\n" not in message and "held_out: {fraction: 0.2, seed: 0}" in message and "eval_prompts" in message
    )
    # either fix it names trains on rows the evaluation never sees
    for fixed, n_held in (
        (recipe.replace(eval_prompts=4), 4),
        (_own_recipe(tmp_path, "small.jsonl", "0.2"), 4),
    ):
        training = training_dataset(fixed)
        held = held_out_rows(fixed, n_held, training=training)
        assert len(training) == 16 and len(held) == 4
        assert {prompt_key(p) for p in training["prompt"]}.isdisjoint(prompt_key(r["prompt"]) for r in held)


@pytest.mark.parametrize("eval_prompts", [1, 8, 32])
def test_the_reserved_rows_never_take_every_row(tmp_path, eval_prompts):
    """Reserved rows leave at least as many rows to train on, or the dataset is refused, naming its size."""
    for n in (1, 2, 3, 15, 16, 17, 40, 63, 64, 100):
        _write_rows(tmp_path / "rows.jsonl", n)
        recipe = _own_recipe(tmp_path, "rows.jsonl", eval_prompts=eval_prompts)
        if n < 2 * eval_prompts:
            with pytest.raises(ValueError, match=rf"has {n} rows?[,;]"):
                training_dataset(recipe)
        else:
            assert len(training_dataset(recipe)) == n - eval_prompts >= eval_prompts


def _named_split(tmp_path, test_rows: int):
    data = tmp_path / "data"
    data.mkdir()
    _write_rows(data / "train.jsonl", 60)
    _write_rows(data / "test.jsonl", test_rows, start=1000)
    return _own_recipe(tmp_path, "data", "{split: test}")


def test_a_named_split_smaller_than_eval_prompts_is_evaluated_whole_and_said_to_be(tmp_path):
    import warnings

    from grpo_kit.runs.held_out import held_out_cut, held_out_summary

    recipe = _named_split(tmp_path, 20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the whole split, as asked: nothing to warn about
        assert len(held_out_rows(recipe, recipe.eval_prompts)) == 20
    summary = held_out_summary(recipe, evaluated=20)
    assert summary == {"source": "named split", "split": "test", "rows": 20, "split_rows": 20}
    assert held_out_cut(summary) is None


def test_a_40_row_test_split_cut_to_eval_prompts_says_so_in_one_line(tmp_path):
    from grpo_kit.runs.held_out import held_out_cut, held_out_summary

    recipe = _named_split(tmp_path, 40)
    assert recipe.eval_prompts == 32 and len(held_out_rows(recipe, 32)) == 32
    summary = held_out_summary(recipe, evaluated=32)
    assert summary["rows"] == 32 and summary["split_rows"] == 40
    assert held_out_cut(summary) == (
        "held-out: 32 of 40 rows of the test split (eval_prompts); --eval-prompts 40 evaluates it whole"
    )
    assert (
        len(held_out_rows(recipe, 40)) == 40 and held_out_cut(held_out_summary(recipe, evaluated=40)) is None
    )
