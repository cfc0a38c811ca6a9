"""Every GRPO setting's default is written once, and every place that needs it reads that one declaration.

The declaration: ``grpo_kit.config.declarations.SETTINGS`` (``GRPO_DEFAULTS`` and ``GRPO_KIT_DEFAULTS`` are read
from it; ``test_settings`` compares the first with the installed TRL). The loss defaults it reads are written,
torch-free, in ``core/losses/validation.py``: ``LossSettings``, ``AdvantageSettings`` and ``ENTROPY_FIELDS``.

1. The source: no other literal default of a setting's name in ``grpo_kit/`` (a ``Setting(...)`` line, a dataclass
   field, a function's keyword default, ``.get(name, literal)``), except the few listed below with the reason
   each is not one.
2. The walk: a recipe that leaves a setting out gets the declared value in the loop's config, in the GRPOConfig
   the TRL path builds, and through the command line, for every declared name.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from grpo_kit.config.declarations import SETTINGS
from grpo_kit.config.loop import GRPOLoopConfig
from grpo_kit.config.rules import GRPO_DEFAULTS, GRPO_KIT_DEFAULTS, training_value
from grpo_kit.core.losses.validation import ENTROPY_FIELDS, AdvantageSettings, LossSettings

GRPO_KIT = Path(__file__).resolve().parents[2] / "grpo_kit"

# The defaults a recipe that leaves a setting out gets on every path (GRPOConfig's, and grpo-kit's own names).
DECLARED = {**GRPO_DEFAULTS, **GRPO_KIT_DEFAULTS}
SETTING_NAMES = ({f.name for f in dataclasses.fields(GRPOLoopConfig)} | set(SETTINGS)) - {"output_dir"}
# Declared in a more specific home; the declaration may only refer to them.
DECLARED_ELSEWHERE = set(ENTROPY_FIELDS) | {f.name for f in dataclasses.fields(LossSettings)}
DECLARED_ELSEWHERE |= {f.name for f in dataclasses.fields(AdvantageSettings)}
DECLARED_ELSEWHERE -= {
    "max_completion_length"
}  # LossSettings: None (not assumed); the declaration: TRL's 512

# Where the declarations are written (file, the enclosing class or assignment name).
HOMES = {
    ("config/declarations.py", "_DECLARED"),
    ("core/losses/validation.py", "LossSettings"),
    ("core/losses/validation.py", "AdvantageSettings"),
    ("core/losses/validation.py", "ENTROPY_FIELDS"),
}
# Literal values of a setting's name that are not its default, each with why.
NOT_DEFAULTS = {
    ("recipes/catalogue.py", "_RECIPE_LIST"): "the catalogue: each recipe's own values, not defaults",
    ("recipes/catalogue.py", "_GSM8K_CPU_TRAINING"): "the catalogue: the gsm8k-cpu recipes' own values",
    ("recipes/catalogue.py", "_LESSON_VARIANTS"): "the catalogue: each lesson's own values",
    ("recipes/catalogue.py", "<module>"): "the catalogue: values of the recipes built by _variant(...)",
    ("recipes/files.py", "TRL_KEYS"): "a table of TRL's keys and their meaning, not values",
    ("recipes/recipe.py", "WarmupSFT"): "learning_rate: the SFT warm-up's own (before GRPO), not GRPO's",
    (
        "recipes/files.py",
        "_held_out",
    ): "seed=0: the seed that carves your rows' held-out fraction, not training's",
    (
        "core/sampling.py",
        "*",
    ): "a building block's neutral values (1.0, 0: no warping); every caller passes the run's",
    ("core/logprobs.py", "*"): "temperature=1.0: log-probs unscaled; every caller passes the run's",
    (
        "core/losses/aggregation.py",
        "*",
    ): "gradient_accumulation_steps=1: the neutral divisor; compute_loss passes it",
    ("core/losses/entropy.py", "entropy_bonus"): "gradient_accumulation_steps=1: the neutral divisor",
    ("teaching/entropy_demo.py", "*"): "lesson 5's toy policy, not a GRPO run",
    ("models/tiny.py", "*"): "seed of the random test model's weights",
    ("models/vlm.py", "*"): "seed of the random vision tower's weights",
    ("evaluation/*", "*"): "the evaluation's own sampling seed and decoding, not training's",
    ("runs/held_out.py", "evaluate_held_out"): "the evaluation's own sampling seed",
    (
        "config/rules.py",
        "evaluation_settings",
    ): "eval_strategy='steps': the schedule evaluation_interval resolved",
    (
        "rollout/generation.py",
        "Decoding",
    ): "seed: the evaluation's own sampling seed (the rest read GRPO_DEFAULTS)",
    (
        "rollout/tool_rollout.py",
        "*",
    ): "the evaluation's tool rollout: one rollout per prompt, one tool round unless the recipe sets more",
    (
        "trainers/unsloth_path.py",
        "sampling_params_kwargs",
    ): "num_generations=1: one vLLM sample per prompt for evaluation",
    ("trainers/trl_path.py", "_vllm_overrides"): "use_vllm=True: what giving a vllm_mode asks for",
    ("rollout/vllm_generation.py", "*"): "one sample per prompt and the engine's seed for evaluation",
    ("export/hf.py", "*"): "a dtype name table (bf16 -> bfloat16), not a setting",
    ("loop/bookkeeping.py", "LoopState"): "max_steps=0: the bookkeeping's counter before the plan sets it",
    (
        "teaching/lesson_helpers.py",
        "*",
    ): "what a lesson's Train button asks for (no progress bar under marimo)",
    ("cli/train.py", "*"): "'?' shown when run.json lacks max_steps",
    (
        "loop/plumbing.py",
        "build_optimizer",
    ): "weight_decay=0.0: the parameters AdamW must not decay (biases, norms)",
}


def _literal(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and node.value is not None


def _literal_defaults(root: Path = GRPO_KIT) -> list[tuple[str, str, int, str, str]]:
    """(file, enclosing class/function/assignment, line, setting, what) for every literal default of a setting."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()

        def visit(node: ast.AST, owner: str, rel: str = rel) -> None:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                positional = args.posonlyargs + args.args
                pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults))
                pairs += list(zip(args.kwonlyargs, args.kw_defaults))
                for arg, default in pairs:
                    if arg.arg in SETTING_NAMES and _literal(default):
                        found.append(
                            (rel, node.name, default.lineno, arg.arg, f"{arg.arg}={default.value!r}")
                        )
                owner = node.name
            elif isinstance(node, ast.ClassDef):
                owner = node.name
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if (
                    isinstance(node, ast.AnnAssign)
                    and names
                    and names[0] in SETTING_NAMES
                    and _literal(node.value)
                ):
                    found.append((rel, owner, node.lineno, names[0], f"{names[0]} = {node.value.value!r}"))
                if names and owner == "<module>":
                    owner = names[0]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Setting":
                if len(node.args) >= 2 and _literal(node.args[0]) and node.args[0].value in SETTING_NAMES:
                    name, default = node.args[0].value, node.args[1]
                    if _literal(default):
                        found.append((rel, owner, node.lineno, name, f"Setting({name!r}, {default.value!r})"))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("get", "setdefault", "pop") and len(node.args) == 2:
                    key, default = node.args
                    if _literal(key) and key.value in SETTING_NAMES and _literal(default):
                        found.append(
                            (
                                rel,
                                owner,
                                node.lineno,
                                key.value,
                                f".{node.func.attr}({key.value!r}, {default.value!r})",
                            )
                        )
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if _literal(key) and key.value in SETTING_NAMES and _literal(value):
                        found.append(
                            (rel, owner, node.lineno, key.value, f"{{{key.value!r}: {value.value!r}}}")
                        )
            for child in ast.iter_child_nodes(node):
                visit(child, owner)

        visit(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return found


def _excused(rel: str, owner: str, name: str) -> bool:
    if (rel, owner) in HOMES:
        return owner != "_DECLARED" or name not in DECLARED_ELSEWHERE
    for file, where in NOT_DEFAULTS:
        file_matches = rel == file or (file.endswith("/*") and rel.startswith(file[:-1]))
        if file_matches and where in ("*", owner):
            return True
    return False


def test_no_setting_has_a_literal_default_outside_its_declaration():
    stray = [
        f"grpo_kit/{rel}:{line} ({owner}): {what}"
        for rel, owner, line, name, what in _literal_defaults()
        if not _excused(rel, owner, name)
    ]
    assert not stray, (
        "read the declaration (rules.training_value / declarations.SETTINGS) instead:\n" + "\n".join(stray)
    )


def test_the_scan_finds_a_literal_default_and_does_not_excuse_it(tmp_path):
    (tmp_path / "copy.py").write_text('def f(training):\n    return training.get("seed", 42)\n')
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "declarations.py").write_text(
        '_DECLARED = (Setting("seed", 42, "help"), Setting("beta", 0.0, "help"))\n'
    )  # beta: LossSettings'
    found = _literal_defaults(tmp_path)
    assert [(rel, owner, line, name) for rel, owner, line, name, _ in found] == [
        ("config/declarations.py", "_DECLARED", 1, "seed"),
        ("config/declarations.py", "_DECLARED", 1, "beta"),
        ("copy.py", "f", 2, "seed"),
    ]
    assert [_excused(rel, owner, name) for rel, owner, _, name, _ in found] == [True, False, False]


# --- the walk: recipe -> loop config | GRPOConfig | command line --------------------------------------------------


@pytest.fixture(scope="module")
def bare_recipe():
    """The main job on the tiny model with only what it must set: every other setting is left to its default."""
    from grpo_kit.recipes.catalogue import get_recipe

    recipe = get_recipe("smoltldr-length-small", model="tiny")
    keep = {"num_generations", "per_device_train_batch_size", "max_completion_length", "max_steps"}
    return dataclasses.replace(recipe, training={k: v for k, v in recipe.training.items() if k in keep})


def _left_to_default(recipe) -> list[str]:
    return sorted(name for name in DECLARED if name not in recipe.training)


def test_a_setting_left_out_reads_the_declaration(bare_recipe):
    assert len(_left_to_default(bare_recipe)) > 40
    for name in _left_to_default(bare_recipe):
        assert training_value(bare_recipe.training, name) == DECLARED[name], name


@pytest.mark.parametrize("loop", ["standalone", "trl"])
def test_the_plan_of_each_path_and_the_command_line_apply_the_declared_defaults(bare_recipe, loop, tmp_path):
    from grpo_kit.runs import plan_run

    plan = plan_run(bare_recipe, loop=loop, output_dir=tmp_path / "run")
    config = plan.path_config
    # None declares "derived" (generation_batch_size) or "off": TRL resolves the first, so it is not compared.
    checked = [n for n in _left_to_default(bare_recipe) if hasattr(config, n) and DECLARED[n] is not None]
    assert len(checked) > 30
    differ = {
        name: (getattr(config, name), DECLARED[name])
        for name in checked
        if getattr(config, name) != DECLARED[name]
        and not (name == "report_to" and getattr(config, name) == [])
    }
    assert differ == {}


def test_the_command_line_declares_no_default_of_its_own():
    """`grpo-kit train` leaves every setting it has an option for to the recipe and the declaration (None)."""
    from grpo_kit.cli.parser import build_parser

    parser = build_parser()
    train = next(a for a in parser._subparsers._group_actions if "train" in a.choices).choices["train"]
    options = [action for action in train._actions if action.dest in SETTING_NAMES]
    assert [action.dest for action in options] == ["max_steps"]
    assert all(action.default is None for action in options)
