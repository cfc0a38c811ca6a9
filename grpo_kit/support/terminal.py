"""Text from a user, a dataset or a model reaches the terminal as text, never as commands to it.

Two things in a string can drive a terminal or the CLI's printer:

* **control characters and escape sequences**: ``ESC ] 0 ; title BEL`` (OSC) retitles the window or plants a
  hyperlink, ``ESC [ 2 J`` (CSI) clears the screen, ``\\r`` and backspaces overwrite what was printed. A
  prompt, a dataset row or a shared adapter's answer can hold them;
* **rich markup**: ``console.print`` reads ``[bold]``, ``[link=…]`` and ``[/INST]`` as tags, so a Llama-style
  prompt crashed the CLI with ``MarkupError`` and ``[lr=1e-4]`` vanished from a printed path.

:func:`plain` removes the first (C0/C1 control characters except newline and tab, and whole ESC/CSI/OSC/DCS
sequences, so no parameter bytes are left behind); :func:`markup_safe` also escapes rich markup, for text
that goes inside a markup string or a table cell. Files keep the original text: only what is printed passes
through here. Simplification: Unicode bidi and zero-width characters are printed as they are.

:func:`quiet_bitsandbytes_kernels_notice` keeps one library's speed hint off the console (see there).
"""

from __future__ import annotations

import logging
import re
import warnings
from typing import Any

__all__ = ["install_plain_warnings", "markup_safe", "plain", "quiet_bitsandbytes_kernels_notice"]

# Whole sequences first (so their parameters go too), then any single control character left over.
_ESCAPE_SEQUENCE = re.compile(
    r"""
      \x1b\[[0-?]*[ -/]*[@-~]?              # CSI: ESC [ parameters intermediates final
    | \x1b\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?   # OSC: ESC ] ... BEL or ST (or cut off)
    | \x1b[PX^_][^\x1b\x9c]*(?:\x1b\\|\x9c)?       # DCS, SOS, PM, APC strings ... ST
    | \x1b[ -/]*[0-~]?                      # any other ESC sequence (charset, keypad, RIS)
    | \x9b[0-?]*[ -/]*[@-~]?                # 8-bit CSI
    | [\x9d\x90\x98\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x9c)?  # 8-bit OSC / DCS / SOS / PM / APC
    """,
    re.VERBOSE,
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 (but \t, \n), DEL, C1


def plain(text: Any) -> str:
    """``str(text)`` without escape sequences and control characters (newline and tab are kept)."""
    return _CONTROL.sub("", _ESCAPE_SEQUENCE.sub("", str(text)))


def markup_safe(text: Any) -> str:
    """:func:`plain`, with rich markup escaped: prints exactly as written inside ``console.print(f"…")``
    or a ``rich.table.Table`` cell."""
    from rich.markup import escape

    return escape(plain(text))


def install_plain_warnings() -> None:
    """Warnings (bad steps name reward functions and their errors) print through :func:`plain` too; the CLI
    calls this once at start. Idempotent."""
    if getattr(warnings.formatwarning, "_grpo_kit_plain", False):
        return
    original = warnings.formatwarning

    def formatwarning(*args: Any, **kwargs: Any) -> str:
        return plain(original(*args, **kwargs))

    formatwarning._grpo_kit_plain = True  # type: ignore[attr-defined]
    warnings.formatwarning = formatwarning


_BITSANDBYTES_CPU_LOGGER = "bitsandbytes.backends.cpu.ops"
_KERNELS_NOTICE = "Failed to load CPU gemm_4bit_forward from kernels-community"


def _not_the_kernels_notice(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(_KERNELS_NOTICE)


def quiet_bitsandbytes_kernels_notice() -> None:
    """Drops bitsandbytes' "Failed to load CPU gemm_4bit_forward from kernels-community: No module named
    'kernels'" line. peft imports bitsandbytes whenever it is installed (every run, 4-bit or not), and on a CPU
    with AVX512-BF16 its CPU backend then logs that line when the optional ``kernels`` package is missing; its
    own 4-bit kernel runs instead, so the line is a speed hint, not an error. Every other message of bitsandbytes
    and every exception still comes through. The CLI calls this once at start, before anything imports
    bitsandbytes. Idempotent."""
    logger = logging.getLogger(_BITSANDBYTES_CPU_LOGGER)
    if _not_the_kernels_notice not in logger.filters:
        logger.addFilter(_not_the_kernels_notice)
