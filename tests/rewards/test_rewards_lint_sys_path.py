"""``sys.path`` stays clean (issue 24, finding 4): ``grpo-kit rewards lint`` never puts the current folder
before the library, and math-verify's workers start with the parent's import path, not the current folder.
A ``latex2sympy2_extended.py`` planted in a freshly cloned folder must never run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PLANTED = """
import os, pathlib
pathlib.Path(os.environ["PLANTED_MARKER"], f"ran-{os.getpid()}").write_text("planted module ran")
raise ImportError("the planted latex2sympy2_extended ran")
"""

# A console script's start: its own folder first, never the current folder (``-I`` drops it, as the
# ``grpo-kit`` entry point would); then the same import path this test process has.
CONSOLE_SCRIPT = (
    "import sys; sys.path[:] = sys.argv[1:]; del sys.argv[1:]; "
    "from grpo_kit.cli import main; raise SystemExit(main(['rewards', 'lint', {target!r}]))"
)


def _lint_in(folder: Path, target: str, marker: Path) -> subprocess.CompletedProcess:
    repo = str(Path(__file__).resolve().parents[2])
    path = [repo] + [p for p in sys.path if p not in ("", ".", repo)]
    env = {**os.environ, "PLANTED_MARKER": str(marker)}
    return subprocess.run(
        [sys.executable, "-I", "-c", CONSOLE_SCRIPT.format(target=target), *path],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_planted_module_in_the_current_folder_never_runs(tmp_path):
    clone, marker = tmp_path / "clone", tmp_path / "marker"
    clone.mkdir()
    marker.mkdir()
    (clone / "latex2sympy2_extended.py").write_text(PLANTED)
    (clone / "my_rewards.py").write_text(
        "from rewards import accuracy_reward\n\ndef mine(completions, **kwargs):\n    return [0.0] * len(completions)\n"
    )
    built_in = _lint_in(clone, "rewards:accuracy_reward", marker)
    assert "accuracy_reward" in built_in.stdout, built_in.stdout + built_in.stderr
    users = _lint_in(clone, "my_rewards:mine", marker)  # the user's own module is still found by its folder
    assert "mine" in users.stdout, users.stdout + users.stderr
    assert list(marker.iterdir()) == []  # neither the parent nor a single worker imported the planted file


def test_workers_get_no_current_folder_entry(monkeypatch, tmp_path):
    from rewards.math_verify_bounded import worker_import_path

    monkeypatch.setattr(sys, "path", ["", ".", *sys.path])
    path = worker_import_path()
    assert "" not in path and "." not in path
    assert Path(path[0], "rewards", "math_verify_bounded.py").is_file()
