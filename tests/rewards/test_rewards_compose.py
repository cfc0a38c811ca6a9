"""combine / route / async reward functions."""

from __future__ import annotations

import asyncio
import concurrent.futures
import math

import pytest

import rewards

XML = "<reasoning>\n{reasoning}\n</reasoning>\n<answer>\n{answer}\n</answer>\n"


def constant(values, name="constant"):
    def fn(completions, **kwargs):
        return list(values)

    fn.__name__ = name
    return fn


async def async_int_reward(completions, **kwargs):
    await asyncio.sleep(0)
    return rewards.int_reward(completions, **kwargs)


def test_combine_is_a_weighted_sum_named_after_its_parts():
    texts = [XML.format(reasoning="r", answer=a) for a in ("72", "71", "3.5")]
    fn = rewards.combine(rewards.correctness_reward, rewards.int_reward, weights=[1.0, 2.0])
    assert fn.__name__ == "correctness_reward+2*int_reward"
    assert fn(texts, answer=["72"] * 3) == [3.0, 1.0, 0.0]
    assert rewards.combine(rewards.int_reward)(texts).__len__() == 3


def test_combine_none_semantics_match_trl_nansum_but_all_none_stays_none():
    a = constant([1.0, None, None, float("nan")], "a")
    b = constant([2.0, 3.0, None, None], "b")
    assert rewards.combine(a, b, weights=[1.0, 0.5])(["w", "x", "y", "z"]) == [2.0, 1.5, None, None]


def test_combine_nansum_matches_trl_reward_aggregation():
    torch = pytest.importorskip("torch")
    columns = [[1.0, None, 0.25, None], [None, 2.0, 0.5, None], [0.5, 0.5, None, None]]
    weights = [1.0, 0.5, 2.0]
    fns = [constant(col, f"f{i}") for i, col in enumerate(columns)]
    ours = rewards.combine(*fns, weights=weights)(["a", "b", "c", "d"])
    # GRPOTrainer: None -> NaN, then (rewards_per_func * weights).nansum(dim=1)
    per_func = torch.tensor([[math.nan if v is None else v for v in col] for col in columns]).T  # (N, F)
    trl_total = (per_func * torch.tensor(weights).unsqueeze(0)).nansum(dim=1)  # (N,)
    assert ours[:3] == pytest.approx(trl_total[:3].tolist())
    assert ours[3] is None and trl_total[3].item() == 0.0  # the one deliberate difference


def test_combine_runs_async_functions_also_inside_a_running_event_loop():
    texts = [XML.format(reasoning="r", answer=a) for a in ("72", "x")]
    fn = rewards.combine(async_int_reward, rewards.correctness_reward)
    assert fn(texts, answer=["72", "72"]) == [2.5, 0.0]

    async def inside_loop():  # e.g. a notebook cell: asyncio.run would fail here
        return fn(texts, answer=["72", "72"])

    # A thread of its own: the loop it starts is the only one there, whatever ran before in this process.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(asyncio.run, inside_loop()).result() == [2.5, 0.0]


def test_combine_rejects_bad_arguments():
    with pytest.raises(ValueError, match="at least one"):
        rewards.combine()
    with pytest.raises(ValueError, match="one number per function"):
        rewards.combine(rewards.int_reward, weights=[1.0, 2.0])
    with pytest.raises(TypeError, match="'int_reward': a reward model"):
        rewards.combine("int_reward")


@pytest.mark.parametrize(
    "accept",
    [
        lambda f: rewards.combine(rewards.int_reward, f),
        lambda f: rewards.combine([f]),
        lambda f: rewards.route("task", {"math": rewards.accuracy_reward, "summary": f}),
        lambda f: rewards.lint(f, verbose=False),
    ],
    ids=["combine", "combine-list", "route", "lint"],
)
@pytest.mark.parametrize("factory", [rewards.length_reward, rewards.get_repetition_penalty_reward])
def test_an_uncalled_factory_fails_where_it_is_accepted_with_the_call_to_make(accept, factory):
    """`combine(length_reward)` used to fail only at the first reward computation ("unexpected keyword
    argument 'prompts'"); every place that accepts reward functions now says to call the factory."""
    with pytest.raises(TypeError, match=rf"reward factory {factory.__name__} itself.*Call it"):
        accept(factory)


def test_a_user_factory_without_kwargs_is_refused_at_combine_and_route():
    def my_length_reward(ideal):  # a factory of the user's own: no completions, no **kwargs
        return lambda completions, **kwargs: [0.0] * len(completions)

    with pytest.raises(TypeError, match="my_length_reward.*call it first"):
        rewards.combine(my_length_reward)
    with pytest.raises(TypeError, match="task 'x'.*my_length_reward.*call it first"):
        rewards.route("task", {"x": my_length_reward})
    with pytest.raises(ValueError, match="returned 1 rewards for 2"):
        rewards.combine(constant([1.0]))(["a", "b"])


def test_route_scores_each_task_with_its_function_and_slices_columns():
    texts = [
        "<think>thirty plus forty-two</think><answer>72</answer>",
        XML.format(reasoning="r", answer="72"),
        "plain",
        "x",
    ]
    fn = rewards.route("task", {"format": rewards.format_reward, "gsm8k": rewards.correctness_reward})
    assert fn.__name__ == "route_by_task"
    logged = {}
    out = fn(
        texts,
        task=["format", "gsm8k", "gsm8k", "other"],
        answer=["-", "72", "72", "-"],
        log_extra=lambda k, v: logged.__setitem__(k, v),
    )
    assert out == [1.0, 2.0, 0.0, None]


def test_route_reassembles_log_extra_columns_at_full_length():
    fn = rewards.route("task", {"math": rewards.accuracy_reward})
    logged = {}
    out = fn(
        ["\\boxed{72}", "other task", "\\boxed{5}"],
        task=["math", "text", "math"],
        solution=["72", "-", "72"],
        log_extra=lambda k, v: logged.__setitem__(k, v),
    )
    assert out == [1.0, None, 0.0]
    assert logged["solution"] == ["72", None, "72"]
    assert len(logged["answer_parsed"]) == 3


def test_route_with_async_functions_and_missing_column():
    fn = rewards.route("task", {"int": async_int_reward})
    assert fn(["<answer>3</answer>", "<answer>3</answer>"], task=["int", "no"]) == [0.5, None]
    with pytest.raises(ValueError, match="`task` column"):
        fn(["x"])


def test_as_sync_keeps_the_name_and_runs_the_coroutine():
    fn = rewards.compose.as_sync(async_int_reward)
    assert fn.__name__ == "async_int_reward"
    assert fn(["<answer>-3</answer>", "x"]) == [0.5, 0.0]
