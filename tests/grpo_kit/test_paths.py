"""check_output_dir: a file or an unwritable place is refused before anything is created; write_atomic: an
interrupted write leaves the old file."""

from __future__ import annotations

import os

import pytest

from grpo_kit.support.paths import check_output_dir, write_atomic


def test_new_and_existing_folders_pass_and_nothing_is_created(tmp_path):
    target = tmp_path / "runs" / "one"
    assert check_output_dir(target) == target
    assert not (tmp_path / "runs").exists()  # a failed run leaves no empty folder behind
    assert check_output_dir(str(tmp_path)) == tmp_path
    assert list(tmp_path.iterdir()) == []  # the write probe is removed


def test_a_file_is_refused(tmp_path):
    (tmp_path / "run").write_text("not a folder")
    with pytest.raises(NotADirectoryError, match=r"output folder .*run is a file"):
        check_output_dir(tmp_path / "run")
    with pytest.raises(NotADirectoryError, match=r"run is a file, not a folder"):
        check_output_dir(tmp_path / "run" / "sub")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes through permission bits")
def test_read_only_folder_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(PermissionError, match=r"locked.* is not writable"):
            check_output_dir(locked / "run")
    finally:
        locked.chmod(0o755)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux procfs (read-only even for root)")
def test_unwritable_place_is_refused_even_for_root():
    with pytest.raises(PermissionError, match="is not writable"):
        check_output_dir("/proc/self/grpo-kit-run")


def test_bad_type():
    with pytest.raises(TypeError, match="non-empty string or path"):
        check_output_dir("")


def test_write_atomic_keeps_old_file_on_interrupt(tmp_path, monkeypatch):
    target = tmp_path / "eval.json"
    write_atomic(target, "old")

    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, "new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["eval.json"]
