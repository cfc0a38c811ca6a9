"""GPU smoke checks for grpo-kit (run by scripts/gpu_smoke.sh on a CUDA machine).

1. precision: what grpo_kit.hardware picks for this GPU (bf16 only on compute capability >= 8);
2. QLoRA TRL path: a 4-bit model (bitsandbytes NF4) + LoRA through peft_config, a few GRPO steps with a
   paged 8-bit optimizer, metrics.jsonl and the adapter written;
3. Unsloth path (when unsloth + vllm are installed): FastLanguageModel 4-bit + vLLM, a few GRPO steps,
   save_lora, fast_generate with and without the adapter;
4. GGUF export of the merged TRL result (grpo_kit.export.save_gguf, verified by reloading).

Each check is independent; the summary (JSON) says which passed, failed or were skipped and why.
Usage: python scripts/gpu_smoke.py --out DIR [--model PATH_OR_ALIAS] [--steps N] [--skip unsloth,gguf]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "bitsandbytes", "unsloth",
                 "unsloth_zoo", "vllm", "gguf"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def check_precision() -> dict:
    import torch

    from grpo_kit.hardware import detect_cuda_capability, detect_precision

    capability = detect_cuda_capability()
    precision = detect_precision("cuda")
    expected_bf16 = capability >= (8, 0)
    assert precision.bf16 is expected_bf16 and precision.fp16 is not expected_bf16, precision
    return {"gpu": torch.cuda.get_device_name(0), "capability": list(capability), "precision": precision.dtype,
            "torch_says_bf16_supported": torch.cuda.is_bf16_supported(), "reason": precision.reason}


def check_qlora_trl(model: str, out: Path, steps: int) -> dict:
    from grpo_kit import trl_path
    from grpo_kit.recipes import get_recipe

    # The length reward varies between completions from the first step, so the adapter gets a gradient
    # even on a random tiny model (GSM8K rewards would all be 0 there: zero advantages, zero gradient).
    recipe = get_recipe("smoltldr-length-small", model=model, quantization="4bit", optim="paged_adamw_8bit",
                        max_completion_length=32, save_steps=1000)
    start = time.perf_counter()
    result = trl_path.train(recipe, output_dir=out / "trl_qlora", max_steps=steps)
    seconds = time.perf_counter() - start
    trainer = result.trainer
    base = trainer.model.get_base_model()
    assert getattr(base, "is_loaded_in_4bit", False), "the base model is not 4-bit"
    assert result.global_step == steps, result.global_step
    assert (result.output_dir / "adapter_config.json").exists()
    rewards = [r["reward"] for r in result.log_history if "reward" in r]
    grad_norms = [r["grad_norm"] for r in result.log_history if "grad_norm" in r]
    assert any(g and g > 0 for g in grad_norms), f"no gradient reached the adapter: {grad_norms}"
    return {"steps": result.global_step, "grad_norms": grad_norms, "seconds": round(seconds, 1), "rewards": rewards,
            "bf16": trainer.args.bf16, "fp16": trainer.args.fp16, "optim": str(trainer.args.optim.value),
            "adapter_dir": str(result.output_dir)}


def check_unsloth(model: str, out: Path, steps: int) -> dict:
    missing = [m for m in ("unsloth", "vllm") if importlib.util.find_spec(m) is None]
    if missing:
        return {"skipped": f"{', '.join(missing)} not installed (pip install torch==2.13.0 '.[unsloth]')"}
    from datasets_prep import SYSTEM_PROMPT
    from grpo_kit import unsloth_path
    from grpo_kit.recipes import get_recipe

    recipe = get_recipe("gsm8k-unsloth", dataset_source="synthetic", dataset_size=12, max_completion_length=64,
                        unsloth={"max_seq_length": 512, "gpu_memory_utilization": 0.3}, save_steps=1000)
    start = time.perf_counter()
    result = unsloth_path.train(recipe, model_name=model, output_dir=out / "unsloth", max_steps=steps)
    seconds = time.perf_counter() - start
    rows = unsloth_path.compare_with_and_without_adapter(
        result.model, result.tokenizer, result.adapter_dir, ["What is 12 + 30?"], system_prompt=SYSTEM_PROMPT,
        sampling=unsloth_path.sampling_params_kwargs(temperature=0.0, max_tokens=48))
    report = {"steps": result.global_step, "seconds": round(seconds, 1), "lora_dir": str(result.adapter_dir),
              "compare": rows}
    try:  # Unsloth's own GGUF writer (it builds llama.cpp: needs network the first time)
        from grpo_kit.export import save_gguf

        gguf = save_gguf(result.model, out / "unsloth_gguf", "q8_0", tokenizer=result.tokenizer)
        report["gguf"] = getattr(gguf, "summary", lambda: str(gguf))()
    except Exception as err:  # noqa: BLE001 — reported, not fatal: the TRL-side GGUF check is the main one
        report["gguf_error"] = f"{type(err).__name__}: {err}"[:500]
    return report


def check_gguf(adapter_dir: str, model: str, out: Path) -> dict:
    import torch
    from peft import PeftModel

    from grpo_kit.export import save_gguf, save_merged
    from grpo_kit.models import load_model

    device = "cuda" if torch.cuda.is_available() else "cpu"
    base, tokenizer = load_model(model, dtype=torch.float16 if device == "cuda" else torch.float32)
    merged_model = PeftModel.from_pretrained(base.to(device), adapter_dir)
    merged = save_merged(merged_model, tokenizer, out / "merged", dtype="16bit")
    report = save_gguf(out / "merged", out / "model-f16.gguf", "f16")
    return {"merged": getattr(merged, "summary", lambda: str(merged))(),
            "gguf": getattr(report, "summary", lambda: str(report))()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_smoke_out"))
    parser.add_argument("--model", default="smollm2-135m-instruct",
                        help="alias, Hub id or local model dir (default: the embedded SmolLM2-135M)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--skip", default="", help="comma-separated: qlora, unsloth, gguf")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    import torch

    if not torch.cuda.is_available():
        print("gpu_smoke: no CUDA GPU visible; nothing to check here (CPU tests cover the rest).")
        return 2
    summary: dict = {"versions": _versions(), "model": args.model}
    checks = [("precision", check_precision)]
    if "qlora" not in skip:
        checks.append(("qlora_trl", lambda: check_qlora_trl(args.model, args.out, args.steps)))
    if "unsloth" not in skip:
        checks.append(("unsloth", lambda: check_unsloth(args.model, args.out, args.steps)))
    if "gguf" not in skip and "qlora" not in skip:
        checks.append(("gguf", lambda: check_gguf(summary["qlora_trl"]["adapter_dir"], args.model, args.out)))
    failed = []
    for name, check in checks:
        start = time.perf_counter()
        try:
            summary[name] = check()
            status = "skipped" if "skipped" in summary[name] else "ok"
        except Exception as err:  # noqa: BLE001 — each check is reported, the others still run
            summary[name] = {"error": f"{type(err).__name__}: {err}"[:2000],
                             "traceback": traceback.format_exc()[-4000:]}
            status = "FAILED"
            failed.append(name)
        print(f"[gpu_smoke] {name}: {status} ({time.perf_counter() - start:.1f} s)", flush=True)
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    print(json.dumps({k: v for k, v in summary.items() if k != "versions"}, indent=2, default=str)[:6000])
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
