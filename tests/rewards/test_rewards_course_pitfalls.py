"""Every pitfall of the course's reward functions: the check fails on the original code
(rewards/course_original.py, verbatim) and passes on ours.

Each ``check_*`` takes (a) the function under test and asserts the correct behaviour; each test runs
it on the original expecting an AssertionError (or the crash the pitfall is about) and on ours.
"""

from __future__ import annotations

import pytest

import rewards
from rewards import course_original as course

XML = "<reasoning>\n{reasoning}\n</reasoning>\n<answer>\n{answer}\n</answer>\n"


def conv(texts):
    return [[{"role": "assistant", "content": t}] for t in texts]


def fails(check, *args):
    with pytest.raises((AssertionError, TypeError, KeyError, IndexError)):
        check(*args)


# -- 12.4 reward_format: no re.DOTALL --------------------------------------------------------------
def check_format_accepts_multiline_reasoning(fn):
    one_line = "<think>Add 30 and 42 to get 72.</think><answer>72</answer>"
    multi_line = "<think>Add 30 and 42.\nThat gives 72.</think><answer>72</answer>"
    assert fn([multi_line]) == fn([one_line]) == [1.0]


def test_pitfall_format_regex_without_dotall():
    fails(check_format_accepts_multiline_reasoning, course.reward_format)
    check_format_accepts_multiline_reasoning(rewards.format_reward)


# -- 12.4 format_reward: empty tags earn 0.5 (reward hack) -----------------------------------------
def check_empty_tags_earn_nothing(fn):
    assert fn(["<think></think><answer></answer>", "<think> </think>\n<answer>\n</answer>"]) == [0.0, 0.0]


def test_pitfall_format_reward_pays_for_empty_tags():
    fails(check_empty_tags_earn_nothing, course.format_reward)
    check_empty_tags_earn_nothing(rewards.format_reward)


# -- 12.4/12.5 reward_len: characters, not the promised tokens ------------------------------------
def check_length_counts_tokens(fn):
    text = "tokenization " * 20  # 260 characters, 50 tokens
    assert fn([text], completion_ids=[list(range(50))]) == [0.0]


def test_pitfall_length_reward_counts_characters_not_tokens():
    fails(check_length_counts_tokens, course.reward_len_50)
    check_length_counts_tokens(rewards.length_reward(50, unit="tokens"))


def check_length_measures_message_text(fn):
    text = "x" * 20
    assert fn(conv([text])) == fn([text]) == [0.0]


def test_pitfall_length_reward_measures_the_message_list_in_conversational_format():
    fails(check_length_measures_message_text, course.reward_len)  # len([message]) == 1
    check_length_measures_message_text(rewards.length_reward(20, unit="chars"))


# -- 12.4 problem_reward: undefined helper swallowed by a bare except ------------------------------
def check_correct_answer_scores(fn, column):
    out = fn(["<answer>\n72\n</answer>", "<answer>\n71\n</answer>"], **{column: ["72", "72"]})
    assert out[0] > out[1]


def test_pitfall_problem_reward_scores_everything_zero():
    fails(check_correct_answer_scores, course.problem_reward, "answers")
    check_correct_answer_scores(rewards.correctness_reward, "answer")


# -- 12.6: completion[0]["content"] everywhere ----------------------------------------------------
GSM8K_PAIRS = [
    (course.correctness_reward_func, rewards.correctness_reward),
    (course.int_reward_func, rewards.int_reward),
    (course.strict_format_reward_func, rewards.strict_format_reward),
    (course.soft_format_reward_func, rewards.soft_format_reward),
    (course.xmlcount_reward_func, rewards.xmlcount_reward),
]


def check_standard_format_and_last_assistant_message(fn):
    text = XML.format(reasoning="30 + 42 = 72", answer="72")
    kwargs = {"prompts": [[{"role": "user", "content": "q"}]], "answer": ["72"]}
    as_conv = fn(conv([text]), **kwargs)
    assert fn([text], **kwargs) == as_conv  # plain strings work and score the same
    # After a tool call, the final assistant message is the answer, not the first one.
    tool_turns = [
        [
            {"role": "assistant", "content": "<tool_call>calc(30+42)</tool_call>"},
            {"role": "tool", "content": "72"},
            {"role": "assistant", "content": text},
        ]
    ]
    assert fn(tool_turns, **kwargs) == as_conv


@pytest.mark.parametrize("original,ours", GSM8K_PAIRS, ids=lambda f: f.__name__)
def test_pitfall_gsm8k_rewards_read_completion_0_content(original, ours, capsys):
    fails(check_standard_format_and_last_assistant_message, original)
    check_standard_format_and_last_assistant_message(ours)


# -- 12.6 soft/strict format: no re.DOTALL ---------------------------------------------------------
def check_xml_format_accepts_multiline_reasoning(fn):
    one_line = XML.format(reasoning="30 + 42 = 72, so 72.", answer="72")
    multi_line = XML.format(reasoning="30 + 42 = 72,\nso 72.", answer="72")
    assert fn(conv([multi_line])) == fn(conv([one_line])) == [0.5]


@pytest.mark.parametrize("original,ours", GSM8K_PAIRS[2:4], ids=lambda f: f.__name__)
def test_pitfall_xml_format_regex_without_dotall(original, ours):
    fails(check_xml_format_accepts_multiline_reasoning, original)
    check_xml_format_accepts_multiline_reasoning(ours)


# -- 12.6 strict format: demands a newline after </answer> ----------------------------------------
def check_strict_format_accepts_eos_after_answer_tag(fn):
    with_newline = XML.format(reasoning="30 + 42 = 72.", answer="72")
    at_eos = with_newline.rstrip("\n")  # the model stopped at EOS right after </answer>
    assert fn(conv([at_eos, with_newline])) == [0.5, 0.5]
    assert fn(conv([with_newline + "\n", at_eos + " "])) == [0.0, 0.0]  # one final newline, nothing more


def test_pitfall_strict_format_demands_a_newline_after_the_answer_tag():
    fails(check_strict_format_accepts_eos_after_answer_tag, course.strict_format_reward_func)
    check_strict_format_accepts_eos_after_answer_tag(rewards.strict_format_reward)


# -- 12.6 format rewards and xmlcount pay for empty tags -------------------------------------------
def check_empty_xml_tags_earn_nothing(fn):
    empty = [
        "<reasoning>\n\n</reasoning>\n<answer>\n\n</answer>\n",
        "<reasoning></reasoning><answer></answer>",
    ]
    assert fn(conv(empty)) == [0.0, 0.0]


@pytest.mark.parametrize("original,ours", GSM8K_PAIRS[2:], ids=lambda f: f.__name__)
def test_pitfall_xml_rewards_pay_for_empty_tags(original, ours):
    fails(check_empty_xml_tags_earn_nothing, original)
    check_empty_xml_tags_earn_nothing(ours)


# -- 12.6 format rewards and xmlcount pay for the system prompt's template echoed back ----------------
def check_the_prompts_placeholder_earns_nothing(fn):
    """The course's SYSTEM_PROMPT shows the layout with '...' in both sections; echoing it is no answer.

    Measured (issue #27): SmolLM2-135M trained on gsm8k-cpu wrote exactly this for all 40 problems of
    gsm8k-handwritten while it paid 1.5 of the 2.0 format rewards."""
    from datasets_prep.gsm8k import SYSTEM_PROMPT

    echo = SYSTEM_PROMPT.split("format:\n", 1)[1]
    assert echo == XML.format(reasoning="...", answer="...")
    one_line = "<reasoning>...</reasoning>\n<answer>...</answer>"
    variants = [echo, echo.rstrip("\n"), XML.format(reasoning="…", answer="…"), one_line]
    assert fn(conv(variants)) == [0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("original,ours", GSM8K_PAIRS[2:], ids=lambda f: f.__name__)
def test_pitfall_xml_rewards_pay_for_the_prompts_placeholder(original, ours):
    fails(check_the_prompts_placeholder_earns_nothing, original)
    check_the_prompts_placeholder_earns_nothing(ours)


def check_tags_inside_the_tags_earn_nothing(fn):
    """Measured on gsm8k-cpu (issue #27): once '...' stopped paying, the model wrote the first text for every
    problem, and xmlcount paid 0.25 for it: its "reasoning" was the tags between the first <reasoning> and
    the second </reasoning>."""
    nested = [
        "<reasoning>\n</reasoning>\n<answer>\n</reasoning>\n",
        "<reasoning>\n</reasoning>\n<answer>\n</answer>\n",
    ]
    assert fn(conv(nested)) == [0.0, 0.0]


def test_pitfall_xmlcount_pays_for_tags_inside_the_tags():
    fails(check_tags_inside_the_tags_earn_nothing, course.xmlcount_reward_func)
    for ours in (rewards.xmlcount_reward, rewards.soft_format_reward, rewards.strict_format_reward):
        check_tags_inside_the_tags_earn_nothing(ours)


def test_a_placeholder_reasoning_earns_no_xml_format():
    placeholder_reasoning = XML.format(reasoning="...", answer="72")
    assert rewards.strict_format_reward([placeholder_reasoning]) == [0.0]
    assert rewards.soft_format_reward([placeholder_reasoning]) == [0.0]
    assert rewards.xmlcount_reward([placeholder_reasoning]) == [0.25]  # the answer's two tags only
    assert course.strict_format_reward_func(conv([placeholder_reasoning])) == [0.5]


def test_a_placeholder_reasoning_earns_no_think_format():
    texts = ["<think>...</think><answer>72</answer>", "<think>…</think><answer>…</answer>"]
    assert course.format_reward(texts) == [0.5, 0.5]
    assert rewards.format_reward(texts) == [0.0, 0.0]


def test_a_short_real_section_still_counts():
    """Blank means no letter or digit: a one-character answer or a bare formula still holds content."""
    short = XML.format(reasoning="8*9", answer="7")
    assert rewards.strict_format_reward(conv([short])) == [0.5]
    assert rewards.soft_format_reward(conv([short])) == [0.5]
    assert rewards.xmlcount_reward(conv([short])) == [0.5]


# -- 12.6 count_xml: ending at </answer> charges the whole text -------------------------------------
def check_xmlcount_no_penalty_without_trailing_text(fn):
    short = XML.format(reasoning="72", answer="72").rstrip("\n")  # EOS right after </answer>
    long = XML.format(reasoning="a long and careful derivation. " * 40, answer="72").rstrip("\n")
    assert fn(conv([short, long])) == [0.5, 0.5]
    assert fn(conv([XML.format(reasoning="72", answer="72")])) == [0.5]  # never above 0.5


def check_xmlcount_charges_trailing_text_once(fn):
    text = XML.format(reasoning="72", answer="72") + "x" * 100
    assert fn(conv([text])) == [pytest.approx(0.5 - 100 * 0.001)]


def test_pitfall_xmlcount_penalises_reasoning_length_when_text_ends_at_answer_tag():
    fails(check_xmlcount_no_penalty_without_trailing_text, course.xmlcount_reward_func)
    check_xmlcount_no_penalty_without_trailing_text(rewards.xmlcount_reward)


def test_pitfall_xmlcount_charges_trailing_text_twice():
    fails(check_xmlcount_charges_trailing_text_once, course.xmlcount_reward_func)
    check_xmlcount_charges_trailing_text_once(rewards.xmlcount_reward)


# -- 12.6 int_reward_func: str.isdigit ------------------------------------------------------------
def check_int_reward_signs_and_unicode(fn):
    answers = ["-3", "\u22123", "1,000", "72", "3.5", "\u00b2", "seventy"]
    texts = [XML.format(reasoning="r", answer=a) for a in answers]
    assert fn(conv(texts)) == [0.5, 0.5, 0.5, 0.5, 0.0, 0.0, 0.0]


def test_pitfall_int_reward_rejects_negatives_and_accepts_superscripts():
    fails(check_int_reward_signs_and_unicode, course.int_reward_func)
    check_int_reward_signs_and_unicode(rewards.int_reward)


# -- 12.6 correctness_reward_func: string comparison, printing -------------------------------------
def check_correctness_is_numeric(fn):
    pairs = [("72.0", "72"), ("1,000", "1000"), ("\u22123", "-3"), ("72", "72"), ("71", "72")]
    texts = [XML.format(reasoning="r", answer=a) for a, _ in pairs]
    out = fn(conv(texts), answer=[g for _, g in pairs], prompts=[[{"role": "user", "content": "q"}]] * 5)
    assert out == [2.0, 2.0, 2.0, 2.0, 0.0]


def test_pitfall_correctness_compares_strings():
    fails(check_correctness_is_numeric, course.correctness_reward_func)
    check_correctness_is_numeric(rewards.correctness_reward)


def test_pitfall_correctness_prints_every_batch(capsys):
    kwargs = {"answer": ["72"], "prompts": [[{"role": "user", "content": "secret question"}]]}
    course.correctness_reward_func(completions=conv(["<answer>\n72\n</answer>"]), **kwargs)
    assert "secret question" in capsys.readouterr().out  # the original floods the log with data
    rewards.correctness_reward(conv(["<answer>\n72\n</answer>"]), **kwargs)
    assert capsys.readouterr().out == ""


def test_pitfall_correctness_needs_prompts():
    with pytest.raises(TypeError):  # the original cannot even be called without prompts
        course.correctness_reward_func(completions=conv(["x"]), answer=["72"])
    assert rewards.correctness_reward(conv(["<answer>72</answer>"]), answer=["72"]) == [2.0]


# -- the lint finds the originals' bugs ------------------------------------------------------------
@pytest.mark.parametrize(
    "original,expected",
    [
        (course.reward_format, {"dotall", "empty-tags"}),
        (course.reward_len, {"chars-vs-tokens", "conversational"}),
        (course.reward_len_50, {"chars-vs-tokens", "conversational"}),
        (course.format_reward, {"empty-tags", "exception"}),
        (course.problem_reward, {"constant"}),
        (course.correctness_reward_func, {"exception", "prints", "number-format"}),
        (course.int_reward_func, {"exception", "negative-number"}),
        (course.strict_format_reward_func, {"exception", "dotall", "empty-tags"}),
        (course.soft_format_reward_func, {"exception", "dotall", "empty-tags"}),
        (course.xmlcount_reward_func, {"exception", "empty-tags", "eos-penalty"}),
    ],
    ids=lambda x: getattr(x, "__name__", "") if callable(x) else "",
)
def test_lint_finds_the_course_bugs(original, expected):
    report = rewards.lint(original, verbose=False)
    assert expected <= report.checks(), str(report)
    assert not report.ok
