"""grpo_kit.artifacts.plots: the reward curve's band clipped at the reward's known maximum, readable metric names with
units, each side of the report card with its own CI (never below 0 for a quantity that cannot be), and the
report card's text: what the metric measures and answers next to the verdicts."""

from __future__ import annotations

import math

import pytest

from grpo_kit.artifacts.plots import _draw_reward_curve, metric_label, plot_report_card, reward_upper_bound
from grpo_kit.evaluation import EvalReport, compare
from grpo_kit.evaluation.report_card import side_cis, write_report_card

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
    from grpo_kit.artifacts.plots import reward_curve_figure
    from grpo_kit.teaching.lesson_helpers import LiveRewardCurve

    records = [{"step": s, "reward": -40.0 + 5 * s, "reward_std": 2.0} for s in range(1, 7)]
    curve = LiveRewardCurve("six steps")
    for record in records:
        curve.add(record)
    for figure in (reward_curve_figure(records), curve.figure()):
        axis = figure.axes[0]
        figure.canvas.draw()
        ticks = [t for t in axis.get_xticks() if axis.get_xlim()[0] <= t <= axis.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks


def _drawn_card(tmp_path, monkeypatch, **kwargs):
    """write_report_card's report_card.png as the Figure it drew (the real drawing, kept for inspection)."""
    import grpo_kit.artifacts.plots

    figures = []
    draw = grpo_kit.artifacts.plots.report_card_figure

    def keep(*args, **kw):
        figures.append(draw(*args, **kw))
        return figures[-1]

    monkeypatch.setattr(grpo_kit.artifacts.plots, "report_card_figure", keep)
    before = _report([20.0, 30.0, 24.0, 40.0] * 4, ["a long answer about the post"] * 16)
    after = _report([4.0, 8.0, 2.0, 6.0] * 4, ["short"] * 16)
    write_report_card(tmp_path, before, after, n_boot=500, **kwargs)
    (figure,) = figures
    return figure, [" ".join(ax.get_title().split()) for ax in figure.axes]


def test_the_second_held_out_set_has_its_headline_row_under_its_label(tmp_path, monkeypatch):
    import json

    from matplotlib.container import BarContainer

    from grpo_kit.evaluation.report_card import transfer_label

    t_before = _report([10.0, 14.0, 12.0, 16.0] * 4, ["another long answer"] * 16)
    t_after = _report([9.0, 15.0, 10.0, 11.0] * 4, ["shorter answer"] * 16)
    figure, titles = _drawn_card(tmp_path, monkeypatch, transfer=("gsm8k-handwritten", t_before, t_after))
    label = transfer_label("gsm8k-handwritten")  # "held-out, written differently, without the worked example"
    metric = "length_error/length_reward_16_tokens"  # the set's headline metric, the one run.json states
    assert [t for t in titles if label in t] == [f"{label} {metric_label(metric)[0]}"]
    bars = figure.axes[titles.index(f"{label} {metric_label(metric)[0]}")]
    change = figure.axes[figure.axes.index(bars) + 1]
    c = json.loads((tmp_path / "eval.json").read_text())["transfer"]["comparisons"][metric]
    # before and after: the second set's means, each with its own CI
    before_bar, after_bar = [b for b in bars.containers if isinstance(b, BarContainer)]
    assert [before_bar[0].get_height(), after_bar[0].get_height()] == pytest.approx([c["before"], c["after"]])
    cis = side_cis(t_before, t_after, metric, n_boot=500)
    drawn = [bar.errorbar.lines[2][0].get_segments()[0] for bar in (before_bar, after_bar)]
    assert [(s[0][1], s[1][1]) for s in drawn] == pytest.approx([cis["before_ci"], cis["after_ci"]])
    # beside them the paired change with its CI, titled with its verdict
    (point,) = change.containers
    assert list(point.lines[0].get_ydata()) == pytest.approx([c["mean_diff"]])
    ((low, high),) = [(s[0][1], s[1][1]) for s in point.lines[2][0].get_segments()]
    assert (low, high) == pytest.approx((c["ci_low"], c["ci_high"]))
    assert change.get_title() == f"change: {c['verdict']}"
    texts = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert label in texts and any("gsm8k-handwritten (16 prompts)" in t for t in texts)


def test_a_card_without_a_second_set_draws_no_such_row(tmp_path, monkeypatch):
    figure, titles = _drawn_card(tmp_path, monkeypatch)
    assert not [t for t in titles if "written differently" in t]
    assert not [t for ax in figure.axes for t in ax.texts if "written differently" in t.get_text()]
    # two metrics: one row of two pairs, the reward-curve-less text panel below
    assert len(figure.axes) == 5 and figure.get_size_inches()[1] == pytest.approx(3.1 + 4.2)
