"""``GRPOLoopConfig``: the settings of the standalone loop (``grpo_kit.loop.training.train``), checked before any model
loads.

Field names are TRL ``GRPOConfig``'s wherever they mean the same thing; each field documents its meaning,
default and paper. The rules every path shares run in ``grpo_kit.config.rules.check_grpo_settings``; the ones
only this loop needs (its integer fields, ``max_steps``, reward timeouts, the scheduler name) are here.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, fields
from typing import Any, Protocol

from grpo_kit.config.rules import (
    GRPO_DEFAULTS,
    GRPO_KIT_DEFAULTS,
    check_grpo_settings,
    check_report_to,
    evaluation_interval,
)
from grpo_kit.core.losses.entropy import ENTROPY_FIELDS, check_entropy_settings
from grpo_kit.core.losses.validation import LossSettings

__all__ = ["ON_REWARD_ERROR", "GRPOLoopConfig", "to_loop_config"]

ON_REWARD_ERROR = ("stop", "skip")


class TrainingFields(Protocol):
    """What ``to_loop_config`` reads of a recipe (``grpo_kit.recipes.Recipe``): its name and GRPO fields."""

    name: str

    def grpo_training(self) -> dict[str, Any]: ...


@dataclass
class GRPOLoopConfig:
    """Settings of the standalone loop. Every name that exists in TRL's ``GRPOConfig`` means the same thing
    and has the same default unless noted. Validated in ``__post_init__``, before any model is loaded.

    Defaults written elsewhere are read from there: the loss hyper-parameters from ``LossSettings``, the
    entropy bonus from ``losses.entropy.ENTROPY_FIELDS``, the group and batch sizes from
    ``settings.GRPO_DEFAULTS``."""

    # --- run ---
    output_dir: str = "trainer_output"
    """Where ``metrics.jsonl``, ``reward_curve.png`` and ``checkpoint-<step>/`` go (TRL: ``output_dir``)."""
    max_steps: int = GRPO_DEFAULTS["max_steps"]
    """Optimizer steps to run. ``-1``: derive from ``num_train_epochs`` (TRL/Trainer semantics)."""
    num_train_epochs: float = GRPO_DEFAULTS["num_train_epochs"]
    """Passes over the prompts when ``max_steps = -1`` (Trainer default 3)."""
    seed: int = GRPO_DEFAULTS["seed"]
    """Seeds python, numpy and torch at the start (Trainer default 42); also orders the prompts."""
    shuffle_dataset: bool = GRPO_DEFAULTS["shuffle_dataset"]
    """Visit prompts in a seeded random order, reshuffled every epoch (TRL default True)."""
    logging_steps: int = GRPO_DEFAULTS["logging_steps"]
    """Write a ``metrics.jsonl`` record every N optimizer steps, averaging the window (TRL default 10)."""
    save_steps: int = GRPO_DEFAULTS["save_steps"]
    """Checkpoint every N optimizer steps and at the end; ``0`` disables checkpoints (Trainer default 500)."""
    eval_strategy: str = GRPO_DEFAULTS["eval_strategy"]
    """``"steps"``: evaluate the held-out rows every ``eval_steps`` optimizer steps and at the last one (TRL's name
    and schedule); ``"no"`` (TRL's default): before and after training only. What is evaluated is the caller's
    ``evaluate`` (``loop.train(evaluate=...)``; ``grpo_kit.runs.during_training`` on a run: greedy, the decoding
    of the evaluations before and after); the loop says when, and keeps its time off ``step_time``."""
    eval_steps: int | None = GRPO_DEFAULTS["eval_steps"]
    """Every how many optimizer steps (``eval_strategy="steps"``; None: every ``logging_steps``, TRL's rule).
    Alone it means ``eval_strategy="steps"`` (``settings.evaluation_interval``, the rule every path shares)."""
    save_total_limit: int | None = None
    """Keep at most this many checkpoints, deleting the oldest (Trainer semantics); None keeps all."""
    resume_from_checkpoint: str | os.PathLike | bool | None = None
    """A ``checkpoint-<step>`` folder to continue from, or True for the latest one in ``output_dir`` (a planned
    run passes the folder its plan resolved)."""
    disable_tqdm: bool = False
    """Hide the progress display (Trainer's name for it): the rich bar on a terminal, plain lines elsewhere."""
    report_to: str | list[str] | None = GRPO_DEFAULTS["report_to"]
    """Where metrics go besides ``metrics.jsonl``, with TRL's values and meaning: ``"none"``, ``"trackio"``
    (local SQLite, offline; ``trackio show``), ``"tensorboard"`` (``<output_dir>/runs``), ``"wandb"``, ``"all"``
    (every one installed) or a list. Metric names are TRL's (``train/reward``). Needs ``grpo-kit[logging]``."""
    log_completions: bool = GRPO_DEFAULTS["log_completions"]
    """At every logging step write the last generation batch's prompts, completions, rewards, advantages and
    ``log_extra`` columns to ``completions/completions_<step:05d>.parquet`` and print some (TRL default False)."""
    num_completions_to_print: int | None = None
    """Rows of that table printed at each logging step; None prints all (TRL default None)."""
    max_bad_steps: int = GRPO_KIT_DEFAULTS["max_bad_steps"]
    """grpo-kit only. A *bad* step has rewards that are all NaN/None, a non-finite loss or grad-norm, or (with
    ``on_reward_error="skip"``) a reward function that raised. It is skipped: no optimizer step, nothing saved
    from it, ``skipped_steps`` counts it. After this many bad steps in a row the run saves its last good
    checkpoint and stops with an error naming the cause (``grpo_kit.loop.bookkeeping.BadStepsError``)."""
    on_reward_error: str = GRPO_KIT_DEFAULTS["on_reward_error"]
    """grpo-kit only. What a reward function that raises does to the run: ``"stop"`` (default) saves a
    checkpoint and raises ``rewards.RewardFunctionError`` naming the function, the row and the completion's
    start; ``"skip"`` reports it and treats the step as bad (see ``max_bad_steps``)."""
    reward_timeout: float | None = GRPO_KIT_DEFAULTS["reward_timeout"]
    """grpo-kit only. Seconds one reward function may take to score a generation batch (``async`` ones: all
    together) before the call counts as failed, handled per ``on_reward_error``; None waits without a bound.
    Generous by default: a model-graded or sandboxed reward legitimately takes seconds, a stuck one forever."""

    # --- batch and generation ---
    num_generations: int = GRPO_DEFAULTS["num_generations"]
    """G, completions sampled per prompt: the group whose rewards are compared (DeepSeekMath). ≥ 2."""
    per_device_train_batch_size: int = GRPO_DEFAULTS["per_device_train_batch_size"]
    """Completions (not prompts) per micro-batch, as in TRL. The generation batch is this times
    ``gradient_accumulation_steps`` and must hold whole groups of ``num_generations``."""
    gradient_accumulation_steps: int = GRPO_DEFAULTS["gradient_accumulation_steps"]
    """Micro-batches per optimizer step; together they are one generation batch (TRL's steps_per_generation)."""
    max_completion_length: int = GRPO_DEFAULTS["max_completion_length"]
    """Maximum new tokens per completion (TRL default 512)."""
    temperature: float = GRPO_DEFAULTS["temperature"]
    """Sampling temperature; the log-probs are computed at the same temperature (TRL default 1.0)."""
    top_p: float = GRPO_DEFAULTS["top_p"]
    """Nucleus sampling: keep the smallest token set with this total probability; 1.0 = off."""
    top_k: int = GRPO_DEFAULTS["top_k"]
    """Keep only the k most likely tokens when sampling; 0 = off (TRL default 0)."""
    min_p: float | None = None
    """Minimum token probability relative to the most likely token; None = off."""
    repetition_penalty: float = GRPO_DEFAULTS["repetition_penalty"]
    """HF generate's repetition penalty; 1.0 = off."""
    chat_template_kwargs: dict[str, Any] | None = None
    """Extra keyword arguments for the chat template (e.g. ``{"enable_thinking": False}``)."""
    bf16: bool = False
    """bf16 mixed precision, Trainer's flag (TRL's default is True; here False: the fp32 loop is the one
    proven equal to TRL step for step). The log-prob forward passes run under ``torch.autocast(bfloat16)``
    as Trainer runs them (weights and gradients stay fp32, log-softmax in fp32), and sampling decodes
    with a bf16 copy of the LoRA-merged weights (``grpo_kit.core.sampling.merged_lora(dtype=...)``). Only where
    the hardware multiplies bf16 natively: a CUDA GPU with compute capability >= 8.0, or a CPU with AMX or
    AVX512-BF16 (there ~2x faster per step, ``benchmarks/bench_loop_vs_trl.py --bf16``); anywhere else
    ``train`` refuses it, since emulated bf16 is slower than fp32. The sampled completions then come from
    the bf16 policy and are scored by the autocast one: a small mismatch TRL has too with vLLM."""

    gradient_checkpointing: bool = False
    """Keep only each decoder layer's input during the log-prob forward pass and recompute the layer in the
    backward pass (Trainer's flag, non-reentrant ``torch.utils.checkpoint`` through transformers'
    ``gradient_checkpointing_enable``; TRL's GRPOConfig defaults it to True). Less memory for more time:
    the benchmark shape's measured trade-off is in docs/benchmarks.md ("A faster step"). Sampling
    never checkpoints (it decodes with a key/value cache, under no gradient). Default False: the fp32 loop
    without it is the one proven equal to TRL, and a 135M model on CPU has the memory."""

    # --- optimisation ---
    learning_rate: float = GRPO_DEFAULTS["learning_rate"]
    """AdamW peak learning rate (TRL's GRPO default 1e-6; LoRA usually wants 1e-5 … 1e-4)."""
    lr_scheduler_type: str = GRPO_DEFAULTS["lr_scheduler_type"]
    """Any ``transformers.SchedulerType`` name: linear, cosine, constant, constant_with_warmup, …"""
    warmup_steps: float = GRPO_DEFAULTS["warmup_steps"]
    """Linear warmup: an int number of steps, or a float in [0, 1) = ratio of ``max_steps`` (transformers 5
    semantics; the older ``warmup_ratio`` is this field with a float)."""
    weight_decay: float = GRPO_DEFAULTS["weight_decay"]
    """AdamW decoupled weight decay, not applied to biases and norm weights (Trainer default 0)."""
    adam_beta1: float = GRPO_DEFAULTS["adam_beta1"]
    adam_beta2: float = GRPO_DEFAULTS["adam_beta2"]
    adam_epsilon: float = GRPO_DEFAULTS["adam_epsilon"]
    max_grad_norm: float = GRPO_DEFAULTS["max_grad_norm"]
    """Clip the global gradient norm to this; ``0`` disables clipping (the norm is still logged)."""

    # --- GRPO ---
    beta: float = LossSettings.beta
    """KL coefficient β; 0 (TRL default) skips the reference model. > 0 needs a LoRA model (see module doc).
    DeepSeek-R1 used 0.001 (https://huggingface.co/papers/2501.12948)."""
    num_iterations: int = GRPO_DEFAULTS["num_iterations"]
    """μ: optimizer steps per generation batch (DeepSeekMath). > 1 makes old log-probs necessary."""
    epsilon: float = LossSettings.epsilon
    """Lower clip ε of the ratio: clip(ρ, 1 − ε, 1 + ε_high) (PPO, https://arxiv.org/abs/1707.06347)."""
    epsilon_high: float | None = LossSettings.epsilon_high
    """Upper clip; None = ``epsilon``. DAPO recommends 0.28 (https://huggingface.co/papers/2503.14476).
    For ``cispo`` it is ε_max, the cap on the IS weight, and must be set (ScaleRL recommends 5.0)."""
    delta: float | None = LossSettings.delta
    """Two-sided GRPO: cap the unclipped ratio at δ (INTELLECT-2, https://huggingface.co/papers/2505.07291)."""
    loss_type: str = LossSettings.loss_type
    """grpo | bnpo | dr_grpo | dapo | cispo | sapo | luspo | vespo (TRL default dapo); see grpo_kit.core.losses."""
    importance_sampling_level: str = LossSettings.importance_sampling_level
    """``token``: one ratio per token; ``sequence``: one per completion (GSPO,
    https://huggingface.co/papers/2507.18071)."""
    scale_rewards: str | bool = GRPO_DEFAULTS["scale_rewards"]
    """group (or True) | batch | none (or False): divide advantages by the group std, the batch std
    (PPO-Lite) or not at all (Dr. GRPO, https://huggingface.co/papers/2503.20783)."""
    reward_weights: list[float] | None = None
    """One weight per reward function (None: all 1.0); ``train(reward_weights=...)`` overrides it."""
    multi_objective_aggregation: str = GRPO_DEFAULTS["multi_objective_aggregation"]
    """sum_then_normalize | normalize_then_sum (GDPO, https://huggingface.co/papers/2601.05242)."""
    mask_truncated_completions: bool = GRPO_DEFAULTS["mask_truncated_completions"]
    """Exclude completions that hit ``max_completion_length`` without EOS from the loss (DAPO)."""
    top_entropy_quantile: float = GRPO_DEFAULTS["top_entropy_quantile"]
    """ρ: keep only the top-ρ quantile of tokens by entropy in the policy loss; 1.0 = all
    (Beyond the 80/20 Rule, https://huggingface.co/papers/2506.01939, recommends 0.2)."""
    use_bias_correction_kl: bool = LossSettings.use_bias_correction_kl
    """Multiply the k3 KL by the IS ratio (DeepSeek-V3.2, https://huggingface.co/papers/2512.02556)."""
    entropy_coef: float = ENTROPY_FIELDS["entropy_coef"]
    """c in L = L_policy − c·H, H the mean per-token entropy (nats) of the tokens the policy loss acts on, for
    every ``loss_type`` alike; 0 (TRL default) = no bonus. With ``use_adaptive_entropy`` the initial c."""
    use_adaptive_entropy: bool = ENTROPY_FIELDS["use_adaptive_entropy"]
    """Skywork-OR1's controller (https://huggingface.co/papers/2505.22312): after each optimizer step c moves
    by ``entropy_coef_delta``, up when the step's entropy ≤ ``entropy_target``, else down, clamped to
    [``entropy_coef_min``, ``entropy_coef_max``]; c is applied only while the entropy is ≤ the target.
    Saved in checkpoints and restored on resume (TRL default False)."""
    entropy_coef_min: float = ENTROPY_FIELDS["entropy_coef_min"]
    """Lower bound of the adaptive c (TRL default 0.0)."""
    entropy_coef_max: float = ENTROPY_FIELDS["entropy_coef_max"]
    """Upper bound of the adaptive c (TRL default 1.0)."""
    entropy_coef_delta: float = ENTROPY_FIELDS["entropy_coef_delta"]
    """Step of the adaptive c per optimizer step (TRL default 0.005)."""
    entropy_target: float = ENTROPY_FIELDS["entropy_target"]
    """Target mean entropy (nats) of the adaptive control (TRL default 0.2). Language models sit at 2-10
    nats per token early on, so 0.2 fires only on near-total collapse: set it near the ``entropy`` logged in
    the first steps (over the high-entropy subset when ``top_entropy_quantile < 1``)."""
    sapo_temperature_pos: float = LossSettings.sapo_temperature_pos
    """SAPO gate temperature for positive advantages (https://huggingface.co/papers/2511.20347)."""
    sapo_temperature_neg: float = LossSettings.sapo_temperature_neg
    """SAPO gate temperature for non-positive advantages."""
    vespo_k_pos: float = LossSettings.vespo_k_pos
    """VESPO power for positive advantages (https://huggingface.co/papers/2602.10693)."""
    vespo_lambda_pos: float = LossSettings.vespo_lambda_pos
    vespo_k_neg: float = LossSettings.vespo_k_neg
    vespo_lambda_neg: float = LossSettings.vespo_lambda_neg

    def __post_init__(self) -> None:
        for name, minimum in (
            ("num_generations", 1),
            ("per_device_train_batch_size", 1),
            ("gradient_accumulation_steps", 1),
            ("max_completion_length", 1),
            ("num_iterations", 1),
            ("logging_steps", 1),
            ("save_steps", 0),
            ("max_steps", -1),
            ("top_k", 0),
        ):
            _check_int(name, getattr(self, name), minimum=minimum)
        # The rules every path shares (group size, whole groups, loss type, advantages, every number's range:
        # settings.NUMERIC_RANGES): grpo_kit.config.rules. What follows is only what the loop adds.
        check_grpo_settings({f.name: getattr(self, f.name) for f in fields(self)})
        check_report_to(self.report_to)
        schedule = {"eval_steps": self.eval_steps, "logging_steps": self.logging_steps}
        if self.eval_strategy != "no":  # a field's default is not a choice: eval_steps alone means "steps"
            schedule["eval_strategy"] = self.eval_strategy
        interval = evaluation_interval(schedule)
        self.eval_strategy, self.eval_steps = ("no", None) if interval is None else ("steps", interval)
        self.scale_rewards = {True: "group", False: "none"}.get(self.scale_rewards, self.scale_rewards)
        if self.max_steps == 0:
            raise ValueError("max_steps=0 trains nothing; set max_steps>0, or -1 to use num_train_epochs.")
        if self.max_steps == -1 and not self.num_train_epochs > 0:
            raise ValueError("with max_steps=-1 the run length comes from num_train_epochs; set it > 0.")
        _check_int("max_bad_steps", self.max_bad_steps, minimum=1)
        if self.reward_timeout is not None and (
            isinstance(self.reward_timeout, bool)
            or not isinstance(self.reward_timeout, (int, float))
            or not 0 < self.reward_timeout < math.inf
        ):
            raise ValueError(
                f"reward_timeout={self.reward_timeout!r}: give the seconds a reward function may take "
                "(a positive number, e.g. 600), or None for no bound."
            )
        if self.on_reward_error not in ON_REWARD_ERROR:
            raise ValueError(
                f"on_reward_error={self.on_reward_error!r}: choose {' or '.join(map(repr, ON_REWARD_ERROR))}."
            )
        if self.num_completions_to_print is not None:
            _check_int("num_completions_to_print", self.num_completions_to_print, minimum=0)
        if self.save_total_limit is not None:
            _check_int("save_total_limit", self.save_total_limit, minimum=1)
        check_entropy_settings({name: getattr(self, name) for name in ENTROPY_FIELDS})
        if self.reward_weights is not None:
            if isinstance(self.reward_weights, (str, bytes)) or not all(
                isinstance(w, (int, float)) and not isinstance(w, bool) for w in self.reward_weights
            ):
                raise TypeError(
                    "reward_weights must be a list of numbers, one per reward function (or None)."
                )
            self.reward_weights = [float(w) for w in self.reward_weights]
        _check_scheduler(self.lr_scheduler_type)

    @property
    def prompts_per_generation(self) -> int:
        """Distinct prompts in one generation batch."""
        return self.per_device_train_batch_size * self.gradient_accumulation_steps // self.num_generations


def _check_int(name: str, value: Any, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int (got {value!r} of type {type(value).__name__}).")
    if value < minimum:
        raise ValueError(f"{name}={value} must be >= {minimum}.")


def _check_scheduler(name: str) -> None:
    from transformers.trainer_utils import SchedulerType

    valid = [s.value for s in SchedulerType]
    if name not in valid:
        raise ValueError(f"lr_scheduler_type={name!r} is unknown; use one of {valid}.")


def to_loop_config(recipe: TrainingFields, **overrides: Any) -> GRPOLoopConfig:
    """A :class:`GRPOLoopConfig` from the recipe's training fields with the same names.

    GRPOConfig fields the standalone loop has no counterpart for (``optim``, ...) are left out with a
    warning that names them; ``overrides`` are applied last and must be GRPOLoopConfig fields.
    """
    loop_fields = {f.name for f in fields(GRPOLoopConfig) if f.init}
    unknown = sorted(set(overrides) - loop_fields)
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)} are not GRPOLoopConfig fields; choose from {', '.join(sorted(loop_fields))}"
        )
    values = recipe.grpo_training()
    kept = {k: v for k, v in values.items() if k in loop_fields}
    dropped = sorted(k for k in values if k not in loop_fields)
    if dropped:
        warnings.warn(
            f"recipe {recipe.name!r}: the standalone loop has no {', '.join(dropped)}; they are ignored "
            "(use --loop trl for the full GRPOConfig).",
            UserWarning,
            stacklevel=2,
        )
    kept.update(overrides)
    return GRPOLoopConfig(**kept)
