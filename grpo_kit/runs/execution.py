"""A run, executed into its folder: model -> held-out rows -> [pre-flight] -> evaluation before -> train on a
path (standalone loop | TRL | Unsloth) -> evaluation after -> report card + samples -> exports -> ``run.json``.
The CLI (``grpo-kit train``) and the lessons call :func:`execute` with a plan from ``grpo_kit.runs.plan``.

A recipe with a second held-out set (``transfer_eval``: rows written differently from its training rows) has
it evaluated beside the held-out rows (as many of its rows as there are held-out rows), before and after, by
the same ``evaluate_held_out``: its own table in
the report card and ``run.json["transfer_evaluation"]`` (the same fields as ``"evaluation"``, plus ``set``,
``label`` and ``description``: which set, and how it is asked, e.g. without the worked example). Evaluation off (``eval_prompts=0``) turns it off too.

A QLoRA recipe (``quantization="4bit"``) trains on a bitsandbytes NF4 base on either path, CPU included;
``run.json["quantization"]`` records what was loaded (``grpo_kit.models.quantization_record``: quant type,
compute dtype, how many layers are ``Linear4bit``, device, bitsandbytes version) and the merged export is
built on the 16-bit base (``grpo_kit.export.save_merged``).

    outcome = execute(plan_run("smoltldr-length-small", overrides={"model": "tiny"}, max_steps=3))

Two hooks are reserved for the preflight and evaluation rooms: ``execute(plan, preflight=fn, evaluate=fn)``
calls ``preflight(plan, model, tokenizer, dataset, reward_funcs)`` before training (after a recipe's SFT
warm-up: it checks the model GRPO starts from) and ``evaluate(plan,
model, tokenizer, reward_funcs)`` after it; a dict either returns lands in ``run.json`` under
``"preflight"`` / ``"evaluation"``.

The Unsloth path (``--loop unsloth``) runs the same run: its model comes from
``unsloth_path.load_unsloth_model`` (``FastLanguageModel``, 4-bit; Unsloth's CPU backend on a machine without a
GPU), trains through ``unsloth_path.train_with_unsloth`` (TRL's trainer, patched by Unsloth), and
``run.json["unsloth"]`` records what Unsloth loaded (``unsloth_path.load_facts``: version, backend, dtype,
``Linear4bit`` layers). A 4-bit model is merged
onto its 16-bit base: the adapter just exported, loaded onto the base in full precision
(``TrainedModel.load``), is what ``save_merged`` merges, never the 4-bit weights.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
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
from grpo_kit.runs.plan import RunPlan, prepare_run_dir

__all__ = [
    "GGUFExportError",
    "PreflightNoGo",
    "RunOutcome",
    "evaluation_summary",
    "execute",
    "preflight_check",
    "preflight_hook",
    "train_on_path",
    "validate_run_inputs",
]


@dataclass
class RunOutcome:
    """What :func:`execute` produced."""

    plan: RunPlan
    result: RunResult
    summary: dict[str, Any] = field(default_factory=dict)  # the content of run.json ({} when interrupted)
    reports: list[Any] = field(default_factory=list)  # grpo_kit.export reports

    @property
    def verified(self) -> bool:
        return all(r.verified for r in self.reports)


# --- held-out evaluation and pre-flight ---------------------------------------------------------------


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


class PreflightNoGo(RuntimeError):
    """Pre-flight found that training would not learn; ``report`` holds the findings and their fixes."""

    def __init__(self, report: Any):
        super().__init__("pre-flight says no-go:\n" + report.summary())
        self.report = report


def validate_run_inputs(plan: RunPlan) -> None:
    """The checks that need no model: the dataset has a ``prompt`` column and no reward function raises
    on a probe completion (``RewardFunctionError`` names the function and row)."""
    from grpo_kit.evaluation.preflight import validate_inputs

    validate_inputs(plan.recipe.load_dataset(), plan.recipe.build_reward_funcs(None))


def preflight_check(
    plan: RunPlan, model: Any, tokenizer: Any, dataset: Any, reward_funcs: list, *, num_prompts: int = 8
):
    """``grpo_kit.evaluation.preflight.check_recipe`` for the run's recipe (what step 1 will sample; a recipe's tools rolled
    out with them)."""
    from grpo_kit.evaluation.preflight import check_recipe

    return check_recipe(
        plan.recipe, model, tokenizer, dataset, num_prompts=num_prompts, reward_funcs=reward_funcs
    )


def preflight_hook(
    *, force: bool = False, num_prompts: int = 8, on_report: Callable[[Any], Any] | None = None
) -> Callable[..., dict]:
    """A ``preflight=`` hook for :func:`execute`: runs :func:`preflight_check`, hands the report to
    ``on_report`` and raises :class:`PreflightNoGo` on a no-go unless ``force``."""

    def hook(plan: RunPlan, model: Any, tokenizer: Any, dataset: Any, reward_funcs: list) -> dict:
        report = preflight_check(plan, model, tokenizer, dataset, reward_funcs, num_prompts=num_prompts)
        if on_report is not None:
            on_report(report)
        if not report.go and not force:
            raise PreflightNoGo(report)
        return {**report.to_dict(), "forced": not report.go}

    return hook


# --- the run -------------------------------------------------------------------------------------------


def train_on_path(
    plan: RunPlan, model: Any, tokenizer: Any, dataset: Any, reward_funcs: list, *, evaluate: Any = None
) -> RunResult:
    """Train ``model`` on the plan's path (standalone loop, TRL or Unsloth); the result's ``model`` is the
    trained one. ``evaluate``: the held-out evaluation during training (``during_training.HeldOutDuringTraining``)
    the recipe's ``eval_steps`` schedules, on any path."""
    if plan.loop == "standalone":
        from grpo_kit.loop import training as loop

        return loop.train(
            model,
            tokenizer,
            dataset,
            reward_funcs,
            plan.path_config,
            reward_weights=plan.recipe.reward_weights,
            run_config=plan.run_config(),
            evaluate=evaluate,
        )
    # the TRL and Unsloth paths take the same arguments: the model loaded above, trained through GRPOTrainer
    if plan.loop == "unsloth":
        from grpo_kit.trainers.unsloth_path import train_with_unsloth as train_with_trainer
    else:
        from grpo_kit.trainers.trl_path import train_with_trl as train_with_trainer

    # plan.path_config: the GRPOConfig the plan built and checked, which trains as it is (into plan.output_dir)
    return train_with_trainer(
        plan.recipe,
        args=plan.path_config,
        model=model,
        tokenizer=tokenizer,
        train_dataset=dataset,
        reward_funcs=reward_funcs,
        resume_from_checkpoint=plan.resume,
        save_final=False,
        evaluate=evaluate,
    )


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


def _nothing(_message: str):
    return contextlib.nullcontext()


def _holding_the_folder_lock(run: Callable[..., RunOutcome]) -> Callable[..., RunOutcome]:
    """``run(plan, ...)`` with the run folder locked from its creation to the end (one run per folder):
    ``prepare_run_dir`` takes the lock into ``plan.folder_lock``, released when ``run`` returns or raises."""

    @functools.wraps(run)
    def locked(plan: RunPlan, **options: Any) -> RunOutcome:
        with contextlib.ExitStack() as held:
            plan.folder_lock = held
            try:
                return run(plan, **options)
            finally:
                plan.folder_lock = None

    return locked


@_holding_the_folder_lock
def execute(
    plan: RunPlan,
    *,
    samples: int = 4,
    merge: bool = True,
    gguf: str | None = None,
    status: Callable[[str], Any] = _nothing,
    preflight: Callable[..., dict | None] | None = None,
    evaluate: Callable[..., dict | None] | None = None,
    eval_prompts: int | None = None,
    keep_best: bool = False,
) -> RunOutcome:
    """Run the plan into its folder. ``eval_prompts``: held-out prompts evaluated before and after (default
    the recipe's ``eval_prompts``; 0: no evaluation) into the report card (``eval.json``, ``report.md``,
    ``report_card.png``), whose greedy answers also fill ``samples.md``. ``samples``: held-out prompts
    answered before and after; ``merge``:
    write the merged 16-bit model; ``gguf``: also a GGUF of that type; ``status(message)``: a context
    manager shown while a phase runs (the CLI passes ``console.status``). An interrupted run returns
    right after training (``outcome.result.interrupted``), without samples, exports or run.json.
    ``plan.phase`` says what was running when it stopped. A recipe with ``eval_steps`` has the held-out rows
    evaluated during training too (``grpo_kit.runs.during_training``: ``eval/...`` records, the report card's
    held-out curve, ``run.json["evaluation_during_training"]``); ``keep_best`` exports the best of those
    evaluations' weights instead of the last step's."""
    from grpo_kit.evaluation import samples as samples_mod

    recipe = plan.recipe
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise ValueError(f"samples must be an int >= 0 (0: no before/after answers), got {samples!r}.")
    n_eval = recipe.eval_prompts if eval_prompts is None else eval_prompts
    if n_eval < 0:
        raise ValueError(f"eval_prompts must be >= 0 (0 turns evaluation off), got {n_eval}.")
    from grpo_kit.runs import during_training

    eval_every = during_training.check_schedule(recipe, n_eval, keep_best)  # before the model loads
    started = time.perf_counter()
    plan.phase = "loading"
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
        prompts = [r["prompt"] for r in rows[:samples]]
        columns = {k: [r[k] for r in rows[:samples]] for k in (rows[0] if rows else {}) if k != "prompt"}
        # the second held-out set, as many rows as the first (never a training prompt either)
        transfer = transfer_rows(recipe, n_eval, training=dataset)
    # pre-flight samples the model GRPO starts from: with a warm-up, the model after it (below)
    preflight_after_warmup = recipe.warmup_sft is not None and plan.resume is None
    plan.phase = "pre-flight"
    checks = None
    if preflight and not preflight_after_warmup:
        checks = preflight(plan, model, tokenizer, dataset, reward_funcs)
    prepare_run_dir(plan)  # only now: a model, data or pre-flight failure leaves no folder behind
    plan.phase = "evaluation before training"
    eval_started = time.perf_counter()
    eval_before, before = _held_out_answers(
        "before", recipe, model, tokenizer, reward_funcs, rows[:n_eval], prompts, status
    )
    transfer_before = _transfer_evaluation("before", recipe, model, tokenizer, reward_funcs, transfer, status)
    eval_seconds = time.perf_counter() - eval_started
    warmup = None
    if recipe.warmup_sft is not None:  # SFT first, on the same model (grpo_kit.runs.warmup), then GRPO
        from grpo_kit.runs.warmup import warmup_stage

        plan.phase = "SFT warm-up"
        warmup = warmup_stage(plan, model, tokenizer, reward_funcs, rows[:n_eval], transfer, status)
        eval_seconds += warmup.eval_seconds
        if preflight and preflight_after_warmup:
            plan.phase = "pre-flight"
            checks = preflight(plan, model, tokenizer, dataset, reward_funcs)
            checks = {**checks, "sampled": "the model after the SFT warm-up"} if checks is not None else None

    during = None
    if eval_every is not None:  # the same rows, decoding and scoring as eval_before, every eval_every steps
        during = during_training.HeldOutDuringTraining(
            recipe, tokenizer, reward_funcs, rows[:n_eval], eval_before, plan.output_dir, keep_best=keep_best
        )
    plan.phase = "training"
    result = train_on_path(plan, model, tokenizer, dataset, reward_funcs, evaluate=during)
    plan.phase = "evaluation after training"
    if result.interrupted:
        return RunOutcome(plan, result)
    model = result.model
    if during is not None:
        eval_seconds += during.seconds  # evaluation, not training
    train_seconds = time.perf_counter() - started - eval_seconds  # loading + training, not the evaluation
    kept = during_training.restore_best(model, plan.output_dir) if keep_best else None

    from grpo_kit.export import save_adapter, save_merged

    reports = []
    eval_started = time.perf_counter()
    eval_after, after = _held_out_answers(
        "after", recipe, model, tokenizer, reward_funcs, rows[:n_eval], prompts, status
    )
    transfer_after = _transfer_evaluation("after", recipe, model, tokenizer, reward_funcs, transfer, status)
    built_in_evaluation = transfer_evaluation = curve = None
    if during is not None:
        curve = during_training.curve_summary(
            plan.output_dir, result.log_history, eval_before, every=eval_every, kept=kept
        )
    if eval_after is not None:
        from grpo_kit.evaluation.report_card import transfer_label, write_report_card

        second = (
            (recipe.transfer_eval, transfer_before, transfer_after) if transfer_after is not None else None
        )
        files = write_report_card(
            plan.output_dir,
            eval_before,
            eval_after,
            log_history=result.log_history,
            title=f"{recipe.name}: held-out before / after {result.global_step} GRPO steps"
            + (f" (the weights of step {kept['step']}: --keep-best)" if kept else ""),
            measures=recipe.measures,
            transfer=second,
            held_out_curve=curve,
        )
        built_in_evaluation = evaluation_summary(eval_before, eval_after, files)
        if second is not None:
            from datasets_prep.shipped import TRANSFER_SETS

            transfer_evaluation = {
                "set": recipe.transfer_eval,
                "label": transfer_label(recipe.transfer_eval),
                "description": TRANSFER_SETS[recipe.transfer_eval].description,
                **evaluation_summary(transfer_before, transfer_after, files),
            }
        if warmup is not None:  # report.md: base | SFT only | SFT + GRPO
            label = transfer_label(recipe.transfer_eval) if second is not None else None
            warmup.append_to_report(
                plan.output_dir, eval_before, eval_after, label, transfer_before, transfer_after
            )
    eval_seconds += time.perf_counter() - eval_started
    plan.phase = "export"
    with status("exports…"):
        if eval_after is not None:  # the evaluation already scored these answers (with their token ids)
            pairs = [
                samples_mod.Sample(p, b, a, _reward_or_none(rb), _reward_or_none(ra))
                for p, b, a, rb, ra in zip(
                    prompts, before, after, eval_before.per_prompt["reward"], eval_after.per_prompt["reward"]
                )
            ]
        else:
            pairs = samples_mod.before_after(
                prompts,
                before,
                after,
                reward_funcs=reward_funcs,
                reward_weights=recipe.reward_weights,
                columns=columns,
            )
        samples_mod.write_samples(
            pairs, plan.output_dir, title=f"{recipe.name}: before / after {result.global_step} GRPO steps"
        )
        if recipe.lora is not None:
            reports.append(save_adapter(model, tokenizer, plan.output_dir / "adapter"))
        if merge:
            source = model
            if plan.loop == "unsloth" and recipe.quantization is not None:
                # onto the 16-bit base, not into the 4-bit weights: the adapter just saved, on the base re-read
                from grpo_kit.runs.folder import TrainedModel

                source = TrainedModel.locate(plan.output_dir / "adapter").load(base=recipe.model)[0]
            reports.append(save_merged(source, tokenizer, plan.output_dir / "merged"))
        gguf = gguf or plan.gguf
        gguf_error = None
        if gguf:
            from grpo_kit.export import save_gguf

            source = plan.output_dir / "merged" if merge else model
            try:  # a failed GGUF export must not cost the run: run.json and the report card come first
                reports.append(
                    save_gguf(source, plan.output_dir / f"model-{gguf}.gguf", gguf, tokenizer=tokenizer)
                )
            except Exception as error:  # noqa: BLE001 - recorded in run.json, raised after it
                gguf_error = error
    evaluation = evaluate(plan, model, tokenizer, reward_funcs) if evaluate else built_in_evaluation
    from grpo_kit.config.stored import jsonable_config

    rewards = [r["reward"] for r in result.log_history if r.get("reward") is not None]
    summary = {
        "recipe": recipe.name,
        "loop": plan.loop,
        "model": recipe.model,
        "held_out": held_out_summary(recipe),
        "steps": result.global_step,
        "train_seconds": round(train_seconds, 1),
        "total_seconds": round(time.perf_counter() - started, 1),
        "eval_seconds": round(eval_seconds, 1),
        "reward_first_step": rewards[0] if rewards else None,
        "reward_last_step": rewards[-1] if rewards else None,
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
    if checks is not None:
        summary["preflight"] = checks
    if evaluation is not None:
        summary["evaluation"] = evaluation
    if transfer_evaluation is not None:
        summary["transfer_evaluation"] = transfer_evaluation
    if curve is not None:
        summary["evaluation_during_training"] = curve
    if warmup is not None:
        summary["warmup_sft"] = warmup.summary(
            evaluation_summary, eval_before, eval_after, transfer_before, transfer_after
        )
    if gguf_error is not None:
        summary["gguf_error"] = f"{type(gguf_error).__name__}: {' '.join(str(gguf_error).split())}"
    RunFolder(plan.output_dir).write_summary(summary)
    plan.phase = "done"
    from grpo_kit.export.card import write_export_cards  # the cards read run.json: written after it

    write_export_cards(
        {r.path: r.kind for r in reports if r.kind in ("adapter", "merged")},
        run_dir=plan.output_dir,
        gguf_files=[r.path for r in reports if r.kind == "gguf"],
    )
    if gguf_error is not None:
        raise GGUFExportError(
            f"the run is saved in {plan.output_dir} (run.json, report card, adapter, merged model); only the "
            f"GGUF export failed. Retry it with `grpo-kit export {plan.output_dir} --gguf {gguf}`. Cause: "
            f"{type(gguf_error).__name__}: {gguf_error}"
        ) from gguf_error
    return RunOutcome(plan, result, summary, reports)


class GGUFExportError(RuntimeError):
    """Training finished and its run folder is complete (run.json included); only the GGUF export failed."""
