"""benchmarks/bench_learning.py on the tiny model: both paths, a curve point per checkpoint, the table."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_learning", ROOT / "benchmarks" / "bench_learning.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_minutes_to_target_is_the_first_checkpoint_past_the_drop():
    bench = _bench()
    curve = [
        {"checkpoint": 2, "metric": 9.0},
        {"checkpoint": 5, "metric": 6.0},
        {"checkpoint": 10, "metric": 3.0},
    ]
    assert bench.minutes_to_target(curve, 17.0, 0.6, lower_is_better=True) == 5  # 6.0 <= 17 * 0.4
    assert bench.minutes_to_target(curve, 17.0, 0.9, lower_is_better=True) is None
    assert bench.minutes_to_target([{"checkpoint": 1, "metric": 0.9}], 0.5, 0.6, lower_is_better=False) == 1


@pytest.mark.timeout(300)
def test_both_paths_on_the_tiny_model(tmp_path, capsys):
    out = tmp_path / "curves.json"
    status = _bench().main(
        [
            "--set",
            "model=tiny",
            "--checkpoints",
            "0,0.001",
            "--eval-prompts",
            "2",
            "--max-steps",
            "2",
            "--json",
            str(out),
        ]
    )
    assert status == 0
    data = json.loads(out.read_text())
    assert data["metric"] == "length_error/length_reward_16_tokens" and data["checkpoints"] == [0.0, 0.001]
    for side in ("standalone", "trl"):
        (point,) = data["sides"][side]["curve"]  # one checkpoint after 0, evaluated at the first step end
        assert point["checkpoint"] == 0.001 and point["step"] == 1 and point["metric"] >= 0
    printed = capsys.readouterr().out
    assert "minutes to target" in printed and "steps by minute 0.001: standalone 1, trl 1" in printed
