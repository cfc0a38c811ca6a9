"""No sentence in the repository says that bitsandbytes, 4-bit QLoRA or its 8-bit optimizers need CUDA.

Measured on this project's 2-core CPU machine (issue #41; README.md "QLoRA on CPU"): bitsandbytes 0.50.2 loads
NF4 ``Linear4bit`` layers on CPU, LoRA trains on them on both loops, and its 8-bit and paged AdamW run there.
A line naming Unsloth or vLLM is left out here: those claims belong to the Unsloth and vLLM lanes of the same
issue, which check their own. ``docs/gpu_results.md`` records runs as they happened and is left out too.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUBJECT = r"(bitsandbytes|4-bit|4bit|qlora|8-bit optim|adamw_8bit|paged_adamw)"
CLAIM = r"(needs? (a )?(cuda|gpu)|cuda[- ]only|gpu[- ]only|\(cuda\))"
# the subject and the claim within 60 characters of one line, in either order
CUDA_ONLY = re.compile(rf"{SUBJECT}.{{0,60}}{CLAIM}|{CLAIM}.{{0,60}}{SUBJECT}", re.IGNORECASE)
OTHER_LANES = re.compile(r"unsloth|vllm", re.IGNORECASE)
TEXT = (".py", ".md", ".toml", ".txt", ".yaml", ".yml", ".sh", ".ipynb", ".cfg")


def cuda_only_claims(lines: dict[str, str]) -> list[str]:
    """``path:line: text`` for every line of ``lines`` ({"path:line": text}) that makes the claim."""
    return [
        f"{where}: {text.strip()}"
        for where, text in lines.items()
        if CUDA_ONLY.search(text) and not OTHER_LANES.search(text)
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
        if not name.endswith(TEXT) or name in ("docs/gpu_results.md", "tests/test_no_cuda_only_claims.py"):
            continue
        path = ROOT / name
        if not path.is_file():
            continue
        for number, text in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            lines[f"{name}:{number}"] = text
    return lines


def test_the_pattern_finds_the_claims_this_issue_removed():
    old = {
        "a:1": '"4-bit quantization (QLoRA) uses bitsandbytes, which needs a CUDA GPU, and no GPU is visible."',
        "b:2": '    quantization: None, "4bit" (QLoRA, bitsandbytes NF4) or "8bit". Needs CUDA.',
        "c:3": "plain LoRA in float32 (no 4-bit: bitsandbytes needs CUDA),",
        "d:4": 'f"optim={optim!r} is a bitsandbytes optimizer and needs a CUDA GPU; on CPU set "',
        "e:5": "QLoRA through a ``BitsAndBytesConfig``, CUDA only), LoRA through ``peft_config``",
        "f:6": "4-bit QLoRA runs on CPU through bitsandbytes' CPU backend (its 1.1x slower step).",
    }
    assert [claim.split(":")[0] for claim in cuda_only_claims(old)] == ["a", "b", "c", "d", "e"]


def test_no_tracked_file_claims_bitsandbytes_needs_cuda():
    claims = cuda_only_claims(tracked_lines())
    assert not claims, "bitsandbytes runs on CPU (README.md 'QLoRA on CPU'); correct:\n" + "\n".join(claims)
