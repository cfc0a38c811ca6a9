"""The small report every export returns: where it went, how big it is, and whether reloading it agreed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ExportReport:
    """kind: "adapter" | "merged" | "gguf". path: the folder (or .gguf file) written.
    size_bytes: its size on disk. verified: the reload check passed. details: what was checked."""

    kind: str
    path: Path
    size_bytes: int
    verified: bool
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def size_mb(self) -> float:
        return self.size_bytes / 1e6

    def summary(self) -> str:
        state = "verified" if self.verified else "NOT verified"
        return f"{self.kind}: {self.path} ({self.size_mb:.1f} MB, {state})"


def dir_size(path: Path) -> int:
    """Bytes under ``path`` (a file or a folder)."""
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
