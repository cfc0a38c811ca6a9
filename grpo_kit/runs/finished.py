"""Evaluate a finished run: the trained model against the model before training, on the recipe's held-out rows and
its second held-out set, into a report card. ``grpo-kit eval`` calls it and prints; so can a lesson.

The rows, the decoding and the scoring are the ones a training run's own evaluation uses
(``held_out.held_out_rows`` / ``transfer_rows`` / ``evaluate_held_out``), so a run evaluated again later reads
the same as the evaluation it wrote when it finished. The model before training is the adapter's base with the
adapter turned off, or ``base`` for an exported model folder.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_kit.config.rules import training_value

__all__ = ["FinishedRunError", "FinishedRunEvaluation", "evaluate_finished_run"]


class FinishedRunError(ValueError):
    """The run cannot be evaluated as asked; the message names the fix (``grpo-kit eval`` prints it as one line)."""


@dataclass
class FinishedRunEvaluation:
    """What :func:`evaluate_finished_run` measured: run.json-style summaries (``evaluation_summary``) of the
    held-out set and, when the recipe has one, of the set written differently; the report card's files."""

    evaluation: dict[str, Any]
    transfer: dict[str, Any] | None
    transfer_set: str | None
    files: dict[str, Path]


def evaluate_finished_run(
    trained: Any,
    recipe: Any,
    *,
    num_prompts: int | None = None,
    k: int | None = None,
    base: str | None = None,
    out: str | Path | None = None,
    status: Callable[[str], Any] = lambda text: contextlib.nullcontext(),
) -> FinishedRunEvaluation:
    """``trained`` (a ``TrainedModel``) and the model before it on ``num_prompts`` held-out rows (default: the
    recipe's ``eval_prompts``, else 32) with ``k`` samples each (default: the recipe's), written to ``out``
    (default: the run folder). ``status(text)`` is a context manager shown while a step runs (a spinner).

    :class:`FinishedRunError` naming the fix, before any evaluation, when the run asks for more tokens than the model holds
    or a model folder has no base to compare against."""
    from grpo_kit.core.sampling import check_fits_context
    from grpo_kit.evaluation.report_card import write_report_card
    from grpo_kit.models import load_model
    from grpo_kit.runs.execution import evaluation_summary
    from grpo_kit.runs.held_out import evaluate_held_out, held_out_rows, transfer_rows

    rows = held_out_rows(recipe, num_prompts or recipe.eval_prompts or 32)
    transfer = transfer_rows(recipe, len(rows))
    with status("loading the trained model…"):
        try:
            model, tokenizer = trained.load(base)
        except ValueError as error:  # a base model nothing names: the line names --base
            raise FinishedRunError(str(error)) from error
    try:  # a shared run.json may ask for more tokens than the model has room for
        check_fits_context(model, 1, int(training_value(recipe.training, "max_completion_length")))
    except ValueError as error:
        raise FinishedRunError(f"{error} (the run's recipe: --recipe NAME evaluates with another)") from error
    funcs = recipe.build_reward_funcs(tokenizer)
    base_model = None
    if trained.adapter_dir is None:
        base = base or (recipe.model if trained.run is not None else None)
        if base is None:
            raise FinishedRunError(
                f"{trained.source} is a model folder without run.json: pass --base MODEL (the model before "
                "training)."
            )
        base_model = load_model(base)[0]
    k = k or recipe.eval_samples

    def before_and_after(eval_rows, what):
        """``(before, after)`` on ``eval_rows``: the base model (the adapter's model without it) and the trained one."""
        with status(f"evaluating {len(eval_rows)} {what}: trained…"):
            after = evaluate_held_out(recipe, model, tokenizer, funcs, eval_rows, k=k)
        with status(f"evaluating {len(eval_rows)} {what}: base model…"):
            if base_model is None:
                with model.disable_adapter():
                    before = evaluate_held_out(recipe, model, tokenizer, funcs, eval_rows, k=k)
            else:
                before = evaluate_held_out(recipe, base_model, tokenizer, funcs, eval_rows, k=k)
        return before, after

    before, after = before_and_after(rows, "held-out prompts")
    second = None
    if transfer:
        second = (recipe.transfer_eval, *before_and_after(transfer, "held-out prompts written differently"))
    files = write_report_card(
        Path(out) if out else trained.source,
        before,
        after,
        log_history=trained.source / "metrics.jsonl",
        title=f"{recipe.name}: held-out base vs {trained.source.name}",
        measures=recipe.measures,
        transfer=second,
    )
    return FinishedRunEvaluation(
        evaluation=evaluation_summary(before, after, files),
        transfer=evaluation_summary(second[1], second[2]) if second is not None else None,
        transfer_set=recipe.transfer_eval if second is not None else None,
        files=files,
    )
