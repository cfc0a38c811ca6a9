"""Synthetic GSM8K / TL;DR: answers recomputed from the solution steps, format, determinism, variety."""

from __future__ import annotations

import ast
import operator
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from datasets_prep import load_gsm8k, load_smoltldr, synthetic_gsm8k, synthetic_tldr
from rewards import extract_hash_answer

ANNOTATION = re.compile(r"<<([^=<>]+)=(-?\d+)>>(-?\d+)")
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
# Numbers that GSM8K-style text writes as words ("twice", "half", "a third", "back the same way").
WORD_NUMBERS = {2, 3, 4, 5}


def _arith(expr: str) -> float:
    """Evaluate our own generated +-*/ integer arithmetic (never model output) with an AST walk."""

    def walk(node):
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        raise ValueError(f"unexpected syntax in {expr!r}")

    return walk(ast.parse(expr, mode="eval"))


def _check_problem(row: dict) -> int:
    """Recompute every annotated step; return the number of steps. Fails on any inconsistency."""
    assert set(row) == {"question", "answer"}
    lines = row["answer"].split("\n")
    assert re.fullmatch(r"#### \d+", lines[-1]), lines[-1]
    final = int(extract_hash_answer(row["answer"]))
    question_numbers = {int(x) for x in re.findall(r"\d+", row["question"])}
    known = set(question_numbers) | WORD_NUMBERS
    results = []
    for line in lines[:-1]:
        (match,) = ANNOTATION.findall(line)  # exactly one calculation per line, as in GSM8K
        expr, annotated, shown = match
        value = _arith(expr)
        assert value == int(annotated) == int(shown), line  # exact integer, annotation agrees
        assert f"{expr} = <<" in line  # the expression is also written out before the annotation
        operands = {int(x) for x in re.findall(r"\d+", expr)}
        assert operands <= known | set(results), (line, operands - known - set(results), row["question"])
        assert int(annotated) >= 0
        results.append(int(annotated))
    assert results and results[-1] == final
    assert row["question"].rstrip().endswith("?")
    return len(results)


@pytest.mark.parametrize(
    "difficulty,steps",
    [("easy", {1, 2}), ("medium", {2, 3}), ("hard", {3, 4}), ("mixed", {1, 2, 3, 4}), (1, {1}), (4, {4})],
)
def test_every_answer_recomputes_and_step_counts_follow_difficulty(difficulty, steps):
    rows = synthetic_gsm8k(300, seed=11, difficulty=difficulty)
    counts = Counter(_check_problem(row) for row in rows)
    assert set(counts) == steps


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**32),
    difficulty=st.sampled_from(["easy", "medium", "hard", 2, 3]),
)
def test_any_seed_gives_consistent_problems(seed, difficulty):
    for row in synthetic_gsm8k(8, seed=seed, difficulty=difficulty):
        _check_problem(row)


def test_deterministic_for_a_seed_and_prefix_stable():
    assert synthetic_gsm8k(40, seed=5) == synthetic_gsm8k(40, seed=5)
    assert synthetic_gsm8k(40, seed=5)[:10] == synthetic_gsm8k(10, seed=5)
    assert synthetic_gsm8k(40, seed=5) != synthetic_gsm8k(40, seed=6)
    assert synthetic_tldr(20, seed=2) == synthetic_tldr(20, seed=2) != synthetic_tldr(20, seed=3)


def test_varied_enough_not_to_memorise():
    rows = synthetic_gsm8k(1000, seed=0)
    questions = [r["question"] for r in rows]
    answers = Counter(extract_hash_answer(r["answer"]) for r in rows)
    assert len(set(questions)) == len(questions)
    assert len(answers) > 150  # answers are spread out (GSM8K too favours small numbers), not a handful
    assert answers.most_common(1)[0][1] < 40
    # Many different story shapes: the question with every number masked out.
    shapes = {re.sub(r"\d+", "N", q) for q in questions}
    assert len(shapes) > 500
    first_words = Counter(q.split()[0] for q in questions)
    assert len(first_words) > 30  # many names, not one protagonist


def test_loads_through_the_gsm8k_formatter():
    rows = synthetic_gsm8k(10, seed=4)
    dataset = load_gsm8k(source=rows)
    assert dataset["answer"] == [r["answer"].rsplit("#### ", 1)[1] for r in rows]


@pytest.mark.parametrize("bad", ["extreme", 0, 5, 2.0, None])
def test_bad_difficulty_is_explained(bad):
    with pytest.raises((ValueError, TypeError), match=r"difficulty"):
        synthetic_gsm8k(3, difficulty=bad)


@pytest.mark.parametrize("bad", [-1, 2.5, "10"])
def test_bad_n_is_explained(bad):
    with pytest.raises(ValueError, match=r"n must be a non-negative integer"):
        synthetic_gsm8k(bad)
    with pytest.raises(ValueError, match=r"n must be a non-negative integer"):
        synthetic_tldr(bad)


def test_tldr_schema_and_variety():
    rows = synthetic_tldr(500, seed=0)
    assert all(set(r) == {"prompt", "completion"} for r in rows)
    assert all(isinstance(r["prompt"], str) and len(r["prompt"]) > 80 for r in rows)
    assert all(0 < len(r["completion"]) < len(r["prompt"]) for r in rows)  # a summary is shorter
    assert len({r["prompt"] for r in rows}) > 450
    assert len({r["completion"] for r in rows}) > 100
    dataset = load_smoltldr(source=rows)
    assert dataset.column_names == ["prompt", "completion"]
