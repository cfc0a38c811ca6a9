"""The practicum lessons' Measure / Train / compare cells (lessons 4, 5, 6, 8 and 9), written once.

Each practicum measures the base model behind a button (a pre-flight, then the held-out evaluation), trains a
fresh copy of it behind a second button with the live reward curve, shows the run's saved curve and logged
metrics, measures again and compares. The acts themselves belong to the library's rooms (``evaluation.preflight``,
``runs.held_out.evaluate_held_out``, ``trl_path.train_with_trl``, ``evaluation.compare``); this module only gives
them the lessons' look: a spinner while they run, a button under its heading, a markdown table of what came out.

Nothing here imports torch at import time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "button_panel",
    "compare_metrics",
    "comparison_table",
    "evaluate_trained",
    "evaluate_with_spinner",
    "last_logged",
    "metrics_table",
    "preflight_with_spinner",
    "reward_weights_note",
    "saved_curve",
    "step_metrics_table",
    "train_fresh",
    "train_section",
]


def button_panel(text: str, button: Any) -> Any:
    """A section's heading and prose (markdown) with its run button under it."""
    import marimo as mo

    return mo.vstack([mo.md(text), button])


def preflight_with_spinner(
    recipe: Any,
    model: Any,
    tokenizer: Any,
    train_dataset: Any,
    *,
    num_prompts: int = 4,
    what: str = "training prompts",
    unit: str = "rollouts",
) -> Any:
    """``evaluation.preflight.check_recipe`` on ``num_prompts`` training rows at the recipe's settings, under a
    spinner that names them (``what``) and their ``unit``: the report a Train button sits under
    (``lesson_helpers.preflight_verdict``)."""
    import marimo as mo

    from grpo_kit.evaluation.preflight import check_recipe

    generations = recipe.training["num_generations"]
    with mo.status.spinner(title="Pre-flight", subtitle=f"{num_prompts} {what} × {generations} {unit}"):
        return check_recipe(recipe, model, tokenizer, train_dataset, num_prompts=num_prompts)


def evaluate_with_spinner(
    recipe: Any,
    model: Any,
    tokenizer: Any,
    rows: Sequence[Any],
    *,
    k: int = 1,
    generate_fn: Any = None,
    title: str = "Evaluating the base model",
    what: str = "held-out rows",
) -> Any:
    """``runs.held_out.evaluate_held_out`` (what ``grpo-kit train`` reports) with the recipe's rewards built for
    ``tokenizer``, greedy (+ ``k`` samples when ``k`` > 1), under a spinner; call it before and after training
    with the same ``rows``, ``k`` and ``generate_fn`` so the two reports differ only by the weights."""
    import marimo as mo

    from grpo_kit.runs.held_out import evaluate_held_out

    subtitle = f"{len(rows)} {what}, greedy" + (f" + {k} samples" if k > 1 else "")
    with mo.status.spinner(title=title, subtitle=subtitle):
        return evaluate_held_out(
            recipe, model, tokenizer, recipe.build_reward_funcs(tokenizer), rows, k=k, generate_fn=generate_fn
        )


def evaluate_trained(recipe: Any, run: Any, tokenizer: Any, rows: Sequence[Any], **kwargs: Any) -> Any:
    """:func:`evaluate_with_spinner` on the run's trained model (``run.model``), "Evaluating the trained model":
    pass the ``rows``, ``k`` and ``generate_fn`` the base model was measured with."""
    kwargs.setdefault("title", "Evaluating the trained model")
    return evaluate_with_spinner(recipe, run.model, tokenizer, rows, **kwargs)


def train_section(
    label: str,
    text: str,
    preflight_report: Any,
    *,
    small: bool = False,
    too_small: str = "",
    if_no_go: str = "",
) -> tuple[Any, Any]:
    """The Train button and the section it sits in: ``text`` (markdown), the pre-flight's verdict
    (``lesson_helpers.preflight_verdict``) and the button. The button reads ``label``, then " (pre-flight: no-go)"
    when the pre-flight says training would not learn and " (``too_small``)" when the lesson runs too few steps to
    show a result; ``if_no_go``: what the verdict advises then. ``small``: the lesson runs at its CI size
    (``LessonSize.small``), which sets both unless given. Returns ``(button, section)``: a cell binds the button to
    a name (marimo sends its clicks to a global) and shows the section."""
    import marimo as mo

    from grpo_kit.teaching.lesson_helpers import preflight_verdict, run_button

    if small:
        too_small = too_small or "too small to learn"
        if_no_go = (
            if_no_go
            or "Training at these settings would not move the model: run the lesson without `--small`."
        )
    button = run_button(
        label
        + ("" if preflight_report.go else " (pre-flight: no-go)")
        + (f" ({too_small})" if too_small else "")
    )
    verdict = preflight_verdict(
        preflight_report, if_no_go=if_no_go or "Training at these settings would not learn."
    )
    return button, mo.vstack([mo.md(text), verdict, button])


def train_fresh(recipe: Any, *, load: Any = None, **train_kwargs: Any) -> tuple[Any, Any]:
    """A fresh copy of the recipe's base model (``load``: ``models.load_model`` unless given), trained with the
    live reward curve (``lesson_helpers.train_with_live_curve``): pressing the Train button again starts over
    from the base model. Returns the run and the tokenizer it trained with."""
    from grpo_kit.teaching.lesson_helpers import train_with_live_curve

    if load is None:
        from grpo_kit.models import load_model as load
    model, tokenizer = load(recipe.model)
    return train_with_live_curve(recipe, model=model, tokenizer=tokenizer, **train_kwargs), tokenizer


def saved_curve(run: Any, *, missing: str = "(no curve)") -> Any:
    """The run's saved reward curve (its PNG), or ``missing`` when the run drew none."""
    import marimo as mo

    return mo.image(src=run.reward_curve_path.read_bytes()) if run.reward_curve_path else mo.md(missing)


def last_logged(run: Any) -> dict[str, Any]:
    """The run's last logged training step (the last record with a ``reward``; TRL's final summary has none)."""
    return [record for record in run.log_history if record.get("reward") is not None][-1]


def metrics_table(record: Mapping[str, Any], names: Iterable[str] | None = None) -> str:
    """One logged record as a markdown ``| metric | value |`` table: the ``names`` it holds, in that order, or
    every number in it."""
    names = [n for n in record if isinstance(record[n], (int, float))] if names is None else names
    rows = [f"| `{n}` | {record[n]:.4g} |" for n in names if record.get(n) is not None]
    return "| metric | value |\n|:---|:---|\n" + "\n".join(rows)


def step_metrics_table(records: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    """Logged steps as a markdown table: a row per record, a column per ``(metric, heading)``, two decimals,
    "—" where a step logged no value (a metric of an environment none of its rows played)."""
    head = (
        "| step | "
        + " | ".join(heading for _, heading in columns)
        + " |\n|:---"
        + "|:---" * len(columns)
        + "|"
    )
    rows = [
        f"| {record.get('step', i + 1)} | "
        + " | ".join("—" if record.get(key) is None else f"{record[key]:.2f}" for key, _ in columns)
        + " |"
        for i, record in enumerate(records)
    ]
    return "\n".join([head, *rows])


def reward_weights_note(recipe: Any) -> str:
    """What the reward curve's total is: the weighted sum of the recipe's rewards, with a warning for a reward of
    weight 0 (logged and drawn, but it does not train)."""
    weights = {spec.name: spec.weight for spec in recipe.rewards}
    note = (
        "The curve's total is the weighted sum of the rewards: "
        + ", ".join(f"`{name}` × {weight:g}" for name, weight in weights.items())
        + ". "
    )
    unweighted = [f"`{name}`" for name, weight in weights.items() if weight == 0]
    if unweighted:
        note += (
            "A reward of weight 0 is logged and drawn but does not train: "
            + ", ".join(unweighted)
            + " can rise while the total stays flat."
        )
    return note


def compare_metrics(before: Any, after: Any, metrics: Iterable[str]) -> dict[str, Any]:
    """``evaluation.compare`` of each of ``metrics`` (paired per prompt, bootstrap 95 % CI), by metric."""
    from grpo_kit.evaluation import compare

    return {metric: compare(before, after, metric=metric) for metric in metrics}


def comparison_table(
    rows: Iterable[tuple[str, Any]], *, digits: int = 2, n: bool = False, verdict: bool = False
) -> str:
    """Comparisons (``evaluation.Comparison``) as a markdown table, a row per ``(label, comparison)``: before,
    after and the change with its CI at ``digits`` decimals; ``n``: a column with the number of prompts compared,
    ``verdict``: one with the comparison's verdict."""
    head = [
        "metric",
        *(["rows"] if n else []),
        "before",
        "after",
        "change [95 % CI]",
        *(["verdict"] if verdict else []),
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + ":---|" * len(head)]
    for label, c in rows:
        cells = [
            label,
            *([str(c.n)] if n else []),
            f"{c.before:.{digits}f}",
            f"{c.after:.{digits}f}",
            f"{c.mean_diff:+.{digits}f} [{c.ci_low:+.{digits}f}, {c.ci_high:+.{digits}f}]",
            *([c.verdict] if verdict else []),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
