"""Grouped-query attention for decoding, without copying the key/value heads.

SmolLM2-135M has 9 query heads and 3 key/value heads. transformers' ``sdpa`` attention hands SDPA the grouped heads
directly (``enable_gqa=True``) only when there is no attention mask; with one (left-padded prompts: every batch the
sampler decodes) it first copies each key and value head 3 times (``repeat_kv``). At a decode step that copy is the
whole key/value cache, every layer, every token: with 8 rows and ~150 cached positions, ~165 MB written per token
(8 rows × 30 layers × keys and values × 9 heads × 150 positions × 64 × 4 bytes) for 0.4 MB of new keys and values.

Inside :func:`grouped_query_attention`, a model that attends through ``sdpa`` calls SDPA with ``enable_gqa=True``
and the mask instead. PyTorch's CPU kernel then reads each key/value head once for its group of query heads, and
returns the same numbers bit for bit (``tests/grpo_kit/test_attention.py`` checks the logits and the sampled
tokens; measured alone at a decode shape, 8 rows, 2 threads: 76 µs a layer against 163 µs). It is for decoding only:
in a training forward with a 4-D mask it is no faster here, and its gradients differ from ``repeat_kv``'s by float
rounding, so the log-prob pass keeps transformers' own path.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["GROUPED_SDPA", "grouped_query_attention"]

#: The name this attention is registered under in transformers' ``AttentionInterface`` (and its mask interface).
GROUPED_SDPA = "grpo_kit_grouped_sdpa"


def _grouped_sdpa_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' ``sdpa_attention_forward``, with the key/value heads left grouped when a mask is given.
    query (B, H, q, D), key/value (B, H_kv, k, D), attention_mask (B, 1, q, k) -> (B, q, H, D)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    if attention_mask is None or groups == 1 or kwargs.get("position_bias") is not None:
        return sdpa_attention_forward(
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            is_causal=is_causal,
            **kwargs,
        )
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, enable_gqa=True
    )  # (B, H, q, D); with a mask transformers' path passes is_causal=False too
    return out.transpose(1, 2).contiguous(), None


@functools.cache
def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(GROUPED_SDPA, _grouped_sdpa_forward)
    AttentionMaskInterface.register(GROUPED_SDPA, sdpa_mask)  # the same masks as "sdpa"


def _configs_on_sdpa(model: torch.nn.Module) -> list[Any]:
    """Every distinct config of ``model``'s modules (a VLM's text config too) that attends through ``sdpa``."""
    configs: dict[int, Any] = {}
    for module in model.modules():
        config = getattr(module, "config", None)
        if getattr(config, "_attn_implementation", None) == "sdpa":
            configs[id(config)] = config
    return list(configs.values())


@contextlib.contextmanager
def grouped_query_attention(model: torch.nn.Module) -> Iterator[int]:
    """Inside the block, every part of ``model`` that attends through transformers' ``sdpa`` does so without
    repeating its key/value heads (see the module docstring); yields how many configs were switched (0: the model
    uses another attention, and is left as it is). Each config's implementation is put back on exit, even after an
    exception, so a model saved afterwards records ``sdpa`` as before."""
    configs = _configs_on_sdpa(model)
    if not configs:
        yield 0
        return
    _register()
    try:
        for config in configs:
            config._attn_implementation = GROUPED_SDPA
        yield len(configs)
    finally:
        for config in configs:
            config._attn_implementation = "sdpa"
