"""``grpo-kit train`` and ``grpo-kit preflight``: plan a run (every check, exit 2 before a model loads), execute
it, and print its ending in one line (interrupted, no-go) or its summary table."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from grpo_kit.cli.common import (
    CONFIG_ERRORS,
    EXIT_INTERRUPTED,
    EXIT_NO_GO,
    RunError,
    UsageError,
    after_loading,
    headline,
    parse_overrides,
)
from grpo_kit.support.terminal import markup_safe, plain

__all__ = ["cmd_preflight", "cmd_train"]


def cmd_train(args, console) -> int:
    from grpo_kit import runs

    plan = _plan_train(args, console)
    hook = None
    if _runs_preflight(args, plan):
        if not plan.flags["preflight"]:
            console.print("pre-flight first (a recipe file's default; --no-preflight skips it).")
        _validate_inputs(plan)
        hook = runs.preflight_hook(
            force=plan.flags["force"], on_report=lambda report: _print_preflight(console, report)
        )
    from grpo_kit.support.interrupts import (
        caller_reports_stops,
        exit_status,
        forget_signals,
        sigterm_as_interrupt,
    )

    forget_signals()
    from datasets.utils.logging import disable_progress_bar

    disable_progress_bar()  # datasets' "Map: 100%|…" bars (TRL prepares its rows): progress is one line a step
    try:
        # SIGTERM anywhere in the run ends like Ctrl-C; the ending is this command's one line, not the loop's.
        with sigterm_as_interrupt(), caller_reports_stops():
            outcome = after_loading(
                args,
                lambda: runs.execute(plan, status=console.status, preflight=hook),
            )
    except KeyboardInterrupt:  # outside the training steps (they save a checkpoint and return)
        if args.debug:
            raise
        _print_interrupted_outside_training(console, plan)
        return exit_status(EXIT_INTERRUPTED)
    except (runs.PreflightNoGo, RunError) as error:
        if not isinstance(error, runs.PreflightNoGo) and not isinstance(error.__cause__, runs.PreflightNoGo):
            raise
        _print_no_go(console, plan)
        return EXIT_NO_GO
    return _print_ending(console, plan, outcome)


def _plan_train(args, console):
    """The run's plan, every check of the command's arguments and the configuration done (one line and exit 2
    on a mistake, before a model loads), and the plan's first line printed."""
    from grpo_kit import runs

    if args.samples is not None and args.samples < 0:
        raise UsageError(f"--samples must be >= 0 (0: no before/after answers), got {args.samples}.")
    if args.eval_prompts is not None and args.eval_prompts < 0:
        raise UsageError(f"--eval-prompts must be >= 0 (0 turns evaluation off), got {args.eval_prompts}.")
    recipe = _recipe_argument(args)
    try:  # every configuration mistake surfaces here, before a model is loaded or a folder is written
        plan = runs.plan_run(
            recipe,
            small=args.small,
            overrides=parse_overrides(args.overrides),
            loop=args.loop,
            max_steps=args.max_steps,
            output_dir=args.output_dir,
            resume=args.resume,
            overwrite=args.overwrite,
            trust_reward_code=args.trust_reward_code,
            flags={name: getattr(args, name) for name in runs.RUN_FLAGS},  # None: not given
        )
    except CONFIG_ERRORS as error:
        raise UsageError(str(error)) from error
    recipe, output_dir, flags = plan.recipe, plan.output_dir, plan.flags
    if args.config:
        _check_own_data(plan)
    if plan.restarted:
        console.print(
            f"--resume: {markup_safe(output_dir)} has no checkpoint (the run stopped before its first one), so it "
            f"starts again from step 0 with its stored configuration; what it had written is moved aside to "
            f"{markup_safe(plan.set_aside)}.",
            highlight=False,
            soft_wrap=True,
        )
    elif plan.set_aside is not None:
        console.print(
            f"--overwrite: the run already in {markup_safe(output_dir)} is moved aside to "
            f"{markup_safe(plan.set_aside)}.",
            highlight=False,
            soft_wrap=True,
        )
    console.print(
        f"[bold]grpo-kit train[/] recipe [cyan]{markup_safe(recipe.name)}[/] · loop [cyan]{plan.loop}[/] · "
        f"model [cyan]{markup_safe(recipe.model)}[/] · {markup_safe(recipe.training.get('max_steps', '?'))} "
        f"steps → [green]{markup_safe(output_dir)}[/]"
    )
    try:
        from grpo_kit.runs.during_training import check_schedule

        check_schedule(
            recipe,
            recipe.eval_prompts if flags["eval_prompts"] is None else flags["eval_prompts"],
            flags["keep_best"],
        )
    except ValueError as error:
        raise UsageError(str(error)) from error
    if args.preflight and args.no_preflight:
        raise UsageError("--preflight and --no-preflight contradict each other; pass one of them.")
    if args.no_preflight and not args.config:
        raise UsageError(
            "--no-preflight only matters with --config (pre-flight runs first only for a recipe file)."
        )
    if args.force and plan.resume is None and not _runs_preflight(args, plan):
        raise UsageError(
            "--force only matters with --preflight (or --config, which runs it first): train even when "
            "pre-flight says no-go."
        )
    # before anything can stop it (a SIGKILL prints nothing): the run folder stores everything else
    console.print(
        f"If it stops, continue it with: {markup_safe(plan.resume_command())}",
        highlight=False,
        soft_wrap=True,
    )
    return plan


def _runs_preflight(args, plan) -> bool:
    """Pre-flight before training: asked for with --preflight (or stored by the run), and the default for a new
    recipe file (--config) unless --no-preflight; never on a resume (that run has started)."""
    if plan.resume is not None:
        return False
    return bool(plan.flags["preflight"] or (args.config and not args.no_preflight))


def _print_no_go(console, plan) -> None:
    """Pre-flight said no-go: the one line, and the run folder removed when nothing was written into it."""
    output_dir = plan.output_dir
    _remove_if_empty(output_dir)
    kept = (
        f" {markup_safe(output_dir)} keeps the evaluation before training and the SFT warm-up's losses."
        if plan.recipe.warmup_sft is not None and plan.resume is None and output_dir.exists()
        else ""
    )
    console.print(
        "[red]Not training[/]: pre-flight says no-go (findings above). Apply a fix, or train anyway "
        f"with --force.{kept}"
    )


def _print_ending(console, plan, outcome) -> int:
    """An interrupted run's one line (with the command that continues it) or the summary table; the exit status."""
    from grpo_kit.support.interrupts import exit_status

    result, output_dir = outcome.result, plan.output_dir
    if result.no_signal and result.no_signal["stopped_at"] is not None:  # the signal watch stopped it, saved
        console.print(
            f"[yellow]{markup_safe(result.no_signal['line'])}[/] Checkpoint {markup_safe(result.checkpoint)}; "
            f"continue with:\n  {markup_safe(plan.resume_command())}",
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_NO_GO
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


def _recipe_argument(args):
    """``--recipe NAME`` as given, or the Recipe read from ``--config FILE`` (one line naming the field and
    the fix when it cannot be read; a reward function of the file's is imported and checked here)."""
    config = getattr(args, "config", None)
    if not config:
        return args.recipe
    if args.recipe:
        raise UsageError("--config and --recipe both name a recipe; pass one of them.")
    if args.small:
        raise UsageError(
            "--small picks a shipped recipe's CPU-sized variant; set the sizes in your recipe file."
        )
    from grpo_kit.recipes.files import load_recipe_file

    try:
        return load_recipe_file(config)
    except CONFIG_ERRORS as error:
        raise UsageError(str(error)) from error


def _check_own_data(plan) -> None:
    """A recipe file's rows and rewards, before any model loads: the dataset reads, every reward function
    scores a probe completion, and a held-out split named in the file shares no prompt with training."""
    import warnings

    from grpo_kit import runs
    from grpo_kit.recipes.reward_specs import REWARD_MODEL_PREFIX
    from grpo_kit.runs.held_out import held_out_rows

    if not any(name.startswith(REWARD_MODEL_PREFIX) for name in plan.recipe.reward_names):
        _validate_inputs(plan)  # (a reward model would load here once more; pre-flight scores it)
    try:
        # fewer held-out rows than asked is said again when the run takes them
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            held_out_rows(plan.recipe, 1, training=runs.training_dataset(plan.recipe))
    except (ValueError, OSError) as error:
        raise UsageError(str(error)) from error


def _stopped_by() -> str:
    import signal

    from grpo_kit.support.interrupts import received_signal

    return "Terminated (SIGTERM)" if received_signal() == signal.SIGTERM else "Interrupted"


def _print_interrupted_outside_training(console, plan) -> None:
    """One line for a Ctrl-C / SIGTERM while loading, evaluating or exporting, with the way to go on."""
    from grpo_kit.runs import RunFolder

    checkpoint = RunFolder(plan.output_dir).latest_checkpoint()
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


def _print_summary(console, output_dir: Path, summary: dict, reports) -> None:
    from rich.table import Table

    from grpo_kit.runs.held_out import held_out_cut

    def fmt(v):
        return "–" if v is None else f"{v:.3f}"

    rows = [
        ("steps", str(summary["steps"])),
        (
            "wall time",
            f"{summary['total_seconds']:.0f} s (training {summary['train_seconds']:.0f} s"
            + (f", evaluation {summary['eval_seconds']:.0f} s)" if "eval_seconds" in summary else ")"),
        ),
        (
            "reward (first → last step)",
            f"{fmt(summary['reward_first_step'])} → {fmt(summary['reward_last_step'])}",
        ),
    ]
    # One held-out row: the evaluation (with its CI) when the run had one, else the samples' mean reward.
    evaluation = summary.get("evaluation")
    if evaluation and "headline" in evaluation:
        label = f"held-out {evaluation['metric']} ({evaluation['num_prompts']} prompts)"
        rows.append((markup_safe(label), markup_safe(headline(evaluation))))
    cut = held_out_cut(summary.get("held_out"))
    if cut:  # a named held-out split evaluated on fewer rows than it has
        rows.append(("held-out rows", markup_safe(cut.removeprefix("held-out: "))))
    elif summary.get("samples_mean_reward_before") is not None:
        label = f"held-out reward, samples.md ({summary.get('samples', '?')} prompts, before → after)"
        before, after = summary["samples_mean_reward_before"], summary["samples_mean_reward_after"]
        rows.append((label, f"{fmt(before)} → {fmt(after)}"))
    if summary.get("no_signal"):  # the signal watch: why the run may not have learned
        rows.append(("no learning signal", markup_safe(summary["no_signal"]["line"])))
    during = summary.get("evaluation_during_training")
    if during:  # where the held-out metric peaked (eval_steps), and whether it fell after
        label = f"held-out {during['metric']} during training (every {during['every']} steps)"
        rows.append((markup_safe(label), markup_safe(during["line"])))
    # The second held-out set (the recipe's transfer_eval, written differently), one row the same way.
    transfer = summary.get("transfer_evaluation")
    if transfer and "headline" in transfer:
        label = f"{transfer['label']}: {transfer['metric']} ({transfer['num_prompts']} prompts)"
        rows.append((markup_safe(label), markup_safe(headline(transfer))))
    rows += [(report.kind, markup_safe(report.summary())) for report in reports]
    names = ("metrics.jsonl", "reward_curve.png", "samples.md", "report.md", "report_card.png", "eval.json")
    rows += [(name, markup_safe(output_dir / name)) for name in names if (output_dir / name).exists()]
    rows.append(("run folder size", _folder_size(output_dir)))
    # Labels get up to half the width before they wrap; values fold, so a path wraps whole instead of
    # ending in "…" (it is the one thing a user copies from this table).
    table = Table(title=f"run folder {markup_safe(output_dir)}", show_header=False)
    label_width = min(max(len(label) for label, _ in rows), console.width // 2)
    table.add_column(width=label_width)
    table.add_column(width=max(console.width - label_width - 7, 10), overflow="fold")  # 7: borders, padding
    for row in rows:
        table.add_row(*row)
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


def _validate_inputs(plan) -> None:
    """Dataset and reward-function mistakes as one line, before any model loads."""
    from grpo_kit import runs
    from rewards import RewardFunctionError

    try:
        runs.validate_run_inputs(plan)
    except (ValueError, OSError, RewardFunctionError) as error:  # OSError: a Hub dataset not reachable
        raise UsageError(str(error)) from error


def _print_preflight(console, report) -> None:
    colour = "green" if report.go else "red"
    console.print(plain(report.summary()), style=colour, highlight=False, markup=False)


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()  # only succeeds when empty: a refused run leaves no folder behind


def cmd_preflight(args, console) -> int:
    from grpo_kit import runs

    if args.num_prompts < 1:
        raise UsageError(f"--num-prompts must be >= 1, got {args.num_prompts}.")
    from grpo_kit.recipes.catalogue import DEFAULT_RECIPE

    args.recipe = _recipe_argument(args) or DEFAULT_RECIPE
    try:  # the plan's output folder is never created: pre-flight writes nothing
        plan = runs.plan_run(
            args.recipe,
            small=args.small,
            overrides=parse_overrides(args.overrides),
            output_dir=Path(tempfile.gettempdir()) / f"grpo-kit-preflight-{os.getpid()}",
        )
    except CONFIG_ERRORS as error:
        raise UsageError(str(error)) from error
    _validate_inputs(plan)
    with console.status("loading model and data…"):
        try:  # before the model: a dataset too small for its held-out rows is one line
            dataset = runs.training_dataset(plan.recipe)  # less the held-out rows
        except (ValueError, OSError) as error:
            raise UsageError(str(error)) from error
        model, tokenizer = runs.load_recipe_model(plan.recipe)
        funcs = plan.recipe.build_reward_funcs(tokenizer)
    if plan.recipe.warmup_sft is not None:  # GRPO starts from the model after the warm-up: check that one
        _warm_up_for_preflight(plan, model, tokenizer, console)
    with console.status(f"sampling completions for {args.num_prompts} prompts…"):
        report = runs.preflight_check(plan, model, tokenizer, dataset, funcs, num_prompts=args.num_prompts)
    _print_preflight(console, report)
    return 0 if report.go else EXIT_NO_GO


def _warm_up_for_preflight(plan, model, tokenizer, console) -> None:
    """Run the recipe's SFT warm-up on ``model`` in a temporary folder (removed after), so pre-flight samples the
    model GRPO would start from; one line says so, with its time."""
    from grpo_kit.runs.warmup import train_warmup

    with (
        tempfile.TemporaryDirectory(prefix="grpo-kit-preflight-sft-") as folder,
        console.status(
            f"SFT warm-up first ({plan.recipe.warmup_sft.steps} steps): GRPO starts from its model…"
        ),
    ):
        record = train_warmup(plan, model, tokenizer, Path(folder))
    console.print(
        f"pre-flight samples the model after the recipe's SFT warm-up ({record['steps']} steps, "
        f"{record['seconds']:.0f} s, loss {record['first_loss']:.2f} -> {record['last_loss']:.2f})."
    )
