"""rewards.calling: the one reward call and the checks run where reward functions are accepted."""

from __future__ import annotations

import math

import pytest

from rewards import correctness_reward, get_soft_overlong_punishment, length_reward
from rewards.calling import RewardFunctionError, call_reward_funcs, check_reward_funcs


@pytest.mark.parametrize("factory", [length_reward, get_soft_overlong_punishment])
def test_uncalled_factory_is_refused_with_the_call_to_make(factory):
    with pytest.raises(TypeError, match=rf"factory {factory.__name__} itself.*Call it"):
        check_reward_funcs([factory])


def test_function_without_kwargs_is_refused_naming_the_fix():
    def only_completions(completions):
        return [0.0] * len(completions)

    with pytest.raises(TypeError, match=r"only_completions.*\*\*kwargs"):
        check_reward_funcs(only_completions)


def test_non_callable_and_empty_list_are_refused():
    with pytest.raises(TypeError, match="not a reward function"):
        check_reward_funcs([3.0])
    # A string is what TRL reads as a reward *model* id or path: named as such, with where it is accepted.
    with pytest.raises(TypeError, match=r"model id or path 'correctness_reward': a reward model.*grpo_kit"):
        check_reward_funcs(["correctness_reward"])
    with pytest.raises(TypeError, match="non-empty list"):
        check_reward_funcs([])


def test_valid_functions_come_back_as_a_list():
    assert check_reward_funcs(correctness_reward) == [correctness_reward]
    made = length_reward(5)
    assert check_reward_funcs([correctness_reward, made]) == [correctness_reward, made]


def test_table_has_nan_for_none_and_columns_reach_the_functions():
    def needs_answer(completions, answer, **kwargs):
        return [None if a is None else float(c == a) for c, a in zip(completions, answer)]

    table = call_reward_funcs(
        [needs_answer, length_reward(2, unit="chars")],
        ["p", "q", "r"],
        ["7", "72", "x"],
        answer=["7", "8", None],
    )
    assert [row[0] for row in table[:2]] == [1.0, 0.0] and math.isnan(table[2][0])
    assert [row[1] for row in table] == [-1.0, 0.0, -1.0]


def test_async_functions_are_awaited():
    async def half(completions, **kwargs):
        return [0.5] * len(completions)

    assert call_reward_funcs([half], ["p", "q"], ["a", "b"]) == [[0.5], [0.5]]


def test_raising_function_is_named_with_its_row_and_completion():
    def breaks_on_empty(completions, **kwargs):
        return [1.0 / len(c) for c in completions]

    with pytest.raises(
        RewardFunctionError, match=r"breaks_on_empty raised ZeroDivisionError.*row 2.*''"
    ) as info:
        call_reward_funcs([breaks_on_empty], ["p"] * 3, ["ab", "c", ""])
    assert info.value.row == 2 and info.value.func_name == "breaks_on_empty"


@pytest.mark.parametrize(
    "bad, message",
    [
        (lambda completions, **kw: [1.0], "returned 1 rewards for 2"),
        (lambda completions, **kw: [math.inf, 0.0], "infinite reward"),
        (lambda completions, **kw: ["a", 0.0], "returned str 'a' on row 0"),
        (lambda completions, **kw: 1.0, "returned float"),
    ],
)
def test_unusable_outputs_are_named(bad, message):
    with pytest.raises(RewardFunctionError, match=message):
        call_reward_funcs([bad], ["p", "q"], ["a", "b"])
