"""The grpo-kit cache (``$GRPO_KIT_CACHE`` or ``~/.cache/grpo-kit``) and safe, shared writes into it.

Converted models live here. Parallel test workers (and notebooks) may convert the same file at
the same moment: a file lock makes the second wait for the first, and every entry is written to
a temporary directory and renamed into place, so a half-written entry is never seen.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

# Every cached conversion carries this version; bump it when the conversion changes.
CONVERSION_VERSION = "1"


def cache_dir() -> Path:
    """Where grpo-kit caches converted models: ``$GRPO_KIT_CACHE`` or ``~/.cache/grpo-kit``."""
    root = os.environ.get("GRPO_KIT_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "grpo-kit")
    return Path(root)


def conversion_dir(source: Path, kind: str) -> Path:
    """The cache entry for ``source`` (a file) converted as ``kind``; keyed by path, size and mtime."""
    stat = source.stat()
    key = f"{source.resolve()}|{stat.st_size}|{int(stat.st_mtime)}|{CONVERSION_VERSION}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return cache_dir() / kind / f"{source.stem}-{digest}"


def atomic_build(target: Path, build: Callable[[Path], None]) -> Path:
    """Create directory ``target`` with ``build(tmp_dir)`` exactly once, safe across processes."""
    from filelock import FileLock

    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if target.is_dir():  # another process finished it while we waited
            return target
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
        try:
            tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared like the HF cache
            build(tmp)
            os.replace(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def cached_hub_snapshot(repo_id: str) -> Path | None:
    """The local HF-cache snapshot of ``repo_id`` if it holds a config and weights, else None (no network)."""
    from huggingface_hub import snapshot_download

    try:
        path = Path(snapshot_download(repo_id, local_files_only=True))
    except (OSError, ValueError):  # not cached (LocalEntryNotFoundError is an OSError) or a broken entry
        return None
    has_weights = any(path.glob("*.safetensors")) or any(path.glob("*.bin"))
    return path if (path / "config.json").is_file() and has_weights else None
