"""A run, executed into its folder: model -> held-out rows -> [pre-flight] -> evaluation before -> train on a
path (standalone loop | TRL | Unsloth) -> evaluation after -> report card + samples -> exports -> ``run.json``.
The CLI (``grpo-kit train``) and the lessons call :func:`execute` with a plan from ``grpo_kit.runs.plan``; it
tells the run in that order, each phase a function of ``grpo_kit.runs.phases`` (training: :func:`train_on_path`).

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
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpo_kit.artifacts.result import RunResult
from grpo_kit.runs.phases import (
    Measured,
    RunInputs,
    count_eval_prompts,
    evaluation_summary,  # re-exported: grpo_kit.runs.evaluation_summary
    export_models,
    findings_record,
    load_run_inputs,
    measure,
    record_samples,
    report_before_after,
    run_record,
    warm_up,
    write_run_json,
)
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


def _train(
    plan: RunPlan, run: RunInputs, before: Measured, eval_every: int | None, keep_best: bool
) -> tuple[RunResult, Any]:
    """Train on the plan's path, with the held-out rows evaluated every ``eval_every`` steps when the recipe
    asks (the same rows, decoding and scoring as ``before``): (the result, that evaluation or None)."""
    from grpo_kit.runs import during_training

    during = None
    if eval_every is not None:
        during = during_training.HeldOutDuringTraining(
            plan.recipe,
            run.tokenizer,
            run.reward_funcs,
            run.held_out,
            before.report,
            plan.output_dir,
            keep_best=keep_best,
        )
    plan.phase = "training"
    result = train_on_path(plan, *run.training_inputs(), evaluate=during)
    plan.phase = "evaluation after training"
    return result, during


def _measure_after(
    plan: RunPlan,
    run: RunInputs,
    result: RunResult,
    before: Measured,
    during: Any,
    kept: Any,
    status: Callable,
) -> Measured:
    """The evaluation after training; its held-out rows are the last evaluation during training, read back, when
    that one had the weights the run ends with (the last step's, or with ``kept`` the best step's)."""
    from grpo_kit.runs import during_training

    evaluated = None
    if during is not None and before.report is not None:
        step = kept["step"] if kept else result.global_step
        evaluated = during_training.stored_report(plan.output_dir, step, before.report.prompts)
    return measure("after", plan.recipe, result.model, run, status, held_out_report=evaluated)


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
    samples: int | None = None,
    merge: bool | None = None,
    gguf: str | None = None,
    status: Callable[[str], Any] = _nothing,
    preflight: Callable[..., dict | None] | None = None,
    evaluate: Callable[..., dict | None] | None = None,
    eval_prompts: int | None = None,
    keep_best: bool | None = None,
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
    evaluations' weights instead of the last step's. Each of ``samples``, ``merge``, ``gguf``, ``eval_prompts`` and
    ``keep_best`` left None is the plan's flag (``plan.flags``: as planned, or stored by the run a resume
    continues; ``grpo_kit.runs.plan.RUN_FLAGS``)."""
    from grpo_kit.runs import during_training

    flags = plan.flags
    samples = flags["samples"] if samples is None else samples
    merge = not flags["no_merge"] if merge is None else merge
    eval_prompts = flags["eval_prompts"] if eval_prompts is None else eval_prompts
    keep_best = flags["keep_best"] if keep_best is None else keep_best
    recipe = plan.recipe
    n_eval = count_eval_prompts(recipe, samples, eval_prompts)
    eval_every = during_training.check_schedule(recipe, n_eval, keep_best)  # before the model loads
    started = time.perf_counter()
    plan.phase = "loading"
    run = load_run_inputs(plan, n_eval, samples, status)
    # pre-flight samples the model GRPO starts from: with a warm-up, the model after it (warm_up)
    preflight_after_warmup = recipe.warmup_sft is not None and plan.resume is None
    plan.phase = "pre-flight"
    checks = preflight(plan, *run.training_inputs()) if preflight and not preflight_after_warmup else None
    prepare_run_dir(plan)  # only now: a model, data or pre-flight failure leaves no folder behind

    plan.phase = "evaluation before training"
    eval_started = time.perf_counter()
    before = measure("before", recipe, run.model, run, status)
    eval_seconds = time.perf_counter() - eval_started
    warmup = None
    if recipe.warmup_sft is not None:  # SFT first, on the same model, then GRPO
        warmup, checks_after_warmup = warm_up(
            plan, run, status, preflight if preflight_after_warmup else None
        )
        eval_seconds += warmup.eval_seconds
        if preflight_after_warmup:
            checks = checks_after_warmup

    result, during = _train(plan, run, before, eval_every, keep_best)
    if result.interrupted:
        return RunOutcome(plan, result)
    model = result.model
    if during is not None:
        eval_seconds += during.seconds  # evaluation, not training
    train_seconds = time.perf_counter() - started - eval_seconds  # loading + training, not the evaluation
    kept = during_training.restore_best(model, plan.output_dir) if keep_best else None

    eval_started = time.perf_counter()
    after = _measure_after(plan, run, result, before, during, kept, status)
    curve = None
    if during is not None:
        curve = during_training.curve_summary(
            plan.output_dir, result.log_history, before.report, every=eval_every, kept=kept
        )
    evaluation, transfer_evaluation = report_before_after(plan, result, before, after, curve, kept, warmup)
    eval_seconds += time.perf_counter() - eval_started

    plan.phase = "export"
    gguf = gguf or plan.gguf
    with status("exports…"):
        pairs = record_samples(plan, result, run, before, after)
        reports, gguf_error = export_models(plan, model, run.tokenizer, merge, gguf)
    if evaluate:  # the caller's evaluation instead of the report card's
        evaluation = evaluate(plan, model, run.tokenizer, run.reward_funcs)
    seconds = {"train": train_seconds, "total": time.perf_counter() - started, "eval": eval_seconds}
    summary = run_record(plan, result, model, pairs, reports, seconds, evaluated=len(run.held_out))
    summary.update(
        findings_record(checks, evaluation, transfer_evaluation, curve, warmup, before, after, gguf_error)
    )
    write_run_json(plan, summary, reports)
    if gguf_error is not None:
        raise GGUFExportError(
            f"the run is saved in {plan.output_dir} (run.json, report card, adapter, merged model); only the "
            f"GGUF export failed. Retry it with `grpo-kit export {plan.output_dir} --gguf {gguf}`. Cause: "
            f"{type(gguf_error).__name__}: {gguf_error}"
        ) from gguf_error
    return RunOutcome(plan, result, summary, reports)


class GGUFExportError(RuntimeError):
    """Training finished and its run folder is complete (run.json included); only the GGUF export failed."""
