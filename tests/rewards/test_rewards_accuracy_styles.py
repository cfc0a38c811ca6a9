"""accuracy_reward per answer style: TRL's verdicts and logged strings, decided without math-verify.

Every style of ``answer_styles`` is compared with the pinned ``trl.rewards.accuracy_reward`` on
generated cases (reward, ``gold_parsed``, ``answer_parsed``), and each realistic style must be decided
by the fast path (no worker process, no sympy): that is where the speed over TRL comes from.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import answer_styles
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rewards
from rewards.math_verify_fast import fast_verdict, parse_gold

trl_rewards = pytest.importorskip("trl.rewards")
logging.getLogger("math_verify").setLevel(logging.CRITICAL)
N_PER_STYLE = 120


def conv(texts):
    return [[{"role": "assistant", "content": t}] for t in texts]


def _logged(fn, completions, solutions):
    log = {}
    out = fn(completions, solutions, log_extra=lambda key, values: log.__setitem__(key, values))
    return out, log


@pytest.mark.parametrize("style", [*answer_styles.STYLES, *answer_styles.MATH_VERIFY_STYLES])
def test_verdicts_and_logs_equal_trls(style):
    completions, solutions = answer_styles.make(style, N_PER_STYLE)
    theirs, theirs_log = _logged(trl_rewards.accuracy_reward, conv(completions), solutions)
    ours, ours_log = _logged(rewards.accuracy_reward, conv(completions), solutions)
    assert ours == theirs
    assert ours_log == theirs_log
    never_right = ("no answer", "plain trailing number")  # TRL needs LaTeX: "The answer is 72." is 0.0
    assert 0.0 in theirs and (1.0 in theirs or style in never_right)  # not all one verdict


def test_gsm8k_money_corpus_matches_trl_and_needs_no_worker():
    """500 more GSM8K-style solutions (money, percentages, <<a*b=c>>, thousands commas, several $ per
    line; boxed, \\boxed{\\$N}, #### N, plain and XML endings), another seed: TRL's verdicts and logs."""
    completions, solutions = answer_styles.make("GSM8K-style solution with money signs", 500, seed=1)
    assert sum("$" in c for c in completions) == 500 and sum("\\boxed{\\$" in c for c in completions) > 20
    theirs, theirs_log = _logged(trl_rewards.accuracy_reward, conv(completions), solutions)
    ours, ours_log = _logged(rewards.accuracy_reward, conv(completions), solutions)
    assert (ours, ours_log) == (theirs, theirs_log)
    assert 100 < theirs.count(1.0) < 400
    assert all(fast_verdict(c, parse_gold(s)) is not None for c, s in zip(completions, solutions))


@pytest.mark.parametrize("style", list(answer_styles.STYLES))
def test_every_realistic_style_is_decided_without_math_verify(style):
    completions, solutions = answer_styles.make(style, N_PER_STYLE)
    undecided = [
        (c[-60:], s) for c, s in zip(completions, solutions) if fast_verdict(c, parse_gold(s)) is None
    ]
    assert undecided == []


@pytest.mark.parametrize(
    "content,gold",
    [
        ("The answer is $72$ %", "72"),  # percent: math-verify reads 0.72
        ("final answer is $72$ I hope", "72"),  # another priority-0 pattern competes with boxed
        ("\\boxed{72} then }", "72"),  # the greedy \boxed{.+} runs to the last brace
        ("$\\boxed{72}$ and the answer is $$73$$", "72"),  # a display $$ anywhere could enclose it
        ("pays $5 and \\boxed{72}$ ok", "72"),  # the inline $5 and \boxed{72}$ encloses the boxed
        ("So $x = \\boxed{\\$72}$", "72"),
        ("The answer is $18 and $20.", "18"),  # an anchored inline environment $18 and $
        ("The final answer is, after all the work we did on this problem,        $18 and $20.", "18"),
        ("The answer is [72] ", "72"),  # an inline bracket environment after the anchor
        ("The answer is \\frac{1}{2}", "72"),  # a bare fraction after the anchor
        ("The answer is 5 \\(x\\)", "5"),
        ("The answer is $18$ and $5$ more", "18"),  # a set {18, 5}
        ("The answer is $18$, $5 and $6", "18"),
        ("The answer is $18$ or $$5$$", "18"),
        ("Answer: $5 a day and $18$", "18"),  # "$5 a day and $" comes first
        ("So $\\boxed{72}$ %", "72"),  # percent after the environment: math-verify reads 0.72
        ("So $x = \\boxed{72}$", "72"),  # more than the boxed inside the environment
        ("\\boxed{72.1234567}", "72"),  # > 6 decimals: math-verify rounds
        ("\\boxed{0.5}", "\\frac{1}{2}"),  # float against a fraction: math-verify rounds
        ("answer" + " " * 51 + "$72$", "72"),  # farther than the 50-character anchor window
        ("The answer is $1 000$", "1000"),  # latex2sympy reads 1*0
        ("\\boxed{72}", "72.0"),  # a decimal gold: math-verify parses it
        ("$$<<1+1=2>>2\n\\boxed{2} then $$", "2"),  # a "$$" after the boxed: $$…$$ could enclose it
        ("\\boxed{2} $$", "2"),
        ("\\boxed{72}", "1,23"),  # not a thousands-comma gold
    ],
)
def test_what_the_fast_path_leaves_to_math_verify_still_matches_trl(content, gold):
    parsed_gold = parse_gold(gold)
    assert parsed_gold is None or fast_verdict(content, parsed_gold) is None
    theirs, theirs_log = _logged(trl_rewards.accuracy_reward, conv([content]), [gold])
    ours, ours_log = _logged(rewards.accuracy_reward, conv([content]), [gold])
    assert (ours, ours_log) == (theirs, theirs_log)


@pytest.mark.parametrize(
    "content,gold",
    [
        ("$\\boxed{72}$ and the answer is $73$", "72"),  # the next environments must hold a \boxed too
        ("She earns $5 a day.\nThe answer is \\boxed{\\$72}.", "72"),
        ("She earns $5 and $6.\nThe answer is \\boxed{72}.", "72"),  # money $…$ on another line
        ("So she pays $72. The answer is \\boxed{72}.", "72"),  # an opening $ but no closing one
        ("costs 5$ and \\boxed{72}$ ok", "72"),  # a $ after a digit opens no inline environment
        ("pays $5 and $\\boxed{72}$ ok", "72"),
        ("pays \\$5 and \\boxed{72}\\$ ok", "72"),  # escaped dollars open and close nothing
        ("\\boxed{\\$1,234}", "1234"),
        ("\\boxed{\\$18.50}", "18"),
        ("The answer is $18.", "18"),  # a lone money sign: nothing to extract
        ("The answer is 18, and this is because of what we computed above: $18 a day and $2 more.", "18"),
        ("She pays $5 and $6 in all.\nThe answer is 11.", "11"),  # the $…$ is before the anchor
        ("The final answer is 18.\nShe paid $5 in all.", "18"),
        ("Answer: 18 dollars, i.e. 18 * $1.", "18"),
        ("She earns $5 a day.\nThe answer is $18$.", "18"),  # case 3 among money signs
        ("She pays $5 and $6.\nThe answer is $11$ in all.", "11"),
        ("She earns $5 a day. The answer is $18$.", "18"),  # "$5 a day. The answer is $" is not anchored
        ("The answer is $18$, so she saves.", "18"),
        ("The answer is $\\$18$.", "18"),
        # GSM8K's test split: "$$" (a money sign before an annotation) only before the boxed, "$<<…>>"
        ("It will cost her 4*4 = $$<<4*4=16.00>>16.00\nThe answer is \\boxed{16}.", "16"),
        ("In all 16+27 = $$<<16+27=43.00>>43.00\nThe answer is \\boxed{44}.", "43"),
        ("she pays $$<<2*3=6>>6 so \\boxed{6}", "6"),  # on the boxed's own line
        ("$$<<2*3=6.00>>6.00 and $$<<1+1=2>>2\nThe answer is \\boxed{6}.", "6"),  # two "$$", both before
        ("He paid 3*5 = $<<3*5=15>>15.\nThe answer is \\boxed{15}.", "15"),
        ("The answer is \\boxed{2125}.", "2,125"),  # a gold with thousands commas (14 of GSM8K's test golds)
        ("The answer is \\boxed{2,125}.", "2,125"),
        ("The answer is \\boxed{2,124}.", "2,125"),
        ("The answer is 2,125.", "2,125"),
        ("The answer is $1,450,000$.", "-1,450,000"),
    ],
)
def test_money_signs_the_fast_path_decides_match_trl(content, gold):
    assert fast_verdict(content, parse_gold(gold)) is not None
    theirs, theirs_log = _logged(trl_rewards.accuracy_reward, conv([content]), [gold])
    ours, ours_log = _logged(rewards.accuracy_reward, conv([content]), [gold])
    assert (ours, ours_log) == (theirs, theirs_log)


# The pieces math-verify's extraction patterns turn on: money and escaped dollars, boxes, anchors,
# brackets, percent signs, line breaks, numbers in the forms the fast path reads.
_PIECES = [
    "$", "\\$", "$$", "\\boxed{", "}", "{", "answer", "Answer", "final answer is", " is ", "18", "1,234",
    "18.5", "72", " ", "\n", "[", "]", "%", " percent", "\\frac{1}{2}", "\\(", "\\)", "x", " and ", ", ",
    ".", "I hope", "<<4*2=8>>", "-", "5$", " dollars", "$18$", "The answer is ", "$$<<16+2=18.00>>18.00",
    "$<<9*2=18>>18", "\\boxed{18}",
]  # fmt: skip


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(st.sampled_from(_PIECES), min_size=1, max_size=14),
    gold=st.sampled_from(["18", "72", "1,234"]),
)
def test_whatever_the_fast_path_decides_trl_decides_the_same(pieces, gold):
    """Random texts of those pieces: where the fast path answers, TRL gives the same verdict and string."""
    content = "".join(pieces)
    decided = fast_verdict(content, parse_gold(gold))
    if decided is not None:
        log = {}
        reward = trl_rewards.accuracy_reward(
            conv([content]), [gold], log_extra=lambda k, v: log.__setitem__(k, v)
        )
        assert decided == (reward[0], log["answer_parsed"][0])


@pytest.mark.parametrize("ending", ["boxed", "raw"])
def test_gsm8k_test_split_matches_trl(ending):
    """OpenAI's 1,319 GSM8K test solutions (real text: "$$<<16+27=43.00>>43.00", "$<<…>>", golds like
    "2,125"): TRL's verdicts and logged strings on every row. Ending ``\\boxed{N}``, every row is decided
    without math-verify; as written (``#### N``), all but one ("the answer from the previous step to find
    the total: $4.00 + $2.00", an anchored ``$4.00 + $`` that only math-verify reads)."""
    completions, solutions = answer_styles.gsm8k_test_split(ending)
    assert len(completions) == 1_319 and sum("$$" in c for c in completions) == 1
    theirs, theirs_log = _logged(trl_rewards.accuracy_reward, conv(completions), solutions)
    ours, ours_log = _logged(rewards.accuracy_reward, conv(completions), solutions)
    assert (ours, ours_log) == (theirs, theirs_log)
    undecided = [c for c, s in zip(completions, solutions) if fast_verdict(c, parse_gold(s)) is None]
    if ending == "boxed":
        assert theirs.count(1.0) == 660 and theirs.count(0.0) == 659
        assert undecided == []
    else:
        assert len(undecided) == 1 and "the answer from the previous step" in undecided[0]


@pytest.mark.parametrize(
    "make",
    [
        lambda: answer_styles.gsm8k_test_split(),
        lambda: answer_styles.realistic_mix(64, seed=3),
        lambda: answer_styles.make("GSM8K-style solution with money signs", 200, seed=3),
    ],
    ids=["GSM8K test split", "realistic mix", "GSM8K money signs"],
)
def test_a_cold_first_call_on_fast_styles_starts_no_worker(make):
    """The first call of a fresh process must not pay for a math-verify worker (sympy import, ~1-3 s)."""
    completions, solutions = make()
    code = (
        "import sys, json, rewards\n"
        "from rewards import math_verify_bounded as m\n"
        "c, s = json.loads(sys.stdin.read())\n"
        "rewards.accuracy_reward(c, solution=s)\n"
        "print(m._default_pool is None, 'sympy' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps([completions, solutions]),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert result.stdout.split() == ["True", "False"]
