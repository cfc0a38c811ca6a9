"""What a run folder needs beyond its files: one run at a time, and files that honour the umask.

* :func:`lock_run_folder` takes an exclusive ``fcntl.flock`` on ``<run folder>/.grpo-kit.lock`` for the whole
  run (released when the process ends, however it ends: the kernel drops the lock with the file
  descriptor). The file holds the holder's PID, so a second ``grpo-kit train`` into the same folder is
  refused with :class:`RunFolderInUse` naming it, instead of interleaving ``metrics.jsonl``.
  :func:`check_not_in_use` is the same test without keeping the lock (plan time, before a model loads).
* :func:`read_run_json` reads a run folder's ``run.json`` (which may come from someone else) and checks what
  others read from it (``recipe`` and ``model`` names, ``training`` a table) before anything acts on it:
  :class:`RunJsonError` (a ``ValueError``) names the file, the field and the fix.
* :func:`make_shareable` gives a file written through ``tempfile.mkstemp`` (always 0600) the mode an ordinary
  ``open()`` would have given it (0666 minus the umask), so a teammate can read ``run.json`` like
  ``run_config.json``.

Simplification: ``flock`` locks are advisory and local; on network filesystems that do not forward them
(some NFS setups) two hosts can still share a folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "LOCK_FILE",
    "RunFolderInUse",
    "RunJsonError",
    "check_not_in_use",
    "lock_run_folder",
    "make_shareable",
    "read_run_json",
]

LOCK_FILE = ".grpo-kit.lock"


class RunFolderInUse(RuntimeError):
    """Another process is running in this run folder; the message names its PID."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_shareable(path: str | os.PathLike, *, directory: bool = False) -> None:
    """Set ``path``'s mode to what ``open()``/``mkdir()`` would have made (0666/0777 minus the umask)."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def _holder(lock_path: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(lock_path.read_text().strip() or "0")
        if pid > 0:
            return f"PID {pid}"
    return "another process"


def _refused(folder: Path, lock_path: Path) -> RunFolderInUse:
    return RunFolderInUse(
        f"{folder} is in use by another grpo-kit run ({_holder(lock_path)}); two runs in one folder would "
        "interleave their metrics and checkpoints. Wait for it to finish (or stop it), or train into "
        "another --output-dir."
    )


def _try_lock(folder: Path, *, create: bool = True) -> int | None:
    """An open, locked descriptor of the folder's lock file, or :class:`RunFolderInUse`; None when
    ``create`` is False and there is no lock file."""
    lock_path = folder / LOCK_FILE
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | (os.O_CREAT if create else 0), 0o666)
        except FileNotFoundError:
            if create:
                raise
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _refused(folder, lock_path) from None
        try:  # the holder may have removed the file between our open and our lock: lock the current one
            same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def check_not_in_use(folder: str | os.PathLike) -> None:
    """Raise :class:`RunFolderInUse` when a run holds ``folder``'s lock; a missing folder is not in use."""
    fd = _try_lock(Path(folder), create=False)
    if fd is not None:
        os.close(fd)


@contextlib.contextmanager
def lock_run_folder(folder: str | os.PathLike) -> Iterator[Path]:
    """Hold ``folder``'s exclusive lock while inside (the folder is created if needed); the lock file is
    removed on the way out."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd = _try_lock(folder)
    lock_path = folder / LOCK_FILE
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield folder
    finally:
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_ino == os.stat(lock_path).st_ino:
                lock_path.unlink()  # still locked: nobody can take the old file's lock after this
        os.close(fd)


class RunJsonError(ValueError):
    """A ``run.json`` that grpo-kit cannot have written: not JSON, or a field of the wrong type."""


#: The fields of run.json that other commands act on, and the type each must have.
_RUN_JSON_FIELDS = {"recipe": str, "model": str, "loop": str, "training": dict}
_RUN_JSON_MAX_BYTES = 16 << 20  # a run.json is a few kB; a huge one is not ours


def read_run_json(path: str | os.PathLike) -> dict[str, Any]:
    """The content of ``path`` (a ``run.json``), checked: a JSON object whose ``recipe``/``model``/``loop`` are
    strings and ``training`` an object. The values inside ``training`` are checked where they are used, by the
    same rules as command-line input (``grpo_kit.run.to_loop_config``)."""
    path = Path(path)
    fix = "pass --recipe NAME (and --base MODEL) instead, or restore the run.json `grpo-kit train` wrote"
    try:
        if path.stat().st_size > _RUN_JSON_MAX_BYTES:
            raise RunJsonError(
                f"{path} is {path.stat().st_size} bytes, not a run.json grpo-kit wrote; {fix}."
            )
        info = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RunJsonError(f"{path} is not JSON ({error}); {fix}.") from None
    except RecursionError:
        raise RunJsonError(f"{path} nests too deeply to be a run.json; {fix}.") from None
    if not isinstance(info, dict):
        raise RunJsonError(f"{path} holds a JSON {type(info).__name__}, not an object; {fix}.")
    for name, kind in _RUN_JSON_FIELDS.items():
        if name in info and not isinstance(info[name], kind):
            raise RunJsonError(
                f"{path}: {name!r} is {type(info[name]).__name__} {json.dumps(info[name])[:60]}, not a "
                f"{'name' if kind is str else 'table of settings'}; {fix}."
            )
    return info
