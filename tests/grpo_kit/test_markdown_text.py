"""Untrusted text inside Markdown renders as that text: tags, emphasis, TeX and pipes survive."""

from __future__ import annotations

import html
import re

import marimo as mo
import markdown
import pytest

from grpo_kit.support.markdown_text import table_cell, text_block

COMPLETIONS = [
    "1. First, 30 + 42 = 72.\n- then \\[ x \\] and \\(y\\)\n> not a quote",
    "<reasoning>\n30 + 42 = 72\n</reasoning>\n<answer>\n72\n</answer>",
    "She earns $18 a day and $5 a tip: 2*3*4 = 24 | __init__ [link](http://x) # not a heading",
    "<script>alert(1)</script> &amp; \\boxed{72}",
]


def _visible(rendered_html: str) -> str:
    """What a reader sees: the rendered HTML without its tags, entities decoded."""
    with_breaks = re.sub(r"<br\s*/?>\n?", "\n", rendered_html)
    return html.unescape(re.sub(r"<[^>]+>", "", with_breaks))


# marimo's mo.md (lessons; TeX, magic links and more on) and Python-Markdown with tables (report.md's kind).
RENDERERS = {
    "marimo": lambda source: mo.md(source).text,
    "markdown": lambda source: markdown.markdown(source, extensions=["tables"]),
}


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("text", COMPLETIONS)
def test_a_table_cell_shows_the_text_as_written(text, renderer):
    rendered = RENDERERS[renderer](f"| before |\n|---|\n| {table_cell(text)} |")
    assert "<script>" not in rendered and "<answer>" not in rendered  # no tag reaches the page as a tag
    cell = re.search(r"<td>(.*?)</td>", rendered, re.DOTALL)
    assert cell and _visible(cell.group(1)) == text
    assert rendered.count("<td>") == 1  # a pipe in the text did not open a column


@pytest.mark.parametrize("renderer", RENDERERS)
@pytest.mark.parametrize("text", COMPLETIONS)
def test_a_text_block_keeps_tags_and_lines(text, renderer):
    rendered = RENDERERS[renderer](text_block(text))
    for markup in ("<answer>", "<em>", "<strong>", "<a ", "<li>", "<blockquote>", "<h1>", "tex"):
        assert markup not in rendered, markup
    assert _visible(rendered).strip() == text.strip()


def test_cells_are_cut_and_never_empty():
    assert table_cell("") == "*(empty)*"
    assert table_cell("x" * 500, limit=10) == "x" * 10 + "…"
    assert "\x1b" not in table_cell("\x1b[31mred\x1b[0m")
