"""Local data files (``.jsonl``, ``.json``, ``.csv``, ``.parquet``) -> ``datasets.Dataset``, with errors that
name the file and the line.

``datasets.load_dataset("json"/"csv", ...)`` is not used for text formats, for three reasons:

* CSV type inference turns an answer ``1`` into an int (and ``1.50`` into the float 1.5), while rewards compare
  answers as text; here every CSV cell is read as a string, and numbers in the answer columns of JSON rows
  become the text they were written as (``text_columns``);
* an empty file ended in a bare ``StopIteration``;
* a malformed line or non-UTF-8 bytes gave an Arrow error that named neither the file nor the line.

Parquet keeps its own column types (it stores them); numeric answer columns are cast to strings.

Every row is bounded: a row longer than :func:`max_row_bytes` (1 MiB, ``GRPO_KIT_MAX_ROW_BYTES`` to change it) is
refused naming the file, the line and the setting, before any model loads. A JSONL file is read one line at a
time (:func:`jsonl_lines`), so a huge line is refused after reading at most the bound, not held in memory whole.
``datasets`` is imported lazily, inside the functions.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


class DataFileError(ValueError):
    """A local data file that cannot be read as rows; the message names the file, the line and the fix."""


#: The setting that bounds a row of a data file, in bytes (:func:`max_row_bytes`).
MAX_ROW_BYTES_SETTING = "GRPO_KIT_MAX_ROW_BYTES"
#: Its default: 1 MiB, some 250k tokens, past any prompt a GRPO run can use; shipped and hand-written rows are < 4 KiB.
DEFAULT_MAX_ROW_BYTES = 1 << 20


def max_row_bytes() -> int:
    """The longest row a data file may hold, in bytes: ``GRPO_KIT_MAX_ROW_BYTES``, else 1 MiB."""
    value = os.environ.get(MAX_ROW_BYTES_SETTING, "").strip()
    if not value:
        return DEFAULT_MAX_ROW_BYTES
    if not value.isdigit() or int(value) < 1:
        raise DataFileError(
            f"{MAX_ROW_BYTES_SETTING}={value!r}: write a number of bytes, e.g. {DEFAULT_MAX_ROW_BYTES}."
        )
    return int(value)


def _too_long(path: Path, where: str, limit: int) -> DataFileError:
    return DataFileError(
        f"{path}, {where}: a row longer than {limit} bytes ({MAX_ROW_BYTES_SETTING}); shorten or drop it, or "
        f"raise the bound if rows this long are meant ({MAX_ROW_BYTES_SETTING}={limit * 4})."
    )


def _unreadable(path: Path, error: OSError) -> DataFileError:
    return DataFileError(
        f"{path} cannot be read ({error.strerror or type(error).__name__}); make it a readable file "
        f"(e.g. `chmod a+r {path}`) or pass another file."
    )


def _open(path: Path):
    """``path`` opened for reading bytes; an unreadable file (no permission, a folder) is :class:`DataFileError`."""
    try:
        return Path(path).open("rb")
    except OSError as error:
        raise _unreadable(Path(path), error) from error


def jsonl_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each line of ``path``, read one at a time (UTF-8, a byte-order mark dropped). A
    line longer than :func:`max_row_bytes` is :class:`DataFileError` naming the line and the setting, after
    reading no more of it than the bound; a line that is not UTF-8 names its line too; an unreadable file
    names the fix."""
    limit = max_row_bytes()
    with _open(path) as file:
        number = 0
        while raw := file.readline(limit + 1):
            number += 1
            if len(raw) > limit and not raw.endswith(b"\n"):
                raise _too_long(path, f"line {number}", limit)
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise DataFileError(
                    f"{path}, line {number}: not UTF-8 text (byte {raw[error.start : error.start + 1]!r} at "
                    f"column {error.start + 1}). Save the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)."
                ) from error
            yield number, text.rstrip("\r\n")


def _check_row_sizes(path: Path, rows: list[dict[str, Any]]) -> None:
    """Each parsed row of a JSON or CSV file within :func:`max_row_bytes` (its JSON text)."""
    limit = max_row_bytes()
    for number, row in enumerate(rows, start=1):
        if len(json.dumps(row, ensure_ascii=False, default=str).encode()) > limit:
            raise _too_long(path, f"row {number}", limit)


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


def _jsonl_rows(path: Path, lines: Iterable[tuple[int, str]]) -> list[dict[str, Any]]:
    rows = []
    for number, line in lines:
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
            return _jsonl_rows(path, enumerate(text.splitlines(), start=1))
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


_TEXT_READERS = {".json": _json_rows, ".csv": _csv_rows}


def read_data_file(path: str | Path, *, text_columns: Iterable[str] = ()):
    """Rows of a ``.jsonl``/``.json``/``.csv``/``.parquet`` file -> ``datasets.Dataset``.

    CSV cells are strings; numbers in ``text_columns`` become strings too (module docstring).
    Raises :class:`DataFileError` naming the file (and the line) for an empty, unreadable, malformed or non-UTF-8
    file, or a row longer than :func:`max_row_bytes`.
    """
    import datasets

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        rows = _jsonl_rows(path, jsonl_lines(path))
    else:
        with _open(path) as file:
            data = file.read()
        if not data.strip():
            raise _empty(path)
        if suffix == ".parquet":
            return _read_parquet(path, tuple(text_columns))
        if suffix not in _TEXT_READERS:
            raise DataFileError(
                f"{path}: unsupported extension {suffix or '(none)'!r}; use .jsonl, .json, .csv or .parquet."
            )
        rows = _TEXT_READERS[suffix](path, _decode(path, data))
        _check_row_sizes(path, rows)
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
