"""Before/after answers: what the model says to a few held-out prompts, before and after training.

A reward curve says the number went up; samples show what changed in the text. Used by
``grpo-kit train`` (it writes ``samples.md`` and ``samples.json`` into the run folder), ``grpo-kit
generate`` and the notebooks.

Answers come from the one decoder (``grpo_kit.rollout.generation``: prompts rendered as the trainers render
them, ``chat_template_kwargs`` included) and are scored by ``grpo_kit.rollout.scoring`` with their token ids,
so a text gets the same reward here, in the evaluation and in training. Answers are greedy by default,
so "before" and "after" differ only because the weights did; ``do_sample=True`` draws one seeded
sample per prompt instead. This module has no decoder and no scorer of its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grpo_kit.rollout.generation import GeneratedCompletion
from grpo_kit.support.markdown_text import table_cell


@dataclass
class Sample:
    """One prompt with the answers before and after training and, when reward functions were given,
    their (weighted-sum) rewards."""

    prompt: Any
    before: str
    after: str
    reward_before: float | None = None
    reward_after: float | None = None


def answer_completions(
    model,
    tokenizer,
    prompts: Sequence[Any],
    *,
    max_new_tokens: int = 64,
    do_sample: bool = False,
    temperature: float = 1.0,
    seed: int = 0,
    batch_size: int = 8,
    chat_template_kwargs: dict | None = None,
) -> list[GeneratedCompletion]:
    """One answer per prompt (greedy unless ``do_sample``) from the one decoder
    (:func:`grpo_kit.rollout.generation.generate`): text without special tokens, with the token ids it came from
    (EOS included), so :func:`score_answers` scores it as evaluation and training do."""
    from grpo_kit.rollout.generation import Decoding, generate

    decoding = Decoding(
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        greedy=not do_sample,
        seed=seed,
        batch_size=batch_size,
        chat_template_kwargs=chat_template_kwargs,
    )
    return [group[0] for group in generate(model, tokenizer, list(prompts), 1, decoding)]


def generate_answers(model, tokenizer, prompts: Sequence[Any], **decoding: Any) -> list[str]:
    """The texts of :func:`answer_completions` (same arguments), stripped: for showing, not for scoring."""
    return [answer_text(c) for c in answer_completions(model, tokenizer, prompts, **decoding)]


def answer_text(answer: Any) -> str:
    """The text shown for an answer (a ``GeneratedCompletion`` or a string), stripped."""
    return str(getattr(answer, "text", answer)).strip()


def score_answers(
    prompts: Sequence[Any],
    answers: Sequence[Any],
    reward_funcs: Sequence[Callable],
    reward_weights: Sequence[float] | None = None,
    columns: dict[str, list] | None = None,
) -> list[float | None]:
    """Weighted reward of each answer (``GeneratedCompletion`` or text) by :mod:`grpo_kit.rollout.scoring` (TRL's
    nansum; ``None`` when no function scored it, so ``mean_reward`` averages only scored answers)."""
    import math

    from grpo_kit.rollout.scoring import score_completions

    rows = [{"prompt": p, **{k: v[i] for k, v in (columns or {}).items()}} for i, p in enumerate(prompts)]
    _, totals = score_completions(list(reward_funcs), rows, list(answers), reward_weights)
    return [None if math.isnan(t) else t for t in totals]


def before_after(
    prompts: Sequence[Any],
    before: Sequence[str],
    after: Sequence[str],
    *,
    reward_funcs: Sequence[Callable] = (),
    reward_weights: Sequence[float] | None = None,
    columns: dict[str, list] | None = None,
) -> list[Sample]:
    """Pair the answers up (``GeneratedCompletion`` from :func:`generate_answers`, or text) and, with
    ``reward_funcs``, score both sides."""
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
    return [
        Sample(p, answer_text(b), answer_text(a), x, y)
        for p, b, a, x, y in zip(prompts, before, after, rb, ra)
    ]


def mean_reward(samples: Sequence[Sample], side: str) -> float | None:
    """Mean ``reward_before`` (side="before") or ``reward_after`` over the samples, None if unscored."""
    values = [getattr(s, f"reward_{side}") for s in samples]
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def content_text(content: Any) -> str:
    """A message's content as text: a string as it is; multimodal content blocks (TRL's vision-language rows) as
    their text, each picture as ``[image]``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text":
                parts.append(str(block.get("text", "")))
            elif kind in ("image", "image_url"):
                parts.append("[image]")
            else:
                parts.append(f"[{kind or 'content'}]")
        return " ".join(part for part in parts if part)
    return str(content)


def _prompt_preview(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    return "\n".join(f"[{m['role']}] {content_text(m.get('content'))}" for m in prompt)


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
        lines.append(
            f"| {i} | {table_cell(prompt, None)} | {table_cell(s.before, None)} | {table_cell(s.after, None)} | {rewards} |"
        )
    md_path = out / "samples.md"
    md_path.write_text("\n".join(lines) + "\n")
    return md_path, json_path
