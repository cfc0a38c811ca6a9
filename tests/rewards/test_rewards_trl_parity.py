"""Same outputs as the pinned ``trl.rewards`` (trl 1.15.0) on the same inputs.

TRL reads ``completion[0]["content"]``, so it is always given one-message conversational completions;
ours is also checked on the same texts as plain strings.
"""

from __future__ import annotations

import inspect
import logging
import random
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewards

trl_rewards = pytest.importorskip("trl.rewards")
logging.getLogger("math_verify").setLevel(logging.ERROR)

PARITY = settings(max_examples=300, deadline=None, derandomize=True, database=None)


def conv(texts):
    return [[{"role": "assistant", "content": t}] for t in texts]


# (completion, solution): fast-path cases and cases that need math-verify.
ACCURACY_CASES = [
    ("The answer is \\boxed{72}.", "72"),
    ("The answer is \\boxed{73}.", "72"),
    ("\\boxed{-3}", "-3"),
    ("\\boxed{3}", "-3"),
    ("\\boxed{0}", "0"),
    ("so the answer is 72", "72"),
    ("", "72"),
    ("72", "72"),
    ("$72$", "72"),
    ("The final answer is $72$.", "72"),
    ("The final answer is $\\boxed{72}$ I hope", "72"),
    ("answer: [72] ", "72"),
    ("\\boxed{72} and }", "72"),
    ("\\boxed{1,000}", "1000"),
    ("\\boxed{1000}", "1,000"),
    ("\\boxed{072}", "72"),
    ("\\boxed{72.0}", "72"),
    ("\\boxed{72}", "72.0"),
    ("\\boxed{72} \\boxed{73}", "72"),
    ("\\boxed{73} \\boxed{72}", "72"),
    ("\\boxed{\\frac{1}{3}}", "\\frac{1}{3}"),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{3}"),
    ("The answer is \\(\\frac{144}{2}\\)", "72"),
    ("\\boxed{x^2 + 1}", "$x^2+1$"),
    ("\\boxed{72}", "no number here"),
    ("\\boxed{72}", ""),
    ("\\boxed{\\frac{1}{", "\\frac{1}{2}"),
    ("$\\sqrt{2$ and \\left( x \\right", "\\sqrt{2}"),
    ("\\boxed{100\\%}", "100"),
    ("\\boxed{72}\n\nSo 72 is it.", "72"),
    ("[72]", "72"),
    ("\\boxed{−3}", "-3"),
]


def test_accuracy_reward_matches_trl_on_curated_cases():
    completions = [c for c, _ in ACCURACY_CASES]
    solutions = [s for _, s in ACCURACY_CASES]
    expected = trl_rewards.accuracy_reward(conv(completions), solutions)
    assert rewards.accuracy_reward(conv(completions), solutions) == expected
    assert rewards.accuracy_reward(completions, solution=solutions) == expected
    assert None in expected and 1.0 in expected and 0.0 in expected  # the cases cover all three


def _gsm8k_style(rng: random.Random, n: int) -> tuple[list[str], list[str]]:
    templates = [
        "Let me add the numbers. {w} + {x} = {a}. The answer is \\boxed{{{a}}}.",
        "Step 1: {w} apples.\nStep 2: {x} more.\nSo the total is {a}.",
        "<think>{w} plus {x}</think> Final: \\boxed{{{a}}}",
        "The final answer is ${a}$.",
        "{a}",
        "Answer: \\boxed{{{a}}} (checked)",
    ]
    completions, solutions = [], []
    for _ in range(n):
        gold = rng.choice([rng.randint(-50, 5000), rng.randint(0, 100)])
        answer = gold if rng.random() < 0.5 else gold + rng.choice([-1, 1, 10])
        completions.append(rng.choice(templates).format(w=rng.randint(1, 99), x=rng.randint(1, 99), a=answer))
        solutions.append(str(gold))
    return completions, solutions


def test_accuracy_reward_matches_trl_on_gsm8k_style_answers_and_logs_the_same():
    completions, solutions = _gsm8k_style(random.Random(0), 300)
    theirs_log, ours_log = {}, {}
    expected = trl_rewards.accuracy_reward(
        conv(completions), solutions, log_extra=lambda k, v: theirs_log.__setitem__(k, v)
    )
    got = rewards.accuracy_reward(
        conv(completions), solutions, log_extra=lambda k, v: ours_log.__setitem__(k, v)
    )
    assert got == expected
    assert ours_log == theirs_log  # solution, gold_parsed, answer_parsed columns in the completions table


def test_accuracy_reward_matches_trl_in_a_worker_thread():
    completions, solutions = _gsm8k_style(random.Random(1), 60)
    completions += [c for c, _ in ACCURACY_CASES]
    solutions += [s for _, s in ACCURACY_CASES]
    box = {}

    def target():  # TRL switches math-verify's timeouts off here; ours keeps its bound
        box["theirs"] = trl_rewards.accuracy_reward(conv(completions), solutions)
        box["ours"] = rewards.accuracy_reward(conv(completions), solutions)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(300)
    assert box["ours"] == box["theirs"]


REASONING_CASES = [
    ("<think> Reasoning </think> The final answer is \\boxed{\\frac{1}{3}}", "\\frac{1}{3}"),
    ("<think> Reasoning </think> The final answer is \\boxed{\\frac{1}{2}}", "\\frac{1}{3}"),
    ("<think> partial \\boxed{\\frac{1}{3}} but no end", "\\frac{1}{3}"),
    ("<think>x</think>\\boxed{72}", "72"),
    ("<think>\\boxed{72}</think> so 72", "72"),
    ("<think>a</think><think>b</think> \\boxed{72}", "72"),
    ("<think>a</think> \\boxed{72}", "not parseable"),
    ("no think at all \\boxed{72}", "not parseable"),
]


@pytest.mark.parametrize("delimiters", [None, ["</think>"], ["</reasoning>", "</think>"]])
def test_reasoning_accuracy_reward_matches_trl(delimiters):
    completions = [c for c, _ in REASONING_CASES] + ["<reasoning>r</reasoning> \\boxed{72}"]
    solutions = [s for _, s in REASONING_CASES] + ["72"]
    theirs_log, ours_log = {}, {}
    expected = trl_rewards.reasoning_accuracy_reward(
        conv(completions),
        solutions,
        reasoning_delimiters=delimiters,
        log_extra=lambda k, v: theirs_log.__setitem__(k, v),
    )
    got = rewards.reasoning_accuracy_reward(
        completions,
        solution=solutions,
        reasoning_delimiters=delimiters,
        log_extra=lambda k, v: ours_log.__setitem__(k, v),
    )
    assert got == expected
    assert ours_log == theirs_log


def test_cosine_scaled_reward_matches_trl():
    completions = ["\\boxed{\\frac{1}{3}}", "\\boxed{\\frac{1}{2}}", "\\boxed{72}", "\\boxed{72}", "x"]
    solutions = ["\\frac{1}{3}", "\\frac{1}{3}", "72", "nothing", "72"]
    ids = [[1] * 50, [1] * 50, [1] * 10, [1] * 3, [1] * 250]
    for kwargs in ({"max_len": 100}, {"max_len": 40, "min_value_wrong": -2.0, "max_value_correct": 3.0}):
        theirs = trl_rewards.get_cosine_scaled_reward(**kwargs)
        ours = rewards.get_cosine_scaled_reward(**kwargs)
        assert ours.__name__ == theirs.__name__ == "cosine_scaled_reward"
        expected = theirs(conv(completions), solutions, ids)
        assert ours(conv(completions), solutions, ids) == expected
        assert ours(completions, solution=solutions, completion_ids=ids) == expected


FORMAT_FRAGMENTS = ["<think>", "</think>", "\n", " ", "a", "answer", "<answer>", "</answer>", "\t", "x\ny"]
format_text = st.one_of(
    st.text(max_size=60), st.lists(st.sampled_from(FORMAT_FRAGMENTS), max_size=12).map("".join)
)


@PARITY
@given(texts=st.lists(format_text, max_size=5))
def test_think_format_reward_matches_trl(texts):
    expected = trl_rewards.think_format_reward(conv(texts))
    assert rewards.think_format_reward(conv(texts)) == expected
    assert rewards.think_format_reward(texts) == expected


def test_think_format_reward_matches_trl_docstring_example():
    texts = [
        "<think>\nThis is my reasoning.\n</think>\nThis is my answer.",
        "<think>\nThis is my reasoning.\nThis is my answer.",
    ]
    assert (
        rewards.think_format_reward(conv(texts)) == trl_rewards.think_format_reward(conv(texts)) == [1.0, 0.0]
    )


token_ids = st.lists(st.lists(st.integers(0, 5), max_size=40), max_size=6)


@PARITY
@given(ids=token_ids, max_len=st.integers(1, 40), cache=st.integers(0, 40))
def test_soft_overlong_punishment_matches_trl(ids, max_len, cache):
    cache = min(cache, max_len)
    theirs = trl_rewards.get_soft_overlong_punishment(max_completion_len=max_len, soft_punish_cache=cache)
    ours = rewards.get_soft_overlong_punishment(max_completion_len=max_len, soft_punish_cache=cache)
    assert ours.__name__ == theirs.__name__
    expected = theirs(ids)
    assert ours(ids) == expected  # TRL's positional form
    texts = ["t"] * len(ids)
    assert ours(completions=texts, completion_ids=ids) == expected  # GRPOTrainer's keyword form
    assert ours(ids, prompts=["p"] * len(ids), completions=texts) == expected  # TRL's id-first form


@PARITY
@given(ids=token_ids, ngram_size=st.integers(1, 5), max_penalty=st.floats(-3.0, 0.0))
def test_repetition_penalty_matches_trl(ids, ngram_size, max_penalty):
    theirs = trl_rewards.get_repetition_penalty_reward(ngram_size=ngram_size, max_penalty=max_penalty)
    ours = rewards.get_repetition_penalty_reward(ngram_size=ngram_size, max_penalty=max_penalty)
    assert ours.__name__ == theirs.__name__
    expected = theirs(ids)
    assert ours(ids) == expected
    assert ours(completions=["t"] * len(ids), completion_ids=ids) == expected
    assert ours(ids, completions=["t"] * len(ids)) == expected


def _call_signature(fn):
    """(name, kind) of each parameter of a reward function or of a factory-made reward's __call__."""
    target = fn if inspect.isfunction(fn) else type(fn).__call__
    params = list(inspect.signature(target).parameters.values())
    if not inspect.isfunction(fn):
        params = params[1:]  # self
    return [(p.name, p.kind) for p in params]


@pytest.mark.parametrize(
    "name,make",
    [
        ("accuracy_reward", lambda m: m.accuracy_reward),
        ("reasoning_accuracy_reward", lambda m: m.reasoning_accuracy_reward),
        ("think_format_reward", lambda m: m.think_format_reward),
        ("get_soft_overlong_punishment", lambda m: m.get_soft_overlong_punishment(100, 20)),
        ("get_repetition_penalty_reward", lambda m: m.get_repetition_penalty_reward(2, -1.0)),
        ("get_cosine_scaled_reward", lambda m: m.get_cosine_scaled_reward(100)),
    ],
)
def test_signatures_are_trls_parameter_for_parameter(name, make):
    """Positional calls that work with TRL work with ours: same names, order and kinds (ours may add a
    default where TRL's parameter is required, so that a missing column gets an error naming it)."""
    assert _call_signature(make(rewards)) == _call_signature(make(trl_rewards))
    factory_params = list(inspect.signature(getattr(rewards, name)).parameters)
    assert factory_params == list(inspect.signature(getattr(trl_rewards, name)).parameters)


def test_id_rewards_take_ids_first_with_trainer_keywords_like_trl():
    """TRL's own test (test_extra_kwargs_are_ignored): ids positional, completions as a keyword."""
    ids, kwargs = [[5, 5, 5, 5, 5]], {"prompts": ["x"], "completions": [[{"content": "5 5 5 5 5"}]]}
    assert rewards.get_repetition_penalty_reward(2, -1.0)(ids, **kwargs) == [-0.75]
    assert rewards.get_soft_overlong_punishment(100, 20)([[1] * 90], completions=["x"]) == [-0.5]
    with pytest.raises(TypeError, match="token ids first"):  # texts where the ids belong: named
        rewards.get_soft_overlong_punishment(100, 20)(["some text"], completions=["some text"])


def test_repetition_penalty_and_overlong_docstring_examples():
    assert rewards.get_repetition_penalty_reward(2, -1.0)([[1, 2, 3, 4], [5, 5, 5, 5, 5]]) == [0.0, -0.75]
    assert rewards.get_soft_overlong_punishment(100, 20)([[1] * 90]) == [-0.5]


def test_factories_reject_what_trl_rejects_and_what_crashes_trl():
    with pytest.raises(ValueError, match="max_penalty"):
        rewards.get_repetition_penalty_reward(max_penalty=0.5)
    with pytest.raises(ZeroDivisionError):  # TRL divides by zero on ngram_size=0 ...
        trl_rewards.get_repetition_penalty_reward(ngram_size=0)([[1, 2]])
    with pytest.raises(ValueError, match="ngram_size"):  # ... we refuse it up front
        rewards.get_repetition_penalty_reward(ngram_size=0)
    with pytest.raises(ValueError, match="max_len"):
        rewards.get_cosine_scaled_reward(max_len=0)
    with pytest.raises(ValueError, match="soft_punish_cache"):
        rewards.get_soft_overlong_punishment(max_completion_len=10, soft_punish_cache=20)
