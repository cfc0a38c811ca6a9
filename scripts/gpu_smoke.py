"""GPU smoke checks for grpo-kit (run by scripts/gpu_smoke.sh on a CUDA machine).

1. precision: what grpo_kit.support.hardware picks for this GPU (bf16 only on compute capability >= 8);
2. unsloth: the Unsloth path for real -- FastLanguageModel 4-bit + LoRA, a few GRPO steps (vLLM generation when
   vllm is installed, else ``fast_inference=False``: transformers generation), ``save_lora``, the merged 16-bit
   model (``save_pretrained_merged``), both reloaded with plain transformers/peft and generating;
3. qlora_trl: the QLoRA TRL path (bitsandbytes NF4 base + LoRA through peft_config) on the same model, recipe and
   settings, for the side-by-side;
4. gguf: GGUF export of the merged TRL result (grpo_kit.export.save_gguf, verified by reloading).

Each check runs in its own Python process: importing unsloth patches TRL's trainers, so a TRL run after it in the
same process would not be plain TRL; and a crash in one check leaves the others' results. Each training check
records, per step, the wall time, the peak GPU memory, the reward and the loss. The summary (JSON) says which
passed, failed or were skipped and why; ``--results FILE`` appends a dated Markdown record (GPU, versions, command,
the side-by-side table) to FILE (docs/gpu_results.md).

Usage: python scripts/gpu_smoke.py --out DIR --model SMOKE_MODEL_DIR [--steps N] [--skip unsloth,qlora,gguf]
       [--results docs/gpu_results.md]
Exit status: 0 all passed (skips allowed), 1 a check failed, 2 no CUDA GPU.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NO_CUDA = (
    "gpu_smoke: no CUDA GPU visible (torch.cuda.is_available() is False). This script runs the GPU paths "
    "(Unsloth, QLoRA, GGUF) and checks nothing on a CPU machine; run it on a CUDA machine. "
    "On CPU the test suite covers everything up to the GPU boundary."
)
CHECKS = ("precision", "unsloth", "qlora_trl", "gguf")
VERSIONED = (
    "torch",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "datasets",
    "bitsandbytes",
    "unsloth",
    "unsloth_zoo",
    "vllm",
    "triton",
    "gguf",
)


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def require_cuda() -> str | None:
    """None when a CUDA GPU is visible, else the message to print (checked before anything heavy is imported)."""
    try:
        import torch
    except ImportError as err:
        return f"gpu_smoke: torch is not importable ({err}); " + NO_CUDA.split(". ", 1)[1]
    return None if torch.cuda.is_available() else NO_CUDA


def smoke_recipe(model: str, *, fast_inference: bool, completion_tokens: int = 32):
    """One recipe for both training paths, so the side-by-side compares paths, not settings: the length reward
    counted in characters (a random model never emits EOS, so every completion has ``completion_tokens`` tokens
    and a token-count reward is the same for all of them: zero advantage, zero gradient, as the H200 run of
    2026-12-04 showed; the characters of random tokens differ, so the adapter gets a gradient from the first
    step; GSM8K rewards would all be 0), 4-bit base, LoRA r=16 on all linear layers, paged 8-bit AdamW,
    4 completions of <= ``completion_tokens`` tokens for each of 2 prompts per step."""
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.recipes.reward_specs import RewardSpec

    return get_recipe(
        "smoltldr-length-small",
        model=model,
        quantization="4bit",
        optim="paged_adamw_8bit",
        max_completion_length=completion_tokens,
        save_steps=1000,
        logging_steps=1,
        eval_steps=None,  # the smoke trains through the paths directly: no held-out rows to evaluate during it
        rewards=(RewardSpec("length_reward", 1.0, {"ideal_length": 50, "unit": "chars"}),),
        unsloth={"max_seq_length": 512, "fast_inference": fast_inference, "gpu_memory_utilization": 0.3},
    )


def step_recorder():
    """A TrainerCallback recording each optimizer step's wall time and peak GPU memory (GiB), and the logged
    reward and loss by step."""
    import torch
    from transformers import TrainerCallback

    class StepRecorder(TrainerCallback):
        def __init__(self):
            self.steps: list[dict[str, Any]] = []
            self._start = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            torch.cuda.synchronize()
            self.steps.append(
                {
                    "step": state.global_step,
                    "seconds": round(time.perf_counter() - self._start, 3),
                    "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
                }
            )

        def on_log(self, args, state, control, logs=None, **kwargs):
            for row in self.steps:
                if row["step"] == state.global_step and logs:
                    row.update({k: logs[k] for k in ("reward", "loss", "grad_norm") if k in logs})

    return StepRecorder()


def summarise_steps(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean step time without the first step (compilation, autotuning), and the largest peak memory."""
    times = [s["seconds"] for s in steps]
    later = times[1:] or times
    return {
        "first_step_s": times[0] if times else None,
        "mean_step_s_after_first": round(statistics.mean(later), 3) if later else None,
        "peak_gib": max((s["peak_gib"] for s in steps), default=None),
    }


# --- the checks (each runs in its own process) ---------------------------------------------------------


def check_precision(args) -> dict:
    import torch

    from grpo_kit.support.hardware import detect_cuda_capability, detect_precision

    capability = detect_cuda_capability()
    precision = detect_precision("cuda")
    expected_bf16 = capability >= (8, 0)
    assert precision.bf16 is expected_bf16 and precision.fp16 is not expected_bf16, precision
    return {
        "gpu": torch.cuda.get_device_name(0),
        "capability": list(capability),
        "precision": precision.dtype,
        "torch_says_bf16_supported": torch.cuda.is_bf16_supported(),
        "reason": precision.reason,
    }


def _greedy_reload_check(reference, model_dir: Path, tokenizer) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    from grpo_kit.export.verify import TIE_TOLERANCE, compare_greedy, prompt_ids

    reloaded = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).to("cuda")
    comparison = compare_greedy(
        reference, reloaded, prompt_ids(tokenizer).to("cuda"), tie_tolerance=TIE_TOLERANCE["16bit"]
    )
    return comparison.as_dict()


def check_unsloth(args) -> dict:
    if importlib.util.find_spec("unsloth") is None:
        return {"skipped": "unsloth not installed (install the wheelhouse: docs/gpu.md)"}
    import unsloth  # noqa: F401  (first: it patches transformers/peft/TRL at import)

    from grpo_kit.trainers import unsloth_path

    fast_inference = importlib.util.find_spec("vllm") is not None and not args.no_vllm
    recipe = smoke_recipe(args.model, fast_inference=fast_inference)
    recorder = step_recorder()
    start = time.perf_counter()
    result = unsloth_path.train_with_unsloth(
        recipe,
        model_name=args.model,
        output_dir=args.out / "unsloth",
        max_steps=args.steps,
        callbacks=[recorder],
    )
    report: dict[str, Any] = {
        "fast_inference": fast_inference,
        "steps": recorder.steps,
        **summarise_steps(recorder.steps),
        "train_seconds": round(time.perf_counter() - start, 1),
        "global_step": result.global_step,
        "lora_dir": str(result.adapter_dir),
    }
    assert result.global_step == args.steps, result.global_step
    assert (result.adapter_dir / "adapter_config.json").exists(), "save_lora wrote no adapter_config.json"
    unsloth_grad_norms = [row.get("grad_norm") for row in recorder.steps]
    report["grad_norms"] = unsloth_grad_norms
    assert any(g and g > 0 for g in unsloth_grad_norms), (
        f"no gradient reached the adapter: {unsloth_grad_norms}"
    )

    # After training, each part is reported on its own: a failing export keeps the step measurements.
    report["errors"] = []
    merged_dir = args.out / "unsloth_merged_16bit"

    def merged_16bit():
        result.model.save_pretrained_merged(
            os.fspath(merged_dir), result.tokenizer, save_method="merged_16bit"
        )
        report["merged_dir"] = str(merged_dir)
        report["merged_vs_trained"] = _greedy_reload_check(result.model, merged_dir, result.tokenizer)

    def lora_reload():  # the adapter alone, on the carried base, with plain peft (what a user without unsloth does)
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM

        base = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.bfloat16).to("cuda")
        with_adapter = PeftModel.from_pretrained(base, os.fspath(result.adapter_dir))
        ids = result.tokenizer("Summarize: the cat sat on the mat.", return_tensors="pt").to("cuda")
        generated = with_adapter.generate(**ids, max_new_tokens=8, do_sample=False)
        report["lora_reload_new_tokens"] = int(generated.shape[1] - ids["input_ids"].shape[1])

    def vllm_compare():
        from grpo_kit.rollout.generation import Decoding

        report["compare"] = unsloth_path.compare_with_and_without_adapter(
            result.model,
            result.tokenizer,
            result.adapter_dir,
            ["Summarize: the cat sat on the mat."],
            decoding=Decoding(max_new_tokens=16, greedy=True),
        )

    for part in (merged_16bit, lora_reload) + ((vllm_compare,) if fast_inference else ()):
        try:
            part()
        except Exception as err:  # noqa: BLE001 — recorded; the check is then FAILED with its measurements
            report["errors"].append(f"{part.__name__}: {type(err).__name__}: {err}"[:1500])
            report.setdefault("tracebacks", []).append(traceback.format_exc()[-3000:])
    return report


def check_qlora_trl(args) -> dict:
    from grpo_kit.trainers import trl_path

    recipe = smoke_recipe(args.model, fast_inference=False)
    recorder = step_recorder()
    start = time.perf_counter()
    result = trl_path.train_with_trl(
        recipe, output_dir=args.out / "trl_qlora", max_steps=args.steps, callbacks=[recorder]
    )
    trainer = result.trainer
    assert getattr(trainer.model.get_base_model(), "is_loaded_in_4bit", False), "the base model is not 4-bit"
    assert result.global_step == args.steps, result.global_step
    assert (result.output_dir / "adapter_config.json").exists()
    grad_norms = [r["grad_norm"] for r in result.log_history if "grad_norm" in r]
    assert any(g and g > 0 for g in grad_norms), f"no gradient reached the adapter: {grad_norms}"
    return {
        "steps": recorder.steps,
        **summarise_steps(recorder.steps),
        "train_seconds": round(time.perf_counter() - start, 1),
        "grad_norms": grad_norms,
        "bf16": trainer.args.bf16,
        "fp16": trainer.args.fp16,
        "optim": str(trainer.args.optim.value),
        "adapter_dir": str(result.output_dir),
    }


def check_gguf(args) -> dict:
    import torch
    from peft import PeftModel

    from grpo_kit.export import save_gguf, save_merged
    from grpo_kit.models import load_model

    adapter_dir = args.out / "trl_qlora"
    if not (adapter_dir / "adapter_config.json").exists():
        return {"skipped": "no QLoRA adapter to export (the qlora_trl check did not run or failed)"}
    base, tokenizer = load_model(args.model, dtype=torch.float16)
    merged_model = PeftModel.from_pretrained(base.to("cuda"), os.fspath(adapter_dir))
    merged = save_merged(merged_model, tokenizer, args.out / "merged", dtype="16bit")
    report = save_gguf(args.out / "merged", args.out / "model-f16.gguf", "f16")
    return {
        "merged": getattr(merged, "summary", lambda: str(merged))(),
        "gguf": getattr(report, "summary", lambda: str(report))(),
    }


CHECK_FUNCS = {
    "precision": check_precision,
    "unsloth": check_unsloth,
    "qlora_trl": check_qlora_trl,
    "gguf": check_gguf,
}


def run_one(args) -> int:
    """Child process: run ``args.check`` and write OUT/<check>.json."""
    name = args.check
    try:
        payload = CHECK_FUNCS[name](args)
        status = "skipped" if "skipped" in payload else "FAILED" if payload.get("errors") else "ok"
        if payload.get("errors"):
            payload["error"] = "; ".join(payload["errors"])
    except Exception as err:  # noqa: BLE001 — reported in the summary; the other checks still run
        payload = {
            "error": f"{type(err).__name__}: {err}"[:2000],
            "traceback": traceback.format_exc()[-4000:],
        }
        status = "FAILED"
    payload["status"] = status
    (args.out / f"{name}.json").write_text(json.dumps(payload, indent=2, default=str))
    return 0 if status != "FAILED" else 1


# --- the record (pure, tested on CPU) ---------------------------------------------------------------------


def _fmt(value, spec: str = ".3g") -> str:
    return "–" if value is None else format(value, spec) if isinstance(value, (int, float)) else str(value)


def side_by_side(summary: dict) -> str:
    """Markdown: one row per training path (first-step and later mean step time, peak GPU memory), then the
    reward and loss of each step, Unsloth next to QLoRA TRL."""
    paths = [("Unsloth", summary.get("unsloth", {})), ("QLoRA TRL + PEFT", summary.get("qlora_trl", {}))]
    lines = [
        "| path | status | first step (s) | later steps, mean (s) | peak GPU memory (GiB) |",
        "|---|---|---|---|---|",
    ]
    for label, result in paths:
        status = result.get("status", "not run")
        if status == "FAILED":
            status = f"FAILED: {result.get('error', '')[:120]}"
        elif status == "skipped":
            status = f"skipped: {result.get('skipped', '')}"
        elif result.get("fast_inference") is False:
            status += " (fast_inference=False)"
        lines.append(
            f"| {label} | {status} | {_fmt(result.get('first_step_s'))} | "
            f"{_fmt(result.get('mean_step_s_after_first'))} | {_fmt(result.get('peak_gib'))} |"
        )
    steps = sorted({s["step"] for _, r in paths for s in r.get("steps", [])})
    if steps:
        by_step = [{s["step"]: s for s in r.get("steps", [])} for _, r in paths]
        lines += [
            "",
            "| step | Unsloth reward | Unsloth loss | Unsloth s | TRL reward | TRL loss | TRL s |",
            "|---|---|---|---|---|---|---|",
        ]
        for step in steps:
            cells = []
            for rows in by_step:
                row = rows.get(step, {})
                cells += [_fmt(row.get("reward")), _fmt(row.get("loss")), _fmt(row.get("seconds"))]
            lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def results_markdown(summary: dict, command: str, when: datetime.datetime | None = None) -> str:
    """A dated record for docs/gpu_results.md: GPU, versions, command, each check's status, the side-by-side."""
    when = when or datetime.datetime.now(datetime.timezone.utc)
    precision = summary.get("precision", {})
    gpu = precision.get("gpu", "unknown GPU")
    vers = ", ".join(f"{k} {v}" for k, v in summary.get("versions", {}).items() if v)
    status = ", ".join(f"{name} {summary[name].get('status', '?')}" for name in CHECKS if name in summary)
    out = [
        f"## {when:%Y-%m-%d %H:%M} UTC — {gpu}",
        "",
        f"- Command: `{command}`",
        f"- Model: `{summary.get('model')}`, {summary.get('steps')} steps",
        f"- Versions: {vers}",
        f"- Checks: {status}",
    ]
    for name in CHECKS:
        error = summary.get(name, {}).get("error")
        if error:
            out.append(f"- {name} failed: `{error.splitlines()[0][:300]}`")
    return "\n".join(out) + "\n\n" + side_by_side(summary) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_smoke_out"))
    parser.add_argument(
        "--model",
        default="smollm2-135m-instruct",
        help="a local model folder (the carried smoke model: scripts/make_smoke_model.py), "
        "an alias or a Hub id",
    )
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--skip", default="", help="comma-separated: unsloth, qlora, gguf")
    parser.add_argument(
        "--no-vllm", action="store_true", help="Unsloth with fast_inference=False even with vllm"
    )
    parser.add_argument("--results", type=Path, help="append a dated Markdown record to this file")
    parser.add_argument("--check", choices=CHECKS, help=argparse.SUPPRESS)  # internal: one check per process
    args = parser.parse_args(argv)

    problem = require_cuda()
    if problem:
        print(problem, file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    if args.check:
        return run_one(args)

    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    skip |= {"qlora_trl"} if "qlora" in skip else set()
    summary: dict[str, Any] = {"versions": versions(), "model": args.model, "steps": args.steps}
    child = [
        sys.executable,
        os.fspath(Path(__file__).resolve()),
        "--out",
        os.fspath(args.out),
        "--model",
        args.model,
        "--steps",
        str(args.steps),
    ] + (["--no-vllm"] if args.no_vllm else [])
    for name in CHECKS:
        if name in skip:
            summary[name] = {"status": "skipped", "skipped": "--skip"}
            continue
        start = time.perf_counter()
        (args.out / f"{name}.json").unlink(missing_ok=True)
        subprocess.run([*child, "--check", name], check=False)
        result_file = args.out / f"{name}.json"
        summary[name] = (
            json.loads(result_file.read_text())
            if result_file.exists()
            else {"status": "FAILED", "error": "the check's process died without a result"}
        )
        print(
            f"[gpu_smoke] {name}: {summary[name]['status']} ({time.perf_counter() - start:.1f} s)", flush=True
        )
        (args.out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    command = "scripts/gpu_smoke.sh " + " ".join(a for a in sys.argv[1:])
    record = results_markdown(summary, os.environ.get("GPU_SMOKE_COMMAND", command))
    print(record)
    if args.results:
        with open(args.results, "a") as f:
            f.write("\n" + record)
    return 1 if any(summary[n].get("status") == "FAILED" for n in CHECKS) else 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
