"""Rows for a supervised warm-up before GRPO (a recipe's ``warmup_sft``): prompt-completion pairs, TRL's
``SFTTrainer`` format (``prompt``: the conversation up to the answer, ``completion``: the assistant turn).

``gsm8k_worked_solutions(n, seed)``: synthetic GSM8K-style problems (``synthetic_gsm8k``), asked with the
course's system prompt alone (no worked example), each answered in the course's format,
``<reasoning>\\n{the calculation on the problem's numbers}\\n</reasoning>\\n<answer>\\nN\\n</answer>\\n``
(:data:`datasets_prep.gsm8k.XML_COT_FORMAT`): the solution's own steps, GSM8K's ``<<a*b=c>>`` annotations taken
out. The Unsloth GRPO notebooks' "pre fine-tuning for formatting" step: the model sees the layout written
before GRPO asks for it. Held out means held out: no problem here is one of the first :data:`EXCLUDED_PER_SEED`
problems of ``synthetic_gsm8k`` with seed 0 (the gsm8k recipes' training rows) or with seed
:data:`HELD_OUT_SEED` (their held-out rows, ``grpo_kit.runs.held_out.HELD_OUT_SEEDS``), nor one of
``gsm8k-handwritten``'s (a test holds it).

``shapes-captions``: a vision-language recipe's alignment stage, 1,024 pictures each described in one sentence
(``datasets_prep.images.caption_rows``: none of them a picture of the task rows); the rows carry their ``image``.

``load_sft_rows(dataset, columns)``: a built-in set by name (:data:`SFT_DATASETS`) or a local ``.jsonl`` file
whose lines hold a prompt and a completion (plain text or chat messages), columns renamed by ``columns``
(``{"prompt": "question", "completion": "solution"}``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from datasets_prep.files import jsonl_lines
from datasets_prep.gsm8k import SYSTEM_PROMPT, XML_COT_FORMAT
from datasets_prep.synthetic import synthetic_gsm8k

__all__ = [
    "EXCLUDED_PER_SEED",
    "HELD_OUT_SEED",
    "PICTURE_SFT_DATASETS",
    "SFT_DATASETS",
    "SFT_SEED",
    "gsm8k_worked_solutions",
    "load_sft_rows",
]

#: The seed the worked solutions are drawn from (neither 0, the training rows', nor :data:`HELD_OUT_SEED`).
SFT_SEED = 2718
#: ``grpo_kit.runs.held_out.HELD_OUT_SEEDS["gsm8k"]``: the seed of a synthetic gsm8k recipe's held-out rows.
HELD_OUT_SEED = 4321
#: How many problems of each excluded stream (seed 0, seed :data:`HELD_OUT_SEED`) no worked solution repeats.
EXCLUDED_PER_SEED = 1024
_ANNOTATION = re.compile(r"<<[^>]*>>")


def _excluded_questions() -> set[str]:
    from datasets_prep.shipped import transfer_set_rows

    excluded = {r["question"] for r in synthetic_gsm8k(EXCLUDED_PER_SEED, seed=0)}
    excluded |= {r["question"] for r in synthetic_gsm8k(EXCLUDED_PER_SEED, seed=HELD_OUT_SEED)}
    excluded |= {r["question"] for r in transfer_set_rows("gsm8k-handwritten")}
    return excluded


def _worked_solution(raw: Mapping[str, str]) -> dict[str, Any]:
    *steps, final = raw["answer"].strip().split("\n")
    reasoning = "\n".join(_ANNOTATION.sub("", step) for step in steps)
    answer = final.removeprefix("####").strip()
    return {
        "prompt": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": raw["question"]},
        ],
        "completion": [
            {"role": "assistant", "content": XML_COT_FORMAT.format(reasoning=reasoning, answer=answer)}
        ],
        "answer": answer,
    }


def gsm8k_worked_solutions(n: int = 300, seed: int = SFT_SEED) -> list[dict[str, Any]]:
    """``n`` worked GSM8K solutions in the course's format (``prompt``, ``completion``, ``answer``), offline and
    the same for ``seed``; no problem repeats another or one of the excluded sets (module docstring)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1 (the worked solutions to write), got {n!r}.")
    excluded = _excluded_questions()
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    drawn = 2 * n
    while len(rows) < n:
        rows, seen = [], set()
        for raw in synthetic_gsm8k(drawn, seed=seed):  # prefix-stable: a longer stream starts the same
            if raw["question"] in excluded or raw["question"] in seen:
                continue
            seen.add(raw["question"])
            rows.append(_worked_solution(raw))
            if len(rows) == n:
                break
        drawn *= 2
    return rows


def _caption_rows(n: int) -> list[dict[str, Any]]:
    from datasets_prep.images import caption_rows

    return caption_rows(n)


#: Built-in SFT sets by the name a recipe's ``warmup_sft.dataset`` uses -> (function, its arguments).
SFT_DATASETS: dict[str, tuple[Any, dict[str, Any]]] = {
    "gsm8k-worked": (gsm8k_worked_solutions, {"n": 300}),
    # a VLM's alignment stage: pictures described in one sentence (datasets_prep.images.caption_rows)
    "shapes-captions": (_caption_rows, {"n": 1024}),
}


#: The built-in sets whose rows carry a picture (a vision-language recipe's alignment stage).
PICTURE_SFT_DATASETS = ("shapes-captions",)


def _messages(value: Any, role: str) -> list[dict[str, str]] | str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(m, dict) and "content" in m for m in value):
        return value
    raise ValueError(f"a {role} must be text or a list of chat messages ({{role, content}}), got {value!r}.")


def load_sft_rows(
    dataset: str | Path, columns: Mapping[str, str] | None = None, *, rows: int | None = None
) -> list[dict[str, Any]]:
    """The rows of a warm-up set: ``[{"prompt": ..., "completion": ...}, ...]``, in order, the first ``rows``
    (None: all). ``dataset``: a name of :data:`SFT_DATASETS` or a ``.jsonl`` file; ``columns`` maps ``prompt``
    and ``completion`` to the file's column names. A prompt and its completion are both text or both
    messages (a text prompt with a messages completion is refused, and the reverse)."""
    columns = dict(columns or {})
    if isinstance(dataset, str) and dataset in SFT_DATASETS:
        make, kwargs = SFT_DATASETS[dataset]
        if rows is not None:
            kwargs = {**kwargs, "n": rows}
        raw = make(**kwargs)
    else:
        path = Path(dataset)
        if path.suffix != ".jsonl" or not path.is_file():
            raise ValueError(
                f"warmup_sft.dataset {str(dataset)!r}: not a built-in set ({', '.join(SFT_DATASETS)}) nor a "
                ".jsonl file; fix the path or name a built-in set."
            )
        raw = []
        for number, line in jsonl_lines(path):  # one line at a time, each within files.max_row_bytes
            if line.strip():
                try:
                    raw.append(json.loads(line))
                except ValueError as error:
                    raise ValueError(f"{path}: line {number} is not JSON ({error}); fix the line.") from None
    out = []
    for i, row in enumerate(raw if rows is None else raw[:rows]):
        picked = {}
        for role in ("prompt", "completion"):
            column = columns.get(role, role)
            if column not in row:
                raise ValueError(
                    f"warmup_sft row {i}: no column {column!r} (columns: {sorted(row)}); map it with "
                    f"warmup_sft.columns {{{role}: COLUMN}}."
                )
            try:
                picked[role] = _messages(row[column], role)
            except ValueError as error:
                raise ValueError(f"warmup_sft row {i}: {error}") from None
        if isinstance(picked["prompt"], str) != isinstance(picked["completion"], str):
            raise ValueError(
                f"warmup_sft row {i}: the prompt and the completion must both be text or both be messages."
            )
        if "image" in row:  # a picture row (a VLM's alignment stage): the picture goes with it
            if dataset not in PICTURE_SFT_DATASETS:
                raise ValueError(
                    f"warmup_sft row {i}: a picture column in a .jsonl warm-up set is not read; align a "
                    f"vision-language model with warmup_sft.dataset {PICTURE_SFT_DATASETS[0]!r}."
                )
            picked["image"] = row["image"]
        out.append(picked)
    if not out:
        raise ValueError(f"warmup_sft.dataset {str(dataset)!r} has no rows; give it prompt-completion rows.")
    return out
