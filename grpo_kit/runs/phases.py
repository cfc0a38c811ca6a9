"""The phases a run goes through, each a function of what the ones before it produced, which
:func:`grpo_kit.runs.execution.execute` calls in order: the model and the held-out rows (:func:`load_run_inputs`),
the held-out evaluation before and after training (:func:`measure`), the SFT warm-up (:func:`warm_up`), the report
card (:func:`report_before_after`), ``samples.md`` (:func:`record_samples`), the exports (:func:`export_models`)
and ``run.json`` (:func:`run_record`, :func:`findings_record`, :func:`write_run_json`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_kit.artifacts.result import RunResult
from grpo_kit.config.rules import training_value
from grpo_kit.config.trainers import applied_settings
from grpo_kit.recipes.recipe import Recipe
from grpo_kit.runs.folder import RunFolder
from grpo_kit.runs.held_out import (
    evaluate_held_out,
    held_out_rows,
    held_out_summary,
    training_dataset,
    transfer_rows,
)
from grpo_kit.runs.models import load_recipe_model
from grpo_kit.runs.plan import RunPlan

__all__ = [
    "Measured",
    "RunInputs",
    "count_eval_prompts",
    "evaluation_summary",
    "export_models",
    "findings_record",
    "load_run_inputs",
    "measure",
    "record_samples",
    "report_before_after",
    "run_record",
    "warm_up",
    "write_run_json",
]


def evaluation_summary(before: Any, after: Any, files: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """What run.json keeps of an evaluation: the headline comparison (metric, means, CI, verdict; "reward hack
    suspected" with its signs when the answers collapsed, as in the report card)."""
    from grpo_kit.evaluation.reward_hacking import judge_headline

    c, signs = judge_headline(before, after)
    return {
        "num_prompts": before.num_prompts,
        "metric": c.metric,
        "before": c.before,
        "after": c.after,
        "mean_diff": c.mean_diff,
        "ci_low": c.ci_low,
        "ci_high": c.ci_high,
        "level": c.level,
        "verdict": c.verdict,
        "reward_hack_signs": signs,
        "headline": c.summary() + (f" ({'; '.join(signs)})" if signs else ""),
        "files": {name: str(path) for name, path in (files or {}).items()},
    }


def _greedy_answers(report: Any, model: Any, tokenizer: Any, prompts: list, recipe: Recipe) -> list[Any]:
    """The greedy answers to ``prompts``: the evaluation's when there is one (generate once), else the one
    decoder's (``samples.answer_completions``, the recipe's budget and chat template arguments)."""
    from grpo_kit.evaluation import samples as samples_mod

    if report is not None:
        return [text.strip() for text in report.completions[: len(prompts)]]
    t = recipe.training
    return samples_mod.answer_completions(
        model,
        tokenizer,
        prompts,
        max_new_tokens=int(training_value(t, "max_completion_length")),
        chat_template_kwargs=t.get("chat_template_kwargs"),
    )


def _held_out_answers(
    when: str,
    recipe: Recipe,
    model: Any,
    tokenizer: Any,
    reward_funcs: list,
    rows: list,
    prompts: list,
    status,
) -> tuple[Any, list[Any]]:
    """The held-out evaluation on ``rows`` (None when there are none) and the greedy answers to the samples'
    ``prompts``, ``when`` ("before" | "after") training, behind a status line saying so."""
    n = len(rows)
    with status(f"evaluating {n} held-out prompts {when} training…" if n else f"answers {when} training…"):
        report = (
            evaluate_held_out(recipe, model, tokenizer, reward_funcs, rows, k=recipe.eval_samples)
            if n
            else None
        )
        return report, _greedy_answers(report, model, tokenizer, prompts, recipe)


def _transfer_evaluation(
    when: str, recipe: Recipe, model: Any, tokenizer: Any, reward_funcs: list, rows: list, status
) -> Any:
    """The second held-out set (``recipe.transfer_eval``) evaluated ``when`` training, as the held-out rows are
    (``evaluate_held_out``, the same decoding and ``k``); None when there are no rows."""
    if not rows:
        return None
    with status(f"evaluating {len(rows)} held-out prompts written differently {when} training…"):
        return evaluate_held_out(recipe, model, tokenizer, reward_funcs, rows, k=recipe.eval_samples)


def _reward_or_none(value: float) -> float | None:
    """An evaluation's per-prompt reward as samples.md shows it: NaN (no function scored it) -> None."""
    return None if math.isnan(value) else value


@dataclass
class RunInputs:
    """What a run trains and evaluates on, loaded once (:func:`load_run_inputs`)."""

    model: Any
    tokenizer: Any
    dataset: Any  # the training rows (less the rows reserved for evaluation)
    reward_funcs: list
    held_out: list  # the rows evaluated before and after training (none of them a training prompt)
    prompts: list  # the samples' prompts: the first held-out rows
    columns: dict[str, list]  # the samples' other columns, which their reward functions read
    transfer: list  # the second held-out set's rows (recipe.transfer_eval), as many as held_out

    def training_inputs(self) -> tuple[Any, Any, Any, list]:
        """(model, tokenizer, dataset, reward_funcs): what training and the pre-flight hook are called with."""
        return self.model, self.tokenizer, self.dataset, self.reward_funcs


@dataclass
class Measured:
    """The held-out evaluation at one point of a run: its report (None without held-out rows), the samples'
    greedy answers, and the second held-out set's report (None without one)."""

    report: Any
    answers: list
    transfer: Any


def count_eval_prompts(recipe: Recipe, samples: int, eval_prompts: int | None) -> int:
    """How many held-out prompts are evaluated (``eval_prompts``, default the recipe's), with ``samples``
    checked too."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise ValueError(f"samples must be an int >= 0 (0: no before/after answers), got {samples!r}.")
    n_eval = recipe.eval_prompts if eval_prompts is None else eval_prompts
    if n_eval < 0:
        raise ValueError(f"eval_prompts must be >= 0 (0 turns evaluation off), got {n_eval}.")
    return n_eval


def load_run_inputs(plan: RunPlan, n_eval: int, samples: int, status: Callable) -> RunInputs:
    """The model on the plan's path, the training rows, the reward functions and the held-out rows."""
    recipe = plan.recipe
    with status("loading model and data…"):
        if plan.loop == "unsloth":
            from grpo_kit.trainers import unsloth_path

            model, tokenizer = unsloth_path.load_unsloth_model(recipe)
        else:
            model, tokenizer = load_recipe_model(recipe)
        # less the rows reserved for evaluation, if any; an environment recipe's were loaded by the plan
        dataset = plan.train_dataset if plan.train_dataset is not None else training_dataset(recipe)
        reward_funcs = recipe.build_reward_funcs(tokenizer)
        # samples are the first rows of the evaluation; none of them is a training prompt
        rows = held_out_rows(recipe, max(n_eval, samples), training=dataset)
        n_eval = min(n_eval, len(rows))
        columns = {k: [r[k] for r in rows[:samples]] for k in (rows[0] if rows else {}) if k != "prompt"}
        # the second held-out set, as many rows as the first (never a training prompt either)
        transfer = transfer_rows(recipe, n_eval, training=dataset)
        _check_prompts_fit(recipe, model, tokenizer, dataset, rows, transfer)
    prompts = [r["prompt"] for r in rows[:samples]]
    return RunInputs(model, tokenizer, dataset, reward_funcs, rows[:n_eval], prompts, columns, transfer)


def _check_prompts_fit(recipe: Recipe, model: Any, tokenizer: Any, dataset: Any, held_out, transfer) -> None:
    """Every prompt the run will sample from (training, held-out, the second held-out set) fits the model's context
    with ``max_completion_length``, before anything generates (``grpo_kit.rollout.generation.check_prompts_fit``)."""
    from grpo_kit.rollout.generation import check_prompts_fit

    max_new = training_value(recipe.training, "max_completion_length")
    kwargs = recipe.training.get("chat_template_kwargs")
    sets = (
        ("the training rows", dataset),
        ("the held-out rows", held_out),
        ("the second held-out set", transfer),
    )
    for where, rows in sets:
        if rows is not None and len(rows):
            prompts = rows["prompt"] if hasattr(rows, "column_names") else [row["prompt"] for row in rows]
            check_prompts_fit(
                model,
                tokenizer,
                prompts,
                max_new,
                where=f"{recipe.name}: {where}",
                chat_template_kwargs=kwargs,
            )


def measure(
    when: str, recipe: Recipe, model: Any, run: RunInputs, status: Callable, *, held_out_report: Any = None
) -> Measured:
    """The held-out rows, the samples and the second held-out set, ``when`` ("before" | "after") training.
    ``held_out_report``: the held-out rows' evaluation already made at these weights (the last evaluation during
    training, ``during_training.stored_report``), used instead of decoding them again."""
    if held_out_report is not None:
        report, answers = (
            held_out_report,
            _greedy_answers(held_out_report, model, run.tokenizer, run.prompts, recipe),
        )
    else:
        report, answers = _held_out_answers(
            when, recipe, model, run.tokenizer, run.reward_funcs, run.held_out, run.prompts, status
        )
    transfer = _transfer_evaluation(
        when, recipe, model, run.tokenizer, run.reward_funcs, run.transfer, status
    )
    return Measured(report, answers, transfer)


def warm_up(plan: RunPlan, run: RunInputs, status: Callable, preflight: Callable | None) -> tuple[Any, Any]:
    """The recipe's SFT warm-up on the run's model (``grpo_kit.runs.warmup``), then ``preflight`` (if given) on
    the model it left: (the stage, the pre-flight record or None)."""
    from grpo_kit.runs.warmup import warmup_stage

    plan.phase = "SFT warm-up"
    warmup = warmup_stage(
        plan, run.model, run.tokenizer, run.reward_funcs, run.held_out, run.transfer, status
    )
    if not preflight:
        return warmup, None
    plan.phase = "pre-flight"
    checks = preflight(plan, *run.training_inputs())
    return warmup, {**checks, "sampled": "the model after the SFT warm-up"} if checks is not None else None


def report_before_after(
    plan: RunPlan,
    result: RunResult,
    before: Measured,
    after: Measured,
    curve: dict[str, Any] | None,
    kept: dict[str, Any] | None,
    warmup: Any,
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``report.md``, ``eval.json`` and ``report_card.png`` from the evaluations before and after (and the
    held-out ``curve`` during training, the warm-up's column), and what run.json keeps of them: (the
    evaluation, the second held-out set's), None where there was nothing to evaluate."""
    if after.report is None:
        return None, None
    from grpo_kit.evaluation.report_card import transfer_label, write_report_card

    recipe = plan.recipe
    second = (recipe.transfer_eval, before.transfer, after.transfer) if after.transfer is not None else None
    files = write_report_card(
        plan.output_dir,
        before.report,
        after.report,
        log_history=result.log_history,
        title=f"{recipe.name}: held-out before / after {result.global_step} GRPO steps"
        + (f" (the weights of step {kept['step']}: --keep-best)" if kept else ""),
        measures=recipe.measures,
        transfer=second,
        held_out_curve=curve,
        no_signal=result.no_signal,
    )
    evaluation = evaluation_summary(before.report, after.report, files)
    transfer_evaluation = None
    if second is not None:
        from datasets_prep.shipped import TRANSFER_SETS

        transfer_evaluation = {
            "set": recipe.transfer_eval,
            "label": transfer_label(recipe.transfer_eval),
            "description": TRANSFER_SETS[recipe.transfer_eval].description,
            **evaluation_summary(before.transfer, after.transfer, files),
        }
    if warmup is not None:  # report.md: base | SFT only | SFT + GRPO
        label = transfer_label(recipe.transfer_eval) if second is not None else None
        warmup.append_to_report(
            plan.output_dir, before.report, after.report, label, before.transfer, after.transfer
        )
    return evaluation, transfer_evaluation


def record_samples(
    plan: RunPlan, result: RunResult, run: RunInputs, before: Measured, after: Measured
) -> list[Any]:
    """``samples.md``: the samples' prompts answered before and after training, with their rewards."""
    from grpo_kit.evaluation import samples as samples_mod

    recipe = plan.recipe
    if after.report is not None:  # the evaluation already scored these answers (with their token ids)
        pairs = [
            samples_mod.Sample(p, b, a, _reward_or_none(rb), _reward_or_none(ra))
            for p, b, a, rb, ra in zip(
                run.prompts,
                before.answers,
                after.answers,
                before.report.per_prompt["reward"],
                after.report.per_prompt["reward"],
            )
        ]
    else:
        pairs = samples_mod.before_after(
            run.prompts,
            before.answers,
            after.answers,
            reward_funcs=run.reward_funcs,
            reward_weights=recipe.reward_weights,
            columns=run.columns,
        )
    samples_mod.write_samples(
        pairs, plan.output_dir, title=f"{recipe.name}: before / after {result.global_step} GRPO steps"
    )
    return pairs


def export_models(
    plan: RunPlan, model: Any, tokenizer: Any, merge: bool, gguf: str | None
) -> tuple[list[Any], Exception | None]:
    """The adapter, the merged 16-bit model (``merge``) and a GGUF of type ``gguf``, each verified: (their
    reports, the GGUF export's error or None: recorded in run.json and raised after it)."""
    from grpo_kit.export import save_adapter, save_merged

    recipe = plan.recipe
    reports = []
    if recipe.lora is not None:
        reports.append(save_adapter(model, tokenizer, plan.output_dir / "adapter"))
    if merge:
        source = model
        if plan.loop == "unsloth" and recipe.quantization is not None:
            # onto the 16-bit base, not into the 4-bit weights: the adapter just saved, on the base re-read
            from grpo_kit.runs.folder import TrainedModel

            source = TrainedModel.locate(plan.output_dir / "adapter").load(base=recipe.model)[0]
        reports.append(save_merged(source, tokenizer, plan.output_dir / "merged"))
    if gguf:
        from grpo_kit.export import save_gguf

        source = plan.output_dir / "merged" if merge else model
        try:  # a failed GGUF export must not cost the run: run.json and the report card come first
            reports.append(
                save_gguf(source, plan.output_dir / f"model-{gguf}.gguf", gguf, tokenizer=tokenizer)
            )
        except Exception as error:  # noqa: BLE001 - recorded in run.json, raised after it
            return reports, error
    return reports, None


def run_record(
    plan: RunPlan,
    result: RunResult,
    model: Any,
    pairs: list[Any],
    reports: list[Any],
    seconds: Mapping[str, float],
    evaluated: int | None = None,
) -> dict[str, Any]:
    """run.json's record of what ran: the recipe, path and model, where its held-out rows came from (and, of a
    named split, how many of its rows the ``evaluated`` held-out rows are), the steps, the times, the rewards,
    the samples, the exports and the settings the path applied (credentials redacted)."""
    from grpo_kit.config.stored import jsonable_config
    from grpo_kit.evaluation import samples as samples_mod

    recipe = plan.recipe
    rewards = [r["reward"] for r in result.log_history if r.get("reward") is not None]
    summary = {
        "recipe": recipe.name,
        "loop": plan.loop,
        "model": recipe.model,
        "held_out": held_out_summary(recipe, evaluated),
        "steps": result.global_step,
        "train_seconds": round(seconds["train"], 1),
        "total_seconds": round(seconds["total"], 1),
        "eval_seconds": round(seconds["eval"], 1),
        "reward_first_step": rewards[0] if rewards else None,
        "reward_last_step": rewards[-1] if rewards else None,
        # steps in a row without learning signal (grpo_kit.evaluation.signal_watch), when the run had them
        **({"no_signal": result.no_signal} if result.no_signal else {}),
        "samples": len(pairs),
        "samples_mean_reward_before": samples_mod.mean_reward(pairs, "before"),
        "samples_mean_reward_after": samples_mod.mean_reward(pairs, "after"),
        "exports": [
            {"kind": r.kind, "path": str(r.path), "size_bytes": r.size_bytes, "verified": r.verified}
            for r in reports
        ],
        # what the path applied (read back from its resolved config), not what was asked; credentials redacted
        "training": jsonable_config(
            applied_settings(recipe.training, plan.path_config or getattr(result.trainer, "args", None))
        ),
    }
    if plan.loop == "unsloth":  # what Unsloth loaded: its backend (cpu | cuda), dtype, Linear4bit layers
        from grpo_kit.trainers import unsloth_path

        summary["unsloth"] = unsloth_path.load_facts(model)
    if (
        recipe.quantization is not None
    ):  # what was loaded, not what was asked: Linear4bit layers, device, versions
        from grpo_kit.models import quantization_record

        summary["quantization"] = quantization_record(model)
    return summary


def findings_record(
    checks: dict | None,
    evaluation: dict | None,
    transfer_evaluation: dict | None,
    curve: dict | None,
    warmup: Any,
    before: Measured,
    after: Measured,
    gguf_error: Exception | None,
) -> dict[str, Any]:
    """run.json's record of what the run found: pre-flight, the evaluations (before / after, the second
    held-out set, during training, the warm-up's) and a failed GGUF export; absent where there was none."""
    found = {
        "preflight": checks,
        "evaluation": evaluation,
        "transfer_evaluation": transfer_evaluation,
        "evaluation_during_training": curve,
    }
    if warmup is not None:
        found["warmup_sft"] = warmup.summary(
            evaluation_summary, before.report, after.report, before.transfer, after.transfer
        )
    if gguf_error is not None:
        found["gguf_error"] = f"{type(gguf_error).__name__}: {' '.join(str(gguf_error).split())}"
    return {name: value for name, value in found.items() if value is not None}


def write_run_json(plan: RunPlan, summary: dict[str, Any], reports: list[Any]) -> None:
    """``run.json``, then the exports' model cards, which read it."""
    RunFolder(plan.output_dir).write_summary(summary)
    plan.phase = "done"
    from grpo_kit.export.card import write_export_cards

    write_export_cards(
        {r.path: r.kind for r in reports if r.kind in ("adapter", "merged")},
        run_dir=plan.output_dir,
        gguf_files=[r.path for r in reports if r.kind == "gguf"],
    )
