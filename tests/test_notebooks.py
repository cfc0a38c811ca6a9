"""The marimo lessons as CI sees them.

* each lesson runs top to bottom as a script (``python notebooks/<lesson>.py``), offline, on CPU,
  with its run buttons passed through (grpo_kit.teaching.lesson_helpers.should_run) — the ``test_*`` cells
  execute as ordinary cells there, so a failed claim fails the run;
* ``marimo check --strict`` is clean;
* the Colab exports in notebooks/ipynb/ match the lessons (``make notebooks`` regenerates them), and those of
  lessons 1-3 and 5 (``JUPYTER_RUNS`` says why not all nine) run top to bottom in a Jupyter kernel
  (nbclient + ipykernel), offline, CPU settings, the install cell skipped through GRPO_KIT_SKIP_INSTALL=1
  (the cell honours it).

pytest also collects the lessons' own ``test_*`` cells directly (pyproject's ``testpaths`` and
``python_files`` include ``notebooks/``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["GRPO_KIT_LESSON_SIZE"] = "ci"  # heavy lessons (6) run their few-step CI size
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", MPLBACKEND="Agg", TOKENIZERS_PARALLELISM="false")
    if "PYTEST_XDIST_WORKER" in env:
        # pytest -n 2 on 2 cores: one torch thread per lesson, or OpenMP oversubscription slows training ~10x.
        env["OMP_NUM_THREADS"] = "1"
    # The script must not inherit pytest's markers: marimo changes behaviour under PYTEST_* variables.
    for name in [k for k in env if k.startswith("PYTEST_")]:
        env.pop(name)
    return env


def test_lessons_exist():
    numbers = [p.name[:2] for p in LESSONS]
    assert numbers == [f"{i:02d}" for i in range(1, len(LESSONS) + 1)], numbers
    assert len(LESSONS) == 10, [p.name for p in LESSONS]


# Lessons 6 and 8 at CI size take 6-10 minutes on 2 busy cores (one thread each under xdist).
@pytest.mark.timeout(900)
@pytest.mark.parametrize("lesson", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_runs_as_a_script(lesson: Path, tmp_path: Path):
    # cwd=tmp_path: whatever a lesson saves (outputs/…) lands in a throwaway folder.
    proc = subprocess.run(
        [sys.executable, str(lesson)],
        check=False,
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=870,
    )
    assert proc.returncode == 0, f"{lesson.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"


@pytest.mark.skipif(
    importlib.util.find_spec("unsloth") is None,
    reason="unsloth is not installed (make unsloth-cpu installs its CPU backend): lesson 6 takes its TRL branch",
)
def test_lesson6_at_ci_size_takes_the_unsloth_branch_where_unsloth_is_installed(monkeypatch):
    """Lesson 6's choice of branch, run alone (its ``choose_branch`` cell and the cells it needs), as CI's run of
    the lesson makes it: where unsloth is installed, the CI size trains through Unsloth (its CPU backend without a
    GPU), not TRL. That the lesson then trained through it, the lesson's own test cell checks on the model."""
    from grpo_kit.teaching.lesson_helpers import on_gpu

    monkeypatch.setenv("GRPO_KIT_LESSON_SIZE", "ci")
    spec = importlib.util.spec_from_file_location(
        "lesson6", ROOT / "notebooks" / "06_practicum_gsm8k_unsloth.py"
    )
    lesson = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lesson)
    _, defs = lesson.choose_branch.run()
    expected = ("unsloth-gpu", "gsm8k-unsloth") if on_gpu() else ("unsloth-cpu", "gsm8k-unsloth-cpu-smoke")
    assert (defs["branch"], defs["recipe"].name) == expected
    assert defs["use_unsloth"] and defs["use_vllm"] == on_gpu()
    if not on_gpu():
        assert defs["train_steps"] == 2  # the CI size (a GPU runs the course's settings)


def test_marimo_check_is_clean():
    proc = subprocess.run(
        [sys.executable, "-m", "marimo", "check", "--strict", *map(str, LESSONS)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_colab_exports_match_the_lessons():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "export_notebooks.py"), "--check"],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


EXPORTS = sorted((ROOT / "notebooks" / "ipynb").glob("[0-9][0-9]_*.ipynb"))
# Which exports run top to bottom in Jupyter. An export is its lesson's cells in topological order with its
# test_* cells dropped, so running a training lesson's export repeats the training its script run already did
# (and checks less: no claims). What Jupyter adds is the plumbing outside marimo (the UI elements' values,
# lesson_helpers' pass-through, images reaching the kernel's outputs): the three lessons that do not train and
# lesson 5, one that trains (the tiny model, its Train button passed through), cover it. The other training
# lessons' exports are held equal to their lessons by test_colab_exports_match_the_lessons, and the lessons run
# whole as scripts above. Running all nine cost about 10 minutes of CI on 2 cores (#41's cut).
JUPYTER_RUNS = [e for e in EXPORTS if e.stem[:2] in ("01", "02", "03", "05")]


def test_every_lesson_has_an_export_and_a_training_lesson_runs_in_jupyter():
    assert [e.stem for e in EXPORTS] == [lesson.stem for lesson in LESSONS]
    assert "05_loop_without_black_box" in [e.stem for e in JUPYTER_RUNS]  # it trains (notebooks/conftest.py)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("export", JUPYTER_RUNS, ids=[p.stem for p in JUPYTER_RUNS])
def test_export_runs_in_jupyter(export: Path, tmp_path: Path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    # The kernel inherits this process's environment: offline, one thread under xdist, grpo-kit importable,
    # and the install cell told to skip (it would reach PyPI).
    for name, value in {**_env(), "GRPO_KIT_SKIP_INSTALL": "1", "PYTHONPATH": str(ROOT)}.items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.read(export, as_version=4)
    client = NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError naming the cell and its traceback
    # the cell prints "installed …" after an install: a silent cell is a skipped install.
    assert notebook.cells[0].outputs == [], notebook.cells[0].outputs
    assert all(c.get("execution_count") for c in notebook.cells if c.cell_type == "code")
    images = [o for c in notebook.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    if export.stem.startswith("01_"):  # lesson 1's three plots reach Jupyter as images (lesson_helpers.stack)
        assert len(images) >= 3, f"{len(images)} image outputs"


def test_exports_start_with_an_install_cell():
    import nbformat

    for lesson in LESSONS:
        notebook = nbformat.read(ROOT / "notebooks" / "ipynb" / f"{lesson.stem}.ipynb", as_version=4)
        first = notebook.cells[0]
        assert (
            first.cell_type == "code" and '"pip", "install"' in first.source and "grpo-kit[" in first.source
        )
        # the repository the README's molab links assume, at the release tag (no release on the index yet)
        assert (
            "git+{_grpo_kit_repo}@v" in first.source
            and "https://github.com/grpo-kit/grpo-kit" in first.source
        )
        assert 'os.environ.get("GRPO_KIT_SKIP_INSTALL") != "1"' in first.source
        # the rest is the lesson itself, importing the library rather than redefining it
        assert any("import marimo as mo" in c.source for c in notebook.cells[1:])


def test_lesson_helpers_pass_through_outside_marimo():
    from grpo_kit.loop.training import LoopState
    from grpo_kit.teaching.lesson_helpers import LiveRewardCurve, cli_args, interactive, should_run

    # pytest is not a marimo session: nobody can press a button, and mo.cli_args() would raise.
    assert not interactive()
    assert should_run(object()) is True
    assert cli_args() == {}

    curve = LiveRewardCurve("test")
    state = LoopState(global_step=1, log_history=[{"step": 1, "reward": 0.5, "reward_std": 0.1}])
    curve(state, {"step": 1, "loss": 0.0})  # the loop's callback: the step's logged record is picked up
    state.global_step = 2  # a step that was not a logging step adds nothing
    curve(state, {"step": 2, "loss": 0.0})
    curve.add({"step": 3, "train_runtime": 1.0})  # TRL's summary record has no reward: skipped
    assert [r["step"] for r in curve.records] == [1]
    assert len(curve.figure().axes) == 1


def test_every_slider_shows_its_value():
    """A slider a learner drags must say where it is: every ``mo.ui.slider(...)`` in a lesson passes
    ``show_value=True``."""
    import ast

    hidden = []
    for lesson in LESSONS:
        for node in ast.walk(ast.parse(lesson.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "mo.ui.slider":
                shown = {k.arg: k.value for k in node.keywords}.get("show_value")
                if not (isinstance(shown, ast.Constant) and shown.value is True):
                    hidden.append(f"{lesson.name}:{node.lineno}")
    assert not hidden, f"sliders without show_value=True: {hidden}"


def test_marimo_edit_runs_the_lessons_on_open():
    """marimo reads the project's pyproject.toml for each lesson: auto_instantiate is on, so a learner who
    opens a lesson in ``marimo edit`` sees it run instead of a page of unrun cells."""
    from marimo._config.manager import PyprojectConfigReader

    for lesson in LESSONS:
        assert PyprojectConfigReader(str(lesson)).read()["runtime"]["auto_instantiate"] is True, lesson.name
