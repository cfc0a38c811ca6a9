"""grpo_kit.rollout.scoring and grpo_kit.rollout.generation: one rule for None, and the same figure for the same text
wherever it is scored (the evaluation and report card, samples.md, `grpo-kit generate`)."""

from __future__ import annotations

import math

import pytest

from grpo_kit.rollout.generation import Decoding, GeneratedCompletion, generate
from grpo_kit.rollout.scoring import score_completions, weighted_total


def _sometimes_none(completions, **kwargs):
    return [None if "skip" in str(c) else 1.0 for c in completions]


def _always_none(completions, **kwargs):
    return [None for _ in completions]


def test_one_rule_for_none_nansum_and_nan_when_no_function_scored():
    rows = [{"prompt": "a"}, {"prompt": "b"}]
    table, totals = score_completions(
        [_sometimes_none, _always_none], rows, ["fine", "skip me"], weights=[2.0, 5.0]
    )
    assert table[0][0] == 1.0 and math.isnan(table[0][1])  # None -> NaN in the (N, F) table
    assert totals[0] == 2.0  # the functions that scored it, weighted (TRL's nansum)
    assert math.isnan(totals[1])  # nobody scored it: unscorable, not 0
    assert math.isnan(weighted_total([math.nan], [1.0])) and weighted_total([1.0, math.nan], [3, 1]) == 3.0


def test_the_evaluation_and_samples_use_that_rule_alike():
    from grpo_kit.evaluation import evaluate, samples

    rows = [{"prompt": "a"}, {"prompt": "b"}]
    canned = [[GeneratedCompletion("fine", 1, True, [1])], [GeneratedCompletion("skip", 1, True, [2])]]
    report = evaluate(None, None, rows, [_sometimes_none], num_prompts=2, sampler=lambda p, g: canned)
    scored = samples.score_answers(["a", "b"], [c[0] for c in canned], [_sometimes_none])
    assert report.per_prompt["reward"][0] == scored[0] == 1.0
    assert math.isnan(report.per_prompt["reward"][1]) and scored[1] is None
    assert report.metrics["reward"] == 1.0  # the unscorable answer is left out of the mean, not counted as 0


def test_the_same_text_gets_the_same_figure_in_eval_report_card_samples_and_generate(tmp_path):
    """The token-counting length reward counts the EOS the way TRL does (completion_ids include it); before
    this room, `grpo-kit generate` scored the text alone and came out 1 off from samples.md."""
    import json

    from grpo_kit.evaluation import samples
    from grpo_kit.evaluation.report_card import write_report_card
    from grpo_kit.models import tiny_model
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.runs.held_out import evaluate_held_out, held_out_rows

    recipe = get_recipe("smoltldr-length-small", model="tiny", max_completion_length=6)
    model, tokenizer = tiny_model(seed=0)
    rows = held_out_rows(recipe, 3)
    funcs = recipe.build_reward_funcs(tokenizer)
    report = evaluate_held_out(recipe, model, tokenizer, funcs, rows)
    # samples.md and `grpo-kit generate`: the one decoder, the one scorer
    answers = samples.answer_completions(model, tokenizer, [r["prompt"] for r in rows], max_new_tokens=6)
    assert [a.text for a in answers] == report.completions  # the same text...
    pairs = samples.before_after([r["prompt"] for r in rows], answers, answers, reward_funcs=funcs)
    assert [p.reward_before for p in pairs] == report.per_prompt["reward"]  # ...the same figure
    files = write_report_card(tmp_path, report, report, title="same text")
    card = json.loads(files["eval.json"].read_text())
    assert card["after"]["per_prompt"]["reward"] == report.per_prompt["reward"]
    ended = [a for a in answers if a.ended]
    if ended:  # text alone (no ids) would drop the EOS: the 1-off the issue reported
        alone = samples.score_answers([rows[0]["prompt"]], [ended[0].text], funcs)
        with_ids = samples.score_answers([rows[0]["prompt"]], [ended[0]], funcs)
        assert alone != with_ids


def test_decoding_from_training_spells_the_run_settings_once():
    d = Decoding.from_training({"max_completion_length": 7, "temperature": 0.8, "top_k": None, "top_p": 0.9})
    assert (d.max_new_tokens, d.temperature, d.top_k, d.top_p, d.greedy) == (7, 0.8, 0, 0.9, False)
    assert Decoding.from_training({}, greedy=True).max_new_tokens == 512  # GRPOConfig's default


def test_generate_is_seeded_and_respects_chat_template_kwargs():
    from grpo_kit.models import tiny_model

    model, tokenizer = tiny_model(seed=0)
    prompt = [[{"role": "user", "content": "hi"}]]
    d = Decoding(max_new_tokens=4, seed=3)
    assert [c.ids for c in generate(model, tokenizer, prompt, 2, d)[0]] == [
        c.ids for c in generate(model, tokenizer, prompt, 2, d)[0]
    ]
    seen = []
    original = tokenizer.apply_chat_template

    def recording(*args, **kwargs):
        seen.append(kwargs.get("enable_thinking"))
        return original(*args, **kwargs)

    tokenizer.apply_chat_template = recording
    generate(model, tokenizer, prompt, 1, d.replace(chat_template_kwargs={"enable_thinking": False}))
    assert seen and seen[-1] is False  # the recipe's chat_template_kwargs reach the template


def _grpo_kit_modules() -> list[str]:
    import pkgutil

    import grpo_kit

    return sorted(
        m.name
        for m in pkgutil.walk_packages(grpo_kit.__path__, "grpo_kit.")
        if m.name != "grpo_kit.rollout.scoring"
    )


@pytest.mark.parametrize("name", _grpo_kit_modules())
def test_scoring_is_the_only_caller_of_call_reward_funcs(name):
    """Every module of grpo_kit but scoring (a room added later is covered here without editing this file)."""
    import importlib.util
    from pathlib import Path

    source = Path(importlib.util.find_spec(name).origin).read_text()
    assert "call_reward_funcs(" not in source.replace("``rewards.call_reward_funcs``", "")
