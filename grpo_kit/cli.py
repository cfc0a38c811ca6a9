"""``grpo-kit``: the command line. It parses arguments and calls the library (``grpo_kit.run`` for runs).

    grpo-kit train                                  # the main job: default recipe, embedded model, CPU, offline
    grpo-kit train --recipe gsm8k-cpu --loop trl --max-steps 20 --set learning_rate=5e-5 --set lora.r=8
    grpo-kit train --output-dir outputs/run --resume            # continue after Ctrl-C (stored configuration)
    grpo-kit train --output-dir outputs/run --overwrite         # start again there (old run moved aside)
    grpo-kit export outputs/run --gguf f16                       # adapter -> merged (+ GGUF), verified
    grpo-kit generate outputs/run                                # base vs trained answers, side by side
    grpo-kit eval outputs/run --num-prompts 64 --k 4             # held-out report card, base vs trained
    grpo-kit preflight --recipe gsm8k-cpu                        # will GRPO learn? go / no-go with fixes
    grpo-kit train --preflight                                   # pre-flight first; refuses a no-go (--force)
    grpo-kit losses --lengths 4 32 16 128 --rewards 1 0 1 0      # grpo_kit.loss_demo
    grpo-kit rewards lint rewards:length_reward                  # rewards.lint
    grpo-kit recipes                                             # the named recipes

``train`` writes a run folder (default ``outputs/<recipe>-<timestamp>``; see ``grpo_kit.run``). Mistakes in
the configuration are found before the model loads (exit 2); anything that goes wrong later is one line
naming the fix (exit 1); ``--debug`` shows the traceback instead. Every string from a user, a dataset or
a model is printed through ``grpo_kit.terminal`` (no markup, no escape sequences). Model
"tiny" (``--set model=tiny``) is grpo_kit.models.tiny_model(): a random 2-layer Llama for trying the
plumbing in seconds.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_kit.run import DEFAULT_LOOP, LOOPS
from grpo_kit.terminal import install_plain_warnings, markup_safe, plain

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(ValueError):
    """Bad command-line input; the message names the fix."""


# --------------------------------------------------------------------------- parsing helpers


def parse_value(text: str) -> Any:
    """``--set`` values: JSON or a Python literal (``1e-5``, ``true``, ``None``, ``[1, 2]``), else the string."""
    lowered = text.strip().lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError):
            continue
    return text


def parse_overrides(items: Sequence[str]) -> dict[str, Any]:
    """``["learning_rate=1e-5", "lora.r=8"]`` -> ``{"learning_rate": 1e-5, "lora": {"r": 8}}``."""
    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise UsageError(
                f"--set expects KEY=VALUE (e.g. --set learning_rate=1e-5 or --set lora.r=8), got {item!r}."
            )
        if "." in key:
            head, _, field = key.partition(".")
            if head not in ("lora", "unsloth"):
                raise UsageError(f"dotted --set keys exist for lora.* and unsloth.* only, got {key!r}.")
            overrides.setdefault(head, {})[field] = parse_value(value)
        else:
            overrides[key] = parse_value(value)
    return overrides


def build_parser() -> argparse.ArgumentParser:
    from grpo_kit.recipes import DEFAULT_RECIPE

    parser = argparse.ArgumentParser(
        prog="grpo-kit", description="Learn GRPO from the formula to an exported model."
    )
    # --debug before the subcommand (`grpo-kit --debug export ...`) or after it: the subcommand's copy
    # defaults to SUPPRESS so that it never overwrites the value the top-level parser set.
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback of an error"
    )
    train = sub.add_parser(
        "train",
        help="train with a recipe (no arguments: the CPU main job)",
        parents=[debug],
        description="Train with GRPO. With no arguments: the default recipe on the embedded "
        "SmolLM2-135M, offline, on CPU.",
    )
    train.add_argument(
        "--recipe",
        default=None,
        help=f"recipe name (default {DEFAULT_RECIPE}, or the stored one with --resume; see `grpo-kit recipes`)",
    )
    train.add_argument("--small", action="store_true", help="use the recipe's CPU-sized variant")
    train.add_argument(
        "--loop",
        choices=LOOPS,
        default=None,
        help=f"standalone (readable PyTorch loop), trl (GRPOTrainer), unsloth (GPU). Default {DEFAULT_LOOP}",
    )
    train.add_argument("--max-steps", type=int, default=None, help="optimizer steps (overrides the recipe)")
    train.add_argument("--output-dir", default=None, help="run folder (default outputs/<recipe>-<timestamp>)")
    train.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=None,
        metavar="CKPT",
        help="continue from the latest checkpoint in --output-dir (or the newest run of this recipe), "
        "or from the checkpoint folder given; alone, it takes the run's stored configuration",
    )
    train.add_argument(
        "--overwrite",
        action="store_true",
        help="--output-dir already holds a run: move it aside to <dir>.old-<timestamp> and start anew",
    )
    train.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe field or GRPOConfig field: --set learning_rate=1e-5 --set model=tiny "
        "--set lora.r=8 (repeatable)",
    )
    train.add_argument(
        "--samples", type=int, default=4, help="held-out prompts for before/after answers (0: none)"
    )
    train.add_argument("--no-merge", action="store_true", help="skip the merged 16-bit export")
    train.add_argument("--gguf", default=None, metavar="TYPE", help="also export GGUF (f16, q8_0, ...)")
    train.add_argument(
        "--eval-prompts",
        type=int,
        default=None,
        metavar="N",
        help="held-out prompts evaluated before and after training into the report card "
        "(default: the recipe's eval_prompts, 32 on the CPU recipes; 0: no evaluation)",
    )
    train.add_argument(
        "--preflight",
        action="store_true",
        help="run `grpo-kit preflight` first and refuse to train on a no-go",
    )
    train.add_argument("--force", action="store_true", help="with --preflight: train even on a no-go")

    export = sub.add_parser(
        "export", help="export a trained run: merged 16-bit model and/or GGUF, verified", parents=[debug]
    )
    export.add_argument("source", help="a run folder (with adapter/), an adapter folder, or a model folder")
    export.add_argument("--out", default=None, help="destination folder (default: the source run folder)")
    export.add_argument(
        "--dtype",
        default="16bit",
        help="merged weights: 16bit (bf16; fp16 on pre-Ampere GPUs), bf16, fp16, fp32",
    )
    export.add_argument(
        "--gguf",
        default=None,
        metavar="TYPE",
        help="also write a GGUF file of this type (f16, bf16, q8_0, ...)",
    )
    export.add_argument(
        "--base",
        default=None,
        help="base model of the adapter (default: from run.json / adapter_config.json)",
    )
    export.add_argument(
        "--overwrite",
        action="store_true",
        help="empty a destination folder that holds other files before writing into it",
    )
    export.add_argument(
        "--llama-cpp-dir",
        default=None,
        help="llama.cpp checkout with convert_hf_to_gguf.py (default $LLAMA_CPP_DIR)",
    )
    export.add_argument(
        "--push-to-hub",
        default=None,
        metavar="ORG/NAME",
        help="then upload the merged model (or --push-adapter), its model card and the GGUF files asked for",
    )
    export.add_argument("--private", action="store_true", help="with --push-to-hub: create a private repo")
    export.add_argument(
        "--push-adapter",
        action="store_true",
        help="with --push-to-hub: upload the LoRA adapter instead of the merged model",
    )

    generate = sub.add_parser(
        "generate", help="answers before vs after training, side by side", parents=[debug]
    )
    generate.add_argument("source", help="a run folder (with adapter/) or an adapter folder")
    generate.add_argument(
        "--prompt",
        action="append",
        default=[],
        help="a prompt (repeatable; default: held-out recipe prompts)",
    )
    generate.add_argument(
        "--recipe", default=None, help="recipe whose held-out prompts to use (default: the run's)"
    )
    generate.add_argument("-n", "--num-prompts", type=int, default=4)
    generate.add_argument("--max-new-tokens", type=int, default=64)
    generate.add_argument(
        "--base",
        default=None,
        help="base model of the adapter (default: from run.json / adapter_config.json)",
    )
    generate.add_argument(
        "--sample", action="store_true", help="one seeded sample per prompt instead of greedy"
    )

    evaluate = sub.add_parser(
        "eval",
        help="held-out report card of a run folder or exported model: base vs trained",
        parents=[debug],
        description="Evaluate the base model and the trained one on the recipe's held-out "
        "prompts (greedy; paired bootstrap CIs) and write eval.json, report.md "
        "and report_card.png into the folder (or --out).",
    )
    evaluate.add_argument(
        "run", help="a `grpo-kit train` run folder, an adapter folder or an exported model folder"
    )
    evaluate.add_argument(
        "--num-prompts",
        type=int,
        default=None,
        metavar="N",
        help="held-out prompts (default: the recipe's eval_prompts)",
    )
    evaluate.add_argument(
        "--k", type=int, default=1, help="also k seeded samples per prompt for pass@k, mean@k"
    )
    evaluate.add_argument(
        "--recipe", default=None, help="recipe whose held-out prompts to use (default: the run's)"
    )
    evaluate.add_argument(
        "--base", default=None, help="base model (default: from run.json / adapter_config.json)"
    )
    evaluate.add_argument("--out", default=None, help="folder for the report card (default: the run folder)")

    preflight = sub.add_parser(
        "preflight",
        help="will GRPO learn? sample the base model, go / no-go with fixes",
        description="Sample num_generations completions for a few prompts with the "
        "recipe's generation settings and report zero-std groups, clipping, "
        "EOS rate, rewards and the prompt ending, with a go/no-go verdict.",
    )
    preflight.add_argument("--recipe", default=DEFAULT_RECIPE, help=f"recipe name (default {DEFAULT_RECIPE})")
    preflight.add_argument("--small", action="store_true", help="use the recipe's CPU-sized variant")
    preflight.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a recipe field or GRPOConfig field (as in train)",
    )
    preflight.add_argument(
        "--num-prompts", type=int, default=8, metavar="N", help="prompts to sample (default 8)"
    )

    losses = sub.add_parser(
        "losses", help="per-token weights of each GRPO loss type (grpo_kit.loss_demo)", add_help=False
    )
    losses.add_argument("args", nargs=argparse.REMAINDER)

    rewards = sub.add_parser("rewards", help="reward-function tools")
    rewards_sub = rewards.add_subparsers(dest="rewards_command", metavar="TOOL")
    lint = rewards_sub.add_parser(
        "lint", help="run reward functions over tricky completions (rewards.lint)", add_help=False
    )
    lint.add_argument("args", nargs=argparse.REMAINDER)

    recipes = sub.add_parser(
        "recipes", help="list the named recipes; `grpo-kit recipes NAME` shows one in full"
    )
    recipes.add_argument("name", nargs="?", default=None, help="a recipe to show in full")
    doctor = sub.add_parser(
        "doctor", help="check this environment: versions vs pins, device, paths, model, disk", add_help=False
    )
    doctor.add_argument("args", nargs=argparse.REMAINDER)
    return parser


# --------------------------------------------------------------------------- train

# OSError: output folder is a file / not writable / already holds a run; CheckpointError is a ValueError.
CONFIG_ERRORS = (ValueError, TypeError, OSError, ImportError, RuntimeError)


class RunError(RuntimeError):
    """Something failed after the model loaded; the message names what and the fix (exit status 1)."""


def cmd_train(args, console) -> int:
    from grpo_kit import run

    if args.samples < 0:
        raise UsageError(f"--samples must be >= 0 (0: no before/after answers), got {args.samples}.")
    try:  # every configuration mistake surfaces here, before a model is loaded or a folder is written
        plan = run.plan_run(
            args.recipe,
            small=args.small,
            overrides=parse_overrides(args.overrides),
            loop=args.loop,
            max_steps=args.max_steps,
            output_dir=args.output_dir,
            resume=args.resume,
            overwrite=args.overwrite,
            gguf=args.gguf,
        )
    except CONFIG_ERRORS as error:
        raise UsageError(str(error)) from error
    recipe, output_dir = plan.recipe, plan.output_dir
    plan.flags = {  # replayed by the resume command printed on an interruption
        "samples": args.samples,
        "no_merge": args.no_merge,
        "eval_prompts": args.eval_prompts,
        "preflight": args.preflight,
        "force": args.force,
    }
    if plan.set_aside is not None:
        console.print(
            f"--overwrite: the run already in {markup_safe(output_dir)} is moved aside to "
            f"{markup_safe(plan.set_aside)}.",
            highlight=False,
            soft_wrap=True,
        )
    if plan.loop == "unsloth":
        console.print(f"[bold]grpo-kit train[/] {markup_safe(recipe.name)} — Unsloth path")
    else:
        console.print(
            f"[bold]grpo-kit train[/] recipe [cyan]{markup_safe(recipe.name)}[/] · loop [cyan]{plan.loop}[/] · "
            f"model [cyan]{markup_safe(recipe.model)}[/] · {markup_safe(recipe.training.get('max_steps', '?'))} "
            f"steps → [green]{markup_safe(output_dir)}[/]"
        )
    if args.eval_prompts is not None and args.eval_prompts < 0:
        raise UsageError(f"--eval-prompts must be >= 0 (0 turns evaluation off), got {args.eval_prompts}.")
    if args.force and not args.preflight:
        raise UsageError("--force only matters with --preflight (train even when pre-flight says no-go).")
    hook = None
    if args.preflight:
        _validate_inputs(plan)
        hook = run.preflight_hook(
            force=args.force, on_report=lambda report: _print_preflight(console, report)
        )
    from grpo_kit.interrupts import exit_status, forget_signals, sigterm_as_interrupt

    forget_signals()
    try:
        with sigterm_as_interrupt():  # SIGTERM anywhere in the run ends like Ctrl-C
            outcome = _after_loading(
                args,
                lambda: run.execute(
                    plan,
                    samples=args.samples,
                    merge=not args.no_merge,
                    status=console.status,
                    preflight=hook,
                    eval_prompts=args.eval_prompts,
                ),
            )
    except KeyboardInterrupt:  # outside the training steps (they save a checkpoint and return)
        if args.debug:
            raise
        _print_interrupted_outside_training(console, plan)
        return exit_status(EXIT_INTERRUPTED)
    except (run.PreflightNoGo, RunError) as error:
        if not isinstance(error, run.PreflightNoGo) and not isinstance(error.__cause__, run.PreflightNoGo):
            raise
        _remove_if_empty(output_dir)
        console.print(
            "[red]Not training[/]: pre-flight says no-go (findings above). Apply a fix, or train anyway "
            "with --force."
        )
        return EXIT_NO_GO
    result = outcome.result
    if plan.loop == "unsloth":
        return 0
    if result.interrupted and result.checkpoint is None:
        console.print(
            f"[yellow]{_stopped_by()} before the first step finished[/]: no checkpoint to resume; "
            f"{markup_safe(output_dir)} holds no training."
        )
        return exit_status(EXIT_INTERRUPTED)
    if result.interrupted:
        console.print(
            f"[yellow]{_stopped_by()} at step {result.global_step}[/]; checkpoint {markup_safe(result.checkpoint)}. "
            f"Continue with:\n  {markup_safe(plan.resume_command())}",
            highlight=False,
            soft_wrap=True,
        )
        return exit_status(EXIT_INTERRUPTED)
    _print_summary(console, output_dir, outcome.summary, outcome.reports)
    return 0 if outcome.verified else 1


def _stopped_by() -> str:
    import signal

    from grpo_kit.interrupts import received_signal

    return "Terminated (SIGTERM)" if received_signal() == signal.SIGTERM else "Interrupted"


def _print_interrupted_outside_training(console, plan) -> None:
    """One line for a Ctrl-C / SIGTERM while loading, evaluating or exporting, with the way to go on."""
    from grpo_kit.checkpoint import latest_checkpoint

    checkpoint = latest_checkpoint(plan.output_dir) if plan.output_dir.is_dir() else None
    if plan.phase in ("planned", "loading", "pre-flight") and checkpoint is None:
        line = f"nothing was written to {plan.output_dir}; run the same command again."
    elif checkpoint is None:
        line = "no training step had finished, so there is nothing to resume; run the same command with --overwrite."
    else:
        line = (
            f"the run is saved in {checkpoint}; the exports and run.json are written when you continue "
            f"with:  {plan.resume_command()}"
        )
    console.print(
        f"[yellow]{_stopped_by()} during the {markup_safe(plan.phase)}[/]: {markup_safe(line)}",
        highlight=False,
        soft_wrap=True,
    )


def _after_loading(args, work):
    """Run ``work()``; an exception becomes a :class:`RunError` with one line (the traceback with --debug)."""
    if _debugging(args):
        return work()
    try:
        return work()
    except UsageError:
        raise
    except Exception as error:  # every failure after loading is reported the same way
        message = " ".join(str(error).split()) or "(no message)"
        raise RunError(f"{type(error).__name__}: {message} (--debug shows the traceback)") from error


def _debugging(args) -> bool:
    """``--debug`` (before or after the subcommand) or ``GRPO_KIT_DEBUG=1``: show tracebacks."""
    return bool(getattr(args, "debug", False) or os.environ.get("GRPO_KIT_DEBUG"))


def _print_summary(console, output_dir: Path, summary: dict, reports) -> None:
    from rich.table import Table

    table = Table(title=f"run folder {markup_safe(output_dir)}", show_header=False)
    table.add_row("steps", str(summary["steps"]))
    table.add_row(
        "wall time", f"{summary['total_seconds']:.0f} s (training {summary['train_seconds']:.0f} s)"
    )

    def fmt(v):
        return "–" if v is None else f"{v:.3f}"

    table.add_row(
        "reward (first → last step)",
        f"{fmt(summary['reward_first_step'])} → {fmt(summary['reward_last_step'])}",
    )
    # One held-out row: the evaluation (with its CI) when the run had one, else the samples' mean reward.
    evaluation = summary.get("evaluation")
    if evaluation and "headline" in evaluation:
        table.add_row(
            markup_safe(f"held-out {evaluation['metric']} ({evaluation['num_prompts']} prompts)"),
            markup_safe(_headline(evaluation)),
        )
    elif summary.get("samples_mean_reward_before") is not None:
        table.add_row(
            f"held-out reward, samples.md ({summary.get('samples', '?')} prompts, before → after)",
            f"{fmt(summary['samples_mean_reward_before'])} → {fmt(summary['samples_mean_reward_after'])}",
        )
    for report in reports:
        table.add_row(report.kind, markup_safe(report.summary()))
    for name in (
        "metrics.jsonl",
        "reward_curve.png",
        "samples.md",
        "report.md",
        "report_card.png",
        "eval.json",
    ):
        if (output_dir / name).exists():
            table.add_row(name, markup_safe(output_dir / name))
    table.add_row("run folder size", _folder_size(output_dir))
    console.print(table)


def _folder_size(folder: Path) -> str:
    """``"522 MB (4 checkpoints: 310 MB)"``: what the run folder holds on disk, checkpoints named apart."""
    from grpo_kit.export.report import dir_size

    total = dir_size(folder)
    checkpoints = sorted(p for p in folder.glob("checkpoint-*") if p.is_dir())
    text = f"{total / 1e6:.0f} MB" if total >= 1e6 else f"{total / 1e3:.0f} kB"
    if checkpoints:
        size = sum(dir_size(p) for p in checkpoints)
        text += f" ({len(checkpoints)} checkpoint{'s' * (len(checkpoints) > 1)}: {size / 1e6:.0f} MB)"
    return text


def _headline(evaluation: dict) -> str:
    """``before → after (change, 95% CI [lo, hi]): verdict`` of run.json's evaluation summary."""
    return (
        f"{evaluation['before']:.3g} → {evaluation['after']:.3g} (change {evaluation['mean_diff']:+.3g}, "
        f"{evaluation['level']:.0%} CI [{evaluation['ci_low']:+.3g}, {evaluation['ci_high']:+.3g}]): "
        f"{evaluation['verdict']}"
        + (f" ({'; '.join(evaluation['reward_hack_signs'])})" if evaluation.get("reward_hack_signs") else "")
    )


# --------------------------------------------------------------------------- preflight / eval

EXIT_NO_GO = 1


def _validate_inputs(plan) -> None:
    """Dataset and reward-function mistakes as one line, before any model loads."""
    from grpo_kit import run
    from rewards import RewardFunctionError

    try:
        run.validate_run_inputs(plan)
    except (ValueError, RewardFunctionError) as error:
        raise UsageError(str(error)) from error


def _print_preflight(console, report) -> None:
    colour = "green" if report.go else "red"
    console.print(plain(report.summary()), style=colour, highlight=False, markup=False)


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()  # only succeeds when empty: a refused run leaves no folder behind


def cmd_preflight(args, console) -> int:
    from grpo_kit import run

    if args.num_prompts < 1:
        raise UsageError(f"--num-prompts must be >= 1, got {args.num_prompts}.")
    try:  # the plan's output folder is never created: pre-flight writes nothing
        plan = run.plan_run(
            args.recipe,
            small=args.small,
            overrides=parse_overrides(args.overrides),
            output_dir=Path(tempfile.gettempdir()) / f"grpo-kit-preflight-{os.getpid()}",
        )
    except CONFIG_ERRORS as error:
        raise UsageError(str(error)) from error
    _validate_inputs(plan)
    with console.status("loading model and data…"):
        model, tokenizer = run.load_model(plan.recipe)
        dataset = plan.recipe.load_dataset()
        funcs = plan.recipe.build_reward_funcs(tokenizer)
    with console.status(f"sampling completions for {args.num_prompts} prompts…"):
        report = run.preflight_check(plan, model, tokenizer, dataset, funcs, num_prompts=args.num_prompts)
    _print_preflight(console, report)
    return 0 if report.go else EXIT_NO_GO


def _eval_recipe(source: Path, name: str | None):
    """The recipe the run trained with (run.json: name, model and training fields), or ``name``."""
    from grpo_kit.recipes import get_recipe
    from grpo_kit.run import to_loop_config
    from grpo_kit.run_folder import read_run_json

    run_json = next((p for p in (source / "run.json", source.parent / "run.json") if p.is_file()), None)
    try:
        info = read_run_json(run_json) if run_json else {}
    except ValueError as error:
        raise UsageError(str(error)) from error
    name = name or info.get("recipe")
    if not name:
        raise UsageError(
            f"{source} has no run.json naming its recipe; pass --recipe NAME for the held-out prompts."
        )
    try:
        if name != info.get("recipe"):
            return get_recipe(name)
        model = {"model": info["model"]} if "model" in info else {}
        recipe = get_recipe(name, **model, **info.get("training", {})).validate()
        with warnings.catch_warnings():  # fields only TRL has are fine here; their values are not checked
            warnings.simplefilter("ignore", UserWarning)
            to_loop_config(recipe)  # run.json's settings pass the rules command-line input passes
        return recipe
    except CONFIG_ERRORS as error:
        where = f" (from {run_json})" if run_json else ""
        raise UsageError(f"{error}{where}") from error


def cmd_eval(args, console) -> int:
    return _after_loading(args, lambda: _eval(args, console))


def _eval(args, console) -> int:
    from grpo_kit import run

    source = Path(args.run)
    if args.k < 1:
        raise UsageError(f"--k must be >= 1 (samples per prompt for pass@k), got {args.k}.")
    if args.num_prompts is not None and args.num_prompts < 1:
        raise UsageError(f"--num-prompts must be >= 1, got {args.num_prompts}.")
    try:
        adapter_dir, _ = run.run_paths(source)
    except FileNotFoundError as error:
        raise UsageError(
            f"{source} is neither a run folder nor a model: expected run.json with adapter/ or "
            "merged/ (a `grpo-kit train` run), config.json (an exported model) or "
            "adapter_config.json (an adapter)."
        ) from error
    recipe = _eval_recipe(source, args.recipe)
    try:
        return _evaluate_folder(args, console, source, adapter_dir, recipe)
    except KeyboardInterrupt:  # the report card is written atomically: nothing half-written is left
        console.print(f"[yellow]Interrupted[/]: {markup_safe(source)} is as it was before `grpo-kit eval`.")
        return EXIT_INTERRUPTED


def _evaluate_folder(args, console, source: Path, adapter_dir: Path | None, recipe) -> int:
    from grpo_kit import run
    from grpo_kit.evaluate import load_eval_target
    from grpo_kit.report_card import write_report_card

    num_prompts = args.num_prompts or recipe.eval_prompts or 32
    rows = run.held_out_rows(recipe, num_prompts)
    with console.status("loading the trained model…"):
        try:
            model, tokenizer = load_eval_target(source)
        except FileNotFoundError as error:
            raise UsageError(str(error)) from error
    from grpo_kit.sampling import check_fits_context

    try:  # a shared run.json may ask for more tokens than the model has room for
        check_fits_context(model, 1, int(recipe.training.get("max_completion_length", 64)))
    except ValueError as error:
        raise UsageError(f"{error} (the run's recipe: --recipe NAME evaluates with another)") from error
    funcs = recipe.build_reward_funcs(tokenizer)
    with console.status(f"evaluating {len(rows)} held-out prompts: trained…"):
        after = run.evaluate_held_out(recipe, model, tokenizer, funcs, rows, k=args.k)
    with console.status(f"evaluating {len(rows)} held-out prompts: base model…"):
        if adapter_dir is not None and not args.base:
            with model.disable_adapter():  # the base model is the adapter's model without the adapter
                before = run.evaluate_held_out(recipe, model, tokenizer, funcs, rows, k=args.k)
        else:
            base = args.base or _base_of(source, recipe)
            before = run.evaluate_held_out(recipe, run.load_base(base), tokenizer, funcs, rows, k=args.k)
    out = Path(args.out) if args.out else source
    files = write_report_card(
        out,
        before,
        after,
        log_history=source / "metrics.jsonl",
        title=f"{recipe.name}: held-out base vs {source.name}",
        measures=recipe.measures,
    )
    evaluation = run.evaluation_summary(before, after, files)
    console.print(
        markup_safe(
            f"held-out {evaluation['metric']} ({evaluation['num_prompts']} prompts): {_headline(evaluation)}"
        )
    )
    for name, path in files.items():
        console.print(f"  {name}: {markup_safe(path)}")
    return 0


def _base_of(source: Path, recipe) -> str:
    if (source / "run.json").is_file() or (source.parent / "run.json").is_file():
        return recipe.model
    raise UsageError(
        f"{source} is a model folder without run.json: pass --base MODEL (the model before training)."
    )


# --------------------------------------------------------------------------- export / generate


def _run_paths(source: Path) -> tuple[Path | None, Path | None]:
    from grpo_kit.run import run_paths

    try:
        return run_paths(source)
    except FileNotFoundError as error:
        raise UsageError(str(error)) from error


def _load_adapter(source: Path, adapter_dir: Path, base: str | None):
    from grpo_kit.run import base_model_name, load_adapter

    try:
        base_name = base_model_name(source, adapter_dir, base)
    except ValueError as error:
        raise UsageError(str(error)) from error
    return load_adapter(adapter_dir, base_name)


def cmd_export(args, console) -> int:
    return _after_loading(args, lambda: _export(args, console))


def _export(args, console) -> int:

    from grpo_kit.export import save_gguf, save_merged
    from grpo_kit.export.card import write_export_cards
    from grpo_kit.export.hub import PushError, check_can_push

    source = Path(args.source)
    adapter_dir, model_dir = _run_paths(source)
    in_run = adapter_dir is not None and adapter_dir != source
    out = Path(args.out) if args.out else (source if in_run else source.parent / (source.name + "-export"))
    token = None
    if args.push_to_hub:  # before any work: an upload that cannot happen stops here
        if args.push_adapter and adapter_dir is None:
            raise UsageError(f"--push-adapter: {source} has no LoRA adapter; drop --push-adapter.")
        try:
            token = check_can_push(args.push_to_hub)
        except PushError as error:
            raise UsageError(str(error)) from error
    elif args.private or args.push_adapter:
        raise UsageError("--private and --push-adapter go with --push-to-hub ORG/NAME.")
    reports = []
    if adapter_dir is not None and (model_dir is None or args.out or args.dtype != "16bit"):
        with console.status("loading base model + adapter…"):
            model, tokenizer = _load_adapter(source, adapter_dir, args.base)
        with console.status("merging and verifying…"):
            reports.append(
                save_merged(model, tokenizer, out / "merged", dtype=args.dtype, overwrite=args.overwrite)
            )
        model_dir = out / "merged"
    if args.gguf:
        with console.status(f"GGUF {markup_safe(args.gguf)}: converting and verifying…"):
            try:
                reports.append(
                    save_gguf(
                        model_dir,
                        out / f"model-{args.gguf}.gguf",
                        args.gguf,
                        llama_cpp_dir=args.llama_cpp_dir,
                    )
                )
            except (ValueError, FileNotFoundError, ImportError) as error:  # type not makeable, no converter
                raise UsageError(str(error)) from error
    if not reports:
        raise UsageError(f"{source} is already a model folder; ask for --gguf TYPE to export it.")
    for report in reports:
        console.print(("[green]✔[/] " if report.verified else "[red]✘[/] ") + markup_safe(report.summary()))
    gguf_files = [r.path for r in reports if r.kind == "gguf"]
    folders = {r.path: r.kind for r in reports if r.kind in ("adapter", "merged")}
    if model_dir is not None and (Path(model_dir) / "grpo_kit_export.json").is_file():
        folders.setdefault(Path(model_dir), "merged")
    own_adapter = in_run and (Path(adapter_dir) / "grpo_kit_export.json").is_file()  # the run's export
    if adapter_dir is not None and (own_adapter or args.push_adapter):  # (a folder to upload needs its card)
        folders.setdefault(Path(adapter_dir), "adapter")
    base = _base_name_or_none(source, adapter_dir, args.base)
    run_dir = source if (source / "run.json").is_file() else None
    for card in write_export_cards(
        folders, run_dir=run_dir, base_model=base, gguf_files=gguf_files, repo_id=args.push_to_hub
    ):
        console.print(f"[green]✔[/] model card: {markup_safe(str(card))}")
    verified = all(r.verified for r in reports)
    if args.push_to_hub:
        if not verified:
            raise UsageError("an export failed verification; fix it before --push-to-hub (nothing uploaded).")
        _push(args, console, token, adapter_dir if args.push_adapter else model_dir, gguf_files)
    return 0 if verified else 1


def _base_name_or_none(source: Path, adapter_dir: Path | None, base: str | None) -> str | None:
    from grpo_kit.run import base_model_name

    if adapter_dir is None:
        return base
    try:
        return base_model_name(source, adapter_dir, base)
    except ValueError:
        return None


def _push(args, console, token: str, folder: Path | None, gguf_files) -> None:
    from grpo_kit.export.hub import PushError, push_to_hub, upload_plan

    if folder is None:
        raise UsageError(f"{args.source}: nothing to upload (no merged model folder).")
    try:
        files = upload_plan(folder, gguf_files)
    except PushError as error:
        raise UsageError(str(error)) from error
    total = sum(f.size_bytes for f in files) / 1e6
    console.print(f"uploading {len(files)} files ({total:.1f} MB) to {markup_safe(args.push_to_hub)}…")
    url = push_to_hub(files, args.push_to_hub, token=token, private=args.private)
    console.print(f"[green]✔[/] {markup_safe(url)}")


def cmd_generate(args, console) -> int:
    return _after_loading(args, lambda: _generate(args, console))


def _generate(args, console) -> int:
    from grpo_kit import samples as samples_mod
    from grpo_kit.run import held_out

    source = Path(args.source)
    adapter_dir, _ = _run_paths(source)
    if adapter_dir is None:
        raise UsageError(f"{source} has no LoRA adapter; generate compares the base model with the adapter.")
    prompts: list[Any] = list(args.prompt)
    columns: dict[str, list] = {}
    recipe = None
    run_json = source / "run.json"
    recipe_name = args.recipe or (json.loads(run_json.read_text())["recipe"] if run_json.is_file() else None)
    if recipe_name:
        from grpo_kit.recipes import get_recipe

        recipe = get_recipe(recipe_name)
        if not prompts:
            prompts, columns = held_out(recipe, args.num_prompts)
    if not prompts:
        raise UsageError("no prompts: pass --prompt TEXT (repeatable) or --recipe NAME.")
    with console.status("loading…"):
        model, tokenizer = _load_adapter(source, adapter_dir, args.base)
    gen = {"max_new_tokens": args.max_new_tokens, "do_sample": args.sample}
    if recipe is not None:
        gen["chat_template_kwargs"] = recipe.training.get("chat_template_kwargs")
    # The one decoder and scorer samples.md uses: the same text gets the same reward (EOS counted alike).
    with model.disable_adapter():
        before = samples_mod.answer_completions(model, tokenizer, prompts, **gen)
    after = samples_mod.answer_completions(model, tokenizer, prompts, **gen)
    reward_funcs = recipe.build_reward_funcs(tokenizer) if recipe and not args.prompt else ()
    pairs = samples_mod.before_after(
        prompts,
        before,
        after,
        reward_funcs=reward_funcs,
        reward_weights=recipe.reward_weights if reward_funcs else None,
        columns=columns,
    )
    from rich.table import Table

    table = Table(title="base model vs trained adapter", show_lines=True)
    for name in ("prompt", "before", "after", "reward"):
        table.add_column(name, overflow="fold")
    for s in pairs:
        prompt = s.prompt if isinstance(s.prompt, str) else s.prompt[-1]["content"]
        reward = "" if s.reward_before is None else f"{s.reward_before:.2f} → {s.reward_after:.2f}"
        table.add_row(markup_safe(prompt[:200]), markup_safe(s.before), markup_safe(s.after), reward)
    console.print(table)
    return 0


# --------------------------------------------------------------------------- small commands


def cmd_recipes(args, console) -> int:
    """The catalogue at 80 columns (name, model, one line), or one recipe in full."""
    from rich.table import Table

    from grpo_kit.recipes import DEFAULT_RECIPE, RECIPES, get_recipe

    if getattr(args, "name", None):
        try:
            recipe = get_recipe(args.name)
        except ValueError as error:
            raise UsageError(str(error)) from error
        rewards = ", ".join(
            f"{spec.name}" + (f" x{spec.weight:g}" if spec.weight != 1.0 else "") for spec in recipe.rewards
        )
        training = ", ".join(f"{k}={v}" for k, v in recipe.training.items())
        for label, text in (
            (recipe.name + (" (the default)" if recipe.name == DEFAULT_RECIPE else ""), recipe.one_line),
            ("model", recipe.model),
            ("what it does", recipe.description),
            ("what the metric measures", recipe.measures or "(not stated)"),
            ("rewards", rewards),
            ("training", training),
        ):
            console.print(f"[bold]{label}[/]: ", end="", highlight=False)
            console.print(plain(text), markup=False, highlight=False)
        return 0
    table = Table(title="grpo-kit recipes", box=None, padding=(0, 1), pad_edge=False, title_justify="left")
    table.add_column("name", style="cyan", no_wrap=True)
    table.add_column("model", no_wrap=True)
    table.add_column("what it teaches")
    for recipe in RECIPES.values():
        name = recipe.name + ("*" if recipe.name == DEFAULT_RECIPE else "")
        table.add_row(markup_safe(name), markup_safe(recipe.model), markup_safe(recipe.one_line))
    console.print(table)
    console.print("* the default. In full: grpo-kit recipes NAME", highlight=False)
    return 0


def _call_tool(tool_main, argv, console) -> int:
    """Run another module's ``main(argv)``; its ``SystemExit`` (argparse errors, messages) becomes our status."""
    try:
        return int(tool_main(argv) or 0)
    except SystemExit as exit_:
        if isinstance(exit_.code, str):
            console.print(f"[red]error:[/] {markup_safe(exit_.code)}", highlight=False)
            return EXIT_USAGE
        return int(exit_.code or 0)


def cmd_losses(args, console) -> int:
    from grpo_kit.loss_demo import main as loss_demo_main

    return _call_tool(loss_demo_main, args.args, console)


def cmd_rewards(args, console) -> int:
    if args.rewards_command != "lint":
        raise UsageError(
            "grpo-kit rewards: the tool is `lint`, e.g. grpo-kit rewards lint rewards:length_reward"
        )
    from rewards.lint import main as lint_main

    return _call_tool(lint_main, args.args, console)


def cmd_doctor(args, console) -> int:
    from grpo_kit.doctor import main as doctor_main

    return _call_tool(doctor_main, args.args, console)


COMMANDS = {
    "train": cmd_train,
    "eval": cmd_eval,
    "preflight": cmd_preflight,
    "export": cmd_export,
    "generate": cmd_generate,
    "losses": cmd_losses,
    "rewards": cmd_rewards,
    "recipes": cmd_recipes,
    "doctor": cmd_doctor,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``grpo-kit``; returns the exit status."""
    from rich.console import Console

    console = Console(stderr=False)
    install_plain_warnings()  # warnings name reward functions and their errors: text, not terminal commands
    argv = list(sys.argv[1:] if argv is None else argv)
    from grpo_kit.interrupts import guard_stdout

    with guard_stdout():  # `grpo-kit … | head`: a closed stdout silences printing, the work goes on
        return _main(argv, console)


def _main(argv: list[str], console) -> int:
    # Pass-through commands hand their arguments (options included) to the tool's own parser.
    if argv[:1] == ["losses"]:
        return cmd_losses(argparse.Namespace(args=argv[1:]), console)
    if argv[:1] == ["doctor"]:
        return cmd_doctor(argparse.Namespace(args=argv[1:]), console)
    if argv[:2] == ["rewards", "lint"]:
        return cmd_rewards(argparse.Namespace(rewards_command="lint", args=argv[2:]), console)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return COMMANDS[args.command](args, console)
    except UsageError as error:
        # Configuration mistakes: one readable line that names the fix, no traceback.
        console.print(f"[red]error:[/] {markup_safe(error)}", highlight=False, soft_wrap=True)
        if _debugging(args):
            raise
        return EXIT_USAGE
    except RunError as error:
        console.print(f"[red]error:[/] {markup_safe(error)}", highlight=False, soft_wrap=True)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
