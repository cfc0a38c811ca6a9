"""Which settings each training path applies: one table, and the refusal of a setting a path would drop.

A run's ``training`` settings (TRL ``GRPOConfig`` names, plus the loop's own ``max_bad_steps`` and
``on_reward_error``) reach one of three paths: the standalone loop (``GRPOLoopConfig``), TRL's
``GRPOTrainer`` and Unsloth (which also trains through ``GRPOTrainer``). A setting the chosen path does not
implement is refused by :func:`check_path_settings` before the model loads, naming the path that has it;
nothing is dropped silently.

How to read the table: :data:`IMPLEMENTED_BY` lists every setting that *not* every path applies, with the
paths that do; it is read from each setting's declaration (``applied_by`` in ``grpo_kit.config.declarations``).
When a path gains a setting, edit that line (as ``entropy_coef`` and ``log_completions`` did when the loop
implemented them); ``tests/grpo_kit/test_path_settings.py`` fails when a ``GRPOLoopConfig`` field and the
table disagree. A setting not in the table is applied by every path that
has a field for it: the loop applies its ``GRPOLoopConfig`` fields, the TRL and Unsloth paths every
``GRPOConfig`` field. A ``GRPOConfig`` field the loop has no field for is refused on the loop, except
where :data:`LOOP_BEHAVES_AS` names the one value the loop always behaves as (``optim="adamw_torch"``:
the loop's optimizer is ``torch.optim.AdamW``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

from grpo_kit.config.declarations import PATHS, SETTINGS, TRAINER_PATHS

__all__ = [
    "IMPLEMENTED_BY",
    "LOOP_BEHAVES_AS",
    "PATHS",
    "RECIPE_FIELDS_IMPLEMENTED_BY",
    "applied_settings",
    "check_path_settings",
    "check_recipe_fields",
    "loop_fields",
    "refusal",
]

#: Settings that not every path applies -> the paths that apply them: each setting's ``applied_by`` in its
#: declaration (``grpo_kit.config.declarations.SETTINGS``).
IMPLEMENTED_BY: dict[str, tuple[str, ...]] = {
    name: setting.applied_by for name, setting in SETTINGS.items() if setting.applied_by != PATHS
}

#: Recipe fields (not ``training`` settings) that not every path applies -> the paths that apply them.
RECIPE_FIELDS_IMPLEMENTED_BY: dict[str, tuple[str, ...]] = {
    # grpo_kit.trainers.sft_warmup: a plain masked SFT step on the loop, TRL's SFTTrainer on the TRL path; Unsloth's
    # patched trainers are not wired to it
    "warmup_sft": ("standalone", "trl"),
}

#: GRPOConfig fields the loop has no field for, with the values it always behaves as (accepted only at them).
LOOP_BEHAVES_AS: dict[str, tuple[Any, ...]] = {
    "optim": ("adamw_torch",),  # torch.optim.AdamW, no fused or 8-bit variant
    "remove_unused_columns": (False,),  # every dataset column reaches the reward functions
    "fp16": (False,),  # the loop has bf16 mixed precision (GRPOLoopConfig.bf16), not fp16
}


@functools.lru_cache(maxsize=1)
def loop_fields() -> frozenset[str]:
    """The standalone loop's settings: ``GRPOLoopConfig``'s fields."""
    from grpo_kit.config.loop import GRPOLoopConfig

    return frozenset(f.name for f in dataclasses.fields(GRPOLoopConfig) if f.init)


def _paths_with(name: str) -> tuple[str, ...]:
    if name in IMPLEMENTED_BY:
        return IMPLEMENTED_BY[name]
    return PATHS if name in loop_fields() else TRAINER_PATHS


def refusal(name: str, value: Any, loop: str) -> str | None:
    """Why ``loop`` would not apply ``name=value`` (naming the path that does), or None when it applies it.
    A credential's value (``hub_token``) is never part of the message: it reads ``<redacted>``."""
    from grpo_kit.config.stored import CREDENTIAL_PLACEHOLDER, is_credential_field

    if loop not in PATHS:
        raise ValueError(f"loop {loop!r}: choose one of {', '.join(PATHS)}.")
    if name == "reward_weights":
        return None  # every path applies the recipe's weights
    behaves_as = LOOP_BEHAVES_AS.get(name, ())
    if loop == "standalone" and name not in {*IMPLEMENTED_BY, *loop_fields()} and value in behaves_as:
        return None  # what the loop does anyway
    paths = _paths_with(name)
    if loop in paths:
        return None
    where = " or ".join(f"--loop {p}" for p in paths)
    if is_credential_field(name) and value is not None:
        value = CREDENTIAL_PLACEHOLDER
    if loop == "standalone" and name in LOOP_BEHAVES_AS:
        return (
            f"{name}={value!r}: the standalone loop always runs as {name}={LOOP_BEHAVES_AS[name][0]!r}; "
            f"use {where} for {name}={value!r}, or drop the setting."
        )
    return (
        f"{name}={value!r}: the {loop} path does not implement {name}; {where} does. Drop it, or use {where}."
    )


def check_path_settings(training: Mapping[str, Any], loop: str, *, where: str = "this run") -> None:
    """Refuse (ValueError, before the model loads) every setting in ``training`` that ``loop`` would drop."""
    problems = [r for name, value in training.items() if (r := refusal(name, value, loop)) is not None]
    if problems:
        raise ValueError(f"{where}: " + " ".join(problems))


def check_recipe_fields(recipe: Any, loop: str, *, where: str = "this run") -> None:
    """Refuse (ValueError, before the model loads) a recipe field that is set (not None) and that ``loop`` does
    not apply (:data:`RECIPE_FIELDS_IMPLEMENTED_BY`), naming the paths that apply it."""
    if loop not in PATHS:
        raise ValueError(f"loop {loop!r}: choose one of {', '.join(PATHS)}.")
    for name, paths in RECIPE_FIELDS_IMPLEMENTED_BY.items():
        if getattr(recipe, name, None) is not None and loop not in paths:
            others = " or ".join(f"--loop {p}" for p in paths)
            raise ValueError(
                f"{where}: {name}: the {loop} path does not implement {name}; {others} does. "
                f"Use {others}, or drop it (--set {name}=null)."
            )


def applied_settings(training: Mapping[str, Any], path_config: Any) -> dict[str, Any]:
    """What the path applied for each setting of ``training``: the value read back from the path's resolved
    config (``GRPOLoopConfig`` or ``GRPOConfig``), else the value the loop behaves as."""
    applied = {}
    for name, value in training.items():
        if path_config is not None and hasattr(path_config, name):
            got = getattr(path_config, name)
            applied[name] = getattr(got, "value", got)  # enums (optim, lr_scheduler_type) as their names
        elif name in LOOP_BEHAVES_AS:
            applied[name] = LOOP_BEHAVES_AS[name][0]
        else:
            applied[name] = value
    return applied
