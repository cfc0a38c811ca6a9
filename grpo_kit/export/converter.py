"""llama.cpp's tools for the GGUF export (:mod:`grpo_kit.export.gguf`): the converter and ``llama-quantize``.

The converter, ``convert_hf_to_gguf.py``, comes from a llama.cpp checkout you point to (``llama_cpp_dir=`` or
the environment variable ``LLAMA_CPP_DIR``), or else from the source archive of the pinned
``llama-cpp-python`` release on PyPI (:data:`LLAMA_CPP_PYTHON_VERSION`), which vendors llama.cpp: ``pip
download --require-hashes`` fetches it once (~75 MB, about a minute), its sha256 is checked against
:data:`LLAMA_CPP_PYTHON_SHA256` before anything is extracted (its script runs on every export, so it must be
exactly the archive we reviewed), and the converter, its ``conversion/`` package and its ``gguf-py`` are
extracted to ``<grpo-kit cache>/llama.cpp-converter/`` and reused. Extraction takes regular files only and
refuses entries with ``..``, absolute paths or links leading out of the cache. Nothing of llama.cpp is
vendored into this repository. The converter imports its bundled ``gguf-py`` (same version as the ``gguf``
wheel we pin, 0.19.0), so the two cannot drift apart.

K-quants such as q4_k_m need llama.cpp's compiled ``llama-quantize``: :func:`find_llama_quantize` looks on
``PATH`` and in ``<llama_cpp_dir>/build/bin``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

__all__ = [
    "LLAMA_CPP_PYTHON_SHA256",
    "LLAMA_CPP_PYTHON_VERSION",
    "check_sha256",
    "converter_cache_dir",
    "download_converter",
    "find_converter",
    "find_llama_quantize",
]

#: The llama-cpp-python release whose source archive provides convert_hf_to_gguf.py (llama.cpp inside).
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
#: sha256 of ``llama_cpp_python-0.3.36.tar.gz`` (the sdist on PyPI, 76 589 250 bytes); change with the version.
LLAMA_CPP_PYTHON_SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
_CONVERTER_MEMBERS = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/", "LICENSE")


def converter_cache_dir() -> Path:
    from grpo_kit.models import cache_dir

    return cache_dir() / "llama.cpp-converter" / f"llama-cpp-python-{LLAMA_CPP_PYTHON_VERSION}"


def find_converter(llama_cpp_dir: str | os.PathLike | None = None, *, download: bool = True) -> Path:
    """Path of ``convert_hf_to_gguf.py``: from ``llama_cpp_dir`` / ``$LLAMA_CPP_DIR``, else the cache,
    else downloaded from PyPI (``download=True``) and cached."""
    root = llama_cpp_dir or os.environ.get("LLAMA_CPP_DIR")
    if root:
        script = Path(root).expanduser() / "convert_hf_to_gguf.py"
        if not script.is_file():
            raise FileNotFoundError(
                f"{script} does not exist: LLAMA_CPP_DIR / llama_cpp_dir must be a llama.cpp checkout "
                "(git clone https://github.com/ggml-org/llama.cpp), or unset it to let grpo-kit fetch the converter."
            )
        return script
    cached = converter_cache_dir() / "convert_hf_to_gguf.py"
    if cached.is_file():
        return cached
    if not download:
        raise FileNotFoundError(
            f"llama.cpp's converter is not cached at {cached.parent}; call with download=True."
        )
    return download_converter()


def download_converter() -> Path:
    """``pip download`` the pinned llama-cpp-python source archive, check its sha256, cache its converter;
    returns the script."""
    from filelock import FileLock

    target = converter_cache_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if (target / "convert_hf_to_gguf.py").is_file():
            return target / "convert_hf_to_gguf.py"
        with tempfile.TemporaryDirectory(prefix="grpo-kit-llama-cpp-") as tmp:
            requirement = Path(tmp) / "requirements.txt"
            requirement.write_text(
                f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION} --hash=sha256:{LLAMA_CPP_PYTHON_SHA256}\n"
            )
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--require-hashes",
                "--dest",
                str(Path(tmp) / "dist"),
                "-r",
                str(requirement),
            ]
            done = subprocess.run(cmd, check=False, capture_output=True, text=True)
            archives = list((Path(tmp) / "dist").glob("llama_cpp_python-*.tar.gz"))
            if done.returncode != 0 or not archives:
                raise RuntimeError(
                    f"Could not download llama.cpp's GGUF converter (`pip download llama-cpp-python=="
                    f"{LLAMA_CPP_PYTHON_VERSION} --require-hashes` failed):\n"
                    f"{_tail(done.stderr or done.stdout)}\n"
                    "Fix: allow pip to reach PyPI once (the converter is then cached in "
                    f"{target}), or clone llama.cpp and set LLAMA_CPP_DIR=/path/to/llama.cpp."
                )
            check_sha256(archives[0], LLAMA_CPP_PYTHON_SHA256)
            staging = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
            try:
                _extract_converter(archives[0], staging)
                os.replace(staging, target)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
    return target / "convert_hf_to_gguf.py"


def check_sha256(path: Path, expected: str) -> None:
    """Raise ``ValueError`` unless the file's sha256 is ``expected``."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise ValueError(
            f"{path.name} has sha256 {digest.hexdigest()}, not the pinned {expected}: it is not the archive grpo-kit "
            "was released with (a tampered mirror or a changed upload). Nothing was extracted or run. Point "
            "LLAMA_CPP_DIR at a llama.cpp checkout you trust instead."
        )


def _member_target(member: tarfile.TarInfo, rest: str, dest: Path) -> Path:
    """Where ``rest`` (the entry's path below vendor/llama.cpp/) lands; refuses anything leaving ``dest``."""
    from pathlib import PurePosixPath

    relative = PurePosixPath(rest)
    if relative.is_absolute() or ".." in relative.parts or member.name.startswith("/"):
        raise ValueError(
            f"refusing archive entry {member.name!r}: absolute or '..' paths could write outside "
            f"{dest}. The archive is not a genuine llama-cpp-python sdist."
        )
    out = (dest / relative).resolve()
    if not out.is_relative_to(dest.resolve()):
        raise ValueError(f"refusing archive entry {member.name!r}: it resolves outside {dest}.")
    if member.issym() or member.islnk():
        link = PurePosixPath(member.linkname)
        base = dest if member.islnk() else (dest / relative).parent
        if link.is_absolute() or not (base / link).resolve().is_relative_to(dest.resolve()):
            raise ValueError(
                f"refusing archive entry {member.name!r}: a link to {member.linkname!r}, outside {dest}."
            )
    return out


def _extract_converter(archive: Path, dest: Path) -> None:
    """Copy vendor/llama.cpp/{convert_hf_to_gguf.py, conversion/, gguf-py/, LICENSE} out of the sdist.

    Only regular files are written, each checked by :func:`_member_target` first (links are checked and
    then skipped: the converter has none)."""
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/", 3)  # <pkg>-<ver>/vendor/llama.cpp/<rest>
            if len(parts) < 4 or parts[1:3] != ["vendor", "llama.cpp"]:
                if ".." in member.name.split("/") or member.name.startswith("/"):
                    _member_target(member, member.name, dest)  # raises: never quietly skip a hostile entry
                continue
            rest = parts[3]
            if not any(rest == m or rest.startswith(m) for m in _CONVERTER_MEMBERS):
                continue
            out = _member_target(member, rest, dest)
            if not member.isfile():
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(member) as src, open(out, "wb") as dst:  # type: ignore[union-attr]
                shutil.copyfileobj(src, dst)
    if not (dest / "convert_hf_to_gguf.py").is_file():
        raise RuntimeError(
            f"{archive.name} holds no vendor/llama.cpp/convert_hf_to_gguf.py; "
            "set LLAMA_CPP_DIR to a llama.cpp checkout instead."
        )


def find_llama_quantize(llama_cpp_dir: str | os.PathLike | None = None) -> Path | None:
    """llama.cpp's compiled ``llama-quantize``: on PATH or under ``<llama_cpp_dir>/build/bin``."""
    found = shutil.which("llama-quantize")
    if found:
        return Path(found)
    root = llama_cpp_dir or os.environ.get("LLAMA_CPP_DIR")
    if root:
        candidate = Path(root).expanduser() / "build" / "bin" / "llama-quantize"
        if candidate.is_file():
            return candidate
    return None


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join((text or "").strip().splitlines()[-lines:])
