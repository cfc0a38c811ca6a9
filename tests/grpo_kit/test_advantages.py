"""compute_advantages equals TRL 1.15.0's advantages and reward metrics.

TRL computes advantages inline in ``GRPOTrainer._generate_and_score_completions``, between generation
and the return of the batch; there is no function to call. Copying those lines into the test would only
test the copy, so ``trl_harness.trl_advantages`` drives the whole method: the tiny model generates, three
reward functions return the test's rewards (``None`` included), and the advantages and the logged
``reward``/``reward_std``/``frac_reward_zero_std``/``rewards/{name}/*`` are read from TRL's output. TRL
builds its reward matrix in float32, so ours is float32 too (``stack_rewards``).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trl_harness import NUM_REWARD_FUNCS, REWARD_FUNC_NAMES, same_float, trl_advantages, trl_trainer

from grpo_kit.core.advantages import (
    compute_advantages,
    compute_advantages_with_metrics,
    nanstd,
    normalize_scale_rewards,
    stack_rewards,
)

TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def trainer():
    return trl_trainer()


def rows_to_tensor(rows):
    return stack_rewards([[row[i] for row in rows] for i in range(NUM_REWARD_FUNCS)])  # (N, F)


def assert_parity(trainer, rows, num_generations, **options):
    theirs, their_metrics = trl_advantages(trainer, rows, num_generations, **options)
    result = compute_advantages_with_metrics(
        rows_to_tensor(rows), num_generations, reward_func_names=REWARD_FUNC_NAMES, **options
    )
    torch.testing.assert_close(result.advantages, theirs, rtol=TOLERANCE, atol=TOLERANCE)
    plain = compute_advantages(rows_to_tensor(rows), num_generations, **options)
    torch.testing.assert_close(plain, result.advantages, rtol=0, atol=0)
    assert set(result.metrics) == set(their_metrics)
    for name, value in their_metrics.items():
        assert same_float(result.metrics[name], value), (name, result.metrics[name], value)
    assert not torch.isnan(result.advantages).any()
    return result


N = None  # a reward function's None
CASES = {
    "plain": ([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0], [2.0, 0.5, 1.0], [0.5, 0.5, 0.5]], 4),
    "two_groups_with_nones": (
        [
            [1.0, N, 0.5],
            [0.0, 1.0, N],
            [N, N, N],
            [2.0, 0.0, 1.0],
            [0.3, 0.1, N],
            [N, 0.2, 0.2],
            [0.9, N, N],
            [0.0, 0.0, 0.0],
        ],
        4,
    ),
    "zero_variance_group": (
        [[1.0, 1.0, 0.0]] * 4 + [[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]],
        4,
    ),
    "all_none_group": ([[N, N, N]] * 3 + [[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.5, 0.5, N]], 3),
    "one_scorable_in_group": ([[N, N, N], [1.0, N, 2.0], [0.0, 1.0, 0.0], [3.0, 0.0, 1.0]], 2),
    "pairs": ([[0.1 * i, (i % 3) * 1.0, 1.0 - 0.2 * i] for i in range(8)], 2),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
@pytest.mark.parametrize("aggregation", ["sum_then_normalize", "normalize_then_sum"])
@pytest.mark.parametrize("weights", [None, (1.0, 0.5, -2.0)], ids=["unweighted", "weighted"])
def test_advantages_equal_trl(trainer, case, scale_rewards, aggregation, weights):
    rows, num_generations = CASES[case]
    assert_parity(
        trainer,
        rows,
        num_generations,
        reward_weights=weights,
        scale_rewards=scale_rewards,
        multi_objective_aggregation=aggregation,
    )


reward_value = st.one_of(st.none(), st.sampled_from([0.0, 1.0, -1.0, 0.5]), st.floats(-5, 5, width=32))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    num_generations=st.sampled_from([2, 3, 4]),
    num_groups=st.integers(1, 3),
    scale_rewards=st.sampled_from(["group", "batch", "none"]),
    aggregation=st.sampled_from(["sum_then_normalize", "normalize_then_sum"]),
)
def test_random_rewards_equal_trl(trainer, data, num_generations, num_groups, scale_rewards, aggregation):
    """Ties, None anywhere, whole groups of None: always TRL's numbers, never NaN."""
    rows = data.draw(
        st.lists(
            st.lists(reward_value, min_size=NUM_REWARD_FUNCS, max_size=NUM_REWARD_FUNCS),
            min_size=num_generations * num_groups,
            max_size=num_generations * num_groups,
        )
    )
    assert_parity(
        trainer, rows, num_generations, scale_rewards=scale_rewards, multi_objective_aggregation=aggregation
    )


def test_group_semantics_by_hand():
    """What the numbers mean: a group's own mean is the baseline, its std the scale, None is left out."""
    rewards = torch.tensor([[1.0], [0.0], [2.0], [2.0], [5.0], [math.nan]])  # (N, F): groups of 3
    advantages = compute_advantages(rewards, 3)
    torch.testing.assert_close(advantages[:3], torch.tensor([0.0, -1.0, 1.0]) / (1.0 + 1e-4))
    std = math.sqrt(4.5)  # group 2: rewards 2 and 5 (the None is unscorable), Bessel: ((1.5² · 2) / 1) ** 0.5
    torch.testing.assert_close(advantages[3:], torch.tensor([-1.5 / (std + 1e-4), 1.5 / (std + 1e-4), 0.0]))
    unscaled = compute_advantages(rewards, 3, scale_rewards=False)
    torch.testing.assert_close(unscaled, torch.tensor([0.0, -1.0, 1.0, -1.5, 1.5, 0.0]))


def test_zero_variance_and_unscorable_give_exact_zero():
    rewards = torch.tensor([[0.7, 1.0]] * 4 + [[math.nan, math.nan]] * 4)  # (8, 2)
    for scale in ("group", "batch", "none"):
        for aggregation in ("sum_then_normalize", "normalize_then_sum"):
            result = compute_advantages_with_metrics(
                rewards, 4, scale_rewards=scale, multi_objective_aggregation=aggregation
            )
            assert torch.equal(result.advantages, torch.zeros(8))
    assert compute_advantages_with_metrics(rewards, 4).metrics["frac_reward_zero_std"] == 0.5


def test_scale_rewards_booleans_map_like_grpo_config(tmp_path):
    from trl import GRPOConfig

    for value in (True, False, "group", "batch", "none"):
        config = GRPOConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True, scale_rewards=value)
        assert normalize_scale_rewards(value) == config.scale_rewards


def test_nanstd_matches_trl():
    from trl.trainer.utils import nanstd as trl_nanstd

    values = torch.randn(5, 4, 3, generator=torch.Generator().manual_seed(0))
    values[values > 0.8] = math.nan
    values[0, :, 0] = math.nan
    for dim, keepdim in ((None, False), (0, False), (1, True), (2, False)):
        torch.testing.assert_close(
            nanstd(values, dim=dim, keepdim=keepdim),
            trl_nanstd(values, dim=dim, keepdim=keepdim),
            equal_nan=True,
        )


def test_stack_rewards_turns_none_into_nan():
    rewards = stack_rewards([[1.0, None, 0.5], [None, None, 2]])
    assert rewards.shape == (3, 2) and rewards.dtype == torch.float32
    assert torch.isnan(rewards[1]).all() and rewards[2, 1] == 2.0
    with pytest.raises(ValueError, match="one reward per completion"):
        stack_rewards([[1.0, 2.0], [1.0]])


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: compute_advantages([[1.0], [0.0]], 2), TypeError, "stack_rewards"),
        (lambda: compute_advantages(torch.ones(4), 2), ValueError, r"unsqueeze\(1\)"),
        (lambda: compute_advantages(torch.ones(6, 1), 4), ValueError, "groups of num_generations=4"),
        (lambda: compute_advantages(torch.ones(4, 2), 2, reward_weights=[1.0]), ValueError, "one weight per"),
        (
            lambda: compute_advantages(torch.ones(4, 1), 2, scale_rewards="std"),
            ValueError,
            "'group', 'batch'",
        ),
        (
            lambda: compute_advantages(torch.ones(4, 1), 2, multi_objective_aggregation="mean"),
            ValueError,
            "normalize_then_sum",
        ),
        (lambda: compute_advantages(torch.ones(4, 1), 0), ValueError, "positive int"),
    ],
)
def test_bad_input_names_the_fix(call, error, message):
    with pytest.raises(error, match=message):
        call()
