"""Our standalone loop vs TRL's GRPOTrainer on the identical config, side by side, on CPU.

    python benchmarks/bench_loop_vs_trl.py                                  # tiny random model, a few steps
    python benchmarks/bench_loop_vs_trl.py --model smollm2-135m-instruct    # the embedded real model
    python benchmarks/bench_loop_vs_trl.py --practicum --minutes 10         # course 12.5 on our loop
    python benchmarks/bench_loop_vs_trl.py --model smollm2-135m-instruct --qlora   # our loop: LoRA vs 4-bit QLoRA

Each side runs in its own subprocess (so its peak RSS is its own) on the same model, LoRA, prompts
(``synthetic_tldr`` in smoltldr's schema), reward (course 12.5: length ideal 50 characters), G, lengths,
learning rate, seed and thread count. TRL is configured to do the same work as the loop: fp32 (its
default would be bf16), no gradient checkpointing (its default is on), no completion logging, no
checkpoints. Seconds per step are measured the same way on both sides: wall
time between consecutive optimizer-step ends, after ``--warmup`` steps. Model loading is excluded.

``--bf16``: both sides in bf16 mixed precision (TRL's default; the loop's ``bf16=True``: bf16 autocast for the
log-probs, bf16 merged weights for sampling), only on hardware with native bf16, on the same model loaded with
its frozen base in bf16 and its LoRA adapter in fp32 (the tiny model stays fp32). The loop's step is
also broken into its timed phases (``timing/<phase>_s``: generation, scoring, old/ref log-probs, forward,
backward, optimizer), and peak RSS is given twice: the whole process, and from the end of model loading on
(``/proc/self/clear_refs``; freed-but-kept heap from loading still counts).

The physical limit, for the embedded SmolLM2-135M (134.5M parameters, 28.3M of them the tied embedding that is
also the LM head) at this shape (8 rows, ~65-token prompts, 32 new tokens):

* **decoding**: one decode step multiplies every weight once for the 8 rows: 2 × 134.5M × 8 = 2.15 GFLOP and
  538 MB of fp32 weights read (269 MB in bf16). On this project's 2-core Xeon (AMX, AVX512-BF16), one core
  copies 13.7 GB/s and multiplies 147 GFLOP/s in fp32, ~1,000 GFLOP/s in bf16 (AMX), so a step is bound by
  reading the weights: >= 39 ms fp32, >= 20 ms bf16; the prefill and 32 steps >= 1.3 s fp32, >= 0.65 s bf16.
* **training** (log-probs with gradient and backward): ~386 tokens through 106M non-embedding weights and
  256 completion positions through the LM head, ~96 GFLOP forward and about as much backward (the frozen
  base needs input gradients only): >= 1.3 s fp32, >= 0.2 s bf16.
* so a step at the limit is ~2.6 s fp32, ~0.9 s bf16. What the loop measures, and why it is above that, is in
  docs/benchmarks.md ("A faster step").

``--gradient-checkpointing ours|both``: Trainer's ``gradient_checkpointing`` on the loop only (against TRL without
it: the memory target's comparison) or on both sides; each layer of the log-prob forward keeps only its input and
is recomputed in the backward pass. ``--seed``: the LoRA start, the prompts' order and the draws of both sides.

``--qlora``: instead of TRL, the loop against itself with the base model in 4-bit (QLoRA: NF4 through bitsandbytes,
on CPU its CPU backend; ``load_model(quantization="4bit")``), everything else equal, each side in its own process.
The 4-bit side's sampling multiplies with weights dequantized once per sampling call (``core/sampling.py``), its
forward and backward run 4-bit.

``--practicum``: the course 12.5 shape (SmolLM2-135M-Instruct, LoRA r=16/alpha 32 on all linear layers,
G=8, 96 new tokens, length reward with ideal 50 characters, ``synthetic_tldr`` prompts) on our loop for
``--minutes`` of wall time, reporting how mean |length − 50| moves. See ``--help`` for the knobs.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IDEAL_LENGTH = 50  # course 12.5: ideal completion length, in characters
#: The phases of a loop step, as ``grpo_kit.loop.training`` times them (``timing/<phase>_s`` per step).
LOOP_PHASES = ("generation", "scoring", "old_ref_logprobs", "forward", "backward", "optimizer")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny", help="'tiny' (random 2-layer Llama) or a load_model name/path")
    p.add_argument("--steps", type=int, default=4, help="timed optimizer steps per side")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first (allocator, caches)")
    p.add_argument("--num-generations", type=int, default=4)
    p.add_argument("--batch", type=int, default=8, help="per_device_train_batch_size (completions)")
    p.add_argument("--max-completion-length", type=int, default=32)
    p.add_argument("--prompts", type=int, default=32, help="synthetic_tldr rows")
    p.add_argument("--lora-r", type=int, default=16)
    p.add_argument("--learning-rate", type=float, default=2e-5)
    p.add_argument(
        "--lora-dropout",
        type=float,
        default=0.05,
        help="LoRA dropout, both sides (0: no dropout output is kept for the backward pass)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=int(os.environ.get("BENCH_THREADS", "1")),
        help="torch threads for each side (1 on a shared machine; equal on both sides)",
    )
    p.add_argument(
        "--bf16",
        action="store_true",
        help="both sides in bf16 mixed precision (TRL's own default); needs native bf16 (AMX/AVX512-BF16 or a GPU)",
    )
    p.add_argument(
        "--gradient-checkpointing",
        choices=["none", "ours", "both"],
        default="none",
        help="Trainer's gradient_checkpointing on no side, on the loop only, or on both sides",
    )
    p.add_argument("--seed", type=int, default=0, help="LoRA start, data order and draws, both sides")
    p.add_argument("--practicum", action="store_true", help="course 12.5 on our loop for --minutes")
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument(
        "--practicum-lr",
        type=float,
        default=2e-4,
        help="course 12.5 uses 2e-5 for ~1 GPU-hour; a few CPU minutes need a larger LoRA step",
    )
    p.add_argument(
        "--qlora",
        action="store_true",
        help="the loop with LoRA against the loop with 4-bit QLoRA (bitsandbytes), instead of against TRL",
    )
    p.add_argument("--side", choices=list(SIDES), help=argparse.SUPPRESS)  # internal: one subprocess side
    return p.parse_args(argv)


# --------------------------------------------------------------------------------------------- shared setup


def setup(args, quantization: str | None = None):
    import torch

    torch.set_num_threads(args.threads)
    from datasets_prep import load_smoltldr, synthetic_tldr
    from grpo_kit.models import load_model, tiny_model
    from rewards import length_reward

    lora = {
        "r": args.lora_r,
        "lora_alpha": 2 * args.lora_r,
        "lora_dropout": args.lora_dropout,
        "target_modules": "all-linear",
    }
    torch.manual_seed(args.seed)
    if args.model == "tiny" and quantization is None:
        model, tokenizer = tiny_model(seed=args.seed, lora=lora)
    else:  # --bf16: the frozen base in bf16 (no cast copy per forward pass), the LoRA adapter in fp32; --qlora: 4-bit
        # (the tiny model too: load_model saves it once and loads it back in 4-bit)
        model, tokenizer = load_model(
            args.model, lora=lora, dtype="bfloat16" if args.bf16 else None, quantization=quantization
        )
    dataset = load_smoltldr("train", source=synthetic_tldr(args.prompts, seed=0))
    reward = length_reward(IDEAL_LENGTH, unit="chars")
    return model, tokenizer, dataset, reward


def common_settings(args, output_dir):
    """Settings both sides get, under their shared (TRL) names."""
    return {
        "output_dir": output_dir,
        "max_steps": args.warmup + args.steps,
        "num_generations": args.num_generations,
        "per_device_train_batch_size": args.batch,
        "gradient_accumulation_steps": 1,
        "max_completion_length": args.max_completion_length,
        "learning_rate": args.learning_rate,
        "temperature": 1.0,
        "beta": 0.0,
        "loss_type": "dapo",
        "seed": args.seed,
        "logging_steps": 1,
        "lr_scheduler_type": "linear",
        "max_grad_norm": 1.0,
        "bf16": args.bf16,
    }


def checkpointing(args, side: str) -> bool:
    """Whether ``side`` ("ours" or "trl") runs with ``gradient_checkpointing`` (``--gradient-checkpointing``)."""
    return args.gradient_checkpointing == "both" or args.gradient_checkpointing == side


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def reset_peak_rss() -> None:
    """Start the high-water mark of resident memory again (Linux: ``/proc/self/clear_refs``), so that
    ``training_peak_rss_mib`` measures training, not model loading (the same load on both sides)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def training_peak_rss_mib() -> float | None:
    """VmHWM since :func:`reset_peak_rss`, in MiB; None where /proc has no such line."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return None


def clock() -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process): on a shared machine CPU time is the steadier measure."""
    return time.perf_counter(), time.process_time()


def report(step_ends: list[tuple[float, float]], warmup: int, extra: dict) -> None:
    timed = step_ends[warmup:]  # step_ends[0] is the start; the first `warmup` steps are not timed
    wall = [b[0] - a[0] for a, b in itertools.pairwise(timed)]
    cpu = [b[1] - a[1] for a, b in itertools.pairwise(timed)]
    # Each mark is read once and the whole-process peak is at least the training one: the marks still grow
    # between two reads (seen: a VmHWM read after ru_maxrss exceeded it by 0.09 MiB).
    training_peak = training_peak_rss_mib()
    peak = max(peak_rss_mib(), training_peak or 0.0)
    print(
        "BENCH_RESULT "
        + json.dumps(
            {
                "step_seconds": wall,
                "step_cpu_seconds": cpu,
                "peak_rss_mib": peak,
                "training_peak_rss_mib": training_peak,
                **extra,
            }
        )
    )


# ------------------------------------------------------------------------------------------------ the sides


def run_ours(args, quantization: str | None = None) -> None:
    from grpo_kit.config.loop import GRPOLoopConfig
    from grpo_kit.loop.training import train

    model, tokenizer, dataset, reward = setup(args, quantization)
    reset_peak_rss()
    step_ends = []
    with tempfile.TemporaryDirectory() as out:
        config = GRPOLoopConfig(
            **common_settings(args, out),
            save_steps=0,
            disable_tqdm=True,
            gradient_checkpointing=checkpointing(args, "ours"),
        )
        step_ends.append(clock())
        result = train(
            model,
            tokenizer,
            dataset,
            reward,
            config,
            callbacks=[lambda state, metrics: step_ends.append(clock())],
        )
    lengths = [r["completions/mean_length"] for r in result.log_history]
    timed = result.log_history[args.warmup :]  # one record per step (logging_steps=1)
    profile = {
        phase: sum(
            (r.get(phase) if phase == "step_time" else r.get(f"timing/{phase}_s")) or 0.0 for r in timed
        )
        / len(timed)
        for phase in ("step_time", *LOOP_PHASES)
    }
    # bitsandbytes' own 4-bit layers (PEFT's LoRA wrapper around each is also named Linear4bit: not counted)
    four_bit = sum(
        type(m).__name__ == "Linear4bit" and type(m).__module__.startswith("bitsandbytes")
        for m in model.modules()
    )
    report(
        step_ends,
        args.warmup,
        {
            "mean_completion_tokens": sum(lengths) / len(lengths),
            "profile": profile,
            "linear_4bit_layers": four_bit,
        },
    )


def run_trl(args) -> None:
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_kit.trainers.trl_path import ensure_logprob_kernel

    ensure_logprob_kernel()  # CPU torch has no Triton; TRL's fused LM head needs this stand-in
    model, tokenizer, dataset, reward = setup(args)
    reset_peak_rss()
    step_ends = [clock()]

    class StepClock(TrainerCallback):
        def on_step_end(self, *a, **k):
            step_ends.append(clock())

    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            **common_settings(args, out),
            save_strategy="no",
            report_to="none",
            use_cpu=True,
            gradient_checkpointing=checkpointing(args, "trl"),
            disable_tqdm=True,
            dataloader_num_workers=0,
            log_completions=False,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
            callbacks=[StepClock()],
        )
        trainer.train()
    lengths = [
        r["completions/mean_length"] for r in trainer.state.log_history if "completions/mean_length" in r
    ]
    report(step_ends, args.warmup, {"mean_completion_tokens": sum(lengths) / len(lengths)})


# -------------------------------------------------------------------------------------------- side by side


def run_side(args, side: str) -> dict:
    cmd = [sys.executable, __file__, "--side", side, *sys.argv[1:]]
    env = {**os.environ, "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE", "1"), "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO, check=False)
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            return json.loads(line.removeprefix("BENCH_RESULT "))
    raise RuntimeError(f"{side} side failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


#: Each side's name in the tables.
SIDES = {"trl": "TRL GRPOTrainer", "ours": "grpo_kit loop", "ours-4bit": "grpo_kit loop, QLoRA 4-bit"}


def compare(args) -> None:
    from rich.console import Console
    from rich.table import Table

    base, ours = ("ours", "ours-4bit") if args.qlora else ("trl", "ours")
    results = {side: run_side(args, side) for side in (base, ours)}
    table = Table(
        title=f"GRPO step on CPU — {args.model}, G={args.num_generations}, batch={args.batch}, "
        f"{args.max_completion_length} new tokens, LoRA r={args.lora_r}, {args.threads} thread(s), seed {args.seed}, "
        f"gradient checkpointing: {args.gradient_checkpointing}"
    )
    for col in ("", SIDES[base], SIDES[ours], "4-bit / LoRA" if args.qlora else "ours / TRL"):
        table.add_column(col, justify="right")

    def row(label: str, values: dict, digits: int) -> None:
        if None not in values.values():
            table.add_row(
                label,
                f"{values[base]:.{digits}f}",
                f"{values[ours]:.{digits}f}",
                f"{values[ours] / values[base]:.2f}×",
            )

    row(
        "s / step (mean)", {s: sum(r["step_seconds"]) / len(r["step_seconds"]) for s, r in results.items()}, 2
    )
    row("s / step (best)", {s: min(r["step_seconds"]) for s, r in results.items()}, 2)
    row(
        "CPU s / step (mean)",
        {s: sum(r["step_cpu_seconds"]) / len(r["step_cpu_seconds"]) for s, r in results.items()},
        2,
    )
    row("peak RSS (MiB)", {s: r["peak_rss_mib"] for s, r in results.items()}, 0)
    row("peak RSS, training (MiB)", {s: r["training_peak_rss_mib"] for s, r in results.items()}, 0)
    tokens = {s: r["mean_completion_tokens"] for s, r in results.items()}
    table.add_row("completion tokens", f"{tokens[base]:.1f}", f"{tokens[ours]:.1f}", "")
    Console().print(table)
    for side in (base, ours):
        if "profile" in results[side]:
            Console().print(profile_table(results[side]["profile"], args, four_bit=side == "ours-4bit"))
    print(json.dumps({"model": args.model, "results": results}))


def profile_table(profile: dict[str, float], args, four_bit: bool = False):
    """Where one loop step's time goes: each phase's mean seconds and share of ``step_time``; what the
    phases leave out (metrics, progress, the rollout's bookkeeping) is the rest."""
    from rich.table import Table

    step_name = "one 4-bit QLoRA loop step" if four_bit else "one loop step"
    table = Table(title=f"{step_name}, {'bf16' if args.bf16 else 'fp32'}: where the time goes (mean)")
    for col in ("phase", "s", "share"):
        table.add_column(col, justify="right")
    step = profile["step_time"]
    for phase in LOOP_PHASES:
        table.add_row(phase, f"{profile[phase]:.3f}", f"{profile[phase] / step:.0%}")
    rest = step - sum(profile[p] for p in LOOP_PHASES)
    table.add_row("everything else", f"{rest:.3f}", f"{rest / step:.0%}")
    table.add_row("step", f"{step:.3f}", "100%")
    return table


# ------------------------------------------------------------------------------------------------ practicum


def practicum(args) -> None:
    from grpo_kit.config.loop import GRPOLoopConfig
    from grpo_kit.loop.training import train

    if args.model == "tiny":
        args.model = "smollm2-135m-instruct"
    args.lora_r = 16
    model, tokenizer, dataset, reward = setup(args)
    deadline = time.perf_counter() + args.minutes * 60

    def stop_at_deadline(state, metrics):
        if time.perf_counter() > deadline:
            raise KeyboardInterrupt  # the loop's Ctrl-C path: saves a checkpoint and returns

    with tempfile.TemporaryDirectory() as out:
        # Course 12.5: batch 8, G 8, 96 new tokens. Changed for a few CPU minutes instead of a GPU-hour:
        # gradient_accumulation_steps 1 (course: 2) for twice the optimizer steps, lr --practicum-lr (course: 2e-5).
        config = GRPOLoopConfig(
            output_dir=out,
            max_steps=10_000,
            num_generations=8,
            per_device_train_batch_size=8,
            max_completion_length=96,
            learning_rate=args.practicum_lr,
            logging_steps=1,
            save_steps=0,
            seed=0,
            disable_tqdm=True,
            lr_scheduler_type="constant",
        )
        start = time.perf_counter()
        result = train(model, tokenizer, dataset, reward, config, callbacks=[stop_at_deadline])
        elapsed = time.perf_counter() - start
    gaps = [-r["reward"] for r in result.log_history]  # reward = −|len − 50| → mean |len − 50| per step
    k = max(1, min(3, len(gaps) // 3))
    first, last = sum(gaps[:k]) / k, sum(gaps[-k:]) / k
    print(
        f"practicum: {result.global_step} steps in {elapsed / 60:.1f} min "
        f"({elapsed / max(result.global_step, 1):.1f} s/step), lr {args.practicum_lr}"
    )
    print(
        f"mean |length − {IDEAL_LENGTH}| (chars): first {k} steps {first:.1f} → last {k} steps {last:.1f} "
        f"({100 * (first - last) / first:+.0f}% closer)"
    )
    print("per step:", " ".join(f"{g:.1f}" for g in gaps))
    print("BENCH_RESULT " + json.dumps({"steps": result.global_step, "minutes": elapsed / 60, "gaps": gaps}))


def main(argv=None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.side == "ours":
        run_ours(args)
    elif args.side == "ours-4bit":
        run_ours(args, quantization="4bit")
    elif args.side == "trl":
        run_trl(args)
    elif args.practicum:
        practicum(args)
    else:
        compare(args)


if __name__ == "__main__":
    main()
