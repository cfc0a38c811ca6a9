"""The loss demo shows the length bias it claims: autograd weights against the closed forms."""

from __future__ import annotations

import pytest
import torch

from grpo_kit.teaching.loss_demo import all_loss_weights, main

LENGTHS = (4, 48, 12, 96)
REWARDS = (1.0, 1.0, 0.0, 0.0)


@pytest.fixture(scope="module")
def weights():
    results, advantages, mask = all_loss_weights(LENGTHS, REWARDS)
    return {result.loss_type: result for result in results}, advantages, mask


def test_grpo_gives_short_completions_heavier_tokens(weights):
    results, advantages, _ = weights
    grpo = results["grpo"]
    # Same advantage, lengths 4 and 48: each token of the short one weighs 12× more ...
    assert advantages[0] == advantages[1] > 0
    torch.testing.assert_close(
        grpo.per_token[0] / grpo.per_token[1], torch.tensor(48 / 4, dtype=torch.float64)
    )
    # ... because every completion gets the same total weight, whatever its length.
    torch.testing.assert_close(grpo.per_sequence.abs(), grpo.per_sequence.abs()[0].expand(4))
    assert grpo.short_to_long_token_ratio == pytest.approx(96 / 4)


@pytest.mark.parametrize("loss_type", ["dr_grpo", "dapo", "bnpo", "cispo", "vespo", "luspo"])
def test_token_level_normalisations_weigh_every_token_the_same(weights, loss_type):
    results, advantages, _ = weights
    result = results[loss_type]
    torch.testing.assert_close(result.per_token.abs(), result.per_token.abs()[0].expand(4))
    lengths = torch.tensor(LENGTHS, dtype=torch.float64)
    torch.testing.assert_close(result.per_sequence / lengths, result.per_token)  # completion weight ∝ length
    assert result.short_to_long_token_ratio == pytest.approx(1.0)
    assert torch.equal(torch.sign(result.per_token), torch.sign(advantages))


def test_weights_follow_the_closed_forms(weights):
    """On-policy weights per token: A/(B·L_i), A/ΣL, A/(B·L_max), A/B (see the module docstring)."""
    results, advantages, mask = weights
    batch_size, lengths = len(LENGTHS), torch.tensor(LENGTHS, dtype=torch.float64)
    expected = {
        "grpo": advantages / (batch_size * lengths),
        "sapo": advantages / (batch_size * lengths),
        "dapo": advantages / lengths.sum(),
        "bnpo": advantages / lengths.sum(),
        "dr_grpo": advantages / (batch_size * max(LENGTHS)),
        "luspo": advantages / batch_size,
    }
    for loss_type, per_token in expected.items():
        torch.testing.assert_close(
            results[loss_type].token_weights,
            per_token.unsqueeze(1) * mask,
            msg=lambda m, name=loss_type: f"{name}: {m}",
        )


def test_main_prints_the_table_and_writes_the_png(tmp_path, capsys):
    out = tmp_path / "plots" / "weights.png"
    assert main(["--lengths", "3", "30", "--rewards", "1", "0", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for loss_type in ("grpo", "dr_grpo", "dapo", "luspo", "vespo"):
        assert loss_type in printed
    assert "10.0×" in printed  # grpo's short÷long per-token ratio for lengths 3 and 30
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000


def test_main_subset_of_loss_types(capsys):
    assert main(["--loss-types", "grpo", "dapo"]) == 0
    printed = capsys.readouterr().out
    assert "grpo" in printed and "dapo" in printed and "cispo" not in printed


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--lengths", "0", "5", "--rewards", "1", "0"], "lengths >= 1"),
        (["--rewards", "1", "0", "1"], "one reward per completion"),
        (["--loss-types", "ppo"], "invalid choice"),
    ],
)
def test_main_rejects_bad_input_with_a_usage_error(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_on_policy_loss_is_zero_for_grpo_and_what_loss_weights_differentiates():
    from grpo_kit.teaching.loss_demo import demo_batch, loss_weights, on_policy_loss

    logps, advantages, mask = demo_batch(LENGTHS, REWARDS)
    assert abs(on_policy_loss("grpo", logps, advantages, mask).item()) < 1e-6  # the advantages sum to zero
    leaf = logps.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(on_policy_loss("dapo", leaf, advantages, mask), leaf)
    torch.testing.assert_close(-grad * mask, loss_weights("dapo", logps, advantages, mask).token_weights)


def test_ratio_sweep_is_the_clipped_objectives_slope_per_row():
    from grpo_kit.teaching.loss_demo import ratio_objective, ratio_sweep

    ratios = torch.linspace(0.5, 1.6, 12, dtype=torch.float64)
    for loss_type in (
        "grpo",
        "dapo",
    ):  # a sequence mean and a token mean: each row's push is its own either way
        push, metrics = ratio_sweep(ratios, 1.0, loss_type=loss_type, epsilon=0.2, epsilon_high=0.28)
        inside = (ratios > 0.8) & (ratios < 1.28)
        # −∂loss/∂log ρ = ρ·A inside the clip range, 0 beyond 1 + ε_high (positive advantage)
        torch.testing.assert_close(push[inside], ratios[inside])
        assert (push[ratios > 1.28] == 0).all() and any(k.startswith("clip_ratio") for k in metrics)
    objective = ratio_objective(ratios, -1.0, loss_type="dapo", epsilon=0.2, epsilon_high=0.28)
    # negative advantage: min(ρA, clip(ρ)A) = −ρ for ρ above 1 − ε, −0.8 below it
    expected = torch.where(ratios > 0.8, -ratios, torch.full_like(ratios, -0.8))
    torch.testing.assert_close(objective.double(), expected, atol=1e-6, rtol=0)
