"""GGUF file -> a plain, trainable, savable Hugging Face directory (cached).

transformers loads GGUF with ``from_pretrained(dir, gguf_file=...)`` and dequantises the weights,
but keeps a ``GgufHfQuantizer`` and ``config.quantization_config`` on the model, after which
``Trainer`` ("cannot perform fine-tuning on purely quantized models") and ``save_pretrained``
("not serializable") refuse it. The weights are plain tensors by then, so :func:`strip_gguf_quantizer`
removes that state; :func:`gguf_to_hf_dir` does it once per file and caches fp32 safetensors and
the tokenizer, so later loads read a normal directory in about a second.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from grpo_kit.models.cache import atomic_build, conversion_dir
from grpo_kit.models.tokenizer import fix_token_ids


def _gguf_special_token_ids(gguf_path: Path) -> dict[str, int]:
    """bos/eos/pad/unk ids from the GGUF metadata (``tokenizer.ggml.*_token_id``)."""
    from gguf import GGUFReader

    reader = GGUFReader(str(gguf_path))
    ids = {}
    for name, key in (
        ("bos", "bos_token_id"),
        ("eos", "eos_token_id"),
        ("pad", "padding_token_id"),
        ("unk", "unknown_token_id"),
    ):
        field = reader.fields.get(f"tokenizer.ggml.{key}")
        if field is not None:
            ids[name] = int(field.contents())
    return ids


def _set_special_tokens(tokenizer, ids: dict[str, int]):
    """Apply the GGUF's own special-token ids.

    transformers 5.17's GGUF tokenizer converter sets ``eos_token`` from the *bos* id
    (``integrations/ggml.py``), which would make generation stop on ``<|im_start|>``.
    """
    for name in ("bos", "eos", "pad", "unk"):
        if ids.get(name) is not None and 0 <= ids[name] < len(tokenizer):
            setattr(tokenizer, f"{name}_token", tokenizer.convert_ids_to_tokens(ids[name]))
    # Byte-level BPE: cleaning up spaces before punctuation would change decoded text.
    tokenizer.clean_up_tokenization_spaces = False
    return tokenizer


def _tokenizer_from_gguf_public(gguf_path: Path):
    """``AutoTokenizer.from_pretrained(gguf_file=...)``: the public path; it parses the GGUF three times."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
    return _set_special_tokens(tokenizer, _gguf_special_token_ids(gguf_path))


def _tokenizer_from_gguf(gguf_path: Path):
    """The tokenizer embedded in a GGUF file, with its special tokens set right.

    The same two transformers functions that ``AutoTokenizer.from_pretrained(gguf_file=...)`` runs
    (``load_gguf_checkpoint`` + ``convert_gguf_tokenizer``), called once: parsing SmolLM2's 49k-token
    vocabulary out of the GGUF is the slow part (~10 s), and the public path does it three times.
    """
    try:
        from transformers import PreTrainedTokenizerFast
        from transformers.integrations.ggml import convert_gguf_tokenizer
        from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    except ImportError:  # another transformers layout: the public path gives the same tokenizer
        return _tokenizer_from_gguf_public(gguf_path)
    parsed = load_gguf_checkpoint(str(gguf_path), return_tensors=False)
    backend, extra = convert_gguf_tokenizer(parsed["config"]["model_type"], parsed["tokenizer"])
    options = {**parsed["tokenizer_config"], **extra}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, **options)
    ids = {name: options.get(f"{name}_token_id") for name in ("bos", "eos", "pad", "unk")}
    return _set_special_tokens(tokenizer, ids)


def _tokenizer_entry(gguf_path: Path) -> Path:
    return atomic_build(
        conversion_dir(gguf_path, "gguf-tokenizers"),
        lambda tmp: _tokenizer_from_gguf(gguf_path).save_pretrained(tmp),
    )


def gguf_tokenizer_dir(gguf_path: str | os.PathLike) -> Path:
    """The GGUF file's tokenizer as a normal HF tokenizer directory (extracted once, then cached).

    Extraction parses the whole vocabulary from the GGUF (~30 s for SmolLM2's 49k tokens);
    loading the cached directory takes well under a second.
    """
    gguf_path = Path(gguf_path)
    full = conversion_dir(gguf_path, "gguf-models")
    if full.is_dir():  # the full conversion already holds the same tokenizer
        return full
    return _tokenizer_entry(gguf_path)


def strip_gguf_quantizer(model) -> Any:
    """Make a GGUF-loaded (already dequantised) model trainable and savable, in place; returns it."""
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    for attr in ("hf_quantizer", "quantization_method"):
        if hasattr(model, attr):
            delattr(model, attr)
    model.is_quantized = False
    return model


def gguf_to_hf_dir(gguf_path: str | os.PathLike) -> Path:
    """Dequantise a GGUF file to fp32 safetensors + tokenizer in a cached HF directory; return it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {gguf_path}")

    def build(tmp: Path) -> None:
        # Through the tokenizer's own cache entry (and its lock): a parallel worker that is
        # extracting the same tokenizer right now is waited for, not duplicated.
        tokenizer = AutoTokenizer.from_pretrained(str(_tokenizer_entry(gguf_path)))
        model = AutoModelForCausalLM.from_pretrained(
            str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32
        )
        strip_gguf_quantizer(model)
        fix_token_ids(model, tokenizer)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    try:
        return atomic_build(conversion_dir(gguf_path, "gguf-models"), build)
    except Exception as error:  # the gguf reader and transformers raise many kinds on a damaged file
        raise ValueError(
            f"{gguf_path} could not be read as a GGUF model ({type(error).__name__}: {error}); the file is "
            "truncated, corrupt or not a model llama.cpp/transformers support. Download or export it again."
        ) from error
