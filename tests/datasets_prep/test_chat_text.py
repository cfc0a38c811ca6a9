"""prompt_to_text renders prompts exactly as TRL does (parity with trl.data_utils and GRPOTrainer)."""

from __future__ import annotations

import copy

import pytest
from trl.data_utils import maybe_apply_chat_template

from datasets_prep import SYSTEM_PROMPT, load_gsm8k, prompt_to_text, synthetic_gsm8k, synthetic_tldr

THINKING_TEMPLATE = (  # a template with a kwarg, like Qwen3's enable_thinking
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)

PROMPTS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "2+2?"}],
    [{"role": "user", "content": "Say hi."}, {"role": "assistant", "content": "Hi"}],  # continue the message
    [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
    ],
]


@pytest.fixture(scope="module")
def tokenizer(tiny):
    return tiny[1]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_conversational_parity_with_trl(tokenizer, prompt):
    expected = maybe_apply_chat_template({"prompt": prompt}, tokenizer)["prompt"]
    assert prompt_to_text(prompt, tokenizer) == expected


def test_plain_text_passes_through_like_trl(tokenizer):
    post = synthetic_tldr(1, seed=0)[0]["prompt"]
    assert (
        prompt_to_text(post, tokenizer)
        == maybe_apply_chat_template({"prompt": post}, tokenizer)["prompt"]
        == post
    )


def test_gsm8k_prompts_match_grpo_trainer_tokens(tokenizer):
    """GRPOTrainer tokenizes conversational prompts with apply_chat_template(add_generation_prompt=True)."""
    dataset = load_gsm8k(source=synthetic_gsm8k(6, seed=1))
    for prompt in dataset["prompt"]:
        text = prompt_to_text(prompt, tokenizer)
        assert text.startswith("<|im_start|>system\n" + SYSTEM_PROMPT) and text.endswith(
            "<|im_start|>assistant\n"
        )
        trainer_ids = tokenizer.apply_chat_template(
            [prompt], add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"][0]
        assert tokenizer(text, add_special_tokens=False)["input_ids"] == list(trainer_ids)


def test_template_kwargs_reach_the_template(tokenizer):
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = THINKING_TEMPLATE
    prompt = PROMPTS[0]
    off = prompt_to_text(prompt, tok, enable_thinking=False)
    assert off == maybe_apply_chat_template({"prompt": prompt}, tok, enable_thinking=False)["prompt"]
    assert off.endswith("<think>\n\n</think>\n\n") and not prompt_to_text(prompt, tok).endswith(
        "</think>\n\n"
    )


def test_bad_prompts_are_explained(tokenizer):
    with pytest.raises(TypeError, match=r"must be a string .* or a non-empty list of"):
        prompt_to_text([], tokenizer)
    with pytest.raises(TypeError, match=r"must be a string"):
        prompt_to_text({"role": "user", "content": "hi"}, tokenizer)
    with pytest.raises(ValueError, match=r"last message .* 'user', 'tool' or 'assistant'; got 'system'"):
        prompt_to_text([{"role": "system", "content": "be brief"}], tokenizer)
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = None
    with pytest.raises(ValueError, match=r"no chat template"):
        prompt_to_text(PROMPTS[0], tok)
