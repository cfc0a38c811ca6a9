"""Held-out evaluation, the paired bootstrap comparison, and the report card.

Metric arithmetic is checked with a canned sampler (known completions -> known rates); decoding with
``tiny_model()`` (a random 2-layer Llama with the real SmolLM2 tokenizer).
"""

from __future__ import annotations

import json
import math
import random
import sys

import pytest
import torch
from shared import GOOD, GSM8K_FUNCS, PLAIN, WRONG, canned, gsm8k_rows

import rewards
from grpo_kit.evaluation import (
    EvalReport,
    compare,
    compare_all,
    evaluate,
    reward_info,
)
from grpo_kit.evaluation.report_card import write_report_card
from grpo_kit.models import tiny_model


def _report(values: dict[str, list[float]], prompts: list[str] | None = None) -> EvalReport:
    n = len(next(iter(values.values())))
    prompts = prompts or [f"p{i}" for i in range(n)]
    return EvalReport(
        per_prompt=values,
        prompts=prompts,
        completions=[""] * n,
        reward_names=[],
        reward_kinds={},
        settings={"decoding": "greedy", "max_new_tokens": 8, "seed": 0},
    )


# --------------------------------------------------------------------------- metrics


def test_rates_from_canned_completions():
    report = evaluate(
        None,
        None,
        gsm8k_rows(4),
        GSM8K_FUNCS,
        num_prompts=4,
        sampler=canned([GOOD, WRONG, PLAIN, GOOD], clipped={2}),
    )
    m = report.metrics
    assert m["format"] == 0.75  # GOOD, WRONG, GOOD pay every format reward
    assert m["accuracy"] == 0.5  # GOOD twice
    assert m["at_max/strict_format_reward"] == 0.75
    assert m["at_max/correctness_reward"] == 0.5
    assert m["reward/correctness_reward"] == 1.0  # (2 + 0 + 0 + 2) / 4
    assert m["reward"] == pytest.approx((4.0 + 2.0 + 0.0 + 4.0) / 4)  # course max is 4.0
    assert m["clipped"] == 0.25 and m["eos"] == 0.75
    assert report.per_prompt["length"] == [len(t.split()) + 1 for t in (GOOD, WRONG, PLAIN, GOOD)]


def test_pass_at_k_and_mean_at_k():
    samples = [[PLAIN, GOOD, PLAIN], [PLAIN, PLAIN, WRONG], [GOOD, GOOD, GOOD]]
    report = evaluate(
        None,
        None,
        gsm8k_rows(3),
        GSM8K_FUNCS,
        num_prompts=3,
        k=3,
        sampler=canned([PLAIN, PLAIN, GOOD], samples),
    )
    assert report.per_prompt["pass@3/correctness_reward"] == [1.0, 0.0, 1.0]
    assert report.per_prompt["pass@3/strict_format_reward"] == [1.0, 1.0, 1.0]
    assert report.per_prompt["mean@3"] == pytest.approx([4 / 3, 2 / 3, 4.0])


def test_none_rewards_are_nan_and_skipped_in_means():
    rows = gsm8k_rows(2)
    rows[1]["answer"] = None  # correctness_reward skips a row without gold answer
    report = evaluate(None, None, rows, GSM8K_FUNCS, num_prompts=2, sampler=canned([GOOD, GOOD]))
    assert math.isnan(report.per_prompt["accuracy"][1])
    assert report.metrics["accuracy"] == 1.0


def test_length_reward_gives_a_length_error_that_falls_when_it_improves():
    fn = rewards.length_reward(4, unit="tokens")
    assert reward_info(fn).kind == "length"
    before = evaluate(
        None, None, gsm8k_rows(2), [fn], num_prompts=2, sampler=canned(["a b c d e f g h i", "a"])
    )
    # canned ids: one per word plus EOS -> 10 and 2 tokens
    assert before.per_prompt["length_error/length_reward_4_tokens"] == [6.0, 2.0]
    after = evaluate(None, None, gsm8k_rows(2), [fn], num_prompts=2, sampler=canned(["a b c", "a b c"]))
    assert compare(before, after, metric="length_error/length_reward_4_tokens", n_boot=1000).mean_diff == -4.0


def test_reward_function_attributes_override_the_table():
    def my_reward(completions, **kwargs):
        return [1.0 if "7" in c[-1]["content"] else 0.0 for c in completions]

    my_reward.max_reward = 1.0
    my_reward.reward_kind = "accuracy"
    report = evaluate(
        None, None, gsm8k_rows(2), [my_reward], num_prompts=2, sampler=canned([GOOD, PLAIN + "x"])
    )
    assert report.per_prompt["accuracy"] == [1.0, 1.0]
    assert report.per_prompt["at_max/my_reward"] == [1.0, 1.0]


def test_reward_function_error_names_function_and_row():
    def broken(completions, **kwargs):
        return [1 / len(c[-1]["content"]) for c in completions]  # ZeroDivisionError on an empty answer

    with pytest.raises(rewards.RewardFunctionError, match=r"broken.*row 1"):
        evaluate(None, None, gsm8k_rows(2), [broken], num_prompts=2, sampler=canned(["x", ""]))


def test_bad_dataset_and_arguments():
    with pytest.raises(ValueError, match="'prompt' column"):
        evaluate(None, None, [{"question": "?"}], GSM8K_FUNCS, sampler=canned(["x"]))
    with pytest.raises(ValueError, match="k must be"):
        evaluate(None, None, gsm8k_rows(1), GSM8K_FUNCS, k=0, sampler=canned(["x"]))
    with pytest.raises(TypeError, match="factory"):
        evaluate(None, None, gsm8k_rows(1), [rewards.length_reward], sampler=canned(["x"]))


def test_greedy_decoding_on_tiny_model_is_deterministic_and_json_round_trips():
    model, tokenizer = tiny_model(seed=0)
    data = gsm8k_rows(3)
    kwargs = {"num_prompts": 3, "k": 2, "max_new_tokens": 6, "temperature": 1.0, "seed": 1, "batch_size": 2}
    first = evaluate(model, tokenizer, data, GSM8K_FUNCS, **kwargs)
    torch.manual_seed(123)  # the caller's RNG state must not matter
    second = evaluate(model, tokenizer, data, GSM8K_FUNCS, **kwargs)
    assert first.completions == second.completions
    assert first.per_prompt == second.per_prompt
    assert all(0 < n <= 6 for n in first.per_prompt["length"])
    assert "pass@2/correctness_reward" in first.per_prompt and "mean@2" in first.per_prompt
    # an untrained random model never ends within 6 tokens: every answer is clipped
    assert first.metrics["clipped"] + first.metrics["eos"] == 1.0
    again = EvalReport.from_dict(json.loads(json.dumps(first.to_dict())))
    assert again.completions == first.completions and again.prompts == first.prompts
    assert again.per_prompt.keys() == first.per_prompt.keys()


def test_greedy_matches_transformers_generate():
    model, tokenizer = tiny_model(seed=3)
    data = [{"prompt": "Once upon a time"}, {"prompt": "Hi"}]
    report = evaluate(
        model,
        tokenizer,
        data,
        [rewards.length_reward(5, unit="chars")],
        num_prompts=2,
        max_new_tokens=5,
        batch_size=2,
    )
    for row, ours in zip(data, report.completions):
        enc = tokenizer(row["prompt"], return_tensors="pt")
        out = model.generate(**enc, do_sample=False, max_new_tokens=5, pad_token_id=tokenizer.pad_token_id)
        assert tokenizer.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True) == ours


# --------------------------------------------------------------------------- compare


def test_identical_reports_are_no_change_with_ci_at_zero():
    values = [random.Random(0).random() for _ in range(40)]
    c = compare(_report({"reward": values}), _report({"reward": list(values)}))
    assert c.verdict == "no change"
    assert c.ci_low == 0.0 == c.ci_high and c.mean_diff == 0.0


def test_shifted_copy_is_improved_with_ci_around_the_shift():
    rng = random.Random(1)
    before = [rng.gauss(0, 1) for _ in range(200)]
    after = [b + 0.5 + rng.gauss(0, 0.3) for b in before]
    c = compare(_report({"reward": before}), _report({"reward": after}), n_boot=5000, seed=3)
    assert c.verdict == "improved"
    assert c.ci_low < 0.5 < c.ci_high and c.ci_low > 0
    # the percentile bootstrap of a mean of 200 values agrees with the normal approximation
    diffs = [a - b for a, b in zip(after, before)]
    mean = sum(diffs) / len(diffs)
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1) / len(diffs))
    assert c.ci_low == pytest.approx(mean - 1.96 * se, abs=0.25 * se)
    assert c.ci_high == pytest.approx(mean + 1.96 * se, abs=0.25 * se)
    # seeded: the same seed gives the same interval, another seed a slightly different one
    same = compare(_report({"reward": before}), _report({"reward": after}), n_boot=5000, seed=3)
    assert (same.ci_low, same.ci_high) == (c.ci_low, c.ci_high)


def test_direction_aware_verdicts():
    before = _report({"reward": [1.0] * 30, "length_error/len": [10.0, 12.0] * 15, "length": [5.0, 6.0] * 15})
    after = _report(
        {"reward": [0.0, 0.5] * 15, "length_error/len": [3.0, 4.0] * 15, "length": [9.0, 8.0] * 15}
    )
    assert compare(before, after, metric="reward").verdict == "worse"
    assert compare(before, after, metric="length_error/len").verdict == "improved"  # lower is better
    assert compare(before, after, metric="length").verdict == "increased"  # no better side
    assert compare(before, after, metric="length", higher_is_better=False).verdict == "worse"
    assert set(compare_all(before, after)) == {"reward", "length_error/len", "length"}


def test_nan_pairs_are_dropped_and_mismatches_refused():
    before = _report({"accuracy": [0.0, math.nan, 0.0, 1.0]})
    after = _report({"accuracy": [1.0, 1.0, math.nan, 1.0]})
    c = compare(before, after, metric="accuracy", n_boot=1000)
    assert c.n == 2 and c.mean_diff == 0.5
    with pytest.raises(ValueError, match="different prompts"):
        compare(before, _report({"accuracy": [0.0] * 4}, prompts=["x"] * 4), metric="accuracy")
    with pytest.raises(ValueError, match="not in the before report"):
        compare(before, after, metric="format")


# --------------------------------------------------------------------------- files


def test_report_card_writes_three_files(tmp_path):
    before = evaluate(None, None, gsm8k_rows(6), GSM8K_FUNCS, num_prompts=6, sampler=canned([PLAIN] * 6))
    after = evaluate(
        None, None, gsm8k_rows(6), GSM8K_FUNCS, num_prompts=6, sampler=canned([GOOD] * 5 + [WRONG])
    )
    log = tmp_path / "metrics.jsonl"
    log.write_text("\n".join(json.dumps({"step": s, "reward": s / 10}) for s in range(1, 5)))
    paths = write_report_card(tmp_path, before, after, log_history=log, n_boot=1000)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "eval.json",
        "metrics.jsonl",
        "report.md",
        "report_card.png",
    ]
    data = json.loads(paths["eval.json"].read_text())
    assert data["comparisons"]["format"]["verdict"] == "improved"
    assert data["comparisons"]["format"]["after"] == 1.0
    assert EvalReport.from_dict(data["after"]).completions[0] == GOOD
    md = paths["report.md"].read_text()
    assert "| format | 0 | 1 |" in md and "improved" in md
    assert paths["report_card.png"].read_bytes()[:4] == b"\x89PNG"


def test_report_card_without_matplotlib_writes_the_data_and_says_the_png_was_skipped(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as on a box whose wheelhouse leaves it out
    before = evaluate(None, None, gsm8k_rows(4), GSM8K_FUNCS, num_prompts=4, sampler=canned([PLAIN] * 4))
    after = evaluate(None, None, gsm8k_rows(4), GSM8K_FUNCS, num_prompts=4, sampler=canned([GOOD] * 4))
    paths = write_report_card(tmp_path, before, after, n_boot=500)
    assert sorted(paths) == ["eval.json", "report.md"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json", "report.md"]
    assert json.loads(paths["eval.json"].read_text())["comparisons"]["format"]["verdict"] == "improved"
    assert "matplotlib is not installed: report_card.png skipped" in capsys.readouterr().out


def test_interrupted_report_card_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    before = evaluate(None, None, gsm8k_rows(3), GSM8K_FUNCS, num_prompts=3, sampler=canned([PLAIN] * 3))
    (tmp_path / "eval.json").write_text("old")
    import grpo_kit.artifacts.plots

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(grpo_kit.artifacts.plots, "plot_report_card", interrupted)  # Ctrl-C while plotting
    with pytest.raises(KeyboardInterrupt):
        write_report_card(tmp_path, before, before, n_boot=1000)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.json"]
    assert (tmp_path / "eval.json").read_text() == "old"
