"""``grpo-kit eval``, ``export`` and ``generate``: commands on a trained model (a run folder, its adapter or an
exported model folder, found by ``grpo_kit.runs.TrainedModel``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grpo_kit.cli.common import CONFIG_ERRORS, EXIT_INTERRUPTED, UsageError, after_loading, headline
from grpo_kit.support.terminal import markup_safe

__all__ = ["cmd_eval", "cmd_export", "cmd_generate"]


def cmd_eval(args, console) -> int:
    return after_loading(args, lambda: _eval(args, console))


def _eval(args, console) -> int:
    from grpo_kit.runs import TrainedModel

    source = Path(args.run)
    if args.k is not None and args.k < 1:
        raise UsageError(f"--k must be >= 1 (samples per prompt for pass@k), got {args.k}.")
    if args.num_prompts is not None and args.num_prompts < 1:
        raise UsageError(f"--num-prompts must be >= 1, got {args.num_prompts}.")
    try:
        trained = TrainedModel.locate(source)
    except FileNotFoundError as error:
        raise UsageError(
            f"{source} is neither a run folder nor a model: expected run.json with adapter/ or "
            "merged/ (a `grpo-kit train` run), config.json (an exported model) or "
            "adapter_config.json (an adapter)."
        ) from error
    try:
        recipe = trained.recipe(args.recipe, trust_reward_code=args.trust_reward_code)
    except CONFIG_ERRORS as error:
        raise UsageError(str(error)) from error
    try:
        return _evaluate(args, console, trained, recipe)
    except KeyboardInterrupt:  # the report card is written atomically: nothing half-written is left
        console.print(f"[yellow]Interrupted[/]: {markup_safe(source)} is as it was before `grpo-kit eval`.")
        return EXIT_INTERRUPTED


def _evaluate(args, console, trained, recipe) -> int:
    """``runs.evaluate_finished_run``, printed: the headline of each held-out set and the report card's files."""
    from grpo_kit.evaluation.report_card import transfer_label
    from grpo_kit.runs.finished import FinishedRunError, evaluate_finished_run

    try:
        result = evaluate_finished_run(
            trained,
            recipe,
            num_prompts=args.num_prompts,
            k=args.k,
            base=args.base,
            out=args.out,
            status=console.status,
        )
    except FinishedRunError as error:
        raise UsageError(str(error)) from error
    evaluation = result.evaluation
    console.print(
        markup_safe(
            f"held-out {evaluation['metric']} ({evaluation['num_prompts']} prompts): {headline(evaluation)}"
        )
    )
    if result.transfer is not None:
        other = result.transfer
        console.print(
            markup_safe(
                f"{transfer_label(result.transfer_set)}: {other['metric']} ({other['num_prompts']} prompts): "
                f"{headline(other)}"
            )
        )
    for name, path in result.files.items():
        console.print(f"  {name}: {markup_safe(path)}")
    return 0


# --------------------------------------------------------------------------- export / generate


def _locate(source: Path):
    from grpo_kit.runs import TrainedModel

    try:
        return TrainedModel.locate(source)
    except FileNotFoundError as error:
        raise UsageError(str(error)) from error


def _load(trained, base: str | None):
    """The trained model; a base model nothing names is one line naming ``--base``."""
    try:
        return trained.load(base)
    except ValueError as error:
        raise UsageError(str(error)) from error


def cmd_export(args, console) -> int:
    return after_loading(args, lambda: _export(args, console))


def _export(args, console) -> int:

    from grpo_kit.export import save_gguf, save_merged
    from grpo_kit.export.card import write_export_cards
    from grpo_kit.export.hub import PushError, check_can_push

    source = Path(args.source)
    trained = _locate(source)
    adapter_dir, model_dir, in_run = trained.adapter_dir, trained.model_dir, trained.in_run_folder
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
            model, tokenizer = _load(trained, args.base)
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
    base = _base_name_or_none(trained, args.base)
    for card in write_export_cards(
        folders,
        run_dir=trained.run.root if trained.run is not None else None,
        base_model=base,
        gguf_files=gguf_files,
        repo_id=args.push_to_hub,
    ):
        console.print(f"[green]✔[/] model card: {markup_safe(str(card))}")
    verified = all(r.verified for r in reports)
    if args.push_to_hub:
        if not verified:
            raise UsageError("an export failed verification; fix it before --push-to-hub (nothing uploaded).")
        _push(args, console, token, adapter_dir if args.push_adapter else model_dir, gguf_files)
    return 0 if verified else 1


def _base_name_or_none(trained, base: str | None) -> str | None:
    if trained.adapter_dir is None:
        return base
    try:
        return trained.base_model_name(base)
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
    return after_loading(args, lambda: _generate(args, console))


def _generate(args, console) -> int:
    from grpo_kit.evaluation import samples as samples_mod
    from grpo_kit.runs import held_out_rows

    source = Path(args.source)
    trained = _locate(source)
    if trained.adapter_dir is None:
        raise UsageError(f"{source} has no LoRA adapter; generate compares the base model with the adapter.")
    prompts: list[Any] = list(args.prompt)
    columns: dict[str, list] = {}
    recipe = None
    if args.recipe or trained.run is not None:
        try:
            recipe = trained.recipe(
                args.recipe, trust_reward_code=args.trust_reward_code
            )  # the run's recipe as it ran, or the one named
        except CONFIG_ERRORS as error:
            raise UsageError(str(error)) from error
        if not prompts:
            rows = held_out_rows(recipe, args.num_prompts)
            prompts = [r["prompt"] for r in rows]
            columns = {k: [r[k] for r in rows] for k in (rows[0] if rows else {}) if k != "prompt"}
    if not prompts:
        raise UsageError("no prompts: pass --prompt TEXT (repeatable) or --recipe NAME.")
    with console.status("loading…"):
        model, tokenizer = _load(trained, args.base)
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
