"""Issue 24, part B: every ending saves, one run per folder, half-finished work is recognised, files honour
the umask. Signal tests run `grpo-kit train` on the tiny model in a subprocess with bounded timeouts."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from grpo_kit.cli import main

pytestmark = pytest.mark.xdist_group("cli")

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
QUIET = ["--set", "model=tiny", "--samples", "0", "--eval-prompts", "0", "--no-merge"]


def _train_argv(run: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "grpo_kit.cli", "train", *QUIET, "--output-dir", str(run), *extra]


def _wait_until(condition, proc: subprocess.Popen, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            raise AssertionError(f"run ended (exit {proc.returncode}) before {what}:\n{proc.stdout.read()}")
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"{what} did not happen within {timeout} s")


def _metrics_steps(run: Path) -> list[int]:
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip()]


# --- 5. every ending saves ------------------------------------------------------------------------------


def test_sigterm_saves_a_checkpoint_prints_the_full_resume_command_and_exits_143(tmp_path):
    run = tmp_path / "run"
    argv = _train_argv(run, "--max-steps", "50", "--set", "save_steps=100", "--set", "logging_steps=1")
    argv += [
        "--set",
        "stop_on_no_signal=false",
    ]  # every completion of the tiny model is clipped: SIGTERM stops it
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    _wait_until(lambda: _metrics_steps(run), proc, 300, "the first step")
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 143, out
    checkpoints = sorted(run.glob("checkpoint-*"))
    assert checkpoints and (checkpoints[-1] / "trainer_state.json").is_file(), (
        out
    )  # save_steps=100: SIGTERM's
    assert "SIGTERM" in out and "Traceback" not in out, out
    assert out.count("Terminated (SIGTERM)") == 1, out  # the CLI's line only, not the loop's as well
    # --resume alone continues it: the run folder stores the invocation and every flag
    assert f"Continue with:\n  grpo-kit train --output-dir {run} --resume" in out, out
    stored = json.loads((run / "run_config.json").read_text())["config"]["invocation"]
    assert stored["max_steps"] == 50 and stored["overrides"]["model"] == "tiny"
    assert {k: stored["flags"][k] for k in ("samples", "eval_prompts", "no_merge")} == {
        "samples": 0,
        "eval_prompts": 0,
        "no_merge": True,
    }


def test_a_closed_stdout_stops_printing_not_training(tmp_path):
    run = tmp_path / "run"
    argv = _train_argv(run, "--max-steps", "3", "--set", "logging_steps=1")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
    proc.stdout.readline()  # `| head -1`: the reader takes one line and goes away
    proc.stdout.close()
    try:
        stderr = proc.stderr.read()
        proc.wait(timeout=400)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert _metrics_steps(run) == [1, 2, 3]
    assert json.loads((run / "run.json").read_text())["steps"] == 3
    assert "BrokenPipeError" not in stderr


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interruption_after_training_is_one_line_with_a_resume_path(
    tmp_path, capsys, monkeypatch, signum, status
):
    from grpo_kit.runs import phases

    real = phases._greedy_answers
    calls = []

    def interrupted_second_time(*args, **kwargs):  # the answers after training: a real signal arrives
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signum)
            time.sleep(5)  # the handler raises before this returns
        return real(*args, **kwargs)

    monkeypatch.setattr(phases, "_greedy_answers", interrupted_second_time)
    folder = tmp_path / "run"
    argv = ["train", "--set", "model=tiny", "--samples", "1", "--eval-prompts", "0", "--no-merge"]
    assert main([*argv, "--max-steps", "2", "--output-dir", str(folder)]) == status
    out = capsys.readouterr().out
    assert "Traceback" not in out and "during the evaluation after training" in out, out
    assert ("Terminated (SIGTERM)" in out) == (signum == signal.SIGTERM), out
    assert "checkpoint-2" in out and f"with:  grpo-kit train --output-dir {folder} --resume" in out, out
    assert not (folder / "run.json").exists() and not (folder / "adapter").exists()
    # The printed command finishes the run: no step is trained again, the answers and exports are written.
    command = out[out.index("with:  grpo-kit train --output-dir") + 7 :].splitlines()[0].split()
    assert main(command[1:]) == 0
    assert json.loads((folder / "run.json").read_text())["steps"] == 2
    assert (folder / "adapter" / "adapter_model.safetensors").is_file()
    assert _metrics_steps(folder) == [1, 2]


def test_a_plan_stores_its_flags_and_the_resume_command_is_resume_alone(tmp_path):
    from grpo_kit.runs import plan_run
    from grpo_kit.runs.plan import prepare_run_dir

    plan = plan_run(
        overrides={"model": "tiny"},
        max_steps=1,
        output_dir=tmp_path / "run",
        gguf="f16",
        flags={"samples": 0},
    )
    assert plan.resume_command() == f"grpo-kit train --output-dir {tmp_path / 'run'} --resume"
    prepare_run_dir(plan)
    stored = json.loads((tmp_path / "run" / "run_config.json").read_text())["config"]["invocation"]["flags"]
    assert stored["gguf"] == "f16" and stored["samples"] == 0 and stored["no_merge"] is False


def test_the_resume_command_names_trust_for_a_run_with_reward_code_of_its_own(tmp_path):
    from grpo_kit.runs import resume_command

    assert resume_command(tmp_path, trust_reward_code=True).endswith("--resume --trust-reward-code")


# --- 6. one run per folder ------------------------------------------------------------------------------


HOLD = """
import sys, time
from grpo_kit.runs.folder import lock_run_folder
with lock_run_folder(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def held_folder(tmp_path):
    folder = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True, env=ENV
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield folder, holder.pid
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_second_run_into_a_folder_in_use_is_refused_naming_the_pid(held_folder, capsys):
    folder, pid = held_folder
    assert main(["train", "--set", "model=tiny", "--output-dir", str(folder)]) == 2
    out = capsys.readouterr().out
    assert f"PID {pid}" in out and "in use" in out and "Traceback" not in out, out


def test_the_lock_is_held_for_the_run_and_checked_again_after_loading(held_folder):
    from grpo_kit import runs
    from grpo_kit.runs.folder import RunFolderInUse, lock_run_folder

    folder, pid = held_folder
    plan = runs.plan_run(
        overrides={"model": "tiny"}, max_steps=1, output_dir=folder.with_name("other"), eval_prompts=0
    )
    plan.output_dir = folder  # another process took the folder between the plan and the run
    with pytest.raises(RunFolderInUse, match=f"PID {pid}"):
        runs.execute(plan, samples=0, merge=False, eval_prompts=0)
    # In one process too: a second lock on a locked folder is refused; released, it can be taken again.
    other = folder.with_name("mine")
    with (
        lock_run_folder(other),
        pytest.raises(RunFolderInUse, match=f"PID {os.getpid()}"),
        lock_run_folder(other),
    ):
        pass
    with lock_run_folder(other):
        pass
    assert not list(other.iterdir())  # the lock file goes with the lock


# --- 8. half-finished work ------------------------------------------------------------------------------


def _fake_checkpoint(folder: Path, step: int) -> None:
    folder.mkdir(parents=True)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": []}))


def test_resume_skips_half_written_checkpoints_on_both_paths_saying_which(tmp_path):
    from grpo_kit.artifacts.checkpoint import HalfFinishedCheckpointWarning, latest_checkpoint
    from grpo_kit.trainers.builder import resume_point

    _fake_checkpoint(tmp_path / "checkpoint-1", 1)
    (tmp_path / "checkpoint-2").mkdir()  # SIGKILL during a TRL save
    (tmp_path / "checkpoint-3.tmp").mkdir()  # a full disk during a loop save
    with pytest.warns(HalfFinishedCheckpointWarning, match=r"checkpoint-2, checkpoint-3\.tmp.*checkpoint-1"):
        assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-1"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", HalfFinishedCheckpointWarning)
        assert resume_point(tmp_path, True) == (tmp_path / "checkpoint-1", 1)  # the TRL path's resume


def test_a_cut_last_metrics_line_is_dropped_with_a_note(tmp_path):
    from grpo_kit.artifacts.metrics_log import MetricsWriter

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1, "loss": 0.1}\n{"step": 2, "loss": 0.2}\n{"step": 3, "lo')
    with pytest.warns(UserWarning, match="last line was cut off"):
        MetricsWriter(path, keep_up_to_step=2)
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2]
    path.write_text('{"step": 1}\n{"step": \n{"step": 3}\n')  # damage before the end is not guessed at
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        MetricsWriter(path, keep_up_to_step=3)


def test_a_failed_export_leaves_nothing_that_looks_finished(tmp_path):
    from grpo_kit.export import save_merged
    from grpo_kit.models import tiny_model
    from grpo_kit.runs import TrainedModel

    model, _ = tiny_model(seed=0)
    run = tmp_path / "run"
    (run / "adapter").mkdir(parents=True)
    (run / "adapter" / "adapter_config.json").write_text("{}")
    with pytest.raises(AttributeError):  # the model is written, then the tokenizer step fails (killed)
        save_merged(model, None, run / "merged", verify=False)
    assert not (run / "merged" / "config.json").exists()
    located = TrainedModel.locate(run)  # the next export does not take it for a model
    assert (located.adapter_dir, located.model_dir) == (run / "adapter", None)
    assert [p.name for p in run.iterdir() if p.name.startswith(".")] == []  # no staging leftover


# --- 9. files honour the umask --------------------------------------------------------------------------


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_run_folder_files_honour_the_umask(tmp_path, umask_022):
    import torch

    from grpo_kit.artifacts.checkpoint import capture_rng_state, save_checkpoint
    from grpo_kit.evaluation.report_card import _temp_in
    from grpo_kit.export import save_adapter
    from grpo_kit.models import tiny_model
    from grpo_kit.support.paths import write_atomic

    assert _mode(write_atomic(tmp_path / "run.json", "{}")) == 0o644
    assert _mode(_temp_in(tmp_path, "report_card.png")) == 0o644
    model, tokenizer = tiny_model(seed=0, lora={"r": 2})
    optimizer = torch.optim.AdamW(model.parameters())
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    checkpoint = save_checkpoint(
        tmp_path / "checkpoint-1",
        model=model,
        tokenizer=tokenizer,
        optimizer=optimizer,
        scheduler=scheduler,
        trainer_state={"global_step": 1},
        rng_state=capture_rng_state(),
    )
    adapter = save_adapter(model, tokenizer, tmp_path / "adapter", verify=False).path
    files = [*checkpoint.iterdir(), *adapter.iterdir()]
    assert any(p.suffix == ".safetensors" for p in files)
    assert {p.name: _mode(p) for p in files if _mode(p) != 0o644} == {}
    assert _mode(adapter) == 0o755
