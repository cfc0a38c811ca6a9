"""The kill soak, CI-sized (issue 55): scripts/soak.py's two runs, one killed with SIGKILL (no checkpoint yet: the
resume starts it again from step 0) and one with SIGTERM (a checkpoint at the step it stopped), each once its first
step is logged, continued with ``--resume`` alone and compared with a run nobody killed. The 50-run figures
are in docs/results.md."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cli")]


def test_two_killed_runs_resumed_alone_end_identical_to_the_unkilled_one(tmp_path):
    out, report = tmp_path / "soak", tmp_path / "soak.json"
    argv = [
        sys.executable,
        str(ROOT / "scripts" / "soak.py"),
        "--runs",
        "2",
        "--steps",
        "2",
        "--out",
        str(out),
    ]
    proc = subprocess.run(
        [*argv, "--kill-after-first-step", "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        cwd=tmp_path,
    )
    rows = json.loads(report.read_text())["runs"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [row["signal"] for row in rows] == ["SIGKILL", "SIGTERM"]
    assert all(row["killed"] and row["started"] for row in rows), rows  # both killed mid-run, not before
    assert rows[1]["exit"] == 143 and rows[1]["resumes"] == 1, rows  # SIGTERM: a clean stop, one resume
    for row in rows:
        assert row["metrics_identical"] and row["adapter_identical"] and row["eval_identical"], row
        assert row["nothing_lost"], row
