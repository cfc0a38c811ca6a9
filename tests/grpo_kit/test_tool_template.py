"""The SmolLM2 tool-calling template, judged by TRL's own checks and parser, and the early tool checks."""

from __future__ import annotations

import pytest
from trl.chat_template_utils import is_chat_template_prefix_preserving, parse_response, supports_tool_calling

from datasets_prep.tool_tasks import CALCULATOR_TOOLS, multiply
from grpo_kit.models import smollm2_tokenizer
from grpo_kit.rollout.tool_template import (
    TOOL_INSTRUCTIONS,
    check_max_tool_calling_iterations,
    check_tool_tokenizer,
    check_tools,
    enable_tool_calling,
    render_call,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def plain():
    return smollm2_tokenizer()


@pytest.fixture(scope="module")
def tok():
    return enable_tool_calling(smollm2_tokenizer())


def _call(name, **arguments):
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


EXCHANGE = [
    {"role": "user", "content": "What is 37 * 48?"},
    {"role": "assistant", "content": "", "tool_calls": [_call("multiply", a=37, b=48)]},
    {"role": "tool", "name": "multiply", "content": "1776"},
    {"role": "assistant", "content": "The answer is 1776."},
]


def _parse(tok, text, prompt_messages=EXCHANGE[:1]):
    """TRL's parse_response on the token ids of ``text``, with the rendered prompt as prefix (as TRL does)."""
    prefix = tok.apply_chat_template(
        prompt_messages, tools=CALCULATOR_TOOLS, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return parse_response(tok, ids, prefix=prefix)


# --- TRL's checks -------------------------------------------------------------------------------------


def test_smollm2_own_template_fails_trl_checks_and_ours_passes(plain, tok):
    assert not supports_tool_calling(plain)  # the reason this module exists
    assert supports_tool_calling(tok)
    assert is_chat_template_prefix_preserving(tok)


def test_plain_conversations_render_exactly_as_smollm2s_own_template(plain, tok):
    for messages in (
        [{"role": "user", "content": "hi"}],
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    ):
        for gen in (False, True):
            ours = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
            theirs = plain.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
            assert ours == theirs


def test_tool_exchange_renders_tools_call_and_result(tok):
    text = tok.apply_chat_template(EXCHANGE, tools=CALCULATOR_TOOLS, tokenize=False)
    assert text.startswith("<|im_start|>system\nYou can call these tools:\nadd(a: integer, b: integer) - Add")
    assert (
        "\nmultiply(a: integer, b: integer) - Multiply two integers.\n" + TOOL_INSTRUCTIONS + "<|im_end|>"
        in text
    )
    assert "<|im_start|>assistant\nCALL multiply(a=37, b=48)<|im_end|>\n" in text
    assert "<|im_start|>tool\nRESULT 1776<|im_end|>\n" in text
    assert text.endswith("<|im_start|>assistant\nThe answer is 1776.<|im_end|>\n")


def test_tools_are_appended_to_an_existing_system_prompt(tok):
    messages = [{"role": "system", "content": "Be exact."}, *EXCHANGE[:1]]
    text = tok.apply_chat_template(messages, tools=[multiply], tokenize=False)
    assert text.startswith("<|im_start|>system\nBe exact.\n\nYou can call these tools:\nmultiply(")
    assert text.count("<|im_start|>system") == 1


def test_rendered_call_matches_render_call_and_parses_back(tok):
    calls = [_call("multiply", a=37, b=48), _call("lookup", city="Paris, France", days=[1, 2])]
    messages = [EXCHANGE[0], {"role": "assistant", "content": "", "tool_calls": calls}]
    text = tok.apply_chat_template(messages, tokenize=False)
    turn = text.split("<|im_start|>assistant\n")[-1]
    lines = (
        render_call("multiply", a=37, b=48) + "\n" + render_call("lookup", city="Paris, France", days=[1, 2])
    )
    assert turn == lines + "<|im_end|>\n"
    parsed = _parse(tok, turn)
    assert parsed["tool_calls"] == calls
    assert parsed["content"] == ""


# --- TRL's parser on model output, well-formed and malformed --------------------------------------------


def test_parse_well_formed_call(tok):
    parsed = _parse(tok, "CALL multiply(a=37, b=48)<|im_end|>")
    assert parsed["tool_calls"] == [_call("multiply", a=37, b=48)]
    assert multiply(**parsed["tool_calls"][0]["function"]["arguments"]) == 1776


def test_parse_text_before_call_is_content(tok):
    parsed = _parse(tok, "I will use the tool.\nCALL multiply(a=37, b=48)<|im_end|>")
    assert parsed["content"] == "I will use the tool."
    assert parsed["tool_calls"] == [_call("multiply", a=37, b=48)]


def test_parse_final_answer_has_no_tool_calls(tok):
    parsed = _parse(tok, "The answer is 1776.<|im_end|>")
    assert parsed == {"role": "assistant", "content": "The answer is 1776."}


def test_positional_arguments_parse_to_no_arguments_and_the_tool_call_fails(tok):
    parsed = _parse(tok, "CALL multiply(37, 48)<|im_end|>")
    (call,) = parsed["tool_calls"]
    assert call["function"] == {"name": "multiply", "arguments": {}}
    with pytest.raises(TypeError):  # what TRL's tool loop catches and reports as {"error": ...}
        multiply(**call["function"]["arguments"])


def test_wrong_argument_names_reach_the_tool_and_fail(tok):
    parsed = _parse(tok, "CALL multiply(x=37, y=48)<|im_end|>")
    (call,) = parsed["tool_calls"]
    assert call["function"]["arguments"] == {"x": 37, "y": 48}
    with pytest.raises(TypeError, match="unexpected keyword"):
        multiply(**call["function"]["arguments"])


def test_unknown_tool_is_parsed_by_name_and_not_among_the_tools(tok):
    parsed = _parse(tok, "CALL divide(a=10, b=2)<|im_end|>")
    assert parsed["tool_calls"][0]["function"]["name"] == "divide"
    assert "divide" not in {f.__name__ for f in CALCULATOR_TOOLS}


def test_lowercase_or_json_call_is_plain_text_not_a_call(tok):
    for text in (
        "call multiply(a=1, b=2)<|im_end|>",
        '{"name": "multiply", "arguments": {"a": 1}}<|im_end|>',
    ):
        parsed = _parse(tok, text)
        assert "tool_calls" not in parsed
        assert parsed["content"] == text.removesuffix("<|im_end|>")


def test_truncated_call_keeps_what_was_written(tok):
    parsed = _parse(tok, "CALL multiply(a=37")  # max_completion_length cut it off
    assert parsed["tool_calls"][0]["function"] == {"name": "multiply", "arguments": {"a": 37}}


# --- early checks -------------------------------------------------------------------------------------


def test_check_tool_tokenizer_names_the_helper(plain, tok):
    with pytest.raises(ValueError, match="enable_tool_calling"):
        check_tool_tokenizer(plain)
    check_tool_tokenizer(tok)


def test_check_tool_tokenizer_needs_a_response_template(tok):
    import copy

    no_parser = copy.deepcopy(tok)
    no_parser.response_template = None
    with pytest.raises(ValueError, match="response_template.*enable_tool_calling"):
        check_tool_tokenizer(no_parser)


def test_check_tool_tokenizer_refuses_a_template_that_is_not_prefix_preserving(tok):
    import copy

    from grpo_kit.rollout.tool_template import TOOL_CHAT_TEMPLATE

    shifty = copy.deepcopy(tok)
    # The first line now depends on how many messages follow: earlier turns render differently.
    shifty.chat_template = "{{ messages | length }}" + TOOL_CHAT_TEMPLATE
    assert supports_tool_calling(shifty) and not is_chat_template_prefix_preserving(shifty)
    with pytest.raises(ValueError, match="not prefix-preserving.*enable_tool_calling"):
        check_tool_tokenizer(shifty)


def test_enable_tool_calling_refuses_a_non_chatml_tokenizer():
    other = smollm2_tokenizer()
    other.eos_token = "<|endoftext|>"
    with pytest.raises(ValueError, match="<\\|im_end\\|>"):
        enable_tool_calling(other)


def _no_hints(a, b):
    """Multiply.

    Args:
        a: x
        b: y
    """
    return a * b


def _no_doc(a: int, b: int) -> int:
    return a * b


def _no_args_section(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@pytest.mark.parametrize(
    ("tools", "error", "match"),
    [
        ([_no_hints], ValueError, "no type hint for a, b"),
        ([_no_doc], ValueError, "no docstring"),
        ([_no_args_section], ValueError, "Args:"),
        ([multiply, multiply], ValueError, "Two tools are named 'multiply'"),
        ([multiply, 3], TypeError, "must be a function"),
        (multiply, TypeError, "list of functions"),
    ],
)
def test_check_tools_rejects_what_trl_would_reject_late(tools, error, match):
    with pytest.raises(error, match=match):
        check_tools(tools)


def test_check_tools_accepts_the_calculator_and_none():
    assert check_tools(CALCULATOR_TOOLS) == CALCULATOR_TOOLS
    assert check_tools(None) == []


@pytest.mark.parametrize(
    ("value", "error"), [(0, ValueError), (-1, ValueError), (True, TypeError), (1.5, TypeError)]
)
def test_max_tool_calling_iterations_below_one_is_an_error(value, error):
    with pytest.raises(error, match="max_tool_calling_iterations"):
        check_max_tool_calling_iterations(value)


def test_max_tool_calling_iterations_accepts_positive_and_none():
    assert check_max_tool_calling_iterations(1) == 1
    assert check_max_tool_calling_iterations(None) is None


# --- TRL's GRPOTrainer accepts the tokenizer ------------------------------------------------------------


def test_grpo_trainer_accepts_tools_with_the_template_and_keeps_it(tiny, tmp_path):
    import copy

    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, base_tok = tiny
    config = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        use_cpu=True,
        bf16=False,
        report_to="none",
        max_steps=1,
    )
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": "What is 2 * 3?"}]}] * 2)

    def reward(completions, **kwargs):
        return [0.0] * len(completions)

    with pytest.raises(ValueError, match="does not support tool calling"):
        GRPOTrainer(
            model=copy.deepcopy(model),
            reward_funcs=reward,
            args=config,
            train_dataset=data,
            processing_class=copy.deepcopy(base_tok),
            tools=[multiply],
        )
    tok = enable_tool_calling(copy.deepcopy(base_tok))
    trainer = GRPOTrainer(
        model=copy.deepcopy(model),
        reward_funcs=reward,
        args=config,
        train_dataset=data,
        processing_class=tok,
        tools=[multiply],
    )
    assert trainer.chat_template is None  # prefix-preserving: TRL does not swap in its training template
    assert trainer._tokenizer.response_template is not None
    # TRL's own tool-result suffix: what gets appended (and masked) after a call.
    suffix = trainer._get_tool_suffix_ids([{"role": "tool", "name": "multiply", "content": "6"}])
    assert tok.decode(suffix) == "\n<|im_start|>tool\nRESULT 6<|im_end|>\n<|im_start|>assistant\n"


def test_a_call_with_an_argument_called_name_renders():
    # the model may write CALL f(name=...); rendering it must not collide with render_call's own parameter
    assert render_call("greet", name="Ada") == 'CALL greet(name="Ada")'
