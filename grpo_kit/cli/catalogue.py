"""The small commands: ``grpo-kit recipes`` (the catalogue), and ``losses``, ``rewards lint`` and ``doctor``, which
hand their arguments to the tool's own ``main``."""

from __future__ import annotations

from grpo_kit.cli.common import UsageError, call_tool
from grpo_kit.terminal import markup_safe, plain

__all__ = ["cmd_doctor", "cmd_losses", "cmd_recipes", "cmd_rewards"]


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


def cmd_losses(args, console) -> int:
    from grpo_kit.loss_demo import main as loss_demo_main

    return call_tool(loss_demo_main, args.args, console)


def cmd_rewards(args, console) -> int:
    if args.rewards_command != "lint":
        raise UsageError(
            "grpo-kit rewards: the tool is `lint`, e.g. grpo-kit rewards lint rewards:length_reward"
        )
    from rewards.lint import main as lint_main

    return call_tool(lint_main, args.args, console)


def cmd_doctor(args, console) -> int:
    from grpo_kit.doctor import main as doctor_main

    return call_tool(doctor_main, args.args, console)
