"""``tiny_model``: a randomly initialised 2-layer Llama with the real SmolLM2 tokenizer, for tests.

It has the real vocabulary and chat template, so prompts, masks and rewards behave as with the
real model, while a forward/backward pass takes milliseconds and a GRPO step about a second.
"""

from __future__ import annotations

from grpo_kit.models.embedded import smollm2_tokenizer
from grpo_kit.models.lora import add_lora, check_lora


def tiny_model(seed: int = 0, lora=None, *, key_value_heads: int = 4):
    """A random 2-layer Llama (hidden 64, 4 heads, MLP 128, tied embeddings) + SmolLM2 tokenizer.

    ``seed`` fixes the weights and the LoRA adapter's init without touching the caller's global RNG; ``lora`` as in
    :func:`grpo_kit.models.load_model` (a ``LoraConfig`` or a dict of its fields). ``key_value_heads``: 2 or 1 give
    grouped-query attention (query heads sharing key/value heads, as SmolLM2's 9 share 3).
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    lora_config = check_lora(lora)
    tokenizer = smollm2_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=key_value_heads,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    # Seed a forked RNG only for the init, so callers' random streams are untouched.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    if lora_config is not None:
        model = add_lora(model, lora_config, seed=seed)
    return model, tokenizer
