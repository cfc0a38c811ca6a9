"""Local data files (``.jsonl``, ``.json``, ``.csv``, ``.parquet``) -> ``datasets.Dataset``, with errors that
name the file and the line.

``datasets.load_dataset("json"/"csv", ...)`` is not used for text formats, for three reasons:

* CSV type inference turns an answer ``1`` into an int (and ``1.50`` into the float 1.5), while rewards compare
  answers as text; here every CSV cell is read as a string, and numbers in the answer columns of JSON rows
  become the text they were written as (``text_columns``);
* an empty file ended in a bare ``StopIteration``;
* a malformed line or non-UTF-8 bytes gave an Arrow error that named neither the file nor the line.

Parquet keeps its own column types (it stores them); numeric answer columns are cast to strings.
``datasets`` is imported lazily, inside the functions.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any


class DataFileError(ValueError):
    """A local data file that cannot be read as rows; the message names the file, the line and the fix."""


def _empty(path: Path) -> DataFileError:
    return DataFileError(
        f"{path} is empty: it holds no rows. Write one row per line (JSONL) or a header and rows "
        "(CSV), or pass another file."
    )


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")  # -sig: a byte-order mark written by some editors is not data
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise DataFileError(
            f"{path}, line {line}: not UTF-8 text (byte {data[error.start : error.start + 1]!r} at offset "
            f"{error.start}). Save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)."
        ) from error


def _as_text(rows: list[dict[str, Any]], text_columns: Iterable[str]) -> list[dict[str, Any]]:
    """Numbers in text columns -> the string they were written as (an answer ``42`` is the text ``"42"``)."""
    columns = tuple(text_columns)
    for row in rows:
        for column in columns:
            value = row.get(column)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                row[column] = str(value)
    return rows


def _jsonl_rows(path: Path, text: str) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataFileError(
                f"{path}, line {number}: not valid JSON ({error.msg} at column {error.colno}): "
                f"{line[:80]!r}. Each line must be one JSON object."
            ) from error
        if not isinstance(row, dict):
            raise DataFileError(
                f"{path}, line {number}: a JSON {type(row).__name__} where a row object "
                '{"column": value, ...} is expected.'
            )
        rows.append(row)
    return rows


def _json_rows(path: Path, text: str) -> list[dict[str, Any]]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        if error.msg == "Extra data":  # several JSON values: JSON Lines saved as .json
            return _jsonl_rows(path, text)
        raise DataFileError(
            f"{path}, line {error.lineno}: not valid JSON ({error.msg} at column {error.colno})."
        ) from error
    if isinstance(document, dict):
        lists = [value for value in document.values() if isinstance(value, list)]
        if len(lists) != 1:
            raise DataFileError(
                f"{path}: a JSON object; expected a list of row objects, or an object with one "
                'list of rows such as {"data": [{...}, ...]}.'
            )
        document = lists[0]
    if not isinstance(document, list):
        raise DataFileError(f"{path}: a JSON {type(document).__name__}; expected a list of row objects.")
    for index, row in enumerate(document):
        if not isinstance(row, dict):
            raise DataFileError(f"{path}: item {index} is a JSON {type(row).__name__}, not a row object.")
    return document


def _csv_rows(path: Path, text: str) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""), restkey=None)
    rows = []
    try:
        for row in reader:
            if None in row:
                raise DataFileError(
                    f"{path}, line {reader.line_num}: more fields than the header "
                    f"{reader.fieldnames}; quote values that contain commas."
                )
            rows.append(row)
    except csv.Error as error:
        raise DataFileError(f"{path}, line {reader.line_num}: {error}.") from error
    if not rows:
        raise DataFileError(f"{path} has a header ({', '.join(reader.fieldnames or [])}) but no rows.")
    return rows


_TEXT_READERS = {".jsonl": _jsonl_rows, ".json": _json_rows, ".csv": _csv_rows}


def read_data_file(path: str | Path, *, text_columns: Iterable[str] = ()):
    """Rows of a ``.jsonl``/``.json``/``.csv``/``.parquet`` file -> ``datasets.Dataset``.

    CSV cells are strings; numbers in ``text_columns`` become strings too (module docstring).
    Raises :class:`DataFileError` naming the file (and the line) for an empty, malformed or non-UTF-8 file.
    """
    import datasets

    path = Path(path)
    suffix = path.suffix.lower()
    data = path.read_bytes()
    if not data.strip():
        raise _empty(path)
    if suffix == ".parquet":
        return _read_parquet(path, tuple(text_columns))
    if suffix not in _TEXT_READERS:
        raise DataFileError(
            f"{path}: unsupported extension {suffix or '(none)'!r}; use .jsonl, .json, .csv or .parquet."
        )
    rows = _TEXT_READERS[suffix](path, _decode(path, data))
    if not rows:
        raise _empty(path)
    try:
        return datasets.Dataset.from_list(_as_text(rows, text_columns))
    except (TypeError, ValueError) as error:  # pyarrow's ArrowInvalid/ArrowTypeError: mixed types in a column
        raise DataFileError(
            f"{path}: a column holds values of different types in different rows ({error}). "
            "Write each column with one type (e.g. all strings)."
        ) from error


def _read_parquet(path: Path, text_columns: tuple[str, ...]):
    import datasets

    try:
        dataset = datasets.load_dataset("parquet", data_files=str(path), split="train")
    except Exception as error:  # pyarrow raises ArrowInvalid (a ValueError) or OSError; datasets wraps some
        raise DataFileError(
            f"{path} is not a readable Parquet file ({type(error).__name__}: {error})."
        ) from error
    if len(dataset) == 0:
        raise _empty(path)
    for column in text_columns:
        feature = dataset.features.get(column)
        if isinstance(feature, datasets.Value) and feature.dtype.startswith(("int", "uint", "float")):
            dataset = dataset.cast_column(column, datasets.Value("string"))
    return dataset
