"""LoRA for any model this package loads: the adapter's settings checked (:func:`check_lora`), and the adapter
added with its random init drawn from a seed (:func:`add_lora`), and whether a model carries one
(:func:`is_peft_model`)."""

from __future__ import annotations

import dataclasses

from grpo_kit.config.declarations import LORA_DEFAULTS

__all__ = ["add_lora", "check_lora", "check_lora_targets", "is_peft_model"]


def check_lora(lora):
    """None, a peft ``LoraConfig``, or a small dict of LoraConfig fields -> LoraConfig | None. A field the dict
    leaves out takes its default of ``grpo_kit.config.declarations.LORA_DEFAULTS`` (a recipe's too)."""
    if lora is None:
        return None
    from peft import LoraConfig, PeftConfig

    if isinstance(lora, PeftConfig):
        return lora
    if not isinstance(lora, dict):
        raise TypeError(
            f"lora must be None, a peft.LoraConfig or a dict of LoraConfig fields such as "
            f'{{"r": 16, "target_modules": "all-linear"}}; got {type(lora).__name__}.'
        )
    fields = {f.name for f in dataclasses.fields(LoraConfig)}
    unknown = sorted(set(lora) - fields)
    if unknown:
        raise TypeError(
            f"Unknown LoRA option(s) {unknown}; LoraConfig accepts e.g. r, lora_alpha, lora_dropout, "
            f"target_modules, bias, task_type (see peft.LoraConfig)."
        )
    options = {**LORA_DEFAULTS, "task_type": "CAUSAL_LM", **lora}
    return LoraConfig(**options)


def add_lora(model, lora_config, *, seed: int | None = None):
    """``get_peft_model(model, lora_config)`` with the adapter's random init drawn from ``seed``.

    peft initialises ``lora_A`` from torch's global generator (Kaiming-uniform), so without a seed two runs
    with the same training seed start from different adapters and differ from step 1. With ``seed`` the
    init runs on a forked generator seeded with it: the same seed gives bit-identical adapters, and the
    caller's random streams are left as they were. ``seed=None`` draws from the global generator.
    """
    import torch
    from peft import get_peft_model

    if seed is None:
        return get_peft_model(model, lora_config)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int or None; got {seed!r}.")
    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        return get_peft_model(model, lora_config)


def check_lora_targets(lora_config, module_names, model: str) -> None:
    """Refuse, before any weights load, a LoRA whose ``target_modules`` names no module of the model: peft would
    say so only after loading (``NoMatchingPeftModuleError``). ``module_names``: the model's module names
    (``grpo_kit.models.model_module_names``); matched by peft's own rule (a name, a suffix or a regex)."""
    from peft.tuners.tuners_utils import check_target_module_exists

    targets = lora_config.target_modules
    if targets is None or targets == "all-linear":
        return
    if any(check_target_module_exists(lora_config, name) for name in module_names):
        return
    linear = sorted({name.rsplit(".", 1)[-1] for name in module_names if "proj" in name or "head" in name})
    shown = sorted(targets) if isinstance(targets, (set, list, tuple)) else targets
    raise ValueError(
        f"lora.target_modules={shown!r} names no module of {model}; its projections are {', '.join(linear)}. "
        'Set e.g. --set \'lora.target_modules=["q_proj", "v_proj"]\', or "all-linear".'
    )


def is_peft_model(model) -> bool:
    """Whether ``model`` is a peft ``PeftModel`` (what :func:`add_lora` and Unsloth's ``get_peft_model``
    return): what its users rely on is that class's API, ``disable_adapter()`` (the loop's reference
    log-probs), the adapter's state dict (checkpoints) and ``get_base_model()`` / ``merge_and_unload()``
    (export). A model with an adapter attached through transformers' own ``add_adapter`` has none of these,
    and is not one. False when peft is not installed."""
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover - peft is a train dependency
        return False
    return isinstance(model, PeftModel)
