"""Untrusted text (prompts, dataset rows, model output) shown inside Markdown exactly as written.

Markdown renderers (marimo's ``mo.md``, the Hub, GitHub) take ``<answer>`` for an HTML tag and hide it,
``*`` and ``_`` for emphasis, ``$…$`` for TeX and ``|`` for a table column. The lessons and the report
card measure exactly those tags, so they must stay visible: everything that would be read as markup is
escaped here, in one place.
"""

from __future__ import annotations

import html
import re

__all__ = ["table_cell", "text_block"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # tab and newline are handled apart
# Markup characters as numeric character references: backslash escapes are not enough, since marimo's TeX
# extension reads ``\[`` and ``\(`` as math delimiters; ``&#91;`` means "[" to every renderer. Inside a line
# only inline markup matters (emphasis, code, links, TeX, strike-through, a table's pipe); at the start of a
# line also headings, lists, quotes and rules.
_INLINE = {ord(c): f"&#{ord(c)};" for c in "\\`*_[]$|~^"}
_LINE_START = re.compile(r"^(\s*)([#>+\-=]|\d+[.)])", re.MULTILINE)


def _escaped(text: str) -> str:
    text = _CONTROL.sub("", str(text).replace("\r\n", "\n").replace("\t", " "))
    return html.escape(text, quote=False).translate(_INLINE)


def table_cell(text: object, limit: int | None = 400, *, keep_end: bool = False) -> str:
    """``text`` as one Markdown table cell: cut to ``limit`` characters with … (None: never cut; ``keep_end``:
    keep the last ones), markup and HTML escaped, pipes escaped, line breaks as ``<br>``; ``*(empty)*`` for
    an empty string."""
    text = str(text)
    if limit is not None and len(text) > limit:
        text = "…" + text[-limit:] if keep_end else text[:limit] + "…"
    return _escaped(text).replace("\n", "<br>") or "*(empty)*"


def text_block(text: object) -> str:
    """``text`` as a Markdown paragraph that keeps its line breaks (each line ends in a hard break)."""
    lines = _LINE_START.sub(
        lambda m: m.group(1) + "".join(f"&#{ord(c)};" for c in m.group(2)), _escaped(text)
    ).split("\n")
    return "  \n".join(lines)
