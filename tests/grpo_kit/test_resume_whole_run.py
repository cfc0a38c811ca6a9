"""Issue 55, "a resumed run is the whole run": ``--resume`` alone replays every flag the run started with, a stop
inside an evaluation during training leaves no hole in the curve, a run stopped before its first checkpoint
starts again on ``--resume``, and a recipe file's ``output_dir:`` names the run folder. Real runs of the tiny
model through ``grpo-kit train`` (in-process), a SIGTERM sent by the process to itself where the test needs it."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from grpo_kit.cli import main
from grpo_kit.runs import during_training, plan_run
from grpo_kit.runs.plan import prepare_run_dir

pytestmark = pytest.mark.xdist_group("cli")

TINY = ["--set", "model=tiny", "--set", "max_completion_length=8"]


def _stop_inside_the_evaluation_of(step: int, monkeypatch) -> list[int]:
    """The held-out evaluation after ``step`` receives a real SIGTERM while it runs; returns the steps evaluated."""
    real = during_training.HeldOutDuringTraining.__call__
    evaluated: list[int] = []

    def evaluate(self, model, at_step):
        evaluated.append(at_step)
        if at_step == step and evaluated.count(step) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(
                3
            )  # the loop's handler raises here; TRL's callback notes it and lets the evaluation run
        return real(self, model, at_step)

    monkeypatch.setattr(during_training.HeldOutDuringTraining, "__call__", evaluate)
    return evaluated


def _curve_steps(run: Path) -> list[int]:
    summary = json.loads((run / "run.json").read_text())
    return [point["step"] for point in summary["evaluation_during_training"]["points"]]


@pytest.mark.parametrize("loop", ["standalone", "trl"])
def test_resume_alone_replays_every_flag_and_evaluates_the_step_a_sigterm_cut(
    tmp_path, capsys, monkeypatch, loop
):
    run = tmp_path / "run"
    flags = ["--samples", "0", "--eval-prompts", "4", "--no-merge", "--keep-best"]
    first = ["train", *TINY, "--set", "eval_steps=1", "--loop", loop, "--max-steps", "3", *flags]
    evaluated = _stop_inside_the_evaluation_of(2, monkeypatch)
    assert main([*first, "--output-dir", str(run)]) == 143
    out = capsys.readouterr().out
    # printed before training (a SIGKILL prints nothing), and the same command continues the run
    assert f"continue it with: grpo-kit train --output-dir {run} --resume" in out, out
    assert (run / "checkpoint-2").is_dir() and not (run / "run.json").exists()

    assert main(["train", "--output-dir", str(run), "--resume"]) == 0, capsys.readouterr().out
    assert _curve_steps(run) == [0, 1, 2, 3]  # step 2's evaluation, cut by the SIGTERM, is in the curve
    assert evaluated.count(2) == 2 if loop == "standalone" else evaluated.count(2) == 1  # TRL let it finish
    summary = json.loads((run / "run.json").read_text())
    assert "kept_step" in summary["evaluation_during_training"]  # --keep-best
    # the signal watch's streak (every answer cut at 8 tokens) spans the stop, as in a run nobody stopped
    assert summary["no_signal"]["first_step"] == 1 and summary["no_signal"]["last_step"] == 3
    assert not (run / "merged").exists()  # --no-merge
    assert len(json.loads((run / "eval.json").read_text())["before"]["prompts"]) == 4  # --eval-prompts 4
    assert "| 1 |" not in (run / "samples.md").read_text()  # --samples 0: no answers before/after


def test_a_run_stopped_before_its_first_checkpoint_starts_again_on_resume(tmp_path, capsys):
    run = tmp_path / "run"
    # killed before its first checkpoint: run_config.json (with its flags) and nothing trained
    plan = plan_run(
        overrides={"model": "tiny", "max_completion_length": 8},
        max_steps=1,
        output_dir=run,
        flags={"samples": 0, "eval_prompts": 0, "no_merge": True},
    )
    prepare_run_dir(plan)
    assert main(["train", "--output-dir", str(run), "--resume"]) == 0
    out = capsys.readouterr().out
    assert "has no checkpoint" in out and "starts again from step 0" in out, out
    assert json.loads((run / "run.json").read_text())["steps"] == 1
    assert not (run / "merged").exists()  # its stored flags
    (aside,) = tmp_path.glob("run.old-*")
    assert (aside / "run_config.json").is_file()  # what it had written is kept, moved aside


def test_resume_with_max_steps_extends_a_finished_run_with_its_own_recipe(tmp_path, capsys):
    run = tmp_path / "run"
    first = ["train", *TINY, "--set", "learning_rate=1e-4", "--max-steps", "1", "--samples", "0"]
    assert main([*first, "--eval-prompts", "0", "--no-merge", "--output-dir", str(run)]) == 0
    assert main(["train", "--output-dir", str(run), "--resume", "--max-steps", "2"]) == 0
    summary = json.loads((run / "run.json").read_text())
    assert summary["steps"] == 2 and summary["model"] == "tiny"
    assert summary["training"]["learning_rate"] == 1e-4  # the run's recipe, not the default one
    assert not (run / "merged").exists()
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2]


def test_a_resume_keeps_the_held_out_size_of_the_run(tmp_path):
    plan = plan_run(overrides={"model": "tiny"}, max_steps=2, output_dir=tmp_path / "run", eval_prompts=4)
    prepare_run_dir(plan)
    (plan.output_dir / "checkpoint-1").mkdir()
    (plan.output_dir / "checkpoint-1" / "trainer_state.json").write_text("{}")
    assert plan_run(output_dir=plan.output_dir, resume=True).flags["eval_prompts"] == 4
    with pytest.raises(ValueError, match="--eval-prompts 8: the run evaluated 4 held-out prompts"):
        plan_run(output_dir=plan.output_dir, resume=True, eval_prompts=8)
    replayed = plan_run(output_dir=plan.output_dir, resume=True, flags={"samples": 2})
    assert replayed.flags["samples"] == 2 and replayed.flags["eval_prompts"] == 4  # a flag given again wins


def test_output_dir_in_a_recipe_file_names_the_run_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "task.yaml"
    config.write_text(
        "name: od\nmodel: tiny\ndataset: smoltldr\ndataset_source: synthetic\noutput_dir: runs/od\n"
        "rewards:\n  - {name: length_reward, kwargs: {ideal_length: 16, unit: tokens}}\n"
    )
    from grpo_kit.recipes.files import load_recipe_file

    plan = plan_run(load_recipe_file(config), max_steps=1)
    assert plan.output_dir == Path("runs/od")  # relative to the working folder, as in TRL
    assert "output_dir" not in plan.recipe.training  # the folder is the run's, not its recipe's
    assert plan_run(load_recipe_file(config), max_steps=1, output_dir="elsewhere").output_dir == Path(
        "elsewhere"
    )
    assert plan_run(overrides={"model": "tiny", "output_dir": "by-set"}).output_dir == Path("by-set")


def test_the_run_folders_recipe_yaml_starts_the_same_run_again(tmp_path, monkeypatch):
    """Issue 56: recipe.yaml is the recipe as it ran (--set and --max-steps applied), so --config RUN/recipe.yaml
    repeats the run: the same recipe in run.json, and the same metrics for the same seed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "task.yaml").write_text(
        "name: again\nmodel: smollm2-135m-instruct\ndataset: smoltldr\ndataset_source: synthetic\n"
        "dataset_size: 16\neval_prompts: 4\nmax_steps: 40\n"
        "rewards:\n  - {name: length_reward, kwargs: {ideal_length: 16, unit: tokens}}\n"
    )
    quiet = ["--samples", "0", "--eval-prompts", "0", "--no-merge", "--no-preflight"]
    first = ["train", "--config", "task.yaml", "--set", "model=tiny", "--set", "max_completion_length=8"]
    assert main([*first, "--max-steps", "2", *quiet, "--output-dir", "one"]) == 0
    assert main(["train", "--config", "one/recipe.yaml", *quiet, "--output-dir", "two"]) == 0
    one, two = (json.loads((tmp_path / run / "run.json").read_text()) for run in ("one", "two"))
    for key in ("recipe", "model", "training", "steps", "loop"):
        assert one[key] == two[key], key
    assert one["model"] == "tiny" and one["steps"] == 2

    def untimed(run):
        records = [json.loads(line) for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
        return [{k: v for k, v in r.items() if "time" not in k and "_s" not in k} for r in records]

    assert untimed("one") == untimed("two")
