"""per_token_logps / entropy_mask against a direct computation and against the pinned TRL's own code.

TRL 1.15.0 scores completions with a fused LM head (``add_fused_lm_head``) patched onto the model; the
parity test patches a copy of the tiny model with that very function and calls it the way
``GRPOTrainer._get_per_token_logps_and_entropies`` does (label masking, shift, temperature). Without
Triton (CPU torch) its inner tile kernel is ``grpo_kit.trainers.trl_path``'s plain-torch twin.
"""

from __future__ import annotations

import copy
import types

import pytest
import torch

from grpo_kit.core.logprobs import (
    entropy_mask,
    per_token_logps,
    per_token_logps_grouped,
    selective_log_softmax,
)
from grpo_kit.models import tiny_model


@pytest.fixture(scope="module")
def model_and_batch():
    model, tokenizer = tiny_model(seed=0)
    model.eval()
    g = torch.Generator().manual_seed(0)
    batch, prompt_len, completion_len = 4, 5, 6
    input_ids = torch.randint(0, model.config.vocab_size, (batch, prompt_len + completion_len), generator=g)
    attention_mask = torch.ones_like(input_ids)  # (B, P+T)
    attention_mask[0, :2] = 0  # left padding of a short prompt
    attention_mask[1, -3:] = 0  # right padding after an early EOS
    attention_mask[2, prompt_len:] = 0  # a fully masked completion (mask_truncated_completions)
    input_ids = input_ids.masked_fill(attention_mask == 0, tokenizer.pad_token_id)
    return model, input_ids, attention_mask, completion_len


def direct(model, input_ids, attention_mask, logits_to_keep, temperature):
    """The textbook computation: full logits, full log_softmax, gather, mask."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits  # (B, L, V)
    logits = logits[:, -logits_to_keep - 1 : -1] / temperature  # (B, T, V)
    logp_all = torch.log_softmax(logits.double(), dim=-1)  # (B, T, V)
    targets = input_ids[:, -logits_to_keep:]  # (B, T)
    logps = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    entropies = -(logp_all.exp() * logp_all).sum(-1)  # (B, T)
    keep = attention_mask[:, -logits_to_keep:].bool()
    return logps.masked_fill(~keep, 0).float(), entropies.masked_fill(~keep, 0).float()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_matches_direct_computation(model_and_batch, temperature):
    model, input_ids, attention_mask, t = model_and_batch
    with torch.no_grad():
        logps, entropies = per_token_logps(
            model, input_ids, attention_mask, t, temperature=temperature, compute_entropy=True
        )
        want_logps, want_entropies = direct(model, input_ids, attention_mask, t, temperature)
    assert logps.shape == entropies.shape == (4, t)
    torch.testing.assert_close(logps, want_logps, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropies, want_entropies, atol=1e-4, rtol=1e-5)
    assert (logps[2] == 0).all() and (logps[1, -3:] == 0).all()  # padding scores 0
    assert (logps[0] < 0).all()  # real tokens have a real (negative) log-prob
    # The temperature matters: the same tokens scored untempered give other numbers.
    if temperature != 1.0:
        with torch.no_grad():
            plain, _ = per_token_logps(model, input_ids, attention_mask, t)
        assert not torch.allclose(plain[0], logps[0])


def test_chunked_equals_whole_and_gradient_flows(model_and_batch):
    model, input_ids, attention_mask, t = model_and_batch
    whole, ent = per_token_logps(model, input_ids, attention_mask, t, compute_entropy=True)
    chunked, _ = per_token_logps(model, input_ids, attention_mask, t, batch_size=3)
    torch.testing.assert_close(whole, chunked, atol=1e-6, rtol=1e-6)
    assert whole.requires_grad and not ent.requires_grad  # entropies only feed metrics and masks
    whole.sum().backward()
    grad = model.model.embed_tokens.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)


def test_entropies_keep_their_graph_only_for_the_bonus(model_and_batch):
    """entropy_requires_grad=True: the entropy bonus reaches the weights; the values are the same."""
    model, input_ids, attention_mask, t = model_and_batch
    _, plain = per_token_logps(model, input_ids, attention_mask, t, compute_entropy=True)
    _, ent = per_token_logps(
        model, input_ids, attention_mask, t, compute_entropy=True, entropy_requires_grad=True
    )
    torch.testing.assert_close(ent.detach(), plain)
    assert ent.requires_grad
    ent.sum().backward()
    grad = model.model.embed_tokens.weight.grad
    assert grad is not None and grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)
    prompt_ids, completion_ids = input_ids[:2, :5], input_ids[:2, 5:]
    _, grouped = per_token_logps_grouped(
        model,
        prompt_ids[:1],
        attention_mask[1:2, :5],
        completion_ids[:2],
        attention_mask[:2, 5:],
        2,
        compute_entropy=True,
        entropy_requires_grad=True,
    )
    assert grouped.requires_grad


def test_matches_trl_fused_lm_head(model_and_batch):
    from trl.trainer.utils import add_fused_lm_head

    from grpo_kit.trainers.trl_path import ensure_logprob_kernel

    ensure_logprob_kernel()  # CPU torch has no Triton: TRL's inner kernel is swapped for a torch twin
    model, input_ids, attention_mask, t = model_and_batch
    theirs = copy.deepcopy(model)
    add_fused_lm_head(theirs, temperature=0.8, outputs=("log_probs", "entropy"))
    # Exactly what GRPOTrainer._get_per_token_logps_and_entropies does with the fused head.
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, :-t] = -100
    with torch.no_grad():
        out = theirs(input_ids=input_ids, attention_mask=attention_mask, labels=labels, fused_lm_head=True)
        ours, our_entropies = per_token_logps(
            model, input_ids, attention_mask, t, temperature=0.8, compute_entropy=True
        )
    torch.testing.assert_close(ours, out.log_probs[:, -t:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(our_entropies, out.entropy[:, -t:], atol=1e-4, rtol=1e-5)


def test_selective_log_softmax_half_precision_path():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 3, 50, generator=g)
    index = torch.randint(0, 50, (2, 3), generator=g)
    want = torch.log_softmax(logits, -1).gather(-1, index.unsqueeze(-1)).squeeze(-1)
    torch.testing.assert_close(selective_log_softmax(logits, index), want)
    half = selective_log_softmax(logits.bfloat16(), index)
    torch.testing.assert_close(half.float(), want, atol=0.05, rtol=0.02)


@pytest.mark.parametrize("quantile", [1.0, 0.5, 0.2, 0.0])
def test_entropy_mask_matches_trl(quantile):
    from accelerate import Accelerator
    from trl import GRPOTrainer

    g = torch.Generator().manual_seed(2)
    entropies = torch.rand(4, 6, generator=g) * 3  # (B, T)
    mask = torch.ones(4, 6, dtype=torch.long)
    mask[1, 3:] = 0
    mask[3] = 0
    entropies = entropies * mask
    # TRL's method only needs an accelerator for its cross-process gather; a real single-process one.
    host = types.SimpleNamespace(accelerator=Accelerator(cpu=True))
    theirs = GRPOTrainer.get_high_entropy_mask(host, entropies, mask, 1 - quantile)
    ours = entropy_mask(entropies, mask, quantile)
    assert torch.equal(ours, theirs)
    assert not ours[3].any()  # padding never selected
    kept = ours.sum().item()
    assert (kept == mask.sum().item()) if quantile == 1.0 else (kept < mask.sum().item())


def test_entropy_mask_empty_and_bad_quantile():
    assert not entropy_mask(torch.rand(2, 3), torch.zeros(2, 3), 0.2).any()
    with pytest.raises(ValueError, match="top_entropy_quantile"):
        entropy_mask(torch.rand(2, 3), torch.ones(2, 3), 1.5)


def test_bad_inputs_name_the_fix(model_and_batch):
    model, input_ids, attention_mask, t = model_and_batch
    with pytest.raises(ValueError, match="temperature"):
        per_token_logps(model, input_ids, attention_mask, t, temperature=0.0)
    with pytest.raises(ValueError, match="same shape"):
        per_token_logps(model, input_ids, attention_mask[:, 1:], t)
    with pytest.raises(ValueError, match="completion width"):
        per_token_logps(model, input_ids, attention_mask, input_ids.size(1))


#: completion masks (6 completions × 5 tokens, two groups of 3) the grouped, packed pass must get right
MASK_CASES = {
    "early EOS and a one-token completion": {1: (3, 5), 4: (1, 5)},
    "a fully masked completion (mask_truncated_completions) and a hole": {5: (0, 5), 2: (2, 3)},
    "every completion one token (no packed pass)": {n: (1, 5) for n in range(6)},
}


@pytest.mark.parametrize("masked", MASK_CASES.values(), ids=MASK_CASES.keys())
def test_grouped_scoring_equals_scoring_each_row(masked):
    """per_token_logps_grouped runs each prompt once and packs its G completions into one row without their
    padding; values, entropies and gradients must equal scoring every (prompt, completion) row separately."""
    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora={"r": 4, "lora_dropout": 0.0})
    with torch.no_grad():  # a non-zero adapter, so the gradient reaches both LoRA matrices
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    enc = tokenizer(
        ["Hi", "A much longer prompt here"], return_tensors="pt", padding=True, padding_side="left"
    )
    G, T = 3, 5
    g = torch.Generator().manual_seed(0)
    completion_ids = torch.randint(0, 1000, (2 * G, T), generator=g)
    completion_mask = torch.ones(2 * G, T, dtype=torch.long)
    for row, (start, stop) in masked.items():
        completion_mask[row, start:stop] = 0
    completion_ids = completion_ids.masked_fill(completion_mask == 0, tokenizer.pad_token_id)
    prompt_ids, prompt_mask = (
        enc["input_ids"].repeat_interleave(G, 0),
        enc["attention_mask"].repeat_interleave(G, 0),
    )

    rows, rows_entropy = per_token_logps(
        model,
        torch.cat([prompt_ids, completion_ids], 1),
        torch.cat([prompt_mask, completion_mask], 1),
        T,
        temperature=0.9,
        compute_entropy=True,
    )
    rows.sum().backward()
    row_grads = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    model.zero_grad(set_to_none=True)
    grouped, grouped_entropy = per_token_logps_grouped(
        model,
        enc["input_ids"],
        enc["attention_mask"],
        completion_ids,
        completion_mask,
        G,
        temperature=0.9,
        compute_entropy=True,
    )
    grouped.sum().backward()
    grouped_grads = [p.grad for p in model.parameters() if p.requires_grad]
    torch.testing.assert_close(grouped, rows, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grouped_entropy, rows_entropy, atol=1e-4, rtol=1e-5)
    for a, b in zip(grouped_grads, row_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="group by group"):
        per_token_logps_grouped(
            model, enc["input_ids"], enc["attention_mask"], completion_ids[:5], completion_mask[:5], G
        )
