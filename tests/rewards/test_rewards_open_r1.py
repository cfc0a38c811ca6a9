"""rewards.open_r1 beyond open-r1's own tests: its math-verify verdicts equal open-r1's exact calls, the
fixes behind their arguments, and what open-r1 would crash on.

The reference below makes open-r1's calls (src/open_r1/rewards.py at 1416fa0: ``accuracy_reward`` and the
correctness inside ``len_reward`` / ``get_cosine_scaled_reward``) with the real math-verify, in this
process; ours answer from the fast path or from bounded worker processes.
"""

from __future__ import annotations

import logging
import pickle
import re
from pathlib import Path

import pytest

from rewards import open_r1

math_verify = pytest.importorskip("math_verify")
logging.getLogger("math_verify").setLevel(logging.CRITICAL)


def _answer_config(boxed):
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import LatexExtractionConfig

    normalization = NormalizationConfig(
        nits=False, malformed_operators=False, basic_latex=True, equations=True, boxed=boxed, units=True
    )
    return [
        LatexExtractionConfig(
            normalization_config=normalization, boxed_match_priority=0, try_extract_without_anchor=False
        )
    ]


def reference_accuracy(content: str, solution: str) -> float | None:
    """open-r1's accuracy_reward for one row (without its prints)."""
    from math_verify import parse, verify

    gold = parse(solution, extraction_mode="first_match")
    if not gold:
        return None
    answer = parse(content, extraction_config=_answer_config("all"), extraction_mode="first_match")
    try:
        return float(verify(gold, answer))
    except Exception:  # noqa: BLE001 - open-r1 skips the row
        return None


def reference_length_correct(content: str, solution: str, plain_gold: bool = False) -> bool | None:
    """The correctness open-r1's len_reward and cosine reward compute (None: unparseable gold);
    ``plain_gold``: the gold read by math-verify's defaults (our fix)."""
    from math_verify import LatexExtractionConfig, parse, verify

    gold_config = {} if plain_gold else {"extraction_config": [LatexExtractionConfig()]}
    gold = parse(solution, extraction_mode="first_match", **gold_config)
    if not gold:
        return None
    answer = parse(content, extraction_config=_answer_config(True), extraction_mode="first_match")
    return bool(verify(answer, gold))


CASES = [
    # (completion, solution): fast-path shapes, GSM8K shapes, and ones only math-verify decides
    (r"\boxed{\frac{63}{400}}", r"\frac{63}{400}"),
    (r"\boxed{\frac{64}{400}}", r"\frac{63}{400}"),
    (r"The answer is \boxed{72}.", "72"),
    (r"The answer is \boxed{72.0}.", "72"),
    (r"The answer is \boxed{1,234}.", "1234"),
    (r"The answer is \boxed{2125}.", "2,125"),  # a GSM8K gold with a thousands comma
    (r"The answer is \boxed{-5}.", "-5,000"),
    ("The answer is $18$.", "18"),
    ("So the answer is 18.", "18"),
    ("She makes 9 * 2 = $<<9*2=18>>18 every day.\nThe answer is \\boxed{18}.", "18"),
    ("It will cost her 4*4 = $$<<4*4=16.00>>16.00\nThe answer is \\boxed{16}.", "16"),
    (r"\boxed{x = 5}", "5"),  # equations=True (open-r1) keeps the right side
    (r"\boxed{\sqrt{2} + 1}", r"1+\sqrt{2}"),
    (r"\boxed{0.5}", r"\frac{1}{2}"),
    (r"\boxed{answer}", "unparseable_latex"),
    ("$x^2$ is the answer", r"$x^2$"),
]


def test_accuracy_reward_equals_open_r1_calls():
    completions = [[{"role": "assistant", "content": c}] for c, _ in CASES]
    ours = open_r1.accuracy_reward(completions, [s for _, s in CASES])
    assert ours == [reference_accuracy(c, s) for c, s in CASES]


def test_length_correctness_equals_open_r1_calls():
    """len_reward's correctness, read back through its formula on a batch of two: the case and a longer
    filler (the case is the shortest: lambda = 0.5, kept when correct or unparseable, 0.0 when wrong)."""
    for content, solution in CASES:
        expected = reference_length_correct(content, solution)
        rewards = open_r1.len_reward([content, "#" * (len(content) + 10)], [solution, solution])
        assert rewards[0] == (0.5 if expected is None or expected else 0.0), (content, solution, expected)


def test_cosine_plain_gold_equals_the_reference_with_the_gold_read_by_default():
    cosine = open_r1.get_cosine_scaled_reward(max_len=1, clamp=True, plain_gold=True)  # every length: cos(pi)
    ours = cosine([c for c, _ in CASES], [s for _, s in CASES])
    expected = []
    for content, solution in CASES:
        verdict = reference_length_correct(content, solution, plain_gold=True)
        expected.append(1.0 if verdict is None else (0.5 if verdict else -0.5))  # the correct/wrong minimum
    assert ours == pytest.approx(expected)
    assert ours[2] == pytest.approx(0.5)  # "72" parses: \boxed{72} is correct, not skipped


def test_integer_gold_is_unparseable_for_open_r1s_length_rewards():
    """open-r1's quirk, kept: its len/cosine rewards parse the gold as LaTeX only, so a GSM8K gold "72"
    never parses; len_reward counts every completion correct and the cosine reward scores 1.0."""
    assert reference_length_correct(r"\boxed{5}", "72") is None
    cosine = open_r1.get_cosine_scaled_reward(max_len=100)
    assert cosine([r"\boxed{5}"], ["72"]) == [1.0]


def test_cosine_length_unit_tokens_and_clamp():
    text = r"\boxed{\frac{63}{400}}" + " " * 78  # 100 characters, correct
    chars = open_r1.get_cosine_scaled_reward(max_len=100)
    tokens = open_r1.get_cosine_scaled_reward(max_len=100, length_unit="tokens")
    assert chars([text], [r"\frac{63}{400}"]) == pytest.approx([0.5])  # cos(pi): the correct minimum
    assert tokens([text], [r"\frac{63}{400}"], completion_ids=[[1] * 20]) == pytest.approx([0.9522542])
    long_wrong = r"\boxed{\frac{64}{400}}" + " " * 178  # 200 characters: twice max_len
    unclamped = chars([long_wrong], [r"\frac{63}{400}"])[0]
    clamped = open_r1.get_cosine_scaled_reward(max_len=100, clamp=True)([long_wrong], [r"\frac{63}{400}"])[0]
    assert unclamped == pytest.approx(-1.0)  # open-r1: the cosine climbed back to the empty answer's penalty
    assert clamped == pytest.approx(-0.5)
    with pytest.raises(ValueError, match="completion_ids"):
        tokens([text], [r"\frac{63}{400}"])
    with pytest.raises(ValueError, match="length_unit"):
        open_r1.get_cosine_scaled_reward(length_unit="words")


def test_create_weighted_reward_scales_keeps_none_and_name():
    weighted = open_r1.create_weighted_reward(open_r1.format_reward, 2.0)
    text = "<think>\nr\n</think>\n<answer>\n5\n</answer>"
    assert weighted([text, "no tags"]) == [2.0, 0.0]
    assert weighted.__name__ == "format_reward"
    skipping = open_r1.create_weighted_reward(open_r1.accuracy_reward, 0.5)
    assert skipping([r"\boxed{1}"], solution=["unparseable_latex"]) == [None]
    with pytest.raises(ValueError, match="finite"):
        open_r1.create_weighted_reward(open_r1.format_reward, float("nan"))


def test_factories_pickle_and_refuse_bad_arguments():
    for fn in (
        open_r1.get_cosine_scaled_reward(),
        open_r1.get_repetition_penalty_reward(3, -1.0),
        open_r1.get_code_format_reward("cpp"),
        open_r1.create_weighted_reward(open_r1.tag_count_reward, 3.0),
    ):
        clone = pickle.loads(pickle.dumps(fn))
        assert clone.__name__ == fn.__name__
    with pytest.raises(ValueError, match="ngram_size"):
        open_r1.get_repetition_penalty_reward(0, -1.0)  # open-r1 divides by zero on the first call
    with pytest.raises(ValueError, match="not yet implemented"):
        open_r1.get_repetition_penalty_reward(2, -1.0, language="fr")


def test_what_open_r1_would_crash_on_scores():
    assert open_r1.len_reward([], solution=[]) == []
    code = open_r1.get_code_format_reward()
    text = "<think>\nx\n</think>\n<answer>\n```c++\nint main(){}\n```\n</answer>"
    assert code([text], language=["c++"]) == [1.0]  # matched as text, not as a pattern
    assert code([text], language=[".*"]) == [0.0]  # open-r1's pattern would match any fence


def _readme_contract_rows() -> list[tuple[list[str], str, str]]:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "rewards.md").read_text(encoding="utf-8")
    table = readme.split("| name | `from rewards import` follows |", 1)[1].split("\n\n", 1)[0]
    rows = []
    for line in table.splitlines()[2:]:
        names_cell, top_cell, open_r1_cell = [cell.strip() for cell in line.strip("|").split(" | ")]
        rows.append((re.findall(r"`(\w+)`", names_cell), top_cell, open_r1_cell))
    return rows


def test_readme_contract_table_is_true():
    """The "Same names, three contracts" table (docs/rewards.md, moved there from the README): each name is where it says, under the contract it
    names (TRL: trl.rewards has the name; the course: TRL does not), and every public name is listed."""
    trl_rewards = pytest.importorskip("trl.rewards")
    import rewards

    listed_top, listed_open_r1 = set(), set()
    for names, top, in_open_r1 in _readme_contract_rows():
        for name in names:
            if top == "—":
                assert name not in rewards.__all__, name
            else:
                listed_top.add(name)
                assert hasattr(trl_rewards, name) == top.startswith("TRL"), name
                assert top.startswith(("TRL", "the course")), top
            if in_open_r1 == "—":
                assert name not in open_r1.__all__, name
            else:
                listed_open_r1.add(name)
                assert (getattr(open_r1, name) is getattr(rewards, name, None)) == (
                    in_open_r1 == "the same function"
                )
    assert listed_open_r1 == set(open_r1.__all__)
    assert {n for n in rewards.__all__ if n.endswith("_reward") or n.startswith("get_")} <= listed_top | {
        "calculation_reward",
        "tool_answer_reward",
        "tool_call_reward",
        "tool_success_reward",
        "visual_answer_reward",  # grpo-kit's own names, like the three above: no peer's contract to follow
        "visual_choice_reward",
    }
