"""The reward curve: mean reward per logged step (± reward_std) and each reward function's mean.

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

__all__ = ["load_log_history", "plot_reward_curve"]


def load_log_history(source: str | Path | Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Log records from a metrics.jsonl path, a trainer_state.json path, or a list of dicts."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if path.is_dir():  # a checkpoint folder (ours or TRL's)
            candidates = [path / "metrics.jsonl", path / "trainer_state.json"]
            path = next((p for p in candidates if p.exists()), candidates[-1])
        if not path.exists():
            raise FileNotFoundError(f"{path} not found; pass metrics.jsonl, trainer_state.json or a list of dicts.")
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
    ax.fill_between(steps, [m - s for m, s in zip(reward, std)], [m + s for m, s in zip(reward, std)],
                    alpha=0.2, label="± reward_std")
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
