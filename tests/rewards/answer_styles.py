r"""GSM8K/MATH-style completions by answer style, for the accuracy_reward parity tests and benchmark.

Each style returns ``(completions, solutions)`` as plain strings; about half the answers are right.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path


def _steps(rng: random.Random) -> str:
    return "\n".join(
        f"Step {i + 1}: we have {rng.randint(1, 99)} items and add {rng.randint(1, 99)} more."
        for i in range(rng.randint(1, 5))
    )


def _answer(rng: random.Random, gold: int) -> int:
    return gold if rng.random() < 0.5 else gold + rng.choice([-10, -1, 1, 2, 1000])


def boxed(rng: random.Random) -> tuple[str, str]:
    gold = rng.randint(-50, 900)
    template = rng.choice(
        [
            "<think>\n{s}\n</think>\nSo the total gives \\boxed{{{a}}}.",
            "{s}\nThe answer is \\boxed{{{a}}}.",
            "<think>{s}</think><answer>\\boxed{{{a}}}</answer>",
            "{s}\nThe final answer is $\\boxed{{{a}}}$.",
        ]
    )
    return template.format(s=_steps(rng), a=_answer(rng, gold)), str(gold)


def boxed_formatted(rng: random.Random) -> tuple[str, str]:
    """Thousands separators (``1,234``) or decimals (``72.0``, ``72.5``) inside ``\\boxed{}``."""
    gold = rng.randint(1000, 250_000) if rng.random() < 0.5 else rng.randint(1, 900)
    answer = _answer(rng, gold)
    if answer >= 1000 and rng.random() < 0.7:
        written = f"{answer:,}"
    else:
        written = rng.choice([f"{answer}.0", f"{answer}.00", f"{answer}.5", f"{answer:,}.25"])
    return f"<think>\n{_steps(rng)}\n</think>\nSo we get \\boxed{{{written}}}.", str(gold)


def inline_dollar(rng: random.Random) -> tuple[str, str]:
    gold = rng.randint(-50, 5000)
    template = rng.choice(
        [
            "{s}\nThe answer is ${a}$.",
            "{s}\nThe final answer is ${a}$.",
            "{s}\nAnswer: ${a}$",
            "{s}\nWe get ${a}$ apples in total.",
            "<think>\n{s}\n</think>\nSo the answer is ${a}$ dollars.",
        ]
    )
    return template.format(s=_steps(rng), a=_answer(rng, gold)), str(gold)


def plain_trailing(rng: random.Random) -> tuple[str, str]:
    gold = rng.randint(-50, 5000)
    template = rng.choice(["{s}\nThe answer is {a}.", "{s}\nSo the total is {a}", "{s}\n#### {a}"])
    return template.format(s=_steps(rng), a=_answer(rng, gold)), str(gold)


def latex_fraction(rng: random.Random) -> tuple[str, str]:
    p, q = rng.randint(1, 40), rng.randint(2, 12)
    gold = rf"\frac{{{p}}}{{{q}}}" if rng.random() < 0.7 else str(p * q)
    ap, aq = (p, q) if rng.random() < 0.5 else (p + 1, q)
    if gold.isdigit():
        ap, aq = (p * q * 2, 2) if rng.random() < 0.5 else (ap, aq)
    fraction = rf"\frac{{{ap}}}{{{aq}}}"
    template = rng.choice(
        [
            "<think>\n{s}\n</think>\nThe probability is \\boxed{{{f}}}.",
            "{s}\nThe answer is ${f}$.",
            "{s}\nSo the ratio is \\boxed{{-{f}}}.",
        ]
    )
    return template.format(s=_steps(rng), f=fraction), gold


def no_answer(rng: random.Random) -> tuple[str, str]:
    gold = rng.randint(0, 900)
    text = rng.choice([_steps(rng), "I could not solve this problem.", "", "<think>\nhmm\n</think>"])
    return text, str(gold)


def symbolic(rng: random.Random) -> tuple[str, str]:
    """An expression only math-verify can compare (sympy): our workers run it, as TRL does in-process."""
    a, b = rng.randint(2, 4), rng.randint(1, 9)
    answer = f"x^{a} + {b}" if rng.random() < 0.5 else f"x^{a} + {b + 1}"
    return f"{_steps(rng)}\nThe final answer is \\boxed{{{answer}}}.", f"$x^{a}+{b}$"


_NAMES = ("Natalia", "Weng", "Betty", "Julie", "James", "Albert", "Ken", "Alexis", "Tina", "Mark")
_ITEMS = ("clips", "apples", "shirts", "tickets", "books", "cupcakes", "pencils", "lemons")


def _money(value: float) -> str:
    """GSM8K writes money as ``$18``, ``$1,200`` or ``$0.5`` (a sign, never escaped, before the number)."""
    if isinstance(value, float):
        return f"${value:g}"
    return f"${value:,}" if value >= 1000 and value % 2 else f"${value}"


def _gsm8k_reasoning(rng: random.Random) -> tuple[str, int]:
    """A GSM8K reference-solution body: money, percentages, ``<<48/2=24>>`` calculator annotations,
    thousands commas and several ``$`` signs on one line (``$5 + $10 = $<<5+10=15>>15``)."""
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    price, count = rng.randint(2, 60), rng.randint(2, 40)
    cost = price * count
    percent = rng.choice((10, 20, 25, 50))
    discount = cost * percent // 100
    lines = [
        (
            f"{name} buys {count} {item} at {_money(price)} each, so she pays {count} * {price} = "
            f"$<<{count}*{price}={cost}>>{cost}."
        ),
        f"The store takes {percent}% off: {percent}/100 * {cost} = $<<{percent}/100*{cost}={discount}>>{discount}.",
    ]
    total = cost - discount
    if rng.random() < 0.6:
        extra = rng.randint(1, 30)
        lines.append(
            f"With {_money(extra)} for the bag, {_money(total)} + {_money(extra)} = "
            f"$<<{total}+{extra}={total + extra}>>{total + extra} in all."
        )
        total += extra
    if rng.random() < 0.4:
        weeks = rng.randint(2, 52)
        lines.append(
            f"Over {weeks} weeks that is {weeks} * {total} = <<{weeks}*{total}={weeks * total}>>{weeks * total:,} "
            f"dollars, or {_money(weeks * total)}."
        )
        total *= weeks
    if rng.random() < 0.3:
        lines.append(f"Half of it is {total}/2 = $<<{total}/2={total / 2:g}>>{total / 2:g}.")
    return "\n".join(lines), total


# How a GRPO-trained model (or a rewrite of the reference) ends a GSM8K solution.
_GSM8K_ENDINGS = (
    "#### {a}",
    "The answer is \\boxed{{{a}}}.",
    "The answer is \\boxed{{{a}}}.",
    "The answer is \\boxed{{\\${a}}}.",
    "So {name} pays ${a} in total. The answer is \\boxed{{{a}}}.",
    "The final answer is \\boxed{{{a}}}.",
    "The answer is \\boxed{{{a:,}}}.",
    "The answer is \\boxed{{\\${a:,}}}.",
    "The answer is \\boxed{{{a}.00}}.",
    "The answer is {a}.",
    "The answer is ${a}.",
    "So the answer is {a} dollars.",
    "<answer>\n{a}\n</answer>",
)


def gsm8k_money(rng: random.Random) -> tuple[str, str]:
    """A GSM8K-style solution with ``$`` money signs around the reasoning, then one of the endings."""
    body, gold = _gsm8k_reasoning(rng)
    answer = gold if rng.random() < 0.5 else gold + rng.choice([-10, -1, 1, 2, 1000])
    ending = rng.choice(_GSM8K_ENDINGS)
    return f"{body}\n{ending.format(a=answer, name=rng.choice(_NAMES))}", str(gold)


STYLES: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "boxed": boxed,
    "boxed 1,234 / 72.0": boxed_formatted,
    "inline $…$": inline_dollar,
    "plain trailing number": plain_trailing,
    "LaTeX fraction": latex_fraction,
    "no answer": no_answer,
    "GSM8K-style solution with money signs": gsm8k_money,
}
# Not decided without math-verify (reported beside the styles above, not part of their targets).
MATH_VERIFY_STYLES: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "symbolic \\boxed{x^2 + 1}": symbolic
}


def make(style: str, n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(f"{style}-{seed}")
    pairs = [{**STYLES, **MATH_VERIFY_STYLES}[style](rng) for _ in range(n)]
    return [c for c, _ in pairs], [s for _, s in pairs]


def realistic_mix(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """A GSM8K-run mix: mostly boxed and plain answers, some formatted, inline and fractions."""
    weights = {
        "boxed": 0.40,
        "boxed 1,234 / 72.0": 0.10,
        "inline $…$": 0.15,
        "plain trailing number": 0.20,
        "LaTeX fraction": 0.05,
        "no answer": 0.10,
    }
    rng = random.Random(f"mix-{seed}")
    styles = rng.choices(list(weights), weights=list(weights.values()), k=n)
    pairs = [STYLES[style](rng) for style in styles]
    return [c for c, _ in pairs], [s for _, s in pairs]


GSM8K_TEST_SPLIT = Path(__file__).resolve().parents[1] / "fixtures" / "gsm8k_openai_test" / "test.jsonl"


def gsm8k_test_split(ending: str = "boxed") -> tuple[list[str], list[str]]:
    r"""OpenAI's 1,319 GSM8K test solutions (grade-school-math, MIT licence: tests/fixtures/gsm8k_openai_test)
    as completions, with the gold after ``####`` as written (``2,125`` keeps its comma) as the solution.

    ``ending="boxed"``: the ``#### N`` line becomes ``The answer is \boxed{M}.``, M = N on even rows and
    N + 1 on odd ones (a wrong answer), so both verdicts occur; ``"raw"``: the solution as written.
    """
    completions, solutions = [], []
    for i, line in enumerate(GSM8K_TEST_SPLIT.read_text(encoding="utf-8").splitlines()):
        solution_text = json.loads(line)["answer"]
        reasoning, gold = solution_text.rsplit("\n#### ", 1)
        if ending == "raw":
            completions.append(solution_text)
        else:
            answer = gold if i % 2 == 0 else str(int(gold.replace(",", "")) + 1)
            completions.append(f"{reasoning}\nThe answer is \\boxed{{{answer}}}.")
        solutions.append(gold)
    return completions, solutions
