"""GSM8K for GRPO, as in the course's Unsloth practicum (LLM course, chapter 12.6).

Raw schema (``openai/gsm8k``, config ``main``): ``question`` (a word problem) and ``answer``
(step-by-step solution with ``<<a*b=c>>`` calculator annotations, ending in ``#### <number>``).

The formatter turns a row into a *conversational* ``prompt`` -- the system message
:data:`SYSTEM_PROMPT` asking for ``<reasoning>``/``<answer>`` XML, then the question as the user
turn -- and replaces ``answer`` with the final number after ``####`` (what the correctness reward
compares against). The ``question`` column is kept.
"""

from __future__ import annotations

from typing import Any

from datasets_prep.sources import load_raw
from rewards import extract_hash_answer

HUB_ID = "openai/gsm8k"
HUB_CONFIG = "main"

# The course's system prompt, verbatim (leading/trailing newlines included).
SYSTEM_PROMPT = """
Respond in the following format:
<reasoning>
...
</reasoning>
<answer>
...
</answer>
"""

# The course's target format for a completion: XML_COT_FORMAT.format(reasoning=..., answer=...).
XML_COT_FORMAT = """\
<reasoning>
{reasoning}
</reasoning>
<answer>
{answer}
</answer>
"""

RAW_COLUMNS = ("question", "answer")


def check_gsm8k_row(row: dict[str, Any], index: int | None = None) -> None:
    """Raise ``ValueError`` naming the row and column when ``row`` is not a GSM8K row."""
    where = f"row {index}" if index is not None else "row"
    for column in RAW_COLUMNS:
        if column not in row:
            raise ValueError(
                f"GSM8K {where}: missing column {column!r} (columns present: {sorted(row)}). "
                "GSM8K rows need 'question' and 'answer' (a solution ending in '#### <number>')."
            )
        if not isinstance(row[column], str) or not row[column].strip():
            raise ValueError(
                f"GSM8K {where}, column {column!r}: expected a non-empty string, got {row[column]!r}."
            )
    final = extract_hash_answer(row["answer"])
    if final is None or not final:
        raise ValueError(
            f"GSM8K {where}, column 'answer': no final answer after '####' "
            f"(GSM8K solutions end with '#### <number>'); got {row['answer'][-80:]!r}."
        )


def format_gsm8k_row(row: dict[str, Any], index: int | None = None) -> dict[str, Any]:
    """One raw GSM8K row -> ``{"prompt": [system, user], "answer": "<final number>"}`` (course 12.6)."""
    check_gsm8k_row(row, index)
    return {
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": row["question"]},
        ],
        "answer": extract_hash_answer(row["answer"]),
    }


def load_gsm8k(split: str = "train", source: Any = None):
    """GSM8K formatted for GRPO -> ``datasets.Dataset`` with ``prompt`` (conversational), ``answer``.

    ``source``: ``None`` (``openai/gsm8k``), a Hub id, a local dir, a .jsonl/.json/.parquet/.csv
    file, or raw rows (``datasets.Dataset`` / ``list[dict]``, e.g. ``synthetic_gsm8k(200)``).
    """
    raw = load_raw(
        source,
        split=split,
        hub_id=HUB_ID,
        hub_config=HUB_CONFIG,
        name="GSM8K",
        columns="question, answer",
        synthetic="synthetic_gsm8k(n, seed=0)",
        text_columns=("question", "answer"),
    )
    missing = [column for column in RAW_COLUMNS if column not in raw.column_names]
    if missing:
        raise ValueError(
            f"GSM8K: missing column(s) {missing} (columns present: {raw.column_names}). "
            "GSM8K rows need 'question' and 'answer' (a solution ending in '#### <number>')."
        )
    return raw.map(format_gsm8k_row, with_indices=True)
