"""Pre-flight: will GRPO have anything to learn from? Seconds of sampling before minutes of training.

GRPO learns only from differences *within* a group of G completions of one prompt: the advantage is
``(r_i - mean(r)) / std(r)``, so a group whose rewards are all equal contributes nothing (TRL logs its
share as ``frac_reward_zero_std``). Three things silently kill a run this way, and each shows up in a
handful of samples from the base model:

* the reward is (almost) always the same, e.g. a format the model never writes -> zero-std groups;
* no completion ends (no EOS: a chat template the model does not follow) -> every completion is
  clipped at ``max_completion_length`` and the length/format rewards are all alike;
* the chat template already opens ``<think>``, so a reward that expects the completion to start with
  it never pays.

:func:`validate_inputs` catches what needs no model (no ``prompt`` column, a reward function that
raises on a row, named with the row); :func:`check` samples ``num_generations`` completions for
``num_prompts`` prompts with the recipe's generation settings and returns a :class:`PreflightReport`
with a go/no-go verdict, each finding carrying its fix.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from datasets_prep.chat import prompt_to_sample_from
from grpo_kit.config.rules import GRPO_DEFAULTS, check_num_generations, training_value
from grpo_kit.evaluation.eval_report import reward_info
from grpo_kit.rollout.generation import (
    Decoding,
    GeneratedCompletion,
    Sampler,
    generate,
    prompt_texts,
    row_images,
)

__all__ = [
    "Finding",
    "PreflightReport",
    "check",
    "check_recipe",
    "clipped_finding",
    "validate_inputs",
    "zero_std_finding",
]

# A run is no-go at or above these shares, and gets a warning at or above the *_WARN ones. GRPO learns from
# every group whose rewards differ, so what kills a run is (almost) no such group: the motivating cases were
# 94 % zero-std and 88 % clipped. Half the groups with signal is a run that learns: gsm8k-cpu's pre-flight
# (8 prompts x 4 completions of <= 96 tokens at T=0.8) sees 50 % zero-std groups and 50 % clipped
# completions, and the recipe goes from 2.5 % to 100 % strict format in 40 steps (README, lesson 6). The
# old thresholds (no-go at 50 %) refused that recipe; with 8 prompts, 80 % means 7 of 8 groups are flat.
ZERO_STD_NO_GO = 0.8
ZERO_STD_WARN = 0.5
CLIPPED_NO_GO = 0.8
CLIPPED_WARN = 0.5
# Format rewards that need the completion itself to start with "<think>".
EXPECTS_OPENING_THINK = frozenset({"format_reward", "think_format_reward"})
# Probe completions for validate_inputs: empty, plain text, and the course's XML layout.
PROBE_COMPLETIONS = (
    "",
    "The answer is 42.",
    "<reasoning>\n6 * 7 = 42\n</reasoning>\n<answer>\n42\n</answer>\n",
)


@dataclass
class Finding:
    """One thing pre-flight saw: ``severity`` "no-go" (training would not learn) or "warning"."""

    code: str
    severity: str
    message: str
    fix: str

    def __str__(self) -> str:
        return f"[{self.severity}] {self.message} Fix: {self.fix}"


@dataclass
class PreflightReport:
    num_prompts: int
    num_generations: int
    zero_std_share: float  # groups whose total reward has zero variance
    clipped_ratio: float  # completions that hit max_completion_length without EOS
    eos_rate: float
    reward_mean: dict[str, float]
    reward_std: dict[str, float]
    pass_at_g: dict[str, float]  # per correctness/accuracy function: prompts with >= 1 completion at its max
    prompt_ending: str  # the last characters of the first rendered prompt
    opens_think: bool  # the rendered prompt already ends inside <think>
    findings: list[Finding] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)  # a few completions, to look at

    @property
    def go(self) -> bool:
        return not any(f.severity == "no-go" for f in self.findings)

    @property
    def verdict(self) -> str:
        return "go" if self.go else "no-go"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict}

    def summary(self) -> str:
        lines = [
            (
                f"pre-flight: {self.verdict.upper()} ({self.num_prompts} prompts x {self.num_generations} "
                f"completions)"
            ),
            (
                f"  zero-std groups {self.zero_std_share:.0%}, clipped {self.clipped_ratio:.0%}, "
                f"EOS {self.eos_rate:.0%}"
            ),
        ]
        for name, mean in self.reward_mean.items():
            lines.append(
                f"  {name}: mean {mean:.3g}, std {self.reward_std[name]:.3g}"
                + (
                    f", pass@{self.num_generations} {self.pass_at_g[name]:.0%}"
                    if name in self.pass_at_g
                    else ""
                )
            )
        lines.append(f"  rendered prompt ends with {self.prompt_ending!r}")
        lines += [f"  {f}" for f in self.findings]
        return "\n".join(lines)


def validate_inputs(
    dataset: Any, reward_funcs: Callable | Sequence[Callable], *, num_prompts: int = 8
) -> list:
    """Checks that need no model. Returns the reward functions as a list; raises ``ValueError`` for a
    dataset without a ``prompt`` column and ``RewardFunctionError`` (function + row) when a reward
    function raises on one of the first ``num_prompts`` rows with a probe completion."""
    from datasets_prep.chat import is_conversational_prompt
    from grpo_kit.rollout.scoring import reward_table
    from rewards import check_reward_funcs

    funcs = check_reward_funcs(reward_funcs)
    columns = list(getattr(dataset, "column_names", None) or (dataset[0].keys() if len(dataset) else []))
    if "prompt" not in columns:
        raise ValueError(
            f"the dataset has no 'prompt' column (columns: {columns}). GRPO samples completions for "
            "dataset['prompt']: rename your question column to 'prompt' or prepare the data with a "
            "datasets_prep loader (e.g. load_gsm8k)."
        )
    rows = [dict(dataset[i]) for i in range(min(num_prompts, len(dataset)))]
    if not rows:
        raise ValueError("the dataset is empty; pre-flight needs at least one prompt.")
    conversational = is_conversational_prompt(rows[0]["prompt"])
    probe_rows = [r for r in rows for _ in PROBE_COMPLETIONS]
    texts = [t for _ in rows for t in PROBE_COMPLETIONS]
    completions = [[{"role": "assistant", "content": t}] for t in texts] if conversational else texts
    other = {k: [r[k] for r in probe_rows] for k in rows[0] if k != "prompt"}
    # Trainers always pass completion_ids; token-counting rewards need them (bytes stand in for tokens).
    probe_ids = [list(t.encode()) for t in texts]
    reward_table(funcs, [r["prompt"] for r in probe_rows], completions, completion_ids=probe_ids, **other)
    return funcs


def check(
    model,
    tokenizer,
    dataset: Any,
    reward_funcs: Callable | Sequence[Callable],
    *,
    num_prompts: int = 8,
    num_generations: int = GRPO_DEFAULTS["num_generations"],
    decoding: Decoding | None = None,
    reward_weights: Sequence[float] | None = None,
    sampler: Sampler | None = None,
) -> PreflightReport:
    """Sample ``num_generations`` completions for the first ``num_prompts`` prompts and judge learnability.

    Use the run's generation settings (``num_generations`` and ``decoding``, e.g.
    ``Decoding.from_training(recipe.training)``), so what pre-flight sees is what the first training step
    will see; ``None`` is ``Decoding(max_new_tokens=256)``, sampled at T = 1. ``sampler(prompts, G)`` replaces
    the model's decoding (canned completions in tests).
    """
    from grpo_kit.rollout.scoring import score_completions
    from rewards.compose import reward_name

    check_num_generations(num_generations)
    funcs = validate_inputs(dataset, reward_funcs, num_prompts=num_prompts)
    decoding = decoding or Decoding(max_new_tokens=256)
    weights = list(reward_weights) if reward_weights is not None else [1.0] * len(funcs)
    rows = [dict(dataset[i]) for i in range(min(num_prompts, len(dataset)))]
    prompts = [prompt_to_sample_from(r) for r in rows]  # what training samples from (guided: sampling_prompt)
    rendered = (
        prompt_texts(tokenizer, prompts[:1], decoding.chat_template_kwargs)[0]
        if tokenizer is not None
        else (prompts[0] if isinstance(prompts[0], str) else "")
    )
    if sampler is not None:
        groups = sampler(prompts, num_generations)
    else:
        # image rows (TRL's image column) are sampled with their pictures, the processor as tokenizer
        groups = generate(model, tokenizer, prompts, num_generations, decoding, images=row_images(rows))
    flat: list[GeneratedCompletion] = [c for g in groups for c in g]
    flat_rows = [r for r in rows for _ in range(num_generations)]
    # Multi-turn tool rollouts (grpo_kit.rollout.tool_rollout) are scored as their message lists, as TRL does.
    scores, totals = score_completions(funcs, flat_rows, flat, weights)  # (N*G, F), (N*G,)

    G = num_generations
    # TRL leaves unscorable completions (NaN) out of the group baseline; fewer than 2 scored: no signal.
    group_totals = [[t for t in totals[i : i + G] if not math.isnan(t)] for i in range(0, len(totals), G)]
    zero_std = sum(
        len(g) < 2 or math.isclose(statistics.pstdev(g), 0.0, abs_tol=1e-8) for g in group_totals
    ) / len(group_totals)
    clipped = sum(not c.ended for c in flat) / len(flat)
    names = [reward_name(f) for f in funcs]
    means, stds, pass_at = {}, {}, {}
    for j, (name, fn) in enumerate(zip(names, funcs)):
        values = [s[j] for s in scores if not math.isnan(s[j])]
        means[name] = statistics.fmean(values) if values else math.nan
        stds[name] = statistics.pstdev(values) if values else math.nan
        info = reward_info(fn)
        if info.kind == "accuracy" and info.max_reward is not None:
            solved = [
                any(s[j] >= info.max_reward - 1e-9 for s in scores[i : i + G] if not math.isnan(s[j]))
                for i in range(0, len(scores), G)
            ]
            pass_at[name] = sum(solved) / len(solved)

    report = PreflightReport(
        num_prompts=len(rows),
        num_generations=G,
        zero_std_share=zero_std,
        clipped_ratio=clipped,
        eos_rate=1.0 - clipped,
        reward_mean=means,
        reward_std=stds,
        pass_at_g=pass_at,
        prompt_ending=rendered[-40:],
        opens_think=rendered.rstrip().endswith("<think>"),
        examples=[c.text for c in flat][:: max(1, G)][:4],
    )
    report.findings = _findings(report, funcs, names, decoding.max_new_tokens)
    return report


def check_recipe(
    recipe: Any, model, tokenizer, dataset: Any, *, num_prompts: int = 8, reward_funcs: list | None = None
) -> PreflightReport:
    """:func:`check` at a recipe's own settings: its reward functions (``reward_funcs``: already built from it)
    and weights, its group size, the decoding its first training step samples with (``Decoding.from_training``,
    the recipe's seed) and, for a recipe with ``tools``, multi-turn rollouts with them
    (``tool_rollout.recipe_generate``, on its tool template) and, for a recipe with an ``environment``, one
    episode per rollout scored by its ``get_reward`` too — what ``grpo-kit train --preflight`` and the
    lessons run."""
    from grpo_kit.rollout.tool_rollout import recipe_generate, recipe_reward_funcs, takes_rows

    training = recipe.training
    decoding = Decoding.from_training(training, seed=int(training_value(training, "seed")))
    sampler = None
    generate_fn = recipe_generate(
        recipe, tokenizer
    )  # tools: multi-turn rollouts, as held-out evaluation runs
    if generate_fn is not None:
        turn_decoding = decoding  # each turn's budget; the prompt is rendered with the tools listed
        rows = [dict(dataset[i]) for i in range(min(num_prompts, len(dataset)))]  # the ones check() samples
        decoding = decoding.replace(
            chat_template_kwargs={
                **(decoding.chat_template_kwargs or {}),
                "tools": generate_fn.keywords["tools"] or None,
            }
        )

        def sampler(prompts, num_generations):
            extra = {"rows": rows[: len(prompts)]} if takes_rows(generate_fn) else {}
            return generate_fn(model, tokenizer, prompts, num_generations, turn_decoding, **extra)

    funcs, weights = recipe_reward_funcs(
        recipe, reward_funcs if reward_funcs is not None else recipe.build_reward_funcs(tokenizer)
    )
    return check(
        model,
        tokenizer,
        dataset,
        funcs,
        num_prompts=num_prompts,
        num_generations=int(training_value(training, "num_generations")),
        decoding=decoding,
        reward_weights=weights,
        sampler=sampler,
    )


def zero_std_finding(share: float, *, no_go: bool) -> Finding:
    """``share`` of the groups have zero reward variance: the finding, in the words pre-flight and the signal watch
    during training (``grpo_kit.evaluation.signal_watch``) both print."""
    return Finding(
        "zero_std",
        "no-go" if no_go else "warning",
        f"{share:.0%} of groups have zero reward variance: the task is too hard or too easy "
        "for this model, so those groups give no learning signal"
        + ("." if no_go else " (the others do: training can learn, more slowly)."),
        "Use a partial-credit reward (e.g. xmlcount_reward, soft_format_reward), raise num_generations, "
        "or pick easier prompts (a worked example in the prompt helps a small model).",
    )


def clipped_finding(ratio: float, max_completion_length: int, *, no_go: bool) -> Finding:
    """``ratio`` of the completions hit ``max_completion_length`` without EOS: the finding, in the words pre-flight
    and the signal watch during training both print."""
    return Finding(
        "clipped",
        "no-go" if no_go else "warning",
        f"{ratio:.0%} of completions hit max_completion_length={max_completion_length}: "
        + ("no EOS." if no_go else "no EOS in those (the rest end; their rewards still differ)."),
        "Check the chat template (conversational prompts for an instruct model), or raise "
        "max_completion_length.",
    )


def _findings(
    report: PreflightReport, funcs: list, names: list[str], max_completion_length: int
) -> list[Finding]:
    found = []
    if report.zero_std_share >= ZERO_STD_WARN:
        found.append(zero_std_finding(report.zero_std_share, no_go=report.zero_std_share >= ZERO_STD_NO_GO))
    if report.clipped_ratio >= CLIPPED_WARN:
        found.append(
            clipped_finding(
                report.clipped_ratio, max_completion_length, no_go=report.clipped_ratio >= CLIPPED_NO_GO
            )
        )
    for name in names:
        if math.isnan(report.reward_mean[name]):
            found.append(
                Finding(
                    "reward_all_none",
                    "no-go",
                    f"{name} returned None for every completion, so it never contributes.",
                    "Check that the dataset has the column it reads (e.g. 'answer' for correctness_reward).",
                )
            )
    for name, share in report.pass_at_g.items():
        if share == 0:
            found.append(
                Finding(
                    "never_solved",
                    "warning",
                    f"no prompt was solved in {report.num_generations} samples ({name} pass@{report.num_generations} "
                    "= 0%): the correctness reward gives no signal yet.",
                    "Keep format/partial-credit rewards so the model learns something first, or use easier prompts.",
                )
            )
    expects_think = any(n in EXPECTS_OPENING_THINK for n in names)
    if report.opens_think and expects_think:
        found.append(
            Finding(
                "template_opens_think",
                "warning",
                "the chat template already ends the prompt with <think>, so completions start inside the reasoning "
                "and a reward that expects them to open <think> never pays.",
                "Pass chat_template_kwargs={'enable_thinking': False} so the model writes the tag itself, or use a "
                "format reward that accepts a completion starting inside <think> (prepend '<think>' before scoring).",
            )
        )
    elif report.opens_think:
        found.append(
            Finding(
                "template_opens_think",
                "warning",
                "the chat template already ends the prompt with <think>: completions start inside the reasoning.",
                "Make sure the format rewards do not expect the completion to open <think> itself.",
            )
        )
    return found
