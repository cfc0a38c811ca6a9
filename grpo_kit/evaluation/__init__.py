"""Evaluation: what a model does on held-out rows, how before and after compare, and what a learner reads.

* ``eval_report`` -- :func:`evaluate`: given rows answered greedily (plus ``k`` seeded samples), every metric per
  prompt, in an :class:`EvalReport` (decoded through ``grpo_kit.rollout.generation``, scored through ``grpo_kit.rollout.scoring``).
* ``comparison`` -- :func:`compare`: the paired bootstrap CI of one metric's change and its verdict;
  :func:`headline_metric`, the metric a summary leads with.
* ``reward_hacking`` -- a better reward while the answers collapse is judged "reward hack suspected".
* ``report_card`` -- ``eval.json``, ``report.md`` and ``report_card.png``, written atomically.
* ``samples`` -- ``samples.md`` / ``samples.json``: answers before and after, side by side (no decoder of its own).
* ``preflight`` -- before training: will GRPO learn? Go / no-go with fixes.

Which rows are held out, and the recipe's evaluation on them, is ``grpo_kit.runs.held_out``.
"""

from grpo_kit.evaluation.comparison import (
    HEADLINE_ORDER,
    Comparison,
    bootstrap_mean_ci,
    compare,
    compare_all,
    headline_metric,
)
from grpo_kit.evaluation.eval_report import (
    REWARD_INFO,
    EvalReport,
    GeneratedCompletion,
    RewardInfo,
    better_direction,
    evaluate,
    reward_info,
)

__all__ = [
    "HEADLINE_ORDER",
    "REWARD_INFO",
    "Comparison",
    "EvalReport",
    "GeneratedCompletion",
    "RewardInfo",
    "better_direction",
    "bootstrap_mean_ci",
    "compare",
    "compare_all",
    "evaluate",
    "headline_metric",
    "reward_info",
]
