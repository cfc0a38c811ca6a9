"""The small commands: ``grpo-kit recipes`` (the catalogue), and ``losses``, ``rewards lint`` and ``doctor``, which
hand their arguments to the tool's own ``main``."""

from __future__ import annotations

from grpo_kit.cli.common import UsageError, call_tool
from grpo_kit.support.terminal import markup_safe, plain

__all__ = ["cmd_doctor", "cmd_losses", "cmd_new", "cmd_recipes", "cmd_rewards"]


def cmd_recipes(args, console) -> int:
    """The catalogue at 80 columns (name, model, one line), or one recipe in full."""
    from rich.table import Table

    from grpo_kit.recipes.catalogue import DEFAULT_RECIPE, RECIPES, get_recipe

    name = getattr(args, "show", None) or getattr(args, "name", None)
    if getattr(args, "show", None) and getattr(args, "name", None) and args.show != args.name:
        raise UsageError(f"two recipes named ({args.name!r} and --show {args.show!r}); show one.")
    if getattr(args, "as_yaml", False) and not name:
        raise UsageError("--as-yaml writes one recipe: grpo-kit recipes --show NAME --as-yaml > my_task.yaml")
    if name:
        try:
            recipe = get_recipe(name)
        except ValueError as error:
            raise UsageError(str(error)) from error
        if args.as_yaml:
            from grpo_kit.recipes.files import recipe_to_text

            print(recipe_to_text(recipe), end="")  # plain stdout: the file as written, for a redirect
            return 0
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
        table.add_row(
            markup_safe(name), markup_safe(listed_model(recipe.model)), markup_safe(recipe.one_line)
        )
    console.print(table)
    console.print("* the default. In full: grpo-kit recipes NAME", highlight=False)
    console.print("As a recipe file of your own: grpo-kit recipes --show NAME --as-yaml", highlight=False)
    return 0


#: Model ids longer than this are listed by their name alone ("…/SmolVLM-256M-Instruct"), so that each recipe
#: keeps one line of 80 columns; `grpo-kit recipes NAME` shows the whole id.
LISTED_MODEL_WIDTH = 26


def listed_model(model: str) -> str:
    """``model`` as the recipe list shows it: whole, or ``…/<name>`` when a Hub id is over
    :data:`LISTED_MODEL_WIDTH` characters."""
    if len(model) <= LISTED_MODEL_WIDTH or "/" not in model:
        return model
    return "…/" + model.rsplit("/", 1)[1]


def cmd_losses(args, console) -> int:
    from grpo_kit.teaching.loss_demo import main as loss_demo_main

    return call_tool(loss_demo_main, args.args, console)


def cmd_rewards(args, console) -> int:
    if args.rewards_command != "lint":
        raise UsageError(
            "grpo-kit rewards: the tool is `lint`, e.g. grpo-kit rewards lint rewards:length_reward"
        )
    from rewards.lint import main as lint_main

    return call_tool(lint_main, args.args, console)


def cmd_doctor(args, console) -> int:
    from grpo_kit.cli.doctor import main as doctor_main

    return call_tool(doctor_main, args.args, console)


def cmd_new(args, console) -> int:
    """``grpo-kit new NAME``: the task folder of ``grpo_kit.recipes.scaffold``, and the command that trains it."""
    from grpo_kit.recipes.scaffold import scaffold_task

    try:
        folder = scaffold_task(args.name)
    except (ValueError, OSError) as error:
        raise UsageError(str(error)) from error
    console.print(
        f"Wrote {markup_safe(folder)}/ (recipe, reward and its test, 20 rows, README). Train it:\n"
        f"  cd {markup_safe(folder)} && grpo-kit train --config {markup_safe(args.name)}.yaml "
        f"--output-dir outputs/{markup_safe(args.name)}",
        highlight=False,
        soft_wrap=True,
    )
    return 0
