"""No ``grpo-kit`` command prints bitsandbytes' "kernels" notice.

Whenever bitsandbytes is installed, peft imports it (``peft/helpers.py``), so every ``grpo-kit train`` does, 4-bit
or not. On a CPU with AVX512-BF16, its CPU backend then tries the optional ``kernels`` package and, without it,
logs "Failed to load CPU gemm_4bit_forward from kernels-community: No module named 'kernels'" (its own fused
4-bit kernel runs instead: the line only says a faster one could not be loaded). On other CPUs it logs nothing,
so the commands here run with bitsandbytes told that this CPU has AVX512-BF16 (``has_avx512bf16()`` answers
True); the line, if any, comes from bitsandbytes' own code. No command here runs a 4-bit layer.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_kit.support.terminal import quiet_bitsandbytes_kernels_notice

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("bitsandbytes") is None, reason="the notice comes from bitsandbytes"
)

ROOT = Path(__file__).resolve().parents[2]

# A sitecustomize that answers has_avx512bf16() with True from the moment bitsandbytes.functional is loaded,
# before its CPU backend reads it; bitsandbytes itself is not imported here.
AVX512_BF16 = """
import importlib.machinery
import sys


class _AVX512BF16:
    def find_spec(self, name, path=None, target=None):
        if name != "bitsandbytes.functional":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            module.has_avx512bf16 = lambda: True

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AVX512BF16())
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    site = tmp_path_factory.mktemp("avx512_bf16")
    (site / "sitecustomize.py").write_text(AVX512_BF16)
    path = os.pathsep.join([str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
    }


def _output(args: list[str], env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _kernels_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if "kernels" in line]


def test_bitsandbytes_prints_the_line_here_without_grpo_kit(env, tmp_path):
    """The harness is live: bitsandbytes alone prints the line, so its absence below is grpo-kit's doing."""
    assert _kernels_lines(_output(["-c", "import bitsandbytes"], env, tmp_path))


@pytest.mark.parametrize(
    "command",
    [
        ["--help"],
        ["train", "--help"],
        ["eval", "--help"],
        ["recipes"],
        ["doctor"],
        [
            "train",
            "--recipe",
            "smoltldr-length-small",
            "--set",
            "model=tiny",
            "--max-steps",
            "1",
            "--eval-prompts",
            "0",
            "--samples",
            "0",
            "--no-merge",
            "--output-dir",
            "run",
        ],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_no_grpo_kit_command_prints_a_kernels_line(command, env, tmp_path):
    output = _output(["-m", "grpo_kit.cli", *command], env, tmp_path)
    assert not _kernels_lines(output), output


def test_only_that_line_is_dropped(caplog):
    """Every other record of bitsandbytes' CPU backend still comes through."""
    quiet_bitsandbytes_kernels_notice()
    quiet_bitsandbytes_kernels_notice()
    cpu_ops = logging.getLogger("bitsandbytes.backends.cpu.ops")
    assert len(cpu_ops.filters) == 1
    with caplog.at_level(logging.WARNING):
        cpu_ops.warning(
            "Failed to load CPU gemm_4bit_forward from kernels-community: %s.", "No module named 'x'"
        )
        cpu_ops.warning("something else went wrong: %s", "kernels")
    assert [record.getMessage() for record in caplog.records] == ["something else went wrong: kernels"]
