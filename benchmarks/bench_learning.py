"""Learning per minute and per step: the main-job recipe on the standalone loop and on the TRL path, several seeds.

    python benchmarks/bench_learning.py --jobs 2        # 3 seeds per side, the recipe's schedule, ~65 min on 2 cores
    python benchmarks/bench_learning.py --seeds 42 --eval-prompts 16       # one seed, a short look
    python benchmarks/bench_learning.py --set model=tiny --max-steps 2 --eval-prompts 2 --seeds 1,2   # plumbing

Issue 45's arms (docs/benchmarks.md, "Same recipe, two trainers"): ``--sampler loop`` (TRL drawing with the loop's
sampler), ``--sampler generate`` (the loop drawing with ``generate``, TRL's way), ``--sampling-stream K`` (the loop
with other random draws: the noise floor), and ``--compare A/curves.json B/curves.json ...`` to pair every two arms.

What is held equal. Both sides get the same recipe (default ``smoltldr-length-small``, its own ``max_steps``
and so its own learning-rate schedule), and for each seed the same LoRA initialisation, prompts and thread
count (1 torch thread per side by default; ``--jobs 2`` runs the two sides at once, one process per core).

When the metric is read. Each run trains to the recipe's ``max_steps`` (``--max-minutes`` can cut it
short). At the first step end past every whole training minute (``--every``), and at every
``--step-every``-th step and the last one, a callback evaluates the held-out prompts in-process
(``grpo_kit.runs.held_out_rows``: rows the run never trains on; greedy, the same decoding at every point);
the evaluation's own time is taken off the training clock. Minute 0 / step 0 is the base model (the LoRA
adapter starts at B = 0), evaluated once for every run. A run that has ended keeps its final value at the
later minutes (its model no longer changes).

What is printed. The metric is the run's headline (``grpo_kit.evaluation.headline_metric``: mean |length −
target| in tokens for the length recipe).
- Against minutes and against steps: median and min–max over seeds, side by side.
- Per step: the paired per-prompt difference standalone − TRL at the same step, pooled over seeds, with a
  95 % percentile-bootstrap CI (the same seed gives both sides the same start, so the pairs are matched).
- Minutes to target, per seed: the training minutes of the first evaluation at which the metric has moved
  by ``--target-drop`` (default 60 %, issue 10's bar) from the base; then the median over seeds of
  standalone / TRL (< 1: the standalone loop gets there sooner).
``--out`` gets ``curves.json`` (every point, per-prompt values included) and ``curves.png`` (both curves).

Simplifications: the per-step CI resamples prompt pairs pooled over seeds (it treats seeds as more prompts,
not as a level of its own); minute checkpoints are read at step ends, so a point's minutes are the step
end's, printed with it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
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
        "--recipe",
        default=None,
        help="recipe (default: the main job, grpo_kit.recipes.catalogue.DEFAULT_RECIPE)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="recipe / GRPOConfig override, as in `grpo-kit train --set` (repeatable)",
    )
    p.add_argument("--seeds", default="42,1,7", help="seeds, comma-separated; every seed runs on every side")
    p.add_argument("--every", type=float, default=1.0, help="training minutes between evaluations")
    p.add_argument("--step-every", type=int, default=8, help="also evaluate every this many steps (0: off)")
    p.add_argument("--eval-prompts", type=int, default=16, help="held-out prompts per evaluation")
    p.add_argument(
        "--transfer-prompts",
        type=int,
        default=40,
        help="rows of the recipe's set written differently (transfer_eval), evaluated before and after (0: off)",
    )
    p.add_argument(
        "--max-steps", type=int, default=None, help="optimizer steps, both sides (default: the recipe's own)"
    )
    p.add_argument(
        "--max-minutes", type=float, default=None, help="stop a run after this many training minutes"
    )
    p.add_argument(
        "--target-drop", type=float, default=0.6, help="relative fall of the metric that counts as target"
    )
    p.add_argument("--loops", default="standalone,trl", help="which paths to run, comma-separated")
    p.add_argument(
        "--sampler",
        choices=("own", "loop", "generate"),
        default="own",
        help=(
            "how completions are drawn: own (each trainer its own), loop (grpo_kit.core.sampling on both: TRL through "
            "its rollout_func), generate (transformers' generate with the model in training mode, TRL's way, on "
            "both: the loop with its sampler swapped)"
        ),
    )
    p.add_argument(
        "--jobs", type=int, default=1, help="run the sides in this many processes at once (2: one per side)"
    )
    p.add_argument(
        "--threads",
        type=int,
        default=int(os.environ.get("BENCH_THREADS", "1")),
        help="torch threads per process (equal on both sides; 1 on a shared machine)",
    )
    p.add_argument(
        "--sampling-stream",
        type=int,
        default=None,
        help="the standalone loop draws its completions from this random stream (the seed's LoRA start, prompts "
        "and sampler unchanged): two streams of one trainer are the noise floor of a per-step comparison",
    )
    p.add_argument(
        "--compare",
        nargs="+",
        default=None,
        metavar="[NAME=]CURVES_JSON",
        help="print the arms of several runs' curves.json side by side (every side of every file), per step, "
        "with the paired difference of every two arms; runs nothing. NAME=: the file's sides are arms NAME/side, "
        "and files given one NAME pool their seeds (runs of other seeds, the same code)",
    )
    p.add_argument("--out", default="outputs/bench_learning", help="folder for curves.json and curves.png")
    p.add_argument("--side-out", default=None, help=argparse.SUPPRESS)  # a --jobs worker's raw results
    p.add_argument(
        "--base-file", default=None, help=argparse.SUPPRESS
    )  # the base evaluation, from the parent
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------- measurement
class BudgetReached(Exception):
    """Raised by the standalone loop's callback at ``--max-minutes`` (the loop has no stop flag; TRL's
    callback sets ``control.should_training_stop`` instead)."""


class Clock:
    """Training minutes (wall time minus the evaluations), and an evaluation at every checkpoint passed."""

    def __init__(self, every: float, step_every: int, max_steps: int, max_minutes: float | None, evaluate):
        self.every, self.step_every, self.max_steps, self.max_minutes = (
            every,
            step_every,
            max_steps,
            max_minutes,
        )
        self.next_minute = every
        self.evaluate = evaluate
        self.start = time.perf_counter()
        self.eval_seconds = 0.0
        self.points: list[dict] = []

    def minutes(self) -> float:
        return (time.perf_counter() - self.start - self.eval_seconds) / 60

    def step_end(self, step: int) -> bool:
        """Evaluate when a minute or step checkpoint has passed; True once the run should stop."""
        minutes = self.minutes()
        passed = []
        while minutes >= self.next_minute:
            passed.append(round(self.next_minute, 6))
            self.next_minute += self.every
        at_step = step == self.max_steps or (self.step_every > 0 and step % self.step_every == 0)
        out_of_time = self.max_minutes is not None and minutes >= self.max_minutes
        if passed or at_step or out_of_time:  # one evaluation stands for every checkpoint this step passed
            started = time.perf_counter()
            per_prompt = self.evaluate()
            self.eval_seconds += time.perf_counter() - started
            self.points.append(
                {
                    "step": step,
                    "minutes": round(minutes, 3),
                    "minute_checkpoints": passed,
                    "metric": _nanmean(per_prompt),
                    "per_prompt": per_prompt,
                }
            )
        return out_of_time


def _nanmean(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


# ------------------------------------------------------------------------------------ the samplers swapped
# Two arms of issue #45's experiment: each trainer drawing its completions the other's way. The update is untouched
# (tests/grpo_kit/test_step_parity.py: given the same completions, one step of each is the same step).


@contextlib.contextmanager
def sampled_by_generate(loop_module):
    """The standalone loop drawing its completions TRL's way: ``model.generate`` with TRL's GenerationConfig
    fields (do_sample, temperature, top_p, top_k, min_p, repetition_penalty, the stop ids), the model as the
    loop holds it (training mode, LoRA unmerged, prompts repeated G times, multinomial sampling)."""
    real_sample, real_merged = loop_module.sample_completions, loop_module.merged_lora

    def generate_completions(
        model,
        prompt_ids,
        prompt_mask,
        *,
        num_generations,
        max_new_tokens,
        eos_token_ids,
        pad_token_id,
        temperature,
        top_k,
        top_p,
        min_p,
        repetition_penalty,
    ):
        from transformers import GenerationConfig

        config = GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=True,
            pad_token_id=pad_token_id,
            eos_token_id=eos_token_ids,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            min_p=min_p,
            repetition_penalty=repetition_penalty,
            disable_compile=True,
        )
        ids, mask = (
            prompt_ids.repeat_interleave(num_generations, 0),
            prompt_mask.repeat_interleave(num_generations, 0),
        )
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)  # (N, P + T)
        return out[:, ids.size(1) :]  # (N, T)

    import torch

    loop_module.sample_completions = generate_completions
    loop_module.merged_lora = lambda *a, **k: contextlib.nullcontext(False)
    try:
        yield
    finally:
        loop_module.sample_completions, loop_module.merged_lora = real_sample, real_merged


@contextlib.contextmanager
def sampling_stream(loop_module, stream: int):
    """The loop's sampler, unchanged, drawing from its own random stream: call k of the run reseeds a forked
    generator with (stream, k); everything else the global generator decides (dropout, ...) is left as it was."""
    import itertools

    import torch

    real_sample, calls = loop_module.sample_completions, itertools.count()

    def drawn(*args, **kwargs):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1_000_003 * stream + next(calls))
            return real_sample(*args, **kwargs)

    loop_module.sample_completions = drawn
    try:
        yield
    finally:
        loop_module.sample_completions = real_sample


def rollout_with_loop_sampler(recipe, tokenizer):
    """TRL's ``rollout_func`` drawing completions with the standalone loop's sampler (``grpo_kit.loop.training._sample``:
    one prefill per prompt, LoRA merged, inverse-CDF sampling), from TRL's own rendering of each prompt."""
    import warnings

    from grpo_kit.core.sampling import stop_token_ids
    from grpo_kit.loop import training as loop
    from grpo_kit.runs import to_loop_config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        config = to_loop_config(recipe, output_dir="unused", save_steps=0)

    def rollout(prompts, trainer):
        G = trainer.num_generations
        unique = prompts[::G]
        assert all(p == unique[i // G] for i, p in enumerate(prompts)), (
            "TRL's batch is not G copies per prompt"
        )
        samples = loop._sample(
            trainer.model,
            tokenizer,
            [{"prompt": p} for p in unique],
            config,
            stop_token_ids(trainer.model, tokenizer),
        )
        prompt_ids, _, _ = trainer._tokenize_prompts(prompts)
        completion_ids = [ids[: int(n)].tolist() for ids, n in zip(samples.completion_ids, samples.lengths)]
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": completion_ids,
            "logprobs": [[0.0] * len(c) for c in completion_ids],
        }

    return rollout


def run_side(loop_name: str, recipe, rows, transfer, metric: str, args, output_dir: Path) -> dict:
    """One training run of ``recipe`` on one path, evaluated at the checkpoints (and once trained, on the
    ``transfer`` rows: the recipe's set written differently); its points and wall time."""
    from grpo_kit import runs

    model, tokenizer = runs.load_recipe_model(recipe)  # seeded LoRA: the same starting adapter on both sides
    dataset = recipe.load_dataset()
    funcs = recipe.build_reward_funcs(tokenizer)

    def evaluate() -> list[float]:
        return runs.evaluate_held_out(recipe, model, tokenizer, funcs, rows).per_prompt[metric]

    max_steps = int(recipe.training["max_steps"])
    clock = Clock(args.every, args.step_every, max_steps, args.max_minutes, evaluate)
    started = time.perf_counter()
    if loop_name == "standalone":
        from grpo_kit.loop import training as loop

        def on_step(state, _info):
            if clock.step_end(state.global_step):
                raise BudgetReached

        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore", UserWarning
            )  # TRL-only fields (optim, ...), as grpo-kit train does
            config = runs.to_loop_config(recipe, output_dir=str(output_dir), save_steps=0)
        swapped = sampled_by_generate(loop) if args.sampler == "generate" else contextlib.nullcontext()
        stream = (
            sampling_stream(loop, args.sampling_stream)
            if args.sampling_stream is not None
            else contextlib.nullcontext()
        )
        try:
            with swapped, stream:
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

        from grpo_kit.trainers import trl_path

        class OnStep(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if clock.step_end(state.global_step):
                    control.should_training_stop = True

        trl_path.train_with_trl(
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
            trainer_kwargs=(
                {"rollout_func": rollout_with_loop_sampler(recipe, tokenizer)}
                if args.sampler == "loop"
                else None
            ),
        )
    train_minutes = round(clock.minutes(), 3)
    after_transfer = (
        runs.evaluate_held_out(recipe, model, tokenizer, funcs, transfer).per_prompt[metric]
        if transfer
        else None
    )
    return {
        "points": clock.points,
        "train_minutes": train_minutes,
        "wall_seconds": round(time.perf_counter() - started, 1),
        "transfer_per_prompt": after_transfer,
    }


def run_sides(loops: list[str], seeds: list[int], recipe, rows, transfer, metric: str, args) -> dict:
    """Every seed on every path in ``loops``, in this process: ``{loop: {seed: run}}``."""
    from grpo_kit.recipes.catalogue import get_recipe

    sides: dict[str, dict[str, dict]] = {name: {} for name in loops}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            for name in loops:
                run = run_side(
                    name,
                    get_recipe(recipe, seed=seed),
                    rows,
                    transfer,
                    metric,
                    args,
                    Path(tmp) / f"{name}-{seed}",
                )
                sides[name][str(seed)] = run
                last = run["points"][-1] if run["points"] else {}
                print(
                    f"{name} seed {seed}: {len(run['points'])} evaluations, step {last.get('step')} at "
                    f"{run['train_minutes']:.2f} training minutes, metric {last.get('metric', math.nan):.3f}",
                    flush=True,
                )
    return sides


def run_in_workers(loops: list[str], argv: list[str], base_file: Path, tmp: Path) -> dict:
    """One worker process per path (``--jobs``), each running every seed; their merged results."""
    workers = []
    for name in loops:
        part = tmp / f"{name}.json"
        cmd = [sys.executable, __file__, *argv, "--loops", name, "--jobs", "1"]
        cmd += ["--side-out", str(part), "--base-file", str(base_file)]
        workers.append((name, part, subprocess.Popen(cmd)))
    failed = [name for name, _, proc in workers if proc.wait() != 0]
    if failed:
        raise SystemExit(f"bench_learning: the {', '.join(failed)} worker failed (its output is above).")
    return {name: json.loads(part.read_text())[name] for name, part, _ in workers}


# -------------------------------------------------------------------------------------------------- summary
def value_at_minute(run: dict, minute: float, base: float) -> tuple[float, int | str]:
    """The metric a run had at ``minute`` of training: its evaluation at that checkpoint, else its last
    evaluation before it ("ended" once that is the run's last: its model no longer changes), else the base."""
    for point in run["points"]:
        if any(abs(c - minute) < 1e-6 for c in point["minute_checkpoints"]):
            return point["metric"], point["step"]
    done = [p for p in run["points"] if p["minutes"] <= minute]
    if not done:
        return base, 0
    ended = done[-1] is run["points"][-1]
    return done[-1]["metric"], f"{done[-1]['step']}, ended" if ended else done[-1]["step"]


def point_at_step(run: dict, step: int) -> dict | None:
    return next((p for p in run["points"] if p["step"] == step), None)


def minutes_to_target(run: dict, base: float, drop: float, lower_is_better: bool) -> float | None:
    """Training minutes of the first evaluation at which the metric moved ``drop`` (relative) from ``base``."""
    target = base * (1 - drop) if lower_is_better else base * (1 + drop)
    for point in run["points"]:
        if (point["metric"] <= target) if lower_is_better else (point["metric"] >= target):
            return point["minutes"]
    return None


def target_ratio(loop: dict, trl: dict, base: float, drop: float, lower_is_better: bool):
    """One seed's minutes-to-target ratio standalone / TRL, as ``(kind, value)``: ``("=", r)`` when both runs
    reached the target; ``("<", bound)`` when only the loop did (TRL would have needed more than its whole run,
    so the ratio is below loop minutes / TRL's training minutes); ``(">", bound)`` the other way round; None
    when neither did."""
    a = minutes_to_target(loop, base, drop, lower_is_better)
    b = minutes_to_target(trl, base, drop, lower_is_better)
    if a is not None and b:
        return "=", a / b
    if a is not None and trl["train_minutes"]:
        return "<", a / trl["train_minutes"]
    if b:
        return ">", loop["train_minutes"] / b
    return None


def median_ratio(ratios: list) -> tuple[str, float] | None:
    """The median of per-seed ``target_ratio``\\ s, a bound counted at its value: ``("=", m)`` when every seed is
    exact, ``("<=", m)`` when the bounds are all upper bounds, ``(">=", m)`` all lower; None when they point both
    ways (or there are none)."""
    ratios = [r for r in ratios if r is not None]
    kinds = {kind for kind, _ in ratios} - {"="}
    if not ratios or len(kinds) > 1:
        return None
    kind = {"<": "<=", ">": ">="}[kinds.pop()] if kinds else "="
    return kind, statistics.median(value for _, value in ratios)


def _spread(values: list[float]) -> str:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "—"
    med = statistics.median(values)
    return f"{med:.2f} [{min(values):.2f}–{max(values):.2f}]" if len(values) > 1 else f"{med:.2f}"


def summarize(data: dict, args) -> str:
    """The tables: metric against minutes and steps (median [min–max] over seeds), the paired per-step
    difference, minutes to target per seed and the median ratio."""
    from grpo_kit.evaluation.comparison import bootstrap_mean_ci

    sides, base, lower = data["sides"], data["base"], data["lower_is_better"]
    names = list(sides)
    seeds = list(next(iter(sides.values())))
    out = [
        (
            f"held-out {data['metric']} on {data['eval_prompts']} prompts ({'lower' if lower else 'higher'} is "
            f"better), base {base:.3f}; median [min–max] over seeds {', '.join(seeds)}"
        )
    ]
    width = 26
    header = f"{'minutes':>8} | " + " | ".join(f"{n:>{width}}" for n in names)
    out += ["", header, "-" * len(header), f"{0:>8} | " + " | ".join(f"{base:>{width}.2f}" for _ in names)]
    last_minute = max(r["train_minutes"] for runs in sides.values() for r in runs.values())
    minute = args.every
    while minute <= last_minute + 1e-9:
        cells = []
        for name in names:
            values = [value_at_minute(run, minute, base) for run in sides[name].values()]
            steps = sorted({str(s) for _, s in values})
            cells.append(f"{_spread([v for v, _ in values])} (step {'/'.join(steps)})")
        out.append(f"{minute:>8g} | " + " | ".join(f"{c:>{width}}" for c in cells))
        minute += args.every

    steps = sorted(
        {
            p["step"]
            for runs in sides.values()
            for r in runs.values()
            for p in r["points"]
            if p["step"] % max(args.step_every, 1) == 0 or p["step"] == data["max_steps"]
        }
    )
    paired = len(names) == 2
    header = f"{'step':>8} | " + " | ".join(f"{n:>{width}}" for n in names)
    header += f" | {names[0] + ' − ' + names[1] + ' [95 % CI]':>30}" if paired else ""
    out += ["", header, "-" * len(header)]
    for step in steps:
        cells = [
            _spread([p["metric"] for r in sides[n].values() if (p := point_at_step(r, step))]) for n in names
        ]
        row = f"{step:>8} | " + " | ".join(f"{c:>{width}}" for c in cells)
        if paired:
            diffs = []
            for seed in seeds:
                a, b = (point_at_step(sides[n][seed], step) for n in names)
                if a and b:
                    diffs += [
                        x - y
                        for x, y in zip(a["per_prompt"], b["per_prompt"])
                        if not (math.isnan(x) or math.isnan(y))
                    ]
            if diffs:
                low, high = bootstrap_mean_ci(diffs)
                row += f" | {sum(diffs) / len(diffs):>+10.2f} [{low:+.2f}, {high:+.2f}] n={len(diffs):<4}"
        out.append(row)

    out += ["", f"minutes to target ({'−' if lower else '+'}{args.target_drop:.0%} from the base):"]
    reached = {
        n: {s: minutes_to_target(r, base, args.target_drop, lower) for s, r in sides[n].items()}
        for n in names
    }
    for name in names:
        per_seed = ", ".join(
            f"seed {s} {'not reached' if m is None else f'{m:.2f}'}" for s, m in reached[name].items()
        )
        out.append(f"  {name}: {per_seed}")
    if {"standalone", "trl"} <= set(names):
        ratio = {
            s: target_ratio(sides["standalone"][s], sides["trl"][s], base, args.target_drop, lower)
            for s in seeds
        }
        exact = [value for kind, value in filter(None, ratio.values()) if kind == "="]
        if exact:
            out.append(
                f"  standalone / trl, median over the {len(exact)} seed(s) both reached: "
                f"{statistics.median(exact):.2f} (< 1: the standalone loop is sooner)"
            )

        def shown(r):
            return "neither reached" if r is None else f"{'' if r[0] == '=' else r[0] + ' '}{r[1]:.2f}"

        line = "  standalone / trl per seed: " + ", ".join(f"seed {s} {shown(r)}" for s, r in ratio.items())
        overall = median_ratio(list(ratio.values()))
        if len(exact) < len(seeds) and overall and None not in ratio.values():
            kind = "" if overall[0] == "=" else overall[0] + " "
            line += f"; median over all {len(seeds)}, a run that never reached it counted whole: {kind}{overall[1]:.2f}"
        out.append(line)
        speed = {
            n: statistics.median(
                r["points"][-1]["step"] / r["train_minutes"] for r in sides[n].values() if r["points"]
            )
            for n in ("standalone", "trl")
        }
        out.append(
            f"  steps per training minute, median: standalone {speed['standalone']:.2f}, trl {speed['trl']:.2f} "
            f"(ratio {speed['standalone'] / speed['trl']:.2f})"
        )
    if data.get("transfer_base_per_prompt"):
        base_t = data["transfer_base_per_prompt"]
        out += [
            "",
            (
                f"held-out, written differently ({data['transfer_set']}, {len(base_t)} prompts): base "
                f"{_nanmean(base_t):.2f}; after training, change [95 % CI] per seed:"
            ),
        ]
        for name in names:
            cells = []
            for seed, run in sides[name].items():
                after = run.get("transfer_per_prompt") or []
                diffs = [a - b for a, b in zip(after, base_t) if not (math.isnan(a) or math.isnan(b))]
                if diffs:
                    low, high = bootstrap_mean_ci(diffs)
                    mean = sum(diffs) / len(diffs)
                    rel = mean / _nanmean(base_t) if _nanmean(base_t) else math.nan
                    cells.append(
                        f"seed {seed} {_nanmean(after):.2f}, {mean:+.2f} [{low:+.2f}, {high:+.2f}] ({rel:+.0%})"
                    )
            out.append(f"  {name}: " + "; ".join(cells))
    return "\n".join(out)


def plot(data: dict, path: Path, args) -> None:
    """Both curves, against training minutes and against steps: median line, min–max band over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from grpo_kit.artifacts.plots import metric_label

    base = data["base"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for name, colour in zip(data["sides"], ("tab:blue", "tab:orange")):
        runs = list(data["sides"][name].values())
        grid = [0.0]
        last = max(r["train_minutes"] for r in runs)
        while grid[-1] + args.every <= last + 1e-9:
            grid.append(round(grid[-1] + args.every, 6))
        by_minute = [[base] * len(runs)] + [[value_at_minute(r, m, base)[0] for r in runs] for m in grid[1:]]
        steps = [0] + sorted({p["step"] for r in runs for p in r["points"]})
        by_step = [[base] * len(runs)] + [
            [p["metric"] for r in runs if (p := point_at_step(r, s))] for s in steps[1:]
        ]
        for ax, xs, ys in ((axes[0], grid, by_minute), (axes[1], steps, by_step)):
            kept = [(x, y) for x, y in zip(xs, ys) if y]
            xs_, ys_ = [x for x, _ in kept], [y for _, y in kept]
            ax.plot(
                xs_,
                [statistics.median(y) for y in ys_],
                color=colour,
                label=f"{name} (median of {len(runs)})",
            )
            ax.fill_between(xs_, [min(y) for y in ys_], [max(y) for y in ys_], color=colour, alpha=0.2)
    name, unit = metric_label(data["metric"])
    axes[0].set_xlabel("training minutes (evaluation time excluded)")
    axes[1].set_xlabel("optimizer step")
    axes[0].set_ylabel(unit)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(
        f"held-out {name}, {data['eval_prompts']} prompts, greedy · {data['recipe']} · band: min–max over seeds"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# Student's t, two-sided 95 %, by degrees of freedom (the seeds are few: 2-10 runs per arm).
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def _seed_interval(means: list[float]) -> str:
    """The mean of per-seed differences with its t interval: the run, not the prompt, as the unit (a run's prompts
    share one trajectory, so pooling them as independent pairs gives too narrow an interval)."""
    if len(means) < 2 or len(means) - 1 not in _T975:
        return "—"
    centre = statistics.mean(means)
    half = _T975[len(means) - 1] * statistics.stdev(means) / math.sqrt(len(means))
    return f"{centre:+.2f} [{centre - half:+.2f}, {centre + half:+.2f}]"


def compare(paths: list[str], step_every: int) -> str:
    """Several benchmark runs (``curves.json``) as arms: each side of each file, named ``folder/side`` (or
    ``NAME/side`` for ``NAME=path``: files under one NAME pool their seeds, a seed given twice is refused); per step
    the arm's median [min–max] over seeds, then for every two arms the paired per-prompt difference pooled over the
    seeds they share (95 % bootstrap CI, as ``summarize`` prints it), the per-seed means, and their t interval
    with the seed as the unit."""
    from itertools import combinations

    from grpo_kit.evaluation.comparison import bootstrap_mean_ci

    arms: dict[str, dict] = {}
    for given in paths:
        name, _, path = given.rpartition("=") if "=" in given else ("", "", given)
        data = json.loads(Path(path).read_text())
        for side, runs in data["sides"].items():
            arm = arms.setdefault(f"{name or Path(path).parent.name}/{side}", {})
            if twice := sorted(set(arm) & set(runs), key=int):
                raise ValueError(
                    f"{given}: seed {', '.join(twice)} of {side} is in an earlier file of the same arm."
                )
            arm.update(runs)
    steps = sorted(
        {
            p["step"]
            for runs in arms.values()
            for r in runs.values()
            for p in r["points"]
            if p["step"] % step_every == 0
        }
    )
    out = ["step | " + " | ".join(arms)]
    for step in steps:
        cells = [
            _spread([p["metric"] for r in runs.values() if (p := point_at_step(r, step))])
            for runs in arms.values()
        ]
        out.append(f"{step} | " + " | ".join(cells))
    out.append("")
    for a, b in combinations(arms, 2):
        for step in steps:
            diffs, per_seed = [], []
            for seed in sorted(set(arms[a]) & set(arms[b])):
                pa, pb = point_at_step(arms[a][seed], step), point_at_step(arms[b][seed], step)
                if pa and pb:
                    d = [
                        x - y
                        for x, y in zip(pa["per_prompt"], pb["per_prompt"])
                        if not (math.isnan(x) or math.isnan(y))
                    ]
                    diffs += d
                    per_seed.append(f"{seed}: {sum(d) / len(d):+.2f}")
            if diffs:
                low, high = bootstrap_mean_ci(diffs)
                means = [float(x.split(": ")[1]) for x in per_seed]
                out.append(
                    f"{a} − {b}, step {step}: {sum(diffs) / len(diffs):+.2f} [{low:+.2f}, {high:+.2f}] "
                    f"(n={len(diffs)}; per seed {', '.join(per_seed)}; over seeds {_seed_interval(means)})"
                )
    return "\n".join(out)


# --------------------------------------------------------------------------------------------------- driver
def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.compare:
        print(compare(args.compare, max(args.step_every, 1)))
        return 0
    import torch

    torch.set_num_threads(args.threads)
    from grpo_kit.cli import parse_overrides
    from grpo_kit.evaluation import better_direction, headline_metric
    from grpo_kit.recipes.catalogue import DEFAULT_RECIPE, get_recipe
    from grpo_kit.runs import evaluate_held_out, held_out_rows, load_recipe_model, transfer_rows

    seeds = [int(s) for s in args.seeds.split(",")]
    loops = args.loops.split(",")
    base_recipe = get_recipe(args.recipe or DEFAULT_RECIPE, **parse_overrides(args.overrides))
    recipe = get_recipe(  # its own held-out points (callbacks), not the recipe's eval_steps
        base_recipe,
        max_steps=args.max_steps or int(base_recipe.training.get("max_steps", 24)),
        eval_steps=None,
    )
    rows = held_out_rows(recipe, args.eval_prompts)
    transfer = transfer_rows(recipe, args.transfer_prompts) if args.transfer_prompts else []

    if args.base_file:  # a --jobs worker: the parent evaluated the base model
        base_info = json.loads(Path(args.base_file).read_text())
    else:
        model, tokenizer = load_recipe_model(recipe)
        started = time.perf_counter()
        funcs = recipe.build_reward_funcs(tokenizer)
        report = evaluate_held_out(recipe, model, tokenizer, funcs, rows)
        metric = headline_metric(report.per_prompt)
        base_info = {
            "metric": metric,
            "base": report.metrics[metric],
            "base_per_prompt": report.per_prompt[metric],
            "eval_seconds": round(time.perf_counter() - started, 1),
            "transfer_set": recipe.transfer_eval if transfer else None,
            "transfer_base_per_prompt": (
                evaluate_held_out(recipe, model, tokenizer, funcs, transfer).per_prompt[metric]
                if transfer
                else None
            ),
        }
        del model
        print(
            f"recipe {recipe.name} · model {recipe.model} · {len(rows)} held-out prompts · metric {metric} · "
            f"base {base_info['base']:.3f} (one evaluation: {base_info['eval_seconds']:.0f} s) · max_steps "
            f"{recipe.training['max_steps']} · seeds {args.seeds} · {args.threads} thread(s) per process",
            flush=True,
        )
    metric = base_info["metric"]

    if args.side_out:
        sides = run_sides(loops, seeds, recipe, rows, transfer, metric, args)
        Path(args.side_out).write_text(json.dumps(sides))
        return 0
    if args.jobs > 1 and len(loops) > 1:
        with tempfile.TemporaryDirectory() as tmp:
            base_file = Path(tmp) / "base.json"
            base_file.write_text(json.dumps(base_info))
            sides = run_in_workers(loops, argv, base_file, Path(tmp))
    else:
        sides = run_sides(loops, seeds, recipe, rows, transfer, metric, args)

    data = {
        **base_info,
        "recipe": recipe.name,
        "model": recipe.model,
        "eval_prompts": len(rows),
        "max_steps": int(recipe.training["max_steps"]),
        "seeds": seeds,
        "threads": args.threads,
        "jobs": args.jobs,
        "lower_is_better": better_direction(metric) is False,
        "sides": sides,
    }
    print("\n" + summarize(data, args), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "curves.json").write_text(json.dumps(data, indent=1))
    plot(data, out / "curves.png", args)
    print(f"\nwrote {out / 'curves.json'} and {out / 'curves.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
