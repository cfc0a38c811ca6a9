"""The folder an export writes into: never mixed with someone else's files, and read back file by file.

A model folder is read by name: ``from_pretrained`` prefers a ``model.safetensors.index.json`` when there is
one, so a stale index left in the folder by another model silently wins over the fresh ``model.safetensors``.
Hence:

* a non-empty folder that grpo-kit did not write is refused unless ``overwrite=True``, which empties it first;
* a folder holding exactly a previous grpo-kit export (its manifest lists every file) is replaced;
* every export writes ``grpo_kit_export.json``, listing each file with its size and sha256, and
  :func:`check_export_files` compares the folder with it: a missing, changed or extra file fails verification;
* an export is written into ``.<name>.partial`` beside the folder and renamed into place when complete
  (:func:`staged_export`), so a killed export never leaves a folder that looks like a model (``merged/``
  with only ``config.json``); files get the umask's mode (safetensors writes 0600).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grpo_kit.support.paths import check_output_dir

MANIFEST = "grpo_kit_export.json"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _files(folder: Path) -> list[str]:
    """Every file below ``folder`` (relative POSIX paths), the manifest excepted."""
    return sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if (p.is_file() or p.is_symlink()) and p.name != MANIFEST
    )


def _read_manifest(folder: Path) -> dict[str, Any] | None:
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("files"), dict) else None


def _refuse_to_empty(folder: Path) -> None:
    """Never empty the home folder, a filesystem root, or the current folder or one of its parents."""
    resolved = folder.resolve()
    cwd = Path.cwd().resolve()
    if resolved == Path.home().resolve() or resolved.parent == resolved or cwd.is_relative_to(resolved):
        raise ValueError(
            f"refusing to empty {folder} (it is your home, a filesystem root, or holds the current "
            "folder); export into a new sub-folder instead."
        )


def _empty(folder: Path) -> None:
    for child in folder.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()


def prepare_export_dir(out_dir: str | os.PathLike, *, overwrite: bool = False) -> Path:
    """An empty folder to export into (created if needed); see the module docstring for what is refused."""
    out = check_output_dir(out_dir)
    if out.is_dir() and any(out.iterdir()):
        manifest = _read_manifest(out)
        foreign = sorted(set(_files(out)) - set(manifest["files"] if manifest else ()))
        if foreign and not overwrite:
            raise FileExistsError(
                f"{out} already holds files that grpo-kit did not export (e.g. {foreign[:3]}); exporting "
                "there would mix them with the new model. Choose another folder, or pass overwrite=True "
                "(CLI: --overwrite) to empty it first."
            )
        _refuse_to_empty(out)
        _empty(out)
    out.mkdir(parents=True, exist_ok=True)
    return out


@contextlib.contextmanager
def staged_export(out: Path) -> Iterator[Path]:
    """Yield an empty staging folder beside ``out`` (from :func:`prepare_export_dir`); on success it is
    renamed to ``out``, on any failure or interruption it is removed and ``out`` stays empty."""
    from grpo_kit.support.paths import make_shareable

    out = Path(out)
    stage = out.with_name(f".{out.name}.partial")
    shutil.rmtree(stage, ignore_errors=True)  # a leftover of an export that was killed
    stage.mkdir(parents=True)
    try:
        yield stage
        for path in stage.rglob("*"):
            if not path.is_symlink():
                make_shareable(path, directory=path.is_dir())
        make_shareable(stage, directory=True)
        if out.is_dir():
            out.rmdir()  # emptied by prepare_export_dir
        os.replace(stage, out)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def write_manifest(out: Path, kind: str) -> dict[str, Any]:
    """Record every file the export wrote (size, sha256) in ``grpo_kit_export.json``; return the manifest."""
    files = {
        name: {"size": (out / name).stat().st_size, "sha256": _sha256(out / name)} for name in _files(out)
    }
    manifest = {"kind": kind, "files": files}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return manifest


def check_export_files(out_dir: str | os.PathLike) -> list[str]:
    """Problems with an export folder compared with its manifest (empty list: exactly the files written)."""
    out = Path(out_dir)
    manifest = _read_manifest(out)
    if manifest is None:
        return [f"{out / MANIFEST} is missing or unreadable"]
    problems = []
    present = set(_files(out))
    for name, info in sorted(manifest["files"].items()):
        if name not in present:
            problems.append(f"{name}: missing")
        elif (out / name).stat().st_size != info.get("size") or _sha256(out / name) != info.get("sha256"):
            problems.append(f"{name}: changed since the export")
    problems += [f"{name}: not written by this export" for name in sorted(present - set(manifest["files"]))]
    return problems
