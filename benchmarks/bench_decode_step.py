"""One decode step of the loop's sampler against its bound: reading every weight once from memory.

    python benchmarks/bench_decode_step.py                                   # the tiny random model: plumbing
    python benchmarks/bench_decode_step.py --model smollm2-135m-instruct     # docs/benchmarks.md's table

The shape is a main-job sampling call: 2 prompts of about 100 tokens, G = 4 (8 rows), a LoRA adapter (r = 16, all
linear layers) merged into packed weights as the loop samples (``core.sampling.merged_lora(pack_rows=8)``), the
main job's temperature 1. No row ends early: the stop-token list is empty, so every call decodes all its tokens.

- **decode step**: (best time of a call with ``--tokens`` new tokens − best time of a call with 1) / (tokens − 1),
  so the prefill and the call's set-up cancel out; best of ``--repeats`` each.
- **weight-read bound**: a decode step multiplies every weight once (the tied embedding once, as the LM head; the
  lookup of 8 embedding rows is negligible), so it reads at least the weights' bytes. Memory bandwidth is measured
  here, with the same torch threads: the best time of summing a ``--bandwidth-mib`` fp32 tensor.
- the ratio of the two: how far the step is from what memory allows.

Simplifications: the bandwidth is a read-only sum, which streams better than a matmul's reads; the KV cache and
activations are left out of the bytes (about 1 % at this shape). Prints two lines, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="tiny", help="'tiny' (random 2-layer Llama) or a load_model name/path")
    p.add_argument("--threads", type=int, default=2, help="torch threads (the main job uses 2)")
    p.add_argument("--tokens", type=int, default=33, help="new tokens in the long call")
    p.add_argument("--repeats", type=int, default=5, help="calls of each length; the best one counts")
    p.add_argument("--bandwidth-mib", type=int, default=512, help="size of the tensor summed for bandwidth")
    p.add_argument(
        "--bf16",
        action="store_true",
        help="sample with bf16 copies of the weights (the loop's bf16=True); the bound then reads half the bytes",
    )
    return p.parse_args(argv)


def best_seconds(fn, repeats: int) -> float:
    fn()  # warm-up: first-call allocations and oneDNN primitives
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def memory_bandwidth(mib: int, repeats: int) -> float:
    """Bytes per second of summing an fp32 tensor of ``mib`` MiB (read once per sum)."""
    import torch

    x = torch.ones(mib * 2**20 // 4, dtype=torch.float32)
    return x.numel() * 4 / best_seconds(lambda: x.sum(), repeats)


def weight_bytes(model) -> int:
    """Bytes of the weights one decode step multiplies: every parameter once (tied ones once), LoRA's A/B aside
    (merged into the base weights while sampling)."""
    seen, total = set(), 0
    for name, param in model.named_parameters():
        if ".lora_" in name or id(param) in seen:
            continue
        seen.add(id(param))
        total += param.numel() * param.element_size()
    return total


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from datasets_prep import load_smoltldr, synthetic_tldr
    from grpo_kit.core.sampling import merged_lora, sample_completions
    from grpo_kit.models import load_model

    torch.manual_seed(0)
    lora = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.0, "target_modules": "all-linear"}
    model, tokenizer = load_model(args.model, lora=lora, seed=0)
    rows = load_smoltldr("train", source=synthetic_tldr(2, seed=0))
    chats = [[{"role": "user", "content": row["prompt"]}] for row in rows]  # smoltldr's plain-text post
    prompts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left")
    G = 4

    def call(new_tokens: int):
        return lambda: sample_completions(
            model, enc["input_ids"], enc["attention_mask"], num_generations=G, max_new_tokens=new_tokens,
            eos_token_ids=[], pad_token_id=tokenizer.pad_token_id, temperature=1.0,
        )  # fmt: skip

    dtype = torch.bfloat16 if args.bf16 else None
    with torch.no_grad(), merged_lora(model, dtype, pack_rows=2 * G):
        long_s = best_seconds(call(args.tokens), args.repeats)
        short_s = best_seconds(call(1), args.repeats)
    step_s = (long_s - short_s) / (args.tokens - 1)
    read_bytes = weight_bytes(model) // (2 if args.bf16 else 1)  # fp32 weights; bf16 copies are half
    bandwidth = memory_bandwidth(args.bandwidth_mib, args.repeats)
    bound_s = read_bytes / bandwidth
    result = {
        "model": args.model,
        "threads": args.threads,
        "rows": 2 * G,
        "precision": "bf16" if args.bf16 else "fp32",
        "prompt_tokens": int(enc["input_ids"].size(1)),
        "decode_step_ms": 1e3 * step_s,
        "weight_mb": read_bytes / 1e6,
        "bandwidth_gb_s": bandwidth / 1e9,
        "weight_read_bound_ms": 1e3 * bound_s,
        "step_over_bound": step_s / bound_s,
    }
    print(
        f"decode step ({2 * G} rows, prompts of {result['prompt_tokens']} tokens): {result['decode_step_ms']:.1f} ms"
    )
    print(
        f"weight-read bound: {result['weight_mb']:.0f} MB at {result['bandwidth_gb_s']:.1f} GB/s = "
        f"{result['weight_read_bound_ms']:.1f} ms; the step is {result['step_over_bound']:.2f}x the bound"
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
