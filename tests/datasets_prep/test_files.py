"""Local data files: answers stay text, empty files say so, parse errors name the file and the line."""

from __future__ import annotations

import json

import pytest

from datasets_prep import load_deepmath, load_gsm8k, load_smoltldr
from datasets_prep.files import DEFAULT_MAX_ROW_BYTES, MAX_ROW_BYTES_SETTING, DataFileError, read_data_file


def test_csv_with_numeric_answers_loads_them_as_text(tmp_path):
    path = tmp_path / "math.csv"
    path.write_text('prompt,solution\n"What is 1 + 0?",1\nHalf of 3?,1.50\nWhat is 007?,007\n')
    data = load_deepmath(source=str(path))
    assert data["solution"] == ["1", "1.50", "007"]  # exactly as written: no int, no 1.5, no 7
    assert data[0]["prompt"] == [{"role": "user", "content": "What is 1 + 0?"}]


def test_jsonl_with_numeric_and_text_answers_mixed(tmp_path):
    path = tmp_path / "math.jsonl"
    rows = [
        {"prompt": "2 + 2?", "solution": 4},
        {"prompt": "A half?", "solution": "\\frac{1}{2}"},
        {"prompt": "pi to 2 places?", "solution": 3.14},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert load_deepmath(source=path)["solution"] == ["4", "\\frac{1}{2}", "3.14"]
    assert load_deepmath(source=rows)["solution"] == ["4", "\\frac{1}{2}", "3.14"]  # rows passed directly


def test_parquet_numeric_answer_column_is_cast_to_text(tmp_path):
    import datasets

    path = tmp_path / "math.parquet"
    datasets.Dataset.from_list([{"prompt": "2 + 2?", "solution": 4}]).to_parquet(str(path))
    assert load_deepmath(source=path)["solution"] == ["4"]


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
@pytest.mark.parametrize("content", ["", "\n\n  \n"], ids=["zero-bytes", "blank-lines"])
def test_empty_file_says_it_is_empty(tmp_path, suffix, content):
    path = tmp_path / f"data{suffix}"
    path.write_text(content)
    with pytest.raises(DataFileError, match=rf"data\{suffix} is empty: it holds no rows"):
        load_gsm8k(source=path)


def test_csv_with_only_a_header(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("question,answer\n")
    with pytest.raises(DataFileError, match=r"data\.csv has a header \(question, answer\) but no rows"):
        load_gsm8k(source=path)


def test_malformed_jsonl_line_is_named(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text('{"question": "q1", "answer": "#### 1"}\n\n{"question": "q2", "answer": "#### 2"\n')
    with pytest.raises(DataFileError, match=r"data\.jsonl, line 3: not valid JSON .*q2"):
        load_gsm8k(source=path)
    path.write_text('{"question": "q1", "answer": "#### 1"}\n["not", "a", "row"]\n')
    with pytest.raises(DataFileError, match=r"data\.jsonl, line 2: a JSON list where a row object"):
        load_gsm8k(source=path)


def test_non_utf8_bytes_are_named_with_the_line(tmp_path):
    path = tmp_path / "data.jsonl"
    good = b'{"prompt": "Summarize: a", "completion": "b"}\n'
    path.write_bytes(good * 2 + '{"prompt": "Caf\u00e9", "completion": "c"}\n'.encode("latin-1"))
    with pytest.raises(
        DataFileError, match=r"data\.jsonl, line 3: not UTF-8 text \(byte b'\\xe9'.*Save the file"
    ):
        load_smoltldr(source=path)
    csv_path = tmp_path / "data.csv"
    csv_path.write_bytes(b"prompt,completion\nok,fine\n\xff\xfe,x\n")
    with pytest.raises(DataFileError, match=r"data\.csv, line 3: not UTF-8"):
        load_smoltldr(source=csv_path)


def test_json_file_shapes(tmp_path):
    rows = [{"question": "q", "answer": "#### 1"}]
    path = tmp_path / "data.json"
    for document in (rows, {"data": rows}):
        path.write_text(json.dumps(document))
        assert load_gsm8k(source=path)["answer"] == ["1"]
    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps(rows[0]))  # JSON Lines saved as .json
    assert len(read_data_file(path)) == 2
    path.write_text('[{"question": "q",\n "answer": }]')
    with pytest.raises(DataFileError, match=r"data\.json, line 2: not valid JSON"):
        read_data_file(path)


def test_csv_row_with_extra_fields_is_named(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("question,answer\nq1,#### 1\nq2,#### 2,oops\n")
    with pytest.raises(DataFileError, match=r"data\.csv, line 3: more fields than the header"):
        read_data_file(path)


def test_mixed_column_types_are_explained(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(
        '{"question": "q", "answer": "#### 1", "extra": 1}\n{"question": "q", "answer": "#### 1", '
        '"extra": {"a": 1}}\n'
    )
    with pytest.raises(DataFileError, match="holds values of different types"):
        read_data_file(path)


# --- bounded rows (issue 55): a row longer than the bound is refused naming the line and the setting --------


def test_a_row_longer_than_the_bound_is_refused_naming_the_line_and_the_setting(tmp_path, monkeypatch):
    monkeypatch.setenv(MAX_ROW_BYTES_SETTING, "64")
    at_bound = json.dumps({"prompt": "x" * 50})  # 64 bytes with its newline's line ending excluded
    assert len(at_bound) == 64
    path = tmp_path / "rows.jsonl"
    path.write_text(at_bound + "\n" + at_bound + "\n")
    assert len(read_data_file(path)) == 2  # a row of exactly the bound is read
    path.write_text(at_bound + "\n" + json.dumps({"prompt": "x" * 51}) + "\n")
    with pytest.raises(
        DataFileError, match=r"rows\.jsonl, line 2: a row longer than 64 bytes \(GRPO_KIT_MAX_ROW"
    ):
        read_data_file(path)
    for name, text, where in (
        ("rows.json", json.dumps([{"prompt": "a"}, {"prompt": "x" * 80}]), "row 2"),
        ("rows.csv", "prompt\na\n" + "x" * 80 + "\n", "row 2"),
    ):
        (tmp_path / name).write_text(text)
        with pytest.raises(DataFileError, match=rf"{where}: a row longer than 64 bytes"):
            read_data_file(tmp_path / name)


def test_the_bound_applies_to_prompts_image_rows_and_sft_rows(tmp_path, monkeypatch):
    from PIL import Image

    from datasets_prep.images import load_image_tasks
    from datasets_prep.prompts import load_prompts
    from datasets_prep.sft_rows import load_sft_rows

    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    monkeypatch.setenv(MAX_ROW_BYTES_SETTING, "100")
    long_row = {"prompt": "<image>" + "x" * 200, "completion": "c", "image": "a.png", "answer": "a"}
    path = tmp_path / "rows.jsonl"
    path.write_text(
        json.dumps({"prompt": "<image>a", "completion": "c", "image": "a.png", "answer": "a"})
        + "\n"
        + json.dumps(long_row)
        + "\n"
    )
    for read in (
        lambda: load_prompts("train", str(path)),
        lambda: load_image_tasks(path),
        lambda: load_sft_rows(str(path)),
    ):
        with pytest.raises(
            ValueError, match=r"line 2: a row longer than 100 bytes \(GRPO_KIT_MAX_ROW_BYTES\)"
        ):
            read()


def test_a_bad_bound_setting_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv(MAX_ROW_BYTES_SETTING, "lots")
    (tmp_path / "rows.jsonl").write_text('{"prompt": "a"}\n')
    with pytest.raises(DataFileError, match=r"GRPO_KIT_MAX_ROW_BYTES='lots': write a number of bytes"):
        read_data_file(tmp_path / "rows.jsonl")


def test_a_row_of_megabytes_is_refused_without_holding_it_in_memory(tmp_path):
    import time
    import tracemalloc

    import datasets  # noqa: F401 - imported before measuring: its import is not the reader's memory

    path = tmp_path / "rows.jsonl"
    with path.open("w") as file:
        file.write('{"prompt": "fine"}\n{"prompt": "')
        for _ in range(8):
            file.write("x" * (1 << 20))
        file.write('"}\n')
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(DataFileError, match=rf"line 2: a row longer than {DEFAULT_MAX_ROW_BYTES} bytes"):
            read_data_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 5
    assert peak < 3 * DEFAULT_MAX_ROW_BYTES  # at most the bound was read of the 8 MiB line


@pytest.mark.parametrize("name", ["d.jsonl", "d.csv"])
def test_a_file_that_cannot_be_opened_is_named_with_the_fix(tmp_path, name):
    """A folder where the file is expected (as a file without read permission, for a user other than root)."""
    (tmp_path / name).mkdir()
    with pytest.raises(
        DataFileError, match=rf"{name} cannot be read \(Is a directory\); make it a readable file"
    ):
        read_data_file(tmp_path / name)
