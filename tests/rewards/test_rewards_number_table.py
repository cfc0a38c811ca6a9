r"""correctness_reward on answer strings a small model writes, beside math-verify's own verdict.

Each row: what is inside ``<answer>…</answer>``, the gold answer, whether ``correctness_reward`` credits it,
and — only where math-verify (``verify(parse(gold), parse(answer))``, its defaults, run here) disagrees —
which of the two is right and why. A row without a reason must agree with math-verify, so the table
cannot hide a disagreement, and a math-verify upgrade that changes a verdict fails here.
"""

from __future__ import annotations

import logging

import pytest

import rewards
from rewards._text import numbers_equal, parse_number

math_verify = pytest.importorskip("math_verify")
logging.getLogger("math_verify").setLevel(logging.CRITICAL)

XML = "<reasoning>\nShe earns 9 * 2 = $18.\n</reasoning>\n<answer>\n{answer}\n</answer>\n"

HEDGE = (
    "two different numbers: math-verify takes the last one, so listing candidates would pay; "
    "we refuse every answer that holds two numbers"
)
WORDS_BEFORE = (
    "words before the number: math-verify reads the last number of any text (it also credits 'not 18'); "
    "the <answer> section must be the number itself, with at most a unit after it"
)
FRACTIONS = (
    "math-verify is right: 1/2 is 0.5. correctness_reward reads plainly written numbers only (GSM8K's "
    "golds are integers); fractions and LaTeX are accuracy_reward's job, which runs math-verify"
)

# (answer written by the model, gold answer, credited by correctness_reward, why it differs from math-verify)
TABLE = [
    # units and money signs: right answers, credited
    ("18", "18", True, None),
    ("18 dollars", "18", True, None),
    ("18 dollars.", "18", True, None),
    ("18 cm", "18", True, None),
    ("18cm", "18", True, None),
    ("18 km/h", "18", True, None),
    ("$18 per hour", "18", True, None),
    ("72 apples", "72", True, None),
    ("1,000 dollars", "1000", True, None),
    ("25%", "25", True, None),
    ("$18", "18", True, None),
    ("$-18", "-18", True, None),
    ("$18.00", "18", True, None),
    ("\\boxed{\\$18}", "18", True, None),
    ("\\boxed{18} dollars", "18", True, None),
    ("\\boxed{18}\\text{ dollars}", "18", True, None),
    (
        "\\$18",
        "18",
        True,
        (
            "ours is right: \\$ is LaTeX for a dollar sign, so \\$18 is $18, which math-verify credits; "
            "outside an environment it extracts nothing from it"
        ),
    ),
    (
        "\\boxed{18 dollars}",
        "18",
        True,
        (
            "ours is right: inside a box math-verify reads the unit as a product of variables (18*a*d*o*l*l*r*s) "
            "although it drops the same word outside the box (18 dollars)"
        ),
    ),
    # number formats
    ("18.0", "18", True, None),
    ("1,000", "1000", True, None),
    ("\\boxed{1,000}", "1000", True, None),
    ("1 000", "1000", True, None),
    ("-3", "-3", True, None),
    ("\u22123", "-3", True, "ours is right: U+2212 is the minus sign; math-verify extracts nothing from it"),
    # wrong answers and hacks: refused
    ("18 dollars", "19", False, None),
    ("7 2", "72", False, None),
    ("18 20", "18", False, None),
    ("18, 20", "18", False, None),
    ("18 or 20", "18", False, None),
    ("18 or 20", "20", False, HEDGE),
    ("18 and 20", "20", False, HEDGE),
    ("$18 or $20", "20", False, HEDGE),
    ("18 dollars 20", "20", False, HEDGE),
    ("\\boxed{18} or \\boxed{20}", "20", False, None),
    ("\\boxed{18 or 20}", "20", False, None),
    ("18 or nineteen", "18", False, HEDGE + " (a number word counts)"),
    ("18 or 18", "18", False, "a hedged answer ('x or y') is refused even when both are the same number"),
    (
        "18 plus tax",
        "18",
        False,
        "'18 plus tax' is another amount, not 18 with a unit; math-verify drops the words",
    ),
    ("about 18", "18", False, WORDS_BEFORE),
    ("not 18", "18", False, WORDS_BEFORE),
    ("The answer is 18", "18", False, WORDS_BEFORE),
    ("seventy-two", "72", False, None),
    ("1e3", "1000", False, None),
    ("\u00b2", "2", False, None),
    # fractions and percentages against a non-integer gold
    ("1/2", "0.5", False, FRACTIONS),
    ("\\frac{1}{2}", "0.5", False, FRACTIONS),
    ("0.5", "\\frac{1}{2}", False, FRACTIONS),
    (
        "72%",
        "0.72",
        False,
        (
            "a percent sign is a unit for us: GSM8K asks 'what percent…' with the gold 72, and 72% must match "
            "that; math-verify accepts both readings (72% = 72 and = 0.72), so it cannot refuse 72% for 0.72"
        ),
    ),
]


def _math_verify_credits(answer: str, gold: str) -> bool:
    return bool(math_verify.verify(math_verify.parse(gold), math_verify.parse(answer)))


@pytest.mark.parametrize("answer,gold,credited,why", TABLE, ids=[f"{a!r}|{g}" for a, g, _, _ in TABLE])
def test_correctness_reward_table_against_math_verify(answer, gold, credited, why):
    assert rewards.correctness_reward([XML.format(answer=answer)], answer=[gold]) == [
        2.0 if credited else 0.0
    ]
    if _math_verify_credits(answer, gold) == credited:
        assert why is None, "math-verify agrees now: drop the reason"
    else:
        assert why, f"correctness_reward and math-verify disagree on {answer!r} (gold {gold!r}): say why"


def test_int_reward_stays_a_format_reward():
    """int_reward pays for the bare integer the gold answers use; a unit is correctness_reward's business."""
    for answer in ("18", "-3", "1,000", "72.0", "$18", "\\$18", "\\boxed{18}"):
        assert rewards.int_reward([XML.format(answer=answer)]) == [0.5], answer
    for answer in (
        "18 dollars",
        "\\boxed{18 dollars}",
        "18 or 20",
        "7 2",
        "\\boxed{18} or \\boxed{20}",
        "3.5",
    ):
        assert rewards.int_reward([XML.format(answer=answer)]) == [0.0], answer


def test_units_are_only_read_when_asked():
    assert parse_number("18 dollars") is None
    assert parse_number("18 dollars", units=True) == 18
    assert numbers_equal("18 dollars", "18", units=True) and not numbers_equal("18 dollars", "18")
