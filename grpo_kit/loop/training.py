"""The standalone GRPO loop: plain PyTorch + transformers + peft, readable top to bottom, no TRL at run time.

``train()`` is the algorithm; one optimizer step does what TRL 1.15's ``GRPOTrainer`` does, same names:

1. take ``per_device_train_batch_size * gradient_accumulation_steps / num_generations`` prompts;
2. sample G = ``num_generations`` completions per prompt (``grpo_kit.core.sampling``); the completion mask runs
   up to and including the first EOS;
3. score every completion with every reward function (``rewards.call_reward_funcs``), ``None`` -> NaN;
4. group-relative advantages (``grpo_kit.core.advantages``, proven equal to TRL);
5. old log-probs (only when ``num_iterations > 1``) and reference log-probs with the LoRA adapter
   disabled (only when ``beta > 0``);
6. per micro-batch: log-probs with gradient, ``compute_loss`` (``grpo_kit.core.losses``, proven equal to TRL),
   backward; then gradient clipping, optimizer and scheduler step; an optimizer step that leaves a trainable
   weight NaN/inf is undone and counted as a bad step (``RunContext.checked_step``).

Steps 1-5 make a ``Rollout``, reused for μ optimizer steps when ``num_iterations = μ > 1``. Every guard
against a bad step raises ``grpo_kit.loop.bookkeeping.BadStep``; ``train()`` handles it in one place. Banners
mark the ALGO LOGIC here; the PLUMBING lives elsewhere: setup (inputs, seed, optimizer, schedule) and logging
in ``grpo_kit.loop.plumbing``; bookkeeping (resume, Ctrl-C, checkpoints, progress, metrics, bad steps) in
``grpo_kit.loop.bookkeeping``; settings: ``grpo_kit.config.loop.GRPOLoopConfig``.

What this loop simplifies compared with TRL's GRPOTrainer:

* one process, one device, float32 (``bf16=True``: bf16 autocast and bf16 sampling weights, where the
  hardware has native bf16); no vLLM, tools, environments or multimodal inputs;
  ``steps_per_generation`` is always ``gradient_accumulation_steps``; ``gradient_checkpointing`` is off unless
  asked for (TRL's default is on), and applies to the log-prob pass only, never to sampling;
* reward models (ids, paths, sequence-classification models) score like TRL's, through
  ``grpo_kit.rollout.reward_models`` (eval mode, no gradient, batched, logit = reward);
* the reference policy is the base model with the LoRA adapter disabled, never a second copy
  (``beta > 0`` without LoRA is an error);
* no off-policy mask, vLLM importance-sampling correction or Hub upload; the completions table
  (``log_completions``) is TRL's parquet file per logging step (``grpo_kit.artifacts.completions_table``);
* ``torch.optim.AdamW`` (no decay on biases and norms, like ``Trainer``) + a ``transformers`` schedule;
* when ``per_device_train_batch_size`` is a multiple of G, micro-batches hold whole groups and each prompt
  runs through the model once per micro-batch, its G completions packed into one row without their padding
  (``per_token_logps_grouped``); the summed gradient is TRL's for every loss type except ``bnpo`` (its token
  count depends on the split); under LoRA dropout the draws are other random numbers than TRL's;
* sampling: one prefill per prompt, LoRA merged into the weights (on CPU packed for oneDNN), no dropout: the
  same distribution as ``generate`` up to float rounding, other random numbers (test_sampling.py, chi-square);
  on the same completions two optimizer steps give TRL's weights to 1e-5 (tests/grpo_kit/test_step_parity.py);
* QLoRA (``quantization="4bit"``, bitsandbytes NF4, CPU too) trains here as it is: sampling dequantizes each 4-bit
  weight once per call and merges its LoRA into it (``merged_lora``), log-probs are a plain 4-bit forward
  (test_qlora_cli.py, test_sampling.py); 8-bit: --loop trl;
* guided sampling, which TRL does not have (its paths refuse it): a row with a ``sampling_prompt`` column
  (``datasets_prep.SAMPLING_PROMPT``; gsm8k's ``worked_example_guides``) is sampled from that prompt and the
  update scores the completions under ``prompt``, with no importance weight for the change of prompt. Those
  steps are off-policy on purpose: they push up, under the course's prompt, what the model wrote well with a
  worked example in front of it, which it would rarely write without;
* ``top_entropy_quantile < 1`` drops low-entropy tokens from the policy loss, exactly as TRL
  (``compute_loss(entropy_mask=...)``: the normalisation still counts every token);
* the entropy bonus (``entropy_coef``, ``use_adaptive_entropy``: ``grpo_kit.core.losses.entropy``) is TRL's; the
  adaptive coefficient moves after each optimizer step and is saved in ``trainer_state.json``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from datasets_prep import SAMPLING_PROMPT, is_conversational_prompt, prompt_to_sample_from, prompt_to_text
from grpo_kit.artifacts.completions_table import CompletionsTable
from grpo_kit.artifacts.result import RunResult
from grpo_kit.config.loop import GRPOLoopConfig
from grpo_kit.core.advantages import compute_advantages_with_metrics
from grpo_kit.core.logprobs import entropy_mask, per_token_logps, per_token_logps_grouped
from grpo_kit.core.losses import LossSettings, compute_loss
from grpo_kit.core.losses.entropy import EntropyControl
from grpo_kit.core.sampling import (
    check_fits_context,
    mask_after_eos,
    merged_lora,
    sample_completions,
    stop_token_ids,
)
from grpo_kit.loop.bookkeeping import BadStep, LoopState, RunContext
from grpo_kit.loop.plumbing import (
    check_inputs,
    forget_bad_step,
    log_generation_batch,
    reward_name,
    start_run,
    write_completions,
)

__all__ = [
    "GRPOLoopConfig",
    "LoopState",
    "MicroBatch",
    "Rollout",
    "RunResult",
    "Samples",
    "train",
]


# ----------------------------------------------------------------------------------------------------------
# ALGO LOGIC: what one generation batch carries (steps 1-5 fill it, step 6 reads it)


@dataclass
class Samples:
    """Steps 1-2: the prompts of one generation batch and their G sampled completions each."""

    rows: list[dict[str, Any]]  # N dataset rows, each prompt's row repeated G times
    prompt_ids: torch.Tensor  # (N/G, P) left-padded, one row per distinct prompt
    prompt_mask: torch.Tensor  # (N/G, P)
    completion_ids: torch.Tensor  # (N, T) pad after the first EOS
    completion_mask: torch.Tensor  # (N, T) 1 up to and including EOS; 0 for truncated rows when masked
    lengths: torch.Tensor  # (N,) tokens up to and including EOS
    is_truncated: torch.Tensor  # (N,) no EOS within max_completion_length
    completions: list[Any]  # N decoded texts (or assistant messages for chat prompts)

    @property
    def prompts(self) -> list[Any]:
        return [row["prompt"] for row in self.rows]


@dataclass
class MicroBatch:
    """The completions one forward/backward pass sees, with everything the loss needs."""

    prompt_ids: torch.Tensor  # (b, P) b = mb/G distinct prompts when grouped, else mb
    prompt_mask: torch.Tensor  # (b, P)
    group_size: int  # G when the micro-batch holds whole groups, else 1
    completion_ids: torch.Tensor  # (mb, T)
    completion_mask: torch.Tensor  # (mb, T)
    advantages: torch.Tensor  # (mb,)
    old_per_token_logps: torch.Tensor | None = None  # (mb, T), only when num_iterations > 1
    ref_per_token_logps: torch.Tensor | None = None  # (mb, T), only when beta > 0


@dataclass
class Rollout:
    """Steps 1-5: one generation batch cut into micro-batches, reused for ``num_iterations`` steps."""

    micro_batches: list[MicroBatch]
    num_items_in_batch: torch.Tensor  # () completion tokens of the whole generation batch (dapo/cispo/vespo)

    def to_dict(self) -> dict[str, Any]:
        """Plain tensors and numbers, as ``grpo_kit.artifacts.checkpoint.save_checkpoint(rollout=...)`` stores them."""
        return {
            "micro_batches": [dict(vars(mb)) for mb in self.micro_batches],
            "num_items_in_batch": self.num_items_in_batch,
        }

    @classmethod
    def from_dict(cls, saved: dict[str, Any]) -> Rollout:
        return cls([MicroBatch(**mb) for mb in saved["micro_batches"]], saved["num_items_in_batch"])


# ----------------------------------------------------------------------------------------------------------
# ALGO LOGIC: the loop, steps 1-6 (its PLUMBING: grpo_kit.loop.plumbing, grpo_kit.loop.bookkeeping)


def train(
    model: torch.nn.Module,
    tokenizer: Any,
    train_dataset: Any,
    reward_funcs: Callable | Sequence[Callable],
    config: GRPOLoopConfig,
    *,
    reward_weights: Sequence[float] | None = None,
    reward_processing_classes: Any = None,
    callbacks: Sequence[Callable[[LoopState, dict[str, float]], None]] | None = None,
    reporters: Sequence[Any] = (),
    run_config: dict[str, Any] | None = None,
    evaluate: Callable[[torch.nn.Module, int], dict[str, float]] | None = None,
) -> RunResult:
    """Train ``model`` in place with GRPO on the ``prompt`` column of ``train_dataset``.

    ``reward_funcs``: TRL-style reward functions ``fn(prompts, completions, completion_ids, trainer_state,
    **dataset_columns) -> list[float | None]`` (``async def`` allowed), or, as TRL, reward models: a model id,
    a path or an ``AutoModelForSequenceClassification`` (``reward_processing_classes``: their tokenizers,
    aligned with ``reward_funcs``; see ``grpo_kit.rollout.reward_models``). ``callbacks``: ``cb(state,
    step_metrics)`` after every optimizer step. ``reporters``: objects with ``log(record, step)`` /
    ``close()`` that receive every ``metrics.jsonl`` record. Ctrl-C saves a checkpoint and returns with
    ``interrupted=True``; pass that checkpoint (or ``resume_from_checkpoint=True``) to continue.
    ``run_config``: what else every checkpoint records about the run (``grpo_kit.runs`` passes the recipe).
    ``evaluate(model, step)``: the held-out evaluation ``config.eval_steps`` schedules (its ``eval/...`` record goes
    into ``metrics.jsonl``; ``grpo_kit.runs.during_training``); its time is not the steps'.
    Bad steps (all-NaN or overflowing rewards, a NaN/inf loss, grad-norm or weight) are skipped (``BadStep``).
    """
    # PLUMBING: inputs, seed, run length, optimizer and schedule, bookkeeping, resume (grpo_kit.loop.plumbing)
    reward_funcs, weights = check_inputs(
        model, tokenizer, train_dataset, reward_funcs, config, reward_weights, reward_processing_classes
    )
    eos_token_ids, reward_names = stop_token_ids(model, tokenizer), [reward_name(f) for f in reward_funcs]
    run = start_run(model, tokenizer, config, len(train_dataset), callbacks, reporters, run_config, evaluate)
    rollout = run.resume(Rollout.from_dict)  # a generation batch still to be reused, when resuming mid-block
    optimizer, scheduler, entropy_control = run.optimizer, run.scheduler, run.entropy_control
    loss_settings, completions_table = LossSettings.from_config(config), CompletionsTable()  # TRL's table
    G, max_steps = config.num_generations, run.state.max_steps

    # ALGO LOGIC: one GRPO optimizer step per iteration, steps 1-6 of the module docstring
    with run:  # progress bar; Ctrl-C saves a checkpoint; the reward curve at the end
        while run.state.global_step < max_steps and not run.stopped_for_no_signal:  # (the signal watch)
            try:  # a guard (run.check*) that finds the step bad raises BadStep: counted, warned, no update
                if rollout is None or run.state.global_step % config.num_iterations == 0:
                    rows = _next_rows(train_dataset, run.state, config)  # 1. N/G prompts
                    with run.timed("generation"):
                        samples = _sample(model, tokenizer, rows, config, eos_token_ids)  # 2. (N, T)
                    run.log_samples(samples.prompt_mask, samples.lengths, samples.is_truncated, G)
                    with run.timed("scoring"):  # 3. (N, F), NaN for None; all NaN: BadStep
                        score = partial(_score, reward_funcs, samples, run, completions_table.log_extra)
                        rewards = run.checked_rewards(score, reward_names)
                    advantages = _advantages(rewards, config, weights, reward_names)  # 4. (N,) group-relative
                    run.check_advantages(rewards, advantages, reward_names)  # overflow: BadStep
                    log_generation_batch(run, completions_table, samples, rewards, advantages, reward_names)
                    with run.timed("old_ref_logprobs"):  # 5. only with num_iterations > 1 or beta > 0
                        rollout = _rollout(model, samples, advantages.advantages, config)
                with run.timed("training"):  # 6. one optimizer step over the micro-batches
                    step_loss = 0.0
                    for micro_batch in rollout.micro_batches:
                        with run.timed("forward"):  # log-probs (mb, T) with gradient and the loss
                            loss, metrics = _micro_batch_loss(
                                model, micro_batch, rollout, config, loss_settings, entropy_control
                            )
                        with run.timed("backward"):
                            loss.backward()
                        step_loss += loss.item()
                        run.log(metrics)
                    with run.timed("optimizer"):  # clipping, the update; anything NaN/inf: BadStep
                        grad_norm = _clip_gradients(model, config)
                        run.checked_step(optimizer.step, step_loss, grad_norm, reward_names)
                        _schedule_step(optimizer, scheduler)
                    entropy_control.end_step()  # the adaptive coefficient for the next step
                    run.log({"entropy_coef": entropy_control.entropy_coef} if entropy_control.enabled else {})
                run.end_step(step_loss, grad_norm, rollout.to_dict())  # metrics, callbacks, checkpoints
                write_completions(completions_table, config, run.state.global_step, max_steps)
            except BadStep:  # the one place a bad step is handled: forgotten; the next step samples anew
                forget_bad_step(entropy_control, completions_table)
                rollout = None
    return run.result()


# ----------------------------------------------------------------------------------------------------------
# ALGO LOGIC: steps 1-5 (prompts, sampling, scoring, advantages, the rollout's fixed log-probs)


def _next_rows(dataset, state: LoopState, config: GRPOLoopConfig) -> list[dict[str, Any]]:
    """Step 1: the next ``prompts_per_generation`` rows in the seeded per-epoch order; advances the data position."""
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


def _sample(model, tokenizer, unique_rows, config: GRPOLoopConfig, eos_token_ids) -> Samples:
    """Step 2: G completions per prompt, next to each other (TRL's RepeatSampler order). A row with a
    ``sampling_prompt`` column is sampled from that prompt and scored under ``prompt`` (guided sampling)."""
    G = config.num_generations
    rows = [row for row in unique_rows for _ in range(G)]
    conversational = is_conversational_prompt(unique_rows[0]["prompt"])
    prompt_ids, prompt_mask = _encode_prompts(
        model, tokenizer, [r["prompt"] for r in unique_rows], config
    )  # (N/G, P): what the update scores the completions under
    sampling_ids, sampling_mask = prompt_ids, prompt_mask
    if SAMPLING_PROMPT in unique_rows[0]:  # guided sampling
        sampling_ids, sampling_mask = _encode_prompts(
            model, tokenizer, [prompt_to_sample_from(r) for r in unique_rows], config
        )  # (N/G, P'): what the completions are drawn from
        check_fits_context(model, prompt_ids.size(1), config.max_completion_length)  # scored under (N/G, P)
    # One matmul per adapted layer while decoding, with oneDNN-packed weights on CPU (grpo_kit.core.sampling); bf16 or
    # bf16_sampling: with bf16 copies of the weights.
    sampling_dtype = torch.bfloat16 if config.bf16 or config.bf16_sampling else None
    with merged_lora(model, sampling_dtype, pack_rows=len(rows)):
        sampled = sample_completions(
            model,
            sampling_ids,
            sampling_mask,
            num_generations=G,
            max_new_tokens=config.max_completion_length,
            eos_token_ids=eos_token_ids,
            pad_token_id=tokenizer.pad_token_id,
            temperature=config.temperature,
            top_k=config.top_k,
            top_p=config.top_p,
            min_p=config.min_p,
            repetition_penalty=config.repetition_penalty,
        )  # (N, T)
    completion_ids, completion_mask, is_truncated = mask_after_eos(
        sampled, eos_token_ids, tokenizer.pad_token_id
    )
    lengths = completion_mask.sum(1)  # (N,)
    decoded = tokenizer.batch_decode(
        [ids[: int(n)].tolist() for ids, n in zip(completion_ids, lengths)], skip_special_tokens=True
    )
    completions = [[{"role": "assistant", "content": t}] for t in decoded] if conversational else decoded
    if config.mask_truncated_completions:  # DAPO: a truncated completion has no reliable reward
        completion_mask = completion_mask * (~is_truncated).unsqueeze(1).long()  # (N, T)
    return Samples(
        rows, prompt_ids, prompt_mask, completion_ids, completion_mask, lengths, is_truncated, completions
    )


def _encode_prompts(model, tokenizer, prompts: list[Any], config: GRPOLoopConfig):
    """Prompts -> left-padded ``(ids, mask)``, each ``(n, P)``, on the model's device, as TRL renders them."""
    texts = [prompt_to_text(p, tokenizer, **(config.chat_template_kwargs or {})) for p in prompts]
    # The chat template already wrote the special tokens; plain text gets the tokenizer's own (TRL does the same).
    encoded = tokenizer(
        texts,
        padding=True,
        padding_side="left",
        return_tensors="pt",
        add_special_tokens=not is_conversational_prompt(prompts[0]),
    )
    device = next(model.parameters()).device
    return encoded["input_ids"].to(device), encoded["attention_mask"].to(device)


def _score(reward_funcs, samples: Samples, run: RunContext, log_extra: Callable) -> torch.Tensor:
    """Step 3: every reward function TRL's way (``grpo_kit.rollout.scoring.reward_table``) -> ``(N, F)`` float32."""
    from grpo_kit.rollout.scoring import reward_table

    # Dataset columns other than the prompt reach the reward functions as keyword arguments (one per completion).
    rows = samples.rows
    columns = {
        k: [row[k] for row in rows] for k in rows[0] if k not in ("prompt", "completion", "completion_ids")
    }
    completion_ids = [ids[: int(n)].tolist() for ids, n in zip(samples.completion_ids, samples.lengths)]
    table = reward_table(
        reward_funcs,
        samples.prompts,
        samples.completions,
        completion_ids=completion_ids,
        trainer_state=run.state,
        log_metric=run.accumulator.add,
        timeout=run.config.reward_timeout,
        log_extra=log_extra,
        **columns,
    )
    return torch.tensor(table, dtype=torch.float32).reshape(len(rows), len(reward_funcs))  # (N, F)


def _advantages(rewards: torch.Tensor, config: GRPOLoopConfig, weights, reward_names: list[str]):
    """Step 4: group-relative advantages ``(N,)`` from the ``(N, F)`` rewards, with TRL's reward metrics."""
    return compute_advantages_with_metrics(
        rewards,
        config.num_generations,
        reward_weights=weights,
        scale_rewards=config.scale_rewards,
        multi_objective_aggregation=config.multi_objective_aggregation,
        reward_func_names=reward_names,
    )


def _rollout(model, samples: Samples, advantages: torch.Tensor, config: GRPOLoopConfig) -> Rollout:
    """Step 5: cut the batch into micro-batches in a random order (TRL shuffles too) and add the log-probs
    that stay fixed during the update. When a micro-batch holds whole groups, groups are shuffled instead
    of completions, so each prompt runs through the model once per micro-batch; the summed gradient is the same."""
    G, mb = config.num_generations, config.per_device_train_batch_size
    device = samples.completion_ids.device
    grouped = mb % G == 0
    prompt_ids, prompt_mask = samples.prompt_ids, samples.prompt_mask  # (N/G, P)
    if grouped:
        group_order = torch.randperm(prompt_ids.size(0))  # (N/G,)
        chunks = [
            (groups, (groups.unsqueeze(1) * G + torch.arange(G)).flatten())  # prompt rows, completion rows
            for groups in group_order.split(mb // G)
        ]
    else:
        prompt_ids, prompt_mask = (
            prompt_ids.repeat_interleave(G, 0),
            prompt_mask.repeat_interleave(G, 0),
        )  # (N, P)
        chunks = [(order, order) for order in torch.randperm(prompt_ids.size(0)).split(mb)]
    micro_batches = []
    for prompt_rows, completion_rows in chunks:
        micro_batch = MicroBatch(
            prompt_ids[prompt_rows],
            prompt_mask[prompt_rows],
            G if grouped else 1,
            samples.completion_ids[completion_rows],
            samples.completion_mask[completion_rows],
            advantages[completion_rows].to(device),
        )
        # Old log-probs only matter when the batch is reused (num_iterations > 1); otherwise
        # ratio = exp(logp - logp.detach()) = 1 and TRL skips them too.
        with torch.no_grad():
            if config.num_iterations > 1:
                micro_batch.old_per_token_logps, _ = _completion_logps(model, micro_batch, config)  # (mb, T)
            if config.beta > 0:
                with model.disable_adapter():  # the base model *is* the reference policy
                    micro_batch.ref_per_token_logps, _ = _completion_logps(model, micro_batch, config)
        micro_batches.append(micro_batch)
    # dapo/cispo/vespo normalise by the tokens of the whole generation batch, not the micro-batch
    return Rollout(micro_batches, samples.completion_mask.sum())


# ----------------------------------------------------------------------------------------------------------
# ALGO LOGIC: step 6 (log-probs with gradient, the loss, clipping, the schedule)


def _completion_logps(
    model, micro_batch: MicroBatch, config, compute_entropy=False, entropy_requires_grad=False
):
    """Per-token log-probs (and entropies) of a micro-batch's completions under the current model; with
    ``bf16`` the forward pass runs under bf16 autocast (Trainer's mixed precision), the log-softmax in fp32."""
    mb = micro_batch
    autocast = torch.autocast(mb.prompt_ids.device.type, dtype=torch.bfloat16, enabled=config.bf16)
    if mb.group_size > 1:
        with autocast:
            return per_token_logps_grouped(
                model,
                mb.prompt_ids,
                mb.prompt_mask,
                mb.completion_ids,
                mb.completion_mask,
                mb.group_size,
                temperature=config.temperature,
                compute_entropy=compute_entropy,
                entropy_requires_grad=entropy_requires_grad,
                float32_logits=config.bf16,
            )  # (mb, T), (mb, T) | None
    input_ids = torch.cat([mb.prompt_ids, mb.completion_ids], dim=1)  # (mb, P+T)
    attention_mask = torch.cat([mb.prompt_mask, mb.completion_mask], dim=1)  # (mb, P+T)
    with autocast:
        return per_token_logps(
            model,
            input_ids,
            attention_mask,
            mb.completion_ids.size(1),
            temperature=config.temperature,
            compute_entropy=compute_entropy,
            entropy_requires_grad=entropy_requires_grad,
            float32_logits=config.bf16,
        )  # (mb, T), (mb, T) | None


def _micro_batch_loss(
    model,
    micro_batch: MicroBatch,
    rollout: Rollout,
    config,
    loss_settings: LossSettings,
    entropy_control: EntropyControl,
):
    mask = micro_batch.completion_mask  # (mb, T)
    logps, entropies = _completion_logps(
        model, micro_batch, config, compute_entropy=True, entropy_requires_grad=entropy_control.enabled
    )  # (mb, T), (mb, T); the entropies carry a graph only for the bonus
    high_entropy = None
    if config.top_entropy_quantile < 1.0:  # train only on the high-entropy "forking" tokens
        high_entropy = entropy_mask(entropies.detach(), mask, config.top_entropy_quantile)  # (mb, T) bool
    loss, metrics = compute_loss(
        logps,
        micro_batch.advantages,
        mask,
        old_per_token_logps=micro_batch.old_per_token_logps,
        ref_per_token_logps=micro_batch.ref_per_token_logps,
        num_items_in_batch=rollout.num_items_in_batch,
        entropies=entropies,  # logged as `entropy` (TRL: mean over valid tokens)
        entropy_mask=high_entropy,
        entropy_coef=entropy_control.applied_coef(),  # None: no bonus
        settings=loss_settings,
    )
    entropy_control.observe(entropies, mask if high_entropy is None else mask * high_entropy)
    metrics = dict(metrics)
    metrics.pop("loss", None)  # the logged loss is the sum over micro-batches, added by the run context
    return loss, metrics


def _clip_gradients(model, config: GRPOLoopConfig) -> float:
    """Clip the global gradient norm; returns the norm before clipping (inf/NaN when a gradient is)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    max_norm = config.max_grad_norm if config.max_grad_norm > 0 else float("inf")
    return torch.nn.utils.clip_grad_norm_(trainable, max_norm).item()


def _schedule_step(optimizer, scheduler) -> None:
    """After a kept optimizer step: the learning-rate schedule moves on, the gradients are dropped."""
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
