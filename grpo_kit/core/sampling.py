"""Sampling G completions per prompt: a small KV-cached decode loop (what ``model.generate`` does, minus
what GRPO does not need), with two savings that GRPO's batch shape makes possible:

* **one prefill per prompt, not per completion**: the G completions of a prompt share its prefix, so
  the prompt is run through the model once and its key/value cache is repeated G times
  (``DynamicCache.batch_repeat_interleave``); ``generate`` on a batch of repeated prompts prefills each
  copy separately;
* **inverse-CDF sampling** instead of ``torch.multinomial``: one uniform number per row and a binary
  search in the cumulative probabilities picks token i with probability ``p_i``; on CPU with a 49k-token
  vocabulary it is ~20× faster (0.5 ms vs 10 ms per decode step for 8 rows; multinomial took a third
  of a tiny-model GRPO step). The running sum is float64: in float32 the shares of the rare tokens round to
  float32 steps near 1 (total variation from the softmax ~2e-4 per token on SmolLM2, measured).

* **LoRA merged for sampling** (``merged_lora``): decoding is a few hundred tiny matmuls per token, and a
  LoRA layer turns one of them into three plus a dropout. While sampling, each adapted layer runs with
  the single matrix ``W + ΔW`` (adapter disabled); the original weight tensors are put back afterwards,
  untouched (no merge/unmerge rounding drift). Like sampling in eval mode, the LoRA dropout is off.
* **4-bit weights dequantized once per sampling call** (QLoRA, ``merged_lora``): bitsandbytes' 4-bit matmul
  dequantizes its weight on every call, so a decode step paid a whole-model dequantization per token. While
  sampling, each 4-bit layer multiplies with its weight dequantized once (plus ΔW where LoRA adapts it, packed
  for oneDNN on CPU); training's forward and backward stay 4-bit. The copies cost the model's size in the compute
  dtype for the duration of the sampling.
* **oneDNN-packed weights on CPU** (``packed_linears``): a decode step multiplies a handful of rows by every
  weight matrix. PyTorch's CPU ``linear`` goes to MKL's sgemm, which at so few rows runs far below what
  the memory allows (on an AMD EPYC: 30 GFLOP/s at 8 rows, and the LM head 3× slower than oneDNN). For
  the duration of the sampling every ``nn.Linear`` (the LM head included) multiplies with a copy of its
  weight reordered once for oneDNN, the library PyTorch's own compiler uses for CPU linears
  (``benchmarks/bench_loop_vs_trl.py``: the README's "A faster step"). Same products up to float rounding.

* **rows that ended leave the batch**: once a row draws its EOS, the next forwards run on the rows still
  decoding (the cache, mask and positions cut to match), where ``generate`` keeps computing padding for it. The
  random numbers are drawn for every row at every step, ended or not, so a row's uniform numbers do not depend on
  when the others end (``test_sampling.py`` replays each row alone). With one torch thread the tokens are bit for
  bit those of the batch that keeps every row. With two, PyTorch's CPU attention (SDPA) rounds a row's output
  differently depending on which rows share its batch: ~1e-9 there, up to ~6e-5 in the logits (measured on the
  embedded model), enough to flip a rare draw, so a 2-thread run's completions are equally distributed but not
  bit-identical to those of the all-rows batch. Measured on the embedded model, 2 threads: 2 prompts × G = 4 at
  T = 1, 0.84× the time; 32 greedy held-out prompts, 0.76×.
* **key/value heads read once** (``core.attention``): transformers' ``sdpa`` copies each grouped key/value head per
  query head whenever there is a mask (every left-padded batch), the whole cache every token; SDPA's own grouped
  path gives the same numbers bit for bit without the copy. **Greedy** (``top_k=1``) takes a row's one maximum
  without the softmax and float64 sum. Both keep the draws of a seed exactly: the main job's run, with the decoding
  of its training and evaluations, trained to the same held-out figures at every step (docs/benchmarks.md).

The logits are warped in the order transformers' ``generate`` uses: repetition penalty, temperature,
top-k, top-p, min-p. Position ids follow the attention mask, as ``generate`` does for left padding.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Iterator
from typing import Any

import torch

from grpo_kit.core.attention import grouped_query_attention

__all__ = [
    "check_fits_context",
    "context_length",
    "mask_after_eos",
    "merged_lora",
    "packed_linears",
    "sample_completions",
    "sample_next_token",
    "stop_token_ids",
    "warp_logits",
]


def _mergeable_lora_layers(model: torch.nn.Module) -> list | None:
    """The plain LoRA ``Linear`` layers of a PEFT model, or None if something cannot be merged simply."""
    if not (hasattr(model, "peft_config") and hasattr(model, "disable_adapter")):
        return None
    from peft.tuners.lora import Linear as LoraLinear
    from peft.tuners.lora import LoraLayer

    linear_types: tuple[type, ...] = (LoraLinear,)
    try:  # QLoRA: peft's LoRA over a bitsandbytes 4-bit layer, merged with its weight dequantized once
        from peft.tuners.lora.bnb import Linear4bit as LoraLinear4bit

        linear_types += (LoraLinear4bit,)
    except ImportError:  # no bitsandbytes: no 4-bit layers either
        pass
    layers = []
    for module in model.modules():
        if not isinstance(module, LoraLayer):
            continue
        if not isinstance(module, linear_types) or module.merged or module.disable_adapters:
            return None  # embeddings/convs/already merged: leave sampling to the unmerged model
        active = [a for a in module.active_adapters if a in module.lora_A]
        if any(a in module.lora_variant or module.lora_bias[a] for a in active):
            return None  # DoRA and friends, LoRA biases: not a plain W + BA
        layers.append((module, active))
    return layers or None


@contextlib.contextmanager
def merged_lora(
    model: torch.nn.Module, dtype: torch.dtype | None = None, *, pack_rows: int | None = None
) -> Iterator[bool]:
    """Inside the block, every plain LoRA layer computes ``x (W + ΔW)ᵀ`` in one matmul; yields whether it did.

    ``dtype`` (e.g. ``torch.bfloat16``): inside the block *every* floating weight of the model (merged or
    not, tied weights once) is a copy in that dtype, so decoding runs natively in it: on a CPU with AMX or
    AVX512-BF16 a bf16 decode step reads half the bytes and multiplies several times faster than fp32
    (``benchmarks/bench_loop_vs_trl.py``); the copies take half the memory of the fp32 merged matrices.
    Buffers (rotary frequencies) stay as they are. ``None``: the weights keep their dtype.

    ``pack_rows`` (decoding on CPU): each merged matrix goes straight into a oneDNN copy reordered for that
    many rows, which the base layer multiplies with (as in :func:`packed_linears`); no separate merged matrix
    is kept, so the block holds one copy of the adapted weights, not two. The base layer's ``weight`` is
    then the original inside the block; use the block for no-grad decoding only.

    A bitsandbytes 4-bit layer (QLoRA) multiplies with its weight dequantized once for the block (plus ΔW when LoRA
    adapts it; packed when ``pack_rows`` is given), through a plain matmul that replaces its forward; its 4-bit
    data is not touched.

    Each LoRA layer calls its base layer directly inside the block (what PEFT's forward does with the adapter
    disabled, without its Python on every call).

    The merged matrices are new tensors: the original weights are only set aside and put back on exit
    (even after an exception), so training never sees a merged or cast weight. No-op for models without
    LoRA or 4-bit layers when ``dtype`` is None.
    """
    layers = _mergeable_lora_layers(model)
    merged_bases = {id(module.base_layer) for module, _ in layers or []}
    quantized = [m for m in model.modules() if _is_4bit(m) and id(m) not in merged_bases]  # 4-bit, no LoRA
    if layers is None and dtype is None and not quantized:
        yield False
        return
    saved = []  # (module, parameter name, original Parameter)
    copies: dict[int, torch.nn.Parameter] = {}  # id(original) -> its stand-in, so tied weights stay tied

    def stand_in(module: torch.nn.Module, name: str, value: torch.Tensor) -> None:
        original = module._parameters[name]
        saved.append((module, name, original))
        if id(original) not in copies:
            cast = value if dtype is None else value.to(dtype)
            copies[id(original)] = torch.nn.Parameter(cast, requires_grad=False)
        module._parameters[name] = copies[id(original)]

    packed_bases: list[torch.nn.Module] = []  # base layers whose forward multiplies with a packed W + ΔW
    bypassed: list[torch.nn.Module] = []  # LoRA layers whose forward is their base layer's call
    try:
        with torch.no_grad():
            if dtype is not None:  # first, so a packed base layer picks up its bias's stand-in
                for module in model.modules():
                    for name, param in list(module._parameters.items()):
                        is_merged = id(module) in merged_bases and name == "weight"
                        if param is not None and param.is_floating_point() and not is_merged:
                            stand_in(module, name, param.detach())
            for module, active in layers or []:
                base = module.base_layer
                weight = _dequantized(base) if _is_4bit(base) else base.weight
                merged = weight + sum(module.get_delta_weight(a) for a in active)
                merged = merged if dtype is None else merged.to(dtype)
                if pack_rows is not None and _install_packed(base, merged, pack_rows):
                    packed_bases.append(base)
                elif _is_4bit(base):  # its forward reads the packed 4-bit data: give it a plain matmul
                    _install_plain(base, merged)
                    packed_bases.append(base)
                else:
                    stand_in(base, "weight", merged)
                del weight, merged  # packed: the oneDNN copy is the only one kept
            for base in quantized:  # 4-bit layers without LoRA: dequantized once as well
                weight = _dequantized(base)
                weight = weight if dtype is None else weight.to(dtype)
                if not (pack_rows is not None and _install_packed(base, weight, pack_rows)):
                    _install_plain(base, weight)
                packed_bases.append(base)
                del weight
        # With its adapter disabled, a LoRA layer's forward only calls its base layer: call the base directly and
        # spare PEFT's Python on every decode step (the packed matmul itself, else the base's __call__, so that a
        # forward packed later by packed_linears is used too).
        for module, _ in layers or []:
            if "forward" not in vars(module):  # (one already replaced by someone else is left alone)
                base = module.base_layer
                module.forward = vars(base).get("forward", base.__call__)
                bypassed.append(module)
        adapter_off = model.disable_adapter() if layers is not None else contextlib.nullcontext()
        with adapter_off:  # the LoRA branch is already inside W + ΔW
            yield layers is not None
    finally:
        for module in bypassed:
            vars(module).pop("forward", None)
        for base in packed_bases:
            vars(base).pop("forward", None)
        for module, name, original in reversed(saved):
            module._parameters[name] = original


def _is_4bit(module: torch.nn.Module) -> bool:
    """A bitsandbytes 4-bit linear layer: its own weight (not a LoRA wrapper's ``weight`` property, which is its
    base layer's) is packed NF4/FP4 data with a ``quant_state``."""
    return getattr(module._parameters.get("weight"), "quant_state", None) is not None


def _dequantized(module: torch.nn.Module) -> torch.Tensor:
    """A bitsandbytes 4-bit layer's weight as a float matrix (out, in) in the layer's compute dtype: what its
    forward multiplies by after dequantizing, here once instead of on every call."""
    import bitsandbytes.functional as bnb_functional

    data, state = module.weight.data, module.weight.quant_state
    if getattr(state, "packing_format_for_cpu", False):
        data, state = _unpacked_for_cpu(data, state)
    matrix = bnb_functional.dequantize_4bit(data, state)
    return matrix.to(getattr(module, "compute_dtype", None) or torch.float32)


def _unpacked_for_cpu(data: torch.Tensor, state: Any) -> tuple[torch.Tensor, Any]:
    """A 4-bit weight that bitsandbytes repacked for its AVX512-BF16 kernel, back in the layout ``dequantize_4bit``
    reads: the layer's data and state are left as they are (a copy of the state is changed).

    bitsandbytes 0.50 repacks a layer's weight the first time it runs in eval mode without gradients on a CPU with
    AVX512-BF16: the nibbles reordered, the block scales (``absmax``) un-nested to bf16 and transposed to (K/bs, N).
    Its own inverse (``_convert_weight_packed_for_cpu_inverse``) restores the nibbles; the scales are taken as the
    kernel uses them (bf16, exact), not quantized again, so the matrix is the one the layer multiplies by."""
    from bitsandbytes.functional import _convert_weight_packed_for_cpu_inverse

    state = copy.copy(state)
    state.original_nested = (
        False  # keep the kernel's bf16 scales as they are (the inverse would re-quantize them)
    )
    data, state = _convert_weight_packed_for_cpu_inverse(data, state)
    state.absmax = state.absmax.T.reshape(-1).float()  # (K/bs, N) -> (N * K/bs,): the blocks in row order
    return data, state


def _plain_linear_forward(weight: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    out = torch.nn.functional.linear(
        x.to(weight.dtype), weight, None if bias is None else bias.to(weight.dtype)
    )
    return out.to(x.dtype)


def _install_plain(module: torch.nn.Module, weight: torch.Tensor) -> None:
    """``module.forward`` becomes ``x @ weightᵀ + module.bias`` (an instance attribute: popping it restores the
    class's forward)."""
    module.forward = functools.partial(_plain_linear_forward, weight, module.bias)


def _packed_linear_forward(packed: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    if x.dtype == packed.dtype and (bias is None or bias.dtype == packed.dtype):
        return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")
    # oneDNN multiplies one dtype: in the weight's, as bitsandbytes' 4-bit forward does in its compute dtype (a bf16
    # model whose 4-bit layers compute in fp32: Unsloth's CPU loader on a CPU with AVX512-BF16), back in x's
    out = torch.ops.mkldnn._linear_pointwise(
        x.to(packed.dtype), packed, None if bias is None else bias.to(packed.dtype), "none", [], ""
    )
    return out.to(x.dtype)


def _install_packed(module: torch.nn.Module, weight: torch.Tensor, rows: int) -> bool:
    """``module.forward`` becomes ``x @ weightᵀ + module.bias`` with a oneDNN copy of ``weight`` reordered for
    ``rows`` rows (an instance attribute: popping it restores the class's forward). False where oneDNN is
    missing or refuses the weight; the module is then unchanged."""
    if not (
        torch.backends.mkldnn.is_available()
        and weight.device.type == "cpu"
        and weight.dtype in (torch.float32, torch.bfloat16)
    ):
        return False
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), max(rows, 1))
    except RuntimeError:
        return False
    module.forward = functools.partial(_packed_linear_forward, packed, module.bias)
    return True


def _can_pack(module: torch.nn.Module) -> bool:
    weight = getattr(module, "weight", None)
    return (
        type(module) is torch.nn.Linear  # subclasses (quantized, LoRA wrappers) keep their own forward
        and "forward" not in vars(module)  # already replaced by someone else: leave it
        and isinstance(weight, torch.Tensor)
    )


@contextlib.contextmanager
def packed_linears(model: torch.nn.Module, rows: int) -> Iterator[int]:
    """Inside the block, every plain CPU ``nn.Linear`` multiplies with a oneDNN copy of its weight, reordered
    once for ``rows`` input rows (any number of rows still works); yields how many layers do.

    For decoding only: the copies carry no gradient, so the block does nothing while gradients are enabled.
    Enter it with the sampling weights in place (inside ``merged_lora``): a weight changed inside the block is
    not seen. Outside the block each layer's ``forward`` is its class's again and the copies are freed. Where
    this build of PyTorch has no oneDNN, or oneDNN refuses a layer, that layer keeps its own forward; LoRA
    wrappers keep theirs and reach their base layer's, which is packed.
    """
    if torch.is_grad_enabled() or not torch.backends.mkldnn.is_available():
        yield 0
        return
    replaced = []
    try:
        for name, module in model.named_modules():
            if ".lora_" in f".{name}" or not _can_pack(module):  # a LoRA adapter's own A/B: unused here
                continue
            if _install_packed(module, module.weight, rows):
                replaced.append(module)
        yield len(replaced)
    finally:
        for module in replaced:
            vars(module).pop("forward", None)


def warp_logits(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float | None = None,
) -> torch.Tensor:
    """``(B, V)`` logits -> ``(B, V)`` logits with filtered tokens at ``-inf`` (transformers' warpers)."""
    if temperature != 1.0:
        logits = logits / temperature
    if top_k and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, sorted_idx = torch.sort(logits, descending=False)  # (B, V)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)  # (B, V)
        remove = cumulative <= (1 - top_p)
        remove[..., -1:] = False  # always keep the most likely token
        logits = logits.masked_fill(remove.scatter(-1, sorted_idx, remove), float("-inf"))
    if min_p is not None and min_p > 0:
        probs = logits.softmax(-1)  # (B, V)
        threshold = min_p * probs.max(dim=-1, keepdim=True).values  # (B, 1)
        logits = logits.masked_fill(probs < threshold, float("-inf"))
    return logits


def sample_next_token(logits: torch.Tensor, uniform: torch.Tensor | None = None, **warp) -> torch.Tensor:
    """One token per row from ``softmax(warp_logits(logits))``: ``(B, V) -> (B,)``. ``uniform``: the (B, 1)
    float64 numbers in [0, 1) that pick the tokens; drawn here (``torch.rand``) when not given.

    ``top_k=1`` (greedy decoding) where every row has one finite maximum: that token is the only one left, and
    the inverse CDF picks it whatever the number, so it is returned without the (B, V) softmax and float64 sum (the
    number is still drawn, so the random stream is the same either way). Ties go the general way."""
    if warp.get("top_k") == 1:
        tempered = logits.float() / warp.get("temperature", 1.0)  # (B, V) what top-k compares
        best = tempered.max(dim=-1, keepdim=True).values  # (B, 1)
        if bool(torch.isfinite(best).all() and (tempered == best).sum(-1).eq(1).all()):
            if uniform is None:
                torch.rand(logits.size(0), 1, device=logits.device, dtype=torch.float64)  # the same stream
            return tempered.argmax(dim=-1)  # (B,)
    probs = warp_logits(logits.float(), **warp).softmax(-1)  # (B, V)
    # float64: a float32 running sum over a 49k vocabulary rounds each token's share to float32 steps near 1
    # (per-token total variation from softmax ~2e-4 on SmolLM2); in float64 the shares are exact to ~1e-12.
    cdf = probs.double().cumsum(dim=-1)  # (B, V)
    if uniform is None:
        uniform = torch.rand(probs.size(0), 1, device=probs.device, dtype=torch.float64)  # (B, 1)
    u = uniform * cdf[:, -1:]  # (B, 1) [0, mass)
    # Token i is picked when cdf[i-1] <= u < cdf[i]: probability p_i; a token with p_i = 0 never is.
    return torch.searchsorted(cdf, u, right=True).squeeze(1).clamp(max=probs.size(-1) - 1)  # (B,)


def context_length(model) -> int | None:
    """The longest sequence the model was built for (``config.max_position_embeddings``), or None if unknown."""
    value = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def check_fits_context(
    model, prompt_tokens: int, max_new_tokens: int, *, setting: str = "max_completion_length"
) -> None:
    """Refuse, before any memory is allocated for it, a prompt (``prompt_tokens``, the longest of the batch)
    plus ``max_new_tokens`` that does not fit the model's context; the message names ``setting``.
    Simplification: positions beyond ``max_position_embeddings`` are refused even for models whose position
    encoding could extrapolate (what they compute there is untrained)."""
    context = context_length(model)
    if context is None:
        return
    if prompt_tokens >= context:
        raise ValueError(
            f"prompt longer than the context: {prompt_tokens} tokens, and the model reads at most {context} "
            "(max_position_embeddings). Shorten the prompt (or filter long rows out of the dataset)."
        )
    if prompt_tokens + max_new_tokens > context:
        raise ValueError(
            f"{setting}={max_new_tokens} plus a {prompt_tokens}-token prompt is longer than the model's context "
            f"({context} tokens, max_position_embeddings): set {setting} to at most {context - prompt_tokens}, "
            "or shorten the prompts."
        )


def returned_cache(output: Any, cache: Any) -> Any:
    """The cache to pass to the next forward: the one the model returned, else ``cache``.

    A transformers model fills the ``DynamicCache`` it was given and returns that same object. Unsloth's patched
    forwards on a GPU (``unsloth/models/llama.py``) read the cache as a tuple of ``(K, V)`` per layer, treat an
    empty ``DynamicCache`` as none, and return a *new* tuple: a sampler that keeps only its own cache object
    then decodes with no past at all (the H200 run of 2026-12-04, docs/gpu_results.md). Taking what the model
    returns is the contract that holds for both."""
    returned = getattr(output, "past_key_values", None)
    return cache if returned is None else returned


def repeat_cache(cache: Any, repeats: int) -> Any:
    """Each batch row of ``cache`` repeated ``repeats`` times in place (row b -> rows b*G ... b*G+G-1): a
    transformers ``Cache`` repeats itself; a tuple of per-layer ``(K, V)`` of shape (B, H, T, D) is rebuilt."""
    if hasattr(cache, "batch_repeat_interleave"):
        cache.batch_repeat_interleave(repeats)
        return cache
    return tuple(
        tuple(t.repeat_interleave(repeats, dim=0) for t in layer) for layer in cache
    )  # (B*G, H, T, D)


def select_cache_rows(cache: Any, rows: torch.Tensor) -> Any:
    """Only the batch rows ``rows`` (a (K,) index) of ``cache`` kept, in that order: a transformers ``Cache``
    selects in place; a tuple of per-layer ``(K, V)`` of shape (B, H, T, D) is rebuilt."""
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(rows)
        return cache
    return tuple(tuple(t[rows] for t in layer) for layer in cache)  # (K, H, T, D)


@contextlib.contextmanager
def _no_checkpointing(model: torch.nn.Module) -> Iterator[None]:
    """Inside the block no layer of ``model`` checkpoints: transformers' checkpointing layers (after
    ``gradient_checkpointing_enable``, in training mode) set ``use_cache=False`` and drop the cache a decode
    step reads. Put back on exit."""
    checkpointing = [m for m in model.modules() if getattr(m, "gradient_checkpointing", False) is True]
    for module in checkpointing:
        module.gradient_checkpointing = False
    try:
        yield
    finally:
        for module in checkpointing:
            module.gradient_checkpointing = True


@torch.no_grad()
def sample_completions(
    model: torch.nn.Module,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    *,
    num_generations: int,
    max_new_tokens: int,
    eos_token_ids: list[int],
    pad_token_id: int,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float | None = None,
    repetition_penalty: float = 1.0,
) -> torch.Tensor:
    """Sample ``num_generations`` completions for each of the ``B`` (distinct, left-padded) prompts.

    Returns ``(B * G, T)`` token ids, the G completions of prompt b in rows ``b*G … b*G+G-1``; after a
    row's EOS come ``pad_token_id``; ``T <= max_new_tokens`` (the loop stops once every row has ended).
    """
    from transformers import DynamicCache

    check_fits_context(model, prompt_ids.size(1), max_new_tokens)
    # Every linear multiplies with a oneDNN-packed copy of its weight while decoding (CPU); attention reads each
    # key/value head once (core.attention); a layer that checkpoints for training would drop the key/value cache,
    # so none does here.
    rows = prompt_ids.size(0) * num_generations
    with packed_linears(model, rows=rows), grouped_query_attention(model), _no_checkpointing(model):
        G = num_generations
        cache = DynamicCache(config=getattr(model, "config", None))
        position_ids = (prompt_mask.long().cumsum(-1) - 1).clamp(min=0)  # (B, P) left padding starts at 0
        # Prefill each distinct prompt once; keep only the logits of its last position.
        out = model(
            input_ids=prompt_ids,
            attention_mask=prompt_mask,
            position_ids=position_ids,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        logits = out.logits[:, -1, :]  # (B, V)
        cache = repeat_cache(returned_cache(out, cache), G)  # (B*G) rows now share each prompt's keys/values
        logits = logits.repeat_interleave(G, dim=0)  # (N, V)
        attention_mask = prompt_mask.repeat_interleave(G, dim=0)  # (N, P)
        next_position = position_ids[:, -1:].repeat_interleave(G, dim=0) + 1  # (N, 1)
        history = prompt_ids.repeat_interleave(G, dim=0) if repetition_penalty != 1.0 else None  # (N, P)

        eos = torch.tensor(eos_token_ids, device=prompt_ids.device)
        N = logits.size(0)
        finished = torch.zeros(N, dtype=torch.bool, device=prompt_ids.device)  # (N,)
        live = torch.arange(N, device=prompt_ids.device)  # (L,) the rows still decoding, L <= N
        tokens = []
        for step in range(max_new_tokens):
            if history is not None:
                from transformers import RepetitionPenaltyLogitsProcessor

                logits = RepetitionPenaltyLogitsProcessor(repetition_penalty)(history, logits.float())
            # One number for every row, ended or not, so a row's draws do not depend on when the others end.
            uniform = torch.rand(N, 1, device=prompt_ids.device, dtype=torch.float64)  # (N, 1)
            token = torch.full((N,), pad_token_id, dtype=torch.long, device=prompt_ids.device)  # (N,)
            token[live] = sample_next_token(
                logits, uniform[live], temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p
            )  # rows that already ended only pad
            tokens.append(token)
            finished |= torch.isin(token, eos)
            if finished.all() or step == max_new_tokens - 1:
                break
            # A row that ended leaves the batch: the next forwards run on the live rows only.
            keep = ~finished[live]  # (L,)
            if not keep.all():
                kept = keep.nonzero().squeeze(1)  # (L',)
                live, cache = live[kept], select_cache_rows(cache, kept)
                attention_mask, next_position = attention_mask[kept], next_position[kept]
                history = None if history is None else history[kept]
            if history is not None:
                history = torch.cat([history, token[live, None]], dim=1)
            attention_mask = torch.cat(
                [attention_mask, attention_mask.new_ones(attention_mask.size(0), 1)], dim=1
            )
            out = model(
                input_ids=token[live, None],
                attention_mask=attention_mask,
                position_ids=next_position,
                past_key_values=cache,
                use_cache=True,
            )
            logits = out.logits[:, -1, :]  # (L, V)
            cache = returned_cache(out, cache)
            next_position = next_position + 1
        return torch.stack(tokens, dim=1)  # (N, T)


def stop_token_ids(model, tokenizer) -> list[int]:
    """Every id that ends a completion: the tokenizer's EOS plus the model's (e.g. an end-of-turn token)."""
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [] if ids is None else ([ids] if isinstance(ids, int) else list(ids))
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids = [tokenizer.eos_token_id, *ids]
    if not ids:
        raise ValueError("neither the tokenizer nor the model defines an EOS token; set tokenizer.eos_token.")
    return ids


def mask_after_eos(completion_ids, eos_token_ids, pad_token_id):
    """``(N, T)`` sampled ids -> ids padded after EOS, mask up to and including EOS ``(N, T)``, truncated ``(N,)``."""
    # The completion is every token up to and including the first EOS; what follows is padding.
    is_eos = torch.isin(completion_ids, torch.tensor(eos_token_ids, device=completion_ids.device))  # (N, T)
    has_eos = is_eos.any(dim=1)  # (N,)
    eos_idx = torch.where(
        has_eos, is_eos.int().argmax(dim=1), torch.full_like(has_eos, is_eos.size(1), dtype=torch.long)
    )
    positions = torch.arange(is_eos.size(1), device=completion_ids.device).expand_as(completion_ids)  # (N, T)
    completion_mask = (positions <= eos_idx.unsqueeze(1)).long()  # (N, T)
    lengths = completion_mask.sum(1)  # (N,)
    width = max(int(lengths.max()), 1)
    completion_ids = completion_ids[:, :width].masked_fill(completion_mask[:, :width] == 0, pad_token_id)
    completion_mask = completion_mask[:, :width]
    # Truncated = the last kept token is neither EOS nor padding (TRL's definition).
    stop_ids = torch.tensor([*eos_token_ids, pad_token_id], device=completion_ids.device)
    last = completion_ids.gather(1, (lengths - 1).clamp(min=0).unsqueeze(1)).squeeze(1)  # (N,)
    is_truncated = ~torch.isin(last, stop_ids) & (lengths > 0)  # (N,)
    return completion_ids, completion_mask, is_truncated
