"""Resolve a dataset ``source`` to raw rows (a ``datasets.Dataset``).

A ``source`` is one of:

* ``None`` -- the dataset's Hub id (e.g. ``openai/gsm8k``);
* a Hub id ``org/name``;
* a local directory (``Dataset.save_to_disk`` output, or data files that ``load_dataset`` reads,
  such as ``train.jsonl`` / ``data/train-00000-of-00001.parquet``). Shards of one file are joined;
  different files that ``datasets`` maps onto the same split (GSM8K's ``test.jsonl`` and
  ``test_socratic.jsonl``) are refused with an error naming them and ``source=<file>`` for each;
* a ``.jsonl`` / ``.json`` / ``.parquet`` / ``.csv`` file (all its rows; ``split`` is not used);
* rows already loaded: a ``datasets.Dataset``, a ``DatasetDict`` (``split`` picks one) or a
  ``list[dict]`` (e.g. ``synthetic_gsm8k(64)``).

Without the Hub (``HF_HUB_OFFLINE=1`` or no network) a Hub id still works when the dataset is in
the local ``datasets`` cache; otherwise the error lists every other option, including the
synthetic generators. ``datasets`` is imported lazily, inside the functions.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from datasets_prep.files import _as_text, read_data_file
from datasets_prep.hub import hub_available, offline_vars

FILE_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
_HUB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _options(name: str, columns: str, synthetic: str | None) -> str:
    lines = [
        (
            f"Options for {name}: source=<path to a .jsonl/.json/.parquet/.csv file with columns {columns}>, "
            "source=<a local directory (save_to_disk output or data files)>, "
            "source=<rows already loaded: a datasets.Dataset or a list of dicts>"
        )
    ]
    if synthetic:
        lines.append(f", or offline data that needs no download: source={synthetic}")
    names = offline_vars() or ["HF_HUB_OFFLINE"]
    lines.append(f". With network, unset {' and '.join(names)} to use the Hub.")
    return "".join(lines)


@contextlib.contextmanager
def _datasets_offline():
    """Make ``datasets`` read its cache without touching the network (it decides at import time)."""
    from datasets import config

    previous = config.HF_HUB_OFFLINE
    config.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        config.HF_HUB_OFFLINE = previous


@contextlib.contextmanager
def _datasets_quiet():
    """``datasets`` without its progress bars and below-error log lines, restored after."""
    import datasets
    from datasets.utils import logging as datasets_logging

    bars_off = datasets.are_progress_bars_disabled()
    verbosity = datasets_logging.get_verbosity()
    datasets.disable_progress_bars()
    datasets_logging.set_verbosity(datasets_logging.CRITICAL)
    try:
        yield
    finally:
        datasets_logging.set_verbosity(verbosity)
        if not bars_off:
            datasets.enable_progress_bars()


def _pick_split(data, split: str, where: str):
    from datasets import DatasetDict

    if isinstance(data, DatasetDict):
        if split not in data:
            raise ValueError(
                f"{where} has no split {split!r}; it has {sorted(data)}. Pass split=<one of them> (a recipe "
                "file: split: for the training rows, held_out: {split: ...} for the held-out ones)."
            )
        return data[split]
    return data


def load_raw(
    source: Any,
    *,
    split: str,
    hub_id: str,
    hub_config: str | None = None,
    name: str,
    columns: str,
    synthetic: str | None = None,
    text_columns: Sequence[str] = (),
):
    """Raw rows of a dataset from ``source`` (see the module docstring) -> ``datasets.Dataset``.

    ``name``, ``columns`` and ``synthetic`` only shape error messages: the dataset's display name,
    the columns its raw schema needs, and the synthetic generator call that can replace it.
    ``text_columns``: columns read as text from files and row lists (an answer ``42`` becomes ``"42"``;
    CSV cells are always text): see :mod:`datasets_prep.files`.
    """
    import datasets

    options = _options(name, columns, synthetic)
    if source is None:
        source = hub_id
    if isinstance(source, datasets.Dataset):
        return source
    if isinstance(source, datasets.DatasetDict):
        return _pick_split(source, split, "The DatasetDict passed as source")
    if isinstance(source, (datasets.IterableDataset, datasets.IterableDatasetDict)):
        raise TypeError(
            f"{name}: streaming (Iterable) datasets are not supported as source; load a map-style dataset "
            "(streaming=False) or pass a list of dicts."
        )
    if isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
        rows = list(source)
        if not rows:
            raise ValueError(f"{name}: the list of rows passed as source is empty. " + options)
        for index, row in enumerate(rows):
            if not isinstance(row, dict):
                raise TypeError(
                    f"{name}: source row {index} is a {type(row).__name__}, not a dict; pass a list of dicts "
                    f"with columns {columns}."
                )
        return datasets.Dataset.from_list(_as_text([dict(row) for row in rows], text_columns))
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(
            f"{name}: source must be None, a string or path, a Dataset or a list of dicts; got "
            f"{type(source).__name__}. " + options
        )

    text = os.fspath(source)
    path = Path(text).expanduser()
    suffix = path.suffix.lower()
    if path.is_file():
        if suffix not in FILE_BUILDERS:
            raise ValueError(
                f"{name}: {path} has the extension {suffix or '(none)'!r}; supported files are "
                f"{', '.join(FILE_BUILDERS)}. " + options
            )
        return read_data_file(path, text_columns=text_columns)
    if path.is_dir():
        if (path / "state.json").is_file() or (path / "dataset_dict.json").is_file():
            return _pick_split(datasets.load_from_disk(str(path)), split, str(path))
        try:
            builder = datasets.load_dataset_builder(str(path))
        except Exception as error:  # no data files it understands
            raise ValueError(
                f"{name}: cannot read a dataset from the directory {path} ({error}). " + options
            ) from error
        _refuse_mixed_files(builder.config.data_files, split, path, name)
        with _datasets_quiet():  # its log of a malformed file, and progress bars, are not our one line
            try:
                loaded = datasets.load_dataset(str(path))
            except Exception as error:  # an empty or malformed file: datasets says neither which nor why
                raise _unreadable_folder(builder.config.data_files, path, name, error) from error
        return _pick_split(loaded, split, str(path))
    looks_like_path = suffix in FILE_BUILDERS or text.startswith((".", "/", "~")) or text.count("/") >= 2
    if looks_like_path:
        raise FileNotFoundError(f"{name}: no such file or directory: {path}. " + options)
    if not _HUB_ID_RE.match(text):
        raise ValueError(f"{name}: {text!r} is neither an existing path nor a Hub id 'org/name'. " + options)
    return _load_hub(text, split, hub_config if text == hub_id else None, name, options)


def _relative(file: str, folder: Path) -> str:
    try:
        return Path(file).resolve().relative_to(folder.resolve()).as_posix()
    except ValueError:
        return Path(file).name


def _file_shape(file: str, folder: Path) -> str:
    """A data file's path in ``folder`` with every digit run as ``#``: the shards of one file
    (``train-00000-of-00002.parquet``, ``train-00001-of-00002.parquet``) share a shape; ``test.jsonl``
    and ``test_socratic.jsonl`` do not."""
    return re.sub(r"\d+", "#", _relative(file, folder))


def _refuse_mixed_files(data_files: Any, split: str, folder: Path, name: str) -> None:
    """Raise when ``datasets`` maps files of different shapes onto ``split`` of a local folder.

    ``datasets`` puts every file whose name contains ``test`` in the test split, so the original GSM8K
    folder (``test.jsonl`` and ``test_socratic.jsonl``) gives every question twice, and nothing says so.
    Shards of one file are concatenated as usual. The error names the files and how to pick one."""
    files = [str(f) for f in (data_files or {}).get(split, [])]
    if len({_file_shape(f, folder) for f in files}) < 2:
        return
    names = [_relative(f, folder) for f in files]
    picks = " or ".join(f"source={str(folder / n)!r}" for n in names)
    raise ValueError(
        f"{name}: the directory {folder} puts {len(files)} different files into the split {split!r}: "
        f"{', '.join(names)}. They would be concatenated (the same questions twice, or two variants mixed). "
        f"Pick one file: {picks}."
    )


def _unreadable_folder(data_files: Any, folder: Path, name: str, error: Exception) -> ValueError:
    """Why ``datasets`` could not read the folder, in one line: the first of its data files that
    :func:`read_data_file` refuses (empty, a malformed line, not UTF-8, each naming the file, the line and the
    fix; ``datasets`` raised a bare ``StopIteration`` or "corresponds to no data" for them), else its error."""
    from datasets_prep.files import DataFileError

    files = sorted({str(f) for group in (data_files or {}).values() for f in group})
    for file in files:
        if Path(file).suffix.lower() in FILE_BUILDERS:
            try:
                read_data_file(file)
            except DataFileError as found:
                return found
    reason = " ".join(str(error).split()) or "no message"
    return ValueError(
        f"{name}: cannot read the directory {folder} ({type(error).__name__}: {reason}); check its data files "
        f"({', '.join(_relative(f, folder) for f in files) or 'none'}), or point source at one file."
    )


def _load_hub(repo_id: str, split: str, config_name: str | None, name: str, options: str):
    import datasets

    if hub_available():
        return datasets.load_dataset(repo_id, config_name, split=split)
    # No Hub: the local `datasets` cache is the only place it can come from.
    try:
        with _datasets_offline():
            return datasets.load_dataset(repo_id, config_name, split=split)
    except Exception as error:
        names = offline_vars()
        why = (
            f"{' and '.join(names)} {'are' if len(names) > 1 else 'is'} set"
            if names
            else "the Hub is not reachable"
        )
        raise OSError(
            f"{name}: cannot load {repo_id!r}: {why} and it is not in the local datasets cache "
            f"({type(error).__name__}). " + options
        ) from error
