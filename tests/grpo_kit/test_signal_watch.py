"""Issue 56, item 1: a run without learning signal says so and stops saved, on every trainer.

The tiny random model almost never writes EOS, so a recipe on it has every completion clipped: the case the
issue met. A run with signal needs completions that end: ``_ending_model`` gives the tiny model's output layer a
fixed bias towards EOS (a real model whose answers are 1-8 tokens long), and a length reward then differs within
every group. A constant reward gives zero variance in every group."""

from __future__ import annotations

import json
import math

import pytest
import torch
from shared import tiny_loop_config, tiny_recipe

from grpo_kit.cli import main
from grpo_kit.evaluation.preflight import clipped_finding
from grpo_kit.evaluation.signal_watch import KEEP_TRAINING, SignalWatch
from grpo_kit.loop import training
from grpo_kit.trainers import trl_path

pytestmark = pytest.mark.xdist_group("cli")

QUIET = ["--samples", "0", "--eval-prompts", "0", "--no-merge"]
CLIPPED_RECIPE = """\
name: counting
model: tiny
dataset: smoltldr
dataset_source: synthetic
dataset_size: 16
rewards:
  - {name: length_reward, kwargs: {ideal_length: 16, unit: tokens}}
lora: {r: 4, lora_alpha: 8}
training:
  learning_rate: 1.0e-4
  per_device_train_batch_size: 8
  num_generations: 4
  max_completion_length: 8
  max_steps: 5
  logging_steps: 1
  save_steps: 100
"""


def _record(step, zero_std=0.0, clipped=0.0):
    return {"step": step, "frac_reward_zero_std": zero_std, "completions/clipped_ratio": clipped}


# --- the watch itself --------------------------------------------------------------------------------------


def test_the_watch_stops_after_its_steps_in_a_row_and_names_the_cause_in_preflights_words():
    watch = SignalWatch(3, True, 8, say=pytest.fail)
    said = [watch.observe(_record(step, clipped=1.0), max_steps=10) for step in (1, 2, 3)]
    assert said == [False, False, True] and watch.stopped_at == 3
    finding = clipped_finding(1.0, 8, no_go=True)
    line = watch.line()
    assert line.startswith("Stopped at step 3") and finding.message in line and KEEP_TRAINING in line
    assert watch.record()["cause"] == "clipped" and watch.record()["steps"] == 3


def test_a_step_with_signal_starts_the_count_again_and_the_last_step_is_not_a_stop():
    lines = []
    watch = SignalWatch(3, True, 8, say=lines.append)
    records = [_record(1, zero_std=1.0), _record(2, zero_std=1.0), _record(3, zero_std=0.5), _record(4, 1.0)]
    assert not any(watch.observe(r, max_steps=6) for r in records) and watch.record() is None
    assert not watch.observe(_record(5, zero_std=1.0), max_steps=6)
    assert not watch.observe(_record(6, zero_std=1.0), max_steps=6)  # the run ends here anyway: no stop
    assert watch.stopped_at is None and len(lines) == 1 and "zero reward variance" in lines[0]
    assert watch.record()["first_step"] == 4 and watch.record()["last_step"] == 6


def test_a_resumed_watch_replays_the_records_before_its_checkpoint_silently():
    """The kill soak found it: a run resumed after its streak began named no cause in run.json, where the run
    nobody stopped did. The resumed watch reads the restored records again, printing nothing, stopping nothing."""
    records = [_record(step, clipped=1.0) for step in (1, 2, 3, 4)]
    unkilled, lines = SignalWatch(3, False, 8, say=print), []
    for record in records:
        unkilled.observe(record, max_steps=4)
    resumed = SignalWatch(3, True, 8, say=lines.append)
    resumed.replay([*records[:3], {"step": 3, "eval/reward": -8.0}], max_steps=4)  # stopped after step 3
    assert lines == [] and resumed.stopped_at is None  # those steps are past: nothing said, nothing stopped
    assert not resumed.observe(records[3], max_steps=4)
    assert resumed.record() == unkilled.record()


def test_a_logged_window_counts_its_steps_and_an_evaluation_record_is_not_read():
    watch = SignalWatch(4, True, 8, logging_steps=2, say=pytest.fail)
    assert not watch.observe(_record(2, clipped=0.9), max_steps=10)
    assert not watch.observe({"step": 2, "eval/reward": 0.0}, max_steps=10)
    assert watch.observe(_record(4, clipped=0.85), max_steps=10)  # 2 records of 2 steps each
    assert watch.record()["steps"] == 4 and "85% of completions" in watch.line()


# --- the standalone loop and TRL, on real runs -------------------------------------------------------------


def _ending_model():
    """The tiny model with its output layer biased towards EOS: answers of a few tokens, some clipped."""
    from grpo_kit.models import tiny_model

    model, tokenizer = tiny_model(seed=0)
    head = model.get_output_embeddings()
    bias = torch.zeros(head.out_features)
    bias[tokenizer.eos_token_id] = math.log(0.3 / 0.7 * head.out_features)  # P(EOS) about 0.3 a token
    head.bias = torch.nn.Parameter(bias, requires_grad=False)
    return model, tokenizer


def _length(completion_ids, **kwargs):
    return [float(len(ids)) for ids in completion_ids]


def _constant(completions, **kwargs):
    return [1.0] * len(completions)


def _dataset():
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [f"Count to {n}." for n in range(8)]})


def _train(loop, tmp_path, reward):
    model, tokenizer = _ending_model()
    if loop == "standalone":
        config = tiny_loop_config(tmp_path, max_steps=5, save_steps=100, stop_on_no_signal=True)
        return training.train(model, tokenizer, _dataset(), [reward], config)
    return trl_path.train_with_trl(
        tiny_recipe(logging_steps=1, stop_on_no_signal=True),
        model=model,
        tokenizer=tokenizer,
        train_dataset=_dataset(),
        reward_funcs=[reward],
        output_dir=tmp_path,
        max_steps=5,
        device="cpu",
        save_final=False,
    )


@pytest.mark.parametrize("loop", ["standalone", "trl"])
def test_a_run_with_signal_is_not_stopped(tmp_path, loop, capsys):
    result = _train(loop, tmp_path, _length)
    assert result.global_step == 5 and not result.interrupted and result.no_signal is None
    assert "learning signal" not in capsys.readouterr().out


@pytest.mark.parametrize("loop", ["standalone", "trl"])
def test_flat_rewards_stop_the_run_saved_and_resumable(tmp_path, loop, capsys):
    result = _train(loop, tmp_path, _constant)
    assert result.interrupted and result.global_step == 3 and result.no_signal["cause"] == "zero_std"
    assert (tmp_path / "checkpoint-3").is_dir()
    (line,) = [line for line in capsys.readouterr().out.splitlines() if "learning signal" in line]
    assert line.startswith("Stopped at step 3") and "zero reward variance" in line and KEEP_TRAINING in line
    # keep training anyway: the run goes on from its checkpoint to the end, and says why it may not learn
    if loop == "standalone":
        # the watch's settings say where a run reports, not what it computes: a resume may change them
        watch = {"no_signal_steps": 1, "stop_on_no_signal": False}
        config = tiny_loop_config(tmp_path, max_steps=5, save_steps=100, resume_from_checkpoint=True, **watch)
        model, tokenizer = _ending_model()
        resumed = training.train(model, tokenizer, _dataset(), [_constant], config)
        assert resumed.global_step == 5 and not resumed.interrupted
        # the streak the run had before its checkpoint counts (the watch replays it): steps 1-5
        assert resumed.no_signal["stopped_at"] is None and resumed.no_signal["first_step"] == 1
        assert resumed.no_signal["last_step"] == 5


# --- through the CLI: a recipe file whose completions are all clipped --------------------------------------


@pytest.mark.parametrize("loop", ["standalone", "trl"])
def test_a_recipe_file_with_every_completion_clipped_stops_and_resumes(tmp_path, loop, capsys):
    config = tmp_path / "counting.yaml"
    config.write_text(CLIPPED_RECIPE)
    run = tmp_path / "run"
    argv = ["train", "--config", str(config), "--loop", loop, *QUIET, "--output-dir", str(run)]
    assert main([*argv, "--no-preflight"]) == 1
    out = capsys.readouterr().out
    (line,) = [line for line in out.splitlines() if "no learning signal" in line]
    assert line.startswith("Stopped at step 3") and "max_completion_length=8" in line, out
    assert KEEP_TRAINING in line and (run / "checkpoint-3").is_dir() and not (run / "run.json").exists()
    # the printed command continues it to the end (the stop was said; a resume trains on) and names the cause:
    # the streak before the checkpoint is replayed, so it is steps 1-5, as in a run nobody stopped
    assert main(["train", "--output-dir", str(run), "--resume", *QUIET]) == 0
    out = capsys.readouterr().out
    summary = json.loads((run / "run.json").read_text())
    assert summary["steps"] == 5 and summary["no_signal"]["first_step"] == 1
    assert summary["no_signal"]["last_step"] == 5 and summary["no_signal"]["stopped_at"] is None
    assert "Traceback" not in out


def test_keep_training_anyway_names_the_cause_in_the_summary_run_json_and_report_card(tmp_path, capsys):
    config = tmp_path / "counting.yaml"
    config.write_text(CLIPPED_RECIPE)
    run = tmp_path / "run"
    argv = ["train", "--config", str(config), "--samples", "0", "--eval-prompts", "2", "--no-merge"]
    assert main([*argv, "--no-preflight", "--set", "stop_on_no_signal=false", "--output-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert out.count("No learning signal for 3 steps in a row (steps 1-3)") == 1, out
    summary = json.loads((run / "run.json").read_text())
    assert summary["steps"] == 5 and summary["no_signal"]["cause"] == "clipped"
    assert summary["no_signal"]["steps"] == 5 and "max_completion_length=8" in summary["no_signal"]["message"]
    assert "no learning signal" in out  # the summary table's row
    assert "No learning signal." in (run / "report.md").read_text()
    assert json.loads((run / "eval.json").read_text())["no_signal"]["cause"] == "clipped"


def test_a_recipe_file_runs_preflight_first_unless_told_not_to(tmp_path, capsys):
    config = tmp_path / "counting.yaml"
    config.write_text(CLIPPED_RECIPE)
    run = tmp_path / "run"
    argv = ["train", "--config", str(config), *QUIET, "--output-dir", str(run)]
    assert main(argv) == 1  # every completion of the tiny model is clipped: no-go
    out = capsys.readouterr().out
    assert "pre-flight first (a recipe file's default; --no-preflight skips it)." in out
    assert "NO-GO" in out and "max_completion_length=8" in out and not run.exists()
    assert main([*argv, "--preflight", "--no-preflight"]) == 2
    assert main(["train", "--recipe", "smoltldr-length-small", "--no-preflight"]) == 2
    assert "--no-preflight only matters with --config" in capsys.readouterr().out
