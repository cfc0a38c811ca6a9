"""Checkpoints of the standalone loop: everything needed to continue a run bit for bit, and nothing that runs code.

A checkpoint is a folder ``<output_dir>/checkpoint-<step>/`` (TRL's naming) holding:

* the weights: a LoRA adapter (``adapter_model.safetensors`` + ``adapter_config.json``, loadable with
  ``PeftModel.from_pretrained``) or, without LoRA, the whole model (``model.safetensors``); plus the tokenizer;
* ``optimizer.pt``, ``scheduler.pt``: state dicts of tensors and plain values, read with
  ``torch.load(weights_only=True)``;
* ``rng_state.json`` + ``rng_state.safetensors``: python ``random``, numpy and torch (CPU, and CUDA when
  present) generator states;
* ``trainer_state.json``: global step, data position, epoch, ``log_history`` (like TRL's file of that name);
* ``rollout.json`` + ``rollout.safetensors`` when ``num_iterations > 1`` and the run stopped inside a block of
  steps that reuse one generation batch, so the resumed run reuses the very same completions;
* ``run_config.json``: the resolved configuration of the run and its sha256 (:func:`config_hash`), so a resume
  can tell whether it continues the same run (:func:`read_checkpoint_config`, :func:`config_diff`).

Why no pickle: people share run folders, and unpickling a file can run any code it names (a crafted
``rng_state.pth`` ran ``os.system`` on ``--resume``). Everything here is JSON, safetensors, or
``torch.load(weights_only=True)``, which only rebuilds tensors and plain containers. A file that needs more is
refused with :class:`CheckpointError` before anything in it runs. Checkpoints of older grpo-kit versions
(``rng_state.pth``, ``rollout.pt``) are still read, with ``weights_only=True`` and numpy's array type allowed.

Loaded weights are checked to be finite: a corrupted or diverged checkpoint stops the resume with the name of
the first bad tensor instead of training on NaN. Saved weights are checked too: :func:`save_checkpoint` refuses
a model whose trainable weights hold NaN/inf (:class:`NonFiniteWeightsError`), so every checkpoint is a good state.

No credential is written: :func:`jsonable_config` (every configuration a run stores) replaces fields that TRL
treats as credentials (``hub_token``: :func:`is_credential_field`) with :data:`CREDENTIAL_PLACEHOLDER`, and
:func:`config_hash` / :func:`config_diff` leave them out (the redaction itself lives in ``grpo_kit.config.stored``).

The folder is written under a temporary name and renamed at the end, so a run killed while saving
never leaves a half checkpoint for ``resume_from_checkpoint=True`` to pick up.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import re
import shutil
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from grpo_kit.config.stored import (  # re-exported: checkpoint was their home
    CREDENTIAL_PLACEHOLDER,
    is_credential_field,
    jsonable_config,
    without_credentials,
)
from grpo_kit.models.lora import is_peft_model

__all__ = [
    "ABSENT",
    "CREDENTIAL_PLACEHOLDER",
    "CheckpointError",
    "HalfFinishedCheckpointWarning",
    "NonFiniteWeightsError",
    "capture_rng_state",
    "check_finite",
    "check_weights_finite",
    "config_diff",
    "config_hash",
    "format_config_diff",
    "incomplete_checkpoints",
    "is_credential_field",
    "jsonable_config",
    "latest_checkpoint",
    "load_checkpoint",
    "non_finite_parameters",
    "read_checkpoint_config",
    "restore_rng_state",
    "resume_target",
    "rotate_checkpoints",
    "save_checkpoint",
    "trainable_parameters",
    "without_credentials",
]

_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
CONFIG_FILE = "run_config.json"


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: unreadable, unsafe to load, non-finite, or from another configuration."""


class NonFiniteWeightsError(CheckpointError):
    """Trainable weights hold NaN/inf: such a model is never saved, exported or called verified."""


def capture_rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ----------------------------------------------------------------------------------------------------------
# Pickle-free storage of nested Python values with tensors: structure as JSON, tensors as safetensors


def _encode(value: Any, tensors: dict[str, torch.Tensor], where: str) -> Any:
    """A JSON value for ``value``; every container is tagged so decoding is exact (tuple vs list, int keys)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, torch.Tensor):
        key = f"t{len(tensors)}"
        tensors[key] = value.detach().cpu().contiguous().clone()  # clone: safetensors refuses shared storage
        return {"tensor": key}
    if isinstance(value, np.ndarray):
        return {"ndarray": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, tensors, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, tensors, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {
            "dict": [
                [_encode(k, tensors, f"{where} key"), _encode(v, tensors, f"{where}[{k!r}]")]
                for k, v in value.items()
            ]
        }
    raise TypeError(
        f"{where}: a {type(value).__name__} cannot be stored without pickle; checkpoints hold "
        "tensors, numpy arrays, numbers, strings, None and lists/tuples/dicts of them."
    )


def _decode(value: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(value, list):
        return [_decode(v, tensors) for v in value]
    if not isinstance(value, dict):
        return value
    if "tensor" in value:
        return tensors[value["tensor"]]
    if "ndarray" in value:
        return np.asarray(value["ndarray"], dtype=np.dtype(value["dtype"]))
    if "tuple" in value:
        return tuple(_decode(v, tensors) for v in value["tuple"])
    return {_decode(k, tensors): _decode(v, tensors) for k, v in value["dict"]}


def _save_tree(value: Any, folder: Path, stem: str) -> None:
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    structure = _encode(value, tensors, stem)
    save_file(tensors, str(folder / f"{stem}.safetensors"))
    (folder / f"{stem}.json").write_text(json.dumps(structure))


def _load_tree(folder: Path, stem: str, device: torch.device | str = "cpu") -> Any:
    structure = _read_json(folder / f"{stem}.json")
    tensors = _read_safetensors(folder / f"{stem}.safetensors", device=str(device))
    try:
        return _decode(structure, tensors)
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(
            f"{folder / (stem + '.json')} does not describe a grpo-kit {stem} ({error!r}); "
            "the checkpoint is corrupt: resume from an earlier checkpoint-<step>."
        ) from error


# ----------------------------------------------------------------------------------------------------------
# Reading files with errors that name the file and the fix


def _unreadable(path: Path, error: BaseException) -> CheckpointError:
    return CheckpointError(
        f"checkpoint file {path} cannot be read (truncated or corrupt: {error}). Resume from "
        "an earlier checkpoint-<step> folder, or delete this one and start again."
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _unreadable(path, error) from error


def _read_safetensors(path: Path, device: str = "cpu") -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device=device)
    except Exception as error:  # SafetensorError (header/size mismatch of a truncated file), OSError
        raise _unreadable(path, error) from error


def _legacy_numpy_globals() -> list:
    """What an old pickled ``rng_state.pth`` needs besides tensors: numpy's array type (no code)."""
    from numpy import dtypes

    multiarray = getattr(np, "_core", None) or np.core
    return [multiarray.multiarray._reconstruct, np.ndarray, np.dtype, dtypes.UInt32DType]


def _torch_load(path: Path, *, map_location: Any = "cpu", allow_numpy: bool = False) -> Any:
    """``torch.load(weights_only=True)``: tensors and plain containers only; anything else is refused unrun."""
    try:
        if allow_numpy:
            with torch.serialization.safe_globals(_legacy_numpy_globals()):
                return torch.load(path, map_location=map_location, weights_only=True)
        return torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as error:
        raise CheckpointError(
            f"refused to load {path}: it contains Python objects other than tensors and plain values, and "
            "unpickling them could run code. grpo-kit never writes such files; do not resume from a checkpoint "
            "you did not create yourself."
        ) from error
    except (RuntimeError, EOFError, OSError) as error:
        raise _unreadable(path, error) from error


# ----------------------------------------------------------------------------------------------------------
# Finiteness


def check_finite(tensors: dict[str, torch.Tensor], where: str) -> None:
    """Raise :class:`CheckpointError` naming the first tensor of ``tensors`` that holds NaN or ±inf."""
    for name, tensor in tensors.items():
        if (
            isinstance(tensor, torch.Tensor)
            and tensor.is_floating_point()
            and not bool(torch.isfinite(tensor).all())
        ):
            bad = int((~torch.isfinite(tensor)).sum())
            raise CheckpointError(
                f"{where}: tensor {name!r} holds {bad} non-finite value(s) (NaN/inf) out of {tensor.numel()}; "
                "the file is corrupt or the run had diverged. Resume from an earlier checkpoint-<step>."
            )


def trainable_parameters(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    """``(name, parameter)`` for every parameter with ``requires_grad`` (with LoRA: the adapter only)."""
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad]


def non_finite_parameters(named: Sequence[tuple[str, torch.Tensor]]) -> list[str]:
    """The names of the tensors in ``named`` that hold a NaN or ±inf. One fused max-|x| per tensor and one
    device sync, so it can run after every optimizer step (NaN propagates through the max, inf is inf)."""
    tensors = [t.detach() for _, t in named if t.is_floating_point() and t.numel()]
    if not tensors:
        return []
    peaks = torch.stack(torch._foreach_norm(tensors, float("inf")))  # (K,) max |x| of each tensor
    finite = torch.isfinite(peaks)
    if bool(finite.all()):
        return []
    names = [name for name, t in named if t.is_floating_point() and t.numel()]
    return [name for name, ok in zip(names, finite.tolist()) if not ok]


def check_weights_finite(model: torch.nn.Module, where: str, *, trainable_only: bool = True) -> None:
    """Raise :class:`NonFiniteWeightsError` when a (trainable) weight of ``model`` is NaN/inf; ``where`` says
    what was about to happen (``"saving checkpoint-3"``). ``trainable_only=False`` checks every weight (an
    exported model, whose base weights are part of the file)."""
    named = trainable_parameters(model) if trainable_only else list(model.named_parameters())
    bad = non_finite_parameters(named)
    if bad:
        raise NonFiniteWeightsError(
            f"{where}: refused, {len(bad)} of {len(named)} {'trainable ' if trainable_only else ''}weight "
            f"tensors hold NaN/inf (first: {bad[0]}). The run diverged; nothing was written. Lower "
            "learning_rate, keep adam_epsilon > 0 (1e-8), and resume from the last checkpoint-<step>."
        )


def _optimizer_tensors(state_dict: dict[str, Any]) -> dict[str, torch.Tensor]:
    return {
        f"state[{param}][{key}]": value
        for param, slots in state_dict.get("state", {}).items()
        for key, value in slots.items()
        if isinstance(value, torch.Tensor)
    }


# ----------------------------------------------------------------------------------------------------------
# The run's configuration (credentials redacted by grpo_kit.config.stored)


def config_hash(config: Any) -> str:
    """sha256 of the configuration's canonical JSON (sorted keys): equal configurations, equal hashes.
    Credential fields are left out (a token is not part of what a run computes)."""
    text = json.dumps(without_credentials(jsonable_config(config)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_checkpoint_config(checkpoint_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The configuration stored in a checkpoint (None for one saved without it); its hash is checked."""
    path = Path(checkpoint_dir) / CONFIG_FILE
    if not path.is_file():
        return None
    stored = _read_json(path)
    if not isinstance(stored, dict) or "config" not in stored or "sha256" not in stored:
        raise CheckpointError(
            f"{path} is not a grpo-kit run configuration (expected keys 'config' and 'sha256')."
        )
    if config_hash(stored["config"]) != stored["sha256"]:
        raise CheckpointError(
            f"{path}: the configuration does not match its sha256; the file was edited or is "
            "corrupt. Restore it, or start a new run instead of resuming."
        )
    return stored["config"]


class _Absent:
    """Marks a field that one of two configurations does not have."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()


def _flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(config, dict) and config:
        flat: dict[str, Any] = {}
        for key, value in config.items():
            flat.update(_flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: config}


def config_diff(stored: dict, current: dict) -> dict[str, tuple[Any, Any]]:
    """Fields whose values differ -> ``(stored value, current value)``; nested dicts give dotted names
    (``"lora.r"``); a field only one side has shows :data:`ABSENT` on the other. Values are compared as
    :func:`jsonable_config` writes them, so a tuple equals the list it was stored as."""
    old = _flatten(without_credentials(jsonable_config(stored)))
    new = _flatten(without_credentials(jsonable_config(current)))
    return {
        name: (old.get(name, ABSENT), new.get(name, ABSENT))
        for name in sorted(old.keys() | new.keys())
        if old.get(name, ABSENT) != new.get(name, ABSENT)
    }


def format_config_diff(diff: dict[str, tuple[Any, Any]]) -> str:
    """One line per differing field: ``  name: <stored> (checkpoint) -> <current> (now)``."""
    return "\n".join(f"  {name}: {old!r} (checkpoint) -> {new!r} (now)" for name, (old, new) in diff.items())


# ----------------------------------------------------------------------------------------------------------
# Save and load


def save_checkpoint(
    checkpoint_dir: str | Path,
    *,
    model: torch.nn.Module,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    trainer_state: dict[str, Any],
    rng_state: dict[str, Any],
    rollout: dict[str, Any] | None = None,
    config: Any = None,
) -> Path:
    """Write a complete checkpoint to ``checkpoint_dir`` (replacing one already there) and return it.

    ``config``: the run's resolved configuration (a dict or a dataclass), stored with its sha256 in
    ``run_config.json`` so a resume can compare it (:func:`read_checkpoint_config`, :func:`config_diff`).
    """
    final = Path(checkpoint_dir)
    check_weights_finite(model, f"saving {final.name}")  # the last good state is finite, or not written
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)  # PEFT: the adapter only; plain model: all weights
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    _save_tree(rng_state, tmp, "rng_state")
    if rollout is not None:
        _save_tree(rollout, tmp, "rollout")
    if config is not None:
        stored = jsonable_config(config)
        (tmp / CONFIG_FILE).write_text(
            json.dumps({"config": stored, "sha256": config_hash(stored)}, indent=2)
        )
    (tmp / "trainer_state.json").write_text(json.dumps(trainer_state, indent=2))
    from grpo_kit.support.paths import make_shareable

    for written in tmp.iterdir():  # safetensors writes 0600; the run folder honours the umask
        if written.is_file() and not written.is_symlink():
            make_shareable(written)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    return final


def _load_weights(path: Path, model: torch.nn.Module) -> None:
    if is_peft_model(model):
        from peft import set_peft_model_state_dict

        adapter_file = path / "adapter_model.safetensors"
        if not adapter_file.exists():
            raise FileNotFoundError(
                f"{adapter_file} missing: this checkpoint was saved from a model without LoRA."
            )
        adapter = _read_safetensors(adapter_file)
        check_finite(adapter, str(adapter_file))
        result = set_peft_model_state_dict(model, adapter)
        unexpected = getattr(result, "unexpected_keys", None) or []
        if unexpected:
            raise ValueError(
                f"adapter in {path} does not match the model's LoRA config (unexpected {unexpected[:3]})."
            )
        return
    files = sorted(path.glob("model*.safetensors"))
    if not files:
        raise FileNotFoundError(
            f"no model*.safetensors in {path}: this checkpoint holds a LoRA adapter; "
            "load the model with the same lora= settings before resuming."
        )
    state_dict: dict[str, torch.Tensor] = {}
    for f in files:
        part = _read_safetensors(f)
        check_finite(part, str(f))
        state_dict.update(part)
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    tied = set(getattr(model, "_tied_weights_keys", None) or [])
    if unexpected or [k for k in missing if k not in tied and "lm_head" not in k]:
        raise ValueError(
            f"checkpoint weights in {path} do not match the model (missing {missing[:3]}, "
            f"unexpected {unexpected[:3]}); resume with the model the run started from."
        )


def _model_device(model: torch.nn.Module) -> torch.device:
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def load_checkpoint(
    checkpoint_dir: str | Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
    """Load weights, optimizer and scheduler in place; return ``(trainer_state, rng_state, rollout|None)``.

    Nothing is unpickled beyond tensors and plain values, and every floating-point weight and optimizer
    moment must be finite (:class:`CheckpointError` otherwise, naming the file and the tensor). The files are
    all read and checked before the model is changed. The caller restores the RNG state last, after
    anything else that might draw random numbers. Rollout tensors come back on the model's device.
    """
    path = Path(checkpoint_dir)
    if not (path / "trainer_state.json").exists():
        raise FileNotFoundError(
            f"{path} is not a grpo-kit loop checkpoint (no trainer_state.json); pass a checkpoint-<step> folder "
            "written by grpo_kit.loop.training.train, or resume_from_checkpoint=True for the latest one in output_dir."
        )
    trainer_state = _read_json(path / "trainer_state.json")
    optimizer_state = _torch_load(path / "optimizer.pt")
    check_finite(_optimizer_tensors(optimizer_state), str(path / "optimizer.pt"))
    scheduler_state = _torch_load(path / "scheduler.pt")
    if (path / "rng_state.json").is_file():
        rng_state = _load_tree(path, "rng_state")
    else:  # written by an older grpo-kit (pickled, read with weights_only=True)
        rng_state = _torch_load(path / "rng_state.pth", allow_numpy=True)
    rollout = None
    if (path / "rollout.json").is_file():
        rollout = _load_tree(path, "rollout", device=_model_device(model))
    elif (path / "rollout.pt").is_file():
        rollout = _torch_load(path / "rollout.pt", map_location=_model_device(model))

    _load_weights(path, model)
    optimizer.load_state_dict(optimizer_state)
    scheduler.load_state_dict(scheduler_state)
    return trainer_state, rng_state, rollout


def checkpoint_step(checkpoint: str | Path) -> int | None:
    """The optimizer step ``checkpoint-N`` was saved at (N); None for a folder of another name."""
    m = _CHECKPOINT_RE.match(Path(checkpoint).name)
    return int(m.group(1)) if m else None


def drop_extended_max_steps(diff: dict[str, tuple[Any, Any]], key: str, checkpoint: str | Path) -> None:
    """Remove ``diff[key]`` (the run's ``max_steps``, stored -> now) when it only extends the run: the new length
    is at least the checkpoint's step, so the resume continues the same run for longer (the learning-rate
    schedule then runs to the new length from there, as Trainer's resume does)."""
    step = checkpoint_step(checkpoint)
    if key in diff and step is not None:
        _, now = diff[key]
        if isinstance(now, int) and now >= step:
            del diff[key]


def _checkpoints(output_dir: Path) -> list[tuple[int, Path]]:
    if not output_dir.is_dir():
        return []
    found = []
    for p in output_dir.iterdir():
        m = _CHECKPOINT_RE.match(p.name)
        if m and p.is_dir() and (p / "trainer_state.json").exists():
            found.append((int(m.group(1)), p))
    return sorted(found)


class HalfFinishedCheckpointWarning(UserWarning):
    """A checkpoint folder was skipped because a save did not finish (killed, disk full)."""


def incomplete_checkpoints(output_dir: str | Path) -> list[Path]:
    """Folders a save left unfinished: ``checkpoint-<step>`` without ``trainer_state.json`` (written last, by
    this module and by transformers' Trainer alike) and ``checkpoint-<step>.tmp`` leftovers."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = []
    for p in output_dir.iterdir():
        if not p.is_dir():
            continue
        m = _CHECKPOINT_RE.match(p.name.removesuffix(".tmp"))
        if m and (p.name.endswith(".tmp") or not (p / "trainer_state.json").exists()):
            found.append((int(m.group(1)), p.name, p))
    return [p for *_, p in sorted(found)]


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The complete ``checkpoint-<step>`` folder with the highest step in ``output_dir``, or None.

    Half-written folders (:func:`incomplete_checkpoints`) are skipped with a
    :class:`HalfFinishedCheckpointWarning` that names them.
    """
    found = _checkpoints(Path(output_dir))
    latest = found[-1][1] if found else None
    skipped = incomplete_checkpoints(output_dir)
    if skipped:
        names = ", ".join(p.name for p in skipped)
        using = f"using {latest.name}" if latest is not None else "no complete checkpoint is left"
        warnings.warn(
            f"{output_dir}: skipping {names} (a save that did not finish: no trainer_state.json, or a "
            f".tmp leftover); {using}. Delete the skipped folders to free their space.",
            HalfFinishedCheckpointWarning,
            stacklevel=2,
        )
    return latest


def resume_target(output_dir: str | Path, resume: Any) -> Path | None:
    """The one answer to "which checkpoint does this run continue from?", for every path. A planned run asks
    once, before anything loads (``grpo_kit.runs.plan``), and hands the folder down; the loop and the TRL and
    Unsloth paths ask only when called directly (``resume_from_checkpoint=True``), and a folder comes back as it is.

    ``resume`` is TRL's ``resume_from_checkpoint``: None or False, a fresh run (None); True, the latest complete
    ``checkpoint-<step>`` in ``output_dir`` (:func:`latest_checkpoint`); a path, that checkpoint folder. A
    missing target is a ``FileNotFoundError`` whose line names the fix."""
    if resume is None or resume is False:
        return None
    if resume is True:
        found = latest_checkpoint(output_dir)
        if found is None:
            raise FileNotFoundError(
                f"resume: {output_dir} has no checkpoint-N folder; train without resuming first, "
                "or pass a checkpoint folder."
            )
        return found
    checkpoint = Path(resume)
    if not checkpoint.is_dir():
        raise FileNotFoundError(
            f"resume {resume}: no such checkpoint folder (it is not a folder); pass a checkpoint-N folder, "
            "or resume the latest one (--resume without a value)."
        )
    return checkpoint


def rotate_checkpoints(output_dir: str | Path, save_total_limit: int | None) -> None:
    """Delete the oldest checkpoints so at most ``save_total_limit`` remain (None: keep all)."""
    if not save_total_limit:
        return
    found = _checkpoints(Path(output_dir))
    for _, path in found[: max(0, len(found) - save_total_limit)]:
        shutil.rmtree(path, ignore_errors=True)
