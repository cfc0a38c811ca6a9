"""Your own data that cannot be read, through `grpo-kit train --config FILE`: every reader (a file of each
format, a folder of data files, its held-out split, a Hub id offline) given empty, missing or unreadable input
answers in one line that names the file and the fix, exit status 2, no traceback, before any model loads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group("cli")

REWARDS = "def echo_reward(completions, **kwargs):\n    return [0.0] * len(completions)\n"


def _rows(path: Path, n: int, start: int = 0) -> None:
    path.write_text(
        "".join(json.dumps({"question": f"What is {i} + 1?"}) + "\n" for i in range(start, start + n))
    )


def _empty(path: Path) -> None:
    path.write_text("")


def _folder(*files: tuple[str, object]):
    """A data folder holding ``files`` (name, writer or None for a folder of that name)."""

    def make(path: Path) -> None:
        path.mkdir()
        for name, write in files:
            (path / name).mkdir() if write is None else write(path / name)

    return make


# case: (source in the recipe file, how to make it, held_out or None, what the one line must name)
CASES = {
    "empty jsonl": ("d.jsonl", _empty, None, "d.jsonl is empty"),
    "blank jsonl": ("d.jsonl", lambda p: p.write_text("\n \n"), None, "d.jsonl is empty"),
    "empty csv": ("d.csv", _empty, None, "d.csv is empty"),
    "csv header only": ("d.csv", lambda p: p.write_text("question\n"), None, "header (question) but no rows"),
    "empty json": ("d.json", _empty, None, "d.json is empty"),
    "json empty list": ("d.json", lambda p: p.write_text("[]"), None, "d.json is empty"),
    "empty parquet": ("d.parquet", _empty, None, "d.parquet is empty"),
    "missing file": ("nope.jsonl", None, None, "no such file or folder"),
    "a folder where a file is expected": (
        "d.jsonl",
        lambda p: p.mkdir(),
        None,
        "doesn't contain any data files",
    ),
    "empty folder": ("data", lambda p: p.mkdir(), None, "doesn't contain any data files"),
    "folder with an empty train.jsonl": (
        "data",
        _folder(("train.jsonl", _empty)),
        None,
        "train.jsonl is empty",
    ),
    "folder with a blank train.jsonl": (
        "data",
        _folder(("train.jsonl", lambda p: p.write_text("\n"))),
        None,
        "train.jsonl is empty",
    ),
    "folder with an empty train.parquet": (
        "data",
        _folder(("train.parquet", _empty)),
        None,
        "train.parquet is empty",
    ),
    "folder with a malformed train.jsonl": (
        "data",
        _folder(("train.jsonl", lambda p: p.write_text("not json\n"))),
        None,
        "train.jsonl, line 1: not valid JSON",
    ),
    "folder with no train file": (
        "data",
        _folder(("test.jsonl", lambda p: _rows(p, 8))),
        None,
        "has no split 'train'; it has ['test']",
    ),
    "folder whose train.jsonl is a folder": (
        "data",
        _folder(("train.jsonl", None)),
        None,
        "doesn't contain any data files",
    ),
    "missing folder": ("data/", None, None, "no such file or folder"),
    "empty test split": (
        "data",
        _folder(("train.jsonl", lambda p: _rows(p, 8)), ("test.jsonl", _empty)),
        "{split: test}",
        "test.jsonl is empty",
    ),
    "held-out split missing": (
        "data",
        _folder(("train.jsonl", lambda p: _rows(p, 8))),
        "{split: test}",
        "has no split 'test'; it has ['train']",
    ),
    "20 rows, no held-out rows named": (
        "d.jsonl",
        lambda p: _rows(p, 20),
        None,
        "has 20 rows, too few to hold out its last 32",
    ),
    "hub id offline": ("someone/no-such-dataset", None, None, "not in the local datasets cache"),
}


def _recipe(folder: Path, source: str, held_out: str | None) -> None:
    lines = ["name: own", "model: tiny", "dataset:", f"  source: {source}", "  prompt: question"]
    lines += [f"  held_out: {held_out}"] if held_out else []
    lines += ["rewards: [my_rewards.py:echo_reward]", "training: {max_steps: 1}"]
    (folder / "own.yaml").write_text("\n".join(lines) + "\n")
    (folder / "my_rewards.py").write_text(REWARDS)


def _train(folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grpo_kit.cli", "train", "--config", "own.yaml", "--output-dir", "run"],
        check=False,
        cwd=folder,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


def _one_line_refusal(done: subprocess.CompletedProcess) -> str:
    said = done.stdout + done.stderr
    lines = [line for line in said.splitlines() if line.strip()]
    assert done.returncode == 2 and "Traceback" not in said and len(lines) == 1, said
    assert lines[0].startswith("error: "), said
    return lines[0]


# Every case in one process (importing torch once, not once a case): `grpo-kit train --config own.yaml` by the
# CLI's entry point, in the case's folder, with what it printed and its exit status; an exception escaping it
# is what Python would print as a traceback.
_DRIVER = """
import contextlib, io, json, os, sys, traceback
from grpo_kit.cli import main
said = {}
for folder in sys.argv[1:]:
    os.chdir(folder)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            status = main(["train", "--config", "own.yaml", "--output-dir", "run"])
        except BaseException:
            traceback.print_exc()
            status = None
    said[folder] = {"status": status, "output": out.getvalue()}
print(json.dumps(said))
"""


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict[str, dict]:
    folders = {}
    for index, (case, (source, make, held_out, _)) in enumerate(CASES.items()):
        folder = tmp_path_factory.mktemp(f"case{index}")
        if make is not None:
            make(folder / source)
        _recipe(folder, source, held_out)
        folders[case] = folder
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, *map(str, folders.values())],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"},
        timeout=600,
    )
    said = json.loads(done.stdout.splitlines()[-1])
    return {case: {**said[str(folder)], "folder": folder} for case, folder in folders.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_unreadable_data_is_one_line_naming_the_fix(refusals, case):
    status, said, folder = refusals[case]["status"], refusals[case]["output"], refusals[case]["folder"]
    lines = [line for line in said.splitlines() if line.strip()]
    assert status == 2 and "Traceback" not in said and len(lines) == 1, said
    assert lines[0].startswith("error: ") and CASES[case][3] in lines[0], said
    assert not (folder / "run").exists()  # refused before the run folder (and any model)


@pytest.mark.parametrize("case", ["folder with an empty train.jsonl", "hub id offline"])
def test_the_two_tracebacks_of_issue_56_are_one_line_from_the_command(tmp_path, case):
    """The command itself, in its own process: exit status 2, one line on its output, nothing on stderr."""
    source, make, held_out, named = CASES[case]
    if make is not None:
        make(tmp_path / source)
    _recipe(tmp_path, source, held_out)
    done = _train(tmp_path, {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    assert named in _one_line_refusal(done) and not done.stderr.strip()


def test_a_hub_dataset_offline_names_the_variable_that_is_set(tmp_path):
    """``HF_DATASETS_OFFLINE=1`` alone is offline too, and the line says which variable to unset."""
    _recipe(tmp_path, "someone/no-such-dataset", None)
    env = {"HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": "", "HF_DATASETS_OFFLINE": "1"}
    line = _one_line_refusal(_train(tmp_path, env))
    assert "HF_DATASETS_OFFLINE is set" in line and "unset HF_DATASETS_OFFLINE" in line, line
    assert "source=<path to a .jsonl" in line  # and what to use instead


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads a file without read permission"
)
def test_a_file_without_read_permission_is_one_line(tmp_path):
    _rows(tmp_path / "d.jsonl", 80)
    (tmp_path / "d.jsonl").chmod(0)
    _recipe(tmp_path, "d.jsonl", None)
    line = _one_line_refusal(_train(tmp_path, {"HF_HUB_OFFLINE": "1"}))
    assert "d.jsonl cannot be read" in line and "chmod a+r" in line, line
