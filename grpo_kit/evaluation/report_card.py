"""The report card of a run: ``eval.json``, ``report.md`` and ``report_card.png`` in the run folder.

``eval.json`` holds both evaluations (every per-prompt value, so the comparison can be redone) and the
comparison of every metric; ``report.md`` is the table a learner reads (before, after, change, CI,
verdict), what the metric measures, and a few answers side by side; ``report_card.png`` draws the
headline metrics (each side with its own CI, the change in its own panel), the training reward curve,
what the metric measures and two answers next to the verdicts. A stage before GRPO (an SFT warm-up, a VLM's
alignment) adds its own evaluation under ``"warmup"`` (:func:`add_stage_to_eval_json`).

A recipe's second held-out set (``transfer``: a set shipped with the package, written differently from the
training rows) gets the same comparison of every metric, in eval.json under ``"transfer"`` and in report.md
as its own table under the heading :func:`transfer_label` (:data:`WRITTEN_DIFFERENTLY`, plus how the set
is asked where that differs from the held-out rows, with its prompt count) and the set's description;
report_card.png adds a row under the first set's panels: the set's headline metric (the one run.json states),
before and after with their CIs and the paired change, under that label.

All three files are written to temporary files first and renamed into place only when all of them
are ready, so an evaluation interrupted with Ctrl-C leaves the run folder as it was.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from grpo_kit.evaluation.comparison import Comparison, bootstrap_mean_ci, compare_all, headline_metric
from grpo_kit.evaluation.eval_report import EvalReport
from grpo_kit.evaluation.reward_hacking import flag_reward_hacking
from grpo_kit.evaluation.samples import content_text
from grpo_kit.support.markdown_text import table_cell

__all__ = [
    "WRITTEN_DIFFERENTLY",
    "headline_metrics",
    "render_report_md",
    "side_cis",
    "transfer_about",
    "transfer_label",
    "transfer_section_md",
    "write_report_card",
]

#: The name of the second held-out set's section (report.md, run.json, the CLI's summary).
WRITTEN_DIFFERENTLY = "held-out, written differently"


def _shipped(name: str):
    """The shipped set ``name`` (``datasets_prep.shipped.TransferSet``), or None for a name it does not know."""
    from datasets_prep.shipped import TRANSFER_SETS

    return TRANSFER_SETS.get(name)


def transfer_label(name: str) -> str:
    """The second held-out set's label: :data:`WRITTEN_DIFFERENTLY`, then how the set ``name`` is asked where
    that differs from the held-out rows (``TransferSet.setting``): "held-out, written differently, without the
    worked example" for gsm8k-handwritten, whose held-out rows above carry the example."""
    spec = _shipped(name)
    return (
        f"{WRITTEN_DIFFERENTLY}, {spec.setting}" if spec is not None and spec.setting else WRITTEN_DIFFERENTLY
    )


def transfer_about(name: str, num_prompts: Any, description: str | None) -> str:
    """One plain sentence on the second held-out set, for report_card.png and the model card: which set, how
    many prompts, what it is, and why a change there matters. ``name`` as the medium shows it (the card
    puts it in backticks)."""
    what = f": {description}" if description else ""
    return (
        f"The recipe's second held-out set, {name} ({num_prompts} prompts){what}. Its rows are written apart "
        "from the training rows, so a change here like the recipe's own held-out rows' is learning that transfers."
    )


# Metrics a learner looks at first, in this order; prefixes match per-function metrics.
HEADLINE = (
    "reward",
    "format",
    "accuracy",
    "length_error/",
    "at_max/strict_format_reward",
    "mean@",
    "pass@",
    "length",
    "clipped",
)


def headline_metrics(comparisons: dict[str, Comparison], limit: int = 8) -> list[str]:
    """The compared metrics worth a panel, most telling first (at most ``limit``)."""
    chosen: list[str] = []
    for key in HEADLINE:
        for name in comparisons:
            matches = name.startswith(key) if key.endswith(("/", "@")) else name == key
            if matches and name not in chosen:
                chosen.append(name)
    return chosen[:limit]


def _fmt(value: float) -> str:
    return "—" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3g}"


def _prompt_preview(prompt: str) -> str:
    """The last user turn as text (a picture as ``[image]``), then the answer's opening where the prompt gives one
    (``… → Answer:``); a plain-text prompt as it is."""
    try:
        messages = json.loads(prompt)
    except (json.JSONDecodeError, TypeError):
        return prompt
    if not (isinstance(messages, list) and messages and all(isinstance(m, dict) for m in messages)):
        return prompt
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        return content_text(messages[-1].get("content", prompt))
    text = content_text(messages[users[-1]].get("content", ""))
    opening = [
        content_text(m.get("content", "")) for m in messages[users[-1] + 1 :] if m.get("role") == "assistant"
    ]
    return " → ".join([text, *opening])


def side_cis(
    before: EvalReport,
    after: EvalReport,
    metric: str,
    *,
    n_boot: int = 10000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, tuple[float, float] | None]:
    """``{"before_ci": (lo, hi), "after_ci": (lo, hi)}``: each side's mean with its own percentile-bootstrap
    CI over the prompts it scored (NaN dropped; ``None`` when none). The change's CI is paired and lives in
    the :class:`Comparison`; these say where each mean lies, in the metric's own unit."""
    out: dict[str, tuple[float, float] | None] = {}
    for side, report in (("before", before), ("after", after)):
        values = [v for v in report.per_prompt[metric] if not math.isnan(v)]
        out[f"{side}_ci"] = (
            bootstrap_mean_ci(values, n_boot=n_boot, seed=seed, level=level) if values else None
        )
    return out


def render_report_md(
    before: EvalReport,
    after: EvalReport,
    comparisons: dict[str, Comparison],
    *,
    title: str = "Report card",
    num_samples: int = 4,
    measures: str = "",
    completions: Sequence[str] = (),
    hack_signs: Sequence[str] = (),
    transfer_section: Sequence[str] = (),
    held_out_curve: Mapping[str, Any] | None = None,
) -> str:
    """Markdown: settings, the metric table with CIs and verdicts, what the metric measures (the recipe's
    ``measures``), ``transfer_section`` (the second held-out set's lines, :func:`transfer_section_md`), a few
    answers before/after, and ``completions`` (``completions_table.report_rows``: training rows of the first
    and last logged step)."""
    s = before.settings
    lines = [
        f"# {title}",
        "",
        (
            f"{before.num_prompts} held-out prompts, decoding: {s.get('decoding')}, "
            f"max_new_tokens={s.get('max_new_tokens')}, seed={s.get('seed')}. Changes are paired per prompt "
            "(after − before) with a seeded percentile-bootstrap confidence interval."
        ),
        "",
        *_metric_rows(comparisons),
    ]
    if hack_signs:
        lines += ["", _hack_warning(hack_signs, comparisons)]
    if measures:
        lines += ["", f"**What the metric measures.** {measures}"]
    if held_out_curve is not None:
        lines += held_out_curve_md(held_out_curve)
    lines += list(transfer_section)
    if num_samples > 0:
        lines += [
            "",
            "## Answers before / after (greedy)",
            "",
            "What the verdicts above mean on real answers:",
            "",
            "| # | prompt | before | after |",
            "|---|---|---|---|",
        ]
        for i in range(min(num_samples, before.num_prompts)):
            lines.append(
                f"| {i} | {table_cell(_prompt_preview(before.prompts[i]), 300)} | "
                f"{table_cell(before.completions[i])} | {table_cell(after.completions[i])} |"
            )
    if completions:
        lines += ["", *completions]
    return "\n".join(lines) + "\n"


def held_out_curve_md(curve: Mapping[str, Any]) -> list[str]:
    """The held-out evaluations during training (``runs.during_training.curve_summary``): one row per evaluation
    (step 0: before training) with its collapse signs, then the line that says where it peaked."""
    lines = [
        "",
        f"## Held-out {table_cell(curve['metric'])} during training (every {curve['every']} steps)",
        "",
        (
            f"The same held-out rows, {table_cell(curve['how'].split(', on the same')[0])}, evaluated while training ran "
            "(`eval_steps`; `eval/...` in metrics.jsonl). Step 0 is the evaluation before training."
        ),
        "",
        f"| step | {table_cell(curve['metric'])} | collapse signs |",
        "|---|---|---|",
    ]
    for point in curve["points"]:
        signs = point.get("signs")
        shown = "—" if signs is None else (table_cell("; ".join(signs)) if signs else "none")
        lines.append(f"| {point['step']} | {_fmt(point['value'])} | {shown} |")
    lines += ["", f"**Held-out {table_cell(curve['metric'])}: {table_cell(curve['line'])}.**"]
    if curve.get("kept_note"):
        lines += ["", table_cell(curve["kept_note"])]
    return lines


def _metric_rows(comparisons: dict[str, Comparison]) -> list[str]:
    lines = ["| metric | before | after | change | CI | verdict |", "|---|---|---|---|---|---|"]
    for name, c in comparisons.items():
        lines.append(
            f"| {name} | {_fmt(c.before)} | {_fmt(c.after)} | {c.mean_diff:+.3g} | "
            f"[{c.ci_low:+.3g}, {c.ci_high:+.3g}] ({c.level:.0%}) | {c.verdict} |"
        )
    return lines


def _hack_warning(hack_signs: Sequence[str], comparisons: dict[str, Comparison]) -> str:
    from grpo_kit.evaluation.reward_hacking import collapse_warning

    title, sentence = collapse_warning(hack_signs, (c.verdict for c in comparisons.values()))
    return (
        f"**{title}.** {sentence[0].upper()}{sentence[1:]}. Read the answers below before believing an "
        '"improved" (grpo_kit.evaluation.reward_hacking: what each sign means).'
    )


def transfer_section_md(
    name: str, before: EvalReport, comparisons: dict[str, Comparison], hack_signs: Sequence[str] = ()
) -> list[str]:
    """The second held-out set's report.md section: its heading (:func:`transfer_label`, the prompt count),
    what the set is (its description) and how it is asked, and its own metric table."""
    spec = _shipped(name)
    what = f" {table_cell(spec.description)}." if spec is not None else ""
    if spec is not None and spec.loader_kwargs:  # asked in a setting of its own (gsm8k-handwritten)
        setting = ", ".join(f"`{k}={v!r}`" for k, v in spec.loader_kwargs.items())
        asked = (
            f"with the same template and decoding as above, and {setting} where the rows above keep the recipe's "
            "own. A change here like the one above is learning that transfers, to other text and to that "
            "setting; a change above alone may be the generator learned, or hold only in the recipe's setting."
        )
    else:
        asked = (
            "with the same instruction, template and decoding as above. A change here like the one above is "
            "learning that transfers; a change above alone may be the generator learned."
        )
    origin = "written apart from the generator the training rows come from"
    if spec is not None and spec.file is None:  # drawn by the same loader in another style (shapes-transfer)
        origin = "drawn by the generator the training rows come from, in a style training never draws"
        asked = asked.replace("to other text and to that setting", "to that way of drawing")
    lines = [
        "",
        f"## {transfer_label(name)} ({before.num_prompts} prompts)",
        "",
        f"The recipe's second held-out set, `{table_cell(name)}` (`transfer_eval`):{what} Its rows are {origin}, {asked}",
        "",
        *_metric_rows(comparisons),
    ]
    if hack_signs:
        lines += ["", _hack_warning(hack_signs, comparisons)]
    return lines


def write_report_card(
    out_dir: str | os.PathLike,
    before: EvalReport,
    after: EvalReport,
    *,
    log_history: str | Path | Sequence[dict[str, Any]] | None = None,
    title: str = "Report card",
    n_boot: int = 10000,
    seed: int = 0,
    level: float = 0.95,
    num_samples: int = 4,
    measures: str = "",
    transfer: tuple[str, EvalReport, EvalReport] | None = None,
    held_out_curve: Mapping[str, Any] | None = None,
    no_signal: Mapping[str, Any] | None = None,
) -> dict[str, Path]:
    """Compare ``before`` and ``after`` on every metric and write the three files into ``out_dir``.

    ``measures``: what the metric measures, in plain words (the recipe's ``measures``), printed next to
    the verdicts in report.md and report_card.png.

    ``transfer``: ``(set name, before, after)`` of the recipe's second held-out set (``transfer_eval``), compared
    the same way (same bootstrap, same reward-hacking signs) into eval.json's ``"transfer"`` and its own
    report.md section (module docstring).

    ``log_history``: the run's ``metrics.jsonl`` (or TRL log history) for the reward-curve panel; a
    missing file is skipped. ``held_out_curve``: the evaluations during training
    (``runs.during_training.curve_summary``): eval.json's ``"during_training"``, a report.md section, and the
    held-out curve drawn beside the training reward. Returns ``{"eval.json": path, "report.md": path, "report_card.png": path}``;
    without matplotlib the PNG is skipped (and not returned) with a note. ``no_signal``: the signal watch's
    record (``grpo_kit.evaluation.signal_watch``) when steps in a row had no learning signal: eval.json's
    ``"no_signal"`` and its line under report.md's title, so a run that did not learn names the cause.
    """
    from grpo_kit.artifacts.completions_table import report_rows

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    boot = {"n_boot": n_boot, "seed": seed, "level": level}
    comparisons, hack_signs = _compared(before, after, **boot)
    if log_history is not None and isinstance(log_history, (str, Path)) and not Path(log_history).exists():
        log_history = None
    payload = _eval_json(before, after, comparisons, hack_signs)
    if held_out_curve is not None:
        payload["during_training"] = dict(held_out_curve)
    if no_signal is not None:
        payload["no_signal"] = dict(no_signal)
    section: list[str] = []
    transfer_compared = None  # (set name, before, after, its comparisons, its reward-hacking signs)
    if transfer is not None:
        set_name, t_before, t_after = transfer
        t_comparisons, t_signs = _compared(t_before, t_after, **boot)
        transfer_compared = (set_name, t_before, t_after, t_comparisons, t_signs)
        payload["transfer"] = _transfer_json(*transfer_compared)
        section = transfer_section_md(set_name, t_before, t_comparisons, t_signs)
    contents = {
        "eval.json": json.dumps(payload, indent=2, ensure_ascii=False),
        "report.md": render_report_md(
            before,
            after,
            comparisons,
            title=title,
            num_samples=num_samples,
            measures=measures,
            hack_signs=hack_signs,
            transfer_section=section,
            held_out_curve=held_out_curve,
            completions=report_rows(out),  # the run's completions table, when log_completions wrote one
        ),
    }
    if no_signal is not None:  # under the title: why the run may not have learned
        title_line, _, rest = contents["report.md"].partition("\n")
        contents["report.md"] = f"{title_line}\n\n**No learning signal.** {no_signal['line']}\n{rest}"

    def draw_card(path: Path) -> None:
        _draw_report_card(
            path,
            before,
            after,
            comparisons,
            hack_signs,
            transfer_compared,
            log_history=log_history,
            boot=boot,
            title=title,
            measures=measures,
            num_samples=num_samples,
            held_out_curve=held_out_curve,
        )

    return _write_all_or_none(out, contents, draw_card)


def add_stage_to_eval_json(
    out_dir: str | Path,
    stage: Mapping[str, Any],
    evaluation: EvalReport,
    after: EvalReport,
    transfer: tuple[EvalReport, EvalReport] | None = None,
    *,
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """eval.json's ``"warmup"``: a stage before GRPO (``stage``: its ``name`` and ``column``, "alignment" and
    "aligned only" for a VLM's picture captions) with the held-out evaluation after it alone as ``"before"`` and
    after GRPO as ``"after"``, so its ``"comparisons"`` are what GRPO added on top, bootstrapped as every other
    comparison; ``transfer``: the same for the second held-out set. Written into the run's eval.json (atomically);
    returns the entry."""
    from grpo_kit.support.paths import write_atomic

    boot = {"n_boot": n_boot, "seed": seed, "level": level}
    entry: dict[str, Any] = {
        **stage,
        "held_out": _eval_json(evaluation, after, *_compared(evaluation, after, **boot)),
    }
    if transfer is not None:
        entry["transfer"] = _eval_json(*transfer, *_compared(*transfer, **boot))
    path = Path(out_dir) / "eval.json"
    payload = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    payload["warmup"] = entry
    write_atomic(path, json.dumps(payload, indent=2, ensure_ascii=False))
    return entry


def _compared(before: EvalReport, after: EvalReport, **boot: Any) -> tuple[dict[str, Comparison], list[str]]:
    """Every metric compared (:func:`compare_all`), with the reward-hacking signs (``flag_reward_hacking``)."""
    return flag_reward_hacking(compare_all(before, after, **boot), before, after)


def _eval_json(
    before: EvalReport, after: EvalReport, comparisons: dict[str, Comparison], hack_signs: Sequence[str]
) -> dict[str, Any]:
    """One comparison as eval.json holds it: both evaluations, every metric's comparison, the signs."""
    return {
        "before": before.to_dict(),
        "after": after.to_dict(),
        "comparisons": {
            k: {**asdict(c), "relative_change": _json_float(c.relative_change)}
            for k, c in comparisons.items()
        },
        "reward_hack_signs": hack_signs,  # grpo_kit.evaluation.reward_hacking: [] when the answers did not collapse
    }


def _transfer_json(
    name: str,
    before: EvalReport,
    after: EvalReport,
    comparisons: dict[str, Comparison],
    hack_signs: Sequence[str],
) -> dict[str, Any]:
    """eval.json's ``"transfer"``: the second held-out set, its label and description, and its comparison."""
    spec = _shipped(name)
    return {
        "set": name,
        "label": transfer_label(name),
        "description": spec.description if spec is not None else "",
        **_eval_json(before, after, comparisons, hack_signs),
    }


def _write_all_or_none(
    out: Path, contents: Mapping[str, str], draw_card: Callable[[Path], None]
) -> dict[str, Path]:
    """Write ``contents`` (file name -> text) and, when matplotlib is there, ``draw_card(path)``'s
    report_card.png into temporary files in ``out``, then rename them all into place (module docstring)."""
    from grpo_kit.artifacts.plots import can_plot

    temps: dict[str, Path] = {}
    try:
        for name, text in contents.items():
            temps[name] = _temp_in(out, name)
            temps[name].write_text(text)
        if can_plot("report_card.png"):
            temps["report_card.png"] = _temp_in(out, "report_card.png")
            draw_card(temps["report_card.png"])
        for name, tmp in temps.items():  # all files are ready: swap them in
            os.replace(tmp, out / name)
    finally:
        for tmp in temps.values():
            tmp.unlink(missing_ok=True)
    return {name: out / name for name in temps}


def _draw_report_card(
    path: Path,
    before: EvalReport,
    after: EvalReport,
    comparisons: dict[str, Comparison],
    hack_signs: Sequence[str],
    transfer_compared: tuple[Any, ...] | None,
    *,
    log_history: Any,
    boot: dict[str, Any],
    title: str,
    measures: str,
    num_samples: int,
    held_out_curve: Mapping[str, Any] | None,
) -> None:
    """report_card.png at ``path``: the headline metrics with each side's CI, the reward curve (left out when
    ``log_history`` has no reward records), two answers, and the second held-out set's row (``transfer_compared``:
    its name, before, after, comparisons and signs)."""
    from grpo_kit.artifacts.plots import plot_report_card, reward_upper_bound

    headline = [
        _with_side_cis(comparisons[m], before, after, **boot) for m in headline_metrics(comparisons, limit=6)
    ]
    card = {
        "title": title,
        "measures": measures,
        "answers": list(zip(before.completions, after.completions))[: min(num_samples, 2)],
        "hack_signs": hack_signs,
        "held_out_curve": held_out_curve,
        "reward_max": reward_upper_bound(
            before.reward_names, before.settings.get("reward_weights"), kinds=before.reward_kinds
        ),
    }
    if transfer_compared is not None:
        card["transfer"] = _transfer_headline(*transfer_compared, **boot)
    try:
        plot_report_card(headline, path, log_history=log_history, **card)
    except ValueError:  # no reward records in the log: the card without its curve
        plot_report_card(headline, path, **card)


def _with_side_cis(c: Comparison, before: EvalReport, after: EvalReport, **boot: Any) -> dict[str, Any]:
    """A comparison's fields plus each side's own CI (:func:`side_cis`): one metric's report_card.png panels."""
    return {**asdict(c), **side_cis(before, after, c.metric, **boot)}


def _transfer_headline(
    name: str,
    before: EvalReport,
    after: EvalReport,
    comparisons: dict[str, Comparison],
    hack_signs: Sequence[str],
    **boot: Any,
) -> dict[str, Any]:
    """The second held-out set's row of report_card.png: its headline metric (``headline_metric``, the one
    run.json's ``transfer_evaluation`` states) with each side's CI, its :func:`transfer_label` and what it is."""
    spec = _shipped(name)
    return {
        **_with_side_cis(comparisons[headline_metric(comparisons)], before, after, **boot),
        "label": transfer_label(name),
        "about": transfer_about(name, before.num_prompts, spec.description if spec is not None else None),
        "hack_signs": list(hack_signs),
    }


def _temp_in(folder: Path, name: str) -> Path:
    suffix = Path(name).suffix  # matplotlib picks the format from the suffix
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=f".tmp{suffix}")
    os.close(fd)
    from grpo_kit.support.paths import make_shareable

    make_shareable(tmp)  # mkstemp makes 0600; the report card is shared like the rest of the run folder
    return Path(tmp)


def _json_float(value: float) -> float | None:
    return None if math.isnan(value) else value
