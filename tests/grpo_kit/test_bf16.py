"""The loop's ``bf16=True``: sampling with a bf16 copy of the weights, the log-probs under bf16 autocast.

What ``bf16`` must keep: the trainable weights, the optimizer and the gradients stay fp32 (only the forward passes
are cast), the original weights come back untouched after sampling, and the numbers differ from fp32 by bf16's
rounding, not more. Where it must refuse: hardware that would emulate bf16 (slower than fp32). The speed it buys
is measured in ``benchmarks/bench_loop_vs_trl.py --bf16``, not here.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from shared import tiny_loop_config

import grpo_kit.support.hardware
from grpo_kit.config.loop import GRPOLoopConfig
from grpo_kit.core.logprobs import per_token_logps
from grpo_kit.core.sampling import merged_lora
from grpo_kit.loop.training import train
from grpo_kit.models import tiny_model
from grpo_kit.support.hardware import cpu_has_native_bf16

needs_native_bf16 = pytest.mark.skipif(
    not cpu_has_native_bf16(), reason="this CPU has no AMX/AVX512-BF16: bf16=True is refused here"
)


def _adapted_model():
    model, tokenizer = tiny_model(seed=0, lora={"r": 4, "lora_dropout": 0.0})
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2)  # an adapter that changes the outputs
    return model.eval(), tokenizer


def _next_token_logps(model, enc) -> torch.Tensor:
    with torch.no_grad():
        logits = model(**enc).logits[:, -1, :]  # (B, V)
    return F.log_softmax(logits.float(), dim=-1)  # (B, V)


def test_merged_lora_in_bf16_casts_every_weight_once_and_puts_the_originals_back():
    model, tokenizer = _adapted_model()
    enc = tokenizer(["Hi", "A longer prompt"], return_tensors="pt", padding=True, padding_side="left")
    before = {name: (p, p.detach().clone()) for name, p in model.named_parameters()}
    adapter = _next_token_logps(model, enc)
    with merged_lora(model, torch.bfloat16) as merged:
        assert merged
        inside = dict(model.named_parameters())
        assert all(p.dtype == torch.bfloat16 for p in inside.values())
        base = model.get_base_model()
        assert base.lm_head.weight is base.model.embed_tokens.weight  # tied weights stay one tensor
        bf16 = _next_token_logps(model, enc)
    difference = (bf16 - adapter).abs().max().item()
    assert 0 < difference < 0.1, difference  # bf16 rounding of the adapted model, not another model
    with pytest.raises(RuntimeError), merged_lora(model, torch.bfloat16):
        raise RuntimeError("interrupted while sampling")
    for name, p in model.named_parameters():  # the very same fp32 tensors, bit for bit
        assert p is before[name][0] and torch.equal(p, before[name][1]), name
    assert torch.equal(_next_token_logps(model, enc), adapter)


def test_merged_lora_in_bf16_casts_a_model_without_lora_too():
    plain, _ = tiny_model(seed=0)
    with merged_lora(plain, torch.bfloat16) as merged:
        assert not merged  # nothing merged, but decoding runs in bf16
        assert {p.dtype for p in plain.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in plain.parameters()} == {torch.float32}


def test_log_probs_under_bf16_autocast_are_fp32_tensors_within_bf16_rounding():
    model, tokenizer = _adapted_model()
    ids = tokenizer(["Question 1: two plus two is four"], return_tensors="pt")["input_ids"]  # (1, L)
    mask = torch.ones_like(ids)
    exact, _ = per_token_logps(model, ids, mask, 5)  # (1, 5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed, entropies = per_token_logps(model, ids, mask, 5, compute_entropy=True, float32_logits=True)
    assert mixed.dtype == torch.float32 and entropies.dtype == torch.float32
    difference = (mixed - exact).abs().max().item()
    assert 0 < difference < 0.1, difference


@needs_native_bf16
def test_the_loop_trains_in_bf16_with_fp32_weights_and_times_every_phase(tmp_path):
    model, tokenizer = tiny_model(seed=0, lora={"r": 8, "lora_alpha": 16, "lora_dropout": 0.0})
    trainable = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    config = tiny_loop_config(tmp_path, learning_rate=1e-2, save_steps=0, bf16=True)
    rows = [{"prompt": f"Question {i}:"} for i in range(8)]

    def even_token_share(completion_ids, **kwargs):
        return [sum(t % 2 == 0 for t in ids) / max(len(ids), 1) for ids in completion_ids]

    result = train(model, tokenizer, rows, [even_token_share], config)
    assert result.global_step == 2
    after = dict(model.named_parameters())
    assert all(after[n].dtype == torch.float32 for n in trainable)
    assert max((after[n] - trainable[n]).abs().max().item() for n in trainable) > 1e-4
    for record in result.log_history:
        assert record["loss"] == pytest.approx(record["loss"])  # finite
        phases = [
            record[f"timing/{p}_s"] for p in ("generation", "scoring", "forward", "backward", "optimizer")
        ]
        assert all(s > 0 for s in phases) and sum(phases) <= record["step_time"]


@pytest.mark.parametrize("setting", ["bf16", "bf16_sampling"])
def test_bf16_is_refused_where_the_cpu_would_emulate_it(setting, tmp_path, monkeypatch):
    monkeypatch.setattr(
        grpo_kit.support.hardware, "cpu_has_native_bf16", lambda: False
    )  # a CPU without AMX/AVX512-BF16
    model, tokenizer = tiny_model(seed=0, lora={"r": 4})
    config = GRPOLoopConfig(
        output_dir=str(tmp_path), max_steps=1, save_steps=0, disable_tqdm=True, **{setting: True}
    )
    with pytest.raises(
        ValueError, match=f"{setting}=True: this CPU has neither AMX nor AVX512-BF16.*set {setting}=False"
    ):
        train(
            model,
            tokenizer,
            [{"prompt": "Hi"}] * 4,
            [lambda completions, **k: [0.0] * len(completions)],
            config,
        )
    assert not any(tmp_path.iterdir())  # refused before anything was written


@needs_native_bf16
def test_bf16_sampling_samples_with_bf16_weights_and_scores_in_fp32(tmp_path):
    """``bf16_sampling=True``: the completions are drawn with bf16 copies of the weights, and the log-probs the loss
    reads are computed in fp32 (no autocast), as a vLLM-backed trainer samples in bf16 and trains in fp32."""
    model, tokenizer = tiny_model(seed=0, lora={"r": 8, "lora_alpha": 16, "lora_dropout": 0.0})
    seen = []  # (grad enabled, dtype of the first layer's q_proj input)
    layer = model.get_base_model().model.layers[0].self_attn.q_proj
    layer.register_forward_pre_hook(
        lambda module, args: seen.append((torch.is_grad_enabled(), args[0].dtype))
    )
    config = tiny_loop_config(tmp_path, learning_rate=1e-2, save_steps=0, bf16_sampling=True)
    rows = [{"prompt": f"Question {i}:"} for i in range(8)]
    result = train(
        model, tokenizer, rows, [lambda completion_ids, **k: [len(c) for c in completion_ids]], config
    )
    assert result.global_step == 2
    sampling = {dtype for grad, dtype in seen if not grad}
    scoring = {dtype for grad, dtype in seen if grad}
    assert sampling == {torch.bfloat16} and scoring == {torch.float32}
    assert all(p.dtype == torch.float32 for p in model.parameters() if p.requires_grad)
