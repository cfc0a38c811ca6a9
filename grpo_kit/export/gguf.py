"""GGUF export for llama.cpp / Ollama / LM Studio, verified by loading the file back.

Who writes the file:

* **Unsloth on a GPU** (a model loaded by ``FastLanguageModel``): its own ``save_pretrained_gguf``,
  which builds llama.cpp itself and knows every type in :data:`UNSLOTH_QUANT_TYPES`.
* **Everywhere else**: llama.cpp's own converter, ``convert_hf_to_gguf.py``, run in a subprocess with
  this Python. Where it comes from (a llama.cpp checkout, ``llama_cpp_dir=`` / ``$LLAMA_CPP_DIR``, or the
  pinned ``llama-cpp-python`` source archive, fetched once, sha256-checked and cached) is
  :mod:`grpo_kit.export.converter`'s job, as is finding ``llama-quantize``.

The converter writes f32, f16, bf16, q8_0 (and the ternary tq1_0/tq2_0) by itself. K-quants such as
q4_k_m need llama.cpp's compiled ``llama-quantize``: found on ``PATH`` or in
``<llama_cpp_dir>/build/bin``, the f16 file is quantised with it; otherwise the error says how to get it.

Tokenizer: a tokenizer that transformers rebuilt from a GGUF file (as the embedded SmolLM2 is) is a
byte-level BPE that transformers marks ``byte_fallback=True`` with a SentencePiece-style decoder. The
converter reads that as a SentencePiece ("llama") vocabulary, and llama.cpp would then tokenise every
prompt wrongly. The conversion therefore runs on a staging folder whose ``tokenizer.json`` says what the
tokenizer really is (byte-level BPE, no byte fallback, byte-level decoder) — the same token ids — and the
check below reads the vocabulary type back from the written file.

Verification: the file is loaded with ``transformers`` (``from_pretrained(dir, gguf_file=...)``), its
tokenizer must encode a chat prompt to the same ids as the source tokenizer, and its greedy tokens must
match the source model's: identical up to near-ties for f32/f16/bf16/q8_0 (:mod:`grpo_kit.export.verify`).
For lower-bit types the agreement is reported, not asserted. With ``llama-cpp-python`` installed the file
is also run by llama.cpp itself and its greedy tokens are reported.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from grpo_kit.export.converter import (  # noqa: F401  (some only re-exported: gguf was their home)
    LLAMA_CPP_PYTHON_SHA256,
    LLAMA_CPP_PYTHON_VERSION,
    _extract_converter,
    _tail,
    check_sha256,
    converter_cache_dir,
    download_converter,
    find_converter,
    find_llama_quantize,
)
from grpo_kit.export.report import ExportReport, dir_size
from grpo_kit.export.verify import TIE_TOLERANCE, compare_greedy, prompt_ids

#: Types convert_hf_to_gguf.py writes by itself.
CONVERTER_TYPES = ("f32", "f16", "bf16", "q8_0", "tq1_0", "tq2_0")
#: Types that need llama.cpp's compiled llama-quantize (applied to the f16 file).
QUANTIZE_TYPES = (
    "q2_k",
    "q3_k_s",
    "q3_k_m",
    "q3_k_l",
    "q4_0",
    "q4_1",
    "q4_k_s",
    "q4_k_m",
    "q5_0",
    "q5_1",
    "q5_k_s",
    "q5_k_m",
    "q6_k",
    "iq2_xxs",
    "iq2_xs",
    "iq3_xxs",
    "iq4_nl",
    "iq4_xs",
)
#: What Unsloth's save_pretrained_gguf accepts as quantization_method (its names).
UNSLOTH_QUANT_TYPES = (
    "not_quantized",
    "fast_quantized",
    "quantized",
    "f32",
    "f16",
    "bf16",
    "q8_0",
    "q4_k_m",
    "q5_k_m",
    "q2_k",
    "q3_k_l",
    "q3_k_m",
    "q3_k_s",
    "q4_0",
    "q4_1",
    "q4_k_s",
    "q4_k",
    "q5_k",
    "q5_k_s",
    "q5_0",
    "q5_1",
    "q6_k",
    "iq2_xxs",
    "iq2_xs",
    "iq3_xxs",
    "q3_k_xs",
)
#: Reload tolerance by type: greedy disagreement allowed only at a near-tie this close (logits).
_TOLERANCE = {
    "f32": TIE_TOLERANCE["float32"],
    "f16": TIE_TOLERANCE["16bit"],
    "bf16": TIE_TOLERANCE["16bit"],
    "q8_0": TIE_TOLERANCE["q8_0"],
}


def _cause(stderr: str) -> str:
    """The line that names what went wrong (a traceback's last ``SomeError: ...``, else the last line), so a
    one-line report starts with the cause, not with the traceback's first frames."""
    lines = [line.strip() for line in (stderr or "").strip().splitlines() if line.strip()]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if ":" in line and head.replace(".", "").isidentifier() and head.endswith(("Error", "Exception")):
            return line
    return lines[-1] if lines else "(no output)"


# --------------------------------------------------------------------------- staging and converting


def _is_byte_level_bpe(tokenizer_json: dict) -> bool:
    pre = tokenizer_json.get("pre_tokenizer") or {}
    kinds = {pre.get("type")} | {p.get("type") for p in pre.get("pretokenizers", []) or []}
    return tokenizer_json.get("model", {}).get("type") == "BPE" and "ByteLevel" in kinds


def stage_for_conversion(model_dir: Path, staging: Path) -> Path:
    """A folder the converter reads correctly: links to the weights, a config without transformers'
    GGUF ``quantization_config``, and a byte-level BPE ``tokenizer.json`` declared as such (module doc)."""
    staging.mkdir(parents=True, exist_ok=True)
    for item in model_dir.iterdir():
        if item.name in ("config.json", "tokenizer.json") or item.is_dir():
            continue
        (staging / item.name).symlink_to(item.resolve())
    config = json.loads((model_dir / "config.json").read_text())
    config.pop("quantization_config", None)
    (staging / "config.json").write_text(json.dumps(config, indent=2))
    tok_path = model_dir / "tokenizer.json"
    if tok_path.is_file():
        tok = json.loads(tok_path.read_text(encoding="utf-8"))
        if _is_byte_level_bpe(tok) and tok["model"].get("byte_fallback"):
            # Every byte has a token in a byte-level vocabulary, so byte fallback never fires: same ids.
            tok["model"]["byte_fallback"] = False
            tok["decoder"] = {
                "type": "ByteLevel",
                "add_prefix_space": True,
                "trim_offsets": True,
                "use_regex": True,
            }
        (staging / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    return staging


def run_converter(model_dir: Path, out_file: Path, outtype: str, *, llama_cpp_dir=None) -> float:
    """Run ``convert_hf_to_gguf.py`` on ``model_dir`` in a subprocess; returns the seconds it took."""
    import time

    if importlib.util.find_spec("sentencepiece") is None:
        raise ImportError(
            "llama.cpp's converter imports sentencepiece for Llama-family vocabularies: "
            "`pip install sentencepiece==0.2.3` (it is in grpo-kit[train])."
        )
    # The converter runs with its own folder as cwd: every path it receives is made absolute first
    # (`grpo-kit export outputs/run --gguf q8_0` passes a path relative to the user's folder).
    script = find_converter(llama_cpp_dir).absolute()
    out_file = Path(out_file).absolute()
    with tempfile.TemporaryDirectory(prefix="grpo-kit-gguf-stage-") as tmp:
        staged = stage_for_conversion(Path(model_dir).absolute(), Path(tmp).absolute() / "model")
        cmd = [sys.executable, str(script), str(staged), "--outtype", outtype, "--outfile", str(out_file)]
        start = time.perf_counter()
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=script.parent)
        seconds = time.perf_counter() - start
    if done.returncode != 0 or not out_file.is_file():
        raise RuntimeError(
            f"convert_hf_to_gguf.py failed (exit {done.returncode}): {_cause(done.stderr)}\n"
            f"Its last lines:\n{_tail(done.stderr)}"
        )
    return seconds


# --------------------------------------------------------------------------- checks before any work


def _check_quantization_name(quantization: str) -> str:
    q = str(quantization).lower()
    if q not in CONVERTER_TYPES + QUANTIZE_TYPES and q not in UNSLOTH_QUANT_TYPES:
        raise ValueError(
            f"unknown GGUF type {quantization!r}; the converter writes {', '.join(CONVERTER_TYPES)}, "
            f"llama-quantize adds {', '.join(QUANTIZE_TYPES)}."
        )
    return q


def _require_llama_quantize(q: str, llama_cpp_dir=None) -> Path:
    found = find_llama_quantize(llama_cpp_dir)
    if found is None:
        raise ValueError(
            f"GGUF type {q!r} needs llama.cpp's compiled llama-quantize, which is not installed. "
            "Either build it (git clone https://github.com/ggml-org/llama.cpp && cmake -B build && "
            "cmake --build build --target llama-quantize, then set LLAMA_CPP_DIR to that folder or put "
            "build/bin on PATH), or export with Unsloth on a GPU (FastLanguageModel ... "
            f"save_pretrained_gguf), or choose one of {', '.join(CONVERTER_TYPES)} here."
        )
    return found


def check_gguf_quantization_available(
    quantization: str,
    *,
    llama_cpp_dir: str | os.PathLike | None = None,
    unsloth: bool = False,
    download: bool = True,
) -> str:
    """Check, before training, that :func:`save_gguf` will be able to write ``quantization``; return its name.

    * f32/f16/bf16/q8_0/tq1_0/tq2_0 need llama.cpp's converter (``llama_cpp_dir`` / ``$LLAMA_CPP_DIR``, the
      cache, or fetched now from PyPI when ``download=True``: better a minute now than an error after
      training) and ``sentencepiece``;
    * K-quants and the other :data:`QUANTIZE_TYPES` need the converter and ``llama-quantize`` too;
    * with ``unsloth=True`` (export by Unsloth on a GPU, which builds llama.cpp itself) every name in
      :data:`UNSLOTH_QUANT_TYPES` is available.

    Raises ``ValueError``/``ImportError``/``FileNotFoundError``/``RuntimeError`` saying what to install.
    """
    q = _check_quantization_name(quantization)
    if unsloth and q in UNSLOTH_QUANT_TYPES:
        return q
    if q not in CONVERTER_TYPES + QUANTIZE_TYPES:
        raise ValueError(
            f"GGUF type {quantization!r} is only written by Unsloth on a GPU; here choose one of "
            f"{', '.join(CONVERTER_TYPES + QUANTIZE_TYPES)}."
        )
    if q in QUANTIZE_TYPES:
        _require_llama_quantize(q, llama_cpp_dir)
    if importlib.util.find_spec("sentencepiece") is None:
        raise ImportError(
            "llama.cpp's converter imports sentencepiece for Llama-family vocabularies: "
            "`pip install sentencepiece==0.2.3` (it is in grpo-kit[train])."
        )
    find_converter(llama_cpp_dir, download=download)
    return q


# --------------------------------------------------------------------------- public API


def save_gguf(
    model_dir_or_model: Any,
    out_path: str | os.PathLike,
    quantization: str = "f16",
    *,
    tokenizer: Any = None,
    llama_cpp_dir: str | os.PathLike | None = None,
    verify: bool = True,
) -> ExportReport:
    """Write a GGUF file and check it by loading it back.

    model_dir_or_model: a Hugging Face model folder (e.g. what :func:`save_merged` wrote), or a model in
        memory with its ``tokenizer=`` (a LoRA model is merged on a copy first; an Unsloth model on a GPU
        uses Unsloth's ``save_pretrained_gguf``).
    out_path: the ``.gguf`` file to write (for Unsloth: the folder it writes into).
    quantization: "f16" (default), "bf16", "f32", "q8_0", "tq1_0", "tq2_0"; K-quants such as "q4_k_m"
        need llama-quantize (or Unsloth on a GPU).
    llama_cpp_dir: a llama.cpp checkout to take the converter (and llama-quantize) from; default
        ``$LLAMA_CPP_DIR``, else the cached converter from the llama-cpp-python sdist.
    """
    q = _check_quantization_name(quantization)
    out_path = Path(out_path)

    if not isinstance(model_dir_or_model, (str, os.PathLike)) and _is_unsloth_on_gpu(model_dir_or_model):
        return _save_gguf_unsloth(model_dir_or_model, tokenizer, out_path, q, verify=verify)

    quantize_bin = None
    if q not in CONVERTER_TYPES:
        quantize_bin = _require_llama_quantize(q, llama_cpp_dir)

    with tempfile.TemporaryDirectory(prefix="grpo-kit-gguf-") as tmp:
        reference = None
        if isinstance(model_dir_or_model, (str, os.PathLike)):
            model_dir = Path(model_dir_or_model)
            if not (model_dir / "config.json").is_file():
                raise FileNotFoundError(
                    f"{model_dir} is not a Hugging Face model folder (no config.json); "
                    "pass the folder save_merged wrote, or the model and tokenizer=."
                )
        else:
            if tokenizer is None:
                raise ValueError(
                    "save_gguf(model, ...) needs tokenizer= too (the GGUF file carries the tokenizer)."
                )
            from grpo_kit.export.hf import save_merged

            model_dir = Path(tmp) / "merged"
            # fp32: the converter rounds once, to the GGUF type, instead of twice.
            save_merged(model_dir_or_model, tokenizer, model_dir, dtype="fp32", verify=False)
            reference = model_dir_or_model

        out_path.parent.mkdir(parents=True, exist_ok=True)
        # Written under a temporary name and renamed when complete: a killed export leaves no .gguf.
        partial = Path(tmp) / out_path.name
        details: dict[str, Any] = {"quantization": q, "writer": "convert_hf_to_gguf.py"}
        if quantize_bin is None:
            details["convert_seconds"] = round(
                run_converter(model_dir, partial, q, llama_cpp_dir=llama_cpp_dir), 2
            )
        else:
            f16 = Path(tmp) / "model-f16.gguf"
            details["convert_seconds"] = round(
                run_converter(model_dir, f16, "f16", llama_cpp_dir=llama_cpp_dir), 2
            )
            done = subprocess.run(
                [str(quantize_bin), str(f16), str(partial), q.upper()],
                check=False,
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise RuntimeError(
                    f"llama-quantize failed (exit {done.returncode}): {_cause(done.stderr)}\n"
                    f"Its last lines:\n{_tail(done.stderr)}"
                )
            details["writer"] += " + llama-quantize"
        from grpo_kit.support.paths import make_shareable

        make_shareable(partial)
        beside = out_path.with_name(f".{out_path.name}.partial")  # the temporary folder may be elsewhere
        try:
            shutil.move(partial, beside)
            os.replace(beside, out_path)
        finally:
            beside.unlink(missing_ok=True)

        verified = False
        if verify:
            verified = _verify_gguf(out_path, model_dir, reference, q, details)
    return ExportReport("gguf", out_path, dir_size(out_path), verified, details)


def gguf_vocabulary_type(gguf_file: str | os.PathLike) -> str:
    """``tokenizer.ggml.model`` of a GGUF file: "gpt2" (byte-level BPE), "llama" (SentencePiece), ..."""
    from gguf import GGUFReader

    field = GGUFReader(str(gguf_file)).fields.get("tokenizer.ggml.model")
    return str(field.contents()) if field is not None else ""


def _verify_gguf(gguf_file: Path, model_dir: Path, reference: Any, q: str, details: dict[str, Any]) -> bool:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    checks: dict[str, bool] = {}
    vocab_type = gguf_vocabulary_type(gguf_file)
    details["vocabulary_type"] = vocab_type
    tok_json = model_dir / "tokenizer.json"
    if tok_json.is_file() and _is_byte_level_bpe(json.loads(tok_json.read_text(encoding="utf-8"))):
        checks["vocabulary_type"] = vocab_type == "gpt2"

    ids = prompt_ids(tokenizer)  # (1, T)
    gguf_tokenizer = AutoTokenizer.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name)
    text = tokenizer.decode(ids[0])
    gguf_ids = gguf_tokenizer(text, add_special_tokens=False)["input_ids"]
    checks["tokenizer_ids"] = gguf_ids == ids[0].tolist()

    reloaded = AutoModelForCausalLM.from_pretrained(
        str(gguf_file.parent), gguf_file=gguf_file.name, dtype=torch.float32
    )
    if reference is None:
        reference = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    was_training = reference.training
    reference.eval()
    reloaded.eval()
    tol = _TOLERANCE.get(q)
    try:
        comparison = compare_greedy(
            reference,
            reloaded.to(next(reference.parameters()).device),
            ids,
            tie_tolerance=tol if tol is not None else float("inf"),
        )
    finally:
        reference.train(was_training)
    details["greedy"] = comparison.as_dict()
    details["greedy_asserted"] = tol is not None
    if tol is not None:
        checks["greedy"] = comparison.passed
    llama_cpp = _llama_cpp_greedy(gguf_file, ids[0].tolist(), len(comparison.reference_tokens))
    if llama_cpp is not None:
        details["llama_cpp_tokens"] = llama_cpp
        details["llama_cpp_agreement"] = sum(
            a == b for a, b in zip(llama_cpp, comparison.reference_tokens)
        ) / max(1, len(llama_cpp))
    details["checks"] = checks
    return all(checks.values())


def _llama_cpp_greedy(gguf_file: Path, ids: list[int], n: int) -> list[int] | None:
    """Greedy tokens from llama.cpp itself when llama-cpp-python is installed (reported, not asserted)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    from llama_cpp import Llama

    llm = Llama(model_path=str(gguf_file), n_ctx=512, verbose=False)
    tokens = []
    for token in llm.generate(ids, temp=0.0, top_k=1, reset=True):
        tokens.append(int(token))
        if len(tokens) >= n:
            break
    return tokens


# --------------------------------------------------------------------------- Unsloth


def _is_unsloth_on_gpu(model: Any) -> bool:
    import torch

    return hasattr(model, "save_pretrained_gguf") and torch.cuda.is_available()


def _save_gguf_unsloth(model: Any, tokenizer: Any, out_dir: Path, q: str, *, verify: bool) -> ExportReport:
    if q not in UNSLOTH_QUANT_TYPES:
        raise ValueError(
            f"Unsloth's save_pretrained_gguf does not know {q!r}; use one of {', '.join(UNSLOTH_QUANT_TYPES)}."
        )
    if tokenizer is None:
        raise ValueError("save_gguf(model, ...) needs tokenizer= too (the GGUF file carries the tokenizer).")
    out_dir = out_dir.with_suffix("") if out_dir.suffix == ".gguf" else out_dir
    model.save_pretrained_gguf(str(out_dir), tokenizer, quantization_method=q)
    files = sorted(out_dir.glob("*.gguf")) or sorted(Path(f"{out_dir}_gguf").glob("*.gguf"))
    if not files:
        raise RuntimeError(f"Unsloth's save_pretrained_gguf wrote no .gguf file under {out_dir}.")
    gguf_file = files[-1]
    details: dict[str, Any] = {
        "quantization": q,
        "writer": "unsloth.save_pretrained_gguf",
        "files": [str(f) for f in files],
    }
    verified = False
    if verify:
        with tempfile.TemporaryDirectory(prefix="grpo-kit-gguf-") as tmp:
            from grpo_kit.export.hf import save_merged

            merged_dir = Path(tmp) / "merged"
            save_merged(model, tokenizer, merged_dir, dtype="fp32", verify=False)
            verified = _verify_gguf(gguf_file, merged_dir, None, q, details)
    return ExportReport("gguf", gguf_file, dir_size(gguf_file), verified, details)
