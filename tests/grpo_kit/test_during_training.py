"""Issue 43, item 4: evaluation during training (``eval_steps``, TRL's name) on the standalone loop and the TRL path.

The held-out rows are evaluated every N optimizer steps and at the last one, greedy, with the decoding of the
evaluations before and after (``grpo_kit.runs.during_training``): ``eval/...`` records in metrics.jsonl, the
report card's curve and table, ``run.json["evaluation_during_training"]`` (best step, peaked and fell), and
``--keep-best``. The evaluation must not change what training does.
"""

from __future__ import annotations

import contextlib
import io
import json
import math

import pytest
import torch

from grpo_kit.cli import main
from grpo_kit.config.rules import evaluation_interval, evaluation_settings
from grpo_kit.evaluation.eval_report import EvalReport
from grpo_kit.runs import during_training, execute, plan_run

pytestmark = pytest.mark.xdist_group("cli")

# the main job's recipe on the tiny model: 2 prompts x 4 completions of 8 tokens a step
TINY = {"model": "tiny", "max_completion_length": 8, "per_device_train_batch_size": 8, "logging_steps": 1}
TRAINING_KEYS = ("loss", "reward", "grad_norm", "completions/mean_length")


def _run(tmp_path, name, *, loop="standalone", steps=3, eval_prompts=3, keep_best=False, **overrides):
    plan = plan_run(
        "smoltldr-length-small",
        overrides={**TINY, **overrides},
        loop=loop,
        max_steps=steps,
        output_dir=tmp_path / name,
    )
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        outcome = execute(plan, samples=1, merge=False, eval_prompts=eval_prompts, keep_best=keep_best)
    return outcome, printed.getvalue()


def _records(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


# --- the rule every path shares ---------------------------------------------------------------------------


def test_eval_steps_alone_means_steps_and_the_strategy_alone_means_every_logging_step():
    assert evaluation_interval({}) is None
    assert evaluation_interval({"eval_steps": 4}) == 4
    assert evaluation_settings({"eval_steps": 4}) == {"eval_strategy": "steps", "eval_steps": 4}
    assert evaluation_interval({"eval_strategy": "steps", "logging_steps": 3}) == 3
    with pytest.raises(ValueError, match="evaluates nothing"):
        evaluation_interval({"eval_steps": 4, "eval_strategy": "no"})


def test_the_loop_refuses_a_schedule_without_an_evaluation(tmp_path):
    from grpo_kit.config.loop import to_loop_config
    from grpo_kit.loop import training as loop
    from grpo_kit.models import load_model
    from grpo_kit.recipes.catalogue import get_recipe

    recipe = get_recipe("smoltldr-length-small", **TINY, eval_steps=2, max_steps=2)
    model, tokenizer = load_model("tiny")
    config = to_loop_config(recipe, output_dir=str(tmp_path / "run"))
    assert (config.eval_strategy, config.eval_steps) == ("steps", 2)
    with pytest.raises(ValueError, match="pass evaluate="):
        loop.train(model, tokenizer, recipe.load_dataset(), recipe.build_reward_funcs(tokenizer), config)


# --- both paths, end to end -----------------------------------------------------------------------------------


@pytest.mark.parametrize("loop", ["standalone", "trl"])
def test_eval_steps_evaluates_held_out_rows_every_n_steps_without_changing_training(tmp_path, loop):
    outcome, printed = _run(tmp_path, "with", loop=loop, eval_steps=2)
    run_dir = outcome.plan.output_dir
    records = _records(run_dir)
    evals = [r for r in records if any(k.startswith("eval/") for k in r)]
    metric = outcome.summary["evaluation"]["metric"]
    # every 2 steps and the last one (TRL's DefaultFlowCallback rule), under TRL's eval/ prefix
    assert [r["step"] for r in evals] == [2, 3]
    assert all(f"eval/{metric}" in r and "eval/reward" in r and "eval/reward_hack_signs" in r for r in evals)
    assert not any("eval_loss" in r for r in records)  # TRL's own sampled evaluation did not run
    assert "held-out at step 2" in printed
    # the same rows, decoding and scoring as the evaluation after training: the last point is that figure
    assert evals[-1][f"eval/{metric}"] == pytest.approx(outcome.summary["evaluation"]["after"])
    during = outcome.summary["evaluation_during_training"]
    assert during["every"] == 2 and during["metric"] == metric
    assert [p["step"] for p in during["points"]] == [0, 2, 3]
    assert during["points"][0]["value"] == pytest.approx(outcome.summary["evaluation"]["before"])
    assert sorted(p.name for p in (run_dir / during_training.FOLDER).iterdir()) == [
        "step-00002.json",
        "step-00003.json",
    ]
    # its time is evaluation, not training
    assert outcome.summary["eval_seconds"] > sum(r["eval/seconds"] for r in evals) * 0.99
    # the report card: a section in report.md, the points in eval.json
    report = (run_dir / "report.md").read_text()
    assert "during training (every 2 steps)" in report and "| 2 |" in report
    assert (
        json.loads((run_dir / "eval.json").read_text())["during_training"]["best_step"] == during["best_step"]
    )
    # training itself is the same run as without the evaluations (RNG forked, weights put back)
    plain, _ = _run(tmp_path, "without", loop=loop)
    steps_with = {r["step"]: r for r in records if "loss" in r and "step" in r}
    steps_without = {r["step"]: r for r in _records(plain.plan.output_dir) if "loss" in r and "step" in r}
    assert sorted(steps_with) == sorted(steps_without) == [1, 2, 3]
    for step, record in steps_with.items():
        for key in TRAINING_KEYS:
            assert record[key] == steps_without[step][key], (step, key)


def test_keep_best_restores_the_best_evaluations_weights(tmp_path):
    from grpo_kit.artifacts.checkpoint import trainable_parameters
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.runs.held_out import evaluate_held_out, held_out_rows, training_dataset
    from grpo_kit.runs.models import load_recipe_model

    recipe = get_recipe("smoltldr-length-small", **TINY)
    model, tokenizer = load_recipe_model(recipe)
    funcs = recipe.build_reward_funcs(tokenizer)
    rows = held_out_rows(recipe, 3, training=training_dataset(recipe))
    before = evaluate_held_out(recipe, model, tokenizer, funcs, rows, k=recipe.eval_samples)
    evaluator = during_training.HeldOutDuringTraining(
        recipe, tokenizer, funcs, rows, before, tmp_path, keep_best=True
    )
    with contextlib.redirect_stdout(io.StringIO()):
        first = evaluator(model, 1)
        at_step_1 = {n: p.detach().clone() for n, p in trainable_parameters(model)}
        with torch.no_grad():
            for _, p in trainable_parameters(model):
                p.add_(torch.randn_like(p))  # another model at step 2
        second = evaluator(model, 2)
    metric = evaluator.metric
    better_at_2 = second[f"eval/{metric}"] < first[f"eval/{metric}"]  # a length error: lower is better
    kept = during_training.restore_best(model, tmp_path)
    assert kept["step"] == (2 if better_at_2 else 1)
    if not better_at_2:
        for name, p in trainable_parameters(model):
            assert torch.equal(p, at_step_1[name]), name
    assert evaluator.seconds > 0


def _report(values):
    """An EvalReport of one metric over len(values) prompts (the data a saved evaluation holds)."""
    return EvalReport(
        per_prompt={"reward": list(values), "length": [5.0] * len(values)},
        prompts=[f"p{i}" for i in range(len(values))],
        completions=[f"answer {i}" for i in range(len(values))],
        reward_names=["r"],
        reward_kinds={"r": "other"},
        settings={},
    )


def test_a_metric_that_peaked_and_fell_is_named_with_its_best_step(tmp_path):
    before = _report([0.0] * 16)
    values = {2: [1.0] * 16, 4: [1.0] * 14 + [0.0] * 2, 6: [0.0] * 15 + [1.0]}
    folder = tmp_path / during_training.FOLDER
    folder.mkdir()
    for step, v in values.items():
        (folder / f"step-{step:05d}.json").write_text(
            json.dumps({"step": step, "report": _report(v).to_dict(), "signs": []})
        )
    history = [{"step": s, "eval/reward": sum(v) / len(v)} for s, v in values.items()]
    summary = during_training.curve_summary(tmp_path, history, before, every=2)
    assert (summary["best_step"], summary["last_step"]) == (2, 6)
    assert summary["peaked_and_fell"] is True
    assert summary["last_minus_best"]["ci_high"] < 0
    assert "then fell" in summary["line"] and "--keep-best would export step 2" in summary["line"]
    # a curve that only wobbles within noise is not called a fall
    values[6] = [1.0] * 15 + [0.0]
    (folder / "step-00006.json").write_text(
        json.dumps({"step": 6, "report": _report(values[6]).to_dict(), "signs": []})
    )
    history[-1]["eval/reward"] = 15 / 16
    summary = during_training.curve_summary(tmp_path, history, before, every=2)
    assert summary["peaked_and_fell"] is False and "not worse beyond noise" in summary["line"]
    assert not math.isnan(summary["points"][0]["value"])


# --- the CLI: refusals before the model loads -----------------------------------------------------------------


def test_eval_prompts_0_turns_the_evaluation_during_training_off_before_the_config_is_built(tmp_path):
    plan = plan_run(
        "smoltldr-length-small", overrides={"model": "tiny"}, output_dir=tmp_path / "r", eval_prompts=0
    )
    assert "eval_steps" not in plan.recipe.training and plan.path_config.eval_strategy == "no"
    scheduled = plan_run("smoltldr-length-small", overrides={"model": "tiny"}, output_dir=tmp_path / "s")
    assert scheduled.path_config.eval_steps == 8 and scheduled.path_config.eval_strategy == "steps"
    with pytest.raises(ValueError, match="plan_run"):
        execute(scheduled, eval_prompts=0)


@pytest.mark.parametrize(
    ("argv", "fix"),
    [
        (["--set", "eval_steps=None", "--keep-best"], "add --set eval_steps=N"),
        (["--set", "eval_strategy=epoch"], "set eval_steps=N"),
    ],
)
def test_an_evaluation_that_cannot_run_is_one_line_before_loading(tmp_path, monkeypatch, argv, fix):
    monkeypatch.chdir(tmp_path)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()) as out:
        status = main(["train", "--set", "model=tiny", "--output-dir", "run", *argv])
    text = out.getvalue() + err.getvalue()
    assert status != 0
    assert fix in " ".join(text.split())
    assert "Traceback" not in text
    assert not (tmp_path / "run").exists()


# --- the curve drawn: report card and the lessons' live curve -----------------------------------------------


def test_the_report_card_and_the_live_curve_draw_the_held_out_curve_beside_the_training_reward():
    from grpo_kit.artifacts.plots import report_card_figure
    from grpo_kit.evaluation.comparison import compare
    from grpo_kit.teaching.lesson_helpers import LiveRewardCurve

    change = compare(_report([0.0] * 8), _report([1.0] * 8), metric="reward")
    log = [{"step": s, "reward": 0.1 * s} for s in (1, 2, 3, 4)]
    curve = {
        "metric": "reward",
        "points": [{"step": 0, "value": 0.0}, {"step": 2, "value": 0.5}, {"step": 4, "value": 1.0}],
        "best_step": 4,
    }
    with_curve = report_card_figure([change], log_history=log, held_out_curve=curve)
    without = report_card_figure([change], log_history=log)
    assert len(with_curve.axes) == len(without.axes) + 1  # the held-out metric's own axis
    drawn = [line for ax in with_curve.axes for line in ax.get_lines() if "held-out" in line.get_label()]
    assert len(drawn) == 1 and list(drawn[0].get_xdata()) == [0, 2, 4]
    live = LiveRewardCurve()
    for record in log:
        live.add(record)
    live.add({"step": 2, "eval/reward": 0.5, "eval/length": 5.0})
    live.add({"step": 4, "eval/reward": 1.0, "eval/length": 5.0})
    figure = live.figure()
    drawn = [line for ax in figure.axes for line in ax.get_lines() if "held-out" in line.get_label()]
    assert len(drawn) == 1 and list(drawn[0].get_ydata()) == [0.5, 1.0]


def test_the_loop_resumes_from_a_checkpoint_folder_named_and_keeps_evaluating(tmp_path, monkeypatch):
    """``--resume <run>/checkpoint-N`` on the loop (the checkpoint it then writes once failed on the Path in its
    config), with the held-out evaluation every 2 steps continuing after the resume."""
    monkeypatch.chdir(tmp_path)
    argv = [
        "train", "--set", "model=tiny", "--set", "max_completion_length=8", "--set", "save_steps=1",
        "--set", "eval_steps=2", "--eval-prompts", "2", "--samples", "1", "--no-merge", "--output-dir", "run",
        "--set", "save_total_limit=2",  # the recipe keeps the last checkpoint only; this test resumes from the first
    ]  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([*argv, "--max-steps", "2"]) == 0
        first = _records(tmp_path / "run")
        assert main([*argv, "--max-steps", "2", "--resume", "run/checkpoint-1"]) == 0
    again = _records(tmp_path / "run")
    evals = [r["step"] for r in again if "eval/reward" in r]
    assert evals == [2]  # step 2 evaluated again after the resume, once; the older record dropped
    assert [r["step"] for r in again if "loss" in r] == [r["step"] for r in first if "loss" in r] == [1, 2]
    summary = json.loads((tmp_path / "run" / "run.json").read_text())
    assert [p["step"] for p in summary["evaluation_during_training"]["points"]] == [0, 2]


def test_the_evaluation_after_training_is_the_last_evaluation_during_it_read_back(tmp_path, monkeypatch):
    """The last step's evaluation decoded the held-out rows at the weights the run ends with: the evaluation after
    training reads that report back instead of decoding the same rows again. The set written differently is not
    evaluated during training, so it is decoded after."""
    from grpo_kit.evaluation import eval_report

    decoded: list[tuple[str, ...]] = []
    real_generate = eval_report.generate

    def counting_generate(model, tokenizer, prompts, *args, **kwargs):
        decoded.append(tuple(map(str, prompts)))
        return real_generate(model, tokenizer, prompts, *args, **kwargs)

    monkeypatch.setattr(eval_report, "generate", counting_generate)
    outcome, _ = _run(tmp_path, "read-back", eval_steps=2)
    run_dir = outcome.plan.output_dir
    held_out, transfer = decoded[0], decoded[1]  # before training: the held-out rows, then the second set
    assert held_out != transfer
    assert decoded.count(held_out) == 3  # before, at step 2, at step 3; not again after
    assert decoded.count(transfer) == 2  # before and after
    last = json.loads((run_dir / during_training.FOLDER / "step-00003.json").read_text())["report"]
    after = json.loads((run_dir / "eval.json").read_text())["after"]
    assert after["completions"] == last["completions"] and after["per_prompt"] == last["per_prompt"]


def test_with_keep_best_the_evaluation_after_is_the_best_steps(tmp_path):
    outcome, _ = _run(tmp_path, "best", eval_steps=1, keep_best=True)
    run_dir = outcome.plan.output_dir
    best = json.loads((run_dir / during_training.FOLDER / "best.json").read_text())["step"]
    kept = json.loads((run_dir / during_training.FOLDER / f"step-{best:05d}.json").read_text())["report"]
    after = json.loads((run_dir / "eval.json").read_text())["after"]
    assert after["completions"] == kept["completions"] and after["per_prompt"] == kept["per_prompt"]


def test_a_report_of_other_rows_is_not_read_back(tmp_path):
    report = _report([1.0, 2.0])
    folder = tmp_path / during_training.FOLDER
    folder.mkdir()
    (folder / "step-00004.json").write_text(json.dumps({"step": 4, "report": report.to_dict(), "signs": []}))
    assert during_training.stored_report(tmp_path, 4, report.prompts).completions == report.completions
    assert during_training.stored_report(tmp_path, 4, [*report.prompts[:1], "another row"]) is None
    assert during_training.stored_report(tmp_path, 5, report.prompts) is None
    (folder / "step-00004.json").write_text("{not json")
    assert during_training.stored_report(tmp_path, 4, report.prompts) is None
