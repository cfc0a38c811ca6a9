"""The plumbing of ``grpo_kit.loop.training.train()``: everything around the GRPO step, kept out of ``loop.py`` so that
file reads as the algorithm.

Before the first step: the inputs checked (reward models become reward functions; weights, the ``prompt``
column, the context, LoRA for ``beta > 0``, native bf16, a pad token), the seed, the run length, AdamW and its
learning-rate schedule, the bookkeeping (``grpo_kit.loop.bookkeeping.RunContext``, which then resumes). Around
the steps: logging a generation batch (advantage metrics, the completions table), forgetting what a bad step
left behind, writing the completions table at logging steps.

Simplifications (``grpo_kit.loop.training``'s docstring lists them all): ``torch.optim.AdamW`` only, with ``Trainer``'s
rule of no weight decay on biases and normalisation weights; the data order needs no sampler state (``loop``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from grpo_kit.artifacts.completions_table import CompletionsTable
from grpo_kit.config.loop import GRPOLoopConfig
from grpo_kit.core.losses.entropy import EntropyControl
from grpo_kit.core.sampling import check_fits_context
from grpo_kit.loop.bookkeeping import RunContext
from grpo_kit.models.lora import is_peft_model
from grpo_kit.rollout.reward_models import RewardModelFunc, as_reward_funcs
from grpo_kit.support.hardware import require_native_bf16

__all__ = [
    "build_optimizer",
    "build_scheduler",
    "check_inputs",
    "forget_bad_step",
    "log_generation_batch",
    "resolve_max_steps",
    "reward_name",
    "seed_everything",
    "start_run",
    "write_completions",
]


# ----------------------------------------------------------------------------------------------------------
# PLUMBING: before the first step (inputs, seed, run length, optimizer, schedule, bookkeeping)


def check_inputs(
    model, tokenizer, train_dataset, reward_funcs, config, reward_weights, reward_processing_classes=None
):
    """Refuse what the loop cannot train on; returns the reward functions (models wrapped) and weights."""
    if not isinstance(config, GRPOLoopConfig):
        raise TypeError(f"config must be a GRPOLoopConfig, not {type(config).__name__}.")
    # Reward model ids/paths/models become reward functions (refused unless sequence-classification).
    reward_funcs = as_reward_funcs(
        reward_funcs, reward_processing_classes, chat_template_kwargs=config.chat_template_kwargs
    )
    device = next(model.parameters()).device
    for func in reward_funcs:
        if isinstance(func, RewardModelFunc):
            func.to(device)
    weights = list(reward_weights) if reward_weights is not None else config.reward_weights
    if weights is not None and len(weights) != len(reward_funcs):
        raise ValueError(
            f"{len(weights)} reward_weights for {len(reward_funcs)} reward functions; give one each."
        )
    if len(train_dataset) == 0 or "prompt" not in train_dataset[0]:
        raise ValueError("train_dataset needs rows with a 'prompt' column (text or a list of chat messages).")
    check_fits_context(
        model, 1, config.max_completion_length
    )  # every batch is checked again with its prompts
    if config.beta > 0 and not is_peft_model(model):
        raise ValueError(
            f"beta={config.beta} needs reference log-probs; this loop gets them by disabling the LoRA adapter "
            "(no second model copy), but the model has no adapter. Load it with LoRA "
            "(grpo_kit.models.load_model(..., lora=...)) or set beta=0.0."
        )
    # emulated bf16 would be slower than fp32: refused
    require_native_bf16(device.type, bf16=config.bf16, bf16_sampling=config.bf16_sampling)
    if tokenizer.pad_token_id is None:
        raise ValueError(
            "the tokenizer has no pad token; set tokenizer.pad_token (grpo_kit.models does this)."
        )
    return reward_funcs, weights


def reward_name(func: Callable) -> str:
    """The name TRL logs a reward function under (``rewards/<name>/mean``)."""
    from rewards.compose import reward_name as name_of

    return name_of(func)


def start_run(
    model,
    tokenizer,
    config: GRPOLoopConfig,
    num_prompts: int,
    callbacks: Sequence[Callable] | None,
    reporters: Sequence[Any],
    run_config: dict[str, Any] | None,
    evaluate: Callable | None = None,
) -> RunContext:
    """Seed, run length, training mode, AdamW and its schedule, the entropy-bonus coefficient: the bookkeeping
    of the run (``run.optimizer``, ``run.scheduler``, ``run.entropy_control``, ``run.state.max_steps``), to
    ``run.resume()`` next. ``evaluate(model, step)``: the held-out evaluation the config schedules (``eval_steps``);
    a schedule without one is refused here, before the first step."""
    if config.eval_strategy == "steps" and evaluate is None:
        raise ValueError(
            f"eval_steps={config.eval_steps}: the loop says when to evaluate, not what; pass evaluate=fn(model, "
            "step) -> metrics (grpo_kit.runs.during_training, which grpo-kit train uses), or drop eval_steps."
        )
    seed_everything(config.seed)
    max_steps = resolve_max_steps(config, num_prompts)
    model.train()  # TRL trains (and samples) with the model in training mode
    if (
        config.gradient_checkpointing
    ):  # the log-prob pass recomputes each layer in backward; sampling does not
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    optimizer = build_optimizer(model, config)
    scheduler = build_scheduler(optimizer, config, max_steps)
    run = RunContext(
        config, model, tokenizer, optimizer, scheduler, max_steps, callbacks, reporters, run_config, evaluate
    )
    run.entropy_control = EntropyControl.from_config(
        config
    )  # saved with every checkpoint, restored on resume
    return run


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def resolve_max_steps(config: GRPOLoopConfig, num_prompts: int) -> int:
    """``max_steps``, or enough optimizer steps for ``num_train_epochs`` over ``num_prompts`` prompts."""
    if config.max_steps > 0:
        return config.max_steps
    generations_per_epoch = math.ceil(num_prompts / config.prompts_per_generation)
    return max(1, math.ceil(config.num_train_epochs * generations_per_epoch)) * config.num_iterations


def build_optimizer(model, config: GRPOLoopConfig) -> torch.optim.Optimizer:
    """``torch.optim.AdamW`` over the trainable parameters, with ``Trainer``'s two weight-decay groups."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        # Trainer's rule: no weight decay on biases and normalisation weights (1-D tensors).
        (no_decay if param.ndim < 2 or name.endswith(".bias") else decay).append(param)
    if not decay and not no_decay:
        raise ValueError(
            "the model has no trainable parameters; add a LoRA adapter or unfreeze some weights."
        )
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(
        [g for g in groups if g["params"]],
        lr=config.learning_rate,
        betas=(config.adam_beta1, config.adam_beta2),
        eps=config.adam_epsilon,
    )


def build_scheduler(optimizer, config: GRPOLoopConfig, max_steps: int):
    """The ``transformers`` schedule ``lr_scheduler_type``; ``warmup_steps`` < 1 is a fraction of the run."""
    from transformers import get_scheduler

    warmup = config.warmup_steps
    warmup = math.ceil(warmup * max_steps) if isinstance(warmup, float) and warmup < 1 else int(warmup)
    return get_scheduler(
        config.lr_scheduler_type, optimizer, num_warmup_steps=warmup, num_training_steps=max_steps
    )


# ----------------------------------------------------------------------------------------------------------
# PLUMBING: around the steps (logging, bad steps)


def log_generation_batch(
    run: RunContext,
    completions_table: CompletionsTable,
    samples: Any,
    rewards: torch.Tensor,
    advantages: Any,
    reward_names: Sequence[str],
) -> None:
    """A scored generation batch (``loop.Samples``, ``(N, F)`` rewards, the advantages and their metrics):
    TRL's reward metrics, and the rows of the completions table (with the ``log_extra`` columns)."""
    run.log(advantages.metrics)
    completions_table.record(
        samples.prompts,
        samples.completions,
        {name: rewards[:, i].tolist() for i, name in enumerate(reward_names)},
        advantages.advantages.tolist(),
    )


def forget_bad_step(entropy_control: EntropyControl, completions_table: CompletionsTable) -> None:
    """After a bad step (``run_context.BadStep``: its guard counted it, warned and dropped the gradients):
    the entropy window and the ``log_extra`` columns it gathered go with it, as if it never ran."""
    entropy_control.discard_step()
    completions_table.discard_pending()


def write_completions(
    completions_table: CompletionsTable, config: GRPOLoopConfig, step: int, max_steps: int
) -> None:
    """With ``log_completions``: the table at every logging step (the moment a metrics record is written)."""
    if config.log_completions and (step % config.logging_steps == 0 or step == max_steps):
        completions_table.write(config.output_dir, step)
        completions_table.print_sample(step, config.num_completions_to_print)
