"""GGUF file -> a plain, trainable, savable Hugging Face directory (cached).

transformers loads GGUF with ``from_pretrained(dir, gguf_file=...)`` and dequantises the weights,
but keeps a ``GgufHfQuantizer`` and ``config.quantization_config`` on the model, after which
``Trainer`` ("cannot perform fine-tuning on purely quantized models") and ``save_pretrained``
("not serializable") refuse it. The weights are plain tensors by then, so :func:`strip_gguf_quantizer`
removes that state; :func:`gguf_to_hf_dir` does it once per file and caches fp32 safetensors and
the tokenizer, so later loads read a normal directory in about a second.

:func:`check_gguf_header` walks a GGUF file's header (metadata and tensor table) before any reader does and
refuses every count or length that cannot fit in the file: ``GGUFReader`` trusts them, and a 108-byte file
claiming an array of 2^40 elements made it allocate without bound.
"""

from __future__ import annotations

import mmap
import os
import struct
from pathlib import Path
from typing import Any

from grpo_kit.models.cache import atomic_build, conversion_dir
from grpo_kit.models.tokenizer import fix_token_ids

# GGUFValueType (gguf.constants): the byte size of each fixed-size type; 8 = string, 9 = array.
_GGUF_SCALAR_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_GGUF_STRING, _GGUF_ARRAY = 8, 9
_GGUF_MAX_DIMS = 8  # ggml tensors have at most 4 dimensions; llama.cpp's reader allows up to 8


class _Header:
    """A bounds-checked cursor over a GGUF file's bytes (little- or big-endian, like GGUFReader)."""

    def __init__(self, data, path: Path):
        self.data, self.path, self.at, self.order = data, path, 0, "<"

    def fail(self, what: str) -> ValueError:
        return ValueError(
            f"{self.path} is not a valid GGUF file: {what} (at byte {self.at} of {len(self.data)}); it is "
            "truncated or corrupt. Download or export it again (grpo_kit.export.save_gguf writes valid files)."
        )

    def take(self, size: int, what: str) -> int:
        if size < 0 or self.at + size > len(self.data):
            raise self.fail(f"{what} needs {size} bytes and only {len(self.data) - self.at} are left")
        start, self.at = self.at, self.at + size
        return start

    def u32(self, what: str) -> int:
        return struct.unpack_from(self.order + "I", self.data, self.take(4, what))[0]

    def u64(self, what: str) -> int:
        return struct.unpack_from(self.order + "Q", self.data, self.take(8, what))[0]

    def string(self, what: str) -> None:
        self.take(self.u64(f"{what} length"), what)

    def value(self, kind: int, what: str, depth: int = 0) -> None:
        if kind in _GGUF_SCALAR_SIZES:
            self.take(_GGUF_SCALAR_SIZES[kind], what)
        elif kind == _GGUF_STRING:
            self.string(what)
        elif kind == _GGUF_ARRAY and depth < 2:
            item_kind, count = self.u32(f"{what} element type"), self.u64(f"{what} count")
            smallest = _GGUF_SCALAR_SIZES.get(item_kind, 8 if item_kind == _GGUF_STRING else 12)
            if count * smallest > len(self.data) - self.at:
                raise self.fail(f"{what} claims {count} elements, more than the file can hold")
            if item_kind in _GGUF_SCALAR_SIZES:
                self.take(count * smallest, what)
            else:
                for _ in range(count):
                    self.value(item_kind, what, depth + 1)
        else:
            raise self.fail(f"{what} has an unknown value type {kind}")


def check_gguf_header(path: str | os.PathLike) -> None:
    """Refuse a GGUF file whose header counts or lengths do not fit in the file (``ValueError`` naming it).

    Reads the header once, linearly: every element consumes at least one byte, so the walk is bounded by the
    file's size. Simplification: the tensor data itself is not checked (its offsets are checked against the
    file by the reader that maps it).
    """
    path = Path(path)
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < 24:
            raise _Header(b"", path).fail(f"{size} bytes is shorter than a GGUF header (24)")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            header = _Header(data, path)
            header.take(4, "magic")
            version = header.u32("version")
            if version & 0xFFFF == 0:  # written on a big-endian machine
                header.order, header.at = ">", 4
                version = header.u32("version")
            if version not in (2, 3):
                raise header.fail(f"version {version} (readers support 2 and 3)")
            tensors, entries = header.u64("tensor count"), header.u64("metadata count")
            if entries * 12 > size or tensors * 28 > size:  # the smallest entry / tensor record
                raise header.fail(
                    f"{entries} metadata entries and {tensors} tensors cannot fit in {size} bytes"
                )
            for i in range(entries):
                header.string(f"metadata key {i}")
                header.value(header.u32(f"metadata {i} type"), f"metadata value {i}")
            for i in range(tensors):
                header.string(f"tensor {i} name")
                dims = header.u32(f"tensor {i} dimension count")
                if dims > _GGUF_MAX_DIMS:
                    raise header.fail(f"tensor {i} claims {dims} dimensions (at most {_GGUF_MAX_DIMS})")
                header.take(8 * dims + 4 + 8, f"tensor {i} shape, type and offset")


def _gguf_special_token_ids(gguf_path: Path) -> dict[str, int]:
    """bos/eos/pad/unk ids from the GGUF metadata (``tokenizer.ggml.*_token_id``)."""
    from gguf import GGUFReader

    check_gguf_header(gguf_path)
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
    gguf_path = Path(gguf_path)
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {gguf_path}")
    check_gguf_header(gguf_path)  # before transformers' GGUF reader trusts its counts

    def build(tmp: Path) -> None:
        import torch  # only when converting: a cached entry is found without importing torch or transformers
        from transformers import AutoModelForCausalLM, AutoTokenizer

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
