"""Where the main job's time goes: ``grpo-kit train`` (no arguments: the embedded SmolLM2-135M, the shipped
``smoltldr-length-small`` recipe, its evaluations during training, the exports) with each phase of the run timed.

Usage: python benchmarks/profile_main_job.py [--out DIR] [--json profile.json] [-- extra train arguments]

The run is the CLI's own ``main(["train", ...])`` in this process. Each phase is timed by wrapping the function that
owns it, where the run calls it (nothing of the run changes):

- loading: ``runs.phases.load_run_inputs`` (model, tokenizer, data, held-out rows);
- evaluation before / after: ``runs.phases.measure`` (held-out rows, samples, the set written differently);
- evaluation during training: ``runs.during_training.HeldOutDuringTraining.__call__``;
- checkpoints: ``loop.bookkeeping.save_checkpoint`` and ``rotate_checkpoints``;
- training steps: ``runs.execution.train_on_path``, less the two above (sampling, scoring, forward, backward, optimizer);
- report card: ``runs.phases.report_before_after`` (report.md, eval.json, report_card.png);
- exports with their verification: ``runs.phases.export_models``, of which ``compare_greedy`` (the reloaded export
  decodes as the trained model does) is shown apart; samples: ``runs.phases.record_samples``; run.json.

Prints a Markdown table (phase, calls, seconds, share of the run's wall time) and the run folder's size by part.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

TIMES: dict[str, list[float]] = defaultdict(list)


def _timed(owner, name: str, phase: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            TIMES[phase].append(time.perf_counter() - started)

    setattr(owner, name, wrapper)


def _install() -> None:
    from grpo_kit.export import hf
    from grpo_kit.loop import bookkeeping
    from grpo_kit.runs import during_training, execution

    _timed(execution, "load_run_inputs", "loading (model, tokenizer, data, held-out rows)")
    _timed(execution, "measure", "evaluation before / after (held-out, samples, written differently)")
    _timed(during_training.HeldOutDuringTraining, "__call__", "evaluation during training")
    _timed(execution, "train_on_path", "training (all of it)")
    _timed(bookkeeping, "save_checkpoint", "checkpoints (save)")
    _timed(bookkeeping, "rotate_checkpoints", "checkpoints (rotate)")
    _timed(execution, "report_before_after", "report card (report.md, eval.json, report_card.png)")
    _timed(execution, "record_samples", "samples.md")
    _timed(execution, "export_models", "exports (adapter, merged model) with verification")
    _timed(hf, "compare_greedy", "of which: export verification (greedy decode of the reload)")
    _timed(execution, "write_run_json", "run.json")


def _folder_parts(folder: Path) -> dict[str, int]:
    parts: dict[str, int] = defaultdict(int)
    for path in folder.rglob("*"):
        if path.is_file():
            top = path.relative_to(folder).parts[0]
            key = "checkpoint-*" if top.startswith("checkpoint-") else top
            parts[key] += path.stat().st_size
    return dict(sorted(parts.items(), key=lambda kv: -kv[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="the run folder (default: a temporary folder)")
    parser.add_argument("--json", type=Path, default=None, help="also write the table here")
    parser.add_argument("extra", nargs="*", help="more `grpo-kit train` arguments (after --)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    out = args.out or Path(tempfile.mkdtemp(prefix="profile-main-job-")) / "run"

    _install()
    from grpo_kit.cli import main as cli_main

    started = time.perf_counter()
    code = cli_main(["train", "--output-dir", str(out), *args.extra])
    wall = time.perf_counter() - started
    if code != 0:
        print(f"the run exited {code}", file=sys.stderr)
        return code

    total = {phase: sum(values) for phase, values in TIMES.items()}
    inside = total.get("evaluation during training", 0.0) + total.get("checkpoints (save)", 0.0)
    inside += total.get("checkpoints (rotate)", 0.0)
    rows = []
    for phase, seconds in total.items():
        if phase == "training (all of it)":
            phase, seconds = (
                "training steps (sampling, scoring, forward, backward, optimizer)",
                seconds - inside,
            )
        rows.append((phase, len(TIMES.get(phase, TIMES["training (all of it)"])), seconds))
    accounted = sum(s for p, _, s in rows if not p.startswith("of which"))
    rows.append(("the rest (imports, planning, CLI, printing)", 1, wall - accounted))
    steps = json.loads((out / "run.json").read_text())["steps"]

    print(f"\nmain job: {wall:.1f} s wall, {steps} steps, torch threads {_threads()}\n")
    print("| phase | calls | seconds | share |\n|---|---|---|---|")
    for phase, calls, seconds in rows:
        print(f"| {phase} | {calls} | {seconds:.1f} | {seconds / wall:.0%} |")
    parts = _folder_parts(out)
    print("\n| run folder | MB |\n|---|---|")
    for part, size in parts.items():
        print(f"| {part} | {size / 1e6:.1f} |")
    if args.json:
        args.json.write_text(
            json.dumps({"wall_s": wall, "steps": steps, "phases": rows, "folder_bytes": parts}, indent=1)
        )
    return 0


def _threads() -> int:
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    raise SystemExit(main())
