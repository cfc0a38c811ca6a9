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

``gsm8k-handwritten`` (``gsm8k_handwritten.jsonl``, 40 rows, GSM8K's raw schema: ``question``, ``answer``
ending ``#### <integer>`` with GSM8K's ``<<a*b=c>>`` annotations): grade-school word problems written by hand
for grpo-kit, none produced by ``synthetic_gsm8k``. They avoid its five families (a person's collection, a
wallet, a trip in miles per hour, ages, a daily task), its names and its phrasing ("How many ... does X have
now?"), and vary topics (a ferry, library fines, a choir, coins, a water tank, a tournament, ...), the number
of steps (1 to 4) and the length (two sentences to four, 54 to 261 characters). Its ``loader_kwargs`` ask them as the course asks:
``worked_example=False``, the system prompt alone, whatever the recipe's own prompts show; what a recipe
learns with the worked example before the question (gsm8k-cpu) is measured where it has to hold, without it.

``shapes-transfer`` (no file; 64 rows drawn by ``datasets_prep.images`` with ``style="transfer"``): the image
task's pictures drawn differently, small shapes in the corners on grey where training draws large ones anywhere
on white. The same generator, so it measures whether reading the picture transfers to other sizes and
positions, not to other pictures of the world.

The files are package data (``pyproject.toml``: ``*.jsonl`` in every package), read with
``importlib.resources``, so they are there after ``pip install``.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from datasets_prep.files import read_data_file

__all__ = ["TRANSFER_SETS", "TransferSet", "transfer_set_rows"]


@dataclass(frozen=True)
class TransferSet:
    """A shipped held-out set: the ``dataset`` loader its rows are written for, its ``file`` in this
    package (None: a set the loader itself draws differently, as ``loader_kwargs`` say: shapes-transfer), ``size``, the rows it holds (checked when it is read), and ``description``, what it is and how it
    is asked (run.json, eval.json and report.md print it beside the set's name).

    ``text_columns``: the raw schema's text columns (kept as strings when the file is read).
    ``loader_kwargs``: loader arguments that override the recipe's ``dataset_kwargs`` when the set's rows
    are rendered (``grpo_kit.runs.held_out.transfer_rows``), for a set asked in a setting of its own:
    gsm8k-handwritten's ``{"worked_example": False}`` is the course's prompt, the system prompt alone.
    Default ``{}``: the rows are rendered exactly as the recipe's training rows are.
    ``setting``: those kwargs in a few words, added to the set's label wherever it is reported (run.json,
    eval.json, the report card's heading, the CLI's summary), so that a reader sees which set is asked how:
    "without the worked example". Default "": asked as the held-out rows are."""

    dataset: str
    file: str | None
    size: int
    description: str
    text_columns: tuple[str, ...] = ("prompt",)
    loader_kwargs: Mapping[str, Any] = field(default_factory=dict)
    setting: str = ""


#: The shipped sets, by the name a recipe's ``transfer_eval`` uses.
TRANSFER_SETS: dict[str, TransferSet] = {
    "tldr-handwritten": TransferSet(
        dataset="smoltldr",
        file="tldr_handwritten.jsonl",
        size=40,
        description="40 Reddit-style posts written by hand, apart from synthetic_tldr",
    ),
    "gsm8k-handwritten": TransferSet(
        dataset="gsm8k",
        file="gsm8k_handwritten.jsonl",
        size=40,
        description=(
            "40 grade-school problems written by hand, apart from synthetic_gsm8k, asked with the course's "
            "system prompt alone, no worked example"
        ),
        text_columns=("question", "answer"),
        loader_kwargs={"worked_example": False},
        setting="without the worked example",
    ),
    "shapes-transfer": TransferSet(
        dataset="shapes",
        file=None,
        size=64,
        description=(
            "64 pictures drawn differently from the training ones (datasets_prep.images, style='transfer'): "
            "small shapes (8-14 px; training draws them 14-30 px) in the corners, on a grey background"
        ),
        text_columns=(),
        loader_kwargs={"style": "transfer", "n": 64},
        setting="small shapes in the corners",
    ),
}


def transfer_set_rows(name: str) -> list[dict[str, Any]]:
    """The raw rows (the dataset's raw schema) of the shipped set ``name``, in the file's order."""
    if name not in TRANSFER_SETS:
        raise ValueError(f"unknown held-out set {name!r}; the shipped sets are: {', '.join(TRANSFER_SETS)}.")
    spec = TRANSFER_SETS[name]
    if spec.file is None:
        raise ValueError(
            f"held-out set {name!r} is drawn by the {spec.dataset!r} loader (loader_kwargs {dict(spec.loader_kwargs)}), "
            "not read from a file; grpo_kit.runs.held_out.transfer_rows draws it."
        )
    resource = importlib.resources.files("datasets_prep").joinpath(spec.file)
    with importlib.resources.as_file(resource) as path:
        if not path.is_file():
            raise FileNotFoundError(
                f"held-out set {name!r}: {spec.file} is missing from the installed datasets_prep package "
                f"({path}); reinstall grpo-kit (`pip install --force-reinstall grpo-kit`)."
            )
        rows = read_data_file(path, text_columns=spec.text_columns).to_list()
    if len(rows) != spec.size:
        raise ValueError(
            f"held-out set {name!r}: {spec.file} holds {len(rows)} rows, not the {spec.size} it ships with; "
            "restore the file from the package."
        )
    return rows
