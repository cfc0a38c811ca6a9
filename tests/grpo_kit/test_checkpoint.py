"""Checkpoints restore weights, optimizer, scheduler, RNG streams and state exactly."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from grpo_kit.checkpoint import (
    capture_rng_state,
    latest_checkpoint,
    load_checkpoint,
    restore_rng_state,
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
    path = save_checkpoint(tmp_path / "checkpoint-2", model=model, tokenizer=tokenizer, optimizer=optimizer,
                           scheduler=scheduler, trainer_state=state, rng_state=rng, rollout=rollout)
    assert (path / ("adapter_model.safetensors" if lora else "model.safetensors")).exists()
    assert not (tmp_path / "checkpoint-2.tmp").exists()

    # The same base model (a LoRA checkpoint holds only the adapter), but other adapter / full weights.
    torch.manual_seed(123)
    fresh, _ = tiny_model(seed=0 if lora else 1, lora=lora)
    assert any(not torch.equal(a, b) for a, b in zip(model.state_dict().values(), fresh.state_dict().values()))
    params = [p for p in fresh.parameters() if p.requires_grad]
    fresh_opt = torch.optim.AdamW(params, lr=1e-2)
    fresh_sched = torch.optim.lr_scheduler.LambdaLR(fresh_opt, lambda step: 1.0 / (1 + step))
    loaded_state, loaded_rng, loaded_rollout = load_checkpoint(path, model=fresh, optimizer=fresh_opt,
                                                               scheduler=fresh_sched)
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
    path = save_checkpoint(tmp_path / "checkpoint-1", model=model, tokenizer=tokenizer, optimizer=optimizer,
                           scheduler=scheduler, trainer_state={"global_step": 1}, rng_state=capture_rng_state())
    plain, _ = tiny_model(seed=0)
    plain_opt = torch.optim.AdamW(plain.parameters())
    with pytest.raises(FileNotFoundError, match="LoRA adapter"):
        load_checkpoint(path, model=plain, optimizer=plain_opt,
                        scheduler=torch.optim.lr_scheduler.LambdaLR(plain_opt, lambda s: 1.0))
    with pytest.raises(FileNotFoundError, match="not a grpo-kit loop checkpoint"):
        load_checkpoint(tmp_path, model=model, optimizer=optimizer, scheduler=scheduler)


def test_latest_and_rotation(tmp_path):
    for step in (2, 10, 4):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-99.tmp").mkdir()  # a save that was killed half-way is never picked
    (tmp_path / "checkpoint-50").mkdir()  # no trainer_state.json: incomplete
    assert latest_checkpoint(tmp_path).name == "checkpoint-10"
    rotate_checkpoints(tmp_path, 2)
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*") if (p / "trainer_state.json").exists()) == [
        "checkpoint-10", "checkpoint-4"]
    assert latest_checkpoint(tmp_path / "missing") is None
