"""Local data files: answers stay text, empty files say so, parse errors name the file and the line."""

from __future__ import annotations

import json

import pytest

from datasets_prep import load_deepmath, load_gsm8k, load_smoltldr
from datasets_prep.files import DataFileError, read_data_file


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
