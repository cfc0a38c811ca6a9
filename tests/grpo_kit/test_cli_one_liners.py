"""The one-liners of issue 24 (findings 1, 9, 10): each bad input is refused before the model loads, with
one line that names the setting and the fix, and exit status 2."""

from __future__ import annotations

import json
import os

import pytest

from grpo_kit.cli import main


def _one_line(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--set", "adam_epsilon=0"], "adam_epsilon=0 is out of range: it must be a finite number > 0"),
        (["--set", "learning_rate=Infinity"], "learning_rate=inf is out of range"),
        (["--set", "learning_rate=abc"], "learning_rate='abc' is not a number"),
        (["--set", "seed=2**70"], "seed='2**70': the seed must be an int from 0 to 4294967295"),
        (["--set", f"seed={2**70}"], "the seed must be an int from 0 to 4294967295"),
        (["--set", "dataset_size=0"], "dataset_size=0 must be an int >= 1"),
        (["--samples", "-3"], "--samples must be >= 0"),
        (["--loop", "trl", "--set", "adam_epsilon=0"], "adam_epsilon=0 is out of range"),
    ],
)
def test_bad_numbers_name_the_setting_and_the_fix(argv, named, tmp_path, capsys):
    code = main(["train", "--set", "model=tiny", "--output-dir", str(tmp_path / "run"), *argv])
    assert code == 2
    assert named in _one_line(capsys)
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_overwrite_of_the_folder_you_are_in_is_refused(tmp_path, capsys, monkeypatch):
    (tmp_path / "run_config.json").write_text(json.dumps({"config": {}, "sha256": ""}))
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--set", "model=tiny", "--output-dir", ".", "--overwrite"]) == 2
    out = _one_line(capsys)
    assert "the folder you are in" in out and "has an empty name" not in out
    assert (tmp_path / "run_config.json").is_file()


def test_a_dangling_symlink_output_dir_is_refused_before_loading(tmp_path, capsys):
    link = tmp_path / "run"
    os.symlink(tmp_path / "nowhere", link)
    assert main(["train", "--set", "model=tiny", "--output-dir", str(link)]) == 2
    out = _one_line(capsys)
    assert "symbolic link" in out and "does not exist" in out
