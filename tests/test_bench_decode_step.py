"""benchmarks/bench_decode_step.py: docs/benchmarks.md's command, from another folder, on the tiny model."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from doc_pages import lines_starting_with

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(300)
def test_the_documented_command_times_a_decode_step_against_the_weight_read_bound(tmp_path):
    (line,) = lines_starting_with("python benchmarks/bench_decode_step.py")  # docs/benchmarks.md
    command = shlex.split(line.split("#")[0])
    assert command[:2] == ["python", "benchmarks/bench_decode_step.py"]
    # the documented model is the embedded one; here the tiny one, one call of each length
    argv = [sys.executable, str(ROOT / command[1]), *command[2:], "--model", "tiny", "--repeats", "1"]
    argv += ["--tokens", "5", "--bandwidth-mib", "64"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        argv, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])

    from grpo_kit.models import tiny_model

    model, _ = tiny_model(seed=0)
    distinct = {id(p): p for p in model.parameters()}.values()  # the tied embedding once
    assert result["weight_mb"] * 1e6 == pytest.approx(sum(p.numel() * p.element_size() for p in distinct))
    assert result["rows"] == 8 and result["prompt_tokens"] > 0 and result["bandwidth_gb_s"] > 0
    assert result["step_over_bound"] == pytest.approx(
        result["decode_step_ms"] / result["weight_read_bound_ms"]
    )
    assert f"the step is {result['step_over_bound']:.2f}x the bound" in done.stdout
