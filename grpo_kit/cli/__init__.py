"""``grpo-kit``: the command line. It parses arguments, calls one function of the library (``grpo_kit.runs`` for
runs, ``grpo_kit.export``, ...) and prints. One module per family of commands: ``train`` (train, preflight),
``trained`` (eval, export, generate: a trained model), ``catalogue`` (recipes and the pass-through tools),
``parser`` (every flag), ``common`` (errors, exit statuses, ``--set``).

    grpo-kit train                                  # the main job: default recipe, embedded model, CPU, offline
    grpo-kit train --recipe gsm8k-cpu --loop trl --max-steps 20 --set learning_rate=5e-5 --set lora.r=8
    grpo-kit train --output-dir outputs/run --resume            # continue after Ctrl-C (stored configuration)
    grpo-kit train --output-dir outputs/run --overwrite         # start again there (old run moved aside)
    grpo-kit export outputs/run --gguf f16                       # adapter -> merged (+ GGUF), verified
    grpo-kit generate outputs/run                                # base vs trained answers, side by side
    grpo-kit eval outputs/run --num-prompts 64 --k 4             # held-out report card, base vs trained
    grpo-kit preflight --recipe gsm8k-cpu                        # will GRPO learn? go / no-go with fixes
    grpo-kit train --preflight                                   # pre-flight first; refuses a no-go (--force)
    grpo-kit losses --lengths 4 32 16 128 --rewards 1 0 1 0      # grpo_kit.teaching.loss_demo
    grpo-kit rewards lint rewards:length_reward                  # rewards.lint
    grpo-kit recipes                                             # the named recipes

``train`` writes a run folder (default ``outputs/<recipe>-<timestamp>``; see ``grpo_kit.runs``). Mistakes in
the configuration are found before the model loads (exit 2); anything that goes wrong later is one line
naming the fix (exit 1); ``--debug`` shows the traceback instead. Every string from a user, a dataset or
a model is printed through ``grpo_kit.support.terminal`` (no markup, no escape sequences). Model
"tiny" (``--set model=tiny``) is grpo_kit.models.tiny_model(): a random 2-layer Llama for trying the
plumbing in seconds.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from grpo_kit.cli.catalogue import cmd_doctor, cmd_losses, cmd_new, cmd_recipes, cmd_rewards
from grpo_kit.cli.common import (
    EXIT_FAILED,
    EXIT_USAGE,
    RunError,
    UsageError,
    debugging,
    parse_overrides,
    parse_value,
)
from grpo_kit.cli.parser import build_parser
from grpo_kit.cli.train import cmd_preflight, cmd_train
from grpo_kit.cli.trained import cmd_eval, cmd_export, cmd_generate
from grpo_kit.support.terminal import (
    install_plain_warnings,
    markup_safe,
    quiet_bitsandbytes_kernels_notice,
)

__all__ = ["COMMANDS", "UsageError", "build_parser", "main", "parse_overrides", "parse_value"]

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
    "new": cmd_new,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``grpo-kit``; returns the exit status."""
    from rich.console import Console

    console = Console(stderr=False)
    quiet_bitsandbytes_kernels_notice()  # before peft imports bitsandbytes
    install_plain_warnings()  # warnings name reward functions and their errors: text, not terminal commands
    argv = list(sys.argv[1:] if argv is None else argv)
    from grpo_kit.support.interrupts import guard_stdout

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
        if debugging(args):
            raise
        return EXIT_USAGE
    except RunError as error:
        console.print(f"[red]error:[/] {markup_safe(error)}", highlight=False, soft_wrap=True)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
