"""The paired before/after comparison of one metric, and the metric a summary leads with.

``compare`` takes the per-prompt differences ``d_i = after_i - before_i`` of one metric and gives
their mean with a seeded percentile-bootstrap confidence interval (resample the n prompts with
replacement ``n_boot`` times, take the mean of each resample, read the ``(1-level)/2`` and
``(1+level)/2`` quantiles; Efron & Tibshirani, *An Introduction to the Bootstrap*, ch. 13). The verdict
is "improved" when the whole interval lies on the better side of 0, "worse" when on the worse side,
"no change" when it contains 0. Which side is better depends on the metric (a length error falls
when it improves).

:func:`headline_metric` is the one metric a run's summary states (run.json, the report card, the CLI's table),
chosen by what the recipe teaches.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from grpo_kit.evaluation.eval_report import EvalReport, better_direction

__all__ = ["HEADLINE_ORDER", "Comparison", "bootstrap_mean_ci", "compare", "compare_all", "headline_metric"]

# The one metric a run's summary states, by what the recipe teaches: a length target, the strict format,
# correctness (of the k samples, when there are any: what training samples), any format, else the total reward.
# A key ending in "/" or "@" is a prefix.
HEADLINE_ORDER = ("length_error/", "at_max/strict_format_reward", "accuracy@", "accuracy", "format", "reward")


def headline_metric(metrics: Mapping[str, Any]) -> str:
    """The metric a summary leads with, chosen from the names in ``metrics`` by :data:`HEADLINE_ORDER`."""
    for key in HEADLINE_ORDER:
        for name in metrics:
            if name.startswith(key) if key.endswith(("/", "@")) else name == key:
                return name
    return "reward"


@dataclass
class Comparison:
    """Paired before/after comparison of one metric: mean difference (after - before) with a bootstrap CI."""

    metric: str
    n: int
    before: float
    after: float
    mean_diff: float
    ci_low: float
    ci_high: float
    level: float
    n_boot: int
    seed: int
    higher_is_better: bool | None
    verdict: str  # "improved" | "no change" | "worse" ("increased"/"decreased" without a better direction)

    @property
    def relative_change(self) -> float:
        """``mean_diff / before`` (NaN when before is 0)."""
        return self.mean_diff / self.before if self.before else math.nan

    def summary(self) -> str:
        return (
            f"{self.metric}: {self.before:.3f} -> {self.after:.3f} (diff {self.mean_diff:+.3f}, "
            f"{self.level:.0%} CI [{self.ci_low:+.3f}, {self.ci_high:+.3f}], n={self.n}): {self.verdict}"
        )


def bootstrap_mean_ci(
    diffs: Sequence[float], *, n_boot: int = 10000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``diffs`` (seeded numpy Generator)."""
    import numpy as np

    d = np.asarray(diffs, dtype=float)
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    for start in range(0, n_boot, 1000):  # chunks keep memory at 1000 x n
        stop = min(start + 1000, n_boot)
        means[start:stop] = d[rng.integers(0, d.size, size=(stop - start, d.size))].mean(axis=1)
    alpha = (1 - level) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return float(low), float(high)


def _verdict(low: float, high: float, better: bool | None) -> str:
    if low <= 0 <= high:
        return "no change"
    up = low > 0
    if better is None:
        return "increased" if up else "decreased"
    return "improved" if up == better else "worse"


def compare(
    before: EvalReport,
    after: EvalReport,
    *,
    metric: str = "reward",
    n_boot: int = 10000,
    seed: int = 0,
    level: float = 0.95,
    higher_is_better: bool | None = None,
) -> Comparison:
    """Paired comparison of ``metric`` over the prompts both reports answered (NaN pairs are dropped).

    ``higher_is_better`` defaults from the metric's name (``length_error/*`` and ``clipped`` improve when
    they fall; ``length`` has no better side). Raises ``ValueError`` if the reports were made on different
    prompts or lack the metric.
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), e.g. 0.95; got {level!r}.")
    if n_boot < 100:
        raise ValueError(f"n_boot={n_boot} is too few resamples for a stable interval; use >= 1000.")
    for name, report in (("before", before), ("after", after)):
        if metric not in report.per_prompt:
            raise ValueError(
                f"metric {metric!r} is not in the {name} report; it has {sorted(report.per_prompt)}."
            )
    if before.prompts != after.prompts:
        raise ValueError(
            "before and after were evaluated on different prompts; a paired comparison needs the "
            "same held-out prompts in the same order (same dataset rows, num_prompts and template)."
        )
    pairs = [
        (b, a)
        for b, a in zip(before.per_prompt[metric], after.per_prompt[metric])
        if not (math.isnan(b) or math.isnan(a))
    ]
    if not pairs:
        raise ValueError(f"metric {metric!r} is undefined (NaN) on every prompt; nothing to compare.")
    diffs = [a - b for b, a in pairs]
    low, high = bootstrap_mean_ci(diffs, n_boot=n_boot, seed=seed, level=level)
    better = higher_is_better if higher_is_better is not None else better_direction(metric)
    n = len(pairs)
    return Comparison(
        metric=metric,
        n=n,
        before=sum(b for b, _ in pairs) / n,
        after=sum(a for _, a in pairs) / n,
        mean_diff=sum(diffs) / n,
        ci_low=low,
        ci_high=high,
        level=level,
        n_boot=n_boot,
        seed=seed,
        higher_is_better=better,
        verdict=_verdict(low, high, better),
    )


def compare_all(before: EvalReport, after: EvalReport, **kwargs: Any) -> dict[str, Comparison]:
    """:func:`compare` for every metric both reports have and that is defined somewhere."""
    out = {}
    for metric in before.per_prompt:
        if metric in after.per_prompt:
            try:
                out[metric] = compare(before, after, metric=metric, **kwargs)
            except ValueError as error:
                if "undefined" not in str(error):
                    raise
    return out
