"""A vision-language model assembled offline: a small random vision tower + projector around a causal LM.

No VLM weights can be downloaded here (no Hub, and no PyPI package ships them), so ``smolvlm-cpu`` is *built*:

* the language model is the embedded, pretrained SmolLM2-135M-Instruct (it can already say "red", "three",
  "left");
* the vision tower is a small CLIP vision transformer (:data:`SMOLVLM_CPU_VISION`), randomly initialised from a
  seed, and the projector is Llava's two-layer MLP (vision hidden -> text hidden), random too;
* the class is transformers' own ``LlavaForConditionalGeneration`` and the processor transformers' own
  ``LlavaProcessor`` (the SmolLM2 tokenizer plus the special token ``<image>``, a PIL CLIP image processor and a
  ChatML template that renders ``{"type": "image"}`` content blocks as ``<image>``).

Simplifications (stated): the vision tower is not pretrained (it learns from the reward or an alignment stage,
with the projector), except that its position embeddings start as a fixed 2-D sine-cosine code
(:func:`grid_position_code`, as in MAE's ViT; trainable after). CLIP's own random start (std 0.02, 1/50 of a
patch's embedding) left a patch's place invisible past the tower's LayerNorm, and no amount of alignment taught
"left" from "right" (docs/results.md, "Align first, then GRPO"). The new ``<image>`` embedding row is a seeded
random row, never read (Llava overwrites the image-token positions with projected image features); images are
resized and centre-cropped to the tower's
``image_size`` (no tiling, one image = ``(image_size / patch_size) ** 2`` tokens, CLS dropped).

``smolvlm-cpu`` is built once per seed and cached as a plain Hugging Face folder (``save_pretrained``: config,
safetensors, processor) under :func:`grpo_kit.models.cache.cache_dir`, so TRL, export and a second process read
it like any model folder. ``tiny-vlm`` is the same assembly around :func:`grpo_kit.models.tiny_model` with a
smaller tower (:data:`TINY_VLM_VISION`), built in memory, for fast tests. Hub VLMs (``HuggingFaceTB/SmolVLM-256M-
Instruct``, ``Qwen/Qwen2.5-VL-3B-Instruct``) are *not* faked: ``load_model(id)`` reads the id's config, and one with a
``vision_config`` comes here (:func:`load_vlm`: ``AutoModelForImageTextToText`` + ``AutoProcessor``), from the Hub
or, offline, the HF cache (tested with a cached copy of ``tiny-vlm``; no Hub here). A LoRA goes on the language
model (``language_model`` or, in Idefics3/SmolVLM, ``text_model``); the vision parts by name are Llava's.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from grpo_kit.models.cache import atomic_build, cache_dir
from grpo_kit.models.embedded import embedded_model_dir, smollm2_tokenizer
from grpo_kit.models.lora import add_lora

__all__ = [
    "IMAGE_TOKEN",
    "SMOLVLM_CPU",
    "SMOLVLM_CPU_VISION",
    "TINY_VLM",
    "TINY_VLM_VISION",
    "VISION_PARTS",
    "VLM_CHAT_TEMPLATE",
    "VLM_NAMES",
    "VisionSpec",
    "assemble_vlm",
    "build_processor",
    "check_model_takes_images",
    "grid_position_code",
    "image_token_count",
    "is_vlm",
    "is_vlm_folder",
    "load_processor",
    "load_vlm",
    "select_trainable",
    "smolvlm_cpu_dir",
]

#: The assembled VLM around the embedded SmolLM2-135M (cached on disk, per seed).
SMOLVLM_CPU = "smolvlm-cpu"
#: The same assembly around the random 2-layer test model, built in memory (tests).
TINY_VLM = "tiny-vlm"
#: The names :func:`grpo_kit.models.load_model` assembles here.
VLM_NAMES = (SMOLVLM_CPU, TINY_VLM)
#: The placeholder token the processor expands into one token per image patch.
IMAGE_TOKEN = "<image>"
#: Bump when the assembly changes: cached folders of an older build are not reused.
ASSEMBLY_VERSION = "3"

#: ChatML (SmolLM2's format) for content that is a string or a list of ``{"type": "text" | "image"}`` blocks.
#: A prompt whose last message is the assistant's is an *answer opening* (a prefill): with ``add_generation_prompt``
#: that turn is left open (no ``<|im_end|>``, no second assistant header), so generation continues its text. TRL's
#: GRPOTrainer always asks for the generation prompt, so this is how a row opens the answer on TRL's VLM path.
VLM_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% set opening = loop.last and message['role'] == 'assistant' and add_generation_prompt %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for block in message['content'] %}"
    "{% if block['type'] == 'image' %}{{ '<image>' }}"
    "{% elif block['type'] == 'text' %}{{ block['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "{% if not opening %}{{ '<|im_end|>' + '\n' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt and messages[-1]['role'] != 'assistant' %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


@dataclasses.dataclass(frozen=True)
class VisionSpec:
    """A CLIP vision tower's size. Tokens per image: ``(image_size // patch_size) ** 2`` (CLS dropped)."""

    image_size: int = 64
    patch_size: int = 16
    hidden_size: int = 128
    intermediate_size: int = 256
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    #: The size of the starting 2-D sine-cosine position code (:func:`grid_position_code`): at 3 it outweighs a
    #: patch's embedding (std ~1.1), so where a shape is survives the tower (measured: docs/results.md).
    position_scale: float = 3.0

    def __post_init__(self):
        if self.image_size % self.patch_size:
            raise ValueError(
                f"image_size {self.image_size} is not a multiple of patch_size {self.patch_size}; pick sizes that "
                "divide (e.g. 64 and 16)."
            )


#: smolvlm-cpu's tower: 64x64 images, 16 patches of 16x16 -> 16 image tokens, 2 layers, ~0.4 M parameters.
SMOLVLM_CPU_VISION = VisionSpec()
#: tiny-vlm's tower: 32x32 images, 4 patches -> 4 image tokens, 1 layer.
TINY_VLM_VISION = VisionSpec(
    image_size=32, patch_size=16, hidden_size=32, intermediate_size=64, num_hidden_layers=1
)

#: The parts of a Llava model that can be trained, by the names recipes use -> the module name inside it.
VISION_PARTS = {"vision_tower": "vision_tower", "projector": "multi_modal_projector"}


def grid_position_code(grid: int, width: int):
    """A ``(1 + grid**2, width)`` tensor: a zero row for CLS, then for each patch in raster order the sines and cosines
    of its column and of its row, a quarter of ``width`` each, at frequencies from 1 down to 1/10 per patch (MAE's
    2-D sine-cosine code with base 10 in place of 10,000: a grid 4 patches wide needs the fast ones). Patches in the
    same column share the column's half, so "left" is one direction in it."""
    import torch

    if width % 4:
        raise ValueError(
            f"the vision tower's hidden_size {width} is not a multiple of 4; pick one that is (e.g. 128)."
        )
    quarter = width // 4
    frequencies = 10.0 ** (-torch.arange(quarter, dtype=torch.float64) / quarter)  # (width/4,)
    row, column = torch.meshgrid(torch.arange(grid), torch.arange(grid), indexing="ij")
    column = column.reshape(-1, 1) * frequencies  # (grid², width/4)
    row = row.reshape(-1, 1) * frequencies
    code = torch.cat([column.sin(), column.cos(), row.sin(), row.cos()], dim=1)  # (grid², width)
    return torch.cat([torch.zeros(1, width, dtype=code.dtype), code]).float()


def image_token_count(vision: VisionSpec) -> int:
    """Image tokens per image: one per patch (Llava's ``"default"`` strategy drops the CLS token)."""
    return (vision.image_size // vision.patch_size) ** 2


def build_processor(tokenizer, vision: VisionSpec):
    """``LlavaProcessor``: ``tokenizer`` + ``<image>`` (added if missing), a PIL CLIP image processor, the template.

    The tokenizer is changed in place (one added special token, the VLM chat template).
    """
    from transformers import CLIPImageProcessorPil, LlavaProcessor

    if IMAGE_TOKEN not in tokenizer.get_vocab():
        tokenizer.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    tokenizer.chat_template = VLM_CHAT_TEMPLATE
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": vision.image_size},
        crop_size={"height": vision.image_size, "width": vision.image_size},
    )
    return LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=vision.patch_size,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's CLS token, dropped again by the "default" strategy
        chat_template=VLM_CHAT_TEMPLATE,
        image_token=IMAGE_TOKEN,
    )


def assemble_vlm(language_model, tokenizer, vision: VisionSpec, *, seed: int = 0):
    """A causal LM (Llama family) + a seeded random CLIP tower and projector -> ``(LlavaForConditionalGeneration,
    LlavaProcessor)``. The language model's weights are copied unchanged (its logits on text are the same)."""
    import torch
    from transformers import CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration

    processor = build_processor(tokenizer, vision)
    image_token_id = tokenizer.convert_tokens_to_ids(IMAGE_TOKEN)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if language_model.get_input_embeddings().num_embeddings < len(tokenizer):
            language_model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
        text_config = language_model.config
        config = LlavaConfig(
            vision_config=CLIPVisionConfig(
                image_size=vision.image_size,
                patch_size=vision.patch_size,
                hidden_size=vision.hidden_size,
                intermediate_size=vision.intermediate_size,
                num_hidden_layers=vision.num_hidden_layers,
                num_attention_heads=vision.num_attention_heads,
                projection_dim=vision.hidden_size,
            ),
            text_config=text_config.to_dict(),
            image_token_index=image_token_id,
            image_seq_length=image_token_count(vision),
            vision_feature_select_strategy="default",
            vision_feature_layer=-1,
            tie_word_embeddings=bool(getattr(text_config, "tie_word_embeddings", False)),
        )
        model = LlavaForConditionalGeneration(config)
    embeddings = model.model.vision_tower.embeddings.position_embedding
    with torch.no_grad():
        grid = vision.image_size // vision.patch_size
        embeddings.weight.copy_(grid_position_code(grid, vision.hidden_size) * vision.position_scale)
    model.model.language_model.load_state_dict(language_model.model.state_dict())
    model.lm_head.load_state_dict(language_model.lm_head.state_dict())
    model.tie_weights()
    for cfg in (model.config, model.generation_config):
        cfg.pad_token_id = tokenizer.pad_token_id
        cfg.eos_token_id = tokenizer.eos_token_id
        cfg.bos_token_id = tokenizer.bos_token_id
    model.eval()
    return model, processor


def smolvlm_cpu_dir(seed: int = 0) -> Path:
    """The cached Hugging Face folder of ``smolvlm-cpu`` built with ``seed`` (built on first use, ~1 min)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int; got {seed!r}.")
    source = embedded_model_dir()
    spec = dataclasses.asdict(SMOLVLM_CPU_VISION)
    key = "-".join(f"{value}" for value in spec.values())
    target = cache_dir() / "vlm" / f"{SMOLVLM_CPU}-v{ASSEMBLY_VERSION}-{key}-seed{seed}"

    def build(folder: Path) -> None:
        from transformers import AutoModelForCausalLM

        language_model = AutoModelForCausalLM.from_pretrained(
            str(source), dtype="float32", local_files_only=True
        )
        model, processor = assemble_vlm(language_model, smollm2_tokenizer(), SMOLVLM_CPU_VISION, seed=seed)
        model.save_pretrained(os.fspath(folder))
        processor.save_pretrained(os.fspath(folder))

    return atomic_build(target, build)


def load_processor(source: str, *, local_only: bool = True):
    """A VLM folder's or Hub id's processor, its tokenizer padding on the left with a pad token (as every
    tokenizer :func:`grpo_kit.models.load_model` returns)."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(source, local_files_only=local_only)
    tokenizer = processor.tokenizer
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return processor


def _read_folder(folder: str, *, local_only: bool, dtype):
    from transformers import AutoModelForImageTextToText

    processor = load_processor(folder, local_only=local_only)
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=dtype, local_files_only=local_only)
    return model, processor


def load_vlm(source: str, *, local_only: bool = True, dtype=None, lora=None, seed: int | None = None):
    """A VLM name or folder -> ``(model, processor)``; ``lora`` goes on the language model only.

    ``source``: :data:`SMOLVLM_CPU` (weights seed 0), :data:`TINY_VLM`, or a folder / Hub id read with
    ``AutoModelForImageTextToText`` + ``AutoProcessor`` (a Hub id needs a reachable Hub or the HF cache).
    """
    import torch

    dtype = torch.float32 if dtype is None else dtype
    if source == TINY_VLM:
        from grpo_kit.models.tiny import tiny_model

        language_model, tokenizer = tiny_model(seed=0)
        model, processor = assemble_vlm(language_model, tokenizer, TINY_VLM_VISION, seed=0)
    else:
        folder = str(smolvlm_cpu_dir(0)) if source == SMOLVLM_CPU else source
        model, processor = _read_folder(folder, local_only=local_only, dtype=dtype)
    if lora is not None:
        model = select_trainable(model, ("lm_lora",), lora=lora, seed=seed)
    return model, processor


def is_vlm_folder(name_or_path) -> bool:
    """True for a local model folder whose ``config.json`` has a ``vision_config`` (a saved VLM)."""
    import json

    config = Path(os.fspath(name_or_path)).expanduser() / "config.json"
    try:
        return config.is_file() and "vision_config" in json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def check_model_takes_images(name_or_path, processing_class=None) -> None:
    """Refuse image rows for a text-only model: by name before loading (the test model, the embedded aliases,
    GGUF files and local folders without a ``vision_config``; a Hub id is judged once loaded), and by the
    loaded ``processing_class`` (a tokenizer, not a processor)."""
    from grpo_kit.models.embedded import ALIASES

    text = os.fspath(name_or_path)
    text_only = processing_class is not None and not is_vlm(processing_class)
    if processing_class is None and text not in VLM_NAMES:
        path = Path(text).expanduser()
        text_only = (
            text == "tiny"
            or text.strip().lower() in ALIASES
            or text.lower().endswith(".gguf")
            or (path.is_dir() and not is_vlm_folder(path))
        )
    if text_only:
        raise ValueError(
            f"the dataset has an image column but {text!r} is a text-only model; train a vision-language model "
            f"(--set model={SMOLVLM_CPU}, or a Hub VLM id) or use rows without images."
        )


def is_vlm(model_or_processor) -> bool:
    """True for a processor with an image processor, or a model whose config has a ``vision_config``."""
    if getattr(model_or_processor, "image_processor", None) is not None:
        return True
    config = getattr(model_or_processor, "config", None)
    return getattr(config, "vision_config", None) is not None


#: The language model's linear layers: ``language_model`` (Llava, Qwen2.5-VL, Gemma 3) or ``text_model`` (Idefics3,
#: SmolVLM); the vision tower's own ``q_proj``/``k_proj``... are left out.
_LM_LINEARS = r".*(language_model|text_model)\..*\.(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)"


def select_trainable(model, parts, *, lora=None, seed: int | None = None):
    """Train only ``parts`` of a Llava model: any of ``"vision_tower"``, ``"projector"``, ``"lm_lora"``.

    Without ``"lm_lora"`` every other weight is frozen (``requires_grad=False``). With it, a LoRA adapter goes on the
    language model's linear layers only (``lora``: LoraConfig fields, defaults of :func:`check_lora`;
    ``target_modules`` is set here; a recipe's ``LoraSettings`` gives r, lora_alpha, lora_dropout) and the chosen vision parts become peft ``modules_to_save`` (trained, and saved
    with the adapter). Returns the model (a ``PeftModel`` with ``"lm_lora"``).
    """
    from grpo_kit.models.lora import check_lora

    parts = tuple(parts)
    known = (*VISION_PARTS, "lm_lora")
    unknown = [part for part in parts if part not in known]
    if unknown or not parts:
        raise ValueError(
            f"trainable parts {list(parts)} are not understood; choose one or more of {list(known)}."
        )
    modules = [VISION_PARTS[part] for part in parts if part in VISION_PARTS]
    present = {name.split(".")[-1] for name, _ in model.named_modules()}
    missing = [part for part in parts if part in VISION_PARTS and VISION_PARTS[part] not in present]
    if missing:  # another VLM family names its parts otherwise: training nothing would be a silent no-op
        raise ValueError(
            f"{type(model).__name__} has no {', '.join(VISION_PARTS[part] for part in missing)} (trainable parts "
            f"{missing} name Llava's modules); train it with trainable_parts=['lm_lora'] (a LoRA on its language "
            "model) or pass a Llava-style model."
        )
    if "lm_lora" in parts:
        if hasattr(lora, "lora_alpha") and not hasattr(lora, "peft_type"):  # a recipe's LoraSettings
            lora = {"r": lora.r, "lora_alpha": lora.lora_alpha, "lora_dropout": lora.lora_dropout}
        config = check_lora(dict(lora or {}) if not hasattr(lora, "peft_type") else lora)
        config = dataclasses.replace(config, target_modules=_LM_LINEARS, modules_to_save=modules or None)
        return add_lora(model, config, seed=seed)
    for name, parameter in model.named_parameters():
        parameter.requires_grad = any(f".{module}." in f".{name}" for module in modules)
    return model
