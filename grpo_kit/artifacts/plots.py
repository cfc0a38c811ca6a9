"""The reward curve (mean reward per logged step, ± reward_std clipped to the reward's known maximum, each
reward function's mean) and the held-out report card (per metric: before and after each with its own CI,
the paired change with its CI in a panel of its own, and the same for a second held-out set's headline metric
in a row under its label; the reward curve; what the metric measures and a few answers next to the verdicts).

``plot_reward_curve`` reads any of the three shapes a GRPO run leaves behind:

* our loop's ``metrics.jsonl`` (a path),
* TRL's ``trainer_state.json`` in a checkpoint folder (a path; its ``log_history`` is used),
* a list of dicts, e.g. ``trainer.state.log_history`` after ``GRPOTrainer.train()``.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_kit.rollout.reward_info import reward_upper_bound

__all__ = [
    "can_plot",
    "load_log_history",
    "metric_label",
    "plot_report_card",
    "plot_reward_curve",
    "report_card_figure",
    "reward_curve_figure",
    "reward_upper_bound",
]

#: What a run says when it skips a PNG because matplotlib is missing (e.g. on an air-gapped GPU box whose
#: wheelhouse leaves it out, docs/gpu.md); the JSON and Markdown it writes are the same.
NO_MATPLOTLIB = (
    "matplotlib is not installed: {what} skipped (pip install matplotlib, part of grpo-kit[train])"
)


def can_plot(what: str | None = None) -> bool:
    """True when matplotlib imports. grpo-kit's runs draw their PNGs only then; the data is written anyway.
    With ``what`` (a file name), a False answer also prints the one-line note naming the skipped PNG."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        if what is not None:
            print(NO_MATPLOTLIB.format(what=what))
        return False
    return True


def load_log_history(source: str | Path | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Log records from a metrics.jsonl path, a trainer_state.json path, or a list of dicts."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():  # a checkpoint folder (ours or TRL's)
            candidates = [path / "metrics.jsonl", path / "trainer_state.json"]
            path = next((p for p in candidates if p.exists()), candidates[-1])
        if not path.exists():
            raise FileNotFoundError(
                f"{path} not found; pass metrics.jsonl, trainer_state.json or a list of dicts."
            )
        text = path.read_text()
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        data = json.loads(text)
        return list(data["log_history"] if isinstance(data, dict) else data)
    if isinstance(source, Sequence):
        return [dict(r) for r in source]
    raise TypeError(
        f"plot_reward_curve expects a path or a list of dicts, not {type(source).__name__}; "
        "pass trainer.state.log_history or the path of metrics.jsonl."
    )


def _logged_reward_names(records: Sequence[dict[str, Any]]) -> list[str]:
    return sorted({k[len("rewards/") : -len("/mean")] for r in records for k in r if _is_fn_mean(k)})


def _is_fn_mean(key: str) -> bool:
    return key.startswith("rewards/") and key.endswith("/mean")


def _draw_reward_curve(
    ax, records: Sequence[dict[str, Any]], upper: float | None, *, per_function: bool
) -> None:
    """Mean reward per step with its ±std band, clipped at ``upper`` (the reward's known maximum)."""
    steps = [r["step"] for r in records]
    reward = [r["reward"] for r in records]
    std = [r.get("reward_std") or 0.0 for r in records]
    high = [m + s for m, s in zip(reward, std)]
    band = "± reward_std"
    if upper is not None:
        high = [min(h, upper) for h in high]
        band += f" (clipped at the maximum, {upper:g})"
        ax.axhline(
            upper, color="tab:gray", linestyle=":", linewidth=1, label=f"highest possible reward ({upper:g})"
        )
    ax.plot(steps, reward, marker="o", markersize=3, label="reward (mean over the step's completions)")
    ax.fill_between(steps, [m - s for m, s in zip(reward, std)], high, alpha=0.2, label=band)
    names = [f"rewards/{n}/mean" for n in _logged_reward_names(records)]
    if per_function and len(names) > 1:  # with one function its mean is the reward curve itself
        for name in names:
            pts = [(r["step"], r[name]) for r in records if r.get(name) is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle="--", label=name)
    ax.set_xlabel("optimizer step")
    _whole_step_ticks(ax)
    ax.set_ylabel("training reward (reward units)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small")


def held_out_points(records: Sequence[dict[str, Any]], metric: str) -> list[tuple[int, float]]:
    """(step, value) of ``eval/<metric>``: the held-out evaluations during training in a log history."""
    key = f"eval/{metric}"
    return sorted(
        {int(r["step"]): float(r[key]) for r in records if r.get(key) is not None and "step" in r}.items()
    )


def _draw_held_out(
    ax, points: Sequence[tuple[int, float]], metric: str, *, best_step: int | None = None
) -> None:
    """The held-out metric per evaluation (step 0: before training) on its own axis, right, beside the
    training reward: the curve that says when learning stopped, or turned into a hack."""
    if not points:
        return
    right = ax.twinx()
    label, unit = metric_label(metric)
    right.plot(
        [p[0] for p in points],
        [p[1] for p in points],
        color="tab:green",
        marker="s",
        markersize=4,
        label=f"held-out {label} (greedy)",
    )
    if best_step is not None:
        best = dict(points).get(best_step)
        if best is not None:
            right.scatter(
                [best_step],
                [best],
                s=90,
                facecolors="none",
                edgecolors="tab:green",
                label=f"best (step {best_step})",
            )
    right.set_ylabel(f"held-out: {unit}", color="tab:green")
    right.legend(fontsize="x-small", loc="center right")  # the reward legend takes a lower corner


def _whole_step_ticks(ax) -> None:
    """Ticks at whole optimizer steps only: a 6-step run is not labelled 0.5, 1.5, …"""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def reward_curve_figure(
    source: str | Path | Sequence[dict[str, Any]],
    *,
    title: str = "GRPO reward",
    reward_max: float | None = None,
    held_out_metric: str | None = None,
) -> Any:
    """The reward curve as a matplotlib ``Figure`` (no pyplot state): what :func:`plot_reward_curve` saves and
    what a lesson's live curve redraws after each step; ``held_out_metric``: also ``eval/<metric>`` (the held-out
    evaluations during training, ``eval_steps``) on an axis of its own. Records without ``reward`` are skipped (TRL's final
    summary record, eval records). The ±std band is clipped at ``reward_max``, by default
    :func:`reward_upper_bound` of the logged reward functions where it is known without their weights
    (a length reward's 0): the band says where the completions' rewards lie, and none lies above it."""
    from matplotlib.figure import Figure

    history = load_log_history(source)
    records = [r for r in history if r.get("reward") is not None and "step" in r]
    if not records:
        raise ValueError("no logged 'reward' values to plot; log at least one step (logging_steps) first.")
    if reward_max is None:
        reward_max = reward_upper_bound(_logged_reward_names(records))
    figure = Figure(figsize=(7, 4))
    ax = figure.subplots()
    _draw_reward_curve(ax, records, reward_max, per_function=True)
    if held_out_metric is not None:
        _draw_held_out(ax, held_out_points(history, held_out_metric), held_out_metric)
    ax.set_title(title)
    figure.tight_layout()
    return figure


def plot_reward_curve(
    source: str | Path | Sequence[dict[str, Any]],
    png_path: str | Path,
    *,
    title: str = "GRPO reward",
    reward_max: float | None = None,
) -> Path:
    """Draw :func:`reward_curve_figure` to ``png_path`` and return the path."""
    figure = reward_curve_figure(source, title=title, reward_max=reward_max)
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(png_path, dpi=110)
    return png_path


SHARE = "share of answers (0–1)"


def metric_label(metric: str) -> tuple[str, str]:
    """``(readable name, y-axis label with its unit)`` of an :class:`grpo_kit.evaluation.EvalReport` metric."""

    def fn(name: str) -> str:
        return name.removesuffix("_reward").replace("_", " ")

    head, _, rest = metric.partition("/")
    if metric == "reward":
        return "total reward", "reward (weighted sum of the recipe's rewards)"
    if metric == "format":
        return "format kept (every format reward > 0)", SHARE
    if metric == "accuracy":
        return "correct answer", SHARE
    if metric == "length":
        return "answer length", "tokens (EOS included)"
    if metric == "clipped":
        return "answers cut off at max_new_tokens", SHARE
    if metric == "eos":
        return "answers that end (EOS)", SHARE
    if head == "length_error":
        unit = "characters" if rest.endswith("_chars") else "tokens"
        target = "".join(ch for ch in rest if ch.isdigit())
        return f"distance from the {target}-{unit[:-1]} target", f"mean |length − {target}| ({unit})"
    if head == "at_max":
        return f"{fn(rest)} at its maximum", SHARE
    if head == "reward":
        return f"reward: {fn(rest)}", "reward"
    if head.startswith("pass@"):
        return f"{head}: {fn(rest)}", "share of prompts (0–1)"
    if head.startswith("mean@"):
        return f"{head}: mean reward of {head[5:]} samples", "reward"
    return metric, metric


def _plain(text: str, limit: int) -> str:
    """Model output as plain figure text: one line, no control characters, cut at ``limit``."""
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())
    return (text if len(text) <= limit else text[: limit - 1] + "…") or "(empty)"


def _draw_before_after(bars, change, c: dict[str, Any], *, title: str, legend: bool) -> None:
    """One metric's pair of panels: before and after each with its own CI in ``bars`` (the metric's unit),
    the paired change with its CI in ``change`` (0 marked), coloured by the verdict."""
    colour = {"improved": "tab:green", "worse": "tab:red", "reward hack suspected": "tab:orange"}.get(
        c["verdict"], "tab:blue"
    )
    for x, side, face in ((0, "before", "tab:gray"), (1, "after", colour)):
        ci = c.get(f"{side}_ci")
        err = None
        if ci is not None:
            err = [[max(c[side] - ci[0], 0.0)], [max(ci[1] - c[side], 0.0)]]
        bars.bar([x], [c[side]], yerr=err, capsize=6, color=face, label=f"{side} (mean, {c['level']:.0%} CI)")
    bars.set_xticks([0, 1], ["before", "after"])
    bars.set_ylabel(metric_label(c["metric"])[1], fontsize="small")
    bars.set_title(title, fontsize="small")
    bars.axhline(0, color="black", linewidth=0.6)
    bars.grid(axis="y", alpha=0.3)
    change.errorbar(
        [0],
        [c["mean_diff"]],
        yerr=[[max(c["mean_diff"] - c["ci_low"], 0.0)], [max(c["ci_high"] - c["mean_diff"], 0.0)]],
        fmt="o",
        capsize=8,
        color=colour,
        label=f"after − before ({c['level']:.0%} paired CI)",
    )
    change.axhline(0, color="black", linewidth=0.8, linestyle="--")
    change.set_xticks([])
    change.set_xlim(-1, 1)
    change.set_ylabel("after − before (same unit)", fontsize="x-small")
    change.set_title(f"change: {c['verdict']}", fontsize="small", color=colour)
    change.grid(axis="y", alpha=0.3)
    if legend:
        bars.legend(fontsize="x-small")
        change.legend(fontsize="x-small", loc="best")


def _draw_transfer_text(ax, transfer: dict[str, Any]) -> None:
    """Beside the second held-out set's panels: its label, what the set is, and its verdict."""
    ax.axis("off")
    ax.text(0.0, 1.0, transfer["label"], va="top", ha="left", fontsize="medium", weight="bold")
    verdict = f"{metric_label(transfer['metric'])[0]}: {transfer['verdict']}"
    if transfer.get("hack_signs"):
        verdict += f" ({'; '.join(transfer['hack_signs'])})"
    lines = [*textwrap.wrap(transfer.get("about", ""), 78), "", *textwrap.wrap(f"Verdict: {verdict}.", 78)]
    ax.text(0.0, 0.88, "\n".join(lines), va="top", ha="left", fontsize="small", parse_math=False, wrap=False)


def report_card_figure(
    comparisons: Sequence[Any],
    *,
    log_history: str | Path | Sequence[dict[str, Any]] | None = None,
    title: str = "Held-out evaluation: before / after",
    reward_max: float | None = None,
    measures: str = "",
    answers: Sequence[tuple[str, str]] = (),
    hack_signs: Sequence[str] = (),
    transfer: dict[str, Any] | None = None,
    held_out_curve: dict[str, Any] | None = None,
) -> Any:
    """The report card as a matplotlib ``Figure`` (no pyplot state): per metric, the before and after means
    each with its own bootstrap CI (a panel in the metric's unit) and, beside it, the paired change with its
    CI (a panel of its own, with 0 marked); then the training reward curve (band clipped at ``reward_max``)
    and a text panel: what the metric measures (the recipe's ``measures``) and a few answers before → after,
    next to the verdicts.

    ``comparisons``: :class:`grpo_kit.evaluation.Comparison` objects or dicts with their fields, plus
    ``before_ci`` / ``after_ci`` (``(low, high)`` of each side's mean; without them the side has no bar).
    ``answers``: ``(before, after)`` greedy answers shown as plain text (never parsed as markup or math).
    ``hack_signs``: the collapse signs (``grpo_kit.evaluation.reward_hacking``), named first in the text panel.
    ``transfer``: the second held-out set's headline comparison (a dict like those of ``comparisons``) plus
    ``label`` (its title), ``about`` (what the set is) and ``hack_signs``: one more row of the same panels
    under the first set's, its label above them and beside them. Without it the card has no such row.
    ``held_out_curve``: the evaluations during training (``metric``, ``points`` of ``step``/``value``, step 0
    before training, ``best_step``), drawn on the reward panel's right axis.
    """
    from matplotlib.figure import Figure

    items = [c if isinstance(c, dict) else dict(c.__dict__) for c in comparisons]
    if not items:
        raise ValueError("no comparisons to plot; compare at least one metric (grpo_kit.evaluation.compare).")
    records = []
    if log_history is not None:
        records = [r for r in load_log_history(log_history) if r.get("reward") is not None and "step" in r]
    pairs_per_row = 2
    metric_rows = (len(items) + pairs_per_row - 1) // pairs_per_row
    panel_rows = metric_rows + (transfer is not None)
    fig = Figure(figsize=(13, 3.1 * panel_rows + 4.2))
    grid = fig.add_gridspec(
        panel_rows + 1, 4, width_ratios=[3, 2, 3, 2], height_ratios=[3.1] * panel_rows + [4.2]
    )
    for i, c in enumerate(items):
        row, col = divmod(i, pairs_per_row)
        bars, change = fig.add_subplot(grid[row, 2 * col]), fig.add_subplot(grid[row, 2 * col + 1])
        _draw_before_after(bars, change, c, title=metric_label(c["metric"])[0], legend=i == 0)
    for j in range(len(items), metric_rows * pairs_per_row):  # an odd count leaves one pair empty
        row, col = divmod(j, pairs_per_row)
        for k in (0, 1):
            fig.add_subplot(grid[row, 2 * col + k]).axis("off")
    if transfer is not None:  # the second held-out set's headline, under a title that names the set
        heading = "\n".join([*textwrap.wrap(transfer["label"], 42), metric_label(transfer["metric"])[0]])
        bars, change = fig.add_subplot(grid[metric_rows, 0]), fig.add_subplot(grid[metric_rows, 1])
        _draw_before_after(bars, change, transfer, title=heading, legend=False)
        _draw_transfer_text(fig.add_subplot(grid[metric_rows, 2:]), transfer)
    text_ax = fig.add_subplot(grid[panel_rows, 2:] if records else grid[panel_rows, :])
    if records:
        curve = fig.add_subplot(grid[panel_rows, :2])
        _draw_reward_curve(curve, records, reward_max, per_function=False)
        curve.set_title("training reward per step", fontsize="small")
        if held_out_curve is not None:
            points = [(p["step"], p["value"]) for p in held_out_curve["points"] if p["value"] is not None]
            _draw_held_out(curve, points, held_out_curve["metric"], best_step=held_out_curve.get("best_step"))
            curve.set_title("training reward and held-out metric per step", fontsize="small")
    text_ax.axis("off")
    lines = []
    if hack_signs:
        width = 78 if records else 160
        lines += [
            *textwrap.wrap(
                "REWARD HACK SUSPECTED: the reward improved while " + "; ".join(hack_signs) + ".", width
            ),
            "",
        ]
    if measures:
        lines += ["What the metric measures:", *textwrap.wrap(measures, 78 if records else 160), ""]
    verdicts = "; ".join(f"{metric_label(c['metric'])[0]}: {c['verdict']}" for c in items[:3])
    lines += textwrap.wrap(f"Verdicts: {verdicts}.", 78 if records else 160)
    if answers:
        lines += ["", "Answers (greedy), before → after:"]
        for before, after in answers:
            lines += [f"• {_plain(before, 70)}", f"  → {_plain(after, 70)}"]
    text_ax.text(
        0.0,
        1.0,
        "\n".join(lines),
        va="top",
        ha="left",
        fontsize="small",
        family="sans-serif",
        parse_math=False,
        wrap=False,
    )
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_report_card(comparisons: Sequence[Any], png_path: str | Path, **kwargs: Any) -> Path:
    """Draw :func:`report_card_figure` (same arguments) to ``png_path`` and return the path."""
    figure = report_card_figure(comparisons, **kwargs)
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(png_path, dpi=100)
    return png_path
