"""Hypothesis fuzz of every reward function: never raise, never hang, one float-or-None per completion.

Used three ways by test_rewards_fuzz.py: in the main thread, in a worker thread, and in a fresh
subprocess (``python tests/rewards/reward_fuzz_cases.py``) — reward functions run in all three under
GRPOTrainer, and math-verify's signal-based timeout only works in the first.

Each ``@given`` test calls *all* the functions of its group on every example, so every function sees
``MAX_EXAMPLES`` (1,000) examples. The math-verify group draws mostly plain-number text plus a share
of LaTeX (the "cheaper strategy" that keeps worker-process round trips few).
"""

from __future__ import annotations

import math
import os
import sys
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rewards
from rewards import math_verify_bounded, open_r1

MAX_EXAMPLES = int(os.environ.get("REWARDS_FUZZ_EXAMPLES", "1000"))
settings.register_profile(
    "grpo-kit-rewards-fuzz",
    max_examples=MAX_EXAMPLES,
    deadline=None,  # the bound we test is our own (CALL_BOUND_S), not hypothesis' per-example deadline
    derandomize=True,  # CI-stable; set REWARDS_FUZZ_EXAMPLES higher locally to explore further
    database=None,
    suppress_health_check=list(HealthCheck),
)
PROFILE = settings.get_profile("grpo-kit-rewards-fuzz")
MV_TIMEOUT_S = 3.0  # per-completion math-verify bound during the fuzz
CALL_BOUND_S = 60.0  # no single call may take longer than this (a hang)

FRAGMENTS = [
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
    "<reasoning>",
    "</reasoning>",
    "\n",
    " ",
    "  \n",
    "72",
    " * 3 = ",
    " + ",
    " × ",
    "-3",
    "\u22123",
    "1,000",
    "3.5",
    "72.0",
    "0",
    "\u00b2",
    "\u0663",
    "####",
    "The answer is ",
    "\\boxed{",
    "}",
    "{",
    "$",
    "$$",
    "\\[",
    "\\]",
    "\\(",
    "\\)",
    "\\frac{1}{2}",
    "\\sqrt{",
    "^{",
    "I hope",
    "final answer is ",
    "answer: ",
    "\x00",
    "\ud800",
    "\u202e",
    "\U0001f389",
    "%",
    "[",
    "]",
]
fragment_text = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=16).map("".join)
any_text = st.one_of(st.text(max_size=80), fragment_text, fragment_text)  # long texts: see lint's 1 MB probe

# For math-verify functions: mostly text the fast path answers, some LaTeX that reaches the workers.
PLAIN_FRAGMENTS = [
    "The answer is ",
    "72",
    "-3",
    "1,000",
    "\\boxed{72}",
    "\\boxed{-3}",
    "\\boxed{7",
    " ",
    "\n",
    "</think>",
    "<think>",
    "\u22123",
    "####",
    "so",
    ".",
]
plain_math_text = st.lists(
    st.one_of(st.sampled_from(PLAIN_FRAGMENTS), st.text(alphabet="abc xyz0123456789", max_size=6)),
    max_size=12,
).map("".join)
latex_text = st.sampled_from(
    [
        "$72$",
        "The final answer is $72$.",
        "answer: \\(\\frac{144}{2}\\)",
        "\\boxed{\\frac{1}{2}}",
        "\\boxed{1,000}",
        "\\[ x = 72 \\]",
        "$\\sqrt{2$",
        "\\boxed{\\frac{1}{",
        "answer: [72] ok",
    ]
)
# About one completion in ten reaches a math-verify worker; the rest take the fast path.
math_text = st.one_of(*[plain_math_text] * 9, latex_text)
golds = st.one_of(
    st.sampled_from(["72", "-3", "1000", "0", "\\frac{1}{2}", "", "abc", "#### 5", "72.0", "1,000", None]),
    st.text(alphabet="0123456789-", max_size=4),
)
# A gold that is not a plain integer sends every completion to math-verify: keep those to one in eight.
math_golds = st.one_of(*[st.integers(-999, 999).map(str)] * 7, golds)


@st.composite
def batches(draw, text_strategy, max_size=3, gold_strategy=golds):
    texts = draw(st.lists(text_strategy, max_size=max_size))
    conversational = draw(st.booleans())
    completions = [[{"role": "assistant", "content": t}] for t in texts] if conversational else texts
    gold = draw(st.lists(gold_strategy, min_size=len(texts), max_size=len(texts)))
    ids = [list(range(draw(st.integers(0, 300)))) for _ in texts]
    return completions, texts, gold, ids


def _text_functions() -> list:
    return [
        rewards.think_format_reward,
        rewards.get_soft_overlong_punishment(max_completion_len=100, soft_punish_cache=20),
        rewards.get_repetition_penalty_reward(ngram_size=3),
        rewards.length_reward(50, unit="tokens"),
        rewards.length_reward(50, unit="chars"),
        rewards.format_reward,
        rewards.xmlcount_reward,
        rewards.soft_format_reward,
        rewards.strict_format_reward,
        rewards.int_reward,
        rewards.correctness_reward,
        rewards.calculation_reward,
        rewards.combine(rewards.correctness_reward, rewards.xmlcount_reward, weights=[1.0, 0.5]),
        rewards.route("task", {"a": rewards.int_reward, "b": rewards.format_reward}),
        open_r1.format_reward,
        open_r1.tag_count_reward,
        open_r1.reasoning_steps_reward,
        open_r1.get_repetition_penalty_reward(ngram_size=3, max_penalty=-1.0),
        open_r1.code_format_reward,
        open_r1.create_weighted_reward(open_r1.tag_count_reward, 2.0),
    ]


def _math_functions() -> list:
    return [
        rewards.accuracy_reward,
        rewards.reasoning_accuracy_reward,
        rewards.get_cosine_scaled_reward(max_len=200),
        open_r1.accuracy_reward,
        open_r1.len_reward,
        open_r1.get_cosine_scaled_reward(max_len=200),
        open_r1.get_cosine_scaled_reward(max_len=200, length_unit="tokens", clamp=True, plain_gold=True),
    ]


def _check(fn, completions, kwargs) -> None:
    start = time.monotonic()
    out = fn(completions=completions, **kwargs)  # as GRPOTrainer calls: all by keyword
    elapsed = time.monotonic() - start
    name = getattr(fn, "__name__", fn)
    assert elapsed < CALL_BOUND_S, f"{name} took {elapsed:.1f} s"
    assert isinstance(out, list), f"{name} returned {type(out).__name__}"
    assert len(out) == len(completions), f"{name}: {len(out)} rewards for {len(completions)} completions"
    for value in out:
        assert value is None or (type(value) in (float, int) and math.isfinite(value)), (
            f"{name} returned {value!r}"
        )


def _kwargs(texts, gold, ids, tasks) -> dict:
    return {
        "prompts": [[{"role": "user", "content": "q 3 72 1,000"}]] * len(texts),
        "completion_ids": ids,
        "solution": gold,
        "answer": gold,
        "task": tasks,
        "trainer_state": None,
        "log_extra": lambda key, values: None,
        "log_metric": lambda key, value: None,
    }


def fuzz_text_functions() -> None:
    functions = _text_functions()

    @settings(PROFILE)
    @given(batch=batches(any_text), tasks_seed=st.integers(0, 3))
    def run(batch, tasks_seed):
        completions, texts, gold, ids = batch
        tasks = [("a", "b", "c")[(i + tasks_seed) % 3] for i in range(len(texts))]
        kwargs = _kwargs(texts, gold, ids, tasks)
        for fn in functions:
            _check(fn, completions, kwargs)

    run()


def fuzz_math_functions() -> None:
    functions = _math_functions()

    @settings(PROFILE)
    @given(batch=batches(math_text, max_size=2, gold_strategy=math_golds))
    def run(batch):
        completions, texts, gold, ids = batch
        kwargs = _kwargs(texts, gold, ids, ["a"] * len(texts))
        for fn in functions:
            _check(fn, completions, kwargs)

    run()


def fuzz_all() -> None:
    previous = math_verify_bounded.configure(timeout_s=MV_TIMEOUT_S)  # returns the new pool
    try:
        fuzz_text_functions()
        fuzz_math_functions()
    finally:
        math_verify_bounded.configure(timeout_s=math_verify_bounded.DEFAULT_TIMEOUT_S)
    del previous


if __name__ == "__main__":
    fuzz_all()
    print("fuzz ok", file=sys.stderr)
