"""Runs: a training run from the recipe to its folder, in four rooms.

* ``plan`` -- :func:`plan_run`: the recipe with its overrides, the run folder and the path's config, every
  check made before a model loads, nothing written (:class:`RunPlan`, :func:`resume_command`).
* ``execution`` -- :func:`execute`: the phases of a run on any of the three loops, into its folder
  (:class:`RunOutcome`), with the pre-flight and evaluation hooks; ``phases`` -- what each of those phases does.
* ``held_out`` -- the recipe's held-out rows, never a training prompt, and the one evaluation on them.
* ``folder`` -- :class:`RunFolder` (``run.json``, written and read checked; ``run_config.json``; the lock) and
  :class:`TrainedModel` (a run folder, adapter or model folder to evaluate, export or compare). The model card
  (``grpo_kit.export.card``) reads ``run.json`` and ``run_config.json`` too.
* ``models`` -- the recipe's model with its LoRA adapter.

    from grpo_kit.runs import execute, plan_run

    outcome = execute(plan_run("smoltldr-length-small", overrides={"model": "tiny"}, max_steps=3))
"""

from grpo_kit.runs.execution import (
    GGUFExportError,
    PreflightNoGo,
    RunOutcome,
    evaluation_summary,
    execute,
    preflight_check,
    preflight_hook,
    train_on_path,
    validate_run_inputs,
)
from grpo_kit.runs.finished import FinishedRunError, FinishedRunEvaluation, evaluate_finished_run
from grpo_kit.runs.folder import RunFolder, RunFolderInUse, RunJsonError, TrainedModel
from grpo_kit.runs.held_out import evaluate_held_out, held_out_rows, training_dataset, transfer_rows
from grpo_kit.runs.models import load_recipe_model
from grpo_kit.runs.plan import (
    DEFAULT_LOOP,
    LOOPS,
    RUN_FLAGS,
    RunPlan,
    plan_run,
    resume_command,
    to_loop_config,
)

__all__ = [
    "DEFAULT_LOOP",
    "LOOPS",
    "RUN_FLAGS",
    "FinishedRunError",
    "FinishedRunEvaluation",
    "GGUFExportError",
    "PreflightNoGo",
    "RunFolder",
    "RunFolderInUse",
    "RunJsonError",
    "RunOutcome",
    "RunPlan",
    "TrainedModel",
    "evaluate_finished_run",
    "evaluate_held_out",
    "evaluation_summary",
    "execute",
    "held_out_rows",
    "load_recipe_model",
    "plan_run",
    "preflight_check",
    "preflight_hook",
    "resume_command",
    "to_loop_config",
    "train_on_path",
    "training_dataset",
    "transfer_rows",
    "validate_run_inputs",
]
