"""The SFT warm-up stage (a recipe's ``warmup_sft``, :class:`grpo_kit.recipes.recipe.WarmupSFT`): a few
supervised steps on prompt-completion rows before GRPO, on the same (LoRA) model; the Unsloth GRPO notebooks'
"pre fine-tuning for formatting", so that GRPO starts from a model that already writes the format.

Two ways, one per path, the same rows and the same loss (cross-entropy on the completion tokens only, averaged
over those tokens in the batch; the prompt's tokens are context, never a target):

- the TRL path: ``trl.SFTTrainer`` (one ``SFTConfig``, ``completion_only_loss=True``, constant learning rate,
  AdamW, output under ``<run>/warmup_sft/``);
- the standalone loop: :func:`train_standalone`, a plain step written as the loop writes its own: tokens of the
  prompt and of the completion rendered as TRL renders them (:func:`tokenize_row`), right-padded into (B, T),
  :func:`completion_loss` (masked, never an unmasked ``.mean()`` over the padded batch), ``torch.optim.AdamW`` at
  the stage's learning rate, gradients clipped at 1.0 (TRL's default), rows in a seeded shuffled order.

Rows with pictures (a vision-language recipe's **alignment stage**, ``dataset: shapes-captions``: LLaVA's "feature
alignment" before any task, so that GRPO starts from a model that sees) take that same plain step on either path,
each row rendered by the VLM's processor (:func:`tokenize_image_row`) and the pictures going in as
``pixel_values`` (:func:`train_with_images`); the parameters are the parts the recipe trains (``trainable_parts``).
TRL's SFTTrainer would need its vision collator and per-model image handling for the same masked loss; the plain
step is the one the tests pin.

:func:`run_warmup` runs the stage and returns what ``run.json["warmup_sft"]`` records (path, rows, steps,
learning rate, first and last loss, seconds); ``grpo_kit.runs.execution`` calls it after the evaluation before
training and evaluates the held-out rows after it (the report's "SFT only" column, :func:`report_section`). A
resumed GRPO run does not run it again: the checkpoint already holds its weights (:func:`skipped_on_resume`).
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "WARMUP_DIR",
    "completion_loss",
    "report_section",
    "run_warmup",
    "skipped_on_resume",
    "stage_names",
    "tokenize_row",
    "train_standalone",
    "train_trl",
    "warmup_rows",
]

#: The stage's folder inside the run folder (SFTTrainer's output_dir; the per-step losses on both paths).
WARMUP_DIR = "warmup_sft"
_MAX_GRAD_NORM = 1.0  # SFTConfig's default, on both paths


def warmup_rows(warmup: Any) -> list[dict[str, Any]]:
    """The stage's ``prompt``/``completion`` rows (``datasets_prep.sft_rows.load_sft_rows``)."""
    from datasets_prep.sft_rows import load_sft_rows

    return load_sft_rows(warmup.dataset, warmup.columns, rows=warmup.rows)


def tokenize_row(row: Mapping[str, Any], tokenizer: Any, max_length: int) -> tuple[list[int], list[int]]:
    """(token ids of prompt + completion, 1 on each completion token) for one row, cut at ``max_length``.

    Chat messages: the prompt rendered with the generation prompt (``datasets_prep.prompt_to_text``), the
    completion what the chat template adds to it for the whole conversation (its end-of-turn token included),
    as TRL's SFTTrainer renders a conversational prompt-completion row. Text: the completion plus EOS."""
    from datasets_prep import prompt_to_text

    prompt, completion = row["prompt"], row["completion"]
    if isinstance(prompt, str):
        prompt_text, completion_text = prompt, completion + (tokenizer.eos_token or "")
    else:
        prompt_text = prompt_to_text(prompt, tokenizer)
        whole = tokenizer.apply_chat_template(list(prompt) + list(completion), tokenize=False)
        if whole.startswith(prompt_text):
            completion_text = whole[len(prompt_text) :]
        else:  # a template that renders the prompt differently inside the whole conversation
            completion_text = "".join(m["content"] for m in completion) + (tokenizer.eos_token or "")
    prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    completion_ids = tokenizer(completion_text, add_special_tokens=False)["input_ids"]
    ids = (list(prompt_ids) + list(completion_ids))[:max_length]
    mask = ([0] * len(prompt_ids) + [1] * len(completion_ids))[:max_length]
    return ids, mask


def _batch(tokenized: Sequence[tuple[list[int], list[int]]], pad_id: int, device: Any):
    """Right-padded (B, T) input ids, attention mask and completion mask."""
    import torch

    width = max(len(ids) for ids, _ in tokenized)
    input_ids = torch.full((len(tokenized), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(tokenized), width), dtype=torch.long)
    completion = torch.zeros((len(tokenized), width), dtype=torch.long)
    for i, (ids, mask) in enumerate(tokenized):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        attention[i, : len(ids)] = 1
        completion[i, : len(mask)] = torch.tensor(mask)
    return input_ids.to(device), attention.to(device), completion.to(device)


def completion_loss(model: Any, input_ids: Any, attention_mask: Any, completion_mask: Any, **inputs: Any):
    """The mean next-token cross-entropy over the completion tokens of the batch (B, T): position t predicts
    token t + 1, counted only where token t + 1 is a completion token (padding and prompt count nothing).
    ``inputs``: the model's other inputs (a VLM's ``pixel_values``).

    The LM head runs only at the positions some row reads (transformers' ``logits_to_keep`` as indices): the
    (B, T, V) logits of every prompt and picture position would be ~a fifth of an alignment step, and unread."""
    import torch.nn.functional as F

    # (B, T-1): position t predicts token t + 1, read where that token is a completion token
    read = (completion_mask[:, 1:] * attention_mask[:, 1:]).bool()
    kept = read.any(0).nonzero()[:, 0]  # (K,) the positions any row reads
    logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=kept, **inputs).logits
    targets = input_ids[:, 1:][:, kept]  # (B, K)
    mask = read[:, kept].to(logits.dtype)  # (B, K)
    per_token = F.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
    ).view_as(targets)
    return (per_token * mask).sum() / mask.sum().clamp(min=1.0)


def tokenize_image_row(row: Mapping[str, Any], processor: Any, max_length: int):
    """(token ids of prompt + completion, 1 on each completion token, the picture's ``pixel_values``) for one row
    with an ``image``, rendered by the VLM's processor as its evaluation renders the prompt (the picture put into
    the prompt's image placeholder, TRL's ``prepare_multimodal_messages``; each image token expanded). The completion
    is what the chat template adds to the prompt for the whole conversation, its end-of-turn token included."""
    from trl.data_utils import prepare_multimodal_messages

    images = row["image"] if isinstance(row["image"], list) else [row["image"]]
    prompt = prepare_multimodal_messages(list(row["prompt"]), images=images)
    completion = [
        {"role": m["role"], "content": [{"type": "text", "text": m["content"]}]}
        if isinstance(m["content"], str)
        else m
        for m in row["completion"]
    ]
    prompt_text = processor.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
    whole = processor.apply_chat_template(prompt + completion, tokenize=False)
    if not whole.startswith(prompt_text):
        raise ValueError(
            "warmup_sft: this processor's chat template renders the prompt differently inside the whole "
            "conversation; give the rows as text or use a template that keeps the prompt as it is."
        )
    prompt_ids = processor(text=[prompt_text], images=images, return_tensors="pt")["input_ids"][0]
    encoded = processor(text=[whole], images=images, return_tensors="pt")
    ids = encoded["input_ids"][0].tolist()
    if len(ids) > max_length:
        raise ValueError(
            f"warmup_sft: a row with its picture is {len(ids)} tokens, over max_length={max_length}; raise "
            "warmup_sft.max_length (a picture's tokens cannot be cut)."
        )
    mask = [0] * len(prompt_ids) + [1] * (len(ids) - len(prompt_ids))
    return ids, mask, encoded["pixel_values"][0]


def train_with_images(
    model: Any,
    processor: Any,
    rows: Sequence[Mapping[str, Any]],
    warmup: Any,
    *,
    seed: int,
    on_step: Any = None,
) -> list[float]:
    """SFT on picture rows (the VLM alignment stage): the plain masked step of :func:`train_standalone`, each
    batch's pictures going in as ``pixel_values``; the parts the recipe trains (``trainable_parts``) are the
    parameters. ``on_step(step, loss)`` is called after each step (a progress line). Returns the loss of each step."""
    import torch

    tokenizer = processor.tokenizer
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = next(model.parameters()).device

    def inputs(indices: list[int]) -> tuple[tuple, dict[str, Any]]:
        tokenized = [tokenize_image_row(rows[i], processor, warmup.max_length) for i in indices]
        batch = _batch([(ids, mask) for ids, mask, _ in tokenized], pad_id, device)
        pixels = torch.stack([pixels for _, _, pixels in tokenized]).to(device=device, dtype=model.dtype)
        return batch, {"pixel_values": pixels}

    return _plain_steps(
        model, len(rows), warmup, inputs, seed=seed, on_step=on_step, fix="name trainable_parts"
    )


def _order(n_rows: int, steps: int, batch_size: int, seed: int) -> list[list[int]]:
    """``steps`` batches of row indices: epochs of a seeded shuffle, one after another."""
    rng = random.Random(seed)
    stream: list[int] = []
    while len(stream) < steps * batch_size:
        epoch = list(range(n_rows))
        rng.shuffle(epoch)
        stream += epoch
    return [stream[i * batch_size : (i + 1) * batch_size] for i in range(steps)]


def train_standalone(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Mapping[str, Any]],
    warmup: Any,
    *,
    seed: int,
    on_step: Any = None,
):
    """The standalone loop's SFT: ``warmup.steps`` AdamW steps at ``warmup.learning_rate`` (constant, no weight
    decay, gradients clipped at 1.0) on the masked completion loss; ``on_step(step, loss)`` after each step;
    returns the loss of each step."""
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = next(model.parameters()).device
    tokenized = [tokenize_row(row, tokenizer, warmup.max_length) for row in rows]

    def inputs(indices: list[int]) -> tuple[tuple, dict[str, Any]]:
        return _batch([tokenized[i] for i in indices], pad_id, device), {}

    return _plain_steps(
        model, len(rows), warmup, inputs, seed=seed, on_step=on_step, fix="add a LoRA adapter (lora:)"
    )


def _plain_steps(model: Any, n_rows: int, warmup: Any, inputs: Any, *, seed: int, on_step: Any, fix: str):
    """The plain masked step, ``warmup.steps`` times: AdamW at ``warmup.learning_rate`` (constant, no weight decay)
    on the trainable parameters, :func:`completion_loss` on ``inputs(row indices)`` -> ((input ids, attention
    mask, completion mask), the model's other inputs), gradients clipped at 1.0, rows in :func:`_order`;
    ``on_step(step, loss)`` after each step. Returns the loss of each step. ``fix``: what to do when nothing trains."""
    import torch

    torch.manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ValueError(f"warmup_sft: the model has no trainable parameters; {fix}.")
    optimizer = torch.optim.AdamW(params, lr=warmup.learning_rate, weight_decay=0.0)
    was_training = model.training
    model.train()
    losses = []
    try:
        for indices in _order(n_rows, warmup.steps, warmup.batch_size, seed):
            batch, extra = inputs(indices)
            loss = completion_loss(model, *batch, **extra)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, _MAX_GRAD_NORM)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(float(loss.detach()))
            if on_step is not None:
                on_step(len(losses), losses[-1])
    finally:
        model.train(was_training)
    return losses


def train_trl(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Mapping[str, Any]],
    warmup: Any,
    *,
    seed: int,
    output_dir: Path,
    bf16: bool,
) -> list[float]:
    """The TRL path's SFT: ``trl.SFTTrainer`` with one ``SFTConfig`` (prompt-completion rows, loss on the
    completion only, constant learning rate, AdamW, nothing saved but its logs); returns the loss of each step."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from grpo_kit.trainers.trl_path import ensure_logprob_kernel

    ensure_logprob_kernel()  # TRL 1.15's fused loss needs it on a CPU (no Triton), as GRPOTrainer does
    args = SFTConfig(
        output_dir=str(output_dir),
        max_steps=warmup.steps,
        learning_rate=warmup.learning_rate,
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        optim="adamw_torch",
        max_grad_norm=_MAX_GRAD_NORM,
        per_device_train_batch_size=warmup.batch_size,
        gradient_accumulation_steps=1,
        max_length=warmup.max_length,
        completion_only_loss=True,
        packing=False,
        gradient_checkpointing=False,
        bf16=bf16,
        fp16=False,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=seed,
        data_seed=seed,
    )
    trainer = SFTTrainer(
        model=model, args=args, train_dataset=Dataset.from_list(list(rows)), processing_class=tokenizer
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # its dict per step on stdout; the losses go to run.json
    trainer.train()
    return [float(r["loss"]) for r in trainer.state.log_history if "loss" in r]


def run_warmup(
    recipe: Any,
    model: Any,
    tokenizer: Any,
    *,
    loop: str,
    run_dir: Path,
    seed: int,
    bf16: bool,
    on_step: Any = None,
) -> dict[str, Any]:
    """Run ``recipe.warmup_sft`` on ``model`` (in place) on ``loop`` ("standalone" | "trl"; ``bf16``: the TRL
    path's resolved ``GRPOConfig.bf16``, the loop's SFT runs in fp32); returns the record
    ``run.json["warmup_sft"]`` holds. The per-step losses are also written to ``<run>/warmup_sft/losses.json``."""
    warmup = recipe.warmup_sft
    if loop not in ("standalone", "trl"):
        raise ValueError(f"warmup_sft runs on --loop standalone or --loop trl, not {loop!r}.")
    rows = warmup_rows(warmup)
    pictures = "image" in rows[0]
    folder = Path(run_dir) / WARMUP_DIR
    folder.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if pictures:
        losses = train_with_images(model, tokenizer, rows, warmup, seed=seed, on_step=on_step)
    elif loop == "trl":
        losses = train_trl(model, tokenizer, rows, warmup, seed=seed, output_dir=folder, bf16=bf16)
    else:
        losses = train_standalone(model, tokenizer, rows, warmup, seed=seed, on_step=on_step)
    seconds = time.perf_counter() - started
    from grpo_kit.support.paths import write_atomic

    write_atomic(folder / "losses.json", json.dumps({"loss": losses}, indent=1) + "\n")
    return {
        "ran": True,
        "stage": stage_names(warmup.dataset)[0].lower(),
        "path": (
            "the plain masked step with the processor (grpo_kit.trainers.sft_warmup)"
            if pictures
            else "trl.SFTTrainer"
            if loop == "trl"
            else "standalone loop (grpo_kit.trainers.sft_warmup)"
        ),
        "dataset": warmup.dataset,
        "rows": len(rows),
        "steps": len(losses),
        "learning_rate": warmup.learning_rate,
        "batch_size": warmup.batch_size,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "seconds": round(seconds, 1),
        "folder": str(folder),
    }


def skipped_on_resume(recipe: Any, checkpoint: Any) -> dict[str, Any]:
    """The record of a resumed run: the stage did not run again (the GRPO checkpoint holds its weights)."""
    warmup = recipe.warmup_sft
    return {
        "ran": False,
        "reason": f"resumed from a GRPO checkpoint ({checkpoint}), which already holds the SFT warm-up's "
        "weights; the warm-up was not run again",
        "dataset": warmup.dataset,
        "steps": warmup.steps,
        "learning_rate": warmup.learning_rate,
    }


def _mean_ci(values: Sequence[float]) -> str:
    from grpo_kit.evaluation.comparison import bootstrap_mean_ci

    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return "n/a"
    low, high = bootstrap_mean_ci(finite)
    return f"{sum(finite) / len(finite):.3f} [{low:.3f}, {high:.3f}]"


def stage_names(dataset: str) -> tuple[str, str]:
    """(the stage's name, its column's) for the status line, report.md and the model card, from the stage's
    ``warmup_sft.dataset``: a VLM's picture captions make an alignment ("Alignment", "aligned"); rows of text an SFT
    warm-up ("SFT warm-up", "SFT")."""
    from datasets_prep.sft_rows import PICTURE_SFT_DATASETS

    return ("Alignment", "aligned") if dataset in PICTURE_SFT_DATASETS else ("SFT warm-up", "SFT")


def report_section(record: Mapping[str, Any], sets: Sequence[tuple[str, Any, Any, Any]]) -> str:
    """report.md's section on the warm-up: the stage in one line, then for each ``(label, base, sft_only,
    sft_grpo)`` evaluation (``EvalReport``) a table of every metric in three columns, each a mean with its 95 %
    bootstrap CI over the prompts. The "SFT only" column against "SFT + GRPO" says what GRPO added."""
    from grpo_kit.support.markdown_text import table_cell

    stage, column = stage_names(record["dataset"])
    lines = [
        "",
        f"## {stage}, then GRPO",
        "",
        (
            f"{stage} ({table_cell(str(record['path']))}): {record['steps']} steps at learning rate "
            f"{record['learning_rate']:g} on {record['rows']} rows of {table_cell(str(record['dataset']))}, "
            f"loss {record['first_loss']:.3f} -> {record['last_loss']:.3f}, {record['seconds']} s."
        ),
    ]
    for label, base, sft, both in sets:
        lines += [
            "",
            f"### {table_cell(label)}",
            "",
            f"| metric | base | {column} only | {column} + GRPO |",
            "|---|---|---|---|",
        ]
        for metric in base.per_prompt:
            if metric in sft.per_prompt and metric in both.per_prompt:
                cells = [_mean_ci(r.per_prompt[metric]) for r in (base, sft, both)]
                lines.append(f"| {table_cell(metric)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
