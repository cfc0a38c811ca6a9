"""Rewards must be real numbers (issue 24): numpy arrays and numpy scalars are accepted as TRL accepts them
(``torch.tensor(output)``), text such as ``"1.0"`` is refused with the function's name and the row."""

from __future__ import annotations

import numpy as np
import pytest

from rewards import RewardFunctionError, call_reward_funcs


def _returning(output):
    def reward(completions, **kwargs):
        return output

    return reward


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (np.array([1.0, 2.5]), [1.0, 2.5]),
        (np.array([1, 0], dtype=np.int64), [1.0, 0.0]),
        ([np.float32(0.5), np.int64(2)], [0.5, 2.0]),
        ((1, None), [1.0, float("nan")]),
    ],
)
def test_numpy_arrays_and_scalars_are_rewards(output, expected):
    table = call_reward_funcs([_returning(output)], ["p", "q"], ["a", "b"])
    got = [row[0] for row in table]
    assert got == pytest.approx(expected, nan_ok=True)


@pytest.mark.parametrize(
    ("output", "named"),
    [
        (["1.0", 2.0], "returned str '1.0' on row 0"),
        ([1.0, b"2"], "returned bytes b'2' on row 1"),
        ([1 + 2j, 1.0], "returned complex"),
        ([np.array([1.0, 2.0]), 1.0], "returned ndarray"),
        (np.array([[1.0], [2.0]]), "returned ndarray; return a list"),
    ],
)
def test_text_and_other_non_numbers_are_refused(output, named):
    with pytest.raises(RewardFunctionError, match=named.replace("(", r"\(").replace("[", r"\[")):
        call_reward_funcs([_returning(output)], ["p", "q"], ["a", "b"])


def test_trl_reads_the_accepted_outputs_the_same_way():
    """The peer's own conversion: GRPOTrainer turns each output into ``torch.tensor`` with None -> NaN."""
    import torch

    for output in (np.array([1.0, 2.5]), [np.float32(0.5), np.int64(2)]):
        ours = [row[0] for row in call_reward_funcs([_returning(output)], ["p", "q"], ["a", "b"])]
        trl = torch.tensor([r if r is not None else torch.nan for r in output], dtype=torch.float32).tolist()
        assert ours == pytest.approx(trl)
    with pytest.raises((TypeError, ValueError)):
        torch.tensor(["1.0", 2.0], dtype=torch.float32)  # TRL cannot read text either
