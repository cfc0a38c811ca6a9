"""The kill soak: N tiny trainings, each killed at a random moment and continued with ``--resume`` alone, compared
with one run that nobody killed.

Every run is the same ``grpo-kit train`` command on the tiny model (evaluation during training, ``--keep-best``,
``--samples``, ``--eval-prompts`` and ``--no-merge``, so that a resume that forgot a flag shows). The unkilled
reference run goes first and gives T, the time from its ``run_config.json`` (written once the model and data are
loaded) to its ``run.json``; each run that ends before its kill gives T anew, so T follows the machine's load.
Run i is killed a time drawn uniformly from [0, T] (the soak's seed) after its ``run_config.json`` appears, with
SIGKILL and SIGTERM alternating, so the kills land in the evaluation before training, the steps, the evaluations
during training, the evaluation after it and the exports alike (killed before that file, a run has written
nothing, and the same command starts it again: ``tests/grpo_kit/test_runs_endings.py``).
Then ``grpo-kit train --output-dir RUN --resume`` (nothing else) until it exits 0, at most ``--max-resumes`` times.
A run killed before it wrote anything (no ``run_config.json``) has nothing to resume: the original command runs
again, and the run counts as "not started".

Compared with the reference, per run:
- ``metrics.jsonl``: every record, without its timing keys (``*seconds*``, ``*time*``, ``timing/*``);
- the adapter's sha256 (``adapter/adapter_model.safetensors``);
- ``eval.json``, without timing keys;
- nothing lost: ``run.json`` written, and the steps of ``metrics.jsonl`` are 1..max_steps, each once.

Usage: python scripts/soak.py --runs 50 --out soak-out [--seed 0] [--steps 6] [--json soak.json]
       python scripts/soak.py --runs 2 --steps 2 --out soak-ci --kill-after-first-step   (tests/test_soak.py)
Exit status: 0 when every run ended identical to the reference, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The run every soak run repeats (the tiny model; a held-out evaluation every 2 steps, the best one kept).
FLAGS = ["--samples", "1", "--eval-prompts", "4", "--no-merge", "--keep-best"]
SETTINGS = ["--set", "model=tiny", "--set", "max_completion_length=8", "--set", "eval_steps=2"]
# the tiny model's answers are always cut at 8 tokens: the signal watch would stop the run at its third step
SETTINGS += ["--set", "stop_on_no_signal=false"]
#: One wait's bound: a run (or a resume) that takes longer is killed and reported.
RUN_TIMEOUT_S = 900


def _command(out: Path, steps: int) -> list[str]:
    return [sys.executable, "-m", "grpo_kit.cli", "train", *SETTINGS, "--max-steps", str(steps), *FLAGS,
            "--output-dir", str(out)]  # fmt: skip


def _env() -> dict[str, str]:
    # one thread: the same arithmetic in every process, and the soak's runs do not fight over the cores
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def _run(argv: list[str], log: Path) -> int:
    with log.open("a") as sink:
        try:
            return subprocess.run(
                argv, check=False, stdout=sink, stderr=subprocess.STDOUT, env=_env(), timeout=RUN_TIMEOUT_S
            ).returncode
        except subprocess.TimeoutExpired:
            return -1


def _killed_run(
    argv: list[str], log: Path, due: Callable[[float], bool], signum: int
) -> tuple[int, bool, float]:
    """Start ``argv``, send ``signum`` once ``due(seconds since the start)`` (unless it ended first). (exit status,
    was it killed: False when it finished before the signal, seconds until it ended)."""
    started = time.monotonic()
    with log.open("a") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, env=_env())
        while not due(time.monotonic() - started):
            if proc.poll() is not None:
                return proc.returncode, False, time.monotonic() - started
            if time.monotonic() - started > RUN_TIMEOUT_S:
                break
            time.sleep(0.1)
        if proc.poll() is not None:
            return proc.returncode, False, time.monotonic() - started
        proc.send_signal(signum)
        try:
            return proc.wait(timeout=RUN_TIMEOUT_S), True, time.monotonic() - started
        except subprocess.TimeoutExpired:  # SIGTERM must end it within the bound; this is a finding
            proc.kill()
            return proc.wait(), True, time.monotonic() - started


def _untimed(value: Any) -> Any:
    """``value`` without the keys that measure time (they differ between any two runs)."""
    if isinstance(value, dict):
        return {
            k: _untimed(v)
            for k, v in value.items()
            if not any(word in str(k) for word in ("seconds", "time", "timing/"))
        }
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def fingerprint(run: Path) -> dict[str, Any]:
    """What the soak compares: metrics without timing, the adapter's sha256, eval.json without timing."""
    metrics = run / "metrics.jsonl"
    records = (
        [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
        if metrics.is_file()
        else []
    )
    adapter = run / "adapter" / "adapter_model.safetensors"
    evaluation = run / "eval.json"
    return {
        "metrics": _untimed(records),
        "adapter_sha256": hashlib.sha256(adapter.read_bytes()).hexdigest() if adapter.is_file() else None,
        "eval": _untimed(json.loads(evaluation.read_text())) if evaluation.is_file() else None,
        "finished": (run / "run.json").is_file(),
    }


def _steps_once(records: list[dict], steps: int) -> bool:
    trained = [r["step"] for r in records if "loss" in r]
    return trained == list(range(1, steps + 1))


def _after_first_step(run: Path) -> Callable[[float], bool]:
    def due(_seconds: float) -> bool:
        metrics = run / "metrics.jsonl"
        return metrics.is_file() and '"loss"' in metrics.read_text()

    return due


def _after_start(run: Path, after_s: float) -> Callable[[float], bool]:
    """Due ``after_s`` seconds after the run's ``run_config.json`` appeared."""
    appeared: list[float] = []

    def due(seconds: float) -> bool:
        if not appeared:
            if (run / "run_config.json").is_file():
                appeared.append(seconds)
            return False
        return seconds - appeared[0] >= after_s

    return due


def writing_time(run: Path) -> float:
    """Seconds from the run's ``run_config.json`` to its ``run.json`` (their modification times)."""
    return (run / "run.json").stat().st_mtime - (run / "run_config.json").stat().st_mtime


def soak_one(
    i: int, out: Path, steps: int, after_s: float | None, signum: int, reference: dict, max_resumes: int
) -> dict:
    """Run ``i``: killed with ``signum`` ``after_s`` seconds after its run_config.json appeared (None: once its
    first step is logged), then
    continued with ``--resume`` alone; its row (what happened, and what matches the reference)."""
    run, log = out / f"run-{i:03d}", out / f"run-{i:03d}.log"
    due = _after_first_step(run) if after_s is None else _after_start(run, after_s)
    status, killed, seconds = _killed_run(_command(run, steps), log, due, signum)
    row: dict[str, Any] = {"run": i, "signal": signal.Signals(signum).name, "killed": killed, "exit": status,
                           "after_s": None if after_s is None else round(after_s, 1), "ended_s": round(seconds, 1),
                           "resumes": 0}  # fmt: skip
    if not (run / "run_config.json").is_file():  # killed before it wrote anything: the original command again
        row["started"] = False
        _run(_command(run, steps), log)
    else:
        row["started"] = True
        while not (run / "run.json").is_file() and row["resumes"] < max_resumes:
            row["resumes"] += 1
            _run([sys.executable, "-m", "grpo_kit.cli", "train", "--output-dir", str(run), "--resume"], log)
    mine = fingerprint(run)
    row.update(
        finished=mine["finished"],
        metrics_identical=mine["metrics"] == reference["metrics"],
        adapter_identical=mine["adapter_sha256"] is not None
        and mine["adapter_sha256"] == reference["adapter_sha256"],
        eval_identical=mine["eval"] == reference["eval"],
        nothing_lost=mine["finished"] and _steps_once(mine["metrics"], steps),
    )
    row["identical"] = all(
        row[k] for k in ("metrics_identical", "adapter_identical", "eval_identical", "nothing_lost")
    )
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="killed runs (default 50)")
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for the runs (created; must not exist)"
    )
    parser.add_argument("--seed", type=int, default=0, help="draws the kill moments")
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps of each run (default 6)")
    parser.add_argument("--max-resumes", type=int, default=3, help="resumes a killed run gets (default 3)")
    parser.add_argument("--kill-after-first-step", action="store_true",
                        help="kill each run once its first step is logged, not at a random moment (the CI-sized soak)")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="write every run's row and the totals here")
    parser.add_argument(
        "--keep", action="store_true", help="keep the run folders (default: removed when identical)"
    )
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"{args.out} exists; pass a new folder.")
    args.out.mkdir(parents=True)
    if _run(_command(args.out / "reference", args.steps), args.out / "reference.log") != 0:
        print(f"soak: the reference run failed; see {args.out / 'reference.log'}", file=sys.stderr)
        return 1
    wall = writing_time(args.out / "reference")
    reference = fingerprint(args.out / "reference")
    draw = random.Random(args.seed)
    rows = []
    for i in range(args.runs):
        after_s = None if args.kill_after_first_step else draw.uniform(0, wall)
        signum = signal.SIGKILL if i % 2 == 0 else signal.SIGTERM
        row = soak_one(i, args.out, args.steps, after_s, signum, reference, args.max_resumes)
        rows.append(row)
        print(json.dumps(row), flush=True)
        if not row["killed"] and (args.out / f"run-{i:03d}" / "run.json").is_file():
            wall = writing_time(args.out / f"run-{i:03d}")  # it ended before its kill: a run's time now
        if row["identical"] and not args.keep:
            shutil.rmtree(args.out / f"run-{i:03d}", ignore_errors=True)
    resumable = [r for r in rows if r["started"] and r["killed"]]
    totals = {
        "runs": len(rows),
        "last_writing_time_s": round(wall, 1),
        "killed": sum(r["killed"] for r in rows),
        "killed_before_anything_was_written": sum(not r["started"] for r in rows),
        "resumable": len(resumable),
        "resumable_identical": sum(r["identical"] for r in resumable),
        "identical": sum(r["identical"] for r in rows),
        "finished": sum(r["finished"] for r in rows),
        "seed": args.seed,
        "steps": args.steps,
    }
    print(json.dumps({"totals": totals}), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"totals": totals, "runs": rows}, indent=2))
    return 0 if totals["identical"] == totals["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
