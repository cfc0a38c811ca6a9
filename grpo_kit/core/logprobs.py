"""Per-token log-probabilities and entropies of completion tokens, as TRL's GRPOTrainer computes them.

GRPO never needs the full ``(B, L, V)`` distribution: only ``log π(o_t | q, o_<t)`` of the token that was
actually sampled, at completion positions. This module mirrors the pinned TRL's
``GRPOTrainer._get_per_token_logps_and_entropies`` (trl 1.15.0):

* the logits are divided by the sampling ``temperature`` first, so the log-probs belong to the same
  distribution the completions were sampled from;
* ``selective_log_softmax``: ``logit[token] - logsumexp(logits)`` row by row, instead of materialising a
  whole ``log_softmax`` over the vocabulary (same numbers, less memory);
* positions whose attention mask is 0 (right padding after EOS, masked truncated completions) get
  log-prob 0 and entropy 0, exactly as TRL's fused LM head returns them.

TRL computes the same values with a fused, tiled LM-head kernel; we ask the model for the last
``logits_to_keep + 1`` logits (transformers' ``logits_to_keep``) and do the arithmetic in the open.

``entropy_mask`` mirrors ``GRPOTrainer.get_high_entropy_mask`` ("Beyond the 80/20 Rule",
https://huggingface.co/papers/2506.01939): keep only the top-ρ quantile of tokens by entropy.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F

__all__ = [
    "entropy_from_logits",
    "entropy_mask",
    "per_token_logps",
    "per_token_logps_grouped",
    "selective_log_softmax",
]


def selective_log_softmax(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``log_softmax(logits)[..., index]`` without materialising the log-softmax over the vocabulary.

    ``logits`` (B, T, V), ``index`` (B, T) -> (B, T). Float32/64: ``x_i - logsumexp(x)`` one row at a
    time (TRL's loop to keep peak memory low); half precision: row-wise ``log_softmax`` because
    ``logsumexp`` is unstable in bfloat16 (TRL does the same).
    """
    if logits.dtype in (torch.float32, torch.float64):
        selected = torch.gather(logits, dim=-1, index=index.unsqueeze(-1)).squeeze(-1)  # (B, T)
        logsumexp = torch.stack([torch.logsumexp(row, dim=-1) for row in logits])  # (B, T)
        return selected - logsumexp  # (B, T)
    rows = []
    for row_logits, row_index in zip(logits, index, strict=True):
        row_logps = F.log_softmax(row_logits, dim=-1)  # (T, V)
        rows.append(row_logps.gather(dim=-1, index=row_index.unsqueeze(-1)).squeeze(-1))  # (T,)
    return torch.stack(rows)  # (B, T)


def entropy_from_logits(logits: torch.Tensor, chunk_size: int = 128) -> torch.Tensor:
    """Shannon entropy in nats of each position's distribution: ``(B, T, V) -> (B, T)``, in chunks."""
    flat = logits.reshape(-1, logits.size(-1))  # (B*T, V)
    chunks = []
    for chunk in flat.split(chunk_size, dim=0):
        logps = F.log_softmax(chunk, dim=-1)  # (c, V)
        chunks.append(-(logps.exp() * logps).sum(-1))  # (c,)
    return torch.cat(chunks).reshape(logits.shape[:-1])  # (B, T)


def per_token_logps(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    temperature: float = 1.0,
    compute_entropy: bool = False,
    entropy_requires_grad: bool = False,
    batch_size: int | None = None,
    float32_logits: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (and optionally entropies) of the last ``logits_to_keep`` tokens of ``input_ids``.

    Args:
        model: a causal LM (plain or PEFT-wrapped) whose forward accepts ``logits_to_keep``.
        input_ids: ``(B, P + T)`` prompt (left-padded) followed by completion (right-padded).
        attention_mask: ``(B, P + T)``; 0 marks padding, whose log-prob and entropy come back as 0.
        logits_to_keep: ``T``, the completion width.
        temperature: the sampling temperature; logits are divided by it (TRL does the same).
        compute_entropy: also return per-token entropies of the tempered distribution.
        entropy_requires_grad: keep the entropies' graph (the entropy bonus is differentiated through them,
            as TRL's fused head does); off, they are computed under ``no_grad`` (a metric and a mask only).
        batch_size: forward this many rows at a time (memory); ``None`` = all at once.
        float32_logits: compute the log-softmax (and entropies) in float32 whatever dtype the logits come
            in (the loop's ``bf16`` autocast gives bf16 logits); off, half-precision logits take TRL's
            row-by-row bf16 path.

    Returns:
        ``(logps (B, T), entropies (B, T) | None)``. Gradients flow through ``logps`` when enabled;
        ``entropies`` carry a graph only with ``entropy_requires_grad``.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive (got {temperature}); use e.g. temperature=1.0.")
    if input_ids.shape != attention_mask.shape:
        raise ValueError(
            f"input_ids {tuple(input_ids.shape)} and attention_mask {tuple(attention_mask.shape)} must have "
            "the same shape; build both from the same padded prompt+completion batch."
        )
    if not 0 < logits_to_keep < input_ids.size(1):
        raise ValueError(
            f"logits_to_keep={logits_to_keep} must be in [1, sequence length - 1 = {input_ids.size(1) - 1}]: "
            "it is the completion width, and at least one prompt token must precede it."
        )
    batch_size = batch_size or input_ids.size(0)
    all_logps, all_entropies = [], []
    for start in range(0, input_ids.size(0), batch_size):
        ids = input_ids[start : start + batch_size]  # (b, L)
        mask = attention_mask[start : start + batch_size]  # (b, L)
        # One extra logit: the logit at position t predicts token t+1, so T completion tokens need the
        # logits of the T positions before them.
        logits = model(
            input_ids=ids, attention_mask=mask, logits_to_keep=logits_to_keep + 1
        ).logits  # (b, T+1, V)
        logits = logits[:, :-1, :]  # (b, T, V) drop the prediction after the last token
        if float32_logits:
            logits = logits.float()
        if temperature != 1.0:
            logits = logits / temperature
        logps, entropies = _logps_from_logits(
            logits,
            ids[:, -logits_to_keep:],
            mask[:, -logits_to_keep:],
            compute_entropy,
            entropy_requires_grad,
        )  # (b, T), (b, T) | None
        all_logps.append(logps)
        if compute_entropy:
            all_entropies.append(entropies)
    logps = torch.cat(all_logps, dim=0)  # (B, T)
    entropies = torch.cat(all_entropies, dim=0) if compute_entropy else None  # (B, T)
    return logps, entropies


def _logps_from_logits(
    logits: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    compute_entropy: bool,
    entropy_requires_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(b, T, V)`` tempered logits of the positions *before* each completion token -> logps, entropies."""
    keep = completion_mask != 0  # (b, T)
    entropies = None
    # Without the bonus, entropies only feed a metric and a mask: no graph, no extra memory.
    entropy_grad = contextlib.nullcontext() if entropy_requires_grad else torch.no_grad()
    if logits.dtype in (torch.float32, torch.float64):
        # log p(token) = z_token − logsumexp(z): selective_log_softmax's arithmetic in one call
        logsumexp = torch.logsumexp(logits, dim=-1)  # (b, T)
        logps = logits.gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1) - logsumexp  # (b, T)
        if compute_entropy and entropy_requires_grad:
            probs = torch.exp(logits - logsumexp.unsqueeze(-1))  # (b, T, V)
            entropies = logsumexp - (probs * logits).sum(-1)  # (b, T) H = logsumexp(z) − Σ p·z
        elif compute_entropy:
            with torch.no_grad():  # a metric and a mask only: in chunks, no (b, T, V) temporaries
                entropies = entropy_from_logits(logits)  # (b, T)
    else:
        logps = selective_log_softmax(logits, completion_ids)  # (b, T) bf16-safe path
        if compute_entropy:
            with entropy_grad:
                entropies = entropy_from_logits(logits)  # (b, T)
    logps = logps.masked_fill(~keep, 0.0)
    return logps, None if entropies is None else entropies.masked_fill(~keep, 0.0)


def per_token_logps_grouped(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    completion_ids: torch.Tensor,
    completion_mask: torch.Tensor,
    num_generations: int,
    *,
    temperature: float = 1.0,
    compute_entropy: bool = False,
    entropy_requires_grad: bool = False,
    float32_logits: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``per_token_logps`` for groups of completions that share a prompt: each prompt runs once, and its G
    completions are packed into one row, without their padding.

    ``prompt_ids``/``prompt_mask`` ``(B, P)`` hold the B *distinct* prompts; ``completion_ids``/``completion_mask``
    ``(B*G, T)`` their G completions each, group by group. One forward pass, one row per prompt: the prompt,
    then its G completions back to back, each cut after its last masked-in token (``(B, P+S)``, S = the
    longest group's total, usually far less than G·T). A 4-D attention mask lets a prompt token see the
    prompt causally and a completion token see its prompt and the earlier tokens of its own completion only;
    position ids continue each completion from the prompt's width. So every position computes what the padded
    ``(B*G, P+T)`` batch computes for it, the prompt runs once for its G completions, and padding after an EOS
    costs nothing. No key/value cache is kept, so layer-wise gradient checkpointing (which drops a cache)
    applies to this pass unchanged.

    The result equals ``per_token_logps(model, cat([prompt_ids.repeat_interleave(G), completion_ids]), …)``
    (same positions, same masks) up to float rounding; positions whose mask is 0 get 0. (Under LoRA dropout
    the G completions of a prompt share one dropout draw on the prompt, and the draws on the completions
    are other random numbers.) ``float32_logits``: as in :func:`per_token_logps`.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive (got {temperature}); use e.g. temperature=1.0.")
    G = num_generations
    if completion_ids.size(0) != prompt_ids.size(0) * G or completion_ids.shape != completion_mask.shape:
        raise ValueError(
            f"{completion_ids.size(0)} completions for {prompt_ids.size(0)} prompts × num_generations={G}: pass "
            "the distinct prompts and their completions group by group, with a mask of the completions' shape."
        )
    N, T = completion_ids.shape
    packed = _pack_completions(prompt_mask, completion_ids, completion_mask, G)
    S = packed.input_ids.size(1)
    # The logits of the prompt's last position (predicting completion token 0) and of every packed position.
    logits = model(
        input_ids=torch.cat([prompt_ids, packed.input_ids], dim=1),  # (B, P+S)
        attention_mask=packed.attention_mask,  # (B, 1, P+S, P+S)
        position_ids=packed.position_ids,  # (B, P+S)
        use_cache=False,
        logits_to_keep=S + 1,
    ).logits  # (B, S+1, V)
    rows = [logits[:, 0].repeat_interleave(G, dim=0)[packed.first_rows]]  # (n0, V) completion token 0
    if S > 0:  # the packed positions predict completion tokens 1 … L-1
        rows.append(logits[:, 1:][packed.source])  # (n1, V)
    flat = torch.cat(rows).unsqueeze(0)  # (1, n, V): one logit row per completion position computed
    if float32_logits:
        flat = flat.float()
    if temperature != 1.0:
        flat = flat / temperature
    logps, entropies = _logps_from_logits(
        flat,
        completion_ids[packed.target].unsqueeze(0),
        completion_mask[packed.target].unsqueeze(0),
        compute_entropy,
        entropy_requires_grad,
    )  # (1, n), (1, n) | None

    def scatter(values: torch.Tensor) -> torch.Tensor:  # (1, n) -> (N, T), 0 where nothing was computed
        return values.new_zeros(N, T).index_put(packed.target, values[0])

    return scatter(logps), None if entropies is None else scatter(entropies)


@dataclass
class _PackedCompletions:
    """The index tables of :func:`per_token_logps_grouped`'s packed pass (all long tensors)."""

    input_ids: torch.Tensor  # (B, S) the G completions of prompt b back to back, each without its last token
    # (B, 1, P+S, P+S) bool: a prompt token sees the prompt causally; a completion token the prompt's real tokens
    # and its own completion, causally
    attention_mask: torch.Tensor
    position_ids: torch.Tensor  # (B, P+S) the prompt's 0 … P-1, then P + offset within each completion
    # (n0,) completions with at least one token: their token 0 is predicted by the prompt's last position
    first_rows: torch.Tensor
    source: tuple[torch.Tensor, torch.Tensor]  # (n1,), (n1,) real packed positions (b, s)
    # (n,), (n,) the (completion, column) each computed logit row predicts: first_rows' column 0, then source's
    target: tuple[torch.Tensor, torch.Tensor]


def _pack_completions(prompt_mask, completion_ids, completion_mask, G: int) -> _PackedCompletions:
    B, P = prompt_mask.shape
    T = completion_ids.size(1)
    device = completion_ids.device
    columns = torch.arange(1, T + 1, device=device)  # (T,)
    # A completion counts up to its last masked-in token; what follows is padding, never computed.
    lengths = (completion_mask.ne(0).long() * columns).amax(dim=1).tolist()  # (N,) as ints
    spans = [max(n - 1, 0) for n in lengths]  # inputs per completion: tokens 0 … L-2 predict tokens 1 … L-1
    width = max([sum(spans[b * G : (b + 1) * G]) for b in range(B)] + [0])
    input_ids = completion_ids.new_zeros(B, width)  # (B, S) padding: token 0, never read
    segment = torch.full((B, width), -1, dtype=torch.long, device=device)  # (B, S) -1 = padding
    key_in = torch.zeros(B, width, dtype=torch.bool, device=device)  # (B, S) tokens the mask lets others see
    offset = torch.zeros(B, width, dtype=torch.long, device=device)  # (B, S)
    source_b, source_s, target_n, target_t = [], [], [], []
    for n, span in enumerate(spans):
        b = n // G
        start = sum(spans[b * G : n])
        input_ids[b, start : start + span] = completion_ids[n, :span]
        segment[b, start : start + span] = n
        key_in[b, start : start + span] = completion_mask[n, :span].ne(0)
        offset[b, start : start + span] = torch.arange(span, device=device)
        source_b += [b] * span
        source_s += range(start, start + span)
        target_n += [n] * span
        target_t += range(1, span + 1)
    first_rows = [n for n, length in enumerate(lengths) if length > 0]
    same_completion = segment.unsqueeze(2) == segment.unsqueeze(1)  # (B, S, S)
    causal = torch.ones(width, width, dtype=torch.bool, device=device).tril()  # (S, S)
    # As in the padded batch, a token sees its prompt's real tokens (so no row is empty) and the masked-in tokens
    # of its own completion up to itself.
    own = same_completion & causal & key_in.unsqueeze(1)  # (B, S, S)
    prompt = prompt_mask.bool().unsqueeze(1).expand(B, width, P)  # (B, S, P)
    completions_rows = torch.cat([prompt, own], dim=2)  # (B, S, P+S)
    # The prompt's rows, as a plain forward of the prompt computes them: causal over its real tokens. A padding
    # position also sees itself, so no row is empty (its output is never read, nor seen by any other token).
    prompt_causal = torch.ones(P, P, dtype=torch.bool, device=device).tril()  # (P, P)
    prompt_rows = (prompt_causal & prompt_mask.bool().unsqueeze(1)) | torch.eye(
        P, dtype=torch.bool, device=device
    )
    prompt_rows = torch.cat([prompt_rows, prompt_rows.new_zeros(B, P, width)], dim=2)  # (B, P, P+S)
    attention_mask = torch.cat([prompt_rows, completions_rows], dim=1).unsqueeze(1)  # (B, 1, P+S, P+S)
    prompt_positions = torch.arange(P, device=device).expand(B, P)  # (B, P)

    def longs(values) -> torch.Tensor:
        return torch.tensor(list(values), dtype=torch.long, device=device)

    return _PackedCompletions(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=torch.cat([prompt_positions, P + offset], dim=1),
        first_rows=longs(first_rows),
        source=(longs(source_b), longs(source_s)),
        target=(longs(first_rows + target_n), longs([0] * len(first_rows) + target_t)),
    )


def entropy_mask(entropies: torch.Tensor, mask: torch.Tensor, top_entropy_quantile: float) -> torch.Tensor:
    """Boolean ``(B, T)`` mask of the tokens whose entropy is in the top ``top_entropy_quantile`` (ρ).

    Mirrors TRL's ``get_high_entropy_mask(entropies, mask, threshold=1 - ρ)`` on one process: the
    threshold is the ``1 - ρ`` quantile of the entropies of valid tokens; tokens at or above it are kept;
    padding is always dropped. ρ = 1 keeps every valid token, ρ = 0 only the highest-entropy one(s).
    """
    if not 0.0 <= top_entropy_quantile <= 1.0:
        raise ValueError(
            f"top_entropy_quantile must be in [0, 1] (got {top_entropy_quantile}); the paper uses 0.2."
        )
    valid = entropies[mask.bool()].float()  # (n_valid,)
    if valid.numel() == 0:
        return torch.zeros_like(entropies, dtype=torch.bool)  # (B, T)
    threshold = torch.quantile(valid, 1.0 - top_entropy_quantile)
    masked_entropies = entropies * mask.float()  # (B, T)
    return (masked_entropies >= threshold) & mask.bool()  # (B, T)
