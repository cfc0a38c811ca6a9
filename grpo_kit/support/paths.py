"""Folders and files the project writes: checks on folders the user names (before any model loads or any
folder is created), and files written whole with the mode ``open()`` would give them.

* :func:`check_output_dir` -- a run or export folder is writable and not a file, before loading.
* :func:`write_atomic` -- a file written through a temporary one and renamed: Ctrl-C leaves the old file.
* :func:`make_shareable` -- a file written through ``tempfile.mkstemp`` (always 0600) gets the mode an
  ordinary ``open()`` would have given it (0666 minus the umask), so a teammate can read it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["check_output_dir", "make_shareable", "write_atomic"]


def check_output_dir(path: str | os.PathLike) -> Path:
    """Check that ``path`` can be an output folder: not a file, and writable; return it as a ``Path``.

    Nothing is created: a missing folder is fine when its nearest existing parent is a writable folder (so a
    run that fails its checks leaves no empty folder behind). Writability is probed by creating and removing a
    temporary file, because permission bits lie (root ignores them; a read-only mount ignores them the other
    way). A symbolic link to nothing is refused too (creating the folder would fail on it later). Raises
    ``NotADirectoryError`` or ``PermissionError`` with the fix.
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise TypeError(f"the output folder must be a non-empty string or path; got {path!r}.")
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        raise NotADirectoryError(
            f"output folder {target} is a file; pass a folder (e.g. {target}-run) or move the file away."
        )
    existing = target
    while not existing.exists():  # the nearest existing ancestor is where the folder would be created
        if existing.is_symlink():  # a link to nothing: mkdir would fail on it after the model loaded
            raise NotADirectoryError(
                f"output folder {target}: {existing} is a symbolic link to {os.readlink(existing)}, which does "
                "not exist. Create the folder it points to, remove the link, or choose another output folder."
            )
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise NotADirectoryError(
            f"cannot create output folder {target}: {existing} is a file, not a folder. "
            "Choose another output folder."
        )
    try:
        handle, probe = tempfile.mkstemp(prefix=".grpo-kit-write-check-", dir=existing)
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        raise PermissionError(
            f"output folder {target} is not writable ({existing}: {error.strerror}). Choose a "
            "folder you can write to, or fix its permissions."
        ) from error
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def make_shareable(path: str | os.PathLike, *, directory: bool = False) -> None:
    """Set ``path``'s mode to what ``open()``/``mkdir()`` would have made (0666/0777 minus the umask)."""
    os.chmod(path, (0o777 if directory else 0o666) & ~_umask())


def write_atomic(path: str | os.PathLike, text: str | bytes) -> Path:
    """Write ``path`` through a temporary file in the same folder and ``os.replace`` it: an interrupted
    write (Ctrl-C) leaves the old file, never half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode() if isinstance(text, str) else text)
        make_shareable(tmp)  # mkstemp makes 0600; the file gets the mode open() would give it
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
