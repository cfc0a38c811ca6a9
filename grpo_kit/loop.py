"""The standalone GRPO loop: plain PyTorch + transformers + peft, readable top to bottom, no TRL at run time.

One optimizer step does what TRL's ``GRPOTrainer`` does (trl 1.15.0), with the same names:

1. take ``per_device_train_batch_size * gradient_accumulation_steps / num_generations`` prompts;
2. sample ``num_generations`` (G) completions per prompt (``grpo_kit.sampling``: a KV-cached decode loop
   with ``generate``'s temperature/top-k/top-p/min-p, one prefill per prompt); the completion mask runs
   up to and including the first EOS;
3. score every completion with every reward function (TRL's calling convention), ``None`` -> NaN;
4. group-relative advantages (``grpo_kit.advantages``, proven equal to TRL);
5. old log-probs (only when ``num_iterations > 1``; otherwise ``per_token_logps.detach()`` is exact, as in
   TRL) and reference log-probs with the LoRA adapter disabled (only when ``beta > 0``);
6. per micro-batch: per-token log-probs with gradient, ``compute_loss`` (``grpo_kit.losses``, proven equal
   to TRL), backward; then gradient clipping, optimizer and scheduler step.

Steps 1-5 make a *generation batch*; with ``num_iterations = μ > 1`` it is reused for μ optimizer steps.

What this loop simplifies compared with TRL's GRPOTrainer:

* one process, one device: no accelerate/DeepSpeed/FSDP, no cross-process gathers;
* generation with a plain KV-cached decode loop only (``grpo_kit.sampling``): no vLLM, no continuous
  batching, no tools/environments, no multimodal inputs; ``steps_per_generation`` is always ``gradient_accumulation_steps`` and there is no
  ``generation_batch_size`` knob;
* reward functions are Python callables (sync or ``async``); reward *models* (``nn.Module``) are not called;
* the reference policy is the base model with the LoRA adapter disabled (``with model.disable_adapter():``),
  never a second copy: ``beta > 0`` without LoRA is an error (TRL would load a second model);
  ``sync_ref_model`` and re-training an existing adapter against a "ref" adapter are not supported;
* no entropy bonus / adaptive entropy, no off-policy mask, no vLLM importance-sampling correction,
  no completion tables (``log_completions``), no Hub upload, no mixed precision (float32 on CPU);
* optimizer: ``torch.optim.AdamW`` (no weight decay on biases and norms, like ``Trainer``) with a
  ``transformers.get_scheduler`` schedule; epochs are counted in prompts seen;
* when ``per_device_train_batch_size`` is a multiple of G (the usual case), micro-batches hold whole groups
  and it is the groups that are shuffled (TRL shuffles single completions); each prompt then runs through
  the model once per micro-batch instead of G times (``per_token_logps_grouped``). The summed gradient is
  the same for every loss type except ``bnpo`` (its per-micro-batch token count depends on the split, as does
  the ``top_entropy_quantile`` threshold); under LoRA dropout a group shares one dropout draw on its prompt;
* sampling uses one prefill per prompt, inverse-CDF draws and LoRA merged into ``W + ΔW``
  (``grpo_kit.sampling``) instead of ``generate``'s per-copy prefill, ``torch.multinomial`` and the
  unmerged adapter: the same distribution up to float rounding, other random numbers, and no LoRA dropout
  while sampling (TRL samples in training mode, dropout on);
* entropies are computed without gradient (they only feed the ``entropy`` metric and the
  ``top_entropy_quantile`` mask);
* ``top_entropy_quantile < 1`` drops the low-entropy tokens through the completion mask given to
  ``compute_loss``. With dapo/cispo/vespo/dr_grpo and ``beta = 0`` at token level (the defaults) that is exactly
  TRL's masking; otherwise TRL still averages over (and applies the KL to) every valid token, and this loop
  only over the kept ones.

Around the loop: a rich progress bar, ``metrics.jsonl`` with TRL's metric names, ``reward_curve.png`` at the
end, checkpoints every ``save_steps`` (and on Ctrl-C) that ``resume_from_checkpoint`` continues exactly.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from datasets_prep import is_conversational_prompt, prompt_to_text
from grpo_kit.advantages import compute_advantages_with_metrics, normalize_scale_rewards
from grpo_kit.checkpoint import (
    capture_rng_state,
    is_peft_model,
    latest_checkpoint,
    load_checkpoint,
    restore_rng_state,
    rotate_checkpoints,
    save_checkpoint,
)
from grpo_kit.logprobs import entropy_mask, per_token_logps, per_token_logps_grouped
from grpo_kit.metrics_log import MetricsAccumulator, MetricsWriter
from grpo_kit.sampling import mask_after_eos, merged_lora, sample_completions, stop_token_ids

__all__ = ["GRPOLoopConfig", "LoopResult", "LoopState", "train"]



# ----------------------------------------------------------------------------------------------------------
# Configuration


@dataclass
class GRPOLoopConfig:
    """Settings of the standalone loop. Every name that exists in TRL's ``GRPOConfig`` means the same thing
    and has the same default unless noted. Validated in ``__post_init__``, before any model is loaded."""

    # --- run ---
    output_dir: str = "trainer_output"
    """Where ``metrics.jsonl``, ``reward_curve.png`` and ``checkpoint-<step>/`` go (TRL: ``output_dir``)."""
    max_steps: int = -1
    """Optimizer steps to run. ``-1``: derive from ``num_train_epochs`` (TRL/Trainer semantics)."""
    num_train_epochs: float = 3.0
    """Passes over the prompts when ``max_steps = -1`` (Trainer default 3)."""
    seed: int = 42
    """Seeds python, numpy and torch at the start (Trainer default 42); also orders the prompts."""
    shuffle_dataset: bool = True
    """Visit prompts in a seeded random order, reshuffled every epoch (TRL default True)."""
    logging_steps: int = 10
    """Write a ``metrics.jsonl`` record every N optimizer steps, averaging the window (TRL default 10)."""
    save_steps: int = 500
    """Checkpoint every N optimizer steps and at the end; ``0`` disables checkpoints (Trainer default 500)."""
    save_total_limit: int | None = None
    """Keep at most this many checkpoints, deleting the oldest (Trainer semantics); None keeps all."""
    resume_from_checkpoint: str | bool | None = None
    """A ``checkpoint-<step>`` folder to continue from, or True for the latest one in ``output_dir``."""
    disable_tqdm: bool = False
    """Hide the progress bar (Trainer's name for it)."""

    # --- batch and generation ---
    num_generations: int = 8
    """G, completions sampled per prompt: the group whose rewards are compared (DeepSeekMath). ≥ 2."""
    per_device_train_batch_size: int = 8
    """Completions (not prompts) per micro-batch, as in TRL. The generation batch is this times
    ``gradient_accumulation_steps`` and must hold whole groups of ``num_generations``."""
    gradient_accumulation_steps: int = 1
    """Micro-batches per optimizer step; together they are one generation batch (TRL's steps_per_generation)."""
    max_completion_length: int = 512
    """Maximum new tokens per completion (TRL default 512)."""
    temperature: float = 1.0
    """Sampling temperature; the log-probs are computed at the same temperature (TRL default 1.0)."""
    top_p: float = 1.0
    """Nucleus sampling: keep the smallest token set with this total probability; 1.0 = off."""
    top_k: int = 0
    """Keep only the k most likely tokens when sampling; 0 = off (TRL default 0)."""
    min_p: float | None = None
    """Minimum token probability relative to the most likely token; None = off."""
    repetition_penalty: float = 1.0
    """HF generate's repetition penalty; 1.0 = off."""
    chat_template_kwargs: dict[str, Any] | None = None
    """Extra keyword arguments for the chat template (e.g. ``{"enable_thinking": False}``)."""

    # --- optimisation ---
    learning_rate: float = 1e-6
    """AdamW peak learning rate (TRL's GRPO default 1e-6; LoRA usually wants 1e-5 … 1e-4)."""
    lr_scheduler_type: str = "linear"
    """Any ``transformers.SchedulerType`` name: linear, cosine, constant, constant_with_warmup, …"""
    warmup_steps: float = 0
    """Linear warmup: an int number of steps, or a float in [0, 1) = ratio of ``max_steps`` (transformers 5
    semantics; the older ``warmup_ratio`` is this field with a float)."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay, not applied to biases and norm weights (Trainer default 0)."""
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    max_grad_norm: float = 1.0
    """Clip the global gradient norm to this; ``0`` disables clipping (the norm is still logged)."""

    # --- GRPO ---
    beta: float = 0.0
    """KL coefficient β; 0 (TRL default) skips the reference model. > 0 needs a LoRA model (see module doc).
    DeepSeek-R1 used 0.001 (https://huggingface.co/papers/2501.12948)."""
    num_iterations: int = 1
    """μ: optimizer steps per generation batch (DeepSeekMath). > 1 makes old log-probs necessary."""
    epsilon: float = 0.2
    """Lower clip ε of the ratio: clip(ρ, 1 − ε, 1 + ε_high) (PPO, https://arxiv.org/abs/1707.06347)."""
    epsilon_high: float | None = None
    """Upper clip; None = ``epsilon``. DAPO recommends 0.28 (https://huggingface.co/papers/2503.14476).
    For ``cispo`` it is ε_max, the cap on the IS weight, and must be set (ScaleRL recommends 5.0)."""
    delta: float | None = None
    """Two-sided GRPO: cap the unclipped ratio at δ (INTELLECT-2, https://huggingface.co/papers/2505.07291)."""
    loss_type: str = "dapo"
    """grpo | bnpo | dr_grpo | dapo | cispo | sapo | luspo | vespo (TRL default dapo); see grpo_kit.losses."""
    importance_sampling_level: str = "token"
    """``token``: one ratio per token; ``sequence``: one per completion (GSPO,
    https://huggingface.co/papers/2507.18071)."""
    scale_rewards: str | bool = "group"
    """group (or True) | batch | none (or False): divide advantages by the group std, the batch std
    (PPO-Lite) or not at all (Dr. GRPO, https://huggingface.co/papers/2503.20783)."""
    reward_weights: list[float] | None = None
    """One weight per reward function (None: all 1.0); ``train(reward_weights=...)`` overrides it."""
    multi_objective_aggregation: str = "sum_then_normalize"
    """sum_then_normalize | normalize_then_sum (GDPO, https://huggingface.co/papers/2601.05242)."""
    mask_truncated_completions: bool = False
    """Exclude completions that hit ``max_completion_length`` without EOS from the loss (DAPO)."""
    top_entropy_quantile: float = 1.0
    """ρ: keep only the top-ρ quantile of tokens by entropy in the policy loss; 1.0 = all
    (Beyond the 80/20 Rule, https://huggingface.co/papers/2506.01939, recommends 0.2)."""
    use_bias_correction_kl: bool = True
    """Multiply the k3 KL by the IS ratio (DeepSeek-V3.2, https://huggingface.co/papers/2512.02556)."""
    sapo_temperature_pos: float = 1.0
    """SAPO gate temperature for positive advantages (https://huggingface.co/papers/2511.20347)."""
    sapo_temperature_neg: float = 1.05
    """SAPO gate temperature for non-positive advantages."""
    vespo_k_pos: float = 2.0
    """VESPO power for positive advantages (https://huggingface.co/papers/2602.10693)."""
    vespo_lambda_pos: float = 3.0
    vespo_k_neg: float = 3.0
    vespo_lambda_neg: float = 2.0

    def __post_init__(self) -> None:
        _check_int("num_generations", self.num_generations, minimum=1)
        if self.num_generations < 2:
            raise ValueError(
                f"num_generations={self.num_generations}: GRPO compares each completion with the others of its "
                "group, so it needs at least 2 completions per prompt; set num_generations>=2 (8 is TRL's default)."
            )
        _check_int("per_device_train_batch_size", self.per_device_train_batch_size, minimum=1)
        _check_int("gradient_accumulation_steps", self.gradient_accumulation_steps, minimum=1)
        generation_batch = self.per_device_train_batch_size * self.gradient_accumulation_steps
        if generation_batch % self.num_generations != 0:
            raise ValueError(
                f"per_device_train_batch_size ({self.per_device_train_batch_size}) × gradient_accumulation_steps "
                f"({self.gradient_accumulation_steps}) = {generation_batch} completions is not divisible by "
                f"num_generations ({self.num_generations}); the generation batch must hold whole groups. "
                f"Set per_device_train_batch_size to a multiple of {self.num_generations}, or change "
                "gradient_accumulation_steps/num_generations."
            )
        _check_int("max_completion_length", self.max_completion_length, minimum=1)
        _check_int("num_iterations", self.num_iterations, minimum=1)
        _check_int("logging_steps", self.logging_steps, minimum=1)
        _check_int("save_steps", self.save_steps, minimum=0)
        _check_int("max_steps", self.max_steps, minimum=-1)
        if self.max_steps == 0:
            raise ValueError("max_steps=0 trains nothing; set max_steps>0, or -1 to use num_train_epochs.")
        if self.max_steps == -1 and not self.num_train_epochs > 0:
            raise ValueError("with max_steps=-1 the run length comes from num_train_epochs; set it > 0.")
        if self.save_total_limit is not None:
            _check_int("save_total_limit", self.save_total_limit, minimum=1)
        if not self.temperature > 0:
            raise ValueError(f"temperature={self.temperature} must be > 0 (sampling is always on in GRPO); try 1.0.")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p={self.top_p} must be in (0, 1]; 1.0 turns nucleus sampling off.")
        _check_int("top_k", self.top_k, minimum=0)
        if self.learning_rate < 0 or self.beta < 0 or self.epsilon < 0 or self.weight_decay < 0:
            raise ValueError("learning_rate, beta, epsilon and weight_decay must be >= 0.")
        if self.max_grad_norm < 0:
            raise ValueError(f"max_grad_norm={self.max_grad_norm} must be >= 0 (0 disables clipping).")
        if not 0.0 <= self.top_entropy_quantile <= 1.0:
            raise ValueError(
                f"top_entropy_quantile={self.top_entropy_quantile} must be in [0, 1]; 1.0 keeps every token, "
                "the 80/20 paper uses 0.2."
            )
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps={self.warmup_steps} must be >= 0 (an int, or a ratio in [0, 1)).")
        self.scale_rewards = normalize_scale_rewards(self.scale_rewards)
        if self.multi_objective_aggregation not in ("sum_then_normalize", "normalize_then_sum"):
            raise ValueError(
                f"multi_objective_aggregation={self.multi_objective_aggregation!r}: use 'sum_then_normalize' "
                "or 'normalize_then_sum'."
            )
        if self.reward_weights is not None:
            if isinstance(self.reward_weights, (str, bytes)) or not all(
                isinstance(w, (int, float)) and not isinstance(w, bool) for w in self.reward_weights
            ):
                raise TypeError("reward_weights must be a list of numbers, one per reward function (or None).")
            self.reward_weights = [float(w) for w in self.reward_weights]
        _check_scheduler(self.lr_scheduler_type)
        _validate_loss_settings(self)

    @property
    def prompts_per_generation(self) -> int:
        """Distinct prompts in one generation batch."""
        return self.per_device_train_batch_size * self.gradient_accumulation_steps // self.num_generations

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


def _validate_loss_settings(config: GRPOLoopConfig) -> None:
    """The loss-type rules every training path shares (luspo needs sequence level, vespo token level, cispo
    an explicit epsilon_high, …) live in ``grpo_kit.losses.validation``; the loop runs them here."""
    from grpo_kit.losses import validate_config

    validate_config(config)


# ----------------------------------------------------------------------------------------------------------
# State handed to reward functions and callbacks, and what train() returns


@dataclass
class LoopState:
    """The subset of transformers' ``TrainerState`` that reward functions read (``trainer_state`` kwarg)."""

    global_step: int = 0
    max_steps: int = 0
    epoch: float = 0.0
    num_input_tokens_seen: int = 0
    prompts_seen: int = 0  # data position: how many prompts (not completions) have been consumed
    log_history: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class LoopResult:
    global_step: int
    losses: list[float]  # one per optimizer step run in this call, in order
    log_history: list[dict[str, Any]]  # the metrics.jsonl records, including those before a resume
    output_dir: Path
    metrics_path: Path
    reward_curve_png: Path | None
    last_checkpoint: Path | None
    interrupted: bool = False
    step_losses: dict[int, float] = field(default_factory=dict)  # step -> loss for the steps run here


# ----------------------------------------------------------------------------------------------------------
# The loop


def train(
    model: torch.nn.Module,
    tokenizer: Any,
    train_dataset: Any,
    reward_funcs: Callable | Sequence[Callable],
    config: GRPOLoopConfig,
    *,
    reward_weights: Sequence[float] | None = None,
    callbacks: Sequence[Callable[[LoopState, dict[str, float]], None]] | None = None,
) -> LoopResult:
    """Train ``model`` in place with GRPO on the ``prompt`` column of ``train_dataset``.

    ``reward_funcs``: one or more TRL-style reward functions ``fn(prompts, completions, completion_ids,
    trainer_state, **dataset_columns) -> list[float | None]`` (``async def`` allowed). ``callbacks`` are called
    as ``cb(state, step_metrics)`` after every optimizer step. Ctrl-C saves a checkpoint and returns with
    ``interrupted=True``; pass that checkpoint (or ``resume_from_checkpoint=True``) to continue.
    """
    if not isinstance(config, GRPOLoopConfig):
        raise TypeError(f"config must be a GRPOLoopConfig, not {type(config).__name__}.")
    reward_funcs = [reward_funcs] if callable(reward_funcs) else list(reward_funcs)
    if not reward_funcs or not all(callable(f) for f in reward_funcs):
        raise TypeError("reward_funcs must be a callable or a non-empty list of callables (TRL reward functions).")
    reward_names = [_reward_name(f) for f in reward_funcs]
    weights = list(reward_weights) if reward_weights is not None else config.reward_weights
    if weights is not None and len(weights) != len(reward_funcs):
        raise ValueError(f"{len(weights)} reward_weights for {len(reward_funcs)} reward functions; give one each.")
    if len(train_dataset) == 0 or "prompt" not in train_dataset[0]:
        raise ValueError("train_dataset needs rows with a 'prompt' column (text or a list of chat messages).")
    if config.beta > 0 and not is_peft_model(model):
        raise ValueError(
            f"beta={config.beta} needs reference log-probs; this loop gets them by disabling the LoRA adapter "
            "(no second model copy), but the model has no adapter. Load it with LoRA "
            "(grpo_kit.models.load_model(..., lora=...)) or set beta=0.0."
        )
    if tokenizer.pad_token_id is None:
        raise ValueError("the tokenizer has no pad token; set tokenizer.pad_token (grpo_kit.models does this).")

    output_dir = Path(config.output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    _seed_everything(config.seed)
    device = next(model.parameters()).device
    eos_token_ids = stop_token_ids(model, tokenizer)
    max_steps = _resolve_max_steps(config, len(train_dataset))

    model.train()  # TRL trains (and samples) with the model in training mode
    optimizer = _build_optimizer(model, config)
    scheduler = _build_scheduler(optimizer, config, max_steps)
    state = LoopState(max_steps=max_steps)
    rollout: dict[str, Any] | None = None  # the current generation batch, reused num_iterations times

    # --- resume: weights, optimizer, scheduler, data position, the pending generation batch, RNG last ---
    checkpoint = _checkpoint_to_resume(config)
    if checkpoint is not None:
        saved, rng_state, rollout = load_checkpoint(checkpoint, model=model, optimizer=optimizer, scheduler=scheduler)
        state.global_step = saved["global_step"]
        state.prompts_seen = saved["prompts_seen"]
        state.epoch = saved["epoch"]
        state.num_input_tokens_seen = saved["num_input_tokens_seen"]
        state.log_history = saved["log_history"]
        restore_rng_state(rng_state)
    writer = MetricsWriter(output_dir / "metrics.jsonl", keep_up_to_step=state.global_step if checkpoint else None)

    accumulator = MetricsAccumulator()
    step_losses: dict[int, float] = {}
    last_checkpoint: Path | None = checkpoint
    # What a checkpoint needs if Ctrl-C lands in the middle of the next step: the RNG state and generation
    # batch as they were when the last step *finished* (weights and optimizer only change at its very end).
    snapshot = _snapshot(state, rollout)
    interrupted = False
    progress = _progress_bar(config.disable_tqdm)

    try:
        with progress:
            task = progress.add_task("GRPO", total=max_steps, completed=state.global_step, info="")
            while state.global_step < max_steps:
                step_start = time.perf_counter()

                # 1-5. A new generation batch every num_iterations steps (TRL: every steps_per_generation * μ).
                if rollout is None or state.global_step % config.num_iterations == 0:
                    rollout = _generate_and_score(
                        model, tokenizer, train_dataset, reward_funcs, reward_names, weights, config, state,
                        accumulator, eos_token_ids, device,
                    )

                # 6. One optimizer step over the gradient_accumulation_steps micro-batches of that batch.
                step_loss = 0.0
                for micro_batch in rollout["micro_batches"]:
                    loss, loss_metrics = _micro_batch_loss(model, micro_batch, rollout, config)
                    loss.backward()
                    step_loss += loss.item()
                    accumulator.update(loss_metrics)
                trainable = [p for p in model.parameters() if p.requires_grad]
                max_norm = config.max_grad_norm if config.max_grad_norm > 0 else float("inf")
                grad_norm = torch.nn.utils.clip_grad_norm_(trainable, max_norm)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                state.global_step += 1
                snapshot = _snapshot(state, rollout)

                # --- bookkeeping: metrics, callbacks, progress, checkpoints ---
                step_losses[state.global_step] = step_loss
                accumulator.update({
                    "loss": step_loss,
                    "grad_norm": grad_norm.item(),
                    "learning_rate": scheduler.get_last_lr()[0],
                    "step_time": time.perf_counter() - step_start,
                })
                if state.global_step % config.logging_steps == 0 or state.global_step == max_steps:
                    record = {"step": state.global_step, "epoch": round(state.epoch, 4), **accumulator.flush()}
                    state.log_history.append(record)
                    writer.write(record)
                for callback in callbacks or ():
                    callback(state, {"step": state.global_step, "loss": step_loss})
                reward_text = _last_reward_text(state.log_history)
                progress.update(task, completed=state.global_step, info=f"loss {step_loss:+.4f}{reward_text}")
                if config.save_steps and (
                    state.global_step % config.save_steps == 0 or state.global_step == max_steps
                ):
                    last_checkpoint = _save(output_dir, model, tokenizer, optimizer, scheduler, state, snapshot, config)
    except KeyboardInterrupt:
        # Ctrl-C: keep what the finished steps learned, so `resume_from_checkpoint` continues exactly here.
        interrupted = True
        optimizer.zero_grad(set_to_none=True)
        if state.global_step > 0:
            last_checkpoint = _save(output_dir, model, tokenizer, optimizer, scheduler, state, snapshot, config)
            print(f"Interrupted after step {state.global_step}; checkpoint saved to {last_checkpoint}. "
                  "Resume with resume_from_checkpoint=True (CLI: --resume).")
        else:
            print("Interrupted before the first optimizer step finished; nothing to save.")

    png = None
    if any(r.get("reward") is not None for r in state.log_history):
        from grpo_kit.plots import plot_reward_curve

        png = plot_reward_curve(state.log_history, output_dir / "reward_curve.png")
    return LoopResult(
        global_step=state.global_step,
        losses=[step_losses[s] for s in sorted(step_losses)],
        log_history=state.log_history,
        output_dir=output_dir,
        metrics_path=writer.path,
        reward_curve_png=png,
        last_checkpoint=last_checkpoint,
        interrupted=interrupted,
        step_losses=step_losses,
    )


# ----------------------------------------------------------------------------------------------------------
# Steps 1-5: one generation batch


def _generate_and_score(
    model, tokenizer, dataset, reward_funcs, reward_names, reward_weights, config, state, accumulator,
    eos_token_ids, device,
) -> dict[str, Any]:
    G = config.num_generations

    # 1. Prompts: each one repeated G times, its completions next to each other (TRL's RepeatSampler order).
    unique_rows = _next_rows(dataset, state, config)
    rows = [row for row in unique_rows for _ in range(G)]
    prompts = [row["prompt"] for row in rows]
    conversational = is_conversational_prompt(prompts[0])
    unique_ids, unique_mask = _tokenize_prompts(tokenizer, [r["prompt"] for r in unique_rows], conversational,
                                                config, device)  # (N/G, P)
    prompt_ids = unique_ids.repeat_interleave(G, dim=0)  # (N, P)
    prompt_mask = unique_mask.repeat_interleave(G, dim=0)  # (N, P)

    # 2. Sample completions (one prefill per prompt, see grpo_kit.sampling); mask everything after the first EOS.
    with merged_lora(model):  # one matmul per adapted layer while decoding (see grpo_kit.sampling)
        sampled = sample_completions(
            model, unique_ids, unique_mask, num_generations=G, max_new_tokens=config.max_completion_length,
            eos_token_ids=eos_token_ids, pad_token_id=tokenizer.pad_token_id, temperature=config.temperature,
            top_k=config.top_k, top_p=config.top_p, min_p=config.min_p, repetition_penalty=config.repetition_penalty,
        )  # (N, T)
    completion_ids, completion_mask, is_truncated = mask_after_eos(sampled, eos_token_ids, tokenizer.pad_token_id)
    lengths = completion_mask.sum(1)  # (N,) tokens up to and including EOS
    completion_ids_list = [ids[: int(n)].tolist() for ids, n in zip(completion_ids, lengths)]
    texts = tokenizer.batch_decode(completion_ids_list, skip_special_tokens=True)
    completions = [[{"role": "assistant", "content": t}] for t in texts] if conversational else texts
    _log_completion_metrics(accumulator, state, prompt_mask, lengths, is_truncated)
    if config.mask_truncated_completions:  # DAPO: a truncated completion has no reliable reward
        completion_mask = completion_mask * (~is_truncated).unsqueeze(1).long()  # (N, T)

    # 3-4. Rewards (N, F) with NaN for None, then group-relative advantages (N,).
    rewards_per_func = _score(reward_funcs, reward_names, rows, prompts, completions, completion_ids_list,
                              state, accumulator)
    result = compute_advantages_with_metrics(
        rewards_per_func, G, reward_weights=reward_weights, scale_rewards=config.scale_rewards,
        multi_objective_aggregation=config.multi_objective_aggregation, reward_func_names=reward_names,
    )
    accumulator.update(result.metrics)

    # Cut the batch into gradient_accumulation_steps micro-batches in a random order (TRL shuffles too).
    # When a micro-batch holds whole groups, we shuffle groups instead of completions, so each prompt is
    # run through the model once per micro-batch (per_token_logps_grouped); the summed gradient is the same.
    mb = config.per_device_train_batch_size
    grouped = mb % G == 0
    if grouped:
        group_order = torch.randperm(unique_ids.size(0))  # (N/G,)
        chunks = [(groups, (groups.unsqueeze(1) * G + torch.arange(G)).flatten())  # prompt rows, completion rows
                  for groups in group_order.split(mb // G)]
    else:
        chunks = [(order, order) for order in torch.randperm(prompt_ids.size(0)).split(mb)]
    micro_batches = []
    for prompt_rows, completion_rows in chunks:
        micro_batch = {
            "prompt_ids": (unique_ids if grouped else prompt_ids)[prompt_rows],  # (b, P) b = mb/G or mb
            "prompt_mask": (unique_mask if grouped else prompt_mask)[prompt_rows],  # (b, P)
            "group_size": G if grouped else 1,
            "completion_ids": completion_ids[completion_rows],  # (mb, T)
            "completion_mask": completion_mask[completion_rows],  # (mb, T)
            "advantages": result.advantages[completion_rows].to(device),  # (mb,)
            "old_per_token_logps": None,
            "ref_per_token_logps": None,
        }
        # 5. Log-probs that stay fixed during the update. Old ones only matter when the batch is reused
        #    (num_iterations > 1); otherwise ratio = exp(logp - logp.detach()) = 1 and TRL skips them too.
        with torch.no_grad():
            if config.num_iterations > 1:
                micro_batch["old_per_token_logps"], _ = _score_completions(model, micro_batch, config)  # (mb, T)
            if config.beta > 0:
                with model.disable_adapter():  # the base model *is* the reference policy
                    micro_batch["ref_per_token_logps"], _ = _score_completions(model, micro_batch, config)
        micro_batches.append(micro_batch)
    return {
        "micro_batches": micro_batches,
        # dapo/cispo/vespo normalise by the tokens of the whole generation batch, not the micro-batch
        "num_items_in_batch": completion_mask.sum(),
    }


def _score_completions(model, micro_batch, config, compute_entropy=False):
    """Per-token log-probs (and entropies) of a micro-batch's completions under the current model."""
    if micro_batch["group_size"] > 1:
        return per_token_logps_grouped(
            model, micro_batch["prompt_ids"], micro_batch["prompt_mask"], micro_batch["completion_ids"],
            micro_batch["completion_mask"], micro_batch["group_size"], temperature=config.temperature,
            compute_entropy=compute_entropy,
        )  # (mb, T), (mb, T) | None
    input_ids = torch.cat([micro_batch["prompt_ids"], micro_batch["completion_ids"]], dim=1)  # (mb, P+T)
    attention_mask = torch.cat([micro_batch["prompt_mask"], micro_batch["completion_mask"]], dim=1)  # (mb, P+T)
    return per_token_logps(model, input_ids, attention_mask, micro_batch["completion_ids"].size(1),
                           temperature=config.temperature, compute_entropy=compute_entropy)


def _micro_batch_loss(model, micro_batch, rollout, config) -> tuple[torch.Tensor, dict[str, float]]:
    from grpo_kit.losses import compute_loss

    mask = micro_batch["completion_mask"]  # (mb, T)
    logps, entropies = _score_completions(model, micro_batch, config, compute_entropy=True)  # (mb, T), (mb, T)
    loss_mask = mask
    if config.top_entropy_quantile < 1.0:  # train only on the high-entropy "forking" tokens
        loss_mask = mask * entropy_mask(entropies, mask, config.top_entropy_quantile).long()  # (mb, T)
    loss, metrics = compute_loss(
        logps, micro_batch["advantages"], loss_mask,
        old_per_token_logps=micro_batch["old_per_token_logps"],
        ref_per_token_logps=micro_batch["ref_per_token_logps"],
        loss_type=config.loss_type, beta=config.beta, epsilon=config.epsilon,
        epsilon_high=config.epsilon_high, delta=config.delta,
        importance_sampling_level=config.importance_sampling_level,
        use_bias_correction_kl=config.use_bias_correction_kl,
        max_completion_length=config.max_completion_length,
        num_items_in_batch=rollout["num_items_in_batch"],
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        sapo_temperature_pos=config.sapo_temperature_pos, sapo_temperature_neg=config.sapo_temperature_neg,
        vespo_k_pos=config.vespo_k_pos, vespo_lambda_pos=config.vespo_lambda_pos,
        vespo_k_neg=config.vespo_k_neg, vespo_lambda_neg=config.vespo_lambda_neg,
    )
    metrics = dict(metrics)
    metrics.pop("loss", None)  # the logged loss is the sum over micro-batches, added by the loop
    tokens = mask.sum().clamp(min=1)
    metrics["entropy"] = ((entropies * mask).sum() / tokens).item()  # TRL: mean over valid tokens
    return loss, metrics


# ----------------------------------------------------------------------------------------------------------
# Helpers: data, tokenisation, sampling, rewards


def _next_rows(dataset, state: LoopState, config: GRPOLoopConfig) -> list[dict[str, Any]]:
    """The next ``prompts_per_generation`` rows in the seeded per-epoch order; advances the data position."""
    n = len(dataset)
    rows = []
    for k in range(state.prompts_seen, state.prompts_seen + config.prompts_per_generation):
        epoch, position = divmod(k, n)
        rows.append(dict(dataset[int(_epoch_order(n, config.seed, epoch, config.shuffle_dataset)[position])]))
    state.prompts_seen += config.prompts_per_generation
    state.epoch = state.prompts_seen / n
    return rows


_ORDER_CACHE: dict[tuple[int, int, int, bool], list[int]] = {}


def _epoch_order(n: int, seed: int, epoch: int, shuffle: bool) -> list[int]:
    """A permutation of range(n) that depends only on (seed, epoch): resuming needs no sampler state."""
    key = (n, seed, epoch, shuffle)
    if key not in _ORDER_CACHE:
        if shuffle:
            generator = torch.Generator().manual_seed(seed + epoch)
            _ORDER_CACHE[key] = torch.randperm(n, generator=generator).tolist()
        else:
            _ORDER_CACHE[key] = list(range(n))
    return _ORDER_CACHE[key]


def _tokenize_prompts(tokenizer, prompts, conversational, config, device) -> tuple[torch.Tensor, torch.Tensor]:
    texts = [prompt_to_text(p, tokenizer, **(config.chat_template_kwargs or {})) for p in prompts]
    # The chat template already wrote the special tokens; plain text gets the tokenizer's own (TRL does the same).
    encoded = tokenizer(texts, padding=True, padding_side="left", return_tensors="pt",
                        add_special_tokens=not conversational)
    return encoded["input_ids"].to(device), encoded["attention_mask"].to(device)  # (N, P), (N, P)


def _log_completion_metrics(accumulator, state, prompt_mask, lengths, is_truncated) -> None:
    state.num_input_tokens_seen += int(prompt_mask.sum() + lengths.sum())
    lengths = lengths.float()
    terminated = lengths[~is_truncated]
    if terminated.numel() == 0:  # TRL's edge case: no completion ended with EOS
        terminated = torch.zeros(1)
    accumulator.update({
        "num_tokens": state.num_input_tokens_seen,
        "completions/mean_length": lengths.mean().item(),
        "completions/min_length": lengths.min().item(),
        "completions/max_length": lengths.max().item(),
        "completions/clipped_ratio": is_truncated.float().mean().item(),
        "completions/mean_terminated_length": terminated.mean().item(),
        "completions/min_terminated_length": terminated.min().item(),
        "completions/max_terminated_length": terminated.max().item(),
    })


def _reward_name(func: Callable) -> str:
    return getattr(func, "__name__", None) or type(func).__name__


def _score(reward_funcs, reward_names, rows, prompts, completions, completion_ids_list, state, accumulator):
    """Call every reward function TRL's way; returns ``(N, F)`` float32 with NaN for ``None``."""
    # Dataset columns other than the prompt reach the reward functions as keyword arguments (one per completion).
    columns = {k: [row[k] for row in rows] for k in rows[0] if k not in ("prompt", "completion", "completion_ids")}
    kwargs = dict(
        prompts=prompts, completions=completions, completion_ids=completion_ids_list, trainer_state=state,
        log_metric=accumulator.add, **columns,
    )
    outputs: dict[int, list] = {}
    async_funcs = []
    for i, func in enumerate(reward_funcs):
        if _is_async(func):
            async_funcs.append((i, func))
        else:
            outputs[i] = func(**kwargs)
    if async_funcs:
        async def gather_all():
            return await asyncio.gather(*(func(**kwargs) for _, func in async_funcs))

        # A worker thread owns a fresh event loop, so this also works inside Jupyter/marimo's running loop.
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            results = pool.submit(asyncio.run, gather_all()).result()
        outputs.update({i: r for (i, _), r in zip(async_funcs, results)})

    rewards = torch.full((len(prompts), len(reward_funcs)), math.nan, dtype=torch.float32)  # (N, F)
    for i, name in enumerate(reward_names):
        values = list(outputs[i])
        if len(values) != len(prompts):
            raise ValueError(f"reward function {name!r} returned {len(values)} rewards for {len(prompts)} "
                             "completions; return exactly one reward (or None) per completion.")
        rewards[:, i] = torch.tensor([math.nan if v is None else float(v) for v in values], dtype=torch.float32)
    return rewards


def _is_async(func: Callable) -> bool:
    call = type(func).__call__ if not inspect.isfunction(func) else None  # async callable objects
    return inspect.iscoroutinefunction(func) or (call is not None and inspect.iscoroutinefunction(call))


# ----------------------------------------------------------------------------------------------------------
# Helpers: optimisation, schedule, run length, checkpoints, display


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _resolve_max_steps(config: GRPOLoopConfig, num_prompts: int) -> int:
    if config.max_steps > 0:
        return config.max_steps
    generations_per_epoch = math.ceil(num_prompts / config.prompts_per_generation)
    return max(1, math.ceil(config.num_train_epochs * generations_per_epoch)) * config.num_iterations


def _build_optimizer(model, config: GRPOLoopConfig) -> torch.optim.Optimizer:
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        # Trainer's rule: no weight decay on biases and normalisation weights (1-D tensors).
        (no_decay if param.ndim < 2 or name.endswith(".bias") else decay).append(param)
    if not decay and not no_decay:
        raise ValueError("the model has no trainable parameters; add a LoRA adapter or unfreeze some weights.")
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW([g for g in groups if g["params"]], lr=config.learning_rate,
                             betas=(config.adam_beta1, config.adam_beta2), eps=config.adam_epsilon)


def _build_scheduler(optimizer, config: GRPOLoopConfig, max_steps: int):
    from transformers import get_scheduler

    warmup = config.warmup_steps
    warmup = math.ceil(warmup * max_steps) if isinstance(warmup, float) and warmup < 1 else int(warmup)
    return get_scheduler(config.lr_scheduler_type, optimizer, num_warmup_steps=warmup, num_training_steps=max_steps)


def _checkpoint_to_resume(config: GRPOLoopConfig) -> Path | None:
    target = config.resume_from_checkpoint
    if target in (None, False):
        return None
    if target is True:
        found = latest_checkpoint(config.output_dir)
        if found is None:
            raise FileNotFoundError(f"resume_from_checkpoint=True but {config.output_dir} has no checkpoint-<step> "
                                    "folder; run without resuming first, or pass a checkpoint path.")
        return found
    path = Path(target)
    if not path.is_dir():
        raise FileNotFoundError(f"resume_from_checkpoint={target!r} is not a folder; pass a checkpoint-<step> path.")
    return path


def _snapshot(state: LoopState, rollout: dict[str, Any] | None) -> dict[str, Any]:
    """Everything that moves during a step besides weights/optimizer/scheduler (which only change at its end),
    taken when a step has finished: a Ctrl-C in the middle of the next step saves this, not the half-step."""
    return {"rng": capture_rng_state(), "rollout": rollout, "prompts_seen": state.prompts_seen,
            "epoch": state.epoch, "num_input_tokens_seen": state.num_input_tokens_seen}


def _save(output_dir, model, tokenizer, optimizer, scheduler, state, snapshot, config) -> Path:
    # Mid-block of a reused generation batch, the batch itself is part of the state to continue exactly.
    pending = snapshot["rollout"] if state.global_step % config.num_iterations != 0 else None
    trainer_state = {
        "global_step": state.global_step, "max_steps": state.max_steps, "epoch": snapshot["epoch"],
        "prompts_seen": snapshot["prompts_seen"], "num_input_tokens_seen": snapshot["num_input_tokens_seen"],
        "log_history": state.log_history, "config": {f.name: getattr(config, f.name) for f in fields(config)},
    }
    path = save_checkpoint(output_dir / f"checkpoint-{state.global_step}", model=model, tokenizer=tokenizer,
                           optimizer=optimizer, scheduler=scheduler, trainer_state=trainer_state,
                           rng_state=snapshot["rng"], rollout=pending)
    rotate_checkpoints(output_dir, config.save_total_limit)
    return path


def _progress_bar(disable: bool):
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    TimeRemainingColumn(), TextColumn("{task.fields[info]}"), disable=disable)


def _last_reward_text(log_history) -> str:
    for record in reversed(log_history):
        if record.get("reward") is not None:
            return f" | reward {record['reward']:.3f}"
    return ""
