"""G completions of these prompts: one decoder for evaluation, pre-flight, samples and tool rollouts.

    decoding = Decoding.from_training(recipe.training, greedy=True)    # the run's settings, spelled once
    groups = generate(model, tokenizer, prompts, 1, decoding)          # one list of completions per prompt

Prompts are rendered as the trainers render them (``datasets_prep.chat.prompt_to_text``: a conversational
prompt through the chat template with the generation prompt and ``chat_template_kwargs``, a plain prompt
as it is), batched with left padding and sampled with the KV cache of :func:`grpo_kit.core.sampling
.sample_completions`. Each completion keeps its token ids up to and including the EOS, which is what
TRL passes reward functions as ``completion_ids`` and what :mod:`grpo_kit.rollout.scoring` hands on.

Prompts with images (``images=``, one PIL image or list per prompt, TRL's ``image`` / ``images`` column) go
through the model's *processor* as TRL renders them (``trl.data_utils.prepare_multimodal_messages`` fills the
prompt's image placeholders, then ``processor.apply_chat_template``) and are decoded by the model's own
``generate`` (its vision forward needs ``pixel_values`` on the first step, which the KV-cached sampler of
:mod:`grpo_kit.core.sampling` does not take); greedy is ``do_sample=False``, sampling uses the same filters.

Simplifications: greedy decoding is top-1 sampling (the argmax, ties broken by token id as torch does);
the standalone loop samples through ``sampling.sample_completions`` itself, because it also needs the
padded (B, T) tensors this module flattens into lists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from grpo_kit.config.rules import GRPO_DEFAULTS, training_value

__all__ = ["Decoding", "GeneratedCompletion", "Sampler", "generate", "prompt_texts"]


@dataclass(frozen=True)
class Decoding:
    """How completions are decoded. Names and defaults are TRL ``GRPOConfig``'s where it has them.

    max_new_tokens: the completion budget in tokens (GRPOConfig ``max_completion_length``, default 512; in a
        tool rollout, per turn).
    temperature, top_p, top_k, min_p, repetition_penalty: sampling filters as in GRPOConfig (1.0, 1.0, 0 = off,
        None = off, 1.0 = off).
    greedy: the most likely token at each step (the filters above are then ignored); evaluation's default,
        so before and after differ only because the weights did.
    seed: the torch seed the sampling starts from (the caller's RNG is left as it was).
    batch_size: prompts per forward batch (memory only; greedy prompts are batched longest first and their
        answers do not depend on it, test_generation_batches.py).
    chat_template_kwargs: extra arguments for the chat template (``{"enable_thinking": False}``, ``tools``).
    """

    max_new_tokens: int = GRPO_DEFAULTS["max_completion_length"]
    temperature: float = GRPO_DEFAULTS["temperature"]
    top_p: float = GRPO_DEFAULTS["top_p"]
    top_k: int = GRPO_DEFAULTS["top_k"]
    min_p: float | None = None
    repetition_penalty: float = GRPO_DEFAULTS["repetition_penalty"]
    greedy: bool = False
    seed: int = 0
    batch_size: int = 8
    chat_template_kwargs: Mapping[str, Any] | None = None

    @classmethod
    def from_training(cls, training: Mapping[str, Any], **changes: Any) -> Decoding:
        """The decoding a run's ``training`` settings (GRPOConfig names) ask for, then ``changes``."""
        values = {
            "max_new_tokens": int(training_value(training, "max_completion_length")),
            "temperature": float(training_value(training, "temperature")),
            "top_p": float(training_value(training, "top_p")),
            "top_k": int(training_value(training, "top_k") or 0),  # TRL reads None as 0 (off)
            "min_p": training.get("min_p"),
            "repetition_penalty": float(training_value(training, "repetition_penalty")),
            "chat_template_kwargs": training.get("chat_template_kwargs"),
        }
        return cls(**{**values, **changes})

    def replace(self, **changes: Any) -> Decoding:
        return dataclasses.replace(self, **changes)

    def describe(self) -> str:
        return "greedy" if self.greedy else f"sampled at T={self.temperature}"


@dataclass
class GeneratedCompletion:
    """One decoded completion: its text, its length in tokens (EOS included) and whether it ended."""

    text: str
    num_tokens: int
    ended: bool  # an EOS came within max_new_tokens (else it was clipped)
    ids: list[int] = field(default_factory=list)
    # A multi-turn completion (assistant / tool messages, grpo_kit.rollout.tool_rollout): scored as this list,
    # as TRL's tool loop passes it to reward functions. None: one assistant turn, ``text``.
    messages: list[dict[str, Any]] | None = None
    # The environment instance the rollout played (grpo_kit.rollout.environments), after its last turn: what its
    # get_reward reads and what reward functions get as ``environments``, as TRL passes it. None: none.
    environment: Any = None


#: ``sampler(prompts, num_generations)``: canned or custom decoding in place of :func:`generate`.
Sampler = Callable[[Sequence[Any], int], list[list[GeneratedCompletion]]]


def prompt_texts(tokenizer, prompts: Sequence[Any], chat_template_kwargs: Mapping | None = None) -> list[str]:
    """The model input text of each prompt, rendered as the trainers render it (``prompt_to_text``)."""
    from datasets_prep.chat import prompt_to_text

    return [prompt_to_text(p, tokenizer, **dict(chat_template_kwargs or {})) for p in prompts]


#: What a chat template adds around a prompt, at most, in tokens (roles, special tokens, a system line).
_TEMPLATE_TOKENS = 256


def check_prompts_fit(
    model, tokenizer, prompts: Sequence[Any], max_new_tokens: int, *, where: str, chat_template_kwargs=None
) -> None:
    """Every prompt, rendered as the trainers render it (:func:`prompt_texts`) and tokenized, leaves room for
    ``max_new_tokens`` in the model's context (``max_position_embeddings``); else a ValueError naming the row of
    ``where`` and the setting. Run before anything generates: a row no step could hold is refused at the start,
    not when a step draws it (and allocates a cache for it). A prompt whose UTF-8 bytes alone fit is not
    tokenized (a byte-level tokenizer makes at most one token a byte)."""
    import json

    from grpo_kit.core.sampling import context_length

    context = context_length(model)
    if context is None:
        return
    room = context - max_new_tokens
    for index, prompt in enumerate(prompts):
        raw = prompt if isinstance(prompt, str) else json.dumps(prompt, default=str)
        if len(raw.encode("utf-8")) + _TEMPLATE_TOKENS < room:
            continue
        text = prompt_texts(tokenizer, [prompt], chat_template_kwargs)[0]
        text_tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor's own tokenizer
        n = len(text_tokenizer(text, add_special_tokens=False)["input_ids"])
        if n > room:
            start = " ".join(raw.split())[:40]
            raise ValueError(
                f"{where}, row {index} (it starts {start!r}): the prompt is {n} tokens, and with max_completion_length={max_new_tokens} "
                f"the model's context ({context} tokens, max_position_embeddings) holds at most {room}. Drop or "
                "shorten that row, or lower max_completion_length."
            )


def row_images(rows: Sequence[Mapping[str, Any]]) -> list[Any] | None:
    """Each row's image (TRL's ``image`` column) or images (``images``), for :func:`generate`'s ``images=``;
    None when the rows have neither (text prompts)."""
    if not rows or not ("image" in rows[0] or "images" in rows[0]):
        return None
    return [row["images"] if "images" in row else row["image"] for row in rows]


def generate(
    model,
    tokenizer,
    prompts: Sequence[Any],
    num_generations: int,
    decoding: Decoding,
    *,
    images: Sequence[Any] | None = None,
) -> list[list[GeneratedCompletion]]:
    """``num_generations`` completions for each prompt, decoded as ``decoding`` says (seeded; the caller's
    RNG is untouched; LoRA merged for the duration). Returns one list of completions per prompt.
    ``images``: one image (or list of images) per prompt; ``tokenizer`` is then the model's processor."""
    import torch

    if images is not None:
        return _generate_with_images(model, tokenizer, prompts, images, num_generations, decoding)

    from datasets_prep.chat import is_conversational_prompt
    from grpo_kit.core.sampling import mask_after_eos, merged_lora, sample_completions, stop_token_ids

    d = decoding
    top_k, top_p, min_p, temperature = d.top_k, d.top_p, d.min_p, d.temperature
    if d.greedy:
        top_k, top_p, min_p, temperature = 1, 1.0, None, 1.0  # top-1 sampling picks the argmax
    if not prompts:
        return []
    texts = prompt_texts(tokenizer, prompts, d.chat_template_kwargs)
    order = _decoding_order(tokenizer, texts) if d.greedy else list(range(len(texts)))
    eos_ids = stop_token_ids(model, tokenizer)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    groups: dict[int, list[GeneratedCompletion]] = {}  # prompt index -> its completions
    try:
        with torch.random.fork_rng(devices=[]), merged_lora(model, pack_rows=d.batch_size * num_generations):
            torch.manual_seed(d.seed)
            for start in range(0, len(texts), d.batch_size):
                indices = order[start : start + d.batch_size]
                chunk = [texts[i] for i in indices]
                conversational = is_conversational_prompt(prompts[indices[0]])
                enc = tokenizer(
                    chunk,
                    padding=True,
                    padding_side="left",
                    return_tensors="pt",
                    add_special_tokens=not conversational,
                )
                sampled = sample_completions(
                    model,
                    enc["input_ids"].to(device),
                    enc["attention_mask"].to(device),
                    num_generations=num_generations,
                    max_new_tokens=d.max_new_tokens,
                    eos_token_ids=eos_ids,
                    pad_token_id=tokenizer.pad_token_id,
                    temperature=temperature,
                    top_k=top_k,
                    top_p=top_p,
                    min_p=min_p,
                    repetition_penalty=d.repetition_penalty,
                )  # (b * G, T)
                ids, mask, truncated = mask_after_eos(sampled, eos_ids, tokenizer.pad_token_id)  # (b*G, T)
                lengths = mask.sum(1)  # (b*G,)
                id_lists = [row[: int(n)].tolist() for row, n in zip(ids, lengths)]
                decoded = tokenizer.batch_decode(id_lists, skip_special_tokens=True)
                flat = [
                    GeneratedCompletion(t, int(n), not bool(c), i)
                    for t, n, c, i in zip(decoded, lengths, truncated, id_lists)
                ]
                for n, index in enumerate(indices):
                    groups[index] = flat[n * num_generations : (n + 1) * num_generations]
    finally:
        model.train(was_training)
    return [groups[i] for i in range(len(texts))]


def _decoding_order(tokenizer, texts: Sequence[str]) -> list[int]:
    """The prompt indices from the longest prompt (in tokens) to the shortest, ties in their order: greedy batches
    of similar lengths, so left padding wastes little of the prefill (the answers do not depend on the batch,
    ``test_generation_batches.py``)."""
    lengths = [len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]
    return sorted(range(len(texts)), key=lambda i: -lengths[i])


def _generate_with_images(model, processor, prompts, images, num_generations: int, decoding: Decoding):
    """:func:`generate` for a vision-language model: prompts rendered by the processor with their images,
    decoded by ``model.generate`` (seeded, the caller's RNG untouched)."""
    import torch
    from trl.data_utils import prepare_multimodal_messages

    from grpo_kit.core.sampling import stop_token_ids
    from grpo_kit.models.vlm import is_vlm

    if not is_vlm(processor):
        raise ValueError(
            "these prompts come with images but the model has a tokenizer, not a processor; evaluate a "
            "vision-language model (grpo_kit.models.load_model('smolvlm-cpu')) or rows without images."
        )
    d = decoding
    tokenizer = processor.tokenizer
    eos_ids = stop_token_ids(model, tokenizer)
    sampling: dict[str, Any] = {"do_sample": False}
    if not d.greedy:
        sampling = {
            "do_sample": True,
            "temperature": d.temperature,
            "top_p": d.top_p,
            "top_k": d.top_k or None,
        }
        if d.min_p is not None:
            sampling["min_p"] = d.min_p
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: list[list[GeneratedCompletion]] = []
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(d.seed)
            for start in range(0, len(prompts), d.batch_size):
                chunk = [
                    prepare_multimodal_messages(prompt, images=image if isinstance(image, list) else [image])
                    for prompt, image in zip(
                        prompts[start : start + d.batch_size], images[start : start + d.batch_size]
                    )
                ]
                enc = processor.apply_chat_template(
                    chunk,
                    add_generation_prompt=True,
                    tokenize=True,
                    return_dict=True,
                    return_tensors="pt",
                    processor_kwargs={"padding": True},
                    **dict(d.chat_template_kwargs or {}),
                ).to(device)
                sampled = model.generate(
                    **enc,
                    max_new_tokens=d.max_new_tokens,
                    num_return_sequences=num_generations,
                    eos_token_id=eos_ids,
                    pad_token_id=tokenizer.pad_token_id,
                    repetition_penalty=d.repetition_penalty,
                    **sampling,
                )[:, enc["input_ids"].shape[1] :]  # (b * G, T): the completions only
                for row in sampled.tolist():  # cut at the first EOS (kept); unended: all max_new_tokens
                    ids, ended = [], False
                    for token in row:
                        if token in eos_ids:
                            ids.append(token)
                            ended = True
                            break
                        ids.append(token)
                    text = tokenizer.decode(ids, skip_special_tokens=True)
                    completion = GeneratedCompletion(text, len(ids), ended, ids)
                    if not out or len(out[-1]) == num_generations:
                        out.append([])
                    out[-1].append(completion)
    finally:
        model.train(was_training)
    return out
