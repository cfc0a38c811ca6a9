"""scripts/install_torch.py, what `make setup` runs first: the CPU index when it answers, else the plain pin
with a one-line note. Offline: a local HTTP server stands in for download.pytorch.org, and a closed port for
an index that does not answer; the pip command is checked with --dry-run, never run."""

from __future__ import annotations

import functools
import http.server
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "install_torch.py"


def _dry_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "torch==2.13.0", *args, "-q", "-c", "constraints.txt", "--dry-run"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )


def _pip_args(done: subprocess.CompletedProcess) -> list[str]:
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("+ ")]
    return line.split()[2:]  # after "+ <python>"


@pytest.fixture
def local_index(tmp_path):
    """An index folder served on 127.0.0.1 with a torch/ page, as download.pytorch.org/whl/cpu has."""
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "index.html").write_text("<a href='torch-2.13.0+cpu.whl'>torch</a>")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the block ends: nothing listens there


def test_a_reachable_index_installs_torch_from_it(local_index):
    done = _dry_run("--index", local_index)
    args = _pip_args(done)
    assert args[:4] == ["-m", "pip", "install", "torch==2.13.0"]
    assert args[args.index("--index-url") + 1] == local_index
    assert args[args.index("--extra-index-url") + 1] == "https://pypi.org/simple"
    assert ["-c", "constraints.txt"] == args[args.index("-c") : args.index("-c") + 2]
    assert done.stderr == ""


def test_an_unreachable_index_falls_back_to_the_plain_pin_with_one_note():
    index = f"http://127.0.0.1:{_closed_port()}/whl/cpu"
    done = _dry_run("--index", index, "--timeout", "2")
    assert _pip_args(done) == ["-m", "pip", "install", "torch==2.13.0", "-q", "-c", "constraints.txt"]
    (note,) = done.stderr.strip().splitlines()
    assert note.startswith(f"note: {index} is not reachable") and "torch==2.13.0" in note


def test_an_empty_index_is_the_plain_pin_without_a_note():
    done = _dry_run("--index", "")
    assert "--index-url" not in _pip_args(done) and done.stderr == ""


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_setup_installs_torch_through_the_script_with_the_cpu_index(tmp_path):
    plan = subprocess.run(
        ["make", "-n", "-B", "setup", f"VENV={tmp_path / 'venv'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (line,) = [line for line in plan.splitlines() if "install_torch.py" in line]
    assert 'torch==2.13.0 --index "https://download.pytorch.org/whl/cpu"' in line
    gpu = subprocess.run(
        ["make", "-n", "-B", "setup", f"VENV={tmp_path / 'venv'}", "TORCH_INDEX="],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert '--index ""' in gpu
