"""Grouped-query attention while decoding (``core.attention``): the same numbers as transformers' ``sdpa``, bit for bit.

The sampler decodes inside ``grouped_query_attention``, where SDPA reads each key/value head once instead of a copy
per query head. The draws must stay exactly those of a seed, so the logits and the sampled tokens are compared with
``torch.equal``, with left padding (the mask that made transformers copy the heads), on a random model with grouped
heads and on the embedded SmolLM2-135M (9 query heads, 3 key/value heads).
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from grpo_kit.core import sampling
from grpo_kit.core.attention import GROUPED_SDPA, grouped_query_attention
from grpo_kit.core.sampling import merged_lora, sample_completions


def _grouped_llama():
    """The tiny random Llama with its 4 query heads sharing 2 key/value heads, attending through ``sdpa``."""
    from grpo_kit.models import tiny_model

    model, _ = tiny_model(seed=0, key_value_heads=2)
    assert model.config._attn_implementation == "sdpa"
    return model.eval()


def _left_padded(batch: int, width: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(3, vocab, (batch, width), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    for row in range(batch):
        mask[row, : 2 * row] = 0  # rows of different lengths: a real padding mask
    return ids, mask


def _sample(model, ids, mask, eos: list[int], pad: int, tokens: int) -> torch.Tensor:
    torch.manual_seed(3)
    return sample_completions(
        model, ids, mask, num_generations=3, max_new_tokens=tokens, eos_token_ids=eos, pad_token_id=pad
    )


def test_grouped_attention_computes_sdpa_bit_for_bit_and_puts_the_config_back(monkeypatch):
    model = _grouped_llama()
    ids, mask = _left_padded(3, 9, 500)
    with torch.no_grad():
        # (3, 9, V) through transformers' sdpa, which copies the key/value heads (repeat_kv)
        reference = model(input_ids=ids, attention_mask=mask).logits
        with grouped_query_attention(model) as switched:
            assert switched == 1 and model.config._attn_implementation == GROUPED_SDPA
            grouped = model(input_ids=ids, attention_mask=mask).logits
    assert torch.equal(grouped, reference)
    assert model.config._attn_implementation == "sdpa"

    # The sampler decodes with it: the same tokens as with transformers' own path.
    with_grouping = _sample(model, ids, mask, eos=[1], pad=0, tokens=12)
    monkeypatch.setattr(sampling, "grouped_query_attention", lambda model: contextlib.nullcontext(0))
    without = _sample(model, ids, mask, eos=[1], pad=0, tokens=12)
    assert torch.equal(with_grouping, without)

    with pytest.raises(RuntimeError, match="inside"), grouped_query_attention(model):
        raise RuntimeError("inside")
    assert model.config._attn_implementation == "sdpa"  # put back after an exception too


def test_models_on_another_attention_are_left_alone():
    model = _grouped_llama()
    model.config._attn_implementation = "eager"
    with grouped_query_attention(model) as switched:
        assert switched == 0 and model.config._attn_implementation == "eager"


@pytest.mark.slow
def test_the_embedded_model_samples_the_same_tokens_with_grouped_attention(monkeypatch):
    """SmolLM2-135M with a LoRA adapter merged and packed, as the loop samples: left-padded chat prompts, G = 3."""
    from grpo_kit.models import load_model

    model, tokenizer = load_model("smollm2-135m-instruct", lora={"r": 8, "lora_dropout": 0.0}, seed=0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.02, generator=torch.Generator().manual_seed(len(name)))
    posts = ("Hi!", "Summarise this post about a long bike ride.")
    chats = [[{"role": "user", "content": text}] for text in posts]
    texts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left")
    assert not bool(enc["attention_mask"].all())  # left padding: the case transformers copied the heads for
    eos = sampling.stop_token_ids(model, tokenizer)

    with merged_lora(model, pack_rows=6):
        grouped = _sample(model, enc["input_ids"], enc["attention_mask"], eos, tokenizer.pad_token_id, 20)
        monkeypatch.setattr(sampling, "grouped_query_attention", lambda model: contextlib.nullcontext(0))
        plain = _sample(model, enc["input_ids"], enc["attention_mask"], eos, tokenizer.pad_token_id, 20)
    assert torch.equal(grouped, plain)
    assert model.config._attn_implementation == "sdpa"
