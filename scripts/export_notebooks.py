"""Export the marimo lessons (notebooks/*.py) to Jupyter notebooks for Colab (notebooks/ipynb/).

Each export is ``marimo export ipynb`` (cells in topological order, so Jupyter can run them top
to bottom) with one cell prepended that installs grpo-kit, because a fresh Colab runtime has
neither grpo-kit nor marimo. The output is deterministic (marimo's cell ids are stable and we
write with fixed formatting), so ``--check`` can tell whether the exports drifted from the lessons.

    python scripts/export_notebooks.py           # (re)write notebooks/ipynb/*.ipynb
    python scripts/export_notebooks.py --check   # exit 1 and list the drifted files
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
LESSONS_DIR = ROOT / "notebooks"
EXPORT_DIR = LESSONS_DIR / "ipynb"

# The install cell a Colab user runs first. Until grpo-kit is on the package index it installs from the
# repository the README's molab links assume, at the release tag (git+https://...@v<version>); the index is
# the fallback, and when neither works the cell stops with one line saying what to do. After the first
# release on PyPI, set INSTALL_FROM = "index" and re-export (docs/releasing.md).
# Lessons that use the Unsloth path on a GPU ask for the `unsloth` extra only when a GPU is present (it pulls
# Unsloth, the CUDA build of vLLM, and bitsandbytes). GRPO_KIT_SKIP_INSTALL=1 skips it where grpo-kit is already
# installed (the test that executes the exports); GRPO_KIT_REPO points it at another clone (a fork, or
# file:///path/to/clone in tests/test_install_cell.py).
SKIP_INSTALL_ENV = "GRPO_KIT_SKIP_INSTALL"
REPO_ENV = "GRPO_KIT_REPO"
REPOSITORY_URL = "https://github.com/grpo-kit/grpo-kit"  # the molab links' github/grpo-kit/grpo-kit
INSTALL_FROM = "repository"  # "repository" (tag, then index) | "index" (after a release: docs/releasing.md)


def release_tag() -> str:
    """The tag of the version in pyproject.toml (``v0.1.0``): what the install cell installs from."""
    import tomllib

    return "v" + tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def install_cell(extras_line: str, header: str) -> str:
    """The install cell's source: plain Python (``pip`` in a subprocess of the kernel's interpreter), so the
    same text runs in Colab, Jupyter and ``python -c`` (the clean-venv test)."""
    tag = release_tag()
    if INSTALL_FROM == "repository":
        sources = (
            f'_grpo_kit_repo = os.environ.get("{REPO_ENV}", "{REPOSITORY_URL}")\n'
            f'_grpo_kit_sources = [f"grpo-kit[{{_grpo_kit_extras}}] @ git+{{_grpo_kit_repo}}@{tag}", '
            f'f"grpo-kit[{{_grpo_kit_extras}}]"]\n'
        )
        where = f"{{_grpo_kit_repo}}@{tag} nor from the package index"
    else:
        sources = '_grpo_kit_sources = [f"grpo-kit[{_grpo_kit_extras}]"]\n'
        where = "the package index"
    return (
        header
        + "import os\nimport shutil\nimport subprocess\nimport sys\n\n"
        + extras_line
        + sources
        + f'if os.environ.get("{SKIP_INSTALL_ENV}") != "1":\n'
        + "    for _grpo_kit_spec in _grpo_kit_sources:\n"
        + '        _pip = [sys.executable, "-m", "pip", "install", "-q", _grpo_kit_spec]\n'
        + "        if subprocess.run(_pip, capture_output=True, text=True).returncode == 0:\n"
        + '            print(f"installed {_grpo_kit_spec}")\n'
        + "            break\n"
        + "    else:\n"
        + "        raise SystemExit(\n"
        + f'            f"grpo-kit could not be installed from {where}: check that this runtime is online "\n'
        + f"            f\"(and has git), or run `pip install 'grpo-kit[{{_grpo_kit_extras}}] @ git+{REPOSITORY_URL}'` \"\n"
        + '            "yourself and rerun this cell."\n'
        + "        )\n"
    )


_HEADER = (
    "# Colab / Jupyter: install grpo-kit with the lessons' extras first (then run the cells top to bottom).\n"
    "# marimo and molab install it from the lesson's script header (PEP 723) instead.\n"
)
INSTALL_PLAIN = install_cell('_grpo_kit_extras = "notebooks"\n', _HEADER)
INSTALL_GPU_AWARE = install_cell(
    '_grpo_kit_extras = "notebooks,unsloth" if shutil.which("nvidia-smi") else "notebooks"\n',
    _HEADER
    + "# On a GPU runtime the `unsloth` extra (Unsloth, vLLM, bitsandbytes) is added for the fast path.\n",
)
# Lessons whose GPU version runs the Unsloth path.
GPU_AWARE_LESSONS = {"06_practicum_gsm8k_unsloth.py"}


def lesson_files() -> list[Path]:
    """The lessons, in course order (their names start with the lesson number)."""
    return sorted(p for p in LESSONS_DIR.glob("[0-9][0-9]_*.py"))


def install_source(lesson: Path) -> str:
    return INSTALL_GPU_AWARE if lesson.name in GPU_AWARE_LESSONS else INSTALL_PLAIN


def export_one(lesson: Path) -> str:
    """The .ipynb text for one lesson (marimo's export plus the install cell)."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / (lesson.stem + ".ipynb")
        subprocess.run(
            [sys.executable, "-m", "marimo", "export", "ipynb", str(lesson), "-o", str(raw), "-f"],
            check=True,
            capture_output=True,
            text=True,
        )
        notebook = nbformat.read(raw, as_version=4)
    install = nbformat.v4.new_code_cell(install_source(lesson))
    install.id = "grpo-kit-install"  # fixed id: deterministic output
    install.metadata = {"grpo_kit": {"install_cell": True}}
    notebook.cells.insert(0, install)
    nbformat.validate(notebook)
    return nbformat.writes(notebook) + "\n"


def export_path(lesson: Path) -> Path:
    return EXPORT_DIR / (lesson.stem + ".ipynb")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 on drift")
    args = parser.parse_args(argv)

    lessons = lesson_files()
    if not lessons:
        print(f"no lessons found in {LESSONS_DIR}", file=sys.stderr)
        return 1
    EXPORT_DIR.mkdir(parents=True, exist_ok=True)
    drifted: list[str] = []
    for lesson in lessons:
        text = export_one(lesson)
        target = export_path(lesson)
        if args.check:
            if not target.exists() or target.read_text() != text:
                drifted.append(str(target.relative_to(ROOT)))
        else:
            target.write_text(text)
            print(f"wrote {target.relative_to(ROOT)}")
    expected = {export_path(lesson).name for lesson in lessons}
    stale = sorted(p for p in EXPORT_DIR.glob("*.ipynb") if p.name not in expected)
    if args.check:
        drifted += [f"{p.relative_to(ROOT)} (no lesson of that name)" for p in stale]
        if drifted:
            print("exports out of date (run `make notebooks`):\n  " + "\n  ".join(drifted), file=sys.stderr)
            return 1
        print(f"{len(lessons)} exports up to date")
    else:
        for path in stale:
            path.unlink()
            print(f"removed {path.relative_to(ROOT)} (no lesson of that name)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
