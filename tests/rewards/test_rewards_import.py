"""``import rewards`` stays light: no torch, transformers or trl (nor sympy: math-verify runs in workers)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import rewards

HEAVY = ("torch", "transformers", "trl", "sympy", "math_verify")


def test_import_rewards_imports_no_heavy_library():
    code = (
        "import sys, rewards\n"
        "from rewards import *\n"
        "rewards.format_reward(['x']); rewards.length_reward(5, unit='chars')(['abc'])\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"import rewards pulled in: {result.stdout.strip()}"


def test_no_module_level_heavy_imports_in_source():
    package = Path(rewards.__file__).parent
    for path in package.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:  # module level only
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in HEAVY, f"{path.name} imports {name} at module level"
