"""Fuzz every reward function (≥ 1,000 hypothesis examples each) in the main thread, in a worker
thread and in a subprocess: no exception, no hang, one finite float or None per completion.

The cases live in reward_fuzz_cases.py so that the subprocess runs exactly the same code.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import reward_fuzz_cases

HERE = Path(__file__).resolve().parent


def test_fuzz_in_main_thread():
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover - runner detail
        raise AssertionError("this test must run in the main thread to mean what it says")
    reward_fuzz_cases.fuzz_all()


def test_fuzz_in_worker_thread():
    errors: list[BaseException] = []

    def target():
        try:
            reward_fuzz_cases.fuzz_all()
        except BaseException as error:  # noqa: BLE001 - re-raised below in the test's thread
            errors.append(error)

    thread = threading.Thread(target=target, name="reward-fuzz-worker")
    thread.start()
    thread.join(timeout=600)
    assert not thread.is_alive(), "the fuzz hung in a worker thread"
    if errors:
        raise errors[0]


def test_fuzz_in_subprocess():
    result = subprocess.run(
        [sys.executable, str(HERE / "reward_fuzz_cases.py")],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=HERE,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "fuzz ok" in result.stderr
