"""Held-out sets shipped inside the package, written apart from any generator: a second held-out set whose
rows are not drawn from the distribution the training rows come from.

A synthetic recipe's own held-out rows (``grpo_kit.runs.held_out``) come from the generator its training
rows come from: the same topics, sentence templates and length. A gain there may only mean the model learned
the generator. A set here is written differently on purpose, so the same gain measured on it says whether the
learning transfers to text the run has never seen the like of.

``tldr-handwritten`` (``tldr_handwritten.jsonl``, 40 rows, smoltldr's raw schema: ``prompt``): Reddit-style
posts written by hand for grpo-kit, none produced by ``synthetic_tldr``. They avoid its twenty topics
(roommate, job, dog, exam, ...) and its phrasing ("Need advice:", "(24F)", "Any advice on ...?"), and vary
what it keeps fixed: one sentence to eight, questions, lists, rants, technical questions, good news, first
and third person. A recipe renders them through its own loader (``Recipe.load_dataset(source=rows)``), so
they get the instruction and chat template its training rows get.

The file is package data (``pyproject.toml``: ``*.jsonl`` in every package), read with
``importlib.resources``, so it is there after ``pip install``.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from typing import Any

from datasets_prep.files import read_data_file

__all__ = ["TRANSFER_SETS", "TransferSet", "transfer_set_rows"]


@dataclass(frozen=True)
class TransferSet:
    """A shipped held-out set: the ``dataset`` loader its rows are written for, its ``file`` in this
    package, and ``size``, the rows it holds (checked when it is read)."""

    dataset: str
    file: str
    size: int
    description: str


#: The shipped sets, by the name a recipe's ``transfer_eval`` uses.
TRANSFER_SETS: dict[str, TransferSet] = {
    "tldr-handwritten": TransferSet(
        dataset="smoltldr",
        file="tldr_handwritten.jsonl",
        size=40,
        description="40 Reddit-style posts written by hand, apart from synthetic_tldr",
    ),
}


def transfer_set_rows(name: str) -> list[dict[str, Any]]:
    """The raw rows (the dataset's raw schema) of the shipped set ``name``, in the file's order."""
    if name not in TRANSFER_SETS:
        raise ValueError(f"unknown held-out set {name!r}; the shipped sets are: {', '.join(TRANSFER_SETS)}.")
    spec = TRANSFER_SETS[name]
    resource = importlib.resources.files("datasets_prep").joinpath(spec.file)
    with importlib.resources.as_file(resource) as path:
        if not path.is_file():
            raise FileNotFoundError(
                f"held-out set {name!r}: {spec.file} is missing from the installed datasets_prep package "
                f"({path}); reinstall grpo-kit (`pip install --force-reinstall grpo-kit`)."
            )
        rows = read_data_file(path, text_columns=("prompt",)).to_list()
    if len(rows) != spec.size:
        raise ValueError(
            f"held-out set {name!r}: {spec.file} holds {len(rows)} rows, not the {spec.size} it ships with; "
            "restore the file from the package."
        )
    return rows
