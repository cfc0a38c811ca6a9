"""Hugging Face exports: the LoRA adapter alone, or the base model with the adapter merged in (16-bit).

Both write the tokenizer (and so its chat template) beside the weights — the course's
``merge_and_unload`` recipe forgot it, and a model directory without its tokenizer cannot be chatted
with, served or converted to GGUF. Both reload what they wrote and compare greedy tokens with the
model in memory (:mod:`grpo_kit.export.verify`). A model with NaN/inf weights is refused before anything is
written (:class:`~grpo_kit.artifacts.checkpoint.NonFiniteWeightsError`).

The target folder is empty before the export (a folder holding someone else's files is refused unless
``overwrite=True``) and verification also checks that it holds exactly the files written
(:mod:`grpo_kit.export.folder`).

The training model is never changed: merging happens on a deep copy (``merge_and_unload`` on the
model itself would fold the adapter into the base weights and leave nothing to keep training).

A QLoRA model (a bitsandbytes 4-bit base under the adapter) is merged onto the **16-bit base**, not into the
4-bit weights: the base is read again in fp32 from the folder it was loaded from (``config._name_or_path``),
the trained adapter's weights are put on it, and that is merged and saved (what QLoRA's authors and Unsloth
do; merging into NF4 would round the merged weights to 4 bits, and a 4-bit base cannot be cast to 16 bits).
Verification then compares the export with that fp32 base + adapter, the model the export is; how often its
greedy tokens agree with the 4-bit model's is recorded beside it (``details["greedy_vs_quantized"]``).
"""

from __future__ import annotations

import copy
import os
from typing import Any

from grpo_kit.artifacts.checkpoint import check_weights_finite
from grpo_kit.export.folder import check_export_files, prepare_export_dir, staged_export, write_manifest
from grpo_kit.export.report import ExportReport, dir_size
from grpo_kit.export.verify import TIE_TOLERANCE, compare_greedy, prompt_ids
from grpo_kit.models.lora import is_peft_model

#: ``dtype`` names save_merged accepts -> torch dtype name ("16bit" is resolved by :func:`resolve_16bit`).
DTYPE_NAMES = {
    "16bit": "16bit",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "fp32": "float32",
    "float32": "float32",
    "32bit": "float32",
}


def resolve_16bit() -> str:
    """What ``dtype="16bit"`` means on this machine.

    bfloat16 has float32's exponent range, so merged weights and activations cannot overflow, and it
    loads and runs on any CPU with torch >= 2. The one place it is wrong is a CUDA GPU without native
    bf16 (compute capability < 8, e.g. a T4: ``torch.cuda.is_bf16_supported()`` says yes there through
    slow emulation), where float16 is what the GPU computes in — so float16 there, bfloat16 elsewhere.
    Pass ``dtype="fp16"`` or ``"bf16"`` to choose yourself.
    """
    from grpo_kit.support.hardware import detect_cuda_capability, supports_bf16

    capability = detect_cuda_capability()
    if capability is not None and not supports_bf16(capability):
        return "float16"
    return "bfloat16"


def _check_dtype(dtype: str) -> str:
    if not isinstance(dtype, str) or dtype.lower() not in DTYPE_NAMES:
        raise ValueError(
            f"dtype={dtype!r} is not an export precision; use one of {sorted(DTYPE_NAMES)} "
            '("16bit" picks bf16, or fp16 on GPUs without native bf16).'
        )
    name = DTYPE_NAMES[dtype.lower()]
    return resolve_16bit() if name == "16bit" else name


def _strip_quantizer_state(model: Any) -> None:
    """A model loaded from GGUF keeps transformers' GGUF quantizer state, which makes ``save_pretrained``
    write a ``quantization_config`` that llama.cpp's converter and ``from_pretrained`` then trip over."""
    if getattr(model, "hf_quantizer", None) is not None or hasattr(model.config, "quantization_config"):
        quant = getattr(model.config, "quantization_config", None)
        method = (
            quant.get("quant_method") if isinstance(quant, dict) else getattr(quant, "quant_method", None)
        )
        if str(method).lower().endswith("gguf"):
            from grpo_kit.models import strip_gguf_quantizer

            strip_gguf_quantizer(model)


def _is_quantized(model: Any) -> bool:
    """True when the model's base was loaded 4- or 8-bit by bitsandbytes."""
    base = model.get_base_model() if is_peft_model(model) else model
    return bool(getattr(base, "is_loaded_in_4bit", False) or getattr(base, "is_loaded_in_8bit", False))


def full_precision_twin(model: Any) -> Any:
    """For a model with a bitsandbytes-quantized base: the same model with its base read again in fp32 from
    the folder it was loaded from, and the adapter's trained weights (PEFT's state dict) on it, on CPU.
    Raises a ``ValueError`` naming the fix when that folder is gone."""
    import torch
    from transformers import AutoModelForCausalLM

    base = model.get_base_model() if is_peft_model(model) else model
    source = getattr(base.config, "_name_or_path", "")
    if not source or not os.path.isfile(os.path.join(source, "config.json")):
        raise ValueError(
            f"the 4-bit model's 16-bit base is needed to merge onto, and {source!r} is not a model folder; "
            "export from the run folder instead: `grpo-kit export RUN --base <the base model>`."
        )
    full = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32, local_files_only=True)
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):  # as load_model fixed them on the original
        setattr(full.config, name, getattr(base.config, name, None))
    full.generation_config = copy.deepcopy(base.generation_config)
    if not is_peft_model(model):
        return full
    from peft import get_peft_model, get_peft_model_state_dict, set_peft_model_state_dict

    name = model.active_adapter
    twin = get_peft_model(full, copy.deepcopy(model.peft_config[name]), adapter_name=name)
    state = {k: v.detach().to("cpu", torch.float32) for k, v in get_peft_model_state_dict(model).items()}
    set_peft_model_state_dict(twin, state, adapter_name=name)
    return twin


def save_adapter(
    model: Any, tokenizer: Any, out_dir: str | os.PathLike, *, verify: bool = True, overwrite: bool = False
) -> ExportReport:
    """Save the LoRA adapter (``adapter_model.safetensors`` + ``adapter_config.json``) and the tokenizer.

    ``out_dir`` must be empty, new, or a previous grpo-kit export; ``overwrite=True`` empties a folder holding
    other files first.

    Verification: the adapter files are loaded onto a clean copy of the base model
    (``PeftModel.from_pretrained``) and must give the same greedy tokens as ``model``.
    """
    if not is_peft_model(model):
        raise TypeError(
            f"save_adapter needs a peft model with a LoRA adapter, got {type(model).__name__}; "
            "for a fully fine-tuned model use save_merged (it saves the whole model)."
        )
    check_weights_finite(model, f"exporting the adapter to {out_dir}", trainable_only=False)
    out = prepare_export_dir(out_dir, overwrite=overwrite)
    with staged_export(out) as stage:  # a killed export leaves no folder that looks finished
        model.save_pretrained(stage)
        tokenizer.save_pretrained(stage)
        details: dict[str, Any] = {"files": sorted(write_manifest(stage, "adapter")["files"])}
    verified = False
    if verify:
        from peft import PeftModel

        base = copy.deepcopy(model).unload()  # the base weights without any adapter layers
        reloaded = PeftModel.from_pretrained(base, out)
        ids = prompt_ids(tokenizer)
        was_training = model.training
        model.eval()
        reloaded.eval()
        try:
            comparison = compare_greedy(model, reloaded, ids, tie_tolerance=TIE_TOLERANCE["float32"])
        finally:
            model.train(was_training)
        details["greedy"] = comparison.as_dict()
        details["file_problems"] = check_export_files(out)
        verified = comparison.passed and not details["file_problems"]
    return ExportReport("adapter", out, dir_size(out), verified, details)


def save_merged(
    model: Any,
    tokenizer: Any,
    out_dir: str | os.PathLike,
    dtype: str = "16bit",
    *,
    verify: bool = True,
    overwrite: bool = False,
) -> ExportReport:
    """Merge the LoRA adapter into a copy of the base model and save it with its tokenizer.

    dtype: "16bit" (bf16, or fp16 on a CUDA GPU without native bf16: :func:`resolve_16bit`), "bf16",
        "fp16" or "fp32". A model without an adapter is saved as it is, in ``dtype``.
    overwrite: empty ``out_dir`` first when it holds files grpo-kit did not export (else they are refused).

    Verification: the saved directory is reloaded with ``AutoModelForCausalLM.from_pretrained`` (in
    float32, as it would be loaded on a CPU for chatting) and must give the same greedy tokens as
    ``model``, up to near-ties for 16-bit rounding (:mod:`grpo_kit.export.verify`). A QLoRA ``model`` (4-bit
    base) is merged onto its 16-bit base instead (:func:`full_precision_twin`, module doc) and verified
    against that base + adapter.
    """
    import torch

    torch_dtype = getattr(torch, _check_dtype(dtype))
    check_weights_finite(model, f"exporting the merged model to {out_dir}", trainable_only=False)
    was_training = model.training
    quantized = model if _is_quantized(model) else None
    if quantized is not None:  # merge onto the 16-bit base, never into the 4-bit weights (module doc)
        model = full_precision_twin(quantized)
    merged = copy.deepcopy(model)
    if is_peft_model(merged):
        merged = merged.merge_and_unload()
    _strip_quantizer_state(merged)
    merged = merged.to(torch_dtype)
    merged.config.dtype = torch_dtype
    # fp16 tops out at 65504: a weight beyond it becomes inf in the cast.
    check_weights_finite(merged, f"exporting the merged model to {out_dir} in {dtype}", trainable_only=False)
    out = prepare_export_dir(out_dir, overwrite=overwrite)
    with staged_export(out) as stage:  # a killed export leaves no folder that looks finished
        merged.save_pretrained(stage, safe_serialization=True)
        tokenizer.save_pretrained(stage)
        del merged
        details: dict[str, Any] = {
            "dtype": str(torch_dtype).removeprefix("torch."),
            "files": sorted(write_manifest(stage, "merged")["files"]),
        }
    verified = False
    if verify:
        from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

        from grpo_kit.models.vlm import is_vlm_folder

        # a vision-language model (grpo_kit.models.vlm) reloads as one; compared on the text prompt below
        auto = AutoModelForImageTextToText if is_vlm_folder(out) else AutoModelForCausalLM
        reloaded = auto.from_pretrained(out, dtype=torch.float32)
        reloaded.to(next(model.parameters()).device)
        ids = prompt_ids(tokenizer)
        model.eval()
        try:
            tol = TIE_TOLERANCE["float32" if torch_dtype == torch.float32 else "16bit"]
            comparison = compare_greedy(model, reloaded, ids, tie_tolerance=tol)
            if quantized is not None:
                quantized.eval()
                details["merged_onto"] = "the 16-bit base (fp32, re-read), not the 4-bit weights"
                details["greedy_vs_quantized"] = compare_greedy(
                    quantized, reloaded, ids, tie_tolerance=tol
                ).as_dict()
        finally:
            model.train(was_training)
            if quantized is not None:
                quantized.train(was_training)
        details["greedy"] = comparison.as_dict()
        details["file_problems"] = check_export_files(out)
        verified = comparison.passed and not details["file_problems"]
    return ExportReport("merged", out, dir_size(out), verified, details)
