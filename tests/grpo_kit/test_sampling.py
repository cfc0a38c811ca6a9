"""The loop's sampler against transformers: the same warpers, the same greedy continuations, p_i frequencies."""

from __future__ import annotations

import pytest
import torch
from shared import two_sample_chi_square_p

from grpo_kit.core.sampling import (
    merged_lora,
    packed_linears,
    sample_completions,
    sample_next_token,
    warp_logits,
)
from grpo_kit.models import tiny_model


def _warped_by_transformers(logits: torch.Tensor, warp: dict) -> torch.Tensor:
    """``logits`` (B, V) through transformers' own warpers for the settings named in ``warp``, in generate's order
    (temperature, top-k, top-p, min-p); an unset or neutral setting adds no warper."""
    from transformers import (
        LogitsProcessorList,
        MinPLogitsWarper,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = LogitsProcessorList()
    if warp.get("temperature", 1.0) != 1.0:
        warpers.append(TemperatureLogitsWarper(warp["temperature"]))
    if warp.get("top_k"):
        warpers.append(TopKLogitsWarper(warp["top_k"]))
    if warp.get("top_p", 1.0) < 1.0:
        warpers.append(TopPLogitsWarper(warp["top_p"]))
    if warp.get("min_p") is not None:
        warpers.append(MinPLogitsWarper(warp["min_p"]))
    return warpers(torch.zeros(logits.size(0), 1, dtype=torch.long), logits.clone())


@pytest.mark.parametrize(
    "warp",
    [
        {"temperature": 0.7},
        {"top_k": 5},
        {"top_p": 0.8},
        {"min_p": 0.1},
        {"temperature": 1.3, "top_k": 50, "top_p": 0.9, "min_p": 0.05},
    ],
)
def test_warpers_match_transformers(warp):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 300, generator=g) * 3
    want = _warped_by_transformers(logits, warp)
    got = warp_logits(logits, **warp)
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    torch.testing.assert_close(got[~torch.isinf(got)], want[~torch.isinf(want)])


def test_sampled_frequencies_are_the_probabilities():
    torch.manual_seed(0)
    logits = torch.tensor([[0.0, 1.0, 2.0, float("-inf"), 3.0]]).repeat(100_000, 1)
    counts = torch.bincount(sample_next_token(logits), minlength=5).float() / 100_000
    torch.testing.assert_close(counts, logits[0].softmax(-1), atol=5e-3, rtol=0)
    assert counts[3] == 0  # a filtered token is never drawn


def test_top_1_takes_the_only_token_left_and_ties_go_the_general_way():
    """top_k=1 (greedy evaluation) returns a row's single finite maximum without the softmax and the float64 sum:
    the token the inverse CDF picks whatever the number (checked against top_k=2 with the runner-up filtered
    out by min_p, which goes the general way). A row with a tie goes the general way, and picks one of the tied
    tokens by its number. The random stream is the same as the general path's."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 40, generator=g) * 3
    logits[2, 7] = logits[2, 30] = logits[2].max() + 1  # a tie for the maximum
    uniform = torch.rand(5, 1, generator=g, dtype=torch.float64)
    fast = sample_next_token(logits, uniform, top_k=1)
    general = sample_next_token(logits, uniform, top_k=2, min_p=1.0)  # only tokens as likely as the best stay
    unique = [0, 1, 3, 4]
    assert torch.equal(fast[unique], logits[unique].argmax(-1))
    assert torch.equal(fast, general)
    picked = {
        int(sample_next_token(logits[2:3], torch.tensor([[u]], dtype=torch.float64), top_k=1))
        for u in (0.1, 0.9)
    }
    assert picked == {7, 30}  # the tie: each tied token for its half of the numbers

    torch.manual_seed(5)
    sample_next_token(logits[unique], top_k=1)  # the fast path, drawing its own numbers
    after_fast = torch.rand(3)
    torch.manual_seed(5)
    sample_next_token(logits[unique], top_k=2)  # the general path
    assert torch.equal(torch.rand(3), after_fast)


def test_greedy_sampling_equals_generate_with_shared_prefill():
    """top_k=1 makes sampling greedy: every completion must equal `generate(do_sample=False)` on the
    repeated, left-padded prompts — checks the shared prefill, cache expansion, positions and EOS padding."""
    model, tokenizer = tiny_model(seed=0)
    model.eval()
    texts = ["Hi", "A much longer prompt with several more tokens in it"]
    enc = tokenizer(texts, return_tensors="pt", padding=True, padding_side="left")
    G, new = 3, 12
    eos = [tokenizer.eos_token_id]
    ours = sample_completions(
        model,
        enc["input_ids"],
        enc["attention_mask"],
        num_generations=G,
        max_new_tokens=new,
        eos_token_ids=eos,
        pad_token_id=tokenizer.pad_token_id,
        top_k=1,
    )
    with torch.no_grad():
        theirs = model.generate(
            input_ids=enc["input_ids"].repeat_interleave(G, 0),
            attention_mask=enc["attention_mask"].repeat_interleave(G, 0),
            do_sample=False,
            max_new_tokens=new,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=eos,
        )
    theirs = theirs[:, enc["input_ids"].size(1) :]
    assert ours.shape == (len(texts) * G, new)
    assert torch.equal(ours, theirs)
    assert torch.equal(ours[0], ours[1]) and not torch.equal(
        ours[0], ours[G]
    )  # groups share their prompt only


def test_completions_pad_after_eos():
    model, tokenizer = tiny_model(seed=0)
    enc = tokenizer(["Hello"], return_tensors="pt")
    torch.manual_seed(0)
    # Declare the token greedy decoding emits second as EOS: every row must stop there and pad afterwards.
    greedy = sample_completions(
        model,
        enc["input_ids"],
        enc["attention_mask"],
        num_generations=2,
        max_new_tokens=6,
        eos_token_ids=[tokenizer.eos_token_id],
        pad_token_id=tokenizer.pad_token_id,
        top_k=1,
    )
    stop = int(greedy[0, 1])
    out = sample_completions(
        model,
        enc["input_ids"],
        enc["attention_mask"],
        num_generations=2,
        max_new_tokens=6,
        eos_token_ids=[stop],
        pad_token_id=tokenizer.pad_token_id,
        top_k=1,
    )
    first_stop = (greedy[0] == stop).nonzero()[0].item()
    assert out.size(1) == first_stop + 1  # decoding ends once every row has emitted EOS
    assert (out[:, first_stop] == stop).all()


def test_merged_lora_samples_like_the_adapter_and_restores_the_weights():
    model, tokenizer = tiny_model(seed=0, lora={"r": 4, "lora_dropout": 0.0})
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2)  # an adapter that changes the greedy continuation
    model.eval()
    before = {name: (p, p.detach().clone()) for name, p in model.named_parameters()}
    enc = tokenizer(["Hi", "A longer prompt"], return_tensors="pt", padding=True, padding_side="left")
    kwargs = {
        "num_generations": 2,
        "max_new_tokens": 8,
        "eos_token_ids": [tokenizer.eos_token_id],
        "pad_token_id": tokenizer.pad_token_id,
        "top_k": 1,
    }
    adapter = sample_completions(model, enc["input_ids"], enc["attention_mask"], **kwargs)
    with model.disable_adapter():
        base = sample_completions(model, enc["input_ids"], enc["attention_mask"], **kwargs)
    with merged_lora(model) as merged:
        assert merged
        fused = sample_completions(model, enc["input_ids"], enc["attention_mask"], **kwargs)
    assert torch.equal(fused, adapter) and not torch.equal(adapter, base)
    with pytest.raises(RuntimeError), merged_lora(model):
        raise RuntimeError("interrupted while sampling")
    for name, p in model.named_parameters():  # the very same tensors, bit for bit, adapter active again
        assert p is before[name][0] and torch.equal(p, before[name][1]), name
    plain, _ = tiny_model(seed=0)
    with merged_lora(plain) as merged:
        assert not merged


def _overridden(model) -> list[str]:
    return [name for name, module in model.named_modules() if "forward" in vars(module)]


needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="this torch has no oneDNN")


@needs_onednn
def test_packed_weights_compute_the_adapted_model_and_leave_nothing_behind(monkeypatch):
    """merged_lora(pack_rows=...) multiplies every adapted layer with one oneDNN copy of W + ΔW and
    packed_linears the other linears (the LM head): the logits are the adapter's to float rounding, and on exit
    every forward is its class's again and every parameter the same tensor, bit for bit."""
    model, tokenizer = tiny_model(seed=0, lora={"r": 4, "lora_dropout": 0.0})
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2)
    model.eval()
    before = {name: (p, p.detach().clone()) for name, p in model.named_parameters()}
    enc = tokenizer(["Hi", "A longer prompt"], return_tensors="pt", padding=True, padding_side="left")
    lora_layers = [n for n, m in model.named_modules() if n.endswith(".base_layer")]
    # inside merged_lora each adapted layer's base multiplies with its packed W + ΔW, and the LoRA wrapper calls it
    lora_layers += [n.removesuffix(".base_layer") for n in lora_layers]
    with torch.no_grad():
        adapter = model(**enc).logits  # (2, P, V)
        with model.disable_adapter():
            base = model(**enc).logits
        with merged_lora(model, pack_rows=4) as merged:
            assert merged and sorted(_overridden(model)) == sorted(lora_layers)
            with packed_linears(model, rows=4) as also_packed:
                assert also_packed >= 1 and "lm_head" in [n.split(".")[-1] for n in _overridden(model)]
                packed = model(**enc).logits
            assert sorted(_overridden(model)) == sorted(lora_layers)  # the inner block undid only its own
    torch.testing.assert_close(packed, adapter, atol=1e-5, rtol=1e-5)
    assert (adapter - base).abs().max() > 1e-2  # the adapter matters, so the match is not the base model's
    assert _overridden(model) == []
    for name, p in model.named_parameters():
        assert p is before[name][0] and torch.equal(p, before[name][1]), name
    with packed_linears(model, rows=4) as count:  # gradients on: packed copies would carry none
        assert count == 0 and _overridden(model) == []
    # Without oneDNN the merged weights stand in for the originals, as before.
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    with torch.no_grad(), merged_lora(model, pack_rows=4) as merged:
        assert merged and all(not n.endswith(".base_layer") for n in _overridden(model))  # only the wrappers
        torch.testing.assert_close(model(**enc).logits, adapter, atol=1e-5, rtol=1e-5)
    assert _overridden(model) == []


def test_sampling_and_generate_build_no_autograd_graph():
    """Decoding must not record a graph: with grad enabled by the caller (a training loop, a notebook) and a
    trainable adapter, every forward pass inside ``sample_completions`` and ``generation.generate`` runs under
    no_grad. (A graph per decoded token kept every activation alive: lesson 8's pre-flight grew to 14 GB.)"""
    from grpo_kit.rollout.generation import Decoding, generate

    model, tokenizer = tiny_model(seed=0, lora={"r": 4, "lora_dropout": 0.0})
    seen: list[bool] = []
    handle = model.register_forward_hook(lambda *_: seen.append(torch.is_grad_enabled()))
    enc = tokenizer(["Hi"], return_tensors="pt")
    assert torch.is_grad_enabled()
    try:
        sample_completions(
            model,
            enc["input_ids"],
            enc["attention_mask"],
            num_generations=2,
            max_new_tokens=4,
            eos_token_ids=[tokenizer.eos_token_id],
            pad_token_id=tokenizer.pad_token_id,
        )
        generate(model, tokenizer, ["Hi", "Hello there"], 2, Decoding(max_new_tokens=4))
    finally:
        handle.remove()
    assert seen and not any(seen), f"{sum(seen)} of {len(seen)} forward passes recorded a graph"
    assert torch.is_grad_enabled()  # the caller's mode is back


def _mass_bins(probs: torch.Tensor, num_bins: int = 20) -> torch.Tensor:
    """A bin per token (V,): tokens in order of probability, cut into bins of about 1/num_bins of the mass each (a
    token above that is its own bin). Any partition fixed before sampling makes a valid chi-square test; this one
    keeps the long tail of a random model's vocabulary from leaving every bin nearly empty."""
    order = probs.argsort(descending=True)
    cumulative = probs[order].cumsum(0)  # (V,)
    bins = torch.empty_like(order)
    bins[order] = torch.clamp((cumulative - probs[order]) * num_bins, max=num_bins - 1).long()
    return bins


@pytest.mark.parametrize(
    "warp",
    [{"temperature": 1.0}, {"temperature": 0.6}, {"top_k": 12}, {"top_p": 0.8}, {"min_p": 0.05}],
    ids=lambda w: ",".join(f"{k}={v}" for k, v in w.items()),
)
def test_first_token_frequencies_match_generate(warp):
    """The loop's sampler draws the first completion token as ``generate(do_sample=True)`` does: 2,000 draws each
    from the tiny model (its logits sharpened so that the warpers cut something), binned by the mass of the warped distribution (transformers' warpers), a
    two-sample chi-square test at level 0.001. At the same level the test rejects a sampler at temperature 0.8 against generate's 1.0 (its power)."""
    model, tokenizer = tiny_model(seed=0)
    model.eval()
    with torch.no_grad():
        model.model.norm.weight.mul_(8.0)  # sharper, yet every warper below leaves 12+ bins of mass
    prompt = tokenizer(["Hello"], return_tensors="pt")
    n = 2000
    settings = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": None, **warp}
    with torch.no_grad():
        logits = model(**prompt).logits[:, -1]  # (1, V)
    bins = _mass_bins(_warped_by_transformers(logits, settings)[0].softmax(-1))  # (V,), fixed before sampling

    def ours(**setting) -> torch.Tensor:
        ids = sample_completions(
            model,
            prompt["input_ids"],
            prompt["attention_mask"],
            num_generations=n,
            max_new_tokens=1,
            eos_token_ids=[tokenizer.eos_token_id],
            pad_token_id=tokenizer.pad_token_id,
            **setting,
        )  # (n, 1)
        return torch.bincount(bins[ids[:, 0]], minlength=int(bins.max()) + 1)

    def theirs(**setting) -> torch.Tensor:
        ids = model.generate(
            **{k: v.expand(n, -1) for k, v in prompt.items()},
            do_sample=True,
            max_new_tokens=1,
            min_new_tokens=1,
            pad_token_id=tokenizer.pad_token_id,
            temperature=setting["temperature"],
            top_k=setting["top_k"] or None,
            top_p=setting["top_p"],
            min_p=setting["min_p"],
        )[:, -1]  # (n,)
        return torch.bincount(bins[ids], minlength=int(bins.max()) + 1)

    torch.manual_seed(1)
    mine = ours(**settings)
    torch.manual_seed(2)
    reference = theirs(**settings)
    assert two_sample_chi_square_p(mine, reference) > 1e-3
    if warp == {"temperature": 1.0}:
        torch.manual_seed(3)
        colder = ours(**{**settings, "temperature": 0.8})
        assert two_sample_chi_square_p(colder, reference) < 1e-3


class _ReturnsNewCache(torch.nn.Module):
    """The cache contract of Unsloth's patched forwards on a GPU (``unsloth/models/llama.py``; Unsloth's CPU
    backend does not take that path, so the contract is reproduced here around a real transformers model): the
    cache is read as a tuple of
    per-layer ``(K, V)``, an empty ``Cache`` counts as none, and a *new* tuple is returned, the one given is
    never filled."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.config = model.config

    def forward(self, past_key_values=None, **kwargs):
        from transformers import Cache, DynamicCache

        if isinstance(past_key_values, Cache):
            assert past_key_values.get_seq_length() == 0, "a filled Cache object: not this contract"
            past_key_values = None
        fresh = DynamicCache(config=self.config)
        for layer, (keys, values) in enumerate(past_key_values or ()):
            fresh.update(keys.clone(), values.clone(), layer)
        out = self.model(past_key_values=fresh, **kwargs)
        out.past_key_values = tuple((layer.keys, layer.values) for layer in fresh.layers)
        return out


def test_a_model_that_returns_a_new_cache_samples_the_same_completions():
    """grpo-kit's sampler passes on the cache the model returns (``sampling.returned_cache``): a model that
    returns a new tuple instead of filling the ``DynamicCache`` it was given (Unsloth on a GPU) samples, from the
    same seed, exactly what the plain model samples. Before, it decoded with no past (a mask of the prompt's
    length against keys of length 1: the H200 run of 2026-12-04)."""
    model, tokenizer = tiny_model(seed=0)
    model.eval()
    enc = tokenizer(["Hello there", "Hi"], return_tensors="pt", padding=True, padding_side="left")  # (2, P)
    runs = []
    for candidate in (model, _ReturnsNewCache(model)):
        torch.manual_seed(7)
        runs.append(
            sample_completions(
                candidate,
                enc["input_ids"],
                enc["attention_mask"],
                num_generations=3,
                max_new_tokens=8,
                eos_token_ids=[tokenizer.eos_token_id],
                pad_token_id=tokenizer.pad_token_id,
            )  # (6, T)
        )
    assert runs[0].shape == (6, 8)
    assert torch.equal(runs[0], runs[1])


def _drawn_one_row_at_a_time(model, prompt_ids, prompt_mask, drawn, G, eos, seed) -> torch.Tensor:
    """What inverse-CDF sampling picks for each row of ``drawn`` (N, T), replayed without a cache: row r's
    token at step t from a fresh forward of its prompt and its t tokens so far, alone, with the t-th (N, 1)
    uniform the sampler drew from ``seed``. Rows after their EOS are left as drawn."""
    torch.manual_seed(seed)
    uniforms = [torch.rand(drawn.size(0), 1, dtype=torch.float64) for _ in range(drawn.size(1))]  # T × (N, 1)
    replayed = drawn.clone()
    for r in range(drawn.size(0)):
        prompt = prompt_ids[r // G][prompt_mask[r // G].bool()]  # (P_r,) the padding dropped
        for t in range(drawn.size(1)):
            if t and int(drawn[r, t - 1]) in eos:
                break
            ids = torch.cat([prompt, drawn[r, :t]])[None]  # (1, P_r + t)
            with torch.no_grad():
                logits = model(input_ids=ids).logits[:, -1]  # (1, V)
            replayed[r, t] = sample_next_token(logits, uniforms[t][r : r + 1])[0]
    return replayed


@pytest.mark.parametrize("wrap", [False, True], ids=["DynamicCache", "tuple cache"])
def test_rows_that_ended_leave_the_batch_and_every_row_draws_what_it_would_alone(wrap):
    """Once a row's EOS is drawn, the next forwards run without it (fewer rows each time, the cache cut to match,
    a transformers Cache or a returned tuple). Each row's tokens are still exactly those the row draws alone,
    from its own prompt and the uniform number the sampler drew for it at that step."""
    model, tokenizer = tiny_model(seed=0)
    model.eval()
    enc = tokenizer(["Hello there", "Hi"], return_tensors="pt", padding=True, padding_side="left")  # (2, P)
    eos = list(range(3, 12_000))  # a quarter of the vocabulary ends a row: rows end at different steps
    rows_seen = []
    hook = model.register_forward_pre_hook(
        lambda m, a, kw: rows_seen.append(kw["input_ids"].size(0)), with_kwargs=True
    )
    try:
        torch.manual_seed(5)
        drawn = sample_completions(
            _ReturnsNewCache(model) if wrap else model,
            enc["input_ids"],
            enc["attention_mask"],
            num_generations=4,
            max_new_tokens=10,
            eos_token_ids=eos,
            pad_token_id=tokenizer.pad_token_id,
        )  # (8, T)
    finally:
        hook.remove()
    lengths = [next((t + 1 for t, x in enumerate(row.tolist()) if x in eos), drawn.size(1)) for row in drawn]
    assert len(set(lengths)) >= 3, lengths  # the rows did end at different steps
    decode_rows = rows_seen[1:]  # the prefill ran the 2 distinct prompts
    assert decode_rows == sorted(decode_rows, reverse=True) and decode_rows[-1] < 8, decode_rows
    assert decode_rows == [sum(n > t for n in lengths) for t in range(1, len(decode_rows) + 1)]
    replayed = _drawn_one_row_at_a_time(model, enc["input_ids"], enc["attention_mask"], drawn, 4, eos, seed=5)
    assert torch.equal(drawn, replayed)


# --- QLoRA: 4-bit weights dequantized once per sampling call ------------------------------------------------


@pytest.mark.parametrize("pack", [True, False], ids=["packed", "plain"])
def test_4bit_layers_are_dequantized_once_and_sample_what_the_4bit_model_samples(tmp_path, monkeypatch, pack):
    """bitsandbytes' CPU 4-bit matmul dequantizes every weight on every call, so a decode step paid that for each
    token. Inside ``merged_lora`` each 4-bit layer multiplies with its weight dequantized once (+ ΔW where LoRA
    adapts it): the same logits as the 4-bit forward to float rounding, the same greedy tokens as transformers'
    ``generate`` on the 4-bit model, and afterwards the 4-bit layers are exactly as they were."""
    bnb = pytest.importorskip("bitsandbytes")
    monkeypatch.setenv("GRPO_KIT_CACHE", str(tmp_path / "cache"))
    from grpo_kit.models import load_model

    model, tokenizer = load_model("tiny", quantization="4bit", lora={"r": 4, "lora_dropout": 0.0}, seed=0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(
                    0, 0.2, generator=torch.Generator().manual_seed(len(name))
                )  # an adapter that matters
    model.train()  # fp32 4-bit forwards: in eval mode, on a CPU with AVX512-BF16, bitsandbytes repacks for bf16
    quantized = [m for m in model.modules() if isinstance(m, bnb.nn.Linear4bit)]
    assert len(quantized) == 14
    data = {id(m): m.weight.data.clone() for m in quantized}
    enc = tokenizer(["Hi", "A longer prompt here"], return_tensors="pt", padding=True, padding_side="left")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    with torch.no_grad():
        reference = model(input_ids=ids, attention_mask=mask).logits  # the 4-bit forward, LoRA unmerged
        with merged_lora(model, pack_rows=4 if pack else None) as merged:
            assert merged
            assert all("forward" in vars(m) for m in quantized)  # each multiplies with its dequantized copy
            fused = model(input_ids=ids, attention_mask=mask).logits
            sampled = sample_completions(
                model, ids, mask, num_generations=2, max_new_tokens=8, top_k=1,
                eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id,
            )  # fmt: skip
    torch.testing.assert_close(fused, reference, rtol=1e-4, atol=1e-4)
    theirs = model.generate(
        input_ids=ids, attention_mask=mask, max_new_tokens=8, do_sample=False,
        pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
    )[:, ids.size(1):].repeat_interleave(2, dim=0)  # fmt: skip
    assert torch.equal(sampled[:, : theirs.size(1)], theirs[:, : sampled.size(1)])
    assert not any("forward" in vars(m) for m in model.modules())  # the 4-bit forwards are back
    assert all(torch.equal(m.weight.data, data[id(m)]) for m in quantized)


def test_a_4bit_model_without_lora_samples_from_dequantized_weights_too(tmp_path, monkeypatch):
    bnb = pytest.importorskip("bitsandbytes")
    monkeypatch.setenv("GRPO_KIT_CACHE", str(tmp_path / "cache"))
    from grpo_kit.models import load_model

    model, tokenizer = load_model("tiny", quantization="4bit")
    model.train()  # the fp32 4-bit forward (see above)
    ids = tokenizer(["the cat"], return_tensors="pt")["input_ids"]
    with torch.no_grad():
        reference = model(input_ids=ids).logits
        with merged_lora(model) as merged:
            assert not merged  # nothing was merged: there is no LoRA
            assert all("forward" in vars(m) for m in model.modules() if isinstance(m, bnb.nn.Linear4bit))
            dequantized = model(input_ids=ids).logits
    torch.testing.assert_close(dequantized, reference, rtol=1e-4, atol=1e-4)
    assert not any("forward" in vars(m) for m in model.modules())


def test_a_4bit_weight_repacked_for_the_cpu_bf16_kernel_dequantizes_to_the_same_matrix(tmp_path, monkeypatch):
    """On a CPU with AVX512-BF16, bitsandbytes 0.50 repacks a 4-bit layer's weight the first time it runs in eval
    mode without gradients: the nibbles reordered, the block scales un-nested to bf16 and transposed. Read as if it
    were not, the "dequantized" matrix is noise (logits 0.93 off where they are 0.69 at most, found on such a CPU).
    The sampler's copy must be the same matrix either way, to the bf16 rounding of the scales, and reading it must
    leave the repacked layer as it was. The repack is bitsandbytes' own, called as its eval forward calls it, so
    this runs on any CPU."""
    pytest.importorskip("bitsandbytes")
    from bitsandbytes.functional import _convert_weight_packed_for_cpu

    from grpo_kit.core.sampling import _dequantized
    from grpo_kit.models import load_model

    monkeypatch.setenv("GRPO_KIT_CACHE", str(tmp_path / "cache"))
    model, _ = load_model("tiny", quantization="4bit")
    layers = [
        m for m in model.modules() if getattr(m._parameters.get("weight"), "quant_state", None) is not None
    ]
    assert len(layers) == 14
    for layer in layers:
        before = _dequantized(layer)  # (out, in)
        layer.weight.data, layer.weight.quant_state = _convert_weight_packed_for_cpu(
            layer.weight.data, layer.weight.quant_state
        )
        data, absmax = layer.weight.data.clone(), layer.weight.quant_state.absmax.clone()
        after = _dequantized(layer)
        torch.testing.assert_close(after, before, rtol=2**-8, atol=0.0)  # bf16 scales: 8 bits of mantissa
        assert layer.weight.quant_state.packing_format_for_cpu  # still the kernel's layout
        assert torch.equal(layer.weight.data, data) and torch.equal(layer.weight.quant_state.absmax, absmax)


def test_a_bf16_model_whose_4bit_layers_compute_in_fp32_samples_with_packed_weights(tmp_path, monkeypatch):
    """Unsloth's CPU loader on a CPU with AVX512-BF16 gives a bf16 model whose 4-bit layers compute in fp32: the
    sampler's packed copy is fp32 and the hidden states reaching it bf16. oneDNN multiplies one dtype ("could not
    create a primitive descriptor", the first run of gsm8k-unsloth-cpu on such a CPU): the packed layer computes
    in its weight's dtype and answers in the input's, as the plain one and bitsandbytes' own forward do."""
    bnb = pytest.importorskip("bitsandbytes")
    monkeypatch.setenv("GRPO_KIT_CACHE", str(tmp_path / "cache"))
    from grpo_kit.models import load_model

    model, tokenizer = load_model("tiny", quantization="4bit", lora={"r": 4, "lora_dropout": 0.0}, seed=0)
    for module in model.modules():  # everything but the 4-bit layers in bf16
        if not isinstance(module, bnb.nn.Linear4bit):
            for param in module.parameters(recurse=False):
                param.data = param.data.to(torch.bfloat16)
    model.train()  # no repack for bitsandbytes' bf16 kernel (see above)
    enc = tokenizer(["Hi", "A longer prompt here"], return_tensors="pt", padding=True, padding_side="left")
    ids, mask = enc["input_ids"], enc["attention_mask"]
    with torch.no_grad():
        with merged_lora(model) as merged:
            assert merged
            plain = model(input_ids=ids, attention_mask=mask).logits
        with merged_lora(model, pack_rows=4):
            packed = model(input_ids=ids, attention_mask=mask).logits
            sampled = sample_completions(
                model, ids, mask, num_generations=2, max_new_tokens=4, top_k=1,
                eos_token_ids=[tokenizer.eos_token_id], pad_token_id=tokenizer.pad_token_id,
            )  # fmt: skip
    assert packed.dtype == torch.bfloat16 and sampled.shape[0] == 4
    torch.testing.assert_close(packed, plain)  # bf16's tolerance: the same fp32 products, rounded to bf16
