"""Entropy regularization equals TRL 1.15's GRPOTrainer on the same tensors: loss, both gradients, metrics.

The same harness as ``test_losses.py`` (``trl_harness``) runs TRL's real ``_compute_loss`` with the model's
log-probs *and entropies* replaced by the test's leaf tensors, so the gradient through the entropy bonus is
compared too. Static bonus: every loss type at every importance-sampling level it supports, with and without
the high-entropy token mask and gradient accumulation. Adaptive (Skywork-OR1): several accumulation windows
whose entropy crosses the target, comparing the coefficient and the last window entropy after each.
"""

from __future__ import annotations

import itertools
import math
import zlib

import pytest
import torch
from trl_harness import configure, same_float, trl_loss, trl_trainer

from grpo_kit.core.logprobs import entropy_mask as high_entropy_mask
from grpo_kit.core.losses import LOSS_TYPES, compute_loss
from grpo_kit.core.losses.entropy import EntropyControl, check_entropy_settings

TOLERANCE = 1e-6
LENGTHS = [7, 1, 0, 4, 7, 3]  # a full row, a one-token row, a fully masked row, …
EPSILON_HIGH = {"cispo": 1.25}


@pytest.fixture(scope="module")
def trainer():
    return trl_trainer()


def make_batch(seed: int, entropy_scale: float = 1.0, lengths=LENGTHS, max_len: int = 7):
    """Log-probs, advantages, a right-padded mask, old log-probs and entropies (B, T), all float64."""
    g = torch.Generator().manual_seed(seed)
    batch_size = len(lengths)
    per_token_logps = -3 * torch.rand(batch_size, max_len, generator=g, dtype=torch.float64)  # (B, T)
    mask = (torch.arange(max_len).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)).long()  # (B, T)
    advantages = torch.randn(batch_size, generator=g, dtype=torch.float64)  # (B,)
    old = per_token_logps + 0.35 * torch.randn(batch_size, max_len, generator=g, dtype=torch.float64)
    entropies = 2 * entropy_scale * torch.rand(batch_size, max_len, generator=g, dtype=torch.float64)
    entropies = entropies * mask  # the model returns 0 on padding
    return per_token_logps, advantages, mask, old, entropies


def ours_and_theirs(trainer, batch, control: EntropyControl, settings, *, last_micro_batch=True):
    """One micro-batch through TRL (trainer state carries its controller) and through compute_loss + ``control``."""
    per_token_logps, advantages, mask, old, entropies = batch
    num_items = int(mask.sum()) + (11 if settings.get("gradient_accumulation_steps", 1) > 1 else 0)
    theirs, their_grad, their_entropy_grad, their_metrics = trl_loss(
        trainer,
        per_token_logps,
        advantages,
        mask,
        old_per_token_logps=old,
        num_items_in_batch=num_items,
        entropies=entropies,
        last_micro_batch=last_micro_batch,
    )
    quantile = settings.get("top_entropy_quantile", 1.0)
    tokens = high_entropy_mask(entropies, mask, quantile) if quantile < 1.0 else None
    leaf = per_token_logps.clone().requires_grad_(True)
    entropy_leaf = entropies.clone().requires_grad_(True)
    loss_settings = {k: v for k, v in settings.items() if k in _LOSS_KEYS}
    ours, our_metrics = compute_loss(
        leaf,
        advantages,
        mask,
        old_per_token_logps=old,
        num_items_in_batch=num_items,
        entropies=entropy_leaf,
        entropy_mask=tokens,
        entropy_coef=control.applied_coef(),
        **loss_settings,
    )
    control.observe(entropies, mask if tokens is None else mask * tokens)
    if last_micro_batch:
        control.end_step()
        if control.enabled:
            our_metrics["entropy_coef"] = control.entropy_coef
    ours.backward()
    our_entropy_grad = torch.zeros_like(entropies) if entropy_leaf.grad is None else entropy_leaf.grad
    torch.testing.assert_close(ours.detach(), theirs, rtol=TOLERANCE, atol=TOLERANCE)
    torch.testing.assert_close(leaf.grad, their_grad, rtol=TOLERANCE, atol=TOLERANCE)
    torch.testing.assert_close(our_entropy_grad, their_entropy_grad, rtol=TOLERANCE, atol=TOLERANCE)
    assert set(our_metrics) == set(their_metrics), (sorted(our_metrics), sorted(their_metrics))
    for name in their_metrics:
        assert same_float(our_metrics[name], their_metrics[name]), (
            name,
            our_metrics[name],
            their_metrics[name],
        )
    return ours, our_metrics, their_entropy_grad


_LOSS_KEYS = {
    "loss_type",
    "importance_sampling_level",
    "gradient_accumulation_steps",
    "epsilon_high",
    "max_completion_length",
}
_ENTROPY_KEYS = {
    "top_entropy_quantile",
    "entropy_coef",
    "use_adaptive_entropy",
    "entropy_coef_min",
    "entropy_coef_max",
    "entropy_coef_delta",
    "entropy_target",
}


def _setup(trainer, **settings):
    settings = {"max_completion_length": 7, **settings}
    configure(trainer, **settings)
    control = EntropyControl(
        **{k: v for k, v in settings.items() if k in _ENTROPY_KEYS - {"top_entropy_quantile"}}
    )
    return settings, control


def _static_matrix():
    for loss_type, spec in LOSS_TYPES.items():
        for level, accumulation, quantile, coef in itertools.product(
            spec.levels, (1, 2), (1.0, 0.5), (0.05, 0.0)
        ):
            yield pytest.param(
                loss_type,
                level,
                accumulation,
                quantile,
                coef,
                id=f"{loss_type}-{level}-ga{accumulation}-q{quantile}-coef{coef}",
            )


@pytest.mark.parametrize("loss_type, level, accumulation, quantile, coef", list(_static_matrix()))
def test_static_entropy_bonus_equals_trl(trainer, loss_type, level, accumulation, quantile, coef):
    settings, control = _setup(
        trainer,
        loss_type=loss_type,
        importance_sampling_level=level,
        gradient_accumulation_steps=accumulation,
        epsilon_high=EPSILON_HIGH.get(loss_type, 0.28),
        top_entropy_quantile=quantile,
        entropy_coef=coef,
    )
    seed = zlib.crc32(f"{loss_type}{level}{accumulation}{quantile}{coef}".encode())
    _, metrics, entropy_grad = ours_and_theirs(trainer, make_batch(seed), control, settings)
    assert "entropy" in metrics
    # The bonus is on exactly when coef != 0; it then pushes the entropy of the counted tokens up.
    assert ("policy_loss" in metrics) == (coef != 0.0)
    if coef:
        assert (entropy_grad <= 0).all() and (entropy_grad < 0).any()
    else:
        assert (entropy_grad == 0).all()


def _adaptive_matrix():
    for loss_type, spec in LOSS_TYPES.items():
        for level in spec.levels:
            yield pytest.param(loss_type, level, id=f"{loss_type}-{level}")


@pytest.mark.parametrize("loss_type, level", list(_adaptive_matrix()))
@pytest.mark.parametrize("quantile", [1.0, 0.5])
def test_adaptive_entropy_equals_trl_over_several_steps(trainer, loss_type, level, quantile):
    """Three optimizer steps of two micro-batches: mean entropy low, high, low around the target 0.6."""
    settings, control = _setup(
        trainer,
        loss_type=loss_type,
        importance_sampling_level=level,
        gradient_accumulation_steps=2,
        epsilon_high=EPSILON_HIGH.get(loss_type, 0.28),
        top_entropy_quantile=quantile,
        use_adaptive_entropy=True,
        entropy_coef=0.01,
        entropy_coef_delta=0.02,
        entropy_coef_max=0.05,
        entropy_target=0.6 if quantile == 1.0 else 1.1,  # the high-entropy half has a higher mean
    )
    applied, seen = [], []
    for step, scale in enumerate((0.2, 1.0, 0.2, 0.2)):
        applied.append(control.applied_coef())
        for micro in range(2):
            seed = zlib.crc32(f"{loss_type}{level}{quantile}{step}{micro}".encode())
            ours_and_theirs(
                trainer, make_batch(seed, entropy_scale=scale), control, settings, last_micro_batch=micro == 1
            )
        assert control.entropy_coef == trainer.entropy_coef  # bit-identical
        assert control.last_world_entropy == trainer._last_world_entropy
        seen.append(control.entropy_coef)
    # Before any step nothing is measured (inf): no bonus; low entropy raises c, high lowers it, max clamps.
    assert applied[0] == 0.0 and applied[1] == pytest.approx(0.03) and applied[2] == 0.0
    assert seen == pytest.approx([0.03, 0.01, 0.03, 0.05])


def test_state_dict_round_trips_through_json_exactly():
    import json

    control = EntropyControl(use_adaptive_entropy=True, entropy_coef=0.1, entropy_target=0.5)
    entropies, mask = torch.full((2, 3), 1 / 3, dtype=torch.float32), torch.ones(2, 3)
    control.observe(entropies, mask)
    control.end_step()
    restored = EntropyControl(use_adaptive_entropy=True, entropy_coef=0.1, entropy_target=0.5)
    restored.load_state_dict(json.loads(json.dumps(control.state_dict())))
    assert restored.entropy_coef == control.entropy_coef and restored.applied_coef() == control.applied_coef()
    assert restored.last_world_entropy == control.last_world_entropy
    fresh = json.loads(json.dumps(EntropyControl(use_adaptive_entropy=True).state_dict()))
    assert math.isinf(fresh["last_world_entropy"])


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {"use_adaptive_entropy": True, "entropy_coef_min": 0.5, "entropy_coef_max": 0.1},
            "entropy_coef_min",
        ),
        ({"use_adaptive_entropy": True, "entropy_coef_delta": -0.1}, "entropy_coef_delta"),
        ({"entropy_coef": float("nan")}, "entropy_coef"),
        ({"use_adaptive_entropy": "yes"}, "use_adaptive_entropy"),
    ],
)
def test_bad_entropy_settings_name_the_field(settings, message):
    with pytest.raises((TypeError, ValueError), match=message):
        check_entropy_settings(settings)


def test_a_bonus_without_entropies_names_the_fix():
    per_token_logps, advantages, mask, _, _ = make_batch(0)
    with pytest.raises(ValueError, match="entropies"):
        compute_loss(per_token_logps, advantages, mask, entropy_coef=0.1)
