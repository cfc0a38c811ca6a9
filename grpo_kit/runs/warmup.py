"""The SFT warm-up stage of a run (a recipe's ``warmup_sft``; a VLM's alignment on picture captions), between the
evaluation before training and GRPO:
``grpo_kit.trainers.sft_warmup`` trains (TRL's SFTTrainer | the loop's plain SFT step), then the held-out rows and the
second set are evaluated again by the same ``evaluate_held_out`` (the "SFT only" column), and the stage is written
to ``warmup_sft/stage.json`` at once. A resumed run does not run it again (its GRPO checkpoint holds the warm-up's
weights): it reads that file back, so a run stopped during GRPO keeps its "SFT only" column; a folder without the
file says the stage was not run again.

``grpo_kit.runs.execution.execute`` calls :func:`warmup_stage` and, once GRPO is evaluated,
:meth:`WarmupStage.summary` (``run.json["warmup_sft"]``) and :meth:`WarmupStage.append_to_report` (report.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_kit.config.rules import training_value
from grpo_kit.runs.held_out import evaluate_held_out

__all__ = ["WarmupStage", "train_warmup", "warmup_stage"]


@dataclass
class WarmupStage:
    """What the warm-up did: its record, the evaluations after it (None when it did not run or evaluation is
    off) and the seconds they took."""

    record: dict[str, Any]
    evaluation: Any = None
    transfer: Any = None
    eval_seconds: float = 0.0

    def summary(
        self,
        summarize: Callable[..., dict],
        before: Any,
        after: Any,
        transfer_before: Any = None,
        transfer_after: Any = None,
    ) -> dict[str, Any]:
        """``run.json["warmup_sft"]``: the record, plus (when it ran and was evaluated) ``evaluation``: base ->
        SFT only, ``grpo_added``: SFT only -> SFT + GRPO, and the same two for the second set
        (``transfer_evaluation``, ``transfer_grpo_added``); ``summarize`` is execution's evaluation_summary."""
        out = dict(self.record)
        if self.evaluation is not None and before is not None and after is not None:
            out["evaluation"] = summarize(before, self.evaluation)
            out["grpo_added"] = summarize(self.evaluation, after)
        if self.transfer is not None and transfer_before is not None and transfer_after is not None:
            out["transfer_evaluation"] = summarize(transfer_before, self.transfer)
            out["transfer_grpo_added"] = summarize(self.transfer, transfer_after)
        return out

    def append_to_report(
        self,
        run_dir: Path,
        before: Any,
        after: Any,
        transfer_label: str | None = None,
        transfer_before: Any = None,
        transfer_after: Any = None,
    ) -> None:
        """Add the three-column section (base | SFT only | SFT + GRPO; "aligned" for a VLM's alignment) to
        ``<run>/report.md``, and the stage's evaluations to ``<run>/eval.json`` (``"warmup"``)."""
        if self.evaluation is None or before is None or after is None:
            return
        from grpo_kit.evaluation.report_card import add_stage_to_eval_json
        from grpo_kit.support.paths import write_atomic
        from grpo_kit.trainers.sft_warmup import report_section, stage_names

        stage, column = stage_names(self.record["dataset"])
        second = (
            (self.transfer, transfer_after)
            if self.transfer is not None and transfer_after is not None
            else None
        )
        add_stage_to_eval_json(
            run_dir, {"stage": stage, "column": f"{column} only"}, self.evaluation, after, second
        )

        sets = [("held-out", before, self.evaluation, after)]
        if self.transfer is not None and transfer_before is not None and transfer_after is not None:
            sets.append(
                (
                    transfer_label or "held-out, written differently",
                    transfer_before,
                    self.transfer,
                    transfer_after,
                )
            )
        report = Path(run_dir) / "report.md"
        text = report.read_text(encoding="utf-8") if report.is_file() else ""
        write_atomic(report, text + report_section(self.record, sets))


def train_warmup(plan: Any, model: Any, tokenizer: Any, folder: Path, on_step: Any = None) -> dict[str, Any]:
    """``grpo_kit.trainers.sft_warmup.run_warmup`` with the plan's path, seed and precision, its files under ``folder``;
    returns the stage's record (what ``run.json["warmup_sft"]`` holds)."""
    from grpo_kit.trainers import sft_warmup

    recipe = plan.recipe
    return sft_warmup.run_warmup(
        recipe,
        model,
        tokenizer,
        loop=plan.loop,
        run_dir=folder,
        seed=int(training_value(recipe.training, "seed")),
        bf16=bool(getattr(plan.path_config, "bf16", False)) if plan.loop == "trl" else False,
        on_step=on_step,
    )


def warmup_stage(
    plan: Any, model: Any, tokenizer: Any, reward_funcs: list, rows: list, transfer: list, status: Callable
) -> WarmupStage:
    """Run the plan's warm-up on ``model`` (in place), then evaluate ``rows`` and ``transfer`` after it; on a
    resumed run, only say it was not run again."""
    from grpo_kit.trainers import sft_warmup

    recipe = plan.recipe
    if plan.resume is not None:
        return _read_back(plan.output_dir) or WarmupStage(sft_warmup.skipped_on_resume(recipe, plan.resume))
    stage = sft_warmup.stage_names(recipe.warmup_sft.dataset)[0]
    steps = recipe.warmup_sft.steps
    with status(f"{stage}: {steps} steps…") as shown:

        def progress(step: int, loss: float) -> None:  # the spinner's line: where the stage is
            if hasattr(shown, "update"):
                shown.update(f"{stage}: step {step}/{steps} · loss {loss:.3f}")

        record = train_warmup(plan, model, tokenizer, plan.output_dir, on_step=progress)
    started = time.perf_counter()
    evaluation = second = None
    if rows:
        with status(f"evaluating {len(rows)} held-out prompts after the {stage}…"):
            evaluation = evaluate_held_out(
                recipe, model, tokenizer, reward_funcs, rows, k=recipe.eval_samples
            )
    if transfer:
        with status(f"evaluating {len(transfer)} held-out prompts written differently after the {stage}…"):
            second = evaluate_held_out(
                recipe, model, tokenizer, reward_funcs, transfer, k=recipe.eval_samples
            )
    done = WarmupStage(record, evaluation, second, time.perf_counter() - started)
    _write(plan.output_dir, done)
    return done


#: The stage as it ran (its record and the evaluations after it), written as soon as it is evaluated: a run
#: stopped later (Ctrl-C, the signal watch) and resumed reports the same "SFT only" / "aligned only" column.
STAGE_FILE = "stage.json"


def _write(run_dir: Path, stage: WarmupStage) -> None:
    import json

    from grpo_kit.support.paths import write_atomic
    from grpo_kit.trainers.sft_warmup import WARMUP_DIR

    payload = {
        "record": stage.record,
        "evaluation": stage.evaluation.to_dict() if stage.evaluation is not None else None,
        "transfer": stage.transfer.to_dict() if stage.transfer is not None else None,
        "eval_seconds": stage.eval_seconds,
    }
    write_atomic(Path(run_dir) / WARMUP_DIR / STAGE_FILE, json.dumps(payload, indent=1) + "\n")


def _read_back(run_dir: Path) -> WarmupStage | None:
    """The stage the run's first session ran (:data:`STAGE_FILE`), or None when it was not written (a run from
    before the file, or stopped before the stage was evaluated)."""
    import json

    from grpo_kit.evaluation.eval_report import EvalReport
    from grpo_kit.trainers.sft_warmup import WARMUP_DIR

    path = Path(run_dir) / WARMUP_DIR / STAGE_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))

    def report(value):
        return EvalReport.from_dict(value) if value is not None else None

    record = {**data["record"], "read_back": f"ran before the resume; read from {WARMUP_DIR}/{STAGE_FILE}"}
    return WarmupStage(record, report(data["evaluation"]), report(data["transfer"]), 0.0)
