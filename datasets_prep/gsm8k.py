"""GSM8K for GRPO, as in the course's Unsloth practicum (LLM course, chapter 12.6).

Raw schema (``openai/gsm8k``, config ``main``): ``question`` (a word problem) and ``answer``
(step-by-step solution with ``<<a*b=c>>`` calculator annotations, ending in ``#### <number>``).

The formatter turns a row into a *conversational* ``prompt`` -- the system message
:data:`SYSTEM_PROMPT` asking for ``<reasoning>``/``<answer>`` XML, then the question as the user
turn -- and replaces ``answer`` with the final number after ``####`` (what the correctness reward
compares against). The ``question`` column is kept.

For small models, ``load_gsm8k(worked_example=True)`` puts one worked exchange (one of :data:`WORKED_EXAMPLES`,
in turn) before each question, and ``worked_example_fade=ROWS`` fades it out over the first ``ROWS`` rows
(:func:`worked_example_rows`): a curriculum that starts with the example and ends on the course's own prompt.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from datasets_prep.chat import SAMPLING_PROMPT
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

#: The worked exchanges shown before the question with ``load_gsm8k(worked_example=True)``: a user turn with a
#: problem and an assistant turn answering it in :data:`XML_COT_FORMAT`; row ``i`` shows example ``i % 6``. Not in
#: the course: 12.6 prompts a 1B model that follows the system prompt alone, but the embedded SmolLM2-135M writes
#: the tags for none of 40 held-out problems from the system prompt alone, so every GRPO group scores the same and
#: nothing is learned (``grpo-kit preflight`` says so). With an example a few answers do use the format, and the
#: groups differ. Six, not one: with a single example on every row the model learned to repeat that example's
#: reasoning and answer word for word, whatever the question (strict format 100 %, every answer identical), which
#: is the format without the task; six problems of different shapes (×, −, +, ÷, one or two steps) leave the
#: layout as the only thing they share. Their wording matches no problem of ``synthetic_gsm8k`` (objects, not a
#: template's person) nor of ``gsm8k-handwritten``. ``worked_example_fade`` takes them away again during training
#: (:func:`load_gsm8k`, recipe ``gsm8k-cpu``), so that what the model learns holds on the course's prompt, without.
WORKED_EXAMPLES: tuple[dict[str, str], ...] = (
    {
        "question": "A garden has 4 rows of tulips with 6 tulips in each row. 5 tulips are picked. "
        "How many tulips are left in the garden?",
        "reasoning": "The garden has 4 * 6 = 24 tulips. After 5 are picked, 24 - 5 = 19 tulips are left.",
        "answer": "19",
    },
    {
        "question": "A jar holds 84 marbles. Half of them are blue, and 12 of the blue marbles are cracked. "
        "How many blue marbles are not cracked?",
        "reasoning": "Half of 84 is 84 / 2 = 42 blue marbles. Without the cracked ones, 42 - 12 = 30.",
        "answer": "30",
    },
    {
        "question": "A box holds 8 pencils. A teacher buys 7 boxes and hands out 39 pencils. "
        "How many pencils does the teacher have left?",
        "reasoning": "7 boxes hold 7 * 8 = 56 pencils. After handing out 39, 56 - 39 = 17 are left.",
        "answer": "17",
    },
    {
        "question": "A farm collects 26 eggs in the morning and 19 eggs in the afternoon. The eggs are packed "
        "in cartons of 5. How many cartons are filled?",
        "reasoning": "The farm collects 26 + 19 = 45 eggs. In cartons of 5 that is 45 / 5 = 9 cartons.",
        "answer": "9",
    },
    {
        "question": "A shelf holds 3 crates with 15 apples in each crate. 11 of the apples go bad. "
        "How many good apples are on the shelf?",
        "reasoning": "The crates hold 3 * 15 = 45 apples. Without the bad ones, 45 - 11 = 34 are good.",
        "answer": "34",
    },
    {
        "question": "One batch of dough makes 24 cookies. A school kitchen bakes 4 batches and 10 cookies burn. "
        "How many cookies can be served?",
        "reasoning": "4 batches make 4 * 24 = 96 cookies. Without the burnt ones, 96 - 10 = 86 can be served.",
        "answer": "86",
    },
)
#: The first of :data:`WORKED_EXAMPLES` (row 0 shows it).
WORKED_EXAMPLE = WORKED_EXAMPLES[0]


def worked_example_turns(index: int = 0) -> list[dict[str, str]]:
    """:data:`WORKED_EXAMPLES` ``[index % 6]`` as a user turn and an assistant turn (conversational messages)."""
    example = WORKED_EXAMPLES[index % len(WORKED_EXAMPLES)]
    answer = XML_COT_FORMAT.format(reasoning=example["reasoning"], answer=example["answer"])
    return [
        {"role": "user", "content": example["question"]},
        {"role": "assistant", "content": answer},
    ]


def worked_example_rows(n_rows: int, fade: int | None = None) -> list[bool]:
    """Which of ``n_rows`` rows, in dataset order, carry a worked example when it fades out over the
    first ``fade`` rows (``load_gsm8k(worked_example=True, worked_example_fade=fade)``).

    The share of rows that carry it falls linearly from 1 (row 0) to 0 (row ``fade``): row ``i < fade`` has
    the share ``1 - i / fade``, rows from ``fade`` on have none. The rows are chosen so that the first ``k``
    rows always hold ``ceil(sum of their shares)`` of them (exact fractions), which spreads them evenly,
    keeps the first rows all with it (rows 0-9 for ``fade=48`` or ``64``) and makes the choice the same on every call,
    with no random draw. A longer dataset starts with the shorter one's choices, so cutting the rows to a
    size keeps what the first rows show. ``fade=None``: every row carries it."""
    if fade is None:
        return [True] * n_rows
    shown, total = [], Fraction(0)
    for i in range(n_rows):
        before = math.ceil(total)
        total += max(Fraction(0), 1 - Fraction(i, fade))
        shown.append(math.ceil(total) > before)
    return shown


def check_worked_example(
    worked_example: Any, fade: Any, where: str = "load_gsm8k", guides: Any = False
) -> None:
    """Raise ``ValueError`` (one line, naming the fix) unless ``worked_example`` is a bool, ``fade`` is
    None or an int >= 1 with ``worked_example=True`` (what a fade fades out), and ``guides``
    (``worked_example_guides``) is a bool, True only with ``worked_example=True``."""
    if not isinstance(guides, bool):
        raise ValueError(  # noqa: TRY004 -- one kind of error for every bad recipe value (recipes, --set)
            f"{where}: worked_example_guides={guides!r} must be True or False."
        )
    if guides and worked_example is not True:
        raise ValueError(
            f"{where}: worked_example_guides=True puts the worked example in the prompt the completions are "
            "sampled from, so it needs worked_example=True; drop worked_example_guides otherwise."
        )
    if not isinstance(worked_example, bool):
        raise ValueError(  # noqa: TRY004 -- one kind of error for every bad recipe value (recipes, --set)
            f"{where}: worked_example={worked_example!r} must be True or False; to fade the example out over "
            "the first rows, pass worked_example=True, worked_example_fade=ROWS."
        )
    if fade is None:
        return
    if isinstance(fade, bool) or not isinstance(fade, int) or fade < 1:
        raise ValueError(
            f"{where}: worked_example_fade={fade!r} must be an int >= 1, the rows over which the worked example "
            "fades out (e.g. 48), or None to show it on every row."
        )
    if not worked_example:
        raise ValueError(
            f"{where}: worked_example_fade={fade!r} fades the worked example out, so it needs "
            "worked_example=True; drop worked_example_fade for prompts without the example."
        )


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

    ``worked_example=True`` puts one of :data:`WORKED_EXAMPLES` (a user and an assistant turn; row ``index``
    shows example ``index % 6``, a row without an index the first) between the system prompt and the question."""
    check_gsm8k_row(row, index)
    example = worked_example_turns(index or 0) if worked_example else []
    return {
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            *example,
            {"role": "user", "content": row["question"]},
        ],
        "answer": extract_hash_answer(row["answer"]),
    }


def load_gsm8k(
    split: str = "train",
    source: Any = None,
    *,
    worked_example: bool = False,
    worked_example_fade: int | None = None,
    worked_example_guides: bool = False,
):
    """GSM8K formatted for GRPO -> ``datasets.Dataset`` with ``prompt`` (conversational), ``answer``.

    ``source``: ``None`` (``openai/gsm8k``), a Hub id, a local dir, a .jsonl/.json/.parquet/.csv
    file, or raw rows (``datasets.Dataset`` / ``list[dict]``, e.g. ``synthetic_gsm8k(200)``).
    ``worked_example``: show one of :data:`WORKED_EXAMPLES` before each question, row ``i`` example ``i % 6``
    (for small models; see there).
    Default False: the course's prompt, the system prompt alone.
    ``worked_example_fade``: with ``worked_example=True``, fade the example out over the first this many rows,
    in dataset order (:func:`worked_example_rows`: row 0 carries it, the share falls linearly to none at row
    ``worked_example_fade``, later rows have none). Why: the embedded 135M model writes the tags from the
    system prompt alone for no problem, so at the start of training the example is needed for any GRPO
    signal; at the end the prompt must be the course's own, or what the model learned depends on the example
    being there. A fade is a curriculum: it only works if the rows are trained in this order
    (``shuffle_dataset=False``; a recipe with a fade and shuffling is refused), and a second pass over the
    rows starts with the example again. Default None: no fade, the example on every row (or on none).
    ``worked_example_guides``: with ``worked_example=True``, put the example (where the fade shows one) in a
    second column, ``sampling_prompt`` (:data:`datasets_prep.SAMPLING_PROMPT`), and keep ``prompt`` the
    course's own on every row. The standalone loop draws the completions from ``sampling_prompt`` and trains
    on them under ``prompt`` (guided sampling, ``grpo_kit.loop.training``), so the model learns to write from the
    course's prompt alone what it writes with the example. Rows without an example have ``sampling_prompt ==
    prompt``. Only the standalone loop reads the column; the TRL and Unsloth paths refuse it. Default False.
    """
    check_worked_example(worked_example, worked_example_fade, guides=worked_example_guides)
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
    shown = worked_example_rows(len(raw), worked_example_fade) if worked_example else [False] * len(raw)
    return raw.map(
        _format_row, with_indices=True, fn_kwargs={"shown": shown, "guides": worked_example_guides}
    )


def _format_row(row: dict[str, Any], index: int, shown: list[bool], guides: bool) -> dict[str, Any]:
    """:func:`format_gsm8k_row` with the worked example where ``shown`` (one bool per row) puts it: in
    ``prompt``, or with ``guides`` in ``sampling_prompt`` only (``prompt`` then stays the course's)."""
    formatted = format_gsm8k_row(row, index, worked_example=shown[index])
    if not guides:
        return formatted
    return {
        **format_gsm8k_row(row, index),
        SAMPLING_PROMPT: formatted["prompt"],
    }
