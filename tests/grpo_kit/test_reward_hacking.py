"""A better reward while the answers collapse is flagged, everywhere a verdict is shown; an honest win is not."""

from __future__ import annotations

import json

from shared import GOOD, GSM8K_FUNCS, PLAIN, canned, gsm8k_rows

import rewards
from grpo_kit.evaluation import evaluate
from grpo_kit.evaluation.report_card import write_report_card
from grpo_kit.evaluation.reward_hacking import SUSPECTED, collapse_signs, judge_headline

POSTS = [f"A long comment about post number {i}, " + "with many more words in it " * 6 for i in range(8)]


def _length_eval(answers: list[str]):
    """Lesson 4's setting: a character-target length reward (50), greedy answers given."""
    rows = [{"prompt": f"Summarize post {i}."} for i in range(len(answers))]
    return evaluate(
        None,
        None,
        rows,
        [rewards.length_reward(50, unit="chars")],
        num_prompts=len(rows),
        sampler=canned(answers),
    )


def test_lesson_4s_collapse_to_empty_answers_is_flagged_not_improved(tmp_path):
    before, after = _length_eval(POSTS), _length_eval([""] * 8)  # an empty answer is exactly 50 chars off
    signs = collapse_signs(before, after)
    assert "empty answers 0% -> 100%" in signs and any(s.startswith("mean answer length") for s in signs)
    paths = write_report_card(tmp_path, before, after, n_boot=500)
    data = json.loads(paths["eval.json"].read_text())
    error = next(c for name, c in data["comparisons"].items() if name.startswith("length_error/"))
    assert error["mean_diff"] < 0 and error["ci_high"] < 0  # the CI alone says "improved"...
    assert error["verdict"] == SUSPECTED  # ...the answers say otherwise
    assert data["reward_hack_signs"] == signs
    assert "improved" not in {c["verdict"] for c in data["comparisons"].values()}
    md = paths["report.md"].read_text()
    assert "**Reward hack suspected.**" in md and "empty answers 0% -> 100%" in md


def test_one_template_for_every_prompt_is_flagged():
    template = "<reasoning>\n...\n</reasoning>\n<answer>\n7\n</answer>\n"
    varied = [f"The answer is {i}, since {i} apples" for i in range(8)]
    before = evaluate(None, None, gsm8k_rows(8), GSM8K_FUNCS, num_prompts=8, sampler=canned(varied))
    after = evaluate(None, None, gsm8k_rows(8), GSM8K_FUNCS, num_prompts=8, sampler=canned([template] * 8))
    # the echoed template's "..." is no reasoning either
    assert collapse_signs(before, after) == [
        "identical answers 12% -> 100%",
        "reasoning of 2 words or fewer 0% -> 100%",
    ]


def test_one_number_as_reasoning_is_flagged_though_the_answers_differ():
    """gsm8k-cpu's hack without calculation_reward: the layout kept, one number in place of the reasoning, a
    different number per problem (so "identical answers" stays quiet) and answers not a quarter as long."""
    prose = [
        f"Tom has {i} apples and buys 3 more, so he has {i + 3} apples in all. The answer is {i + 3}."
        for i in range(8)
    ]
    one_number = [f"<reasoning>\n{i + 3}\n</reasoning>\n<answer>\n{i + 3}\n</answer>\n" for i in range(8)]
    rows = gsm8k_rows(8)
    before = evaluate(None, None, rows, GSM8K_FUNCS, num_prompts=8, sampler=canned(prose))
    after = evaluate(None, None, rows, GSM8K_FUNCS, num_prompts=8, sampler=canned(one_number))
    assert collapse_signs(before, after) == ["reasoning of 2 words or fewer 0% -> 100%"]
    assert judge_headline(before, after)[0].verdict == SUSPECTED  # the format reward rose: not "improved"
    # a calculation is a step, in either tag; half of the answers without one is flagged, 3 of 8 is not
    steps = [f"<think>\n{i} + 3 = {i + 3}\n</think>\n<answer>\n{i + 3}\n</answer>\n" for i in range(8)]
    after = evaluate(None, None, rows, GSM8K_FUNCS, num_prompts=8, sampler=canned(steps))
    assert collapse_signs(before, after) == []
    for stepless, flagged in ((4, True), (3, False)):
        mixed = one_number[:stepless] + steps[stepless:]
        after = evaluate(None, None, rows, GSM8K_FUNCS, num_prompts=8, sampler=canned(mixed))
        assert bool(collapse_signs(before, after)) is flagged, stepless


def test_an_honest_win_keeps_its_verdict(tmp_path):
    good = [GOOD.replace("3 + 4", f"3 + 4 (#{i})") for i in range(4)]  # right, and not one template
    before = evaluate(None, None, gsm8k_rows(4), GSM8K_FUNCS, num_prompts=4, sampler=canned([PLAIN] * 4))
    after = evaluate(None, None, gsm8k_rows(4), GSM8K_FUNCS, num_prompts=4, sampler=canned(good))
    assert collapse_signs(before, after) == []
    data = json.loads(write_report_card(tmp_path, before, after, n_boot=500)["eval.json"].read_text())
    assert data["reward_hack_signs"] == [] and data["comparisons"]["format"]["verdict"] == "improved"


def test_a_base_model_that_was_already_terse_is_not_flagged():
    before = _length_eval(["", "", "", "", "", POSTS[0], POSTS[1], POSTS[2]])  # 62% empty already
    after = _length_eval(["", "", "", "", "", "", POSTS[1], POSTS[2]])  # 75%: +12 points, not a collapse
    assert not any(s.startswith("empty answers") for s in collapse_signs(before, after))


def test_judge_headline_states_what_the_report_card_states(tmp_path):
    # lesson 4 and run.json's summary read their verdict through judge_headline: the same as the report card's
    before, after = _length_eval(POSTS), _length_eval([""] * 8)
    comparison, signs = judge_headline(before, after)
    assert comparison.metric.startswith("length_error/") and comparison.verdict == SUSPECTED
    assert signs == collapse_signs(before, after)
    card = json.loads(write_report_card(tmp_path, before, after)["eval.json"].read_text())
    assert card["comparisons"][comparison.metric]["verdict"] == comparison.verdict
    assert card["comparisons"][comparison.metric]["ci_high"] == comparison.ci_high
    # 100 characters -> exactly 50: a real win, the answers half as long but not gone
    comparison, signs = judge_headline(
        _length_eval([p[:100] for p in POSTS]), _length_eval([p[:50] for p in POSTS])
    )
    assert comparison.verdict == "improved" and signs == []


def test_a_collapse_with_a_falling_reward_is_not_called_a_reward_that_improved(tmp_path):
    # answers of about 50 characters collapse to one word: the length error grows (the reward falls), and the
    # card must say the answers collapsed without claiming the reward improved (shapes-vlm-cpu's report.md did)
    before = _length_eval([p[:50] for p in POSTS])
    after = _length_eval(["the"] * 8)
    signs = collapse_signs(before, after)
    assert signs
    paths = write_report_card(tmp_path, before, after, n_boot=500)
    data = json.loads(paths["eval.json"].read_text())
    assert SUSPECTED not in {c["verdict"] for c in data["comparisons"].values()}
    md = paths["report.md"].read_text()
    assert "**The answers collapsed.** No metric improved with them" in md
    assert "reward improved" not in md
