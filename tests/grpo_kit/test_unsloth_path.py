"""The Unsloth path up to the GPU boundary (argument mapping, checks, the CUDA-missing error), plus GPU tests.

The argument names are checked against Unsloth's and vLLM's real signatures: live when the packages are
importable (a GPU machine with `.[unsloth]`), else against the parameter names recorded from their source —
unsloth 2026.10.9 wheel: unsloth/models/loader.py ``FastLanguageModel.from_pretrained`` and
unsloth/models/llama.py ``FastLlamaModel.get_peft_model``; vllm 0.31.0: ``SamplingParams`` fields used here.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import inspect
import sys

import pytest
import torch

from grpo_kit import unsloth_path
from grpo_kit.hardware import choose_precision
from grpo_kit.recipes import get_recipe

# Named parameters (no **kwargs catch-all counted) of the unsloth 2026.10.9 functions we call.
FROM_PRETRAINED_PARAMS = {
    "model_name",
    "max_seq_length",
    "dtype",
    "load_in_4bit",
    "load_in_8bit",
    "load_in_16bit",
    "full_finetuning",
    "token",
    "device_map",
    "rope_scaling",
    "fix_tokenizer",
    "trust_remote_code",
    "use_gradient_checkpointing",
    "resize_model_vocab",
    "revision",
    "use_exact_model_name",
    "offload_embedding",
    "float32_mixed_precision",
    "fast_inference",
    "gpu_memory_utilization",
    "float8_kv_cache",
    "random_state",
    "max_lora_rank",
    "disable_log_stats",
    "qat_scheme",
    "load_in_fp8",
    "unsloth_tiled_mlp",
    "text_only",
}
GET_PEFT_MODEL_PARAMS = {
    "r",
    "target_modules",
    "lora_alpha",
    "lora_dropout",
    "bias",
    "layers_to_transform",
    "layers_pattern",
    "use_gradient_checkpointing",
    "random_state",
    "max_seq_length",
    "use_rslora",
    "modules_to_save",
    "init_lora_weights",
    "loftq_config",
    "temporary_location",
    "qat_scheme",
    "target_parameters",
}
SAMPLING_PARAMS_FIELDS = {"temperature", "top_p", "max_tokens"}

needs_unsloth = pytest.mark.skipif(
    importlib.util.find_spec("unsloth") is None, reason="unsloth not installed"
)
needs_vllm = pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vllm not installed (an offline GPU box runs with fast_inference=False)",
)


def _named_params(func) -> set[str]:
    return {
        name
        for name, p in inspect.signature(func).parameters.items()
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    }


def test_from_pretrained_kwargs_are_the_course_call():
    kwargs = unsloth_path.from_pretrained_kwargs(get_recipe("gsm8k-unsloth"))
    assert kwargs == {
        "model_name": "unsloth/gemma-3-1b-it",
        "max_seq_length": 1024,
        "load_in_4bit": True,
        "load_in_8bit": False,
        "fast_inference": True,
        "max_lora_rank": 32,
        "gpu_memory_utilization": 0.6,
    }
    assert set(kwargs) <= FROM_PRETRAINED_PARAMS  # every name is a real parameter, not swallowed by **kwargs
    # A 16-bit LoRA recipe turns 4-bit loading off; model_name can point at a local directory.
    kwargs = unsloth_path.from_pretrained_kwargs(
        get_recipe("gsm8k-unsloth", quantization=None), model_name="/m"
    )
    assert (kwargs["load_in_4bit"], kwargs["model_name"]) == (False, "/m")


def test_get_peft_model_kwargs_are_the_course_call():
    kwargs = unsloth_path.get_peft_model_kwargs(get_recipe("gsm8k-unsloth"))
    assert kwargs == {
        "r": 32,
        "lora_alpha": 32,
        "lora_dropout": 0.0,
        "use_gradient_checkpointing": "unsloth",
        "random_state": 3407,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    }
    assert set(kwargs) <= GET_PEFT_MODEL_PARAMS


def test_grpo_config_kwargs_build_the_courses_grpo_config():
    from trl import GRPOConfig

    recipe = get_recipe("gsm8k-unsloth")
    kwargs = unsloth_path.grpo_config_kwargs(
        recipe, output_dir="outputs", max_steps=5, precision=choose_precision("cuda", (7, 5))
    )
    assert (kwargs["bf16"], kwargs["fp16"]) == (False, True)  # a T4: fp16, never emulated bf16
    assert "use_vllm" not in kwargs  # Unsloth switches it on for a fast_inference model
    kwargs.update(fp16=False, use_cpu=True)  # only to build the config on this CPU machine
    config = GRPOConfig(**kwargs)
    assert (
        config.learning_rate,
        config.adam_beta2,
        config.weight_decay,
        config.lr_scheduler_type.value,
        config.optim.value,
        config.max_grad_norm,
        config.num_generations,
        config.max_steps,
    ) == (5e-6, 0.99, 0.1, "cosine", "paged_adamw_8bit", 0.1, 6, 5)
    assert config.reward_weights == [1.0] * 5
    assert config.generation_batch_size % config.num_generations == 0


def test_sampling_params_kwargs():
    kwargs = unsloth_path.sampling_params_kwargs(get_recipe("gsm8k-unsloth"))
    assert kwargs == {"temperature": 0.8, "top_p": 0.95, "max_tokens": 768}
    assert set(kwargs) <= SAMPLING_PARAMS_FIELDS
    assert unsloth_path.sampling_params_kwargs()["max_tokens"] == 1024  # the course's value
    with pytest.raises(ValueError, match="top_p"):
        unsloth_path.sampling_params_kwargs(top_p=0)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"lora": None}, "lora=None"),
        ({"max_completion_length": 1024}, "no room for the prompt"),
        ({"unsloth": {"gpu_memory_utilization": 1.5}}, "gpu_memory_utilization"),
        ({"per_device_train_batch_size": 4}, "divisible by num_generations"),
        ({"loss_type": "cispo"}, "set epsilon_high"),
        ({"max_prompt_length": 256}, "max_prompt_length"),
    ],
)
def test_settings_are_checked_without_a_gpu(overrides, message):
    with pytest.raises(ValueError, match=message):
        recipe = get_recipe("gsm8k-unsloth", **overrides)
        unsloth_path.check_settings(recipe, unsloth_path.grpo_config_kwargs(recipe, output_dir="o"))


def test_the_course_recipe_passes_the_checks():
    recipe = get_recipe("gsm8k-unsloth")
    unsloth_path.check_settings(recipe, unsloth_path.grpo_config_kwargs(recipe, output_dir="o"))


class ImportRecorder(importlib.abc.MetaPathFinder):
    """Records every attempt to import (or look up) unsloth/vllm; lets the normal finders do the work."""

    def __init__(self):
        self.names: list[str] = []

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in ("unsloth", "unsloth_zoo", "vllm"):
            self.names.append(fullname)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_without_cuda_a_clear_error_comes_before_unsloth_is_imported():
    recorder = ImportRecorder()
    saved = sys.modules.pop("grpo_kit.unsloth_path")
    sys.meta_path.insert(0, recorder)
    try:
        import grpo_kit.unsloth_path as fresh  # importing the module touches no GPU package

        for call in (lambda: fresh.train("gsm8k-unsloth"), lambda: fresh.load_model("gsm8k-unsloth")):
            with pytest.raises(RuntimeError, match=r"CUDA.*--loop trl") as err:
                call()
            assert "gsm8k-cpu" in str(err.value)
    finally:
        sys.meta_path.remove(recorder)
        sys.modules["grpo_kit.unsloth_path"] = saved
    assert recorder.names == []
    assert "unsloth" not in sys.modules


# --- on a GPU with `.[unsloth]` installed (scripts/gpu_smoke.sh runs these) ---------------------------


@pytest.mark.gpu
@needs_unsloth
def test_recorded_names_match_the_installed_unsloth():
    from unsloth import FastLanguageModel

    assert _named_params(FastLanguageModel.from_pretrained) >= set(
        unsloth_path.from_pretrained_kwargs(get_recipe("gsm8k-unsloth"))
    )
    assert _named_params(FastLanguageModel.get_peft_model) >= set(
        unsloth_path.get_peft_model_kwargs(get_recipe("gsm8k-unsloth"))
    )


@pytest.mark.gpu
@needs_vllm
def test_sampling_params_match_the_installed_vllm():
    from vllm import SamplingParams

    SamplingParams(**unsloth_path.sampling_params_kwargs())


@pytest.mark.gpu
@needs_unsloth
@pytest.mark.slow
def test_unsloth_grpo_steps_without_vllm_save_lora(tmp_path):
    """The air-gapped GPU box: no vllm, so fast_inference=False (transformers generation inside Unsloth)."""
    from grpo_kit.models import embedded_model_dir

    recipe = get_recipe(
        "gsm8k-unsloth",
        dataset_source="synthetic",
        dataset_size=12,
        max_completion_length=64,
        unsloth={"max_seq_length": 512, "fast_inference": False},
        save_steps=1000,
    )
    result = unsloth_path.train(
        recipe, model_name=str(embedded_model_dir()), output_dir=tmp_path, max_steps=2
    )
    assert result.global_step == 2 and (result.adapter_dir / "adapter_config.json").exists()
    assert result.metrics_path.read_text().count('"reward"') >= 2


@pytest.mark.gpu
@needs_unsloth
@needs_vllm
@pytest.mark.slow
def test_unsloth_grpo_steps_save_lora_and_compare(tmp_path):
    from datasets_prep import SYSTEM_PROMPT
    from grpo_kit.models import embedded_model_dir

    recipe = get_recipe(
        "gsm8k-unsloth",
        dataset_source="synthetic",
        dataset_size=12,
        max_completion_length=64,
        unsloth={"max_seq_length": 512, "gpu_memory_utilization": 0.3},
        save_steps=1000,
    )
    result = unsloth_path.train(
        recipe, model_name=str(embedded_model_dir()), output_dir=tmp_path, max_steps=2
    )
    assert result.global_step == 2 and (result.adapter_dir / "adapter_config.json").exists()
    assert result.metrics_path.read_text().count('"reward"') >= 2
    rows = unsloth_path.compare_with_and_without_adapter(
        result.model,
        result.tokenizer,
        result.adapter_dir,
        ["What is 2 + 3?"],
        system_prompt=SYSTEM_PROMPT,
        sampling=unsloth_path.sampling_params_kwargs(temperature=0.0, max_tokens=32),
    )
    assert rows[0]["question"] == "What is 2 + 3?" and isinstance(rows[0]["with_adapter"], str)
