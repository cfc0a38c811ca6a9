"""``grpo-kit``: the command line. It parses, picks a path, and calls the library — no logic of its own.

    grpo-kit train                                  # the main job: default recipe, embedded model, CPU, offline
    grpo-kit train --recipe gsm8k-cpu --loop trl --max-steps 20 --set learning_rate=5e-5 --set lora.r=8
    grpo-kit train --output-dir outputs/run --resume            # continue after Ctrl-C
    grpo-kit export outputs/run --gguf f16                       # adapter -> merged (+ GGUF), verified
    grpo-kit generate outputs/run                                # base vs trained answers, side by side
    grpo-kit losses --lengths 4 32 16 128 --rewards 1 0 1 0      # grpo_kit.loss_demo
    grpo-kit rewards lint rewards:length_reward                  # rewards.lint
    grpo-kit recipes                                             # the named recipes

``train`` writes into its output folder (default ``outputs/<recipe>-<timestamp>``): ``metrics.jsonl``
(TRL's metric names), ``reward_curve.png``, ``checkpoint-N/`` folders, ``adapter/`` (LoRA + tokenizer),
``merged/`` (16-bit, tokenizer beside it), ``samples.md``/``samples.json`` (answers to held-out prompts
before and after training) and ``run.json`` (what ran, how long, the export checks).

Model "tiny" (``--set model=tiny``) is grpo_kit.models.tiny_model(): a random 2-layer Llama for trying the
plumbing in seconds.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LOOPS = ("standalone", "trl", "unsloth")
#: The loop `grpo-kit train` uses unless --loop says otherwise: the readable loop, proven equal to TRL.
DEFAULT_LOOP = "standalone"
TINY_MODEL = "tiny"
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
            raise UsageError(f"--set expects KEY=VALUE (e.g. --set learning_rate=1e-5 or --set lora.r=8), got {item!r}.")
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

    parser = argparse.ArgumentParser(prog="grpo-kit", description="Learn GRPO from the formula to an exported model.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    train = sub.add_parser("train", help="train with a recipe (no arguments: the CPU main job)",
                           description="Train with GRPO. With no arguments: the default recipe on the embedded "
                                       "SmolLM2-135M, offline, on CPU.")
    train.add_argument("--recipe", default=DEFAULT_RECIPE, help=f"recipe name (default {DEFAULT_RECIPE}; see `grpo-kit recipes`)")
    train.add_argument("--small", action="store_true", help="use the recipe's CPU-sized variant")
    train.add_argument("--loop", choices=LOOPS, default=None,
                       help=f"standalone (readable PyTorch loop), trl (GRPOTrainer), unsloth (GPU). Default {DEFAULT_LOOP}")
    train.add_argument("--max-steps", type=int, default=None, help="optimizer steps (overrides the recipe)")
    train.add_argument("--output-dir", default=None, help="run folder (default outputs/<recipe>-<timestamp>)")
    train.add_argument("--resume", nargs="?", const=True, default=None, metavar="CKPT",
                       help="continue from the latest checkpoint in --output-dir (or the newest run of this recipe), "
                            "or from the checkpoint folder given")
    train.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="override a recipe field or GRPOConfig field: --set learning_rate=1e-5 --set model=tiny "
                            "--set lora.r=8 (repeatable)")
    train.add_argument("--samples", type=int, default=4, help="held-out prompts for before/after answers (0: none)")
    train.add_argument("--no-merge", action="store_true", help="skip the merged 16-bit export")
    train.add_argument("--gguf", default=None, metavar="TYPE", help="also export GGUF (f16, q8_0, ...)")

    export = sub.add_parser("export", help="export a trained run: merged 16-bit model and/or GGUF, verified")
    export.add_argument("source", help="a run folder (with adapter/), an adapter folder, or a model folder")
    export.add_argument("--out", default=None, help="destination folder (default: the source run folder)")
    export.add_argument("--dtype", default="16bit", help="merged weights: 16bit (bf16; fp16 on pre-Ampere GPUs), bf16, fp16, fp32")
    export.add_argument("--gguf", default=None, metavar="TYPE", help="also write a GGUF file of this type (f16, bf16, q8_0, ...)")
    export.add_argument("--base", default=None, help="base model of the adapter (default: from run.json / adapter_config.json)")
    export.add_argument("--llama-cpp-dir", default=None, help="llama.cpp checkout with convert_hf_to_gguf.py (default $LLAMA_CPP_DIR)")

    generate = sub.add_parser("generate", help="answers before vs after training, side by side")
    generate.add_argument("source", help="a run folder (with adapter/) or an adapter folder")
    generate.add_argument("--prompt", action="append", default=[], help="a prompt (repeatable; default: held-out recipe prompts)")
    generate.add_argument("--recipe", default=None, help="recipe whose held-out prompts to use (default: the run's)")
    generate.add_argument("-n", "--num-prompts", type=int, default=4)
    generate.add_argument("--max-new-tokens", type=int, default=64)
    generate.add_argument("--base", default=None, help="base model of the adapter (default: from run.json / adapter_config.json)")
    generate.add_argument("--sample", action="store_true", help="one seeded sample per prompt instead of greedy")

    losses = sub.add_parser("losses", help="per-token weights of each GRPO loss type (grpo_kit.loss_demo)", add_help=False)
    losses.add_argument("args", nargs=argparse.REMAINDER)

    rewards = sub.add_parser("rewards", help="reward-function tools")
    rewards_sub = rewards.add_subparsers(dest="rewards_command", metavar="TOOL")
    lint = rewards_sub.add_parser("lint", help="run reward functions over tricky completions (rewards.lint)", add_help=False)
    lint.add_argument("args", nargs=argparse.REMAINDER)

    sub.add_parser("recipes", help="list the named recipes")
    return parser


# --------------------------------------------------------------------------- train


def _default_output_dir(recipe_name: str) -> Path:
    return Path("outputs") / f"{recipe_name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _newest_run_with_checkpoint(recipe_name: str) -> Path | None:
    from grpo_kit.checkpoint import latest_checkpoint

    runs = sorted(Path("outputs").glob(f"{recipe_name}-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    return next((r for r in runs if r.is_dir() and latest_checkpoint(r) is not None), None)


def _resolve_run_dir(args, recipe_name: str) -> tuple[Path, Any]:
    """(output folder, resume value for the trainer: None | True | checkpoint path)."""
    resume = args.resume
    if resume is None:
        return Path(args.output_dir) if args.output_dir else _default_output_dir(recipe_name), None
    if resume is not True:
        ckpt = Path(resume)
        if not ckpt.is_dir():
            raise UsageError(f"--resume {resume}: no such checkpoint folder; pass a checkpoint-N folder or plain --resume.")
        return (Path(args.output_dir) if args.output_dir else ckpt.parent), ckpt
    if args.output_dir:
        return Path(args.output_dir), True
    run = _newest_run_with_checkpoint(recipe_name)
    if run is None:
        raise UsageError(f"--resume: no outputs/{recipe_name}-*/checkpoint-N found; pass --output-dir RUN or a checkpoint.")
    return run, True


def _build_recipe(args):
    from grpo_kit.recipes import get_recipe

    overrides = parse_overrides(args.overrides)
    loop = args.loop or overrides.pop("loop", None) or DEFAULT_LOOP
    if loop not in LOOPS:
        raise UsageError(f"--loop {loop!r}: choose one of {', '.join(LOOPS)}.")
    if args.max_steps is not None:
        if args.max_steps < 1:
            raise UsageError(f"--max-steps must be at least 1, got {args.max_steps}.")
        overrides["max_steps"] = args.max_steps
    recipe = get_recipe(args.recipe, small=args.small, **overrides)
    return recipe.validate(), loop


def _check_before_loading(recipe, loop: str, output_dir: Path, resume):
    """Every check the chosen path makes before a model is loaded. Returns the path's config."""
    if loop == "standalone":
        from grpo_kit.recipes import to_loop_config

        if recipe.quantization:
            raise UsageError(f"recipe {recipe.name!r} uses {recipe.quantization} quantization, which the standalone loop "
                             "does not do; use --loop trl (QLoRA) or --loop unsloth on a GPU.")
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # fields only TRL has (optim, ...) are listed in run.json
            return to_loop_config(recipe, output_dir=str(output_dir), resume_from_checkpoint=resume)
    if loop == "trl":
        from grpo_kit import trl_path
        from grpo_kit.hardware import detect_precision

        precision = detect_precision()
        training = trl_path.resolve_training(recipe, output_dir=output_dir, max_steps=None, report_to="none",
                                             vllm_mode=None, vllm_server_host=None, vllm_server_port=None,
                                             vllm_gpu_memory_utilization=None, precision=precision, overrides={})
        trl_path.check_settings(recipe, training, precision=precision)
        return trl_path.build_grpo_config(training)
    from grpo_kit.hardware import require_cuda

    require_cuda("--loop unsloth", "Use --loop trl (or standalone) on this machine.")
    return None


def _load_model(recipe):
    if recipe.model == TINY_MODEL:
        from grpo_kit.models import tiny_model

        model, tokenizer = tiny_model(seed=0)
    else:
        from grpo_kit.models import load_model

        # quantization="4bit" (QLoRA) fails here, before loading, when there is no CUDA.
        model, tokenizer = load_model(recipe.model, quantization=recipe.quantization)
    if recipe.lora is not None:
        from peft import get_peft_model

        model = get_peft_model(model, recipe.lora.to_peft_config())
    return model, tokenizer


def _held_out(recipe, n: int) -> tuple[list[Any], dict[str, list]]:
    """n prompts the run does not train on: rows after the training rows (or the last rows when the
    dataset has no more). Returns (prompts, other columns for the reward functions)."""
    if n <= 0:
        return [], {}
    size = recipe.dataset_size
    dataset = recipe.load_dataset(size=(size + n) if size else None)
    start = size if size and len(dataset) >= size + n else max(0, len(dataset) - n)
    rows = dataset.select(range(start, min(len(dataset), start + n)))
    columns = {c: list(rows[c]) for c in rows.column_names if c != "prompt"}
    return list(rows["prompt"]), columns


def _samples_max_tokens(recipe) -> int:
    return int(recipe.training.get("max_completion_length", 64))


def cmd_train(args, console) -> int:
    from grpo_kit import samples as samples_mod

    try:  # every configuration mistake surfaces here, before a model is loaded
        recipe, loop = _build_recipe(args)
        output_dir, resume = _resolve_run_dir(args, recipe.name)
        path_config = _check_before_loading(recipe, loop, output_dir, resume)
    except (ValueError, TypeError, FileNotFoundError, ImportError, RuntimeError) as error:
        raise UsageError(str(error)) from error
    if loop == "unsloth":
        from grpo_kit import unsloth_path

        console.print(f"[bold]grpo-kit train[/] {recipe.name} — Unsloth path")
        unsloth_path.train(recipe, output_dir=output_dir, resume_from_checkpoint=resume)
        return 0

    console.print(f"[bold]grpo-kit train[/] recipe [cyan]{recipe.name}[/] · loop [cyan]{loop}[/] · model "
                  f"[cyan]{recipe.model}[/] · {recipe.training.get('max_steps', '?')} steps → [green]{output_dir}[/]")
    started = time.perf_counter()
    output_dir.mkdir(parents=True, exist_ok=True)
    with console.status("loading model and data…"):
        model, tokenizer = _load_model(recipe)
        dataset = recipe.load_dataset()
        reward_funcs = recipe.build_reward_funcs(tokenizer)
        prompts, columns = _held_out(recipe, args.samples)
    with console.status("answers before training…"):
        before = samples_mod.generate_answers(model, tokenizer, prompts, max_new_tokens=_samples_max_tokens(recipe))

    if loop == "standalone":
        from grpo_kit import loop as loop_mod

        result = loop_mod.train(model, tokenizer, dataset, reward_funcs, path_config, reward_weights=recipe.reward_weights)
        interrupted, step, checkpoint = result.interrupted, result.global_step, result.last_checkpoint
        log_history = result.log_history
    else:
        from grpo_kit import trl_path

        result = trl_path.train(recipe, model=model, tokenizer=tokenizer, train_dataset=dataset,
                                reward_funcs=reward_funcs, output_dir=output_dir, resume_from_checkpoint=resume,
                                save_final=False)
        model = result.trainer.model
        interrupted, step, checkpoint = result.interrupted, result.global_step, result.checkpoint
        log_history = result.log_history
    if interrupted and checkpoint is None:
        console.print(f"[yellow]Interrupted before the first step finished[/]: no checkpoint to resume; {output_dir} holds no training.")
        return EXIT_INTERRUPTED
    if interrupted:
        console.print(f"[yellow]Interrupted at step {step}[/]; checkpoint {checkpoint}. Continue with:\n"
                      f"  grpo-kit train --recipe {args.recipe} --output-dir {output_dir} --resume"
                      + "".join(f" --set {o}" for o in args.overrides) + (f" --loop {loop}" if args.loop else ""))
        return EXIT_INTERRUPTED
    train_seconds = time.perf_counter() - started

    from grpo_kit.export import save_adapter, save_merged

    reports = []
    with console.status("answers after training, exports…"):
        after = samples_mod.generate_answers(model, tokenizer, prompts, max_new_tokens=_samples_max_tokens(recipe))
        pairs = samples_mod.before_after(prompts, before, after, reward_funcs=reward_funcs,
                                         reward_weights=recipe.reward_weights, columns=columns)
        samples_mod.write_samples(pairs, output_dir, title=f"{recipe.name}: before / after {step} GRPO steps")
        if recipe.lora is not None:
            reports.append(save_adapter(model, tokenizer, output_dir / "adapter"))
        if not args.no_merge:
            reports.append(save_merged(model, tokenizer, output_dir / "merged"))
        if args.gguf:
            from grpo_kit.export import save_gguf

            reports.append(save_gguf(output_dir / "merged" if not args.no_merge else model, output_dir / f"model-{args.gguf}.gguf",
                                     args.gguf, tokenizer=tokenizer))
    rewards = [r["reward"] for r in log_history if r.get("reward") is not None]
    summary = {
        "recipe": recipe.name, "loop": loop, "model": recipe.model, "steps": step,
        "train_seconds": round(train_seconds, 1), "total_seconds": round(time.perf_counter() - started, 1),
        "reward_first_step": rewards[0] if rewards else None, "reward_last_step": rewards[-1] if rewards else None,
        "samples_mean_reward_before": samples_mod.mean_reward(pairs, "before"),
        "samples_mean_reward_after": samples_mod.mean_reward(pairs, "after"),
        "exports": [{"kind": r.kind, "path": str(r.path), "size_bytes": r.size_bytes, "verified": r.verified} for r in reports],
        "training": dict(recipe.training),
    }
    (output_dir / "run.json").write_text(json.dumps(summary, indent=2, default=str))
    _print_summary(console, output_dir, summary, reports)
    return 0 if all(r.verified for r in reports) else 1


def _print_summary(console, output_dir: Path, summary: dict, reports) -> None:
    from rich.table import Table

    table = Table(title=f"run folder {output_dir}", show_header=False)
    table.add_row("steps", str(summary["steps"]))
    table.add_row("wall time", f"{summary['total_seconds']:.0f} s (training {summary['train_seconds']:.0f} s)")

    def fmt(v):
        return "–" if v is None else f"{v:.3f}"

    table.add_row("reward (first → last step)", f"{fmt(summary['reward_first_step'])} → {fmt(summary['reward_last_step'])}")
    table.add_row("held-out reward (before → after)",
                  f"{fmt(summary['samples_mean_reward_before'])} → {fmt(summary['samples_mean_reward_after'])}")
    for report in reports:
        table.add_row(report.kind, report.summary())
    for name in ("metrics.jsonl", "reward_curve.png", "samples.md"):
        if (output_dir / name).exists():
            table.add_row(name, str(output_dir / name))
    console.print(table)


# --------------------------------------------------------------------------- export / generate


def _run_paths(source: Path) -> tuple[Path | None, Path | None]:
    """(adapter folder, model folder) found in ``source``."""
    if (source / "adapter" / "adapter_config.json").is_file():
        return source / "adapter", (source / "merged" if (source / "merged" / "config.json").is_file() else None)
    if (source / "adapter_config.json").is_file():
        return source, None
    if (source / "config.json").is_file():
        return None, source
    raise UsageError(f"{source} holds no adapter (adapter_config.json, adapter/) and no model (config.json); "
                     "pass a `grpo-kit train` run folder, an adapter folder or a model folder.")


def _base_model_name(source: Path, adapter_dir: Path, base: str | None) -> str:
    """Which base model the adapter belongs to: --base, else the run's run.json, else adapter_config.json."""
    if base:
        return base
    for run_json in (source / "run.json", adapter_dir.parent / "run.json"):
        if run_json.is_file():
            return json.loads(run_json.read_text())["model"]
    name = json.loads((adapter_dir / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if name:
        return name
    raise UsageError(f"cannot tell which base model the adapter in {adapter_dir} belongs to; pass --base MODEL.")


def _load_adapter_model(adapter_dir: Path, base_name: str):
    """Base model + the adapter in ``adapter_dir`` (tokenizer from the adapter folder)."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    from grpo_kit.models import prepare_tokenizer

    if base_name == TINY_MODEL:
        from grpo_kit.models import tiny_model

        base, _ = tiny_model(seed=0)
    else:
        from grpo_kit.models import load_model

        base, _ = load_model(base_name)
    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(adapter_dir))
    return PeftModel.from_pretrained(base, adapter_dir), tokenizer


def cmd_export(args, console) -> int:
    from grpo_kit.export import save_gguf, save_merged

    source = Path(args.source)
    adapter_dir, model_dir = _run_paths(source)
    in_run = adapter_dir is not None and adapter_dir != source
    out = Path(args.out) if args.out else (source if in_run else source.parent / (source.name + "-export"))
    reports = []
    if adapter_dir is not None and (model_dir is None or args.out or args.dtype != "16bit"):
        with console.status("loading base model + adapter…"):
            model, tokenizer = _load_adapter_model(adapter_dir, _base_model_name(source, adapter_dir, args.base))
        with console.status("merging and verifying…"):
            reports.append(save_merged(model, tokenizer, out / "merged", dtype=args.dtype))
        model_dir = out / "merged"
    if args.gguf:
        with console.status(f"GGUF {args.gguf}: converting and verifying…"):
            try:
                reports.append(save_gguf(model_dir, out / f"model-{args.gguf}.gguf", args.gguf,
                                         llama_cpp_dir=args.llama_cpp_dir))
            except (ValueError, FileNotFoundError, ImportError) as error:  # type not makeable, no converter
                raise UsageError(str(error)) from error
    if not reports:
        raise UsageError(f"{source} is already a model folder; ask for --gguf TYPE to export it.")
    for report in reports:
        console.print(("[green]✔[/] " if report.verified else "[red]✘[/] ") + report.summary())
    return 0 if all(r.verified for r in reports) else 1


def cmd_generate(args, console) -> int:
    from grpo_kit import samples as samples_mod

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
            prompts, columns = _held_out(recipe, args.num_prompts)
    if not prompts:
        raise UsageError("no prompts: pass --prompt TEXT (repeatable) or --recipe NAME.")
    with console.status("loading…"):
        model, tokenizer = _load_adapter_model(adapter_dir, _base_model_name(source, adapter_dir, args.base))
    gen = {"max_new_tokens": args.max_new_tokens, "do_sample": args.sample}
    with model.disable_adapter():
        before = samples_mod.generate_answers(model, tokenizer, prompts, **gen)
    after = samples_mod.generate_answers(model, tokenizer, prompts, **gen)
    reward_funcs = recipe.build_reward_funcs(tokenizer) if recipe and not args.prompt else ()
    pairs = samples_mod.before_after(prompts, before, after, reward_funcs=reward_funcs,
                                     reward_weights=recipe.reward_weights if reward_funcs else None, columns=columns)
    from rich.table import Table

    table = Table(title="base model vs trained adapter", show_lines=True)
    for name in ("prompt", "before", "after", "reward"):
        table.add_column(name, overflow="fold")
    for s in pairs:
        prompt = s.prompt if isinstance(s.prompt, str) else s.prompt[-1]["content"]
        reward = "" if s.reward_before is None else f"{s.reward_before:.2f} → {s.reward_after:.2f}"
        table.add_row(prompt[:200], s.before, s.after, reward)
    console.print(table)
    return 0


# --------------------------------------------------------------------------- small commands


def cmd_recipes(args, console) -> int:
    from rich.table import Table

    from grpo_kit.recipes import DEFAULT_RECIPE, RECIPES

    table = Table(title="grpo-kit recipes", show_lines=True)
    table.add_column("name", style="cyan", no_wrap=True)
    table.add_column("model")
    table.add_column("description")
    for recipe in RECIPES.values():
        name = recipe.name + (" (default)" if recipe.name == DEFAULT_RECIPE else "")
        table.add_row(name, recipe.model, recipe.description)
    console.print(table)
    return 0


def _call_tool(tool_main, argv, console) -> int:
    """Run another module's ``main(argv)``; its ``SystemExit`` (argparse errors, messages) becomes our status."""
    try:
        return int(tool_main(argv) or 0)
    except SystemExit as exit_:
        if isinstance(exit_.code, str):
            console.print(f"[red]error:[/] {exit_.code}", highlight=False)
            return EXIT_USAGE
        return int(exit_.code or 0)


def cmd_losses(args, console) -> int:
    from grpo_kit.loss_demo import main as loss_demo_main

    return _call_tool(loss_demo_main, args.args, console)


def cmd_rewards(args, console) -> int:
    if args.rewards_command != "lint":
        raise UsageError("grpo-kit rewards: the tool is `lint`, e.g. grpo-kit rewards lint rewards:length_reward")
    from rewards.lint import main as lint_main

    return _call_tool(lint_main, args.args, console)


COMMANDS = {"train": cmd_train, "export": cmd_export, "generate": cmd_generate, "losses": cmd_losses,
            "rewards": cmd_rewards, "recipes": cmd_recipes}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``grpo-kit``; returns the exit status."""
    from rich.console import Console

    console = Console(stderr=False)
    argv = list(sys.argv[1:] if argv is None else argv)
    # Pass-through commands hand their arguments (options included) to the tool's own parser.
    if argv[:1] == ["losses"]:
        return cmd_losses(argparse.Namespace(args=argv[1:]), console)
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
        console.print(f"[red]error:[/] {error}", highlight=False)
        if os.environ.get("GRPO_KIT_DEBUG"):
            raise
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
