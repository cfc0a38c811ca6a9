"""What every ``grpo-kit`` command shares: its errors and exit statuses, ``--set`` parsing, and the rule that a
failure after loading is one line (the traceback with ``--debug``)."""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Sequence
from typing import Any

from grpo_kit.support.terminal import markup_safe

__all__ = [
    "CONFIG_ERRORS",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_NO_GO",
    "EXIT_USAGE",
    "RunError",
    "UsageError",
    "after_loading",
    "call_tool",
    "debugging",
    "headline",
    "parse_overrides",
    "parse_value",
]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
EXIT_NO_GO = 1

# OSError: output folder is a file / not writable / already holds a run; CheckpointError is a ValueError.
CONFIG_ERRORS = (ValueError, TypeError, OSError, ImportError, RuntimeError)


class UsageError(ValueError):
    """Bad command-line input; the message names the fix."""


class RunError(RuntimeError):
    """Something failed after the model loaded; the message names what and the fix (exit status 1)."""


def parse_value(text: str) -> Any:
    """``--set`` values: JSON or a Python literal (``1e-5``, ``true``, ``None``, ``[1, 2]``), else the string."""
    lowered = text.strip().lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError):
            continue
    return text


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["learning_rate=1e-5", "lora.r=8"]`` -> ``{"learning_rate": 1e-5, "lora": {"r": 8}}``."""
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise UsageError(
                f"--set expects KEY=VALUE (e.g. --set learning_rate=1e-5 or --set lora.r=8), got {item!r}."
            )
        if "." in key:
            head, _, field = key.partition(".")
            if head not in ("lora", "unsloth", "warmup_sft"):
                raise UsageError(
                    f"dotted --set keys exist for lora.*, unsloth.* and warmup_sft.* only, got {key!r}."
                )
            overrides.setdefault(head, {})[field] = parse_value(value)
        else:
            overrides[key] = parse_value(value)
    return overrides


def after_loading(args, work):
    """Run ``work()``; an exception becomes a :class:`RunError` with one line (the traceback with --debug)."""
    if debugging(args):
        return work()
    try:
        return work()
    except UsageError:
        raise
    except Exception as error:  # every failure after loading is reported the same way
        message = " ".join(str(error).split()) or "(no message)"
        raise RunError(f"{type(error).__name__}: {message} (--debug shows the traceback)") from error


def debugging(args) -> bool:
    """``--debug`` (before or after the subcommand) or ``GRPO_KIT_DEBUG=1``: show tracebacks."""
    return bool(getattr(args, "debug", False) or os.environ.get("GRPO_KIT_DEBUG"))


def call_tool(tool_main, argv, console) -> int:
    """Run another module's ``main(argv)``; its ``SystemExit`` (argparse errors, messages) becomes our status."""
    try:
        return int(tool_main(argv) or 0)
    except SystemExit as exit_:
        if isinstance(exit_.code, str):
            console.print(f"[red]error:[/] {markup_safe(exit_.code)}", highlight=False)
            return EXIT_USAGE
        return int(exit_.code or 0)


def headline(evaluation: dict) -> str:
    """``before → after (change, 95% CI [lo, hi]): verdict`` of run.json's evaluation summary."""
    return (
        f"{evaluation['before']:.3g} → {evaluation['after']:.3g} (change {evaluation['mean_diff']:+.3g}, "
        f"{evaluation['level']:.0%} CI [{evaluation['ci_low']:+.3g}, {evaluation['ci_high']:+.3g}]): "
        f"{evaluation['verdict']}"
        + (f" ({'; '.join(evaluation['reward_hack_signs'])})" if evaluation.get("reward_hack_signs") else "")
    )
