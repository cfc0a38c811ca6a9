"""Tool-use success on the calculator-tool-cpu held-out questions, before or after training.

    python benchmarks/calculator_tool_eval.py before.json                  # the embedded base model
    python benchmarks/calculator_tool_eval.py after.json RUN_DIR           # a trained run folder
    python benchmarks/calculator_tool_eval.py --compare before.json after.json

The library's held-out evaluation (grpo_kit.runs.held_out.evaluate_held_out, what `grpo-kit train` reports):
multi-turn tool rollouts (grpo_kit.rollout.tool_rollout) scored by grpo_kit.evaluation with the recipe's rewards:
greedy answers plus k samples at T=1.0 per question; ``mean@k`` is then the share of sampled rollouts with a
well-formed call AND the correct final answer (weights: success 1, call 0, answer 0). ``--compare`` prints
the paired bootstrap 95% CIs (grpo_kit.evaluation.compare).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

RECIPE = "calculator-tool-cpu"


def run_eval(out: Path, model_dir: str | None, *, num_prompts: int, k: int, seed: int) -> None:
    import torch

    from grpo_kit.models import load_model
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.runs.held_out import evaluate_held_out, held_out_rows
    from grpo_kit.support.paths import write_atomic

    torch.set_num_threads(1)
    recipe = get_recipe(RECIPE)
    model, tokenizer = load_model(model_dir or recipe.model)
    rows = held_out_rows(recipe, num_prompts)  # the recipe's test split, disjoint from its training questions
    started = time.time()
    # the library's evaluation (what `grpo-kit train --recipe calculator-tool-cpu` reports), tools included
    report = evaluate_held_out(
        recipe, model, tokenizer, recipe.build_reward_funcs(tokenizer), rows, k=k, seed=seed
    )
    report.settings["wall_s"] = round(time.time() - started, 1)
    report.settings["model"] = model_dir or recipe.model
    write_atomic(out, json.dumps(report.to_dict(), indent=1))
    m = report.metrics
    print(
        json.dumps(
            {
                "greedy_success": m["reward/tool_success_reward"],
                f"mean@{k}_success": m[f"mean@{k}"],
                "wall_s": report.settings["wall_s"],
            }
        )
    )


def run_compare(before: Path, after: Path) -> None:
    from grpo_kit.evaluation import EvalReport, compare

    b, a = (EvalReport.from_dict(json.loads(Path(p).read_text())) for p in (before, after))
    k = b.settings["k"]
    for metric in (f"mean@{k}", "reward/tool_success_reward", "reward/tool_call_reward"):
        print(metric, compare(b, a, metric=metric))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="report JSON to write (or the 'before' report with --compare)")
    parser.add_argument("model_dir", nargs="?", help="trained run folder (default: the base model)")
    parser.add_argument(
        "--compare", action="store_true", help="compare two reports: OUT is before, MODEL_DIR after"
    )
    parser.add_argument("--num-prompts", type=int, default=32)
    parser.add_argument("-k", type=int, default=2, help="samples per question at T=1.0")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.compare:
        run_compare(Path(args.out), Path(args.model_dir))
    else:
        run_eval(Path(args.out), args.model_dir, num_prompts=args.num_prompts, k=args.k, seed=args.seed)


if __name__ == "__main__":
    main()
