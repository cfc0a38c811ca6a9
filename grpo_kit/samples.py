"""Before/after answers: what the model says to a few held-out prompts, before and after training.

A reward curve says the number went up; samples show what changed in the text. Used by
``grpo-kit train`` (it writes ``samples.md`` and ``samples.json`` into the run folder), ``grpo-kit
generate`` and the notebooks.

Prompts are formatted the way the trainers format them: a conversational prompt (a list of
``{"role", "content"}`` messages) goes through the tokenizer's chat template with the generation
prompt appended; a plain-text prompt is used as it is (TRL does the same). Answers are greedy by
default, so "before" and "after" differ only because the weights did; ``do_sample=True`` draws one
seeded sample per prompt instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass
class Sample:
    """One prompt with the answers before and after training and, when reward functions were given,
    their (weighted-sum) rewards."""

    prompt: Any
    before: str
    after: str
    reward_before: float | None = None
    reward_after: float | None = None


def _prompt_text(tokenizer, prompt: Any, chat_template_kwargs: dict | None = None) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and all(isinstance(m, dict) and "role" in m for m in prompt):
        return tokenizer.apply_chat_template(
            prompt, tokenize=False, add_generation_prompt=True, **(chat_template_kwargs or {})
        )
    raise TypeError(
        f"a prompt is a string or a list of chat messages ({{'role', 'content'}}), got {type(prompt).__name__}."
    )


def generate_answers(
    model,
    tokenizer,
    prompts: Sequence[Any],
    *,
    max_new_tokens: int = 64,
    do_sample: bool = False,
    temperature: float = 1.0,
    seed: int = 0,
    batch_size: int = 8,
) -> list[str]:
    """One answer per prompt (greedy unless ``do_sample``), decoded without special tokens."""
    import torch

    from grpo_kit.sampling import check_fits_context

    if not prompts:
        return []
    texts = [_prompt_text(tokenizer, p) for p in prompts]
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    answers: list[str] = []
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # all answers start at the same column
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for start in range(0, len(texts), batch_size):
                chunk = texts[start : start + batch_size]
                enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
                check_fits_context(model, enc["input_ids"].shape[1], max_new_tokens, setting="max_new_tokens")
                kwargs: dict[str, Any] = {
                    "do_sample": do_sample,
                    "max_new_tokens": max_new_tokens,
                    "pad_token_id": tokenizer.pad_token_id,
                }
                if do_sample:
                    kwargs.update(temperature=temperature, top_p=1.0, top_k=0)
                else:
                    kwargs.update(temperature=None, top_p=None, top_k=None)
                with torch.no_grad():
                    out = model.generate(**enc, **kwargs)  # (B, T + new)
                new = out[:, enc["input_ids"].shape[1] :]  # (B, new)
                answers.extend(tokenizer.batch_decode(new, skip_special_tokens=True))
    finally:
        tokenizer.padding_side = old_side
        model.train(was_training)
    return [a.strip() for a in answers]


def score_answers(
    prompts: Sequence[Any],
    answers: Sequence[str],
    reward_funcs: Sequence[Callable],
    reward_weights: Sequence[float] | None = None,
    columns: dict[str, list] | None = None,
) -> list[float | None]:
    """Weighted reward of each answer, called the one way (``rewards.call_reward_funcs``, async included).

    As TRL sums them: Σ_f w_f · r_f over the functions that scored the answer (``None`` is skipped, not
    counted as 0); ``None`` when no function scored it, so ``mean_reward`` averages only scored answers.
    """
    import math

    from rewards import call_reward_funcs

    conversational = bool(prompts) and not isinstance(prompts[0], str)
    completions = (
        [[{"role": "assistant", "content": a}] for a in answers] if conversational else list(answers)
    )
    weights = list(reward_weights) if reward_weights is not None else [1.0] * len(reward_funcs)
    table = call_reward_funcs(list(reward_funcs), list(prompts), completions, **(columns or {}))  # (N, F)
    totals: list[float | None] = []
    for row in table:
        present = [w * r for w, r in zip(weights, row) if not math.isnan(r)]
        totals.append(sum(present) if present else None)
    return totals


def before_after(
    prompts: Sequence[Any],
    before: Sequence[str],
    after: Sequence[str],
    *,
    reward_funcs: Sequence[Callable] = (),
    reward_weights: Sequence[float] | None = None,
    columns: dict[str, list] | None = None,
) -> list[Sample]:
    """Pair the answers up and, with ``reward_funcs``, score both sides."""
    if not (len(prompts) == len(before) == len(after)):
        raise ValueError(
            f"need one before and one after answer per prompt; got {len(prompts)} prompts, "
            f"{len(before)} before, {len(after)} after."
        )
    rb = ra = [None] * len(prompts)
    if (
        reward_funcs and prompts
    ):  # no prompts (--samples 0): nothing to score; a column-reading reward would raise
        rb = score_answers(prompts, before, reward_funcs, reward_weights, columns)
        ra = score_answers(prompts, after, reward_funcs, reward_weights, columns)
    return [Sample(p, b, a, x, y) for p, b, a, x, y in zip(prompts, before, after, rb, ra)]


def mean_reward(samples: Sequence[Sample], side: str) -> float | None:
    """Mean ``reward_before`` (side="before") or ``reward_after`` over the samples, None if unscored."""
    values = [getattr(s, f"reward_{side}") for s in samples]
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _prompt_preview(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    return "\n".join(f"[{m['role']}] {m['content']}" for m in prompt)


def write_samples(
    samples: Sequence[Sample], out_dir: str | Path, *, title: str = "Before / after"
) -> tuple[Path, Path]:
    """Write ``samples.json`` (machine-readable) and ``samples.md`` (a side-by-side table) to ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "mean_reward_before": mean_reward(samples, "before"),
        "mean_reward_after": mean_reward(samples, "after"),
    }
    json_path = out / "samples.json"
    json_path.write_text(
        json.dumps({**summary, "samples": [asdict(s) for s in samples]}, indent=2, ensure_ascii=False)
    )

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", "<br>") or "*(empty)*"

    lines = [f"# {title}", ""]
    if summary["mean_reward_before"] is not None:
        mean = (
            f"Mean reward: before **{summary['mean_reward_before']:.3f}**, "
            f"after **{summary['mean_reward_after']:.3f}**"
        )
        lines += [mean, ""]
    lines += ["| # | prompt | before | after | reward before → after |", "|---|---|---|---|---|"]
    for i, s in enumerate(samples):
        rewards = "" if s.reward_before is None else f"{s.reward_before:.2f} → {s.reward_after:.2f}"
        prompt = _prompt_preview(s.prompt)
        # The end of a long prompt: the question comes last (after any system prompt and worked example).
        prompt = prompt if len(prompt) <= 300 else "…" + prompt[-300:]
        lines.append(f"| {i} | {cell(prompt)} | {cell(s.before)} | {cell(s.after)} | {rewards} |")
    md_path = out / "samples.md"
    md_path.write_text("\n".join(lines) + "\n")
    return md_path, json_path
