"""smoltldr for GRPO, as in the course's length-reward practicum (LLM course, chapter 12.5).

Raw schema (``mlabonne/smoltldr``): ``prompt`` (a short post to summarise, plain text) and
``completion`` (a reference summary). The course hands the ``prompt`` column to ``GRPOTrainer``
as it is: a *standard* (plain-text) prompt, so no chat template is applied and the model simply
continues the text. The loader checks the schema and keeps both columns.
"""

from __future__ import annotations

from typing import Any

from datasets_prep.sources import load_raw

HUB_ID = "mlabonne/smoltldr"


def check_smoltldr_row(row: dict[str, Any], index: int | None = None) -> None:
    """Raise ``ValueError`` naming the row and column when ``row`` is not a smoltldr row."""
    where = f"row {index}" if index is not None else "row"
    if "prompt" not in row:
        raise ValueError(
            f"smoltldr {where}: missing column 'prompt' (columns present: {sorted(row)}). "
            "smoltldr rows need 'prompt' (the text to summarise) and optionally 'completion'."
        )
    if not isinstance(row["prompt"], str) or not row["prompt"].strip():
        raise ValueError(
            f"smoltldr {where}, column 'prompt': expected non-empty plain text (the course uses the standard, "
            f"not the conversational, format); got {str(row['prompt'])[:80]!r}."
        )
    if "completion" in row and row["completion"] is not None and not isinstance(row["completion"], str):
        raise ValueError(f"smoltldr {where}, column 'completion': expected text, got {row['completion']!r}.")


def load_smoltldr(split: str = "train", source: Any = None, *, instruction: str | None = None):
    """smoltldr -> ``datasets.Dataset`` with a plain-text ``prompt`` (and ``completion`` when present).

    ``source``: ``None`` (``mlabonne/smoltldr``), a Hub id, a local dir, a .jsonl/.json/.parquet/.csv
    file, or raw rows (``datasets.Dataset`` / ``list[dict]``, e.g. ``synthetic_tldr(200)``).

    ``instruction``: ``None`` keeps the course's plain-text prompt (the post itself; the model's chat
    template is not applied, so an instruct model often just continues or stops). A string turns each
    row into a conversational prompt, one user message ``f"{instruction}\n\n{post}"``, which an
    instruct model answers with a summary — what a short CPU run needs to show learning.
    """
    raw = load_raw(
        source,
        split=split,
        hub_id=HUB_ID,
        name="smoltldr",
        columns="prompt, completion",
        synthetic="synthetic_tldr(n, seed=0)",
        text_columns=("prompt", "completion"),
    )
    if "prompt" not in raw.column_names:
        raise ValueError(
            f"smoltldr: missing column 'prompt' (columns present: {raw.column_names}). "
            "smoltldr rows need 'prompt' (the text to summarise) and optionally 'completion'."
        )
    for index, row in enumerate(raw):
        check_smoltldr_row(row, index)
    if instruction is None:
        return raw
    if not isinstance(instruction, str) or not instruction.strip():
        raise ValueError(f"smoltldr: instruction must be a non-empty string or None, got {instruction!r}.")
    return raw.map(lambda row: {"prompt": [{"role": "user", "content": f"{instruction}\n\n{row['prompt']}"}]})
