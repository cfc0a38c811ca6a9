"""Checkpoints of the standalone loop: everything needed to continue a run bit for bit.

A checkpoint is a folder ``<output_dir>/checkpoint-<step>/`` (TRL's naming) holding:

* the weights: a LoRA adapter (``adapter_model.safetensors`` + ``adapter_config.json``, loadable with
  ``PeftModel.from_pretrained``) or, without LoRA, the whole model (``model.safetensors``); plus the tokenizer;
* ``optimizer.pt``, ``scheduler.pt``;
* ``rng_state.pth``: python ``random``, numpy and torch (CPU, and CUDA when present) generator states;
* ``trainer_state.json``: global step, data position, epoch, ``log_history`` (like TRL's file of that name);
* ``rollout.pt`` when ``num_iterations > 1`` and the run stopped inside a block of steps that reuse one
  generation batch, so the resumed run reuses the very same completions instead of sampling new ones.

The folder is written under a temporary name and renamed at the end, so a run killed while saving
never leaves a half checkpoint for ``resume_from_checkpoint=True`` to pick up.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = [
    "capture_rng_state",
    "is_peft_model",
    "latest_checkpoint",
    "load_checkpoint",
    "restore_rng_state",
    "rotate_checkpoints",
    "save_checkpoint",
]

_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")


def is_peft_model(model: torch.nn.Module) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "disable_adapter")


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
) -> Path:
    """Write a complete checkpoint to ``checkpoint_dir`` (replacing one already there) and return it."""
    final = Path(checkpoint_dir)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp)  # PEFT: the adapter only; plain model: all weights
    if tokenizer is not None:
        tokenizer.save_pretrained(tmp)
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
    torch.save(rng_state, tmp / "rng_state.pth")
    if rollout is not None:
        torch.save(rollout, tmp / "rollout.pt")
    (tmp / "trainer_state.json").write_text(json.dumps(trainer_state, indent=2))
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    return final


def load_checkpoint(
    checkpoint_dir: str | Path,
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
    """Load weights, optimizer and scheduler in place; return ``(trainer_state, rng_state, rollout|None)``.

    The caller restores the RNG state last, after anything else that might draw random numbers.
    """
    from safetensors.torch import load_file

    path = Path(checkpoint_dir)
    if not (path / "trainer_state.json").exists():
        raise FileNotFoundError(
            f"{path} is not a grpo-kit loop checkpoint (no trainer_state.json); pass a checkpoint-<step> folder "
            "written by grpo_kit.loop.train, or resume_from_checkpoint=True for the latest one in output_dir."
        )
    if is_peft_model(model):
        from peft import set_peft_model_state_dict

        adapter_file = path / "adapter_model.safetensors"
        if not adapter_file.exists():
            raise FileNotFoundError(f"{adapter_file} missing: this checkpoint was saved from a model without LoRA.")
        result = set_peft_model_state_dict(model, load_file(str(adapter_file)))
        unexpected = getattr(result, "unexpected_keys", None) or []
        if unexpected:
            raise ValueError(f"adapter in {path} does not match the model's LoRA config (unexpected {unexpected[:3]}).")
    else:
        files = sorted(path.glob("model*.safetensors"))
        if not files:
            raise FileNotFoundError(f"no model*.safetensors in {path}: this checkpoint holds a LoRA adapter; "
                                    "load the model with the same lora= settings before resuming.")
        state_dict: dict[str, torch.Tensor] = {}
        for f in files:
            state_dict.update(load_file(str(f)))
        missing, unexpected = model.load_state_dict(state_dict, strict=False)
        tied = set(getattr(model, "_tied_weights_keys", None) or [])
        if unexpected or [k for k in missing if k not in tied and "lm_head" not in k]:
            raise ValueError(f"checkpoint weights in {path} do not match the model (missing {missing[:3]}, "
                             f"unexpected {unexpected[:3]}); resume with the model the run started from.")
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=False))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
    rng_state = torch.load(path / "rng_state.pth", weights_only=False)
    rollout_file = path / "rollout.pt"
    rollout = torch.load(rollout_file, weights_only=False) if rollout_file.exists() else None
    trainer_state = json.loads((path / "trainer_state.json").read_text())
    return trainer_state, rng_state, rollout


def _checkpoints(output_dir: Path) -> list[tuple[int, Path]]:
    if not output_dir.is_dir():
        return []
    found = []
    for p in output_dir.iterdir():
        m = _CHECKPOINT_RE.match(p.name)
        if m and p.is_dir() and (p / "trainer_state.json").exists():
            found.append((int(m.group(1)), p))
    return sorted(found)


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The ``checkpoint-<step>`` folder with the highest step in ``output_dir``, or None."""
    found = _checkpoints(Path(output_dir))
    return found[-1][1] if found else None


def rotate_checkpoints(output_dir: str | Path, save_total_limit: int | None) -> None:
    """Delete the oldest checkpoints so at most ``save_total_limit`` remain (None: keep all)."""
    if not save_total_limit:
        return
    found = _checkpoints(Path(output_dir))
    for _, path in found[: max(0, len(found) - save_total_limit)]:
        shutil.rmtree(path, ignore_errors=True)
