"""A training run folder, once: recipe → checks → model → answers before → train on a path → answers after →
export → ``run.json``. The CLI (``grpo-kit train``) and the lessons call these functions.

    plan = plan_run("smoltldr-length-small", overrides={"model": "tiny"}, max_steps=3)   # every check, no model
    outcome = execute(plan)                                                               # the run folder

A run folder holds ``metrics.jsonl`` (TRL's metric names), ``reward_curve.png``, ``checkpoint-N/``,
``adapter/`` (LoRA + tokenizer), ``merged/`` (16-bit, tokenizer beside it), ``samples.md``/``samples.json``
(answers to held-out prompts before and after training) and ``run.json`` (what ran, how long, the exports).

Two hooks are reserved for the preflight and evaluation rooms: ``execute(plan, preflight=fn, evaluate=fn)``
calls ``preflight(plan, model, tokenizer, dataset, reward_funcs)`` before training and ``evaluate(plan,
model, tokenizer, reward_funcs)`` after it; a dict either returns lands in ``run.json`` under
``"preflight"`` / ``"evaluation"``.

Model ``"tiny"`` is ``grpo_kit.models.tiny_model()``: a random 2-layer Llama for trying the plumbing in seconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import shlex
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_kit.held_out import evaluate_held_out, held_out_rows, training_dataset
from grpo_kit.path_settings import applied_settings
from grpo_kit.paths import check_output_dir
from grpo_kit.recipes import Recipe, get_recipe
from grpo_kit.result import RunResult

__all__ = [
    "DEFAULT_LOOP",
    "LOOPS",
    "TINY_MODEL",
    "PreflightNoGo",
    "RunOutcome",
    "RunPlan",
    "base_model_name",
    "evaluate_held_out",
    "evaluation_summary",
    "execute",
    "held_out",
    "held_out_rows",
    "load_adapter",
    "load_base",
    "load_model",
    "plan_run",
    "preflight_check",
    "preflight_hook",
    "prepare_run_dir",
    "resume_command",
    "run_paths",
    "to_loop_config",
    "train_on_path",
    "validate_run_inputs",
    "write_run_config",
]

LOOPS = ("standalone", "trl", "unsloth")
#: The loop a run uses unless told otherwise: the readable loop, proven equal to TRL.
DEFAULT_LOOP = "standalone"
TINY_MODEL = "tiny"


@dataclass
class RunPlan:
    """Everything decided (and checked) before a model loads."""

    recipe: Recipe
    loop: str  # standalone | trl | unsloth
    output_dir: Path
    resume: Any = None  # None | True | a checkpoint folder
    path_config: Any = None  # GRPOLoopConfig (standalone) or GRPOConfig (trl); None for unsloth
    invocation: dict[str, Any] = field(default_factory=dict)  # recipe name, small, overrides, loop, max_steps
    set_aside: Path | None = None  # --overwrite: where execute() moves the run already in output_dir
    gguf: str | None = None  # the GGUF type to export, checked available before training
    # The CLI flags that change what the run does or writes besides the plan (samples, no_merge,
    # eval_prompts, preflight, force): replayed by resume_command().
    flags: dict[str, Any] = field(default_factory=dict)
    # What execute() is doing now ("loading", "training", "evaluation after training", "export", ...):
    # an interruption outside training is reported with it.
    phase: str = "planned"
    folder_lock: Any = None  # execute(): the ExitStack holding the run folder's lock (grpo_kit.run_folder)

    def run_config(self) -> dict[str, Any]:
        """What identifies this run, stored in ``run_config.json`` and every checkpoint: the arguments it was
        planned with (``invocation``) and the resolved recipe and loop, which a resume must match."""
        from grpo_kit.checkpoint import jsonable_config

        return {
            "invocation": jsonable_config(self.invocation),
            "recipe": jsonable_config(self.recipe),
            "loop": self.loop,
        }

    def resume_command(self) -> str:
        """The ``grpo-kit train`` command that continues this run exactly (every flag it was planned with)."""
        flags = {**self.flags, "gguf": self.gguf} if self.gguf else self.flags
        return resume_command(self.invocation, self.output_dir, flags)


@dataclass
class RunOutcome:
    """What :func:`execute` produced."""

    plan: RunPlan
    result: RunResult
    summary: dict[str, Any] = field(default_factory=dict)  # the content of run.json ({} when interrupted)
    reports: list[Any] = field(default_factory=list)  # grpo_kit.export reports

    @property
    def verified(self) -> bool:
        return all(r.verified for r in self.reports)


# --- before the model loads -------------------------------------------------------------------------


def to_loop_config(recipe: Recipe | str, **overrides: Any):
    """A ``grpo_kit.loop.GRPOLoopConfig`` from the recipe's training fields with the same names.

    GRPOConfig fields the standalone loop has no counterpart for (``optim``, ...) are left out with a
    warning that names them; ``overrides`` are applied last and must be GRPOLoopConfig fields.
    """
    from grpo_kit.loop import GRPOLoopConfig

    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    loop_fields = {f.name for f in dataclasses.fields(GRPOLoopConfig) if f.init}
    unknown = sorted(set(overrides) - loop_fields)
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)} are not GRPOLoopConfig fields; choose from {', '.join(sorted(loop_fields))}"
        )
    values = recipe.grpo_training()
    kept = {k: v for k, v in values.items() if k in loop_fields}
    dropped = sorted(k for k in values if k not in loop_fields)
    if dropped:
        warnings.warn(
            f"recipe {recipe.name!r}: the standalone loop has no {', '.join(dropped)}; they are ignored "
            "(use --loop trl for the full GRPOConfig).",
            UserWarning,
            stacklevel=2,
        )
    kept.update(overrides)
    return GRPOLoopConfig(**kept)


def default_output_dir(recipe_name: str) -> Path:
    return Path("outputs") / f"{recipe_name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _newest_run_with_checkpoint(recipe_name: str) -> Path | None:
    from grpo_kit.checkpoint import latest_checkpoint

    runs = sorted(Path("outputs").glob(f"{recipe_name}-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    return next((r for r in runs if r.is_dir() and latest_checkpoint(r) is not None), None)


def resolve_run_dir(recipe_name: str, output_dir: str | Path | None, resume: Any) -> tuple[Path, Any]:
    """(output folder, resume value for the trainer: None | True | checkpoint path)."""
    if resume is None:
        return Path(output_dir) if output_dir else default_output_dir(recipe_name), None
    if resume is not True:
        checkpoint = Path(resume)
        if not checkpoint.is_dir():
            raise FileNotFoundError(
                f"resume {resume}: no such checkpoint folder; pass a checkpoint-N folder or "
                "resume the latest one (--resume without a value)."
            )
        return (Path(output_dir) if output_dir else checkpoint.parent), checkpoint
    if output_dir:
        from grpo_kit.checkpoint import latest_checkpoint

        if latest_checkpoint(output_dir) is None:
            raise FileNotFoundError(
                f"resume: {output_dir} has no checkpoint-N folder; train without resuming first, "
                "or pass a checkpoint folder."
            )
        return Path(output_dir), True
    run = _newest_run_with_checkpoint(recipe_name)
    if run is None:
        raise FileNotFoundError(
            f"resume: no outputs/{recipe_name}-*/checkpoint-N found; pass an output folder "
            "(--output-dir RUN) or a checkpoint."
        )
    return run, True


def _path_config(recipe: Recipe, loop: str, output_dir: Path, resume: Any):
    """Every check the chosen path makes before a model is loaded. Returns the path's config."""
    from grpo_kit.path_settings import check_path_settings

    if loop == "standalone":
        if recipe.quantization:
            raise ValueError(
                f"recipe {recipe.name!r} uses {recipe.quantization} quantization, which the standalone "
                "loop does not do; use --loop trl (QLoRA) or --loop unsloth on a GPU."
            )
        if recipe.tools:
            raise ValueError(
                f"recipe {recipe.name!r} trains with tools ({recipe.tools!r}); the standalone loop has "
                "no tool loop. Use --loop trl (TRL's GRPOTrainer runs the tools)."
            )
    # A setting the path would drop is refused here, naming the path that applies it (path_settings).
    check_path_settings(recipe.training, loop, where=f"recipe {recipe.name!r}")
    if loop == "standalone":
        with warnings.catch_warnings():
            # what is left of the fields only TRL has is what the loop does anyway (path_settings.LOOP_BEHAVES_AS)
            warnings.simplefilter("ignore", UserWarning)
            return to_loop_config(recipe, output_dir=str(output_dir), resume_from_checkpoint=resume)
    if loop == "trl":
        from grpo_kit import trl_path
        from grpo_kit.hardware import detect_precision

        precision = detect_precision()
        training = trl_path.resolve_training(recipe, output_dir=output_dir, precision=precision)
        trl_path.check_settings(recipe, training, precision=precision)
        return trl_path.build_grpo_config(training)
    from grpo_kit.hardware import require_cuda

    require_cuda("--loop unsloth", "Use --loop trl (or standalone) on this machine.")
    return None


def plan_run(
    recipe: Recipe | str | None = None,
    *,
    small: bool = False,
    overrides: Mapping[str, Any] | None = None,
    loop: str | None = None,
    max_steps: int | None = None,
    output_dir: str | Path | None = None,
    resume: Any = None,
    overwrite: bool = False,
    gguf: str | None = None,
) -> RunPlan:
    """The recipe with its overrides (``loop`` may also come from ``overrides["loop"]``), the run folder and
    the path's config: every configuration mistake raises here (ValueError, TypeError, FileNotFoundError,
    FileExistsError, PermissionError, ImportError, RuntimeError, CheckpointError naming the fix), before a
    model is loaded, and nothing is written.

    Run folders cannot be mixed: a folder that already holds a run is refused unless ``resume`` (continue
    it: the configuration must be the one stored in its checkpoint, and with ``recipe=None`` and no
    overrides that stored configuration is taken) or ``overwrite`` (:func:`execute` first moves the old run
    aside to ``<folder>.old-<timestamp>``). Also checked: the folder is writable and not a file, the model
    path is a model, and the ``gguf`` type can be written (before training, not after it).
    """
    if resume is not None and overwrite:
        raise ValueError(
            "--resume continues the run in the folder and --overwrite moves it aside; choose one."
        )
    given = {
        "recipe": recipe,
        "small": small,
        "overrides": dict(overrides or {}),
        "loop": loop,
        "max_steps": max_steps,
    }
    if resume is not None and recipe is None and not (small or overrides or loop or max_steps):
        given = _stored_invocation(output_dir, resume) or given  # --resume alone: the run as it was started
    invocation = _resolve_invocation(**given)
    overrides = dict(invocation["overrides"])
    if invocation["max_steps"] is not None:  # None: the recipe's own length (or its epochs), never None
        overrides["max_steps"] = invocation["max_steps"]
    recipe = get_recipe(invocation["recipe"], small=invocation["small"], **overrides).validate()
    loop = invocation["loop"]
    run_dir, resume = resolve_run_dir(recipe.name, output_dir, resume)
    run_dir = check_output_dir(run_dir)
    from grpo_kit.run_folder import check_not_in_use

    check_not_in_use(run_dir)  # another process trains there now: refused before anything loads
    path_config = _path_config(recipe, loop, run_dir, resume)  # the path's own rules first (CUDA, QLoRA, ...)
    if recipe.model != TINY_MODEL:
        from grpo_kit.models import check_model_source

        check_model_source(recipe.model)
    if gguf:
        from grpo_kit.export import check_gguf_quantization_available

        gguf = check_gguf_quantization_available(gguf, unsloth=loop == "unsloth")
    plan = RunPlan(recipe, loop, run_dir, resume, path_config, invocation, gguf=gguf)
    if resume is not None:
        _check_resumes_the_same_run(plan)
    elif _holds_a_run(run_dir):
        if not overwrite:
            raise FileExistsError(
                f"{run_dir} already holds a run ({_run_contents(run_dir)}); training into it "
                "would mix two runs. Continue it with --resume, pass --overwrite to move it "
                f"aside to {run_dir}.old-<timestamp>, or choose another --output-dir."
            )
        if Path.cwd().resolve().is_relative_to(run_dir.resolve()):
            raise ValueError(
                f"--overwrite moves the run in {run_dir} aside, and that is the folder you are in "
                f"({run_dir.resolve().name}); run from its parent folder with --output-dir "
                f"{run_dir.resolve().name} --overwrite, or choose another --output-dir."
            )
        plan.set_aside = run_dir.with_name(f"{run_dir.name}.old-{time.strftime('%Y%m%d-%H%M%S')}")
    return plan


def _resolve_invocation(
    recipe: Recipe | str | None,
    small: bool,
    overrides: Mapping[str, Any],
    loop: str | None,
    max_steps: int | None,
) -> dict[str, Any]:
    """The arguments a run is planned with, every default filled in, so they can be stored and replayed."""
    from grpo_kit.recipes import DEFAULT_RECIPE

    overrides = dict(overrides)
    loop = loop or overrides.pop("loop", None) or DEFAULT_LOOP
    if loop not in LOOPS:
        raise ValueError(f"loop {loop!r}: choose one of {', '.join(LOOPS)}.")
    if max_steps is not None and (
        isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1
    ):
        raise ValueError(f"max_steps must be at least 1, got {max_steps}.")
    recipe = recipe if recipe is not None else DEFAULT_RECIPE
    if max_steps is None:  # the recipe's own length, written out so a replay does not depend on the default
        max_steps = get_recipe(recipe, small=small, **overrides).training.get("max_steps")
    return {
        "recipe": recipe.name if isinstance(recipe, Recipe) else recipe,
        "small": bool(small),
        "overrides": overrides,
        "loop": loop,
        "max_steps": max_steps,
    }


_RUN_FILES = ("run_config.json", "run.json", "metrics.jsonl")


def _holds_a_run(run_dir: Path) -> bool:
    """True when ``run_dir`` holds anything a run writes (a run's files or checkpoints)."""
    return run_dir.is_dir() and (
        any((run_dir / name).exists() for name in _RUN_FILES) or any(run_dir.glob("checkpoint-*"))
    )


def _run_contents(run_dir: Path) -> str:
    names = sorted(p.name for p in run_dir.iterdir())
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _checkpoint_of(output_dir: Path, resume: Any) -> Path | None:
    from grpo_kit.checkpoint import latest_checkpoint

    return Path(resume) if resume not in (None, True) else latest_checkpoint(output_dir)


def _stored_run_config(output_dir: Path, resume: Any) -> dict[str, Any] | None:
    """The run configuration the checkpoint to resume stored, else the run folder's ``run_config.json``."""
    from grpo_kit.checkpoint import read_checkpoint_config

    checkpoint = _checkpoint_of(output_dir, resume)
    stored = read_checkpoint_config(checkpoint) if checkpoint is not None else None
    if stored is None or "recipe" not in stored:
        stored = read_checkpoint_config(output_dir)  # the same file format, written by execute()
    return stored if stored is not None and "recipe" in stored else None


def _stored_invocation(output_dir: str | Path | None, resume: Any) -> dict[str, Any] | None:
    if output_dir is None and resume in (None, True):
        return None  # the newest run of the default recipe is found by resolve_run_dir
    folder = Path(output_dir) if output_dir else Path(resume).parent
    stored = _stored_run_config(folder, resume)
    if not stored or "invocation" not in stored:
        return None
    from grpo_kit.checkpoint import CREDENTIAL_PLACEHOLDER

    invocation = dict(stored["invocation"])
    # A credential was stored redacted: the replay goes without it (HF_TOKEN, or --set it again).
    invocation["overrides"] = {
        k: v for k, v in dict(invocation.get("overrides") or {}).items() if v != CREDENTIAL_PLACEHOLDER
    }
    return invocation


def _check_resumes_the_same_run(plan: RunPlan) -> None:
    """Resuming with another configuration would continue one run with another's settings: refuse it."""
    from grpo_kit.checkpoint import CheckpointError, config_diff
    from grpo_kit.run_context import BOOKKEEPING_FIELDS

    stored = _stored_run_config(plan.output_dir, plan.resume)
    if stored is None:
        return  # a run from before run folders stored their configuration
    current = plan.run_config()
    diff = config_diff(
        {"recipe": stored["recipe"], "loop": stored["loop"]},
        {"recipe": current["recipe"], "loop": current["loop"]},
    )
    bookkeeping = {f"recipe.training.{name}" for name in BOOKKEEPING_FIELDS} | {"recipe.description"}
    diff = {name: values for name, values in diff.items() if name not in bookkeeping}
    if diff:
        listed = "; ".join(f"{name}: {old!r} (stored) -> {new!r} (now)" for name, (old, new) in diff.items())
        raise CheckpointError(
            f"--resume: {plan.output_dir} was trained with another configuration ({listed}). "
            "Resume with `--output-dir DIR --resume` alone to take the stored configuration, "
            "or start a new run in another --output-dir."
        )


#: How :func:`resume_command` spells the CLI flags a run was started with (``RunPlan.flags``).
_FLAG_WORDS = {
    "samples": "--samples",
    "eval_prompts": "--eval-prompts",
    "gguf": "--gguf",
    "no_merge": "--no-merge",
    "preflight": "--preflight",
    "force": "--force",
}


def resume_command(
    invocation: Mapping[str, Any], output_dir: Path, flags: Mapping[str, Any] | None = None
) -> str:
    """``grpo-kit train … --resume`` with every flag of ``invocation`` spelled out, shell-quoted, then the
    ``flags`` that change what the run does or writes (``{"samples": 0, "no_merge": True, "gguf": "f16"}``):
    a value of None or False is a flag that was not given. Credential settings (``hub_token``) are left out,
    since the command is printed."""
    from grpo_kit.checkpoint import is_credential_field

    words = ["grpo-kit", "train", "--recipe", str(invocation["recipe"])]
    if invocation.get("small"):
        words.append("--small")
    words += ["--loop", invocation["loop"]]
    if invocation.get("max_steps") is not None:
        words += ["--max-steps", str(invocation["max_steps"])]
    words += ["--output-dir", os.fspath(output_dir), "--resume"]
    for key, value in invocation.get("overrides", {}).items():
        if is_credential_field(key):  # never printed: pass it again with --set, or set HF_TOKEN
            continue
        items = (
            value.items() if key in ("lora", "unsloth") and isinstance(value, Mapping) else [(None, value)]
        )
        for sub, v in items:
            name = f"{key}.{sub}" if sub else key
            words += ["--set", f"{name}={v if isinstance(v, str) else json.dumps(v)}"]
    for name, value in (flags or {}).items():
        if value is None or value is False:
            continue
        words += [_FLAG_WORDS[name]] if value is True else [_FLAG_WORDS[name], str(value)]
    return " ".join(shlex.quote(w) for w in words)


def write_run_config(plan: RunPlan) -> Path:
    """``<run folder>/run_config.json``: the plan's :meth:`RunPlan.run_config` and its sha256."""
    from grpo_kit.checkpoint import CONFIG_FILE, config_hash, jsonable_config

    stored = jsonable_config(plan.run_config())
    path = plan.output_dir / CONFIG_FILE
    path.write_text(json.dumps({"config": stored, "sha256": config_hash(stored)}, indent=2))
    return path


def prepare_run_dir(plan: RunPlan) -> None:
    """Create the run folder (moving an old run aside first when the plan says so) and its run_config.json.

    Inside :func:`execute` the folder is then locked for the rest of the run (``grpo_kit.run_folder``): a
    second process is refused naming this one's PID, and a run that appeared there since the plan was made
    is not overwritten."""
    from grpo_kit.run_folder import check_not_in_use, lock_run_folder

    if plan.set_aside is not None:
        check_not_in_use(plan.output_dir)  # never move a running run aside
        plan.output_dir.rename(plan.set_aside)
    plan.output_dir.mkdir(parents=True, exist_ok=True)
    if plan.folder_lock is not None:
        plan.folder_lock.enter_context(lock_run_folder(plan.output_dir))
        if plan.resume is None and _holds_a_run(plan.output_dir):
            raise FileExistsError(
                f"{plan.output_dir} received a run from another process after this one was planned "
                f"({_run_contents(plan.output_dir)}); choose another --output-dir, or --resume it."
            )
    if plan.resume is None:
        write_run_config(plan)


# --- models, prompts, run folders ---------------------------------------------------------------------


def load_model(recipe: Recipe) -> tuple[Any, Any]:
    """The recipe's model and tokenizer (``"tiny"``: the random test model), with its LoRA adapter."""
    if recipe.model == TINY_MODEL:
        from grpo_kit.models import tiny_model

        model, tokenizer = tiny_model(seed=0)
    else:
        from grpo_kit.models import load_model as load

        # quantization="4bit" (QLoRA) fails here, before loading, when there is no CUDA.
        model, tokenizer = load(recipe.model, quantization=recipe.quantization)
    if recipe.lora is not None:
        from grpo_kit.models import add_lora

        # LoRA's A matrices start random: seed them, or the same recipe and seed give another run each time.
        model = add_lora(model, recipe.lora.to_peft_config(), seed=int(recipe.training.get("seed", 42)))
    return model, tokenizer


def held_out(recipe: Recipe, n: int) -> tuple[list[Any], dict[str, list]]:
    """:func:`grpo_kit.held_out.held_out_rows` as (prompts, other columns for the reward functions)."""
    rows = held_out_rows(recipe, n)
    columns = {k: [r[k] for r in rows] for k in (rows[0] if rows else {}) if k != "prompt"}
    return [r["prompt"] for r in rows], columns


def run_paths(source: Path) -> tuple[Path | None, Path | None]:
    """(adapter folder, model folder) found in ``source`` (a run folder, an adapter or a model folder)."""
    source = Path(source)
    if (source / "adapter" / "adapter_config.json").is_file():
        return source / "adapter", (
            source / "merged" if (source / "merged" / "config.json").is_file() else None
        )
    if (source / "adapter_config.json").is_file():
        return source, None
    if (source / "config.json").is_file():
        return None, source
    raise FileNotFoundError(
        f"{source} holds no adapter (adapter_config.json, adapter/) and no model (config.json); "
        "pass a `grpo-kit train` run folder, an adapter folder or a model folder."
    )


def base_model_name(source: Path, adapter_dir: Path, base: str | None = None) -> str:
    """Which base model the adapter belongs to: ``base``, else the run's run.json, else adapter_config.json."""
    if base:
        return base
    for run_json in (Path(source) / "run.json", Path(adapter_dir).parent / "run.json"):
        if run_json.is_file():
            from grpo_kit.run_folder import read_run_json

            return read_run_json(run_json)["model"]
    name = json.loads((Path(adapter_dir) / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if name:
        return name
    raise ValueError(
        f"cannot tell which base model the adapter in {adapter_dir} belongs to; pass --base MODEL."
    )


def load_base(base_name: str) -> Any:
    """The base model called ``base_name`` (``"tiny"``: the random test model, seed 0), without LoRA."""
    if base_name == TINY_MODEL:
        from grpo_kit.models import tiny_model

        return tiny_model(seed=0)[0]
    from grpo_kit.models import load_model as load

    return load(base_name)[0]


def load_adapter(adapter_dir: Path, base_name: str) -> tuple[Any, Any]:
    """Base model + the adapter in ``adapter_dir`` (tokenizer from the adapter folder)."""
    from peft import PeftModel
    from transformers import AutoTokenizer

    from grpo_kit.models import prepare_tokenizer

    if base_name == TINY_MODEL:
        from grpo_kit.models import tiny_model

        base, _ = tiny_model(seed=0)
    else:
        from grpo_kit.models import load_model as load

        base, _ = load(base_name)
    tokenizer = prepare_tokenizer(AutoTokenizer.from_pretrained(adapter_dir))
    return PeftModel.from_pretrained(base, adapter_dir), tokenizer


# --- held-out evaluation and pre-flight (issue 10) ------------------------------------------------------


def evaluation_summary(before: Any, after: Any, files: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """What run.json keeps of an evaluation: the headline comparison (metric, means, CI, verdict; "reward hack
    suspected" with its signs when the answers collapsed, as in the report card)."""
    from grpo_kit.reward_hacking import judge_headline

    c, signs = judge_headline(before, after)
    return {
        "num_prompts": before.num_prompts,
        "metric": c.metric,
        "before": c.before,
        "after": c.after,
        "mean_diff": c.mean_diff,
        "ci_low": c.ci_low,
        "ci_high": c.ci_high,
        "level": c.level,
        "verdict": c.verdict,
        "reward_hack_signs": signs,
        "headline": c.summary() + (f" ({'; '.join(signs)})" if signs else ""),
        "files": {name: str(path) for name, path in (files or {}).items()},
    }


class PreflightNoGo(RuntimeError):
    """Pre-flight found that training would not learn; ``report`` holds the findings and their fixes."""

    def __init__(self, report: Any):
        super().__init__("pre-flight says no-go:\n" + report.summary())
        self.report = report


def validate_run_inputs(plan: RunPlan) -> None:
    """The checks that need no model: the dataset has a ``prompt`` column and no reward function raises
    on a probe completion (``RewardFunctionError`` names the function and row)."""
    from grpo_kit.preflight import validate_inputs

    validate_inputs(plan.recipe.load_dataset(), plan.recipe.build_reward_funcs(None))


def preflight_check(
    plan: RunPlan, model: Any, tokenizer: Any, dataset: Any, reward_funcs: list, *, num_prompts: int = 8
):
    """``grpo_kit.preflight.check_recipe`` for the run's recipe (what step 1 will sample; a recipe's tools rolled
    out with them)."""
    from grpo_kit.preflight import check_recipe

    return check_recipe(
        plan.recipe, model, tokenizer, dataset, num_prompts=num_prompts, reward_funcs=reward_funcs
    )


def preflight_hook(
    *, force: bool = False, num_prompts: int = 8, on_report: Callable[[Any], Any] | None = None
) -> Callable[..., dict]:
    """A ``preflight=`` hook for :func:`execute`: runs :func:`preflight_check`, hands the report to
    ``on_report`` and raises :class:`PreflightNoGo` on a no-go unless ``force``."""

    def hook(plan: RunPlan, model: Any, tokenizer: Any, dataset: Any, reward_funcs: list) -> dict:
        report = preflight_check(plan, model, tokenizer, dataset, reward_funcs, num_prompts=num_prompts)
        if on_report is not None:
            on_report(report)
        if not report.go and not force:
            raise PreflightNoGo(report)
        return {**report.to_dict(), "forced": not report.go}

    return hook


# --- the run -------------------------------------------------------------------------------------------


def train_on_path(plan: RunPlan, model: Any, tokenizer: Any, dataset: Any, reward_funcs: list) -> RunResult:
    """Train ``model`` on the plan's path (standalone loop or TRL); the result's ``model`` is the trained one."""
    if plan.loop == "standalone":
        from grpo_kit import loop

        return loop.train(
            model,
            tokenizer,
            dataset,
            reward_funcs,
            plan.path_config,
            reward_weights=plan.recipe.reward_weights,
            run_config=plan.run_config(),
        )
    from grpo_kit import trl_path

    return trl_path.train(
        plan.recipe,
        model=model,
        tokenizer=tokenizer,
        train_dataset=dataset,
        reward_funcs=reward_funcs,
        output_dir=plan.output_dir,
        resume_from_checkpoint=plan.resume,
        save_final=False,
    )


def _greedy_answers(report: Any, model: Any, tokenizer: Any, prompts: list, recipe: Recipe) -> list[Any]:
    """The greedy answers to ``prompts``: the evaluation's when there is one (generate once), else the one
    decoder's (``samples.answer_completions``, the recipe's budget and chat template arguments)."""
    from grpo_kit import samples as samples_mod

    if report is not None:
        return [text.strip() for text in report.completions[: len(prompts)]]
    t = recipe.training
    return samples_mod.answer_completions(
        model,
        tokenizer,
        prompts,
        max_new_tokens=int(t.get("max_completion_length", 64)),
        chat_template_kwargs=t.get("chat_template_kwargs"),
    )


def _reward_or_none(value: float) -> float | None:
    """An evaluation's per-prompt reward as samples.md shows it: NaN (no function scored it) -> None."""
    return None if math.isnan(value) else value


def _nothing(_message: str):
    return contextlib.nullcontext()


def _holding_the_folder_lock(run: Callable[..., RunOutcome]) -> Callable[..., RunOutcome]:
    """``run(plan, ...)`` with the run folder locked from its creation to the end (one run per folder):
    ``prepare_run_dir`` takes the lock into ``plan.folder_lock``, released when ``run`` returns or raises."""

    @functools.wraps(run)
    def locked(plan: RunPlan, **options: Any) -> RunOutcome:
        with contextlib.ExitStack() as held:
            plan.folder_lock = held
            try:
                return run(plan, **options)
            finally:
                plan.folder_lock = None

    return locked


@_holding_the_folder_lock
def execute(
    plan: RunPlan,
    *,
    samples: int = 4,
    merge: bool = True,
    gguf: str | None = None,
    status: Callable[[str], Any] = _nothing,
    preflight: Callable[..., dict | None] | None = None,
    evaluate: Callable[..., dict | None] | None = None,
    eval_prompts: int | None = None,
) -> RunOutcome:
    """Run the plan into its folder. ``eval_prompts``: held-out prompts evaluated before and after (default
    the recipe's ``eval_prompts``; 0: no evaluation) into the report card (``eval.json``, ``report.md``,
    ``report_card.png``), whose greedy answers also fill ``samples.md``. ``samples``: held-out prompts
    answered before and after; ``merge``:
    write the merged 16-bit model; ``gguf``: also a GGUF of that type; ``status(message)``: a context
    manager shown while a phase runs (the CLI passes ``console.status``). An interrupted run returns
    right after training (``outcome.result.interrupted``), without samples, exports or run.json.
    ``plan.phase`` says what was running when it stopped."""
    from grpo_kit import samples as samples_mod

    recipe = plan.recipe
    if plan.loop == "unsloth":
        from grpo_kit import unsloth_path

        prepare_run_dir(plan)
        return RunOutcome(
            plan, unsloth_path.train(recipe, output_dir=plan.output_dir, resume_from_checkpoint=plan.resume)
        )
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise ValueError(f"samples must be an int >= 0 (0: no before/after answers), got {samples!r}.")
    n_eval = recipe.eval_prompts if eval_prompts is None else eval_prompts
    if n_eval < 0:
        raise ValueError(f"eval_prompts must be >= 0 (0 turns evaluation off), got {n_eval}.")
    started = time.perf_counter()
    plan.phase = "loading"
    with status("loading model and data…"):
        model, tokenizer = load_model(recipe)
        dataset = training_dataset(recipe)  # less the rows reserved for evaluation, if any
        reward_funcs = recipe.build_reward_funcs(tokenizer)
        # samples are the first rows of the evaluation; none of them is a training prompt
        rows = held_out_rows(recipe, max(n_eval, samples), training=dataset)
        n_eval = min(n_eval, len(rows))
        prompts = [r["prompt"] for r in rows[:samples]]
        columns = {k: [r[k] for r in rows[:samples]] for k in (rows[0] if rows else {}) if k != "prompt"}
    plan.phase = "pre-flight"
    checks = preflight(plan, model, tokenizer, dataset, reward_funcs) if preflight else None
    prepare_run_dir(plan)  # only now: a model, data or pre-flight failure leaves no folder behind
    plan.phase = "evaluation before training"
    eval_started = time.perf_counter()
    with status(
        f"evaluating {n_eval} held-out prompts before training…" if n_eval else "answers before training…"
    ):
        eval_before = (
            evaluate_held_out(recipe, model, tokenizer, reward_funcs, rows[:n_eval]) if n_eval else None
        )
        before = _greedy_answers(eval_before, model, tokenizer, prompts, recipe)
    eval_seconds = time.perf_counter() - eval_started

    plan.phase = "training"
    result = train_on_path(plan, model, tokenizer, dataset, reward_funcs)
    plan.phase = "evaluation after training"
    if result.interrupted:
        return RunOutcome(plan, result)
    model = result.model
    train_seconds = time.perf_counter() - started - eval_seconds  # loading + training, not the evaluation

    from grpo_kit.export import save_adapter, save_merged

    reports = []
    eval_started = time.perf_counter()
    with status(
        f"evaluating {n_eval} held-out prompts after training…" if n_eval else "answers after training…"
    ):
        eval_after = (
            evaluate_held_out(recipe, model, tokenizer, reward_funcs, rows[:n_eval]) if n_eval else None
        )
        after = _greedy_answers(eval_after, model, tokenizer, prompts, recipe)
    built_in_evaluation = None
    if eval_after is not None:
        from grpo_kit.report_card import write_report_card

        files = write_report_card(
            plan.output_dir,
            eval_before,
            eval_after,
            log_history=result.log_history,
            title=f"{recipe.name}: held-out before / after {result.global_step} GRPO steps",
            measures=recipe.measures,
        )
        built_in_evaluation = evaluation_summary(eval_before, eval_after, files)
    eval_seconds += time.perf_counter() - eval_started
    plan.phase = "export"
    with status("exports…"):
        if eval_after is not None:  # the evaluation already scored these answers (with their token ids)
            pairs = [
                samples_mod.Sample(p, b, a, _reward_or_none(rb), _reward_or_none(ra))
                for p, b, a, rb, ra in zip(
                    prompts, before, after, eval_before.per_prompt["reward"], eval_after.per_prompt["reward"]
                )
            ]
        else:
            pairs = samples_mod.before_after(
                prompts,
                before,
                after,
                reward_funcs=reward_funcs,
                reward_weights=recipe.reward_weights,
                columns=columns,
            )
        samples_mod.write_samples(
            pairs, plan.output_dir, title=f"{recipe.name}: before / after {result.global_step} GRPO steps"
        )
        if recipe.lora is not None:
            reports.append(save_adapter(model, tokenizer, plan.output_dir / "adapter"))
        if merge:
            reports.append(save_merged(model, tokenizer, plan.output_dir / "merged"))
        gguf = gguf or plan.gguf
        gguf_error = None
        if gguf:
            from grpo_kit.export import save_gguf

            source = plan.output_dir / "merged" if merge else model
            try:  # a failed GGUF export must not cost the run: run.json and the report card come first
                reports.append(
                    save_gguf(source, plan.output_dir / f"model-{gguf}.gguf", gguf, tokenizer=tokenizer)
                )
            except Exception as error:  # noqa: BLE001 - recorded in run.json, raised after it
                gguf_error = error
    evaluation = evaluate(plan, model, tokenizer, reward_funcs) if evaluate else built_in_evaluation
    from grpo_kit.checkpoint import jsonable_config

    rewards = [r["reward"] for r in result.log_history if r.get("reward") is not None]
    summary = {
        "recipe": recipe.name,
        "loop": plan.loop,
        "model": recipe.model,
        "steps": result.global_step,
        "train_seconds": round(train_seconds, 1),
        "total_seconds": round(time.perf_counter() - started, 1),
        "eval_seconds": round(eval_seconds, 1),
        "reward_first_step": rewards[0] if rewards else None,
        "reward_last_step": rewards[-1] if rewards else None,
        "samples": len(pairs),
        "samples_mean_reward_before": samples_mod.mean_reward(pairs, "before"),
        "samples_mean_reward_after": samples_mod.mean_reward(pairs, "after"),
        "exports": [
            {"kind": r.kind, "path": str(r.path), "size_bytes": r.size_bytes, "verified": r.verified}
            for r in reports
        ],
        # what the path applied (read back from its resolved config), not what was asked; credentials redacted
        "training": jsonable_config(applied_settings(recipe.training, plan.path_config)),
    }
    if checks is not None:
        summary["preflight"] = checks
    if evaluation is not None:
        summary["evaluation"] = evaluation
    if gguf_error is not None:
        summary["gguf_error"] = f"{type(gguf_error).__name__}: {' '.join(str(gguf_error).split())}"
    from grpo_kit.evaluate import write_atomic

    write_atomic(plan.output_dir / "run.json", json.dumps(summary, indent=2, default=str))
    plan.phase = "done"
    from grpo_kit.export.card import write_export_cards  # the cards read run.json: written after it

    write_export_cards(
        {r.path: r.kind for r in reports if r.kind in ("adapter", "merged")},
        run_dir=plan.output_dir,
        gguf_files=[r.path for r in reports if r.kind == "gguf"],
    )
    if gguf_error is not None:
        raise GGUFExportError(
            f"the run is saved in {plan.output_dir} (run.json, report card, adapter, merged model); only the "
            f"GGUF export failed. Retry it with `grpo-kit export {plan.output_dir} --gguf {gguf}`. Cause: "
            f"{type(gguf_error).__name__}: {gguf_error}"
        ) from gguf_error
    return RunOutcome(plan, result, summary, reports)


class GGUFExportError(RuntimeError):
    """Training finished and its run folder is complete (run.json included); only the GGUF export failed."""
