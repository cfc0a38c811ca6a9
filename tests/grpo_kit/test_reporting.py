"""report_to backends written and read back offline; report_to validation; plain progress lines."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grpo_kit.support import reporting

ROOT = Path(__file__).resolve().parents[2]
from grpo_kit.support.reporting import PlainProgress, check_report_to, make_reporter, stream_is_terminal

RECORDS = [
    {"step": 1, "epoch": 0.1, "loss": 0.5, "reward": -12.0, "rewards/length_reward/mean": -12.0, "kl": None},
    {"step": 2, "epoch": 0.2, "loss": 0.25, "reward": -8.0, "rewards/length_reward/mean": -8.0, "kl": None},
]


def test_check_report_to_follows_trls_values():
    assert (
        check_report_to(None)
        == check_report_to("none")
        == check_report_to(["none"])
        == check_report_to([])
        == []
    )
    assert check_report_to("tensorboard") == ["tensorboard"]
    assert check_report_to(["trackio", "tensorboard", "trackio"]) == ["trackio", "tensorboard"]
    assert set(check_report_to("all")) <= set(reporting.REPORT_BACKENDS)
    with pytest.raises(ValueError, match=r"mlflow.*one of \[.tensorboard., .trackio., .wandb.\]"):
        check_report_to("mlflow")
    with pytest.raises(ValueError, match="stand alone"):
        check_report_to(["none", "wandb"])
    with pytest.raises(TypeError):
        check_report_to([1])


def test_missing_backend_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    with pytest.raises(ImportError, match=r'pip install "grpo-kit\[logging\]"'):
        check_report_to(["tensorboard", "wandb"])
    assert "wandb" not in check_report_to("all")  # "all" = what is installed


def test_none_reports_nowhere(tmp_path):
    reporter = make_reporter("none", output_dir=tmp_path)
    reporter.log(RECORDS[0], 1)
    reporter.close()
    assert list(tmp_path.iterdir()) == []


def test_tensorboard_events_read_back(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    with make_reporter("tensorboard", output_dir=tmp_path, config={"learning_rate": 1e-5}) as reporter:
        for record in RECORDS:
            reporter.log(record, record["step"])
    events = EventAccumulator(str(tmp_path / "runs"))
    events.Reload()
    scalars = events.Tags()["scalars"]
    # TRL's names as a GRPOTrainer run shows them in TensorBoard; None (kl) and the step itself are not logged.
    assert {"train/reward", "train/loss", "train/rewards/length_reward/mean", "train/epoch"} == set(scalars)
    assert [(e.step, e.value) for e in events.Scalars("train/reward")] == [(1, -12.0), (2, -8.0)]


def test_trackio_offline_run_reads_back(tmp_path):
    pytest.importorskip("trackio")
    # trackio fixes its folder at import from TRACKIO_DIR: a fresh interpreter, offline, writes to tmp_path.
    script = textwrap.dedent(f"""
        import json
        from grpo_kit.support.reporting import make_reporter
        from trackio.sqlite_storage import SQLiteStorage
        records = {RECORDS!r}
        with make_reporter("trackio", output_dir={str(tmp_path / "run-7")!r}, project="grpo-kit-test") as r:
            for record in records:
                r.log(record, record["step"])
        logs = SQLiteStorage.get_logs("grpo-kit-test", "run-7")
        print(json.dumps([{{"step": e["step"], "reward": e.get("train/reward")}} for e in logs]))
    """)
    env = dict(os.environ, TRACKIO_DIR=str(tmp_path / "trackio"), HF_HUB_OFFLINE="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, "-c", script], check=False, env=env, capture_output=True, text=True, timeout=240
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [
        {"step": 1, "reward": -12.0},
        {"step": 2, "reward": -8.0},
    ]
    assert list((tmp_path / "trackio").glob("*.db"))  # the local SQLite file


def test_wandb_runs_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    with make_reporter("wandb", output_dir=tmp_path, project="grpo-kit-test") as reporter:
        run = reporter.backends["wandb"].run
        assert run.offline and run.name == tmp_path.name
        for record in RECORDS:
            reporter.log(record, record["step"])
    # the offline run file that `wandb sync` uploads (wandb ships no Python reader to check its records)
    assert len(list(tmp_path.glob("wandb/offline-run-*/run-*.wandb"))) == 1


def test_plain_progress_prints_one_flushed_line_per_update():
    now = [100.0]
    out = io.StringIO()
    progress = PlainProgress(out, clock=lambda: now[0])
    now[0] += 9.8  # two steps took 9.8 s
    progress.update(2, 24, {"reward": -12.5, "loss": 0.0012})
    now[0] += 4.9
    progress.update(3, 24, {"reward": float("nan"), "loss": 0.002})
    lines = out.getvalue().splitlines()
    assert lines[0] == "step 2/24 · reward -12.5 · loss 0.0012 · 4.9 s/step · ETA 1m 48s"
    assert lines[1] == "step 3/24 · loss 0.002 · 4.9 s/step · ETA 1m 43s"  # NaN reward left out


def test_plain_progress_after_resume_times_only_the_new_steps():
    now = [0.0]
    out = io.StringIO()
    progress = PlainProgress(out, start_step=10, clock=lambda: now[0])
    now[0] = 6.0
    progress.update(12, 12, {})
    assert out.getvalue() == "step 12/12 · 3.0 s/step · ETA 0s\n"


def test_plain_progress_eta_follows_the_recent_steps_not_the_mean_since_the_start():
    """A shared machine slows down mid-run: 10 steps at 1 s, then 5 at 10 s. The mean since the start
    (60 s / 15 steps = 4 s/step) would promise 20 s for the last 5 steps; the recent window says 50 s."""
    now = [0.0]
    out = io.StringIO()
    progress = PlainProgress(out, clock=lambda: now[0], window=5)
    for step in range(1, 16):
        now[0] += 1.0 if step <= 10 else 10.0
        progress.update(step, 20, {})
    last = out.getvalue().splitlines()[-1]
    assert last == "step 15/20 · 10.0 s/step · ETA 50s"


def test_stream_is_terminal():
    assert not stream_is_terminal(io.StringIO())

    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert stream_is_terminal(Tty())


def test_cli_run_reports_to_tensorboard_and_prints_plain_progress_when_piped(tmp_path):
    """`grpo-kit train --set report_to=tensorboard | cat`: readable events with the reward, and one line per step."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "grpo_kit.cli",
        "train",
        "--set",
        "model=tiny",
        "--set",
        "report_to=tensorboard",
        "--set",
        "logging_steps=1",
        "--max-steps",
        "2",
        "--samples",
        "0",
        "--no-merge",
        "--output-dir",
        str(out),
    ]
    done = subprocess.run(
        command,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("step ")]
    assert [line.split(" · ")[0] for line in lines] == ["step 1/2", "step 2/2"]
    assert all("reward" in line and "s/step" in line for line in lines)
    events = EventAccumulator(str(out / "runs"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/reward")] == [1, 2]
    assert "train/loss" in events.Tags()["scalars"]
