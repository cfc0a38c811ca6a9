"""GSM8K formatter and loader on our own fixtures in GSM8K's raw schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from datasets_prep import SYSTEM_PROMPT, XML_COT_FORMAT, format_gsm8k_row, load_gsm8k, synthetic_gsm8k
from rewards import extract_hash_answer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SAMPLE = FIXTURES / "gsm8k_sample.jsonl"


def _raw_rows(path: Path = SAMPLE) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_course_constants_are_verbatim():
    assert SYSTEM_PROMPT == (
        "\nRespond in the following format:\n<reasoning>\n...\n</reasoning>\n<answer>\n...\n</answer>\n"
    )
    assert XML_COT_FORMAT.format(reasoning="r", answer="42") == (
        "<reasoning>\nr\n</reasoning>\n<answer>\n42\n</answer>\n"
    )


def test_formatter_builds_the_course_prompt_and_final_answer():
    row = _raw_rows()[0]
    formatted = format_gsm8k_row(row)
    assert formatted["prompt"] == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": row["question"]},
    ]
    assert formatted["answer"] == "34"


def test_load_from_jsonl_file_matches_the_course_formatting():
    raw = _raw_rows()
    dataset = load_gsm8k(source=str(SAMPLE))
    assert len(dataset) == len(raw)
    assert {"prompt", "answer", "question"} <= set(dataset.column_names)
    for got, row in zip(dataset, raw):
        # The course's get_gsm8k_questions: system + user prompt, answer = text after ####.
        assert got["prompt"][0] == {"role": "system", "content": SYSTEM_PROMPT}
        assert got["prompt"][1] == {"role": "user", "content": row["question"]}
        assert got["answer"] == extract_hash_answer(row["answer"])
    assert [r["answer"] for r in dataset] == ["34", "75", "60", "12", "60"]


@pytest.mark.parametrize("kind", ["parquet", "csv", "json"])
def test_load_from_other_file_types(tmp_path, kind):
    import datasets

    raw = datasets.Dataset.from_list(_raw_rows())
    path = tmp_path / f"gsm8k.{kind}"
    getattr(raw, f"to_{kind}")(str(path))
    dataset = load_gsm8k(source=path)
    assert [r["answer"] for r in dataset] == ["34", "75", "60", "12", "60"]


def test_load_from_directory_picks_the_split():
    train = load_gsm8k("train", source=FIXTURES / "gsm8k_dir")
    test = load_gsm8k("test", source=FIXTURES / "gsm8k_dir")
    assert [r["answer"] for r in train] == ["15", "40", "70"]
    assert [r["answer"] for r in test] == ["12", "21"]


def test_load_from_save_to_disk_directory(tmp_path):
    import datasets

    datasets.DatasetDict({"test": datasets.Dataset.from_list(_raw_rows())}).save_to_disk(
        str(tmp_path / "saved")
    )
    assert len(load_gsm8k("test", source=tmp_path / "saved")) == 5
    with pytest.raises(ValueError, match=r"no split 'train'.*\['test'\]"):
        load_gsm8k("train", source=tmp_path / "saved")


def test_load_from_rows_and_dataset():
    rows = synthetic_gsm8k(16, seed=3)
    from_list = load_gsm8k(source=rows)
    import datasets

    from_dataset = load_gsm8k(source=datasets.Dataset.from_list(rows))
    assert from_list["answer"] == from_dataset["answer"] == [extract_hash_answer(r["answer"]) for r in rows]
    assert from_list["prompt"][0][1]["content"] == rows[0]["question"]


def test_missing_column_names_the_column():
    rows = [{"question": "What is 2+2?", "solution": "#### 4"}]
    with pytest.raises(ValueError, match=r"missing column\(s\) \['answer'\].*'solution'"):
        load_gsm8k(source=rows)


def test_answer_without_hashes_names_row_and_column():
    with pytest.raises(ValueError, match=r"row 1, column 'answer': no final answer after '####'"):
        load_gsm8k(source=FIXTURES / "gsm8k_no_hashes.jsonl")


def test_empty_question_names_row_and_column():
    rows = synthetic_gsm8k(3, seed=0)
    rows[2] = {**rows[2], "question": "   "}
    with pytest.raises(ValueError, match=r"row 2, column 'question'"):
        load_gsm8k(source=rows)


def test_offline_hub_id_error_lists_the_options(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path))  # an empty cache: nothing to fall back on
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path)
    with pytest.raises(OSError) as info:
        load_gsm8k()
    message = str(info.value)
    assert "'openai/gsm8k'" in message and "HF_HUB_OFFLINE" in message
    for option in (".jsonl/.json/.parquet/.csv", "local directory", "list of dicts", "synthetic_gsm8k("):
        assert option in message


def test_worked_examples_sit_between_system_prompt_and_question_in_turn_and_score_full_marks():
    import rewards
    from datasets_prep.gsm8k import WORKED_EXAMPLES

    rows = synthetic_gsm8k(200, seed=0)
    data = load_gsm8k(source=rows[:8], worked_example=True)
    assert len(WORKED_EXAMPLES) == 6
    for i, row in enumerate(data):
        prompt, example = row["prompt"], WORKED_EXAMPLES[i % 6]  # row i shows example i % 6
        assert [m["role"] for m in prompt] == ["system", "user", "assistant", "user"]
        assert prompt[0]["content"] == SYSTEM_PROMPT and prompt[-1]["content"] == rows[i]["question"]
        assert prompt[1]["content"] == example["question"]
        example_answer = [[{"role": "assistant", "content": prompt[2]["content"]}]]
        # Each example answer is exactly what the course's strictest rewards ask for.
        assert rewards.strict_format_reward(example_answer) == [0.5]
        assert rewards.correctness_reward(example_answer, answer=[example["answer"]], prompts=[prompt]) == [
            2.0
        ]
        assert rewards.xmlcount_reward(example_answer) == [0.5]
    # Every calculation of every example is right and ends on its answer.
    for example in WORKED_EXAMPLES:
        steps = re.findall(r"(\d+) ([*/+-]) (\d+) = (\d+)", example["reasoning"])
        assert steps and steps[-1][3] == example["answer"]
        for a, op, b, result in steps:
            value = {"*": int(a) * int(b), "/": int(a) / int(b), "+": int(a) + int(b), "-": int(a) - int(b)}[
                op
            ]
            assert value == int(result), example
    # Six different answers; never one of the synthetic problems they are shown before; default prompts unchanged.
    assert len({e["answer"] for e in WORKED_EXAMPLES}) == 6
    assert not {e["question"] for e in WORKED_EXAMPLES} & {r["question"] for r in rows}
    assert [m["role"] for m in load_gsm8k(source=rows[:1])[0]["prompt"]] == ["system", "user"]


# --- a fading worked example (issue 27, item 5): a curriculum that ends on the course's own prompt ------------


def _carries_example(dataset) -> list[bool]:
    roles = [[m["role"] for m in prompt] for prompt in dataset["prompt"]]
    assert all(r in (["system", "user", "assistant", "user"], ["system", "user"]) for r in roles), roles
    return [len(r) == 4 for r in roles]


def test_a_fade_shows_the_example_on_the_first_rows_fewer_and_fewer_then_on_none():
    import math
    from fractions import Fraction

    from datasets_prep import worked_example_rows

    rows = synthetic_gsm8k(80, seed=0)
    data = load_gsm8k(source=rows, worked_example=True, worked_example_fade=48)
    shown = _carries_example(data)
    assert shown == worked_example_rows(80, 48)
    assert all(shown[:10]) and not any(shown[48:])  # the first rows all carry it, the tail none
    # every prefix holds ceil(sum of the shares 1 - i/48) rows with it: the share falls linearly from 1 to 0
    for k in range(1, 81):
        assert sum(shown[:k]) == math.ceil(sum(max(Fraction(0), 1 - Fraction(i, 48)) for i in range(k)))
    sixths = [sum(shown[i : i + 8]) for i in range(0, 48, 8)]
    assert sixths == sorted(sixths, reverse=True) and sixths[0] == 8 and sum(shown) == 25  # monotone
    # a row with the example is the worked_example=True row, one without is the course's own prompt
    full, course = load_gsm8k(source=rows, worked_example=True), load_gsm8k(source=rows)
    for i, has in enumerate(shown):
        assert data[i]["prompt"] == (full if has else course)[i]["prompt"]
        assert data[i]["answer"] == course[i]["answer"]
    # the same dataset every time, and a shorter one is the longer one's start (cutting keeps the schedule)
    assert load_gsm8k(source=rows, worked_example=True, worked_example_fade=48)["prompt"] == data["prompt"]
    short = load_gsm8k(source=rows[:30], worked_example=True, worked_example_fade=48)
    assert short["prompt"] == data["prompt"][:30]
    assert worked_example_rows(5) == [True] * 5  # no fade: every row
    assert _carries_example(load_gsm8k(source=rows[:3], worked_example=True, worked_example_fade=1)) == [
        True,
        False,
        False,
    ]


def test_guides_put_the_example_in_the_sampling_prompt_and_keep_the_course_prompt():
    from datasets_prep import SAMPLING_PROMPT, prompt_to_sample_from

    rows = synthetic_gsm8k(80, seed=0)
    guided = load_gsm8k(source=rows, worked_example=True, worked_example_fade=48, worked_example_guides=True)
    faded = load_gsm8k(source=rows, worked_example=True, worked_example_fade=48)
    course = load_gsm8k(source=rows)
    assert guided["prompt"] == course["prompt"]  # what the update trains on: the course's prompt, every row
    assert (
        guided[SAMPLING_PROMPT] == faded["prompt"]
    )  # what sampling sees: the fade's prompts, example and all
    assert guided["answer"] == course["answer"]
    assert sum(_carries_example(faded)) == 25 and _carries_example(course) == [False] * 80
    assert [prompt_to_sample_from(r) for r in guided] == faded["prompt"]
    assert [prompt_to_sample_from(r) for r in course] == course["prompt"]  # no column: the prompt itself
    everywhere = load_gsm8k(source=rows[:6], worked_example=True, worked_example_guides=True)
    assert [len(p) for p in everywhere[SAMPLING_PROMPT]] == [4] * 6  # no fade: the example on every row
    assert [len(p) for p in everywhere["prompt"]] == [2] * 6


@pytest.mark.parametrize(
    ("kwargs", "fix"),
    [
        ({"worked_example": True, "worked_example_fade": 0.5}, "must be an int >= 1, the rows over which"),
        ({"worked_example": True, "worked_example_fade": 0}, "must be an int >= 1"),
        ({"worked_example": True, "worked_example_fade": True}, "must be an int >= 1"),
        ({"worked_example": False, "worked_example_fade": 48}, "needs worked_example=True"),
        ({"worked_example_fade": 48}, "needs worked_example=True"),
        ({"worked_example": 0.5}, "must be True or False; to fade the example out"),
        ({"worked_example_guides": True}, "so it needs worked_example=True"),
        (
            {"worked_example": True, "worked_example_guides": 1},
            "worked_example_guides=1 must be True or False",
        ),
    ],
)
def test_a_bad_fade_is_refused_in_one_line_naming_the_fix(kwargs, fix):
    with pytest.raises(ValueError, match=re.escape(fix)) as info:
        load_gsm8k(source=synthetic_gsm8k(4, seed=0), **kwargs)
    assert "\n" not in str(info.value) and str(info.value).startswith("load_gsm8k: ")
