"""The fast path gives math-verify's own verdicts; the slow path is bounded in any thread."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewards
from rewards.math_verify_bounded import MathVerifyPool, fast_verdict, plain_int_gold, verify_batch

math_verify = pytest.importorskip("math_verify")
logging.getLogger("math_verify").setLevel(logging.CRITICAL)

PATHOLOGICAL = "\\boxed{9^{9^{9^{9}}}}"  # sympy tries to build a 370-million-digit integer


def math_verify_verdict(content: str, solution: str, with_log: bool = False):
    """TRL's accuracy_reward verdict (and its logged answer_parsed), computed in-process by math-verify."""
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import LatexExtractionConfig, parse, verify

    gold = parse(solution, parsing_timeout=None)
    if not gold:
        return None
    config = [
        LatexExtractionConfig(
            normalization_config=NormalizationConfig(units=True),
            boxed_match_priority=0,
            try_extract_without_anchor=False,
        )
    ]
    answer = parse(content, extraction_config=config, extraction_mode="first_match", parsing_timeout=None)
    reward = float(verify(gold, answer, timeout_seconds=None))
    return (reward, str(answer) if answer else "[unparseable]") if with_log else reward


pieces = st.sampled_from(
    [
        "\\boxed{",
        "}",
        "{",
        "72",
        "-3",
        "0",
        "073",
        "1,000",
        "2.5",
        " ",
        "\n",
        "The answer is ",
        "so ",
        "I hope",
        "final answer is ",
        "answer: ",
        "ANSWER ",
        "72.0",
        "72.5",
        "1,234",
        "0.0001",
        "-\\frac{1}{2}",
        "\\frac{3}{0}",
        "%",
        " percent",
        "5$",
        "x",
        "\\frac{1}{2}",
        "$",
        "[",
        "]",
        "\\(",
        "\\)",
        ")",
    ]
)
completion_text = st.lists(pieces, max_size=10).map("".join)


@settings(max_examples=600, deadline=None, derandomize=True, database=None)
@given(content=completion_text, gold=st.integers(-1000, 1000))
def test_fast_path_agrees_with_math_verify(content, gold):
    fast = fast_verdict(content, gold)
    if fast is not None:
        assert (fast.reward, fast.answer_parsed) == math_verify_verdict(content, str(gold), with_log=True)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(content=completion_text, gold=st.sampled_from(["\\frac{1}{2}", "-\\frac{1}{2}", "\\frac{6}{4}", "0"]))
def test_fast_path_agrees_with_math_verify_on_fraction_golds(content, gold):
    from rewards.math_verify_fast import fast_verdict as decide
    from rewards.math_verify_fast import parse_gold

    fast = decide(content, parse_gold(gold))
    if fast is not None:
        assert fast == math_verify_verdict(content, gold, with_log=True)


def test_fast_path_covers_gsm8k_style_answers():
    assert plain_int_gold("72") == 72 and plain_int_gold("-3") == -3
    assert (
        plain_int_gold("072") is None and plain_int_gold("1,000") is None and plain_int_gold("72.0") is None
    )
    assert fast_verdict("So it is \\boxed{72}.", 72).reward == 1.0
    assert fast_verdict("The answer is 72.", 72).reward == 0.0  # TRL needs LaTeX
    assert fast_verdict("$72$", 72).reward == 0.0  # no "answer" anchor: math-verify extracts nothing
    assert fast_verdict("The answer is $72$.", 72).reward == 1.0
    assert fast_verdict("The answer is $x^2$.", 72) is None  # math-verify decides


def _timed(fn):
    start = time.monotonic()
    out = fn()
    return out, time.monotonic() - start


def test_pathological_latex_is_cut_off_in_a_worker_thread():
    pool = MathVerifyPool(timeout_s=1.5)
    try:
        pool.run([("\\boxed{1}", "1")])  # start the worker first: its imports are not the bound
        box = {}

        def target():
            box["out"], box["seconds"] = _timed(
                lambda: pool.run([(PATHOLOGICAL, "1"), ("\\boxed{\\frac{1}{2}}", "0.5")])
            )

        thread = threading.Thread(target=target)
        thread.start()
        thread.join(120)
        assert not thread.is_alive()
        rewards_out = [r.reward for r in box["out"]]
        assert rewards_out == [
            0.0,
            1.0,
        ]  # the timeout is a 0.0, as TRL's signal timeout; the next job still runs
        assert box["seconds"] < 60  # 1.5 s bound + restarting a worker on a loaded machine
    finally:
        pool.close()


def test_a_worker_killed_from_outside_is_replaced():
    pool = MathVerifyPool(timeout_s=5)
    try:
        assert [r.reward for r in pool.run([("\\boxed{\\frac{1}{2}}", "0.5")])] == [1.0]
        for worker in pool._idle:
            worker.proc.kill()
            worker.proc.wait()
        assert [r.reward for r in pool.run([("\\boxed{\\frac{1}{2}}", "0.5")])] == [1.0]
    finally:
        pool.close()


def test_big_batches_spread_over_worker_processes_with_the_same_verdicts():
    jobs = [(f"\\boxed{{\\frac{{{i}}}{{2}}}}", f"{i / 2}") for i in range(40)]
    jobs += [(f"The final answer is ${i}$", str(i + (i % 2))) for i in range(20)]
    pool = MathVerifyPool(timeout_s=20, max_workers=2)
    try:
        out = pool.run(jobs)
        assert len(pool._idle) == 2  # both workers were used and kept for the next call
    finally:
        pool.close()
    assert [r.reward for r in out] == [math_verify_verdict(c, s) for c, s in jobs]


def test_verify_batch_skips_missing_gold_and_accuracy_reward_is_bounded():
    out = verify_batch(["\\boxed{72}", "x"], [None, "72"])
    assert [r.reward for r in out] == [None, 0.0]
    rewards.math_verify_bounded.configure(timeout_s=1.5)
    try:
        got, seconds = _timed(
            lambda: rewards.accuracy_reward([PATHOLOGICAL, "\\boxed{1}"], solution=["1", "1"])
        )
        assert got == [0.0, 1.0]
        assert seconds < 60  # 1.5 s bound + (re)starting a worker on a loaded machine
    finally:
        rewards.math_verify_bounded.configure(timeout_s=10.0)


def test_configure_validates():
    with pytest.raises(ValueError, match="timeout_s"):
        MathVerifyPool(timeout_s=0)


def test_a_gold_math_verify_cannot_parse_is_remembered_and_skips_later_jobs_without_a_worker():
    pool = MathVerifyPool(timeout_s=20, max_workers=1)
    try:
        first = pool.run([("\\boxed{x^2 + 1}", "x^2+1")])  # no $: math-verify cannot parse this gold
        assert [r.reward for r in first] == [None]
        pool.close()  # no worker left: a job that needed one would have to start it
        again = pool.run([("\\boxed{x^3}", "x^2+1"), ("\\boxed{y}", "x^2+1")])
        assert [(r.reward, r.answer_parsed) for r in again] == [(None, "[skipped]")] * 2
        assert pool._idle == []  # answered without starting a worker
    finally:
        pool.close()
