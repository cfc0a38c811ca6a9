"""length_reward(unit="tokens") with a real tokenizer given at construction (no completion_ids)."""

from __future__ import annotations

from rewards import length_reward


def test_token_length_reward_counts_with_the_tokenizer_and_accepts_an_empty_batch():
    from grpo_kit.models import smollm2_tokenizer

    tokenizer = smollm2_tokenizer()
    reward = length_reward(ideal_length=3, unit="tokens", tokenizer=tokenizer)
    n_tokens = len(tokenizer("hello there, world", add_special_tokens=False)["input_ids"])
    assert reward(["", "hello there, world"]) == [-3.0, -float(abs(3 - n_tokens))]
    assert reward([]) == []  # HF tokenizers raise IndexError on an empty batch; a reward must not
