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

#: One worked exchange shown before the question with ``load_gsm8k(worked_example=True)``: a user turn with a
#: problem and an assistant turn answering it in :data:`XML_COT_FORMAT`. Not in the course: 12.6 prompts a 1B
#: model that follows the system prompt alone, but the embedded SmolLM2-135M writes the tags for none of 40
#: held-out problems from the system prompt alone, so every GRPO group scores the same and nothing is learned
#: (``grpo-kit preflight`` says so). With this example a few answers do use the format, and the groups differ.
#: Its wording matches no problem of ``synthetic_gsm8k`` (a question about a garden, not a template's person).
WORKED_EXAMPLE = {
    "question": "A garden has 4 rows of tulips with 6 tulips in each row. 5 tulips are picked. "
    "How many tulips are left in the garden?",
    "reasoning": "The garden has 4 * 6 = 24 tulips. After 5 are picked, 24 - 5 = 19 tulips are left.",
    "answer": "19",
}


def worked_example_turns() -> list[dict[str, str]]:
    """:data:`WORKED_EXAMPLE` as a user turn and an assistant turn (conversational messages)."""
    answer = XML_COT_FORMAT.format(reasoning=WORKED_EXAMPLE["reasoning"], answer=WORKED_EXAMPLE["answer"])
    return [
        {"role": "user", "content": WORKED_EXAMPLE["question"]},
        {"role": "assistant", "content": answer},
    ]


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


def format_gsm8k_row(
    row: dict[str, Any], index: int | None = None, *, worked_example: bool = False
) -> dict[str, Any]:
    """One raw GSM8K row -> ``{"prompt": [system, user], "answer": "<final number>"}`` (course 12.6).

    ``worked_example=True`` puts :data:`WORKED_EXAMPLE` (a user and an assistant turn) between the system
    prompt and the question."""
    check_gsm8k_row(row, index)
    example = worked_example_turns() if worked_example else []
    return {
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            *example,
            {"role": "user", "content": row["question"]},
        ],
        "answer": extract_hash_answer(row["answer"]),
    }


def load_gsm8k(split: str = "train", source: Any = None, *, worked_example: bool = False):
    """GSM8K formatted for GRPO -> ``datasets.Dataset`` with ``prompt`` (conversational), ``answer``.

    ``source``: ``None`` (``openai/gsm8k``), a Hub id, a local dir, a .jsonl/.json/.parquet/.csv
    file, or raw rows (``datasets.Dataset`` / ``list[dict]``, e.g. ``synthetic_gsm8k(200)``).
    ``worked_example``: show :data:`WORKED_EXAMPLE` before each question (for small models; see there).
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
    return raw.map(format_gsm8k_row, with_indices=True, fn_kwargs={"worked_example": worked_example})
