"""benchmarks/bench_loop_vs_trl.py: docs/benchmarks.md's command as written, on its default tiny model, from another folder."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from doc_pages import lines_starting_with

from grpo_kit.support.hardware import cpu_has_native_bf16

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("generation", "scoring", "old_ref_logprobs", "forward", "backward", "optimizer")


def _readme_command() -> list[str]:
    (line,) = lines_starting_with("python benchmarks/bench_loop_vs_trl.py")  # docs/benchmarks.md
    return shlex.split(line.split("#")[0])


@pytest.mark.timeout(600)
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_readme_command_times_both_sides_and_profiles_the_loop(precision, tmp_path):
    if precision == "bf16" and not cpu_has_native_bf16():
        pytest.skip("this CPU has no AMX/AVX512-BF16: --bf16 is refused here")
    command = _readme_command()
    assert command[:2] == ["python", "benchmarks/bench_loop_vs_trl.py"]  # the default model is the tiny one
    argv = [sys.executable, str(ROOT / command[1]), *command[2:], "--steps", "1"]
    if precision == "bf16":
        argv.append("--bf16")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        argv, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=580
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])["results"]
    for side in ("trl", "ours"):
        assert len(result[side]["step_seconds"]) == 1 and all(s > 0 for s in result[side]["step_seconds"])
        assert 0 < result[side]["training_peak_rss_mib"] <= result[side]["peak_rss_mib"]
    profile = result["ours"]["profile"]
    assert all(profile[p] >= 0 for p in PHASES) and profile["generation"] > 0 and profile["backward"] > 0
    assert sum(profile[p] for p in PHASES) <= profile["step_time"]
    assert f"one loop step, {precision}: where the time" in done.stdout
    assert result["ours"]["linear_4bit_layers"] == 0


@pytest.mark.timeout(600)
def test_qlora_times_the_loop_with_lora_against_the_loop_in_4bit(tmp_path):
    """``--qlora``: the loop against itself with its base model in 4-bit (bitsandbytes' CPU backend), each side its
    own process; the 4-bit side really trains 4-bit layers and both profile their step."""
    argv = [sys.executable, str(ROOT / "benchmarks" / "bench_loop_vs_trl.py"), "--qlora", "--steps", "1"]
    done = subprocess.run(
        argv,
        check=False,
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])["results"]
    assert set(result) == {"ours", "ours-4bit"}
    assert result["ours"]["linear_4bit_layers"] == 0 < result["ours-4bit"]["linear_4bit_layers"]
    for side in result.values():
        assert (
            len(side["step_seconds"]) == 1
            and side["profile"]["generation"] > 0
            and side["profile"]["backward"] > 0
        )
