"""Behaviour of our own reward functions and helpers, names, pickling, and calling mistakes."""

from __future__ import annotations

import pickle

import pytest

import rewards
from rewards import course_original
from rewards._text import numbers_equal, parse_number

XML = "<reasoning>\n{reasoning}\n</reasoning>\n<answer>\n{answer}\n</answer>\n"


def conv(texts):
    return [[{"role": "assistant", "content": t}] for t in texts]


# -- helpers ----------------------------------------------------------------------------------------
def test_completion_text_formats():
    assert rewards.completion_text("plain") == "plain"
    assert rewards.completion_text([{"role": "assistant", "content": "a"}]) == "a"
    assert (
        rewards.completion_text(
            [
                {"role": "assistant", "content": "a"},
                {"role": "tool", "content": "t"},
                {"role": "assistant", "content": "b"},
            ]
        )
        == "b"
    )
    assert rewards.completion_text([{"content": "no role"}]) == "no role"
    assert (
        rewards.completion_text(
            [{"role": "assistant", "content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]}]
        )
        == "xy"
    )
    assert rewards.completion_text([{"role": "assistant", "content": None}]) == ""
    assert rewards.completion_text([]) == ""


def test_extractors():
    assert rewards.extract_xml_answer("<answer>\n 72 \n</answer>") == "72"
    assert rewards.extract_xml_answer("72") == "72"  # the course's behaviour without tags, kept
    assert rewards.extract_hash_answer("so 30 + 42 = 72\n#### 72") == "72"
    assert rewards.extract_hash_answer("no hashes") is None
    assert rewards.extract_boxed("a \\boxed{\\frac{1}{2}} b \\boxed{72}") == "72"
    assert rewards.extract_boxed("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert rewards.extract_boxed("\\boxed{1} then \\boxed{\\frac{1}{") == "1"  # unclosed last box skipped
    assert rewards.extract_boxed("\\boxed{") is None
    assert rewards.extract_boxed("none") is None


@pytest.mark.parametrize(
    "text,value",
    [
        ("72", 72),
        ("72.0", 72),
        ("-3", -3),
        ("\u22123", -3),
        ("1,000", 1000),
        ("$1,000.50", 1000.5),
        ("72.", 72),
        (" +5 ", 5),
        ("\\boxed{72}", 72),
        (".5", 0.5),
    ],
)
def test_parse_number_accepts(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(
    "text", ["", "abc", "\u00b2", "\u0663", "1e3", "1,00", "72 apples", "nan", "inf", "--3", "1/2"]
)
def test_parse_number_rejects(text):
    assert parse_number(text) is None


@pytest.mark.parametrize("text", ["7 2", "3 4", "1 2 3", "1 00", "1000 000", "12 34", "- 3"])
def test_spaces_inside_a_number_are_not_deleted(text):
    """The course deleted every space ("7 2" was 72); only thousands groups of three may follow a space."""
    assert parse_number(text) is None
    assert rewards.int_reward([XML.format(reasoning="r", answer=text)]) == [0.0]
    assert rewards.correctness_reward(
        [XML.format(reasoning="r", answer=text)], answer=[text.replace(" ", "")]
    ) == [0.0]


@pytest.mark.parametrize(
    "text,value", [("1 000", 1000), ("12 345 678", 12345678), ("-1 000", -1000), ("1 000.5", 1000.5)]
)
def test_thousands_separated_by_spaces_are_numbers(text, value):
    assert parse_number(text) == value
    assert rewards.correctness_reward([XML.format(reasoning="r", answer=text)], answer=[str(value)]) == [2.0]


def test_numbers_equal_is_exact():
    assert numbers_equal("0.30000000000000004", "0.3") is False
    assert numbers_equal("1,000", "1000.00") is True


# -- course rewards ---------------------------------------------------------------------------------
def test_length_reward_units_and_names():
    chars = rewards.length_reward(10, unit="chars")
    assert chars.__name__ == "length_reward_10_chars"
    assert chars(["x" * 10, "x" * 13, ""]) == [0.0, -3.0, -10.0]
    tokens = rewards.length_reward(5)  # tokens is the default: the course meant tokens
    assert tokens.__name__ == "length_reward_5_tokens"
    assert tokens(["whatever"] * 2, completion_ids=[[1] * 5, [1] * 9]) == [0.0, -4.0]
    assert all(type(v) is float for v in tokens(["a"], completion_ids=[[1]]))


def test_length_reward_with_a_tokenizer():
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    vocab = {"[UNK]": 0, "one": 1, "two": 2, "three": 3}
    backend = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]")
    fn = rewards.length_reward(3, unit="tokens", tokenizer=tokenizer)
    assert fn(["one two three", "one", "one two three one two"]) == [0.0, -2.0, -2.0]
    # completion_ids, when passed (GRPOTrainer), win over re-tokenising the text
    assert fn(["one"], completion_ids=[[1, 2, 3]]) == [0.0]
    assert pickle.loads(pickle.dumps(fn))(["one two three"]) == [0.0]


def test_length_reward_in_tokens_without_ids_or_tokenizer_says_how_to_fix():
    with pytest.raises(ValueError, match="completion_ids.*tokenizer"):
        rewards.length_reward(50, unit="tokens")(["text"])
    with pytest.raises(ValueError, match="unit"):
        rewards.length_reward(50, unit="words")
    with pytest.raises(ValueError, match="ideal_length"):
        rewards.length_reward(-1)


def test_format_reward():
    good = "<think>Add 30 and 42.\nThat is 72.</think>\n<answer>72</answer>"
    cases = [
        good,
        " \n" + good + "\n",
        "<think>a longer line of reasoning</think><answer>\n72\nand more lines\n</answer>",
        "<think>r</think>",
        "junk " + good,
        good + " junk",
        "<think>r</think><answer>72</answer><answer>73</answer>",
        "<think>r<think>x</think><answer>72</answer>",
        "<think>r</think><answer></answer>",
        "",
    ]
    assert rewards.format_reward(cases) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]


def test_format_reward_keeps_the_courses_tier_for_trivial_reasoning():
    """Course 12.4: reasoning of 20 characters or fewer earns 0.5, not the full 1.0 (same as the course)."""
    trivial = "<think>8*9</think><answer>72</answer>"
    exactly_20 = "<think>" + "x" * 20 + "</think><answer>72</answer>"
    over_20 = "<think>" + "x" * 21 + "</think><answer>72</answer>"
    padded = (
        "<think>   " + "x" * 20 + "   </think><answer>72</answer>"
    )  # counted after strip, as in the course
    texts = [trivial, exactly_20, over_20, padded]
    assert rewards.format_reward(texts) == course_original.format_reward(texts) == [0.5, 0.5, 1.0, 0.5]


def test_reasoning_that_mentions_the_answer_tag_keeps_its_format_rewards():
    """Decided: the layout decides the format, not the prose; the answer section itself holds no tag."""
    mention = "I will write the total in <answer> tags, then close with </answer>."
    strict = XML.format(reasoning=mention, answer="72")
    assert rewards.strict_format_reward([strict, strict.rstrip("\n")]) == [0.5, 0.5]
    assert rewards.soft_format_reward([strict]) == [0.5]
    assert rewards.correctness_reward([strict], answer=["72"]) == [2.0]  # the last <answer> is the answer
    assert rewards.format_reward([f"<think>{mention}</think><answer>72</answer>"]) == [1.0]
    # ... but a tag inside the answer, or the reasoning closing twice, is still not the format
    two_answers = XML.format(reasoning="r", answer="72\n</answer>\n<answer>\n73")
    closes_twice = XML.format(reasoning="r\n</reasoning>\nmore", answer="72")
    assert rewards.strict_format_reward([two_answers, closes_twice]) == [0.0, 0.0]
    assert rewards.format_reward(["<think>r</think>x</think><answer>72</answer>"]) == [0.0]


def test_gsm8k_scales_and_max_total():
    text = XML.format(reasoning="30 + 42\n= 72", answer="72")
    kwargs = {"answer": ["72"]}
    total = sum(
        fn([text], **kwargs)[0]
        for fn in (
            rewards.correctness_reward,
            rewards.int_reward,
            rewards.soft_format_reward,
            rewards.strict_format_reward,
            rewards.xmlcount_reward,
        )
    )
    assert total == pytest.approx(4.0)  # 2 + 0.5 + 0.5 + 0.5 + 0.5, as in the course


def test_strict_format_layout():
    ok = XML.format(reasoning="line one\nline two", answer="72")
    cases = [
        ok,
        ok + "\n",
        " " + ok,
        ok.replace("</reasoning>\n<answer>", "</reasoning><answer>"),
        XML.format(reasoning=" ", answer="72"),
        XML.format(reasoning="r", answer="1\n2"),
    ]
    assert rewards.strict_format_reward(cases) == [0.5, 0.0, 0.0, 0.0, 0.0, 0.5]


def test_soft_format_allows_whitespace_and_trailing_text():
    cases = [
        "<reasoning>r</reasoning>\n\n<answer>72</answer> trailing",
        "<reasoning>r\ns</reasoning><answer>72</answer>",
        "x<reasoning>r</reasoning><answer>72</answer>",
        "<reasoning>r</reasoning><answer>72",
    ]
    assert rewards.soft_format_reward(cases) == [0.5, 0.5, 0.0, 0.0]


def test_xmlcount_partial_tags():
    assert rewards.xmlcount_reward(["<reasoning>\nr\n</reasoning>\nno answer"]) == [0.25]
    assert rewards.xmlcount_reward(["nothing"]) == [0.0]


def test_correctness_reward_gold_handling():
    texts = [XML.format(reasoning="r", answer=a) for a in ("72", "72", "Paris", "paris", "72")]
    golds = ["#### 72", None, "Paris", "Paris", ""]
    assert rewards.correctness_reward(texts, answer=golds) == [2.0, None, 2.0, 0.0, None]
    # a boxed answer inside the answer tags counts; a sentence does not
    texts = [XML.format(reasoning="r", answer=a) for a in ("\\boxed{72}", "It is 72")]
    assert rewards.correctness_reward(texts, answer=["72", "72"]) == [2.0, 0.0]


# -- names, pickling --------------------------------------------------------------------------------
def all_functions():
    return {
        "accuracy_reward": rewards.accuracy_reward,
        "reasoning_accuracy_reward": rewards.reasoning_accuracy_reward,
        "think_format_reward": rewards.think_format_reward,
        "soft_overlong_punishment_reward": rewards.get_soft_overlong_punishment(100, 20),
        "repetition_penalty_reward": rewards.get_repetition_penalty_reward(),
        "cosine_scaled_reward": rewards.get_cosine_scaled_reward(100),
        "length_reward_50_tokens": rewards.length_reward(),
        "format_reward": rewards.format_reward,
        "xmlcount_reward": rewards.xmlcount_reward,
        "soft_format_reward": rewards.soft_format_reward,
        "strict_format_reward": rewards.strict_format_reward,
        "int_reward": rewards.int_reward,
        "correctness_reward": rewards.correctness_reward,
    }


def test_every_function_has_a_meaningful_name_and_pickles():
    for name, fn in all_functions().items():
        assert fn.__name__ == name
        clone = pickle.loads(pickle.dumps(fn))  # TRL's async rollout sends reward functions to a process
        assert clone.__name__ == name


def test_every_function_returns_one_value_per_completion_for_an_empty_batch():
    kwargs = {"solution": [], "answer": [], "completion_ids": []}
    for name, fn in all_functions().items():
        assert fn(completions=[], **kwargs) == [], name


# -- calling mistakes -------------------------------------------------------------------------------
TEXT_FUNCTIONS = [
    "accuracy_reward",
    "reasoning_accuracy_reward",
    "think_format_reward",
    "cosine_scaled_reward",
    "length_reward_50_tokens",
    "format_reward",
    "xmlcount_reward",
    "soft_format_reward",
    "strict_format_reward",
    "int_reward",
    "correctness_reward",
]
ID_FIRST_FUNCTIONS = [
    "soft_overlong_punishment_reward",
    "repetition_penalty_reward",
]  # TRL: fn(completion_ids)


@pytest.mark.parametrize("name", TEXT_FUNCTIONS)
def test_a_bare_string_is_a_type_error_that_says_wrap_it(name):
    fn = all_functions()[name]
    with pytest.raises(TypeError, match=r"Wrap it"):
        fn("<answer>72</answer>", solution=["72"], answer=["72"], completion_ids=[[1]])


@pytest.mark.parametrize("name", ID_FIRST_FUNCTIONS)
def test_a_bare_string_for_an_id_reward_is_a_type_error_naming_completion_ids(name):
    with pytest.raises(TypeError, match="completion_ids"):
        all_functions()[name]("<answer>72</answer>")


@pytest.mark.parametrize(
    "name,column",
    [
        ("accuracy_reward", "solution"),
        ("reasoning_accuracy_reward", "solution"),
        ("cosine_scaled_reward", "solution"),
        ("correctness_reward", "answer"),
    ],
)
def test_a_missing_column_names_the_column(name, column):
    fn = all_functions()[name]
    with pytest.raises(ValueError, match=f"`{column}` column"):
        fn(["<answer>72</answer>"], completion_ids=[[1]])


def test_token_rewards_without_ids_say_where_ids_come_from():
    with pytest.raises(ValueError, match="completion_ids"):
        all_functions()["cosine_scaled_reward"](["x"], solution=["72"])
    for name in ID_FIRST_FUNCTIONS:
        with pytest.raises(ValueError, match="completion_ids"):
            all_functions()[name](completions=["x"], solution=["72"])


def test_a_column_of_the_wrong_length_is_a_value_error():
    with pytest.raises(ValueError, match="one `answer` per completion"):
        rewards.correctness_reward(["a", "b"], answer=["72"])
    with pytest.raises(TypeError, match="list"):
        rewards.accuracy_reward(["a"], solution="72")


def test_a_completion_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match="list\\[str\\] or list\\[list\\[dict\\]\\]"):
        rewards.format_reward([42])
    with pytest.raises(TypeError, match="message dicts"):
        rewards.format_reward([["not a message"]])


# -- calculation_reward -----------------------------------------------------------------------------
PROBLEM = [
    {"role": "system", "content": "Respond in the format."},
    {"role": "user", "content": "A garden has 4 rows of 6 tulips."},  # a worked example: not the problem
    {"role": "assistant", "content": XML.format(reasoning="4 * 6 = 24", answer="24")},
    {
        "role": "user",
        "content": "Zainab has 9 postcards and gets 5 times as many. She loses 13 and buys 1,200.",
    },
]


@pytest.mark.parametrize(
    ("reasoning", "paid"),  # True: 0.5, a right step; 0.25: a wrong one; False: 0
    [
        ("She has 9 * 5 = 45 postcards.", True),
        ("9 × 5 = 45, then 45 - 13 = 32", True),
        ("9*5=45", True),  # no spaces
        ("9 x 5 = 45", True),
        ("32 + 1,200 = 1,232.", True),  # thousands commas, a full stop after
        ("$9 × 5 = $45", True),  # money signs
        ("45 / 9 = 5", True),
        ("45 − 13 = 32", True),  # U+2212 minus
        ("22", False),  # the hack the format rewards pay for: one number, no work
        ("9 * 5 = 46", 0.25),  # wrong arithmetic on the problem's numbers: the shape only
        ("9 * 5 = 46, then 46 - 13 = 33", 0.5),  # the second step is right
        ("4 * 6 = 24", False),  # right, but the worked example's numbers, not the problem's
        ("7 * 8 = 56", False),  # right, no number of the problem
        ("9 / 0 = 0", 0.25),  # division by zero is never right
        ("2 + 9 + 5 = 16", 0.25),  # a chain: only binary steps are read (9 + 5 = 16 is wrong)
        ("nine times five is forty-five", False),  # words: no calculation to check
        ("...", False),
    ],
)
def test_calculation_reward_pays_a_right_step_on_the_problems_numbers(reasoning, paid):
    text = XML.format(reasoning=reasoning, answer="45")
    expected = [{True: 0.5, False: 0.0}.get(paid, paid)]
    assert rewards.calculation_reward([PROBLEM], [text]) == expected
    assert rewards.calculation_reward(prompts=[PROBLEM], completions=conv([text])) == expected
    plain_prompt = PROBLEM[-1]["content"]  # a plain-text prompt is the problem itself
    assert rewards.calculation_reward([plain_prompt], [text]) == expected


def test_calculation_reward_reads_only_the_reasoning_and_survives_huge_numbers():
    outside = "9 * 5 = 45\n" + XML.format(reasoning="45", answer="9 * 5 = 45")
    assert rewards.calculation_reward([PROBLEM], [outside]) == [0.0]
    assert rewards.calculation_reward([PROBLEM], ["<reasoning>\n9 * 5 = 45"]) == [0.0]  # never closed
    huge = [{"role": "user", "content": "9" * 5000}]
    long_run = XML.format(reasoning="9" * 5000 + " * 1 = 9", answer="9")  # no number of 5,000 digits
    assert rewards.calculation_reward(huge, [long_run]) == [0.0]
    with pytest.raises(ValueError, match="prompts"):
        rewards.calculation_reward(None, ["x"])
