"""Evaluation during training (``eval_steps``, TRL's name): the run's held-out rows evaluated every N optimizer
steps, greedy, with the decoding and scoring of the evaluations before and after (``held_out.evaluate_held_out``),
on every path. The path says when (the loop's ``RunContext.evaluation_due``; TRL's ``DefaultFlowCallback`` with
``eval_strategy="steps"``: every N steps and the last one); :class:`HeldOutDuringTraining` says what:

- each evaluation is a record of ``metrics.jsonl`` under TRL's ``eval/`` prefix (``eval/reward``,
  ``eval/<headline metric>``, every metric of the ``EvalReport``, ``eval/reward_hack_signs``: how many of
  ``evaluation.reward_hacking``'s collapse signs it shows against the evaluation before training,
  ``eval/seconds``), and a file ``held_out_during_training/step-NNNNN.json`` (the ``EvalReport``), so the
  summary is rebuilt from the folder after a resume;
- its time is kept (``seconds``): ``execute`` counts it as evaluation, not training;
- with ``keep_best``, the trainable weights at the best headline value so far are saved
  (``held_out_during_training/best.safetensors``) and :func:`restore_best` puts them back before the exports.

:func:`curve_summary` reads the points back: the best step, and whether the held-out metric peaked and fell
(the last evaluation worse than the best one by a paired bootstrap CI that excludes 0), for ``run.json``, the
report card and the run's summary line.

Simplifications: the evaluation runs on process 0's model only (one process on CPU; under torchrun the other
ranks wait at the next collective); with ``keep_best`` the best step is chosen on these same held-out rows, so
the figure after training is optimistic for them (the run says so); the second held-out set
(``transfer_eval``) is not evaluated during training and was not used to choose.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "FOLDER",
    "HeldOutDuringTraining",
    "check_schedule",
    "curve_summary",
    "eval_points",
    "restore_best",
    "stored_report",
]

#: Where a run folder keeps the reports of its evaluations during training (and the best weights).
FOLDER = "held_out_during_training"
BEST_WEIGHTS = "best.safetensors"
BEST_RECORD = "best.json"


def check_schedule(recipe: Any, eval_prompts: int, keep_best: bool) -> int | None:
    """The recipe's evaluation interval (``settings.evaluation_interval``), refused before the model loads where it
    cannot run: held-out evaluation off (``eval_prompts=0``), or ``keep_best`` without a schedule."""
    from grpo_kit.config.rules import evaluation_interval

    interval = evaluation_interval(recipe.training)
    if interval is not None and eval_prompts == 0:
        raise ValueError(
            f"eval_steps={interval} evaluates the held-out rows during training, and eval_prompts=0 leaves none; "
            "plan the run with plan_run(..., eval_prompts=0) (grpo-kit train --eval-prompts 0 does), which turns "
            "it off, or give eval_prompts N > 0."
        )
    if keep_best and interval is None:
        raise ValueError(
            "--keep-best keeps the weights of the best evaluation during training, and this run evaluates only "
            "before and after; add --set eval_steps=N, or drop --keep-best."
        )
    return interval


def _report_path(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / FOLDER / f"step-{step:05d}.json"


def stored_report(run_dir: Path, step: int, prompts: Sequence[str]) -> Any:
    """The evaluation this run made at ``step`` (an ``EvalReport``), when it made one on these rendered
    ``prompts``; else None. The evaluation after training is the evaluation at the step whose weights the run
    ends with (the last step, or the best with ``keep_best``): the same rows, decoding, scoring and weights, so
    it is read back here instead of decoded again."""
    from grpo_kit.evaluation.eval_report import EvalReport

    path = _report_path(run_dir, step)
    if not path.is_file():
        return None
    try:
        report = EvalReport.from_dict(json.loads(path.read_text())["report"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # unreadable: evaluated again
    return report if report.prompts == list(prompts) else None


@dataclass
class HeldOutDuringTraining:
    """``evaluate(model, step)`` for the loop's ``train(evaluate=)`` and the TRL/Unsloth paths' ``train(evaluate=)``:
    the held-out ``rows`` evaluated as before training (``before``: that evaluation, the reference of the collapse
    signs and the metric's direction)."""

    recipe: Any
    tokenizer: Any
    reward_funcs: list
    rows: list[dict]
    before: Any  # EvalReport: the evaluation before training, on the same rows
    run_dir: Path
    keep_best: bool = False
    seconds: float = 0.0  # the evaluations' wall time in this process (off the training clock)
    metric: str = field(init=False)

    def __post_init__(self) -> None:
        from grpo_kit.evaluation.comparison import headline_metric

        self.metric = headline_metric(self.before.per_prompt)
        self.run_dir = Path(self.run_dir)

    def __call__(self, model: Any, step: int) -> dict[str, float]:
        from grpo_kit.evaluation.eval_report import better_direction
        from grpo_kit.evaluation.reward_hacking import collapse_signs
        from grpo_kit.runs.held_out import evaluate_held_out
        from grpo_kit.support.paths import write_atomic

        started = time.perf_counter()
        # generation forks the RNG and puts every weight back: training continues as if nothing ran
        report = evaluate_held_out(
            self.recipe, model, self.tokenizer, self.reward_funcs, self.rows, k=self.recipe.eval_samples
        )
        signs = collapse_signs(self.before, report)
        path = _report_path(self.run_dir, step)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"step": step, "report": report.to_dict(), "signs": signs}))
        value = report.metrics[self.metric]
        if self.keep_best and _is_better(value, self._best_value(), better_direction(self.metric)):
            self._save_best(model, step, value)
        seconds = time.perf_counter() - started
        self.seconds += seconds
        from grpo_kit.support.terminal import plain

        print(
            f"held-out at step {step}: {self.metric} {value:.4g} (before training "
            f"{self.before.metrics[self.metric]:.4g})"
            + (f"; collapse signs: {plain('; '.join(signs))}" if signs else ""),
            flush=True,
        )
        record = {f"eval/{name}": v for name, v in report.metrics.items() if math.isfinite(v)}
        return {**record, "eval/reward_hack_signs": float(len(signs)), "eval/seconds": seconds}

    # --- the best weights ------------------------------------------------------------------------------

    def _best_value(self) -> float | None:
        best = self.run_dir / FOLDER / BEST_RECORD
        return json.loads(best.read_text())["value"] if best.is_file() else None

    def _save_best(self, model: Any, step: int, value: float) -> None:
        """The trainable weights (the LoRA adapter, or every weight of a full fine-tune) at this step, then the
        record naming it: a crash between the two leaves the previous record, never a record without weights."""
        from safetensors.torch import save_file

        from grpo_kit.artifacts.checkpoint import trainable_parameters
        from grpo_kit.support.paths import write_atomic

        folder = self.run_dir / FOLDER
        weights = {
            name: tensor.detach().to("cpu").contiguous().clone()
            for name, tensor in trainable_parameters(model)
        }
        staged = folder / f".{BEST_WEIGHTS}.tmp"
        save_file(weights, str(staged))
        staged.replace(folder / BEST_WEIGHTS)
        write_atomic(folder / BEST_RECORD, json.dumps({"step": step, "metric": self.metric, "value": value}))


def _is_better(value: float, best: float | None, higher_is_better: bool | None) -> bool:
    if not math.isfinite(value):
        return False
    if best is None:
        return True
    return value > best if higher_is_better is not False else value < best


def restore_best(model: Any, run_dir: Path) -> dict[str, Any] | None:
    """Put the best evaluation's trainable weights back into ``model`` (``--keep-best``); returns its record
    (step, metric, value), or None when no evaluation saved any."""
    from safetensors.torch import load_file

    from grpo_kit.artifacts.checkpoint import trainable_parameters

    folder = Path(run_dir) / FOLDER
    if not (folder / BEST_RECORD).is_file():
        return None
    saved = load_file(str(folder / BEST_WEIGHTS))
    params = dict(trainable_parameters(model))
    if set(saved) != set(params):
        raise RuntimeError(
            f"{folder / BEST_WEIGHTS} holds other weights than the model trains ({len(saved)} vs {len(params)} "
            "tensors); it was written by another run. Train into a new output folder."
        )
    import torch

    with torch.no_grad():
        for name, tensor in saved.items():
            params[name].copy_(tensor)
    return json.loads((folder / BEST_RECORD).read_text())


# --- reading the curve back ----------------------------------------------------------------------------


def eval_points(log_history: Sequence[Mapping[str, Any]], metric: str) -> list[tuple[int, float]]:
    """(step, value) of ``eval/<metric>`` in a run's log history, in step order (the last record of a step
    wins: a resumed run evaluates a step again)."""
    points = {
        int(r["step"]): float(r[f"eval/{metric}"])
        for r in log_history
        if f"eval/{metric}" in r and "step" in r
    }
    return sorted(points.items())


def curve_summary(
    run_dir: Path,
    log_history: Sequence[Mapping[str, Any]],
    before: Any,
    *,
    every: int,
    kept: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """What ``run.json["evaluation_during_training"]`` says: how often, the points of the headline metric (step 0:
    before training), the best step, the signs at each evaluation, and ``peaked_and_fell``: the last evaluation is
    worse than the best by a paired bootstrap CI of (last - best) that excludes 0 (``evaluation.compare``). None
    when no evaluation ran."""
    from grpo_kit.evaluation.comparison import compare, headline_metric
    from grpo_kit.evaluation.eval_report import EvalReport, better_direction

    metric = headline_metric(before.per_prompt)
    points = eval_points(log_history, metric)
    if not points:
        return None
    higher = better_direction(metric)
    best_step, best_value = points[0]
    for step, value in points[1:]:
        if _is_better(value, best_value, higher):
            best_step, best_value = step, value
    last_step, last_value = points[-1]
    reports, signs = {}, {}
    for step in (best_step, last_step, *[s for s, _ in points]):
        path = _report_path(run_dir, step)
        if step not in reports and path.is_file():
            saved = json.loads(path.read_text())
            reports[step] = EvalReport.from_dict(saved["report"])
            signs[step] = saved["signs"]
    summary: dict[str, Any] = {
        "every": every,
        "metric": metric,
        "how": "greedy, the decoding of the evaluations before and after, on the same held-out rows",
        "points": [{"step": 0, "value": before.metrics[metric], "signs": []}]
        + [{"step": s, "value": v, "signs": signs.get(s)} for s, v in points],
        "best_step": best_step,
        "best_value": best_value,
        "last_step": last_step,
        "last_value": last_value,
        "peaked_and_fell": False,
    }
    if best_step != last_step and best_step in reports and last_step in reports:
        change = compare(reports[best_step], reports[last_step], metric=metric)
        summary["last_minus_best"] = {
            "mean_diff": change.mean_diff,
            "ci_low": change.ci_low,
            "ci_high": change.ci_high,
            "level": change.level,
        }
        summary["peaked_and_fell"] = change.verdict == "worse"
    if kept is not None:
        summary["kept_step"] = kept["step"]
        summary["kept_note"] = (
            f"--keep-best: the exported model is step {kept['step']}'s, chosen on these held-out rows, so the "
            "figure after training is optimistic for them; the second held-out set was not used to choose."
        )
    summary["line"] = curve_line(summary)
    return summary


def curve_line(summary: Mapping[str, Any]) -> str:
    """One line for the run's summary: where the held-out metric peaked, and whether it fell after."""
    best, last = summary["best_step"], summary["last_step"]
    text = f"best {summary['best_value']:.4g} at step {best}"
    if summary.get("peaked_and_fell"):
        d = summary["last_minus_best"]
        text += (
            f", then fell to {summary['last_value']:.4g} at step {last} (change {d['mean_diff']:+.3g}, "
            f"{d['level']:.0%} CI [{d['ci_low']:+.3g}, {d['ci_high']:+.3g}]): learning turned; "
            + (
                f"the exported model is step {summary['kept_step']}'s (--keep-best)"
                if "kept_step" in summary
                else f"--keep-best would export step {best}'s"
            )
        )
    elif best != last:
        text += f"; {summary['last_value']:.4g} at step {last}, not worse beyond noise"
    return text
