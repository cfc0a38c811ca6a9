"""The release artefacts: `python -m build` and `twine check` pass, and the built wheel installs into a clean
venv where `import rewards, datasets_prep, grpo_kit` works without the repository on the path, and ships the
package's data files (the held-out sets of datasets_prep.TRANSFER_SETS).

Runs scripts/check_wheel.sh with the base install only (its extras are torch & co., GBs; CI's .ci/run runs
the same script with the `train` extra). Slow: two venvs, build and twine from the package index.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_wheel_builds_passes_twine_and_imports_from_a_clean_venv():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "check_wheel.sh"), ""],
        env={**env, "PYTHON": sys.executable},
        check=False,
        capture_output=True,
        text=True,
        timeout=850,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    assert "PASSED" in out  # twine check, for the wheel and the sdist
    assert out.count("PASSED") == 2
    assert "built grpo_kit-0.1.0-py3-none-any.whl and grpo_kit-0.1.0.tar.gz" in out
    assert "imported rewards, datasets_prep, grpo_kit from the installed wheel" in out
    # datasets_prep/*.jsonl, package data
    assert "the wheel ships the held-out sets gsm8k-handwritten, tldr-handwritten" in out
    assert "recipe files" in out  # grpo_kit/recipes/shipped/*.yaml, package data too
