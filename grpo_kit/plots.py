"""The reward curve (mean reward per logged step, ± reward_std, each reward function's mean) and the
held-out report card (before/after per metric with confidence intervals, plus the reward curve).

``plot_reward_curve`` reads any of the three shapes a GRPO run leaves behind:

* our loop's ``metrics.jsonl`` (a path),
* TRL's ``trainer_state.json`` in a checkpoint folder (a path; its ``log_history`` is used),
* a list of dicts, e.g. ``trainer.state.log_history`` after ``GRPOTrainer.train()``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["can_plot", "load_log_history", "plot_report_card", "plot_reward_curve"]

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


def plot_reward_curve(
    source: str | Path | Sequence[dict[str, Any]], png_path: str | Path, *, title: str = "GRPO reward"
) -> Path:
    """Draw reward vs step to ``png_path`` and return the path. Records without ``reward`` are skipped
    (TRL's final summary record, eval records)."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    records = [r for r in load_log_history(source) if r.get("reward") is not None and "step" in r]
    if not records:
        raise ValueError("no logged 'reward' values to plot; log at least one step (logging_steps) first.")
    steps = [r["step"] for r in records]
    reward = [r["reward"] for r in records]
    std = [r.get("reward_std") or 0.0 for r in records]

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, reward, marker="o", markersize=3, label="reward (mean)")
    ax.fill_between(
        steps,
        [m - s for m, s in zip(reward, std)],
        [m + s for m, s in zip(reward, std)],
        alpha=0.2,
        label="± reward_std",
    )
    names = sorted({k for r in records for k in r if k.startswith("rewards/") and k.endswith("/mean")})
    if len(names) > 1:  # with one function its mean is the reward curve itself
        for name in names:
            pts = [(r["step"], r[name]) for r in records if r.get(name) is not None]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], linestyle="--", label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("reward")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)
    return png_path


def plot_report_card(
    comparisons: Sequence[Any],
    png_path: str | Path,
    *,
    log_history: str | Path | Sequence[dict[str, Any]] | None = None,
    title: str = "Held-out evaluation: before / after",
) -> Path:
    """Before/after bars of each compared metric with the bootstrap CI of the change as an error bar on
    the "after" bar, and (when ``log_history`` is given and holds rewards) the training reward curve.

    ``comparisons``: :class:`grpo_kit.evaluate.Comparison` objects (or dicts with their fields).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = [c if isinstance(c, dict) else c.__dict__ for c in comparisons]
    if not items:
        raise ValueError("no comparisons to plot; compare at least one metric (grpo_kit.evaluate.compare).")
    records = []
    if log_history is not None:
        records = [r for r in load_log_history(log_history) if r.get("reward") is not None and "step" in r]
    panels = len(items) + (1 if records else 0)
    cols = min(panels, 3)
    rows = (panels + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.2 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    colours = {"improved": "tab:green", "worse": "tab:red"}
    for ax, c in zip(flat, items):
        # The CI is of the paired change, so it is drawn around the after mean: after + [low, high] - diff.
        err = [[max(c["mean_diff"] - c["ci_low"], 0.0)], [max(c["ci_high"] - c["mean_diff"], 0.0)]]
        ax.bar([0], [c["before"]], color="tab:gray", label="before")
        ax.bar(
            [1], [c["after"]], yerr=err, capsize=6, color=colours.get(c["verdict"], "tab:blue"), label="after"
        )
        ax.set_xticks([0, 1], ["before", "after"])
        ax.set_title(
            f"{c['metric']}\n{c['verdict']} ({c['level']:.0%} CI of change "
            f"[{c['ci_low']:+.2g}, {c['ci_high']:+.2g}])",
            fontsize="small",
        )
        ax.grid(axis="y", alpha=0.3)
    if records:
        ax = flat[len(items)]
        ax.plot([r["step"] for r in records], [r["reward"] for r in records], marker="o", markersize=3)
        ax.set_title("training reward (mean per step)", fontsize="small")
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in flat[panels:]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    png_path = Path(png_path)
    png_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return png_path
