"""Checkpoints restore weights, optimizer, scheduler, RNG streams and state exactly."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
import torch

from grpo_kit.artifacts.checkpoint import (
    ABSENT,
    CheckpointError,
    HalfFinishedCheckpointWarning,
    capture_rng_state,
    config_diff,
    config_hash,
    format_config_diff,
    latest_checkpoint,
    load_checkpoint,
    read_checkpoint_config,
    restore_rng_state,
    resume_target,
    rotate_checkpoints,
    save_checkpoint,
)
from grpo_kit.models import tiny_model


def _draws():
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_rng_state_round_trip():
    torch.manual_seed(5)
    state = capture_rng_state()
    first = _draws()
    assert _draws() != first  # the streams move on
    restore_rng_state(state)
    assert _draws() == first


def _trained(lora):
    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora=lora)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + step))
    ids = torch.randint(0, 1000, (2, 6))
    for _ in range(2):
        model(input_ids=ids).logits.float().pow(2).mean().backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    return model, tokenizer, optimizer, scheduler


@pytest.mark.parametrize("lora", [{"r": 4}, None], ids=["lora", "full"])
def test_save_then_load_restores_everything(tmp_path, lora):
    model, tokenizer, optimizer, scheduler = _trained(lora)
    rng = capture_rng_state()
    rollout = {"advantages": torch.tensor([0.5, -0.5])}
    state = {"global_step": 2, "prompts_seen": 4, "log_history": [{"step": 2, "reward": 1.0}]}
    path = save_checkpoint(
        tmp_path / "checkpoint-2",
        model=model,
        tokenizer=tokenizer,
        optimizer=optimizer,
        scheduler=scheduler,
        trainer_state=state,
        rng_state=rng,
        rollout=rollout,
    )
    assert (path / ("adapter_model.safetensors" if lora else "model.safetensors")).exists()
    assert not (tmp_path / "checkpoint-2.tmp").exists()

    # The same base model (a LoRA checkpoint holds only the adapter), but other adapter / full weights.
    torch.manual_seed(123)
    fresh, _ = tiny_model(seed=0 if lora else 1, lora=lora)
    assert any(
        not torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values())
    )
    params = [p for p in fresh.parameters() if p.requires_grad]
    fresh_opt = torch.optim.AdamW(params, lr=1e-2)
    fresh_sched = torch.optim.lr_scheduler.LambdaLR(fresh_opt, lambda step: 1.0 / (1 + step))
    loaded_state, loaded_rng, loaded_rollout = load_checkpoint(
        path, model=fresh, optimizer=fresh_opt, scheduler=fresh_sched
    )
    for (name, a), b in zip(model.state_dict().items(), fresh.state_dict().values()):
        assert torch.equal(a, b), name
    assert loaded_state == state
    assert fresh_sched.state_dict()["last_epoch"] == scheduler.state_dict()["last_epoch"] == 2
    theirs, ours = optimizer.state_dict()["state"], fresh_opt.state_dict()["state"]
    assert theirs.keys() == ours.keys()
    for k in theirs:
        assert torch.equal(theirs[k]["exp_avg"], ours[k]["exp_avg"])
    assert torch.equal(loaded_rollout["advantages"], rollout["advantages"])
    restore_rng_state(loaded_rng)
    expected = _draws()
    restore_rng_state(rng)
    assert _draws() == expected


def test_wrong_kind_of_checkpoint_is_refused(tmp_path):
    model, tokenizer, optimizer, scheduler = _trained({"r": 4})
    path = save_checkpoint(
        tmp_path / "checkpoint-1",
        model=model,
        tokenizer=tokenizer,
        optimizer=optimizer,
        scheduler=scheduler,
        trainer_state={"global_step": 1},
        rng_state=capture_rng_state(),
    )
    plain, _ = tiny_model(seed=0)
    plain_opt = torch.optim.AdamW(plain.parameters())
    with pytest.raises(FileNotFoundError, match="LoRA adapter"):
        load_checkpoint(
            path,
            model=plain,
            optimizer=plain_opt,
            scheduler=torch.optim.lr_scheduler.LambdaLR(plain_opt, lambda s: 1.0),
        )
    with pytest.raises(FileNotFoundError, match="not a grpo-kit loop checkpoint"):
        load_checkpoint(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler)


def test_resume_target_is_none_the_latest_complete_checkpoint_or_the_folder_named(tmp_path):
    assert resume_target(tmp_path, None) is None and resume_target(tmp_path, False) is None
    with pytest.raises(FileNotFoundError, match="has no checkpoint-N folder; train without resuming first"):
        resume_target(tmp_path, True)
    for step in (3, 12):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-20").mkdir()  # half-written: skipped, with a warning naming it
    with pytest.warns(HalfFinishedCheckpointWarning, match="checkpoint-20"):
        assert resume_target(tmp_path, True) == tmp_path / "checkpoint-12"
    assert resume_target(tmp_path, str(tmp_path / "checkpoint-3")) == tmp_path / "checkpoint-3"
    with pytest.raises(FileNotFoundError, match="it is not a folder"):
        resume_target(tmp_path, tmp_path / "checkpoint-7")


def test_latest_and_rotation(tmp_path):
    for step in (2, 10, 4):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-99.tmp").mkdir()  # a save that was killed half-way is never picked
    (tmp_path / "checkpoint-50").mkdir()  # no trainer_state.json: incomplete
    assert latest_checkpoint(tmp_path).name == "checkpoint-10"
    rotate_checkpoints(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*") if (p / "trainer_state.json").exists()) == [
        "checkpoint-10",
        "checkpoint-4",
    ]
    assert latest_checkpoint(tmp_path / "missing") is None


# ---------------------------------------------------------------------------------------------------------
# Safety: nothing in a checkpoint runs code; corrupt or non-finite files are refused by name


class _CreatesFileWhenUnpickled:
    """What an attacker would put in a shared checkpoint: unpickling it calls open(path, "w")."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return open, (self.path, "w")


LORA = {"r": 4}


def _saved(tmp_path, lora=LORA, **kwargs):
    model, tokenizer, optimizer, scheduler = _trained(lora)
    path = save_checkpoint(
        tmp_path / "checkpoint-2",
        model=model,
        tokenizer=tokenizer,
        optimizer=optimizer,
        scheduler=scheduler,
        trainer_state={"global_step": 2},
        rng_state=capture_rng_state(),
        **kwargs,
    )
    return path, model, optimizer, scheduler


def test_checkpoint_files_need_no_pickle(tmp_path):
    rollout = {
        "micro_batches": [{"ids": torch.arange(3), "old": None, "group_size": 2}],
        "n": torch.tensor(5),
    }
    path, *_ = _saved(tmp_path, rollout=rollout)
    assert not (path / "rng_state.pth").exists() and not (path / "rollout.pt").exists()
    for stem in ("rng_state", "rollout"):
        json.loads((path / f"{stem}.json").read_text())  # plain JSON structure + safetensors tensors
        assert (path / f"{stem}.safetensors").is_file()
    # optimizer/scheduler state loads under weights_only=True (tensors and plain values only)
    torch.load(path / "optimizer.pt", weights_only=True)
    torch.load(path / "scheduler.pt", weights_only=True)


@pytest.mark.parametrize("victim", ["rng_state.pth", "optimizer.pt", "scheduler.pt", "rollout.pt"])
def test_crafted_pickle_is_refused_and_never_runs(tmp_path, victim):
    path, model, optimizer, scheduler = _saved(tmp_path)
    if victim in (
        "rng_state.pth",
        "rollout.pt",
    ):  # an old-format checkpoint: the loader falls back to .pth/.pt
        for stem in ("rng_state", "rollout"):
            (path / f"{stem}.json").unlink(missing_ok=True)
        if victim == "rollout.pt":
            torch.save(capture_rng_state(), path / "rng_state.pth")
    marker = tmp_path / "pwned"
    torch.save({"state": _CreatesFileWhenUnpickled(marker)}, path / victim)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(CheckpointError, match=f"refused to load .*{victim}.*could run code"):
        load_checkpoint(path, model=model, optimizer=optimizer, scheduler=scheduler)
    assert not marker.exists()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))  # nothing was applied


def test_old_pickled_rng_state_still_loads(tmp_path):
    path, model, optimizer, scheduler = _saved(tmp_path)
    for name in ("rng_state.json", "rng_state.safetensors"):
        (path / name).unlink()
    torch.manual_seed(7)
    old = capture_rng_state()
    torch.save(old, path / "rng_state.pth")  # what grpo-kit 0.1 wrote (numpy array inside)
    _, rng, _ = load_checkpoint(path, model=model, optimizer=optimizer, scheduler=scheduler)
    restore_rng_state(rng)
    expected = _draws()
    restore_rng_state(old)
    assert _draws() == expected


def test_non_finite_weights_are_refused_naming_the_tensor(tmp_path):
    from safetensors.torch import load_file, save_file

    path, model, optimizer, scheduler = _saved(tmp_path, lora=None)
    weights = load_file(str(path / "model.safetensors"))
    name = "model.layers.1.mlp.up_proj.weight"
    weights[name][3, :5] = float("nan")
    save_file(weights, str(path / "model.safetensors"), metadata={"format": "pt"})
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(CheckpointError, match=rf"tensor '{re.escape(name)}' holds 5 non-finite"):
        load_checkpoint(path, model=model, optimizer=optimizer, scheduler=scheduler)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_non_finite_optimizer_moments_are_refused(tmp_path):
    path, model, optimizer, scheduler = _saved(tmp_path)
    state = torch.load(path / "optimizer.pt", weights_only=True)
    first = next(iter(state["state"]))
    state["state"][first]["exp_avg_sq"].view(-1)[0] = float("inf")
    torch.save(state, path / "optimizer.pt")
    with pytest.raises(
        CheckpointError, match=rf"optimizer\.pt: tensor 'state\[{first}\]\[exp_avg_sq\]' holds 1"
    ):
        load_checkpoint(path, model=model, optimizer=optimizer, scheduler=scheduler)


def test_truncated_files_name_the_file(tmp_path):
    path, model, optimizer, scheduler = _saved(tmp_path)
    for name in ("adapter_model.safetensors", "optimizer.pt", "rng_state.safetensors", "trainer_state.json"):
        data = (path / name).read_bytes()
        (path / name).write_bytes(data[: len(data) // 2])
        with pytest.raises(
            CheckpointError, match=rf"{re.escape(name)} cannot be read \(truncated or corrupt"
        ):
            load_checkpoint(path, model=model, optimizer=optimizer, scheduler=scheduler)
        (path / name).write_bytes(data)


def test_config_is_stored_with_its_hash_and_compared(tmp_path):
    config = {
        "learning_rate": 1e-4,
        "max_steps": 12,
        "lora": {"r": 4, "target_modules": ("q_proj",)},
        "output_dir": tmp_path,
    }
    path, *_ = _saved(tmp_path, config=config)
    stored = read_checkpoint_config(path)
    assert stored == {
        "learning_rate": 1e-4,
        "max_steps": 12,
        "lora": {"r": 4, "target_modules": ["q_proj"]},
        "output_dir": str(tmp_path),
    }
    assert (
        json.loads((path / "run_config.json").read_text())["sha256"]
        == config_hash(config)
        == config_hash(stored)
    )
    assert config_diff(stored, config) == {}  # tuple vs list, Path vs str: the same configuration
    current = {**config, "max_steps": 2, "lora": {"r": 8, "target_modules": ["q_proj"]}, "seed": 1}
    diff = config_diff(stored, current)
    assert diff == {"lora.r": (4, 8), "max_steps": (12, 2), "seed": (ABSENT, 1)}
    assert "max_steps: 12 (checkpoint) -> 2 (now)" in format_config_diff(diff)
    assert config_hash(current) != config_hash(config)

    edited = json.loads((path / "run_config.json").read_text())
    edited["config"]["max_steps"] = 30
    (path / "run_config.json").write_text(json.dumps(edited))
    with pytest.raises(CheckpointError, match="does not match its sha256"):
        read_checkpoint_config(path)
    assert read_checkpoint_config(_saved(tmp_path / "other")[0]) is None  # saved without a config


def test_config_of_a_dataclass_is_stored(tmp_path):
    from grpo_kit.config.loop import GRPOLoopConfig

    config = GRPOLoopConfig(output_dir=str(tmp_path), max_steps=3)
    path, *_ = _saved(tmp_path, config=config)
    stored = read_checkpoint_config(path)
    assert stored["max_steps"] == 3 and stored["output_dir"] == str(tmp_path)
    assert config_diff(stored, config) == {}
