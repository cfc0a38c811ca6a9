"""Held-out samples are scored the one way (rewards.call_reward_funcs): None is skipped, not counted as 0."""

from __future__ import annotations

import pytest

from grpo_kit.evaluation.samples import before_after, mean_reward, score_answers


def only_long(completions, **kwargs):
    return [1.0 if len(c) > 3 else None for c in completions]  # None: "cannot judge"


def length(completions, **kwargs):
    return [float(len(c)) for c in completions]


async def async_bonus(completions, **kwargs):
    return [0.5 for _ in completions]


def test_none_is_skipped_not_counted_as_zero():
    assert score_answers(["p", "q"], ["long answer", "ab"], [only_long]) == [1.0, None]
    # Weighted sum over the functions that scored the answer, as TRL sums them.
    assert score_answers(["p", "q"], ["long answer", "ab"], [only_long, length], [2.0, 1.0]) == [13.0, 2.0]


def test_mean_reward_averages_only_scored_answers_and_async_functions_run():
    pairs = before_after(
        ["p", "q"], ["long answer", "ab"], ["abcd", "abcde"], reward_funcs=[only_long, async_bonus]
    )
    assert [s.reward_before for s in pairs] == [1.5, 0.5]
    assert mean_reward(pairs, "after") == 1.5
    assert mean_reward(before_after(["p"], ["ab"], ["cd"], reward_funcs=[only_long]), "before") is None


def test_a_failing_reward_function_is_named():
    from rewards import RewardFunctionError

    def broken(completions, **kwargs):
        raise KeyError("answer")

    with pytest.raises(RewardFunctionError, match="broken"):
        score_answers(["p"], ["x"], [broken])


def test_no_held_out_prompts_scores_nothing_even_with_a_column_reading_reward():
    # `grpo-kit train --samples 0` on calculator-tool-cpu crashed here: tool_answer_reward needs `answer`.
    from rewards import tool_success_reward

    assert before_after([], [], [], reward_funcs=[tool_success_reward], columns={}) == []


def test_samples_md_shows_the_question_of_a_long_chat_prompt(tmp_path):
    from grpo_kit.evaluation.samples import Sample, write_samples

    example = [{"role": "user", "content": "worked example " * 40}, {"role": "assistant", "content": "ok"}]
    prompts = [[*example, {"role": "user", "content": f"question number {i}?"}] for i in range(2)]
    md, _ = write_samples([Sample(p, "b", "a", None, None) for p in prompts], tmp_path)
    rows = [line for line in md.read_text().splitlines() if line.startswith(("| 0 |", "| 1 |"))]
    assert "question number 0?" in rows[0] and "question number 1?" in rows[1]
    assert "…" in rows[0]  # the shared head (the worked example) is what gets cut


def test_samples_md_shows_a_picture_prompt_as_text_and_image(tmp_path):
    """A vision-language prompt (content blocks) reads as its text with ``[image]`` where the picture goes, not as
    the Python repr of the blocks."""
    from datasets_prep.images import shapes_rows
    from grpo_kit.evaluation.samples import Sample, write_samples

    row = shapes_rows(1, tasks=("colour",))[0]
    md, _ = write_samples([Sample(row["prompt"], "b", "a", None, None)], tmp_path)
    import html

    line = html.unescape(next(line for line in md.read_text().splitlines() if line.startswith("| 0 |")))
    assert "[user] [image] What colour is the shape?" in line
    assert "[assistant] The shape is" in line
    assert "{" not in line and "'type'" not in line


def test_report_md_shows_a_picture_prompt_as_its_question_not_content_blocks():
    """report.md's answers table: the user's question with ``[image]``, then the answer's opening; no reprs."""
    import json

    from grpo_kit.evaluation.comparison import compare_all
    from grpo_kit.evaluation.eval_report import EvalReport
    from grpo_kit.evaluation.report_card import render_report_md

    prompt = json.dumps(
        [
            {
                "role": "user",
                "content": [{"type": "image"}, {"type": "text", "text": "What colour is the shape?"}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "Answer:"}]},
        ]
    )
    settings = {"num_prompts": 2, "decoding": "greedy", "max_new_tokens": 8, "seed": 0}

    def report(answers, rewards):
        return EvalReport(
            {"reward": rewards}, [prompt, prompt], answers, ["r"], {"r": "accuracy"}, dict(settings)
        )

    before, after = report([" red", " red"], [0.0, 0.0]), report([" blue, left", " red, right"], [1.0, 1.0])
    text = render_report_md(before, after, compare_all(before, after))
    row = next(line for line in text.splitlines() if line.startswith("| 0 |"))
    assert "&#91;image&#93; What colour is the shape? → Answer:" in row and "type" not in row, row
