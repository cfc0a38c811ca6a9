"""Evaluation of given rows with the same decoding before and after training -> an :class:`EvalReport`.

``evaluate`` answers ``num_prompts`` held-out prompts greedily (deterministic, so "before" and "after"
differ only because the weights did) and, with ``k > 1``, also draws ``k`` seeded samples per prompt
for pass@k and mean@k. Every metric is kept **per prompt** in the :class:`EvalReport`, because the
comparison (``grpo_kit.evaluation.comparison``) is paired: the same prompt before and after.

Per-prompt metrics (greedy answer):

* ``reward`` — the weighted sum of the reward functions (``grpo_kit.rollout.scoring``: TRL's nansum over the
  functions that scored the answer; NaN, left out of the mean, when none did);
* ``reward/<name>`` — each function; ``at_max/<name>`` — 1 when it reaches its known maximum;
* ``format`` — 1 when every *format* reward is > 0; ``accuracy`` — 1 when every *accuracy* reward
  is at its maximum; ``length_error/<name>`` — ``|length - target|`` for length rewards;
* ``length`` (tokens, EOS included), ``clipped`` (no EOS within ``max_new_tokens``), ``eos``;
* with ``k > 1``: ``mean@k`` (mean total reward of the k samples), ``pass@k/<name>`` (some sample
  reaches the function's maximum) and ``accuracy@k`` (the share of the k samples that are accurate);
* multi-turn rollouts (tools, environments): ``tool_calls``, ``failed_calls`` and ``turns`` per episode.

What a reward function's maximum is and what kind it is (format / accuracy / length) comes from its
``max_reward`` / ``reward_kind`` attributes when it has them, else from :data:`REWARD_INFO` keyed by
the function's name. (``rewards/`` could expose both attributes on its functions; this table keeps
them here so the reward library stays unchanged.)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from grpo_kit.rollout.reward_info import REWARD_INFO, RewardInfo, reward_info

__all__ = [
    "REWARD_INFO",
    "Decoding",
    "EvalReport",
    "GeneratedCompletion",
    "RewardInfo",
    "better_direction",
    "evaluate",
    "generate",
    "reward_info",
]


# Metrics that get better when they fall; None = no better direction (a length in tokens).
LOWER_IS_BETTER_PREFIXES = ("length_error", "clipped", "failed_calls")
NO_DIRECTION = ("length", "tool_calls", "turns")


def better_direction(metric: str) -> bool | None:
    """True / False / None (no better direction) for a metric name of an :class:`EvalReport`."""
    if metric in NO_DIRECTION:
        return None
    return not metric.startswith(LOWER_IS_BETTER_PREFIXES)


# --------------------------------------------------------------------------- generation
# Decoding lives in grpo_kit.rollout.generation (one decoder for evaluation, pre-flight, samples and tool rollouts);
# these names stay importable from here.
from grpo_kit.rollout.generation import Decoding, GeneratedCompletion, Sampler, generate, row_images

# --------------------------------------------------------------------------- evaluation


@dataclass
class EvalReport:
    """Per-prompt metrics of one evaluation (JSON round-trip: :meth:`to_dict` / :meth:`from_dict`)."""

    per_prompt: dict[str, list[float]]  # metric -> one value per prompt (NaN where undefined)
    prompts: list[str]  # the rendered prompt texts (identify the prompts for a paired comparison)
    completions: list[str]  # the greedy answers
    reward_names: list[str]
    reward_kinds: dict[str, str]
    settings: dict[str, Any]
    # Columns the reward functions logged through ``log_extra`` on the greedy answers (one value per prompt),
    # e.g. accuracy_reward's solution / gold_parsed / answer_parsed.
    extra: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def num_prompts(self) -> int:
        return len(self.prompts)

    @property
    def metrics(self) -> dict[str, float]:
        """Mean of every per-prompt metric over the prompts where it is defined (NaN if nowhere)."""
        return {name: _nanmean(values) for name, values in self.per_prompt.items()}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["metrics"] = self.metrics
        data["per_prompt"] = {
            k: [None if math.isnan(v) else v for v in vs] for k, vs in self.per_prompt.items()
        }
        data["metrics"] = {k: None if math.isnan(v) else v for k, v in data["metrics"].items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalReport:
        per_prompt = {
            k: [math.nan if v is None else float(v) for v in vs] for k, vs in data["per_prompt"].items()
        }
        return cls(
            per_prompt=per_prompt,
            prompts=list(data["prompts"]),
            completions=list(data["completions"]),
            reward_names=list(data["reward_names"]),
            reward_kinds=dict(data["reward_kinds"]),
            settings=dict(data["settings"]),
            extra={k: list(v) for k, v in data.get("extra", {}).items()},
        )


def _nanmean(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def _rows(dataset: Any, num_prompts: int) -> list[dict[str, Any]]:
    if hasattr(dataset, "column_names"):
        if "prompt" not in dataset.column_names:
            raise ValueError(
                f"the evaluation dataset has no 'prompt' column (columns: {dataset.column_names}); "
                "prepare it with a datasets_prep loader or rename the prompt column to 'prompt'."
            )
        n = min(num_prompts, len(dataset))
        return [dict(dataset[i]) for i in range(n)]
    rows = list(dataset)[:num_prompts]
    if not rows or not all(isinstance(r, dict) and "prompt" in r for r in rows):
        raise ValueError("evaluate needs a datasets.Dataset or a list of dicts with a 'prompt' column.")
    return rows


def evaluate(
    model,
    tokenizer,
    dataset: Any,
    reward_funcs: Callable | Sequence[Callable],
    *,
    num_prompts: int = 32,
    k: int = 1,
    max_new_tokens: int = 128,
    temperature: float = 1.0,
    seed: int = 0,
    chat_template_kwargs: dict | None = None,
    batch_size: int = 8,
    reward_weights: Sequence[float] | None = None,
    sampler: Sampler | None = None,
    generate_fn: Callable[..., list[list[GeneratedCompletion]]] | None = None,
    decoding: Decoding | None = None,
) -> EvalReport:
    """Evaluate the first ``num_prompts`` rows of ``dataset`` (held-out: rows the run never trains on).

    Greedy answers always; with ``k > 1`` also ``k`` samples per prompt at ``temperature`` (seeded) for
    ``mean@k`` and ``pass@k/<name>``. ``sampler(prompts, num_generations)`` replaces the model's decoding
    (canned completions in tests; ``model``/``tokenizer`` are then only used by the sampler).
    ``generate_fn`` replaces :func:`grpo_kit.rollout.generation.generate` with a function of the same signature
    ``(model, tokenizer, prompts, num_generations, decoding)``, e.g. the multi-turn tool loop
    ``grpo_kit.rollout.tool_rollout.tool_generate(tools)``. ``decoding`` (a :class:`~grpo_kit.rollout.generation.Decoding`)
    gives every decoding setting at once; the greedy answers ignore its sampling filters, the k samples use
    them. Without it: ``max_new_tokens``, ``temperature``, ``seed``, ``batch_size``, ``chat_template_kwargs``.
    Scores come from :mod:`grpo_kit.rollout.scoring` (a completion no function scored is NaN, left out of means).
    Raises ``RewardFunctionError`` naming the function and row if a reward function fails.
    """
    from grpo_kit.rollout.reward_models import as_reward_funcs
    from grpo_kit.rollout.scoring import score_completions
    from grpo_kit.rollout.tool_rollout import takes_rows
    from rewards.compose import reward_name

    funcs = as_reward_funcs(reward_funcs)  # functions, or reward model ids / paths / models as TRL takes
    weights = list(reward_weights) if reward_weights is not None else [1.0] * len(funcs)
    _check_counts(len(funcs), weights, k, num_prompts)
    rows = _rows(dataset, num_prompts)
    prompts = [r["prompt"] for r in rows]
    if decoding is None:
        decoding = Decoding(
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            seed=seed,
            batch_size=batch_size,
            chat_template_kwargs=chat_template_kwargs,
        )

    def sample(num_generations: int, greedy: bool) -> list[list[GeneratedCompletion]]:
        if sampler is not None:
            return sampler(prompts, num_generations)
        # An environment rollout (tool_rollout.tool_generate(environment_factory=...)) resets on the rows.
        extra_kwargs = {"rows": rows} if takes_rows(generate_fn) else {}
        if row_images(rows) is not None:  # TRL's image columns: a VLM and its processor
            extra_kwargs["images"] = row_images(rows)
        return (generate_fn or generate)(
            model, tokenizer, prompts, num_generations, decoding.replace(greedy=greedy), **extra_kwargs
        )

    names = [reward_name(f) for f in funcs]
    infos = [reward_info(f) for f in funcs]
    greedy = [group[0] for group in sample(1, greedy=True)]
    extra: dict[str, list[Any]] = {}
    scores, totals = score_completions(
        funcs, rows, greedy, weights, log_extra=lambda k, v: extra.setdefault(k, []).extend(v)
    )  # (N, F), (N,)
    extra = {k: [_jsonable(x) for x in v] for k, v in extra.items() if len(v) == len(rows)}
    per_prompt = _greedy_metrics(greedy, scores, totals, names, infos)
    if k > 1:
        groups = sample(k, greedy=False)
        per_prompt.update(_sample_metrics(groups, k, rows, funcs, weights, names, infos))
    return EvalReport(
        per_prompt=per_prompt,
        prompts=[_prompt_key(p) for p in prompts],
        completions=[c.text for c in greedy],
        reward_names=names,
        reward_kinds={n: i.kind for n, i in zip(names, infos)},
        settings=_report_settings(len(rows), k, decoding, weights),
        extra=extra,
    )


def _check_counts(num_funcs: int, weights: list[float], k: Any, num_prompts: int) -> None:
    if len(weights) != num_funcs:
        raise ValueError(
            f"{len(weights)} reward_weights for {num_funcs} reward functions; give one weight each."
        )
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an int >= 1 (samples per prompt for pass@k), got {k!r}.")
    if num_prompts < 1:
        raise ValueError(f"num_prompts must be >= 1, got {num_prompts}.")


def _greedy_metrics(
    greedy: Sequence[GeneratedCompletion],
    scores: list[list[float]],
    totals: list[float],
    names: list[str],
    infos: list[RewardInfo],
) -> dict[str, list[float]]:
    """The per-prompt metrics of the greedy answers (module docstring), from their scores ``(N, F)`` and
    weighted totals ``(N,)``."""
    per_prompt: dict[str, list[float]] = {"reward": totals}
    for j, (name, info) in enumerate(zip(names, infos)):
        per_prompt[f"reward/{name}"] = [s[j] for s in scores]
        if info.max_reward is not None:
            per_prompt[f"at_max/{name}"] = [_at_max(s[j], info.max_reward) for s in scores]
        if info.kind == "length":
            per_prompt[f"length_error/{name}"] = [abs(s[j]) for s in scores]
    for kind, metric in (("format", "format"), ("accuracy", "accuracy")):
        idx = [j for j, i in enumerate(infos) if i.kind == kind]
        if idx:
            per_prompt[metric] = [_all_met(s, idx, infos, kind) for s in scores]
    if any(c.messages is not None for c in greedy):  # multi-turn rollouts: what each episode did
        per_prompt.update(_episode_metrics(greedy))
    per_prompt["length"] = [float(c.num_tokens) for c in greedy]
    per_prompt["clipped"] = [0.0 if c.ended else 1.0 for c in greedy]
    per_prompt["eos"] = [1.0 if c.ended else 0.0 for c in greedy]
    return per_prompt


def _sample_metrics(
    groups: list[list[GeneratedCompletion]],
    k: int,
    rows: list[dict[str, Any]],
    funcs: list[Callable],
    weights: list[float],
    names: list[str],
    infos: list[RewardInfo],
) -> dict[str, list[float]]:
    """``mean@k``, ``accuracy@k`` and ``pass@k/<name>`` per prompt, from ``groups``: ``k`` samples per row."""
    from grpo_kit.rollout.scoring import score_completions

    flat = [c for g in groups for c in g]
    flat_rows = [r for r in rows for _ in range(k)]
    flat_scores, flat_totals = score_completions(funcs, flat_rows, flat, weights)  # (N*k, F), (N*k,)
    per_prompt = {f"mean@{k}": [_nanmean(flat_totals[i * k : (i + 1) * k]) for i in range(len(rows))]}
    accuracy_idx = [j for j, i in enumerate(infos) if i.kind == "accuracy"]
    if accuracy_idx:  # the share of the k samples that are right, per prompt (what training samples)
        met = [_all_met(s, accuracy_idx, infos, "accuracy") for s in flat_scores]  # (N*k,)
        per_prompt[f"accuracy@{k}"] = [_nanmean(met[i * k : (i + 1) * k]) for i in range(len(rows))]
    for j, (name, info) in enumerate(zip(names, infos)):
        if info.max_reward is not None:
            per_prompt[f"pass@{k}/{name}"] = [
                _any_at_max([s[j] for s in flat_scores[i * k : (i + 1) * k]], info.max_reward)
                for i in range(len(rows))
            ]
    return per_prompt


def _report_settings(num_prompts: int, k: int, decoding: Decoding, weights: list[float]) -> dict[str, Any]:
    return {
        "num_prompts": num_prompts,
        "k": k,
        "max_new_tokens": decoding.max_new_tokens,
        "temperature": decoding.temperature,
        "seed": decoding.seed,
        "chat_template_kwargs": decoding.chat_template_kwargs,
        "reward_weights": weights,
        "decoding": "greedy" + (f" + {k} samples at T={decoding.temperature}" if k > 1 else ""),
    }


def _episode_metrics(completions: Sequence[GeneratedCompletion]) -> dict[str, list[float]]:
    """Per multi-turn rollout: ``tool_calls`` made, ``failed_calls`` (an error result, an unparsed call or
    one left without result: ``rewards.tools.count_tool_calls``) and ``turns`` (assistant turns)."""
    from rewards.tools import count_tool_calls

    counts = [count_tool_calls(c.messages or []) for c in completions]
    return {
        "tool_calls": [float(calls) for calls, _ in counts],
        "failed_calls": [float(failures) for _, failures in counts],
        "turns": [float(sum(m.get("role") == "assistant" for m in c.messages or [])) for c in completions],
    }


def _jsonable(value: Any) -> Any:
    return value if value is None or isinstance(value, (str, int, float, bool)) else str(value)


def _prompt_key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False)


def _at_max(value: float, maximum: float) -> float:
    return math.nan if math.isnan(value) else float(value >= maximum - 1e-9)


def _any_at_max(values: Sequence[float], maximum: float) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return math.nan if not kept else float(any(v >= maximum - 1e-9 for v in kept))


def _all_met(scores: Sequence[float], idx: list[int], infos: list[RewardInfo], kind: str) -> float:
    """1 when every format reward pays something (> 0) / every accuracy reward is at its maximum (> 0 when
    its maximum is unknown), over the rewards that scored the row (None: not for this row, as TRL reads it;
    two environments' get_reward each score their own rows); NaN when none of them did."""
    idx = [j for j in idx if not math.isnan(scores[j])]
    if not idx:
        return math.nan
    if kind == "format":
        return float(all(scores[j] > 0 for j in idx))
    return float(
        all(
            scores[j] >= infos[j].max_reward - 1e-9 if infos[j].max_reward is not None else scores[j] > 0
            for j in idx
        )
    )
