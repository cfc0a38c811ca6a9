"""smoltldr and DeepMath-103K loaders on our own fixtures in each dataset's real schema."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from datasets_prep import load_deepmath, load_smoltldr

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_smoltldr_csv_keeps_plain_text_prompt_and_completion():
    with open(FIXTURES / "smoltldr_sample.csv", newline="") as handle:
        raw = list(csv.DictReader(handle))
    dataset = load_smoltldr(source=FIXTURES / "smoltldr_sample.csv")
    assert dataset.column_names == ["prompt", "completion"]
    assert dataset["prompt"] == [r["prompt"] for r in raw]  # standard format: text, unchanged
    assert dataset["completion"] == [r["completion"] for r in raw]


def test_smoltldr_prompt_only_rows_are_fine():
    dataset = load_smoltldr(source=[{"prompt": "A long story about a cat who learned to open doors."}])
    assert dataset["prompt"] == ["A long story about a cat who learned to open doors."]


def test_smoltldr_instruction_makes_a_chat_prompt_around_the_post():
    post = "A long story about a cat who learned to open doors."
    dataset = load_smoltldr(
        source=[{"prompt": post, "completion": "Cat opens doors."}], instruction="Summarize."
    )
    assert dataset["prompt"] == [[{"role": "user", "content": f"Summarize.\n\n{post}"}]]
    assert dataset["completion"] == ["Cat opens doors."]
    with pytest.raises(ValueError, match="instruction must be a non-empty string"):
        load_smoltldr(source=[{"prompt": post}], instruction="  ")


def test_smoltldr_missing_prompt_is_named():
    with pytest.raises(ValueError, match=r"missing column 'prompt'.*'text'"):
        load_smoltldr(source=[{"text": "a post", "completion": "short"}])


def test_smoltldr_empty_prompt_names_row():
    rows = [{"prompt": "fine", "completion": "ok"}, {"prompt": "", "completion": "empty"}]
    with pytest.raises(ValueError, match=r"row 1, column 'prompt': expected non-empty plain text"):
        load_smoltldr(source=rows)


def test_deepmath_parquet_has_prompt_and_solution():
    import pyarrow.parquet as pq

    raw = pq.read_table(FIXTURES / "deepmath_sample.parquet").to_pylist()
    dataset = load_deepmath(source=FIXTURES / "deepmath_sample.parquet")
    assert set(dataset.column_names) == {"prompt", "solution"}
    assert dataset["solution"] == ["3", "24", "1", "6", "720"]
    assert dataset["prompt"] == [r["prompt"] for r in raw]


def test_deepmath_solution_is_what_accuracy_reward_reads():
    from rewards import accuracy_reward

    dataset = load_deepmath(source=FIXTURES / "deepmath_sample.parquet")
    completions = [
        [{"role": "assistant", "content": rf"The answer is \boxed{{{s}}}."}] for s in dataset["solution"]
    ]
    wrong = [[{"role": "assistant", "content": r"The answer is \boxed{12345}."}] for _ in dataset["solution"]]
    assert accuracy_reward(completions, solution=dataset["solution"]) == [1.0] * len(dataset)
    assert accuracy_reward(wrong, solution=dataset["solution"]) == [0.0] * len(dataset)


def test_deepmath_original_schema_and_plain_text_prompts():
    rows = [{"question": "Compute 6*7.", "final_answer": "42", "difficulty": 1.0}]
    dataset = load_deepmath(source=rows)
    assert dataset[0]["prompt"] == [{"role": "user", "content": "Compute 6*7."}]
    assert dataset[0]["solution"] == "42"
    assert "question" not in dataset.column_names


def test_deepmath_wrong_schema_is_explained():
    with pytest.raises(ValueError, match=r"expected 'prompt' and 'solution'"):
        load_deepmath(source=[{"prompt": "What is 1+1?", "answer": "2"}])
    rows = [{"prompt": "What is 1+1?", "solution": "2"}, {"prompt": "What is 2+2?", "solution": " "}]
    with pytest.raises(ValueError, match=r"row 1, column 'solution'"):
        load_deepmath(source=rows)
