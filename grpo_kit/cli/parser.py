"""``grpo-kit``'s argument parser: every command, flag and help text, one function per command. A flag that sets a
training setting (``--max-steps``) takes its type and help from the setting's declaration
(``grpo_kit.config.declarations``) and its rule from there too (the run's plan applies it)."""

from __future__ import annotations

import argparse

from grpo_kit.config.declarations import SETTINGS
from grpo_kit.runs.plan import DEFAULT_LOOP, LOOPS

__all__ = ["build_parser"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grpo-kit", description="Learn GRPO from the formula to an exported model."
    )
    # --debug before the subcommand (`grpo-kit --debug export ...`) or after it: the subcommand's copy
    # defaults to SUPPRESS so that it never overwrites the value the top-level parser set.
    parser.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    # A run folder's recipe may name reward code (file.py:function); it is imported only when you say so here.
    trust = argparse.ArgumentParser(add_help=False)
    trust.add_argument(
        "--trust-reward-code",
        action="store_true",
        help="import the reward code a run folder's recipe names (it runs; only for runs and code of your own)",
    )
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show the full traceback of an error"
    )
    _add_train(sub, debug, trust)
    _add_export(sub, debug)
    _add_generate(sub, debug, trust)
    _add_eval(sub, debug, trust)
    _add_preflight(sub)
    _add_tools(sub)
    _add_recipes(sub)
    _add_new(sub, debug)
    _add_doctor(sub)
    return parser


def _setting_flag(parser: argparse.ArgumentParser, name: str) -> None:
    """``--max-steps`` for the setting ``max_steps``: its type and help from the declaration. The default is None
    (the recipe's value); the declared rule is applied where the run is planned, as for ``--set max_steps=N``."""
    setting = SETTINGS[name]
    parser.add_argument(
        "--" + name.replace("_", "-"),
        type=type(setting.default),
        default=None,
        help=f"{setting.help} Overrides the recipe's (declared default {setting.default})",
    )


def _add_train(sub, debug, trust) -> None:
    from grpo_kit.recipes.catalogue import DEFAULT_RECIPE

    train = sub.add_parser(
        "train",
        help="train with a recipe (no arguments: the CPU main job)",
        parents=[debug, trust],
        description="Train with GRPO. With no arguments: the default recipe on the embedded "
        "SmolLM2-135M, offline, on CPU.",
    )
    train.add_argument(
        "--recipe",
        default=None,
        help=f"recipe name (default {DEFAULT_RECIPE}, or the stored one with --resume; see `grpo-kit recipes`)",
    )
    train.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="a recipe file (.yaml/.toml) of your own task instead of --recipe (`grpo-kit new NAME` writes one)",
    )
    train.add_argument("--small", action="store_true", help="use the recipe's CPU-sized variant")
    train.add_argument(
        "--loop",
        choices=LOOPS,
        default=None,
        help=f"standalone (readable PyTorch loop), trl (GRPOTrainer), unsloth (FastLanguageModel; its CPU backend "
        f"without a GPU). Default {DEFAULT_LOOP}",
    )
    _setting_flag(train, "max_steps")
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
    _add_train_outputs(train)


def _add_train_outputs(train: argparse.ArgumentParser) -> None:
    """What ``grpo-kit train`` does around the training: answers, evaluation, exports, pre-flight."""
    train.add_argument(
        "--samples",
        type=int,
        default=None,
        help="held-out prompts for before/after answers (default 4; 0: none)",
    )
    # The run's flags (grpo_kit.runs.plan.RUN_FLAGS): None when not given, so a resume replays the stored ones.
    train.add_argument("--no-merge", action="store_true", default=None, help="skip the merged 16-bit export")
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
        default=None,
        help="run `grpo-kit preflight` first and refuse to train on a no-go (the default with --config)",
    )
    train.add_argument(
        "--no-preflight", action="store_true", help="with --config: train without running pre-flight first"
    )
    train.add_argument(
        "--force", action="store_true", default=None, help="with pre-flight: train even on a no-go"
    )
    train.add_argument(
        "--keep-best",
        action="store_true",
        default=None,
        help="with eval_steps: export the weights of the evaluation during training with the best held-out "
        "metric, not the last step's (chosen on those rows: the figure after training is optimistic for them)",
    )


def _add_export(sub, debug) -> None:
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


def _add_generate(sub, debug, trust) -> None:
    generate = sub.add_parser(
        "generate", help="answers before vs after training, side by side", parents=[debug, trust]
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


def _add_eval(sub, debug, trust) -> None:
    evaluate = sub.add_parser(
        "eval",
        help="held-out report card of a run folder or exported model: base vs trained",
        parents=[debug, trust],
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
        "--k",
        type=int,
        default=None,
        help="also k seeded samples per prompt for pass@k, mean@k, accuracy@k (default: the recipe's eval_samples, 1)",
    )
    evaluate.add_argument(
        "--recipe", default=None, help="recipe whose held-out prompts to use (default: the run's)"
    )
    evaluate.add_argument(
        "--base", default=None, help="base model (default: from run.json / adapter_config.json)"
    )
    evaluate.add_argument("--out", default=None, help="folder for the report card (default: the run folder)")


def _add_preflight(sub) -> None:
    from grpo_kit.recipes.catalogue import DEFAULT_RECIPE

    preflight = sub.add_parser(
        "preflight",
        help="will GRPO learn? sample the base model, go / no-go with fixes",
        description="Sample num_generations completions for a few prompts with the "
        "recipe's generation settings and report zero-std groups, clipping, "
        "EOS rate, rewards and the prompt ending, with a go/no-go verdict.",
    )
    preflight.add_argument("--recipe", default=None, help=f"recipe name (default {DEFAULT_RECIPE})")
    preflight.add_argument(
        "--config", default=None, metavar="FILE", help="a recipe file (.yaml/.toml) instead of --recipe"
    )
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


def _add_tools(sub) -> None:
    """``losses`` and ``rewards lint``: their own parsers take the arguments."""
    losses = sub.add_parser(
        "losses",
        help="per-token weights of each GRPO loss type (grpo_kit.teaching.loss_demo)",
        add_help=False,
    )
    losses.add_argument("args", nargs=argparse.REMAINDER)

    rewards = sub.add_parser("rewards", help="reward-function tools")
    rewards_sub = rewards.add_subparsers(dest="rewards_command", metavar="TOOL")
    lint = rewards_sub.add_parser(
        "lint", help="run reward functions over tricky completions (rewards.lint)", add_help=False
    )
    lint.add_argument("args", nargs=argparse.REMAINDER)


def _add_recipes(sub) -> None:
    recipes = sub.add_parser(
        "recipes", help="list the named recipes; `grpo-kit recipes NAME` shows one in full"
    )
    recipes.add_argument("name", nargs="?", default=None, help="a recipe to show in full")
    recipes.add_argument("--show", default=None, metavar="NAME", help="a recipe to show in full (as NAME)")
    recipes.add_argument(
        "--as-yaml",
        action="store_true",
        help="with NAME: write the recipe as a recipe file (grpo-kit train --config FILE trains it)",
    )


def _add_new(sub, debug) -> None:
    new = sub.add_parser(
        "new",
        help="scaffold a task folder: recipe file, reward module and its test, 20 rows, README",
        parents=[debug],
        description="Write NAME/ with NAME.yaml (a recipe file), NAME_rewards.py (one documented reward "
        "function), test_NAME_rewards.py, NAME.jsonl (20 rows) and a README of three commands. It trains "
        "as it is, on the embedded model, on CPU: cd NAME && grpo-kit train --config NAME.yaml",
    )
    new.add_argument("name", help="the task's name: letters, digits, '-' and '_' (it becomes the folder)")


def _add_doctor(sub) -> None:
    doctor = sub.add_parser(
        "doctor", help="check this environment: versions vs pins, device, paths, model, disk", add_help=False
    )
    doctor.add_argument("args", nargs=argparse.REMAINDER)
