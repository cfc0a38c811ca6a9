"""Every training setting grpo-kit reads, declared once: its name, default, range, help and the paths that apply it.

A :class:`Setting` is one line of :data:`SETTINGS`. The name is TRL ``GRPOConfig``'s wherever TRL has the setting,
and so is the default, unless ``own_default`` says why grpo-kit's differs. Everything else is derived from here,
as TRL derives ``trl grpo``'s flags from its ``GRPOConfig`` fields:

* ``grpo_kit.config.rules.GRPO_DEFAULTS`` / ``GRPO_KIT_DEFAULTS`` and ``training_value`` (the defaults by name);
* ``GRPOLoopConfig``'s fields (default and help: :func:`loop_field`);
* the range rules every path, recipe file and ``--set`` runs (:func:`check_declared_values`);
* which path applies a setting (``grpo_kit.config.trainers.IMPLEMENTED_BY``);
* ``grpo-kit train``'s setting flags (``--max-steps``: its type and help).

The loss defaults are written in ``grpo_kit.core.losses.validation`` (``LossSettings``, ``AdvantageSettings``,
``ENTROPY_FIELDS``: ``compute_loss`` needs them without this package) and read from there; so is the range of
``beta`` and ``epsilon`` (``check_beta``, ``check_epsilons``), which ``compute_loss`` enforces on every call.
No torch at import.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grpo_kit.core.losses.validation import (
    ENTROPY_FIELDS,
    AdvantageSettings,
    LossSettings,
    check_beta,
    check_epsilons,
)

__all__ = [
    "LORA_DEFAULTS",
    "ON_REWARD_ERROR",
    "PATHS",
    "SEED_RANGE",
    "SETTINGS",
    "TRAINER_PATHS",
    "Number",
    "Setting",
    "Whole",
    "check_declared_values",
    "check_num_generations",
    "check_setting",
    "loop_field",
]

#: The training paths: the standalone loop, TRL's GRPOTrainer, Unsloth (which trains through GRPOTrainer too).
PATHS = ("standalone", "trl", "unsloth")
TRAINER_PATHS = ("trl", "unsloth")  # both build a GRPOTrainer from the same GRPOConfig (trainers.builder)
ON_REWARD_ERROR = ("stop", "skip")
#: The LoRA adapter's defaults (peft ``LoraConfig`` names), for a recipe's ``LoraSettings`` and for
#: ``grpo_kit.models.load_model(lora={...})`` alike. ``lora_dropout=0.0``: the main job's, and the one under which
#: TRL sampling in training mode and the loop's sampling agree.
LORA_DEFAULTS: dict[str, Any] = {
    "r": 16,
    "lora_alpha": 32,
    "lora_dropout": 0.0,
    "target_modules": "all-linear",
}
#: ``seed`` seeds python, numpy and torch; numpy takes 0 … 2**32 - 1 only.
SEED_RANGE = (0, 2**32 - 1)

Check = Callable[[str, Any], None]


@dataclass(frozen=True)
class Setting:
    """One setting. ``check(name, value)`` raises ValueError/TypeError naming the fix (None is never checked: it
    means "off" or "derived"). ``applied_by``: the paths that apply it; ``trl``: GRPOConfig has this name;
    ``own_default``: why the default is not GRPOConfig's ("": it is)."""

    name: str
    default: Any
    help: str
    check: Check | None = None
    applied_by: tuple[str, ...] = PATHS
    trl: bool = True
    own_default: str = ""

    def validate(self, value: Any) -> None:
        if value is not None and self.check is not None:
            self.check(self.name, value)


@dataclass(frozen=True)
class Number:
    """A finite real number in a range (``-inf, inf``: any finite number). A non-finite value is always refused:
    ``learning_rate=inf`` or ``adam_epsilon=0`` turn the first AdamW update into NaN weights."""

    low: float = -math.inf
    high: float = math.inf
    low_in: bool = True
    high_in: bool = False
    fix: str = ""
    then: Callable[[Any], None] | None = None  # a rule written beside the code that needs it (beta, epsilon)

    def allowed(self) -> str:
        if self.low == -math.inf and self.high == math.inf:
            return ""
        if self.high == math.inf:
            return f"{'>=' if self.low_in else '>'} {self.low:g}"
        return f"in {'[' if self.low_in else '('}{self.low:g}, {self.high:g}{']' if self.high_in else ')'}"

    def __call__(self, name: str, value: Any) -> None:
        allowed = f" {self.allowed()}" if self.allowed() else ""
        fix = f" ({self.fix})" if self.fix else ""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name}={value!r} is not a number; set {name} to a finite number{allowed}{fix}.")
        low, high = self.low, self.high
        inside = (low <= value if self.low_in else low < value) and (
            value <= high if self.high_in else value < high
        )
        if not math.isfinite(value) or not inside:
            raise ValueError(f"{name}={value!r} is out of range: it must be a finite number{allowed}{fix}.")
        if self.then is not None:
            self.then(value)


@dataclass(frozen=True)
class Whole:
    """An int (not a bool) >= ``minimum``; with ``ratio`` also TRL's float in (0, 1), a fraction of the run."""

    minimum: int
    ratio: bool = False

    def __call__(self, name: str, value: Any) -> None:
        if self.ratio and isinstance(value, float) and 0 < value < 1:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            ratio = " or a float in (0, 1), a fraction of the run" if self.ratio else ""
            raise TypeError(f"{name} must be an int{ratio} (got {value!r} of type {type(value).__name__}).")
        if value < self.minimum:
            raise ValueError(f"{name}={value} must be >= {self.minimum}.")


def _check_max_steps(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not (value >= 1 or value == -1):
        raise ValueError(
            f"{name}={value!r}: give the optimizer steps to run, an int at least 1, or -1 to run "
            "num_train_epochs passes over the prompts (TRL's meaning)."
        )


def _check_seed(name: str, value: Any) -> None:
    low, high = SEED_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(
            f"{name}={value!r}: the seed must be an int from {low} to {high} (2**32 - 1, numpy's limit); "
            f"e.g. {name}={SETTINGS['seed'].default} (the default)."
        )


def check_num_generations(num_generations: Any) -> None:
    """GRPO compares each completion with the others of its group: G ≥ 2."""
    if isinstance(num_generations, bool) or not isinstance(num_generations, int) or num_generations < 2:
        raise ValueError(
            f"num_generations={num_generations}: GRPO compares each completion with the others of its group, "
            "so it needs at least 2 completions per prompt; set num_generations>=2 "
            f"({SETTINGS['num_generations'].default} is TRL's default)."
        )


def _check_group(name: str, value: Any) -> None:
    check_num_generations(value)


def _check_on_reward_error(name: str, value: Any) -> None:
    if value not in ON_REWARD_ERROR:
        raise ValueError(f"{name}={value!r}: choose {' or '.join(map(repr, ON_REWARD_ERROR))}.")


def _check_flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{name}={value!r}: set true or false.")


def _check_reward_timeout(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise ValueError(
            f"{name}={value!r}: give the seconds a reward function may take "
            "(a positive number, e.g. 600), or None for no bound."
        )


def _is_the_default(name: str) -> str:
    return f"{getattr(LossSettings, name)} is the default"


_LOOP_ONLY = ("standalone",)
_LOSS, _ADVANTAGE = LossSettings, AdvantageSettings

_DECLARED = (
    # --- run ---
    Setting(
        "output_dir",
        "trainer_output",
        "Where metrics.jsonl, reward_curve.png and checkpoint-<step>/ go.",
        own_default="TRL's None means Trainer's 'trainer_output', written out",
    ),
    Setting(
        "max_steps",
        -1,
        "Optimizer steps to run; -1: num_train_epochs passes over the prompts (TRL's meaning).",
        _check_max_steps,
    ),
    Setting(
        "num_train_epochs",
        3.0,
        "Passes over the prompts when max_steps is -1.",
        Number(0.0, fix="3.0 is the default"),
    ),
    Setting(
        "seed",
        42,
        "Seeds python, numpy and torch at the start; also orders the prompts.",
        _check_seed,
    ),
    Setting(
        "shuffle_dataset",
        True,
        "Visit prompts in a seeded random order, reshuffled every epoch.",
    ),
    Setting(
        "logging_steps",
        10,
        "Write a metrics.jsonl record every N optimizer steps, averaging the window.",
        Whole(1, ratio=True),
    ),
    Setting(
        "save_steps",
        500,
        "Checkpoint every N optimizer steps and at the end; 0 disables checkpoints.",
        Whole(0, ratio=True),
    ),
    Setting(
        "eval_strategy",
        "no",
        '"steps": evaluate the held-out rows every eval_steps optimizer steps and at the last one (TRL\'s '
        'schedule); "no": before and after training only. Its rule: grpo_kit.config.rules.evaluation_interval.',
    ),
    Setting(
        "eval_steps",
        None,
        'Every how many optimizer steps (None: every logging_steps, TRL\'s rule); alone it means eval_strategy="steps".',
    ),
    Setting(
        "save_total_limit",
        None,
        "Keep at most this many checkpoints, deleting the oldest; None keeps all.",
        Whole(1),
    ),
    Setting(
        "resume_from_checkpoint",
        None,
        "A checkpoint-<step> folder to continue from, or True for the latest one in output_dir (a planned run "
        "passes the folder its plan resolved).",
    ),
    Setting(
        "disable_tqdm",
        False,
        "Hide the progress display: the rich bar on a terminal, plain lines elsewhere.",
        own_default="TRL's None decides from the log level; the loop shows its progress",
    ),
    Setting(
        "report_to",
        "none",
        'Where metrics go besides metrics.jsonl: "none", "trackio", "tensorboard", "wandb", "all" or a list '
        "(TRL's metric names). Needs grpo-kit[logging]. Its rule: grpo_kit.support.reporting.check_report_to.",
    ),
    Setting(
        "log_completions",
        False,
        "At every logging step write the last generation batch's prompts, completions, rewards and advantages "
        "to completions/completions_<step>.parquet and print some.",
    ),
    Setting(
        "num_completions_to_print",
        None,
        "Rows of that table printed at each logging step; None prints all.",
        Whole(0),
    ),
    Setting(
        "max_bad_steps",
        3,
        "grpo-kit only. A bad step (all rewards NaN/None, a non-finite loss or grad-norm, or with "
        'on_reward_error="skip" a reward function that raised) is skipped; after this many in a row the run saves '
        "its last good checkpoint and stops naming the cause (grpo_kit.loop.bookkeeping.BadStepsError).",
        Whole(1),
        applied_by=_LOOP_ONLY,
        trl=False,
    ),
    Setting(
        "on_reward_error",
        "stop",
        'grpo-kit only. A reward function that raises: "stop" saves a checkpoint and raises '
        'rewards.RewardFunctionError naming the function, the row and the completion; "skip" treats the step '
        "as bad (see max_bad_steps).",
        _check_on_reward_error,
        applied_by=_LOOP_ONLY,
        trl=False,
    ),
    Setting(
        "reward_timeout",
        600.0,
        "grpo-kit only. Seconds one reward function may take to score a generation batch (async ones: all "
        "together) before the call counts as failed, handled per on_reward_error; None waits without a bound.",
        _check_reward_timeout,
        trl=False,
    ),
    Setting(
        "no_signal_steps",
        3,
        "grpo-kit only. The signal watch (grpo_kit.evaluation.signal_watch): after this many steps in a row where "
        "every group has zero reward variance or most completions hit max_completion_length, one line names the "
        "cause and the fix, and the run stops (see stop_on_no_signal).",
        Whole(1),
        trl=False,
    ),
    Setting(
        "stop_on_no_signal",
        True,
        "grpo-kit only. Stop the run, saved and resumable, when the signal watch finds no_signal_steps steps in a "
        "row without learning signal; false keeps training (the line is printed and run.json names the cause).",
        _check_flag,
        trl=False,
    ),
    # --- batch and generation ---
    Setting(
        "num_generations",
        8,
        "G, completions sampled per prompt: the group whose rewards are compared (DeepSeekMath). >= 2.",
        _check_group,
    ),
    Setting(
        "per_device_train_batch_size",
        8,
        "Completions (not prompts) per micro-batch; times gradient_accumulation_steps it is the generation "
        "batch, which must hold whole groups of num_generations.",
        Whole(1),
    ),
    Setting(
        "gradient_accumulation_steps",
        _LOSS.gradient_accumulation_steps,
        "Micro-batches per optimizer step; together they are one generation batch (TRL's steps_per_generation).",
        Whole(1),
    ),
    Setting(
        "generation_batch_size",
        None,
        "Completions per generation batch (None: derived from steps_per_generation).",
        applied_by=TRAINER_PATHS,
    ),
    Setting(
        "steps_per_generation",
        None,
        "Optimizer micro-batches per generation batch (None: gradient_accumulation_steps).",
        applied_by=TRAINER_PATHS,
    ),
    Setting(
        "max_completion_length",
        512,
        "Maximum new tokens per completion.",
        Whole(1),
    ),
    Setting(
        "temperature",
        1.0,
        "Sampling temperature; the log-probs are computed at the same temperature.",
        Number(0.0, low_in=False, fix="1.0 is the default"),
    ),
    Setting(
        "top_p",
        1.0,
        "Nucleus sampling: keep the smallest token set with this total probability; 1.0 = off.",
        Number(0.0, 1.0, low_in=False, high_in=True, fix="1.0 turns nucleus sampling off"),
    ),
    Setting("top_k", 0, "Keep only the k most likely tokens when sampling; 0 = off.", Whole(0)),
    Setting(
        "min_p",
        None,
        "Minimum token probability relative to the most likely token; None = off.",
        Number(0.0, 1.0, high_in=True, fix="None turns it off"),
    ),
    Setting(
        "repetition_penalty",
        1.0,
        "HF generate's repetition penalty; 1.0 = off.",
        Number(0.0, low_in=False, fix="1.0 turns it off"),
    ),
    Setting(
        "chat_template_kwargs",
        None,
        'Extra keyword arguments for the chat template (e.g. {"enable_thinking": False}).',
    ),
    Setting(
        "bf16",
        False,
        "bf16 mixed precision: log-prob passes under torch.autocast(bfloat16), sampling with a bf16 copy of the "
        "LoRA-merged weights; only where the hardware multiplies bf16 natively (else refused).",
        own_default="the fp32 loop is the one proven equal to TRL step for step",
    ),
    Setting(
        "bf16_sampling",
        False,
        "grpo-kit only. Sample with bf16 copies of the LoRA-merged weights and keep the log-probs and the loss in "
        "fp32 (as vLLM-backed trainers sample in bf16); only where the hardware multiplies bf16 natively (else "
        "refused). bf16=True does both in bf16.",
        applied_by=_LOOP_ONLY,
        trl=False,
    ),
    Setting(
        "gradient_checkpointing",
        False,
        "Recompute each decoder layer in the backward pass instead of keeping its activations: less memory "
        "for more time (docs/benchmarks.md). Sampling never checkpoints.",
        own_default="the fp32 loop without it is the one proven equal to TRL, and a 135M model has the memory",
    ),
    # --- optimisation ---
    Setting(
        "learning_rate",
        1e-6,
        "AdamW peak learning rate (LoRA usually wants 1e-5 … 1e-4).",
        Number(0.0, fix="e.g. 1e-06 (TRL's GRPO default) or 1e-5 … 1e-4 with LoRA"),
    ),
    Setting(
        "lr_scheduler_type",
        "linear",
        "Any transformers.SchedulerType name: linear, cosine, constant, constant_with_warmup, …",
    ),
    Setting(
        "warmup_steps",
        0,
        "Linear warmup: an int number of steps, or a float in [0, 1) = ratio of max_steps (transformers 5).",
        Number(0.0, fix="an int number of steps, or a ratio in [0, 1)"),
    ),
    Setting(
        "weight_decay",
        0.0,
        "AdamW decoupled weight decay, not applied to biases and norm weights.",
        Number(0.0, fix="0.0 is the default"),
    ),
    Setting("adam_beta1", 0.9, "AdamW's beta1.", Number(0.0, 1.0, fix="0.9 is the default")),
    Setting("adam_beta2", 0.999, "AdamW's beta2.", Number(0.0, 1.0, fix="0.999 is the default")),
    Setting(
        "adam_epsilon",
        1e-8,
        "AdamW's epsilon.",
        Number(0.0, low_in=False, fix="it keeps AdamW from dividing by zero; use 1e-08 (the default)"),
    ),
    Setting(
        "max_grad_norm",
        1.0,
        "Clip the global gradient norm to this; 0 disables clipping (the norm is still logged).",
        Number(0.0, fix="1.0 is the default; 0 turns clipping off"),
    ),
    # --- GRPO ---
    Setting(
        "beta",
        _LOSS.beta,
        "KL coefficient β, >= 0; 0 skips the reference model, > 0 needs a LoRA model. DeepSeek-R1 used 0.001.",
        Number(fix=f"{_LOSS.beta} (the default) turns the KL term off", then=check_beta),
    ),
    Setting(
        "num_iterations",
        1,
        "μ: optimizer steps per generation batch (DeepSeekMath). > 1 makes old log-probs necessary.",
        Whole(1),
    ),
    Setting(
        "epsilon",
        _LOSS.epsilon,
        "Lower clip ε of the ratio: clip(ρ, 1 − ε, 1 + ε_high) (PPO).",
        Number(fix=_is_the_default("epsilon"), then=lambda value: check_epsilons(epsilon=value)),
    ),
    Setting(
        "epsilon_high",
        _LOSS.epsilon_high,
        "Upper clip; None = epsilon (DAPO recommends 0.28). For cispo the cap on the IS weight (ScaleRL: 5.0).",
        Number(
            fix="None uses epsilon; DAPO uses 0.28", then=lambda value: check_epsilons(epsilon_high=value)
        ),
    ),
    Setting(
        "delta",
        _LOSS.delta,
        "Two-sided GRPO: cap the unclipped ratio at δ > 1 (INTELLECT-2).",
        Number(fix="None turns two-sided clipping off"),
    ),
    Setting(
        "loss_type",
        _LOSS.loss_type,
        "grpo | bnpo | dr_grpo | dapo | cispo | sapo | luspo | vespo; see grpo_kit.core.losses.",
    ),
    Setting(
        "importance_sampling_level",
        _LOSS.importance_sampling_level,
        "token: one ratio per token; sequence: one per completion (GSPO).",
    ),
    Setting(
        "scale_rewards",
        _ADVANTAGE.scale_rewards,
        "group (or True) | batch | none (or False): divide advantages by the group std, the batch std or not "
        "at all (Dr. GRPO).",
    ),
    Setting(
        "reward_weights",
        None,
        "One weight per reward function (None: all 1.0); a recipe puts them on its rewards.",
    ),
    Setting(
        "multi_objective_aggregation",
        _ADVANTAGE.multi_objective_aggregation,
        "sum_then_normalize | normalize_then_sum (GDPO).",
    ),
    Setting(
        "mask_truncated_completions",
        False,
        "Exclude completions that hit max_completion_length without EOS from the loss (DAPO).",
    ),
    Setting(
        "top_entropy_quantile",
        1.0,
        "ρ: keep only the top-ρ quantile of tokens by entropy in the policy loss; 1.0 = all (0.2 recommended).",
        Number(0.0, 1.0, high_in=True, fix="1.0 keeps every token"),
    ),
    Setting(
        "use_bias_correction_kl",
        _LOSS.use_bias_correction_kl,
        "Multiply the k3 KL by the IS ratio (DeepSeek-V3.2).",
    ),
    Setting(
        "entropy_coef",
        ENTROPY_FIELDS["entropy_coef"],
        "c in L = L_policy − c·H (H: mean per-token entropy of the tokens the loss acts on); 0 = no bonus. "
        "With use_adaptive_entropy the initial c.",
    ),
    Setting(
        "use_adaptive_entropy",
        ENTROPY_FIELDS["use_adaptive_entropy"],
        "Skywork-OR1's controller: c moves by entropy_coef_delta after each step, up when the entropy <= "
        "entropy_target, else down, within [entropy_coef_min, entropy_coef_max].",
    ),
    Setting("entropy_coef_min", ENTROPY_FIELDS["entropy_coef_min"], "Lower bound of the adaptive c."),
    Setting("entropy_coef_max", ENTROPY_FIELDS["entropy_coef_max"], "Upper bound of the adaptive c."),
    Setting("entropy_coef_delta", ENTROPY_FIELDS["entropy_coef_delta"], "Step of the adaptive c per step."),
    Setting(
        "entropy_target",
        ENTROPY_FIELDS["entropy_target"],
        "Target mean entropy (nats) of the adaptive control; set it near the entropy of the first steps.",
    ),
    Setting(
        "sapo_temperature_pos",
        _LOSS.sapo_temperature_pos,
        "SAPO gate temperature for positive advantages.",
        Number(0.0, low_in=False, fix=_is_the_default("sapo_temperature_pos")),
    ),
    Setting(
        "sapo_temperature_neg",
        _LOSS.sapo_temperature_neg,
        "SAPO gate temperature for non-positive advantages.",
        Number(0.0, low_in=False, fix=_is_the_default("sapo_temperature_neg")),
    ),
    *(
        Setting(name, getattr(_LOSS, name), f"VESPO {what}.", Number(0.0, fix=_is_the_default(name)))
        for name, what in (
            ("vespo_k_pos", "power for positive advantages"),
            ("vespo_lambda_pos", "scale for positive advantages"),
            ("vespo_k_neg", "power for non-positive advantages"),
            ("vespo_lambda_neg", "scale for non-positive advantages"),
        )
    ),
    # --- GRPOConfig settings the standalone loop has no code for (GRPOTrainer applies them) ---
    *(
        Setting(name, default, what, applied_by=TRAINER_PATHS)
        for name, default, what in (
            ("off_policy_mask_threshold", None, "Mask sequences too far off-policy (TRL)."),
            ("sync_ref_model", False, "Sync the reference model to the policy every ref_model_sync_steps."),
            ("ref_model_sync_steps", 512, "Steps between reference-model syncs."),
            ("ref_model_mixup_alpha", 0.6, "Mix of policy into reference at each sync."),
            ("push_to_hub", False, "Upload checkpoints to the Hub while training."),
            ("hub_model_id", None, "The Hub repository push_to_hub writes."),
            ("max_tool_calling_iterations", None, "Tool-call rounds per rollout (None: no limit)."),
            ("use_vllm", False, "Generate with vLLM (on a CPU: colocate mode, vLLM's CPU build)."),
            ("vllm_mode", "colocate", "colocate (vLLM inside each process) or server (vllm serve)."),
            ("save_strategy", "steps", "When to checkpoint (Trainer's IntervalStrategy)."),
        )
    ),
)

#: Every declared setting, by name.
SETTINGS: dict[str, Setting] = {setting.name: setting for setting in _DECLARED}


def check_setting(name: str, value: Any) -> None:
    """The declared rule of ``name`` on ``value`` (nothing for None or an undeclared name)."""
    setting = SETTINGS.get(name)
    if setting is not None:
        setting.validate(value)


def check_declared_values(values: Any) -> None:
    """The declared rule of every setting in ``values`` (a mapping of setting names)."""
    for name, value in values.items():
        check_setting(name, value)


def loop_field(name: str) -> Any:
    """A ``GRPOLoopConfig`` field with the declared default and help (``metadata["help"]``, as TRL's fields)."""
    setting = SETTINGS[name]
    return dataclasses.field(default=setting.default, metadata={"help": setting.help})
