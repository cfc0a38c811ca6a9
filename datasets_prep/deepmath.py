"""DeepMath-103K for GRPO, as in TRL's GRPOTrainer quick start.

Raw schema (``trl-lib/DeepMath-103K``): ``prompt`` (conversational: ``[{"role": "user",
"content": problem}]``) and ``solution`` (the final answer, usually LaTeX), which TRL's
``accuracy_reward`` (and ours) compares the completion's ``\\boxed{}``/last expression with via
math-verify. The original ``zwhe99/DeepMath-103K`` schema (``question``, ``final_answer``, ...) is
accepted too and mapped onto it. A plain-string ``prompt`` becomes a single user message, so the
chat template is applied as in the quick start.
"""

from __future__ import annotations

from typing import Any

from datasets_prep.chat import is_conversational_prompt
from datasets_prep.sources import load_raw

HUB_ID = "trl-lib/DeepMath-103K"


def format_deepmath_row(row: dict[str, Any], index: int | None = None) -> dict[str, Any]:
    """One raw row -> ``{"prompt": [user message(s)], "solution": str}``; errors name row and column."""
    where = f"row {index}" if index is not None else "row"
    if "prompt" in row:
        prompt = row["prompt"]
    elif "question" in row:
        prompt = row["question"]
    else:
        raise ValueError(
            f"DeepMath {where}: missing column 'prompt' (columns present: {sorted(row)}). DeepMath rows need "
            "'prompt' (a user message list or text) and 'solution' (the final answer)."
        )
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ValueError(f"DeepMath {where}, column 'prompt': empty text.")
        prompt = [{"role": "user", "content": prompt}]
    elif not is_conversational_prompt(prompt):
        raise ValueError(
            f"DeepMath {where}, column 'prompt': expected text or a list of {{'role', 'content'}} messages; "
            f"got {str(prompt)[:80]!r}."
        )
    if "solution" not in row and "final_answer" not in row:
        raise ValueError(
            f"DeepMath {where}: missing column 'solution' (columns present: {sorted(row)}); accuracy_reward "
            "reads the reference answer from it."
        )
    solution = row["solution"] if "solution" in row else row["final_answer"]
    if isinstance(solution, (int, float)) and not isinstance(solution, bool):
        solution = str(solution)  # a numeric answer from a typed source (parquet, a Dataset): the same answer
    if not isinstance(solution, str) or not solution.strip():
        raise ValueError(
            f"DeepMath {where}, column 'solution': expected a non-empty answer, got {solution!r}."
        )
    return {"prompt": [dict(message) for message in prompt], "solution": solution}


def load_deepmath(split: str = "train", source: Any = None):
    """DeepMath-103K -> ``datasets.Dataset`` with ``prompt`` (conversational) and ``solution``.

    ``source``: ``None`` (``trl-lib/DeepMath-103K``), a Hub id, a local dir, a
    .jsonl/.json/.parquet/.csv file, or raw rows (``datasets.Dataset`` / ``list[dict]``).
    Offline, GSM8K-style practice needs no download: ``load_gsm8k(source=synthetic_gsm8k(n))``.
    """
    raw = load_raw(
        source,
        split=split,
        hub_id=HUB_ID,
        name="DeepMath-103K",
        columns="prompt, solution",
        synthetic=None,
        text_columns=("solution", "final_answer", "question"),
    )
    columns = set(raw.column_names)
    if not ({"prompt", "question"} & columns) or not ({"solution", "final_answer"} & columns):
        raise ValueError(
            f"DeepMath-103K: columns present are {raw.column_names}; expected 'prompt' and 'solution' "
            "(trl-lib/DeepMath-103K) or 'question' and 'final_answer' (zwhe99/DeepMath-103K)."
        )
    drop = [c for c in ("question", "final_answer") if c in columns and c not in ("prompt", "solution")]
    formatted = raw.map(format_deepmath_row, with_indices=True)
    return formatted.remove_columns([c for c in drop if c in formatted.column_names])
