"""grpo_kit.plots: the reward curve's band clipped at the reward's known maximum, readable metric names with
units, each side of the report card with its own CI (never below 0 for a quantity that cannot be), and the
report card's text: what the metric measures and answers next to the verdicts."""

from __future__ import annotations

import math

import pytest

from grpo_kit.evaluation import EvalReport, compare
from grpo_kit.evaluation.report_card import side_cis, write_report_card
from grpo_kit.plots import _draw_reward_curve, metric_label, plot_report_card, reward_upper_bound

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")


def test_reward_upper_bound_from_the_recipes_functions():
    assert reward_upper_bound(["length_reward_16_tokens"]) == 0.0  # -|16 - tokens| never exceeds 0
    gsm8k = [
        "xmlcount_reward",
        "soft_format_reward",
        "strict_format_reward",
        "int_reward",
        "correctness_reward",
    ]
    assert reward_upper_bound(gsm8k, [1.0] * 5) == pytest.approx(4.0)  # the recipe's own comment: max 4
    assert reward_upper_bound(gsm8k) is None  # without weights only an all-zero maximum is known
    assert reward_upper_bound(["my_reward"], [1.0]) is None
    assert reward_upper_bound(["correctness_reward"], [-1.0]) is None


def test_reward_curve_band_is_clipped_at_the_known_maximum():
    import matplotlib.pyplot as plt

    records = [{"step": i, "reward": -4.0 + i, "reward_std": 6.0} for i in range(1, 4)]  # mean + std up to 9
    fig, ax = plt.subplots()
    _draw_reward_curve(ax, records, 0.0, per_function=True)
    (band,) = ax.collections
    top = max(y for path in band.get_paths() for _, y in path.vertices)
    assert top == pytest.approx(0.0)
    assert min(y for path in band.get_paths() for _, y in path.vertices) == pytest.approx(-4.0 + 1 - 6.0)
    assert ax.get_xlabel() == "optimizer step" and "reward" in ax.get_ylabel()
    plt.close(fig)


def test_metric_names_are_readable_and_name_their_unit():
    assert metric_label("length_error/length_reward_16_tokens") == (
        "distance from the 16-token target",
        "mean |length − 16| (tokens)",
    )
    assert metric_label("length_error/length_reward_50_chars")[1].endswith("(characters)")
    assert metric_label("at_max/strict_format_reward") == (
        "strict format at its maximum",
        "share of answers (0–1)",
    )
    assert metric_label("length")[1] == "tokens (EOS included)"


def _report(values: list[float], completions: list[str]) -> EvalReport:
    return EvalReport(
        per_prompt={"reward": [-v for v in values], "length_error/length_reward_16_tokens": values},
        prompts=[f"p{i}" for i in range(len(values))],
        completions=completions,
        reward_names=["length_reward_16_tokens"],
        reward_kinds={"length_reward_16_tokens": "length"},
        settings={"decoding": "greedy", "max_new_tokens": 64, "seed": 0, "reward_weights": [1.0]},
    )


def test_each_side_has_its_own_ci_which_stays_at_or_above_zero_for_a_distance():
    before = _report([48.0, 40.0, 30.0, 2.0] * 8, ["a long answer"] * 32)
    after = _report([0.0, 0.0, 1.0, 0.0] * 8, ["short"] * 32)
    metric = "length_error/length_reward_16_tokens"
    c = compare(before, after, metric=metric, n_boot=2000)
    cis = side_cis(before, after, metric, n_boot=2000)
    # the old drawing put the change's CI around "after": it dipped below 0 for a distance
    assert c.after + (c.ci_low - c.mean_diff) < 0
    low, high = cis["after_ci"]
    assert 0.0 <= low <= c.after <= high
    assert cis["before_ci"][0] <= c.before <= cis["before_ci"][1]


def test_report_card_says_what_the_metric_measures_next_to_the_answers(tmp_path):
    before = _report([20.0, 30.0] * 16, ["The post is about $5 milk\x1b[31m"] * 32)
    after = _report([0.0, 1.0] * 16, ["The post's a bit too long for one short sentence."] * 32)
    measures = "Length only: the reward counts tokens, not whether the answer summarises the post."
    log = [{"step": i, "reward": -20.0 + i, "reward_std": 5.0} for i in range(1, 6)]
    paths = write_report_card(tmp_path, before, after, log_history=log, measures=measures, n_boot=500)
    md = paths["report.md"].read_text()
    assert f"**What the metric measures.** {measures}" in md
    assert md.index("What the metric measures") < md.index("too long for one short sentence")
    assert paths["report_card.png"].read_bytes()[:4] == b"\x89PNG"
    comparisons = [
        {**compare(before, after, metric=m, n_boot=200).__dict__, **side_cis(before, after, m, n_boot=200)}
        for m in ("reward", "length_error/length_reward_16_tokens")
    ]
    png = plot_report_card(
        comparisons,
        tmp_path / "card.png",
        log_history=log,
        reward_max=0.0,
        measures=measures,
        answers=[(before.completions[0], after.completions[0])],
    )
    assert png.stat().st_size > 10_000 and not math.isnan(comparisons[0]["before_ci"][0])


def test_reward_curve_ticks_are_whole_steps(tmp_path):
    # a 6-step run: no 0.5, 1.5, ... on the step axis, in the saved PNG's figure and a lesson's live one
    from grpo_kit.lesson_helpers import LiveRewardCurve
    from grpo_kit.plots import reward_curve_figure

    records = [{"step": s, "reward": -40.0 + 5 * s, "reward_std": 2.0} for s in range(1, 7)]
    curve = LiveRewardCurve("six steps")
    for record in records:
        curve.add(record)
    for figure in (reward_curve_figure(records), curve.figure()):
        axis = figure.axes[0]
        figure.canvas.draw()
        ticks = [t for t in axis.get_xticks() if axis.get_xlim()[0] <= t <= axis.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
