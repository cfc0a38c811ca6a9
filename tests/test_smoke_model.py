"""scripts/make_smoke_model.py: the carried model loads with plain transformers, generates, and fits the budget."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("make_smoke_model", REPO / "scripts" / "make_smoke_model.py")
make_smoke_model = importlib.util.module_from_spec(spec)
sys.modules["make_smoke_model"] = make_smoke_model
spec.loader.exec_module(make_smoke_model)


def test_smoke_model_loads_generates_and_is_small(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = make_smoke_model.make_smoke_model(tmp_path / "m", seed=3)
    assert (out / "model.safetensors").exists() and not list(out.glob("*.bin"))
    assert (
        make_smoke_model.folder_mib(out) < 20
    )  # leaves room for the ~14 MiB wheelhouse in a 60 MiB transfer
    model = AutoModelForCausalLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert model.config.model_type == "llama" and model.dtype == torch.bfloat16
    assert model.config.head_dim == 64 and model.config.tie_word_embeddings
    assert model.config.vocab_size == len(tokenizer) == 49152
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2 + 2?"}], tokenize=False, add_generation_prompt=True
    )
    assert "<|im_start|>assistant" in text
    inputs = tokenizer(text, return_tensors="pt")
    generated = model.generate(
        **inputs, max_new_tokens=6, do_sample=False, pad_token_id=tokenizer.pad_token_id
    )
    assert generated.shape[1] > inputs["input_ids"].shape[1]  # new tokens, decodable
    assert isinstance(tokenizer.decode(generated[0, inputs["input_ids"].shape[1] :]), str)
    # The same seed gives the same weights; another seed does not.
    again = AutoModelForCausalLM.from_pretrained(
        make_smoke_model.make_smoke_model(tmp_path / "again", seed=3)
    )
    other = AutoModelForCausalLM.from_pretrained(
        make_smoke_model.make_smoke_model(tmp_path / "other", seed=4)
    )
    weight = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(model.state_dict()[weight], again.state_dict()[weight])
    assert not torch.equal(model.state_dict()[weight], other.state_dict()[weight])


@pytest.mark.parametrize(
    "dims, message",
    [
        ({"hidden_size": 192, "num_attention_heads": 2}, "multiples of 128"),
        ({"hidden_size": 128, "num_attention_heads": 3}, "multiple of num_attention_heads"),
        ({"hidden_size": 128, "num_attention_heads": 32}, "head_dim 4 must be a multiple of 8"),
        ({"num_attention_heads": 2, "num_key_value_heads": 3}, "multiple of num_key_value_heads"),
    ],
)
def test_dimensions_unsloth_would_not_take_fail_before_any_weights(dims, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        make_smoke_model.make_smoke_model(tmp_path / "m", dims=make_smoke_model.SmokeDims(**dims))
    assert not (tmp_path / "m").exists()
