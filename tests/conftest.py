"""Shared test configuration: GPU tests skip without CUDA; Ctrl-C reaches the runs the tests start."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import sys
import tempfile
import threading

import pytest

# Under `pytest -n N` every worker is its own process: let each use one thread, or N workers × the
# default thread count oversubscribe the cores (measured: a tiny GRPO step went from 0.7 s to 15 s).
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)


# A test run started in the background of a non-interactive shell (`make test &`, `bash -c "... &"`) inherits
# SIGINT ignored (POSIX), and so does every `grpo-kit train` it starts: the Ctrl-C tests (test_cli,
# test_runs_endings) would then watch a run finish instead of stopping. Give this process, and through exec its
# children, the default Ctrl-C again; pytest's own Ctrl-C handling is unchanged.
if (
    threading.current_thread() is threading.main_thread()
    and signal.getsignal(signal.SIGINT) is signal.SIG_IGN
):
    signal.signal(signal.SIGINT, signal.default_int_handler)


# Every temporary file the tests make, their subprocesses' included (a lesson's run folder, a marimo server's,
# a Jupyter kernel's, a lesson cell run at collection), goes under one folder per pytest process, removed when it
# ends, and each test's own under a subfolder removed when the test ends. Left to /tmp they filled the disk: one
# run of the suite left ~8 GB of lesson folders there, and doctor's disk check then warned. (A failing test's
# tmp_path is still kept: pyproject's tmp_path_retention_policy.)
_SESSION_TMP: str | None = None


def pytest_unconfigure(config):
    if _SESSION_TMP:
        shutil.rmtree(_SESSION_TMP, ignore_errors=True)


@pytest.fixture(autouse=True)
def _temporary_files_removed_with_the_test(monkeypatch):
    folder = tempfile.mkdtemp(dir=_SESSION_TMP)
    monkeypatch.setenv("TMPDIR", folder)
    monkeypatch.setattr(tempfile, "tempdir", None)
    yield
    shutil.rmtree(folder, ignore_errors=True)


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def _allowed_seconds(item) -> float:
    marker = item.get_closest_marker("timeout")
    return float(marker.args[0]) if marker and marker.args else 0.0


def pytest_collection_modifyitems(config, items):
    # The tests that declare a long timeout (the lessons run end to end, the wheel and install checks: up to
    # 5 minutes each) start first. pytest-xdist hands each worker its next test as it finishes one; a 5-minute
    # lesson handed out last leaves the other worker idle for its length. (The xdist_group units go before all
    # of these anyway: --dist loadgroup orders units by their number of tests.)
    items.sort(key=lambda item: -_allowed_seconds(item))  # stable: the rest keep their collected order
    gpu_items = [item for item in items if "gpu" in item.keywords]
    # Only GPU tests need the (slow) torch import to decide whether to skip them.
    if not gpu_items or _cuda_available():
        return
    for item in gpu_items:  # @pytest.mark.gpu(reason="...") names what needs the GPU
        why = item.get_closest_marker("gpu").kwargs.get("reason", "needs CUDA")
        item.add_marker(pytest.mark.skip(reason=f"{why} (run scripts/gpu_smoke.sh on a GPU machine)"))


def pytest_configure(config):
    """``make test`` runs ``--dist loadgroup`` so that the tests marked ``xdist_group`` (the browser, the CLI runs,
    the exports) share one worker. Under pytest 9.2 pytest-xdist 3.8 no longer tags them ("--dist=loadgroup silently
    stops grouping", pytest-xdist issue 1386): both workers would open browsers side by side and the lessons' timings
    would measure each other. Refused here rather than left silent."""
    from packaging.version import Version

    if getattr(config.option, "dist", None) == "loadgroup" and Version(pytest.__version__) >= Version("9.2"):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} breaks --dist loadgroup (pytest-xdist issue 1386); install the pinned "
            "one: pip install -c constraints.txt -e '.[dev]'"
        )
    global _SESSION_TMP
    # pytest's own folders (tmp_path, kept for failing tests) stay where they were, outside the one removed.
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
    _SESSION_TMP = tempfile.mkdtemp(prefix="grpo-kit-tests-")
    os.environ["TMPDIR"] = _SESSION_TMP
    tempfile.tempdir = None  # tempfile caches the folder it chose first


@pytest.fixture(autouse=True)
def _unsloth_stays_out_of_the_worker():
    """``import unsloth`` patches TRL's GRPOConfig/GRPOTrainer for the rest of the process: a test that imports it
    in the worker changes what every later TRL test of that worker runs (and the TRL path then refuses to run).
    Such a test runs unsloth in a subprocess; one that does not fails here, named."""
    already = "unsloth" in sys.modules
    yield
    if not already and "unsloth" in sys.modules:
        pytest.fail("this test imported unsloth in the pytest worker: run that part in a subprocess")


@pytest.fixture(scope="session")
def tiny():
    """A randomly initialised 2-layer Llama + the SmolLM2 tokenizer, built once per test session.

    Tests that train it must deepcopy the model first (``copy.deepcopy(tiny[0])``) so other tests
    see the same initial weights; ``grpo_kit.models.tiny_model(seed)`` gives a fresh one (< 1 s).
    """
    from grpo_kit.models import tiny_model

    return tiny_model(seed=0)


def pytest_terminal_summary(terminalreporter):
    """The browser tests' time to a clickable page, per lesson (tests/browser: opened until everything that runs
    on open had run), measured on whatever load the suite puts beside them."""
    times: dict[str, float] = {}
    for report in terminalreporter.stats.get("passed", []):
        for name, value in getattr(report, "user_properties", []):
            if name.startswith("clickable_s/"):
                times[name.split("/", 1)[1]] = max(value, times.get(name.split("/", 1)[1], 0.0))
    if times:
        terminalreporter.write_sep("-", "time to a clickable page (marimo run, headless Chromium)")
        for lesson, seconds in sorted(times.items()):
            terminalreporter.write_line(f"{lesson}: {seconds:.1f} s")
