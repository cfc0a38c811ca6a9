"""Learning per minute: the main-job recipe on the standalone loop and on the TRL path, side by side.

    python benchmarks/bench_learning.py                                   # 0, 2, 5, 10 training minutes
    python benchmarks/bench_learning.py --checkpoints 0,1,2 --eval-prompts 16   # a short look (~8 min)
    python benchmarks/bench_learning.py --set model=tiny --checkpoints 0,0.1 --eval-prompts 4   # plumbing

Both sides get the same recipe (default ``smoltldr-length-small``), seed, LoRA initialisation, prompts,
``max_steps`` (so the same learning-rate schedule) and thread count. Each side trains until its
training clock passes the last checkpoint (or ``max_steps`` ends it). At the first step end past each
checkpoint a callback evaluates the held-out prompts (``grpo_kit.runs.held_out_rows``: rows the run
never trains on; greedy, ``grpo_kit.evaluation``) in-process; the evaluation's own time is taken off the
training clock. Minute 0 is the base model (the LoRA adapter starts at B = 0), evaluated once for both.

The metric is the run's headline (``grpo_kit.evaluation.headline_metric``: mean |length − target| in
tokens for the length recipe). Minutes-to-target is the first checkpoint at which the metric has fallen
by ``--target-drop`` (default 60 %, issue 10's bar) from minute 0; the table prints both sides and the
ratio TRL / standalone (> 1: the standalone loop gets there sooner).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--recipe", default=None, help="recipe (default: the main job, grpo_kit.recipes.DEFAULT_RECIPE)"
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="recipe / GRPOConfig override, as in `grpo-kit train --set` (repeatable)",
    )
    p.add_argument("--checkpoints", default="0,2,5,10", help="training minutes at which to evaluate")
    p.add_argument("--eval-prompts", type=int, default=32, help="held-out prompts per evaluation")
    p.add_argument(
        "--max-steps",
        type=int,
        default=None,
        help="optimizer steps (same on both sides; default: the recipe's, raised so it is not what "
        "ends the run before the last checkpoint)",
    )
    p.add_argument(
        "--target-drop", type=float, default=0.6, help="relative fall of the metric that counts as target"
    )
    p.add_argument("--loops", default="standalone,trl", help="which paths to run, comma-separated")
    p.add_argument(
        "--threads",
        type=int,
        default=int(os.environ.get("BENCH_THREADS", "1")),
        help="torch threads (equal on both sides; 1 on a shared machine)",
    )
    p.add_argument("--json", default=None, help="also write the curves to this JSON file")
    return p.parse_args(argv)


class BudgetReached(Exception):
    """Raised by the standalone loop's callback once the last checkpoint is evaluated (the loop has no
    stop flag; TRL's callback sets ``control.should_training_stop`` instead)."""


class Clock:
    """Training minutes (wall time minus the evaluations) and the evaluations at each checkpoint."""

    def __init__(self, checkpoints: list[float], evaluate):
        self.pending = [c for c in checkpoints if c > 0]
        self.evaluate = evaluate
        self.start = time.perf_counter()
        self.eval_seconds = 0.0
        self.curve: list[dict] = []

    def minutes(self) -> float:
        return (time.perf_counter() - self.start - self.eval_seconds) / 60

    def step_end(self, step: int) -> bool:
        """Evaluate when a checkpoint has passed; True once every checkpoint is done."""
        minutes = self.minutes()
        passed = [c for c in self.pending if minutes >= c]
        if passed:  # one evaluation stands for every checkpoint this step went past
            self.pending = self.pending[len(passed) :]
            started = time.perf_counter()
            value = self.evaluate()
            self.eval_seconds += time.perf_counter() - started
            self.curve += [
                {"checkpoint": c, "minutes": round(minutes, 2), "step": step, "metric": value} for c in passed
            ]
        return not self.pending


def run_side(loop_name: str, recipe, rows, metric: str, checkpoints: list[float], output_dir: Path) -> dict:
    from grpo_kit import runs

    model, tokenizer = runs.load_model(recipe)  # seeded LoRA: the same starting adapter on both sides
    dataset = recipe.load_dataset()
    funcs = recipe.build_reward_funcs(tokenizer)

    def evaluate() -> float:
        return runs.evaluate_held_out(recipe, model, tokenizer, funcs, rows).metrics[metric]

    clock = Clock(checkpoints, evaluate)
    if loop_name == "standalone":
        from grpo_kit import loop

        def on_step(state, _info):
            if clock.step_end(state.global_step):
                raise BudgetReached

        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", UserWarning
            )  # TRL-only fields (optim, ...), as grpo-kit train does
            config = runs.to_loop_config(recipe, output_dir=str(output_dir), save_steps=0)
        try:
            loop.train(
                model,
                tokenizer,
                dataset,
                funcs,
                config,
                reward_weights=recipe.reward_weights,
                callbacks=[on_step],
            )
        except BudgetReached:
            pass
    else:
        from transformers import TrainerCallback

        from grpo_kit import trl_path

        class OnStep(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if clock.step_end(state.global_step):
                    control.should_training_stop = True

        trl_path.train(
            recipe,
            model=model,
            tokenizer=tokenizer,
            train_dataset=dataset,
            reward_funcs=funcs,
            output_dir=output_dir,
            save_final=False,
            plot=False,
            callbacks=[OnStep()],
            save_strategy="no",
        )
    if clock.pending:  # max_steps ended the run first: the last state stands for the later checkpoints
        minutes, value = round(clock.minutes(), 2), evaluate()
        clock.curve += [
            {"checkpoint": c, "minutes": minutes, "step": "end", "metric": value} for c in clock.pending
        ]
    return {"loop": loop_name, "curve": clock.curve}


def minutes_to_target(curve: list[dict], base: float, drop: float, lower_is_better: bool) -> float | None:
    target = base * (1 - drop) if lower_is_better else base * (1 + drop)
    for point in curve:
        if (point["metric"] <= target) if lower_is_better else (point["metric"] >= target):
            return point["checkpoint"]
    return None


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from grpo_kit.cli import parse_overrides
    from grpo_kit.evaluation import better_direction, headline_metric
    from grpo_kit.recipes import DEFAULT_RECIPE, get_recipe
    from grpo_kit.runs import evaluate_held_out, held_out_rows, load_model

    checkpoints = sorted(float(c) for c in args.checkpoints.split(","))
    overrides = parse_overrides(args.overrides)
    base_recipe = get_recipe(args.recipe or DEFAULT_RECIPE, **overrides)
    max_steps = args.max_steps or max(int(base_recipe.training.get("max_steps", 24)), 1000)
    recipe = get_recipe(base_recipe, max_steps=max_steps)
    rows = held_out_rows(recipe, args.eval_prompts)

    model, tokenizer = load_model(recipe)
    started = time.perf_counter()
    base_report = evaluate_held_out(recipe, model, tokenizer, recipe.build_reward_funcs(tokenizer), rows)
    eval_seconds = time.perf_counter() - started
    metric = headline_metric(base_report.per_prompt)
    base = base_report.metrics[metric]
    del model
    print(
        f"recipe {recipe.name} · model {recipe.model} · {len(rows)} held-out prompts · metric {metric} · "
        f"minute 0: {base:.3f} (one evaluation: {eval_seconds:.0f} s) · max_steps {max_steps} · "
        f"{args.threads} thread(s)",
        flush=True,
    )

    sides = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.loops.split(","):
            t0 = time.perf_counter()
            sides[name] = run_side(name, recipe, rows, metric, checkpoints, Path(tmp) / name)
            sides[name]["wall_seconds"] = round(time.perf_counter() - t0, 1)
            print(f"{name}: {json.dumps(sides[name]['curve'])}", flush=True)

    lower = better_direction(metric) is False
    print(
        f"\nheld-out {metric} ({len(rows)} prompts) at training minutes; target: "
        f"{'-' if lower else '+'}{args.target_drop:.0%} from minute 0"
    )
    header = f"{'minutes':>8} | " + " | ".join(f"{n:>22}" for n in sides)
    print(header + "\n" + "-" * len(header))
    print(f"{0:>8} | " + " | ".join(f"{base:>22.3f}" for _ in sides))
    for checkpoint in (c for c in checkpoints if c > 0):
        cells = []
        for s in sides.values():
            p = next(p for p in s["curve"] if p["checkpoint"] == checkpoint)
            cells.append(f"{p['metric']:.3f} (step {p['step']})")
        print(f"{checkpoint:>8g} | " + " | ".join(f"{c:>22}" for c in cells))
    reached = {n: minutes_to_target(s["curve"], base, args.target_drop, lower) for n, s in sides.items()}
    print(
        "minutes to target: "
        + ", ".join(f"{n} {'not reached' if m is None else f'{m:.2f}'}" for n, m in reached.items())
    )
    last = max(c for c in checkpoints)
    steps = {
        n: next((p["step"] for p in s["curve"] if p["checkpoint"] == last), None) for n, s in sides.items()
    }
    print(f"steps by minute {last:g}: " + ", ".join(f"{n} {v}" for n, v in steps.items()))
    if set(reached) >= {"standalone", "trl"} and None not in (reached["standalone"], reached["trl"]):
        ratio = reached["trl"] / reached["standalone"] if reached["standalone"] else math.inf
        print(f"ratio trl / standalone: {ratio:.2f}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "metric": metric,
                    "base": base,
                    "checkpoints": checkpoints,
                    "sides": sides,
                    "minutes_to_target": reached,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
