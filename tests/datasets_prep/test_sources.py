"""``source`` resolution: files, directories, rows, Hub ids, and every error path's message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datasets_prep import hub_available, load_gsm8k, load_raw, load_smoltldr, synthetic_gsm8k

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_offline_env_means_no_hub(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_available() is False


def test_missing_file_is_named(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(
        FileNotFoundError, match=r"no such file or directory: .*nope\.jsonl.*Options for GSM8K"
    ):
        load_gsm8k(source=missing)


def test_unsupported_extension_lists_supported_ones(tmp_path):
    path = tmp_path / "gsm8k.txt"
    path.write_text("question,answer\n")
    with pytest.raises(ValueError, match=r"'\.txt'.*\.jsonl, \.json, \.parquet, \.csv"):
        load_gsm8k(source=path)


def test_directory_without_data_is_explained(tmp_path):
    (tmp_path / "notes.md").write_text("nothing here")
    with pytest.raises(ValueError, match=r"cannot read a dataset from the directory"):
        load_gsm8k(source=tmp_path)


def test_missing_split_in_directory_lists_splits():
    with pytest.raises(ValueError, match=r"no split 'validation'.*\['test', 'train'\]"):
        load_gsm8k("validation", source=FIXTURES / "gsm8k_dir")


def test_not_a_hub_id_or_path():
    with pytest.raises(ValueError, match=r"neither an existing path nor a Hub id"):
        load_gsm8k(source="gsm8k please")


def test_rows_must_be_dicts():
    with pytest.raises(TypeError, match=r"source row 1 is a str, not a dict"):
        load_gsm8k(source=[synthetic_gsm8k(1)[0], "What is 2+2?"])


def test_empty_rows_rejected():
    with pytest.raises(ValueError, match=r"list of rows passed as source is empty"):
        load_gsm8k(source=[])


def test_wrong_source_type():
    with pytest.raises(
        TypeError, match=r"source must be None, a string or path, a Dataset or a list of dicts"
    ):
        load_gsm8k(source=42)


def test_offline_other_hub_id_lists_options(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path)
    with pytest.raises(OSError, match=r"cannot load 'someone/tldr-posts'.*synthetic_tldr\(n, seed=0\)"):
        load_smoltldr(source="someone/tldr-posts")


def test_offline_hub_id_served_from_the_datasets_cache(monkeypatch, tmp_path):
    """A Hub dataset already in the local `datasets` cache loads offline (what a classroom pre-caches)."""
    import datasets
    from datasets.data_files import DataFilesDict
    from datasets.packaged_modules.json.json import Json

    # Fill the cache exactly where `load_dataset("org/gsm8k-mini")` would have put it.
    builder = Json(
        cache_dir=str(tmp_path),
        dataset_name="gsm8k-mini",
        repo_id="org/gsm8k-mini",
        hash="abc",
        data_files=DataFilesDict.from_patterns({"train": [str(FIXTURES / "gsm8k_sample.jsonl")]}),
    )
    builder.download_and_prepare()
    (config_dir,) = (tmp_path / "org___gsm8k-mini").glob("default-*")
    config_dir.rename(config_dir.parent / "default")  # a Hub download's config is named "default"
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    dataset = load_gsm8k(source="org/gsm8k-mini")
    assert dataset["answer"] == ["34", "75", "60", "12", "60"]
    with pytest.raises(OSError, match="not in the local datasets cache"):
        load_raw("org/absent", split="train", hub_id="org/absent", name="X", columns="a")


def test_dataset_dict_source_picks_split():
    import datasets

    rows = synthetic_gsm8k(4, seed=1)
    dd = datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(rows), "test": datasets.Dataset.from_list(rows[:1])}
    )
    assert len(load_gsm8k("test", source=dd)) == 1
    with pytest.raises(ValueError, match=r"has no split 'validation'"):
        load_gsm8k("validation", source=dd)


def _gsm8k_folder(folder: Path, files: dict[str, int]) -> Path:
    """A folder laid out like GSM8K's own data directory: ``{file name: number of rows}``."""
    folder.mkdir(parents=True, exist_ok=True)
    for file_name, n in files.items():
        stem = file_name.split(".")[0]
        rows = [{"question": f"{stem} question {i}?", "answer": f"{stem} steps\n#### {i}"} for i in range(n)]
        (folder / file_name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def test_a_folder_with_two_variants_of_a_split_is_refused_naming_both(tmp_path):
    """GSM8K's data folder holds test.jsonl and test_socratic.jsonl: `datasets` puts both in the test
    split, and the loader returned every question twice. It must refuse and say how to pick one."""
    folder = _gsm8k_folder(tmp_path / "gsm8k", {"test.jsonl": 3, "test_socratic.jsonl": 3, "train.jsonl": 5})
    with pytest.raises(ValueError) as caught:
        load_gsm8k("test", source=folder)
    message = str(caught.value)
    assert "test.jsonl" in message and "test_socratic.jsonl" in message and "'test'" in message
    assert f"source={str(folder / 'test.jsonl')!r}" in message
    assert f"source={str(folder / 'test_socratic.jsonl')!r}" in message
    # Each file, picked as the error says, gives its own rows: nothing lost, nothing doubled.
    plain = load_gsm8k(source=folder / "test.jsonl")
    socratic = load_gsm8k(source=folder / "test_socratic.jsonl")
    assert [r["question"] for r in plain] == [f"test question {i}?" for i in range(3)]
    assert [r["question"] for r in socratic] == [f"test_socratic question {i}?" for i in range(3)]
    assert len(load_gsm8k("train", source=folder)) == 5  # an unambiguous split still loads


def test_sibling_loaders_refuse_the_same_ambiguity(tmp_path):
    folder = tmp_path / "tldr"
    folder.mkdir()
    for stem in ("train", "train_extra"):
        (folder / f"{stem}.jsonl").write_text(
            json.dumps({"prompt": f"{stem} post", "completion": "tl;dr"}) + "\n"
        )
    with pytest.raises(ValueError, match=r"train\.jsonl, train_extra\.jsonl.*Pick one file: source="):
        load_smoltldr("train", source=folder)


def test_shards_of_one_file_are_still_concatenated(tmp_path):
    folder = _gsm8k_folder(
        tmp_path / "sharded", {"train-00000-of-00002.jsonl": 2, "train-00001-of-00002.jsonl": 3}
    )
    assert len(load_gsm8k("train", source=folder)) == 5
