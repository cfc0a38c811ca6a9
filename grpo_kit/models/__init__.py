"""Models: a name, path or alias -> ``(model, tokenizer)`` ready for GRPO.

* :func:`load_model` -- alias ``smollm2-135m-instruct`` (:data:`DEFAULT_MODEL`, the embedded
  default), a ``.gguf`` file, a local directory or a Hub id; LoRA (peft) and 4-bit QLoRA
  (bitsandbytes NF4, on CPU or CUDA) options; every argument checked before any weights are read;
  ``seed=`` makes the LoRA init reproducible (:func:`add_lora`).
* :func:`quantization_record` -- what a bitsandbytes-quantized model was loaded as (for run.json).
* :func:`load_tokenizer` -- the tokenizer ``load_model`` returns, without reading the weights.
* :func:`check_model_source` -- the cheap pre-load check (path exists, is a model folder or a GGUF
  file with the GGUF magic bytes; aliases and Hub ids pass), for callers that check before creating
  folders.
* :func:`tiny_model` -- a random 2-layer Llama with the SmolLM2 tokenizer, for fast tests; ``load_model("tiny")``
  (:data:`TINY_MODEL`) loads it like any other model name.
* ``load_model("smolvlm-cpu")`` / ``load_model("tiny-vlm")`` -- a vision-language model and its processor,
  assembled offline (:mod:`grpo_kit.models.vlm`: transformers' Llava around the embedded SmolLM2 or the test model);
  a Hub VLM id (SmolVLM, Qwen2.5-VL) loads the same way, with its processor.
* :func:`embedded_model_dir` -- the embedded default as a plain HF directory (for TRL, vLLM, export).
* :func:`gguf_to_hf_dir` / :func:`strip_gguf_quantizer` -- GGUF -> trainable, savable model, cached.

Every tokenizer comes back with ``padding_side="left"``, a pad token and a chat template.

Modules: ``loading`` (resolution, checks, ``load_model``), ``embedded`` (the default model),
``lora`` (check_lora, add_lora), ``gguf`` (conversion), ``cache`` (the cache directory, locked atomic writes), ``tokenizer``,
``tiny``, ``vlm``.
"""

from datasets_prep.hub import hub_available
from grpo_kit.models.cache import cache_dir, cached_hub_snapshot
from grpo_kit.models.embedded import (
    ALIASES,
    DEFAULT_MODEL,
    EMBEDDED_GGUF_NAME,
    EMBEDDED_HUB_ID,
    embedded_gguf_path,
    embedded_model_dir,
    smollm2_tokenizer,
)
from grpo_kit.models.gguf import gguf_to_hf_dir, gguf_tokenizer_dir, strip_gguf_quantizer
from grpo_kit.models.loading import (
    TINY_MODEL,
    check_model_source,
    load_model,
    load_tokenizer,
    model_module_names,
    quantization_record,
    resolve_model,
)
from grpo_kit.models.lora import add_lora, check_lora, check_lora_targets
from grpo_kit.models.tiny import tiny_model
from grpo_kit.models.tokenizer import CHATML_TEMPLATE, prepare_tokenizer

__all__ = [
    "ALIASES",
    "CHATML_TEMPLATE",
    "DEFAULT_MODEL",
    "EMBEDDED_GGUF_NAME",
    "EMBEDDED_HUB_ID",
    "TINY_MODEL",
    "add_lora",
    "cache_dir",
    "cached_hub_snapshot",
    "check_lora",
    "check_lora_targets",
    "check_model_source",
    "embedded_gguf_path",
    "embedded_model_dir",
    "gguf_to_hf_dir",
    "gguf_tokenizer_dir",
    "hub_available",
    "load_model",
    "load_tokenizer",
    "model_module_names",
    "prepare_tokenizer",
    "quantization_record",
    "resolve_model",
    "smollm2_tokenizer",
    "strip_gguf_quantizer",
    "tiny_model",
]
