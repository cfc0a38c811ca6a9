"""pytest settings for the lessons' own ``test_*`` cells (collected from notebooks/[0-9][0-9]_*.py).

Under ``pytest -n 2`` on a 2-core machine each worker gets one torch thread while a lesson runs:
two workers with two OpenMP threads each oversubscribe the cores, and torch's spinning barriers then
make a training step many times slower. Restored afterwards, so other tests are unaffected.

The lessons that train (4-10) are not collected here by default: their ``test_*`` cells re-run their
ancestors, training included, and ``tests/test_notebooks.py::test_lesson_runs_as_a_script`` already runs every
cell of them, the ``test_*`` cells as ordinary cells whose failed assert fails the run. Collecting them too ran
each training a second time (about 14 minutes of CI on 2 cores). ``GRPO_KIT_LESSON_CELLS=all`` collects them
as well (``pytest notebooks/04_practicum_smollm2_trl.py`` for one lesson's claims with pytest's report).

The lessons' heavy runs take their CI size here (``GRPO_KIT_LESSON_SIZE=ci``, as tests/test_notebooks.py and the
browser tests set for the lessons they start): lesson 6 would otherwise train its full 40 steps.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TRAINING_LESSONS = ("04", "05", "06", "07", "08", "09", "10")
collect_ignore = (
    []
    if os.environ.get("GRPO_KIT_LESSON_CELLS") == "all"
    else [p.name for p in Path(__file__).parent.glob("[0-9][0-9]_*.py") if p.name[:2] in TRAINING_LESSONS]
)


@pytest.fixture(autouse=True)
def _lessons_at_ci_size(monkeypatch):
    monkeypatch.setenv("GRPO_KIT_LESSON_SIZE", "ci")


@pytest.fixture(autouse=True)
def _one_torch_thread_per_xdist_worker():
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
