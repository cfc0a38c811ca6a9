"""The documentation as the tests read it: README.md, the front door, and the pages of docs/ it links.

The README is a test: every command it shows runs in a test exactly as written, and so does every command a
docs/ page shows. A section that moved from the README to a docs/ page is read from there by the same test, so
the helpers below look in README.md and every docs/*.md, in that order."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))


def page_text(relative: str) -> str:
    """The text of one page, e.g. ``"docs/rewards.md"``."""
    return (ROOT / relative).read_text(encoding="utf-8")


def lines_starting_with(prefix: str) -> list[str]:
    """Every line of README.md and docs/*.md that starts with ``prefix``, exactly as written, in page order."""
    return [
        line
        for page in PAGES
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith(prefix)
    ]


def first_line_starting_with(prefix: str) -> str:
    """The first line of README.md and docs/*.md that starts with ``prefix`` (StopIteration when none)."""
    return next(iter(lines_starting_with(prefix)))
