"""The README is a front door (issues #42, #54): at most 150 lines, every docs/ page linked from it, and every relative
link of README.md and docs/*.md resolves, to a file that exists and, where it names one, a heading's anchor."""

from __future__ import annotations

import re
from pathlib import Path

from doc_pages import PAGES, README, ROOT

MAX_README_LINES = 150
# a Markdown link or image target, or an HTML src/href; code spans are left out before matching
LINK = re.compile(r"\]\(([^)\s]+)\)|(?:src|href)=\"([^\"]+)\"")
EXTERNAL = ("http://", "https://", "mailto:")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation dropped (letters, digits, `-`, `_` and spaces kept),
    spaces turned into hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings (outside code blocks); a repeated heading gets -1, -2, ... as on GitHub."""
    found: dict[str, int] = {}
    result = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and re.match(r"#{1,6} ", line):
            anchor = github_anchor(line.lstrip("#"))
            seen = found.get(anchor, 0)
            result.add(anchor if seen == 0 else f"{anchor}-{seen}")
            found[anchor] = seen + 1
    return result


def relative_links(page: Path) -> list[str]:
    """Every relative link target of ``page`` outside code blocks and code spans."""
    targets, in_code = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for match in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = match.group(1) or match.group(2)
            if not target.startswith(EXTERNAL):
                targets.append(target)
    return targets


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """``page: target`` (``page`` relative to ``root``) for every relative link of ``page`` whose file or heading
    anchor does not exist."""
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{page.relative_to(root)}: {target} (no heading with that anchor)")
    return broken


def test_the_readme_is_a_front_door_of_at_most_150_lines():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail to a docs/ page"


def test_every_docs_page_is_one_click_from_the_readme():
    linked = {
        (README.parent / t.partition("#")[0]).resolve() for t in relative_links(README) if t.partition("#")[0]
    }
    pages = set(PAGES[1:])
    assert pages <= linked, "not linked from README.md: " + ", ".join(
        str(p.relative_to(ROOT)) for p in sorted(pages - linked)
    )


def test_every_relative_link_of_the_readme_and_docs_resolves():
    broken = [problem for page in PAGES for problem in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_the_link_checker_catches_a_missing_file_and_a_missing_anchor(tmp_path):
    (tmp_path / "other.md").write_text("# Title\n\n## A faster step: where the loop's time goes\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-faster-step-where-the-loops-time-goes) [gone](missing.md) [bad](other.md#nope)\n"
        '<img src="img/x.png"> `[in code](nothere.md)` [web](https://example.com)\n'
        "```\n[in a block](nothere.md)\n```\n"
    )
    assert broken_links(page, root=tmp_path) == [
        "page.md: missing.md (no such file)",
        "page.md: other.md#nope (no heading with that anchor)",
        "page.md: img/x.png (no such file)",
    ]


THREE_WAYS = "The format on the course's prompt alone: three ways"
LESSON_6 = ROOT / "notebooks" / "06_practicum_gsm8k_unsloth.py"


def table_under(text: str, heading: str) -> list[str]:
    """The first Markdown table after the line naming ``heading``, its rows stripped of indentation."""
    lines = [line.strip() for line in text.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    return rows


def test_the_three_ways_table_is_the_same_in_results_and_lesson_6():
    """The table moved from the README to docs/results.md (#54); lesson 6 shows the same rows."""
    results_text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    results = table_under(results_text, "### " + THREE_WAYS)
    lesson = table_under(LESSON_6.read_text(encoding="utf-8"), "## 5 · " + THREE_WAYS)
    assert len(results) == 6, results  # header, rule, plain, guided, SFT on the loop, SFT on TRL
    assert results == lesson
    for recipe in ("gsm8k-cpu", "gsm8k-cpu-guided", "gsm8k-cpu-sft"):
        assert any(f"(`{recipe}`)" in row for row in results[2:]), recipe
    # each SFT figure is the one its own section measured: base → SFT only → SFT + GRPO, seed by seed
    sft_section = results_text.split("### The format after an SFT warm-up")[1].split("\n## ")[0]
    for row in results[4:]:
        for cell in row.split("|")[4:6]:
            chain = cell.split("(GRPO")[0].strip()
            assert chain in sft_section, chain
