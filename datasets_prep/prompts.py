"""Your own prompts: rows from a local file or folder, or a Hub dataset, with a ``prompt`` column and the
columns your reward functions read (a recipe file's ``dataset``, recipe loader ``"prompts"``).

    load_prompts("train", "my_task.jsonl", prompt="question", columns={"answer": "solution"},
                 held_out={"fraction": 0.2, "seed": 0})

* ``prompt`` names the column that holds the prompt. A text prompt becomes one user message (after
  ``system_prompt``, when given), so an instruct model's chat template is applied; a prompt that already is a
  list of ``{"role", "content"}`` messages is kept as it is.
* ``columns`` renames columns for the reward functions, ``{name the reward reads: column in the data}``
  (``{"answer": "solution"}``: the reward's ``answer=`` keyword gets the ``solution`` column). Every other
  column is passed through unchanged (TRL passes every column to every reward function). Numbers in the
  renamed columns become text (``datasets_prep.files``), as rewards compare answers as text.
* ``select_columns`` keeps only these columns of the data (TRL's ``datasets: [{columns: [...]}]``,
  ``Dataset.select_columns``); the prompt column and the renamed ones must be among them.
* ``held_out`` sets rows apart for evaluation, by construction never trained on:
  ``{"split": "test"}`` -- another split of the same source (a Hub id or a folder with splits);
  ``{"fraction": 0.2, "seed": 0}`` -- a seeded share of the rows, carved out before training
  (``round(fraction * rows)``, at least 1, drawn by ``random.Random(seed).sample``).
  ``part="held_out"`` returns those rows; ``part="train"`` (the default) the others.

``datasets`` is imported lazily (through ``datasets_prep.sources``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from datasets_prep.sources import load_raw

__all__ = ["HELD_OUT_KEYS", "carved_indices", "check_held_out", "load_prompts"]

#: The forms of ``held_out``: a named split, or a seeded fraction.
HELD_OUT_KEYS = ({"split"}, {"fraction", "seed"}, {"fraction"})


def check_held_out(held_out: Any, *, where: str = "held_out") -> dict[str, Any] | None:
    """``held_out`` checked (None, ``{"split": name}`` or ``{"fraction": f, "seed": s}``, ``seed`` 0 by
    default); ``ValueError`` naming the fix."""
    if held_out is None:
        return None
    fix = "write held_out: {split: test} (another split) or held_out: {fraction: 0.2, seed: 0} (carved)"
    if not isinstance(held_out, Mapping) or set(held_out) not in HELD_OUT_KEYS:
        raise ValueError(f"{where}: {held_out!r} is not a held-out set; {fix}.")
    if "split" in held_out:
        if not isinstance(held_out["split"], str) or not held_out["split"]:
            raise ValueError(
                f"{where}: split must be a split name such as 'test', got {held_out['split']!r}."
            )
        return {"split": held_out["split"]}
    fraction, seed = held_out["fraction"], held_out.get("seed", 0)
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction < 1:
        raise ValueError(
            f"{where}: fraction must be a number between 0 and 1 (0.2: a fifth), got {fraction!r}."
        )
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"{where}: seed must be an int, got {seed!r}.")  # noqa: TRY004 - a config value
    return {"fraction": float(fraction), "seed": seed}


def carved_indices(n_rows: int, fraction: float, seed: int) -> list[int]:
    """The indices ``held_out={"fraction", "seed"}`` sets apart, sorted: ``round(fraction * n_rows)`` of them
    (at least 1, at most ``n_rows - 1``), drawn by ``random.Random(seed).sample``."""
    if n_rows < 2:
        raise ValueError(
            f"held_out: {n_rows} row(s) cannot be split into training and held-out rows; add rows."
        )
    count = min(max(1, round(fraction * n_rows)), n_rows - 1)
    return sorted(random.Random(seed).sample(range(n_rows), count))


def _as_messages(prompt: Any, system_prompt: str | None, index: int, column: str) -> Any:
    if isinstance(prompt, str):
        if not prompt.strip():
            raise ValueError(f"row {index}: column {column!r} is empty; every row needs a prompt.")
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        return [*messages, {"role": "user", "content": prompt}]
    if isinstance(prompt, list) and prompt and all(isinstance(m, dict) and "role" in m for m in prompt):
        return prompt
    raise ValueError(
        f"row {index}: column {column!r} holds {type(prompt).__name__} {str(prompt)[:60]!r}; a prompt is text or "
        'a list of {"role": ..., "content": ...} messages.'
    )


def load_prompts(
    split: str = "train",
    source: Any = None,
    *,
    prompt: str = "prompt",
    columns: Mapping[str, str] | None = None,
    system_prompt: str | None = None,
    config: str | None = None,
    held_out: Mapping[str, Any] | None = None,
    part: str = "train",
    select_columns: list[str] | None = None,
):
    """Your rows -> ``datasets.Dataset`` with a conversational ``prompt`` column (module docstring).

    ``source``: a ``.jsonl``/``.json``/``.csv``/``.parquet`` file, a folder, a Hub id (``config``: its
    configuration) or rows already loaded. ``part``: ``"train"`` or ``"held_out"`` (the rows ``held_out``
    names). Errors name the column, the row and the fix.
    """
    if source is None:
        raise ValueError(
            "dataset 'prompts' needs a source: a .jsonl/.json/.csv/.parquet file, a folder or a Hub id 'org/name'."
        )
    held_out = check_held_out(held_out)
    if part not in ("train", "held_out"):
        raise ValueError(f"part must be 'train' or 'held_out', got {part!r}.")
    if part == "held_out" and held_out is None:
        raise ValueError("part='held_out' needs held_out= (a split, or a fraction and a seed).")
    columns = dict(columns or {})
    for name, column in columns.items():
        if not (isinstance(name, str) and isinstance(column, str)):
            raise ValueError(  # noqa: TRY004 - a config value
                f"columns: map names to column names ({{answer: solution}}), got {name!r}: {column!r}."
            )
    if system_prompt is not None and (not isinstance(system_prompt, str) or not system_prompt.strip()):
        raise ValueError(f"system_prompt must be text (or left out), got {system_prompt!r}.")
    read_split = held_out["split"] if part == "held_out" and "split" in held_out else split
    hub_id = source if isinstance(source, str) else "(your data)"
    raw = load_raw(
        source,
        split=read_split,
        hub_id=hub_id,
        hub_config=config,
        name=f"dataset {source}" if isinstance(source, str) else "dataset",
        columns=", ".join([prompt, *columns.values()]),
        text_columns=tuple(columns.values()),
    )
    if select_columns is not None:
        absent = [c for c in select_columns if c not in raw.column_names]
        if absent:
            raise ValueError(
                f"dataset {source}: columns names {', '.join(map(repr, absent))}, which the data has not "
                f"(it has {', '.join(raw.column_names)}); list columns it has."
            )
        dropped = [c for c in [prompt, *columns.values()] if c not in select_columns]
        if dropped:
            raise ValueError(
                f"dataset {source}: columns {list(select_columns)} drops {', '.join(map(repr, dropped))}, which "
                "the prompt or a reward reads; add it to the list."
            )
        raw = raw.select_columns(list(select_columns))
    missing = [c for c in [prompt, *columns.values()] if c not in raw.column_names]
    if missing:
        raise ValueError(
            f"dataset {source}: no column {', '.join(map(repr, missing))} (it has {', '.join(raw.column_names)}); "
            "name the prompt column with prompt: (a recipe file's dataset: {prompt: COLUMN}; TRL's keys name "
            "none, it reads 'prompt') and the others with columns: {reward argument: column}."
        )
    if held_out is not None and "fraction" in held_out:
        carved = set(carved_indices(len(raw), held_out["fraction"], held_out["seed"]))
        keep = [i for i in range(len(raw)) if (i in carved) == (part == "held_out")]
        raw = raw.select(keep)
    renamed = {column: name for name, column in columns.items() if column != name}
    clashes = sorted(set(renamed.values()) & (set(raw.column_names) - set(renamed)))
    if clashes:
        raise ValueError(
            f"dataset {source}: columns maps onto {', '.join(clashes)}, which the data already has; map to another name."
        )

    def to_row(row: dict[str, Any], index: int) -> dict[str, Any]:
        out = {renamed.get(k, k): v for k, v in row.items()}
        out["prompt"] = _as_messages(row[prompt], system_prompt, index, prompt)
        return out

    rows = [to_row(dict(row), index) for index, row in enumerate(raw)]
    import datasets

    return datasets.Dataset.from_list(rows)
