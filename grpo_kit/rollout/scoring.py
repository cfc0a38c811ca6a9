"""Score completions: the one room inside ``grpo_kit`` that calls ``rewards.call_reward_funcs``.

Every caller (the standalone loop's step 3, evaluation, pre-flight, samples, ``grpo-kit generate``) hands
its rows and completions here, so a text gets the same reward wherever it is scored.

    table = reward_table(funcs, prompts, completions, completion_ids=ids, **columns)  # (N, F), None -> NaN
    totals = weighted_totals(table, weights)                                          # (N,)

**The rule for None** (TRL 1.15's, ``GRPOTrainer._generate_and_score_completions``): a reward function
returns ``None`` for a completion it does not apply to; that cell is NaN in the ``(N, F)`` table. A
completion's total is the weighted sum over the functions that scored it (TRL's ``nansum``); a completion
that *no* function scored is unscorable and its total is NaN, so every mean over completions (evaluation,
samples, the summary) leaves it out instead of counting it as 0.

**Token ids**: completions come with the token ids they were decoded from, EOS included, as TRL passes
``completion_ids``; a token-counting reward (``length_reward(unit="tokens")``) therefore counts the same
tokens in training, evaluation and samples. Text alone (a ``--prompt`` answer) is re-encoded by the
reward function itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "as_reward_completions",
    "reward_table",
    "score_completions",
    "weighted_total",
    "weighted_totals",
]


def reward_table(
    funcs: Sequence[Callable],
    prompts: Sequence[Any],
    completions: Sequence[Any],
    *,
    completion_ids: Sequence[Sequence[int]] | None = None,
    **columns: Any,
) -> list[list[float]]:
    """Every reward function on every completion, called the way TRL calls them -> ``(N, F)`` floats,
    ``None`` -> NaN (``rewards.call_reward_funcs``: async functions, named errors). ``columns`` are the
    dataset's other columns (one value per completion) and TRL's extra arguments (``trainer_state``,
    ``log_metric``)."""
    from rewards import call_reward_funcs

    return call_reward_funcs(
        list(funcs), list(prompts), list(completions), completion_ids=completion_ids, **columns
    )


def weighted_total(row: Sequence[float], weights: Sequence[float]) -> float:
    """Σ_f w_f · r_f over the functions that scored the completion (TRL's nansum); NaN when none did."""
    present = [w * v for w, v in zip(weights, row) if not math.isnan(v)]
    return sum(present) if present else math.nan


def weighted_totals(table: Sequence[Sequence[float]], weights: Sequence[float]) -> list[float]:
    """:func:`weighted_total` of every row of an ``(N, F)`` table -> ``(N,)``."""
    return [weighted_total(row, weights) for row in table]


def as_reward_completions(prompts: Sequence[Any], completions: Sequence[Any]) -> list[Any]:
    """What a reward function receives for each completion, as TRL builds it: a one-message assistant turn
    for a conversational prompt, the text for a plain prompt, and a multi-turn tool rollout as its
    messages (``GeneratedCompletion.messages``)."""
    from datasets_prep.chat import is_conversational_prompt

    out = []
    for prompt, completion in zip(prompts, completions):
        messages = getattr(completion, "messages", None)
        text = getattr(completion, "text", completion)
        if messages is not None:
            out.append(messages)
        elif is_conversational_prompt(prompt):
            out.append([{"role": "assistant", "content": text}])
        else:
            out.append(text)
    return out


def score_completions(
    funcs: Sequence[Callable],
    rows: Sequence[Mapping[str, Any]],
    completions: Sequence[Any],
    weights: Sequence[float] | None = None,
    *,
    log_extra: Callable[[str, list], None] | None = None,
) -> tuple[list[list[float]], list[float]]:
    """Score one completion per row (``rows[i]["prompt"]`` and its other columns) -> ``((N, F) table,
    (N,) weighted totals)``. ``completions`` are ``grpo_kit.rollout.generation.GeneratedCompletion`` (their token
    ids go to the reward functions) or plain strings. ``log_extra(column, values)`` receives the extra
    columns reward functions log (TRL's ``log_extra``: ``accuracy_reward``'s gold and extracted answers)."""
    if len(rows) != len(completions):
        raise ValueError(f"{len(completions)} completions for {len(rows)} rows; give one completion per row.")
    weights = list(weights) if weights is not None else [1.0] * len(funcs)
    if not rows:
        return [], []
    prompts = [r["prompt"] for r in rows]
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    if any(getattr(c, "environment", None) is not None for c in completions):
        # Environment rollouts: reward functions read each episode's instance, as TRL passes them.
        columns["environments"] = [getattr(c, "environment", None) for c in completions]
    decoded = all(hasattr(c, "ids") for c in completions)  # text alone: the reward re-encodes it
    table = reward_table(
        funcs,
        prompts,
        as_reward_completions(prompts, completions),
        completion_ids=[list(c.ids) for c in completions] if decoded else None,
        log_extra=log_extra or (lambda column, values: None),
        **columns,
    )
    return table, weighted_totals(table, weights)
