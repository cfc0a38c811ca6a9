"""A run folder: its layout, its files about the run, its lock (``grpo_kit.export.card`` reads its files for the
model card).

A ``grpo-kit train`` run folder holds ``run_config.json`` (what identifies the run: its invocation and resolved
recipe, written before training), ``metrics.jsonl``, ``checkpoint-N/``, ``adapter/`` (LoRA + tokenizer),
``merged/`` (16-bit), the report card, ``samples.md`` and ``run.json`` (what ran, written last); a recipe file's
run also ``recipe.yaml`` (the recipe itself, ``grpo_kit.runs.plan.RECIPE_FILE``), which resume and eval read.

* :class:`RunFolder` -- the folder of one run: its paths, whether it holds a run, ``run_config.json``
  (written at the start, read back to resume), ``run.json`` (:meth:`RunFolder.write_summary`,
  :meth:`RunFolder.summary`: checked, since a shared folder may come from someone else: :class:`RunJsonError`
  names the file, the field and the fix), and the lock.
* :class:`TrainedModel` -- what ``grpo-kit eval / export / generate`` act on: a run folder, its ``adapter/`` or
  ``merged/``, an adapter folder or an exported model folder, found once (:meth:`TrainedModel.locate`); the
  base model the adapter belongs to (``--base``, else run.json, else adapter_config.json), the recipe the run
  trained with (its ``recipe.yaml`` for a recipe file's run), and the model loaded.
* :func:`lock_run_folder` takes an exclusive ``fcntl.flock`` on ``<run folder>/.grpo-kit.lock`` for the whole
  run (released when the process ends, however it ends: the kernel drops the lock with the file
  descriptor). The file holds the holder's PID, so a second ``grpo-kit train`` into the same folder is
  refused with :class:`RunFolderInUse` naming it, instead of interleaving ``metrics.jsonl``.
  :func:`check_not_in_use` is the same test without keeping the lock (plan time, before a model loads).

Simplification: ``flock`` locks are advisory and local; on network filesystems that do not forward them
(some NFS setups) two hosts can still share a folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "LOCK_FILE",
    "RunFolder",
    "RunFolderInUse",
    "RunJsonError",
    "TrainedModel",
    "check_not_in_use",
    "lock_run_folder",
    "read_run_json",
]

LOCK_FILE = ".grpo-kit.lock"


class RunFolderInUse(RuntimeError):
    """Another process is running in this run folder; the message names its PID."""


def _holder(lock_path: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        pid = int(lock_path.read_text().strip() or "0")
        if pid > 0:
            return f"PID {pid}"
    return "another process"


def _refused(folder: Path, lock_path: Path) -> RunFolderInUse:
    return RunFolderInUse(
        f"{folder} is in use by another grpo-kit run ({_holder(lock_path)}); two runs in one folder would "
        "interleave their metrics and checkpoints. Wait for it to finish (or stop it), or train into "
        "another --output-dir."
    )


def _try_lock(folder: Path, *, create: bool = True) -> int | None:
    """An open, locked descriptor of the folder's lock file, or :class:`RunFolderInUse`; None when
    ``create`` is False and there is no lock file."""
    lock_path = folder / LOCK_FILE
    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | (os.O_CREAT if create else 0), 0o666)
        except FileNotFoundError:
            if create:
                raise
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise _refused(folder, lock_path) from None
        try:  # the holder may have removed the file between our open and our lock: lock the current one
            same = os.fstat(fd).st_ino == os.stat(lock_path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)


def check_not_in_use(folder: str | os.PathLike) -> None:
    """Raise :class:`RunFolderInUse` when a run holds ``folder``'s lock; a missing folder is not in use."""
    fd = _try_lock(Path(folder), create=False)
    if fd is not None:
        os.close(fd)


@contextlib.contextmanager
def lock_run_folder(folder: str | os.PathLike) -> Iterator[Path]:
    """Hold ``folder``'s exclusive lock while inside (the folder is created if needed); the lock file is
    removed on the way out."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    fd = _try_lock(folder)
    lock_path = folder / LOCK_FILE
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield folder
    finally:
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_ino == os.stat(lock_path).st_ino:
                lock_path.unlink()  # still locked: nobody can take the old file's lock after this
        os.close(fd)


class RunJsonError(ValueError):
    """A ``run.json`` that grpo-kit cannot have written: not JSON, or a field of the wrong type."""


#: The fields of run.json that other commands act on, and the type each must have.
_RUN_JSON_FIELDS = {"recipe": str, "model": str, "loop": str, "training": dict}
_RUN_JSON_MAX_BYTES = 16 << 20  # a run.json is a few kB; a huge one is not ours


def read_run_json(path: str | os.PathLike) -> dict[str, Any]:
    """The content of ``path`` (a ``run.json``), checked: a JSON object whose ``recipe``/``model``/``loop`` are
    strings and ``training`` an object. The values inside ``training`` are checked where they are used, by the
    same rules as command-line input (``grpo_kit.runs.plan.to_loop_config``)."""
    path = Path(path)
    fix = "pass --recipe NAME (and --base MODEL) instead, or restore the run.json `grpo-kit train` wrote"
    try:
        if path.stat().st_size > _RUN_JSON_MAX_BYTES:
            raise RunJsonError(
                f"{path} is {path.stat().st_size} bytes, not a run.json grpo-kit wrote; {fix}."
            )
        info = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RunJsonError(f"{path} is not JSON ({error}); {fix}.") from None
    except RecursionError:
        raise RunJsonError(f"{path} nests too deeply to be a run.json; {fix}.") from None
    if not isinstance(info, dict):
        raise RunJsonError(f"{path} holds a JSON {type(info).__name__}, not an object; {fix}.")
    for name, kind in _RUN_JSON_FIELDS.items():
        if name in info and not isinstance(info[name], kind):
            raise RunJsonError(
                f"{path}: {name!r} is {type(info[name]).__name__} {json.dumps(info[name])[:60]}, not a "
                f"{'name' if kind is str else 'table of settings'}; {fix}."
            )
    return info


# --- the folder of one run ------------------------------------------------------------------------------

RUN_JSON = "run.json"
ADAPTER_DIR = "adapter"
MERGED_DIR = "merged"
#: What a run writes: a folder holding any of these (or a checkpoint) holds a run.
_RUN_FILES = ("run_config.json", RUN_JSON, "metrics.jsonl")


@dataclass(frozen=True)
class RunFolder:
    """The folder of one ``grpo-kit train`` run (it may not exist yet)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def run_json(self) -> Path:
        return self.root / RUN_JSON

    @property
    def adapter_dir(self) -> Path:
        return self.root / ADAPTER_DIR

    @property
    def merged_dir(self) -> Path:
        return self.root / MERGED_DIR

    @property
    def run_config_path(self) -> Path:
        from grpo_kit.artifacts.checkpoint import CONFIG_FILE

        return self.root / CONFIG_FILE

    def holds_a_run(self) -> bool:
        """True when the folder holds anything a run writes (a run's files or checkpoints)."""
        return self.root.is_dir() and (
            any((self.root / name).exists() for name in _RUN_FILES) or any(self.root.glob("checkpoint-*"))
        )

    def contents(self) -> str:
        """The first names in the folder, for a message (``"a, b, c, d and 3 more"``)."""
        names = sorted(p.name for p in self.root.iterdir())
        return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")

    # run_config.json: what identifies the run, written before training, compared on resume

    def write_run_config(self, config: Mapping[str, Any]) -> Path:
        """``run_config.json``: ``config`` (JSON-safe, credentials redacted) and its sha256."""
        from grpo_kit.artifacts.checkpoint import config_hash, jsonable_config

        stored = jsonable_config(dict(config))
        self.run_config_path.write_text(
            json.dumps({"config": stored, "sha256": config_hash(stored)}, indent=2)
        )
        return self.run_config_path

    def latest_checkpoint(self) -> Path | None:
        from grpo_kit.artifacts.checkpoint import latest_checkpoint

        return latest_checkpoint(self.root) if self.root.is_dir() else None

    def stored_run_config(self, checkpoint: Path | None) -> dict[str, Any] | None:
        """The run configuration ``checkpoint`` stored (the one a resume continues from), else the folder's
        ``run_config.json``."""
        from grpo_kit.artifacts.checkpoint import read_checkpoint_config

        stored = read_checkpoint_config(checkpoint) if checkpoint is not None else None
        if stored is None or "recipe" not in stored:
            stored = read_checkpoint_config(self.root)  # the same file format, written at the run's start
        return stored if stored is not None and "recipe" in stored else None

    # run.json: what ran, written last

    def write_summary(self, summary: Mapping[str, Any]) -> Path:
        """``run.json``, written atomically (an interruption leaves no half file)."""
        from grpo_kit.support.paths import write_atomic

        return write_atomic(self.run_json, json.dumps(dict(summary), indent=2, default=str))

    def summary(self) -> dict[str, Any]:
        """``run.json``, checked (:func:`read_run_json`); ``{}`` when the folder has none."""
        return read_run_json(self.run_json) if self.run_json.is_file() else {}

    def has_summary(self) -> bool:
        return self.run_json.is_file()


@dataclass(frozen=True)
class TrainedModel:
    """A trained model to evaluate, export or compare: found in a run folder, its ``adapter/`` or ``merged/``, an
    adapter folder or an exported model folder (:meth:`locate`)."""

    source: Path
    adapter_dir: Path | None  # the LoRA adapter, when there is one
    model_dir: Path | None  # a full model folder (a run's merged/, or an exported model)
    run: RunFolder | None  # the run it came from (run.json in the folder given or the one above it)

    @classmethod
    def locate(cls, source: str | os.PathLike) -> TrainedModel:
        """What ``source`` holds; ``FileNotFoundError`` naming what to pass when it holds no model."""
        source = Path(source)
        if not source.is_dir():
            raise FileNotFoundError(
                f"{source} is not a folder; pass a `grpo-kit train` run folder (run.json + adapter/ or merged/), "
                "an adapter folder (adapter_config.json) or an exported model folder (config.json)."
            )
        run = next((RunFolder(d) for d in (source, source.parent) if RunFolder(d).has_summary()), None)
        folder = RunFolder(source)
        if (folder.adapter_dir / "adapter_config.json").is_file():
            merged = folder.merged_dir if (folder.merged_dir / "config.json").is_file() else None
            return cls(source, folder.adapter_dir, merged, run)
        if (source / "adapter_config.json").is_file():
            return cls(source, source, None, run)
        for model_dir in (folder.merged_dir, source):
            if (model_dir / "config.json").is_file():
                return cls(source, None, model_dir, run)
        raise FileNotFoundError(
            f"{source} holds no adapter (adapter_config.json, adapter/) and no model (config.json); pass a "
            "`grpo-kit train` run folder (run.json + adapter/ or merged/), an adapter folder or a model folder."
        )

    @property
    def in_run_folder(self) -> bool:
        """The adapter is a run folder's ``adapter/`` (so exports go into that run folder)."""
        return self.adapter_dir is not None and self.adapter_dir != self.source

    def base_model_name(self, base: str | None = None) -> str:
        """Which base model the adapter belongs to: ``base``, else the run's run.json, else
        adapter_config.json. ``ValueError`` naming ``--base`` when none says."""
        if base:
            return base
        if self.run is not None and self.run.summary().get("model"):
            return self.run.summary()["model"]
        if self.adapter_dir is not None:
            config = json.loads((self.adapter_dir / "adapter_config.json").read_text())
            if config.get("base_model_name_or_path"):
                return config["base_model_name_or_path"]
            where = f"the adapter in {self.adapter_dir}"
        else:
            where = f"the model in {self.source}"
        raise ValueError(f"cannot tell which base model {where} belongs to; pass --base MODEL.")

    def quantization(self) -> str | None:
        """How the run's base was quantized while it trained (run.json ``quantization``: "4bit" for QLoRA), so
        that the adapter is evaluated on the base it was trained on; None for a plain LoRA run."""
        record = self.run.summary().get("quantization") if self.run is not None else None
        return record.get("quantization") if isinstance(record, dict) else None

    def load(self, base: str | None = None) -> tuple[Any, Any]:
        """``(model, tokenizer)``: the base model with the adapter (tokenizer from the adapter folder), or the
        model folder. ``base`` names the base model when nothing in the folders does. A QLoRA run's adapter
        goes onto its base loaded 4-bit again, as it trained (``grpo_kit.export.save_merged`` still merges it
        onto the 16-bit base)."""
        from grpo_kit.models import load_model

        if self.adapter_dir is None:
            return load_model(self.model_dir)
        from peft import PeftModel
        from transformers import AutoTokenizer

        from grpo_kit.models import prepare_tokenizer

        model, _ = load_model(self.base_model_name(base), quantization=self.quantization())
        tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(self.adapter_dir))
        return PeftModel.from_pretrained(model, self.adapter_dir), tokenizer

    def recipe(self, name: str | None = None, *, trust_reward_code: bool = False):
        """The recipe the run trained with (run.json: name, model and training fields, checked by the rules
        command-line input passes), or the catalogue's ``name``. ``ValueError`` naming ``--recipe`` when
        neither says. A run whose rewards resolve to code outside the installed ``rewards`` package (its
        recipe.yaml's, or run.json's settings') is refused before it is imported unless ``trust_reward_code``
        (``grpo_kit.recipes.files.refuse_reward_code_of_a_run``)."""
        from grpo_kit.config.loop import to_loop_config
        from grpo_kit.recipes.catalogue import get_recipe

        info = self.run.summary() if self.run is not None else {}
        name = name or info.get("recipe")
        if not name:
            raise ValueError(
                f"{self.source} has no run.json naming its recipe; pass --recipe NAME for the held-out prompts."
            )
        if name != info.get("recipe"):
            return get_recipe(name)
        try:
            base = name
            copy = self.run.root / "recipe.yaml" if self.run is not None else None
            # a recipe file's run: the copy it wrote (runs.plan.RECIPE_FILE)
            if copy is not None and copy.is_file():
                from grpo_kit.recipes.files import load_recipe_file

                base = load_recipe_file(copy, trust_reward_code=trust_reward_code)
            model = {"model": info["model"]} if "model" in info else {}
            recipe = get_recipe(base, **model, **info.get("training", {})).validate()
            if not trust_reward_code:
                from grpo_kit.recipes.files import refuse_reward_code_of_a_run

                refuse_reward_code_of_a_run(recipe.rewards, f"the run in {self.run.root}")
            with warnings.catch_warnings():  # fields only TRL has are fine here; their values are not checked
                warnings.simplefilter("ignore", UserWarning)
                to_loop_config(recipe)
        except (ValueError, TypeError) as error:
            raise ValueError(f"{error} (from {self.run.run_json})") from error
        return recipe
