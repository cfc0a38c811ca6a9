"""A run, planned: the recipe with its overrides, the run folder and the path's config, every check made
before a model loads and nothing written (:func:`plan_run` -> :class:`RunPlan`).

    plan = plan_run("smoltldr-length-small", overrides={"model": "tiny"}, max_steps=3)   # every check, no model

Run folders cannot be mixed: a folder that already holds a run is refused unless the plan resumes it (with the
configuration its checkpoint stored) or moves it aside (``--overwrite``). :func:`resume_command` is the
``grpo-kit train`` command that continues a run exactly. The path's config built here (``GRPOLoopConfig`` for the
standalone loop, TRL's ``GRPOConfig`` for the TRL and Unsloth paths, built once, after ``import unsloth`` on the
latter) is the very object that trains: ``execute`` hands ``plan.path_config`` to the trainer, which checks and
builds nothing again. A recipe with an environment has its training rows loaded and the environments played
here, once (``plan.train_dataset``, the rows it trains on).
"""

from __future__ import annotations

import functools
import os
import shlex
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_kit.config.declarations import check_setting
from grpo_kit.config.loop import to_loop_config  # re-exported: grpo_kit.runs.to_loop_config
from grpo_kit.models import TINY_MODEL
from grpo_kit.recipes.catalogue import RECIPES, Recipe, get_recipe
from grpo_kit.runs.folder import RunFolder, check_not_in_use, lock_run_folder
from grpo_kit.support.paths import check_output_dir

__all__ = [
    "DEFAULT_LOOP",
    "LOOPS",
    "RECIPE_FILE",
    "RUN_FLAGS",
    "RunPlan",
    "default_output_dir",
    "plan_run",
    "prepare_run_dir",
    "resolve_run_dir",
    "resume_command",
    "to_loop_config",
]

LOOPS = ("standalone", "trl", "unsloth")
#: The loop a run uses unless told otherwise: the readable loop, proven equal to TRL.
DEFAULT_LOOP = "standalone"

#: The ``grpo-kit train`` flags that change what a run does or writes around its recipe, with their defaults
#: (``eval_prompts`` None: the recipe's own). A run stores the ones it ran with (``run_config.json``, every
#: checkpoint), and a resume replays them: a flag given again wins, except ``eval_prompts``, which must stay the
#: run's (the comparison after training pairs the prompts evaluated before it).
RUN_FLAGS: dict[str, Any] = {
    "samples": 4,
    "no_merge": False,
    "eval_prompts": None,
    "keep_best": False,
    "gguf": None,
    "preflight": False,
    "force": False,
}


@dataclass
class RunPlan:
    """Everything decided (and checked) before a model loads."""

    recipe: Recipe
    loop: str  # standalone | trl | unsloth
    output_dir: Path
    # The checkpoint folder the run continues from (resolve_run_dir's answer, handed to the trainer as it is);
    # None: a fresh run.
    resume: Path | None = None
    # GRPOLoopConfig (standalone) or GRPOConfig (trl, unsloth): built and checked once here, the object that trains
    path_config: Any = None
    # recipe name, small, overrides, loop, max_steps, and the run's flags (RUN_FLAGS, every one resolved)
    invocation: dict[str, Any] = field(default_factory=dict)
    set_aside: Path | None = None  # --overwrite: where execute() moves the run already in output_dir
    gguf: str | None = None  # the GGUF type to export, checked available before training
    # A --resume of a folder whose run stopped before its first checkpoint: it starts again from step 0 (the
    # folder's leftovers moved aside to set_aside); the CLI says so.
    restarted: bool = False
    # What execute() is doing now ("loading", "training", "evaluation after training", "export", ...):
    # an interruption outside training is reported with it.
    phase: str = "planned"
    folder_lock: Any = None  # execute(): the ExitStack holding the run folder's lock (grpo_kit.runs.folder)
    # A recipe with an environment: the training rows the environments were played on while planning,
    # which execute() trains on (loaded once); None otherwise (execute loads them).
    train_dataset: Any = None

    def run_config(self) -> dict[str, Any]:
        """What identifies this run, stored in ``run_config.json`` and every checkpoint: the arguments it was
        planned with (``invocation``) and the resolved recipe and loop, which a resume must match."""
        from grpo_kit.config.stored import jsonable_config

        return {
            "invocation": jsonable_config(self.invocation),
            "recipe": jsonable_config(self.recipe),
            "loop": self.loop,
        }

    @property
    def flags(self) -> dict[str, Any]:
        """The run's flags (``RUN_FLAGS``' names), as given or replayed from the stored run."""
        return self.invocation.get("flags", dict(RUN_FLAGS))

    def resume_command(self) -> str:
        """The ``grpo-kit train`` command that continues this run exactly: ``--resume`` alone, since the run folder
        stores everything else (the invocation and its flags)."""
        from grpo_kit.recipes.reward_specs import imports_only_installed_rewards

        own_code = not all(imports_only_installed_rewards(r.name, r.kwargs) for r in self.recipe.rewards)
        return resume_command(self.output_dir, trust_reward_code=own_code)


# --- before the model loads -------------------------------------------------------------------------


def default_output_dir(recipe_name: str) -> Path:
    return Path("outputs") / f"{recipe_name}-{time.strftime('%Y%m%d-%H%M%S')}"


def _newest_run_with_checkpoint(recipe_name: str) -> Path | None:
    runs = sorted(Path("outputs").glob(f"{recipe_name}-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    return next((r for r in runs if RunFolder(r).latest_checkpoint() is not None), None)


def resolve_run_dir(
    recipe_name: str | None, output_dir: str | Path | None, resume: Any
) -> tuple[Path, Path | None]:
    """(output folder, the checkpoint a resume continues from: None for a fresh run). Which checkpoint is
    :func:`grpo_kit.artifacts.checkpoint.resume_target`'s answer, worked out here once: the plan keeps that
    folder, and the trainer is handed it. ``recipe_name`` names the folder when none is given (a fresh run's
    default folder; with ``resume=True``, the newest run of that recipe holding a checkpoint)."""
    from grpo_kit.artifacts.checkpoint import resume_target

    if resume is None:
        return Path(output_dir) if output_dir else default_output_dir(recipe_name), None
    folder = Path(output_dir) if output_dir else None
    if folder is None and resume is True:
        folder = _newest_run_with_checkpoint(recipe_name)
        if folder is None:
            raise FileNotFoundError(
                f"resume: no outputs/{recipe_name}-*/checkpoint-N found; pass an output folder "
                "(--output-dir RUN) or a checkpoint."
            )
    checkpoint = resume_target(folder, resume)  # a missing checkpoint: the line names the fix
    return folder or checkpoint.parent, checkpoint


def _path_config(recipe: Recipe, loop: str, output_dir: Path, checkpoint: Path | None) -> tuple[Any, Any]:
    """Every check the chosen path makes before a model is loaded, once. Returns (the path's config, the one
    that trains; the training rows the environments were played on, or None: the recipe has none)."""
    from grpo_kit.config.trainers import check_path_settings, check_recipe_fields

    if loop == "standalone":
        bf16, bf16_sampling = recipe.training.get("bf16"), recipe.training.get("bf16_sampling")
        if bf16 or bf16_sampling:  # emulated bf16 is slower than fp32: refused here, before the model loads
            from grpo_kit.support.hardware import cuda_available, require_native_bf16

            device = "cuda" if cuda_available() else "cpu"  # (only asked when needed: it imports torch)
            require_native_bf16(device, bf16=bool(bf16), bf16_sampling=bool(bf16_sampling))
        if recipe.quantization == "8bit":
            raise ValueError(
                f"recipe {recipe.name!r} uses 8bit quantization, which the standalone loop does not do (it "
                "takes quantization=4bit, QLoRA); use --loop trl."
            )
        if recipe.tools:
            raise ValueError(
                f"recipe {recipe.name!r} trains with tools ({recipe.tools!r}); the standalone loop has "
                "no tool loop. Use --loop trl (TRL's GRPOTrainer runs the tools)."
            )
        if recipe.environment:
            raise ValueError(
                f"recipe {recipe.name!r} trains in an environment ({recipe.environment!r}); the standalone "
                "loop has no tool loop. Use --loop trl (TRL's GRPOTrainer plays the environments)."
            )
    if recipe.sees_images and loop != "trl":  # a choice: images go through TRL's VLM path only
        raise ValueError(
            f"recipe {recipe.name!r} trains on images; the {loop} loop is text-only here. Use --loop trl "
            "(TRL's GRPOTrainer VLM path: the processor as processing_class)."
        )
    if loop != "standalone":
        from grpo_kit.trainers.builder import refuse_guided_sampling

        refuse_guided_sampling(recipe, path="TRL" if loop == "trl" else "Unsloth")
    # A setting the path would drop is refused here, naming the path that applies it (path_settings).
    check_path_settings(recipe.training, loop, where=f"recipe {recipe.name!r}")
    check_recipe_fields(recipe, loop, where=f"recipe {recipe.name!r}")  # warmup_sft: standalone and trl
    if loop == "standalone":
        with warnings.catch_warnings():
            # what is left of the fields only TRL has is what the loop does anyway (path_settings.LOOP_BEHAVES_AS)
            warnings.simplefilter("ignore", UserWarning)
            return to_loop_config(recipe, output_dir=str(output_dir), resume_from_checkpoint=checkpoint), None
    from grpo_kit.runs.held_out import training_dataset
    from grpo_kit.support.hardware import detect_precision

    # The environments are played on the rows the run will train on (loaded here only for a recipe with an
    # environment; execute() trains on these very rows).
    rows = functools.partial(training_dataset, recipe)
    if loop == "trl":
        from grpo_kit.trainers import trl_path

        precision = detect_precision()
        training = trl_path.resolve_training(recipe, output_dir=output_dir, precision=precision)
        dataset = trl_path.check_settings(recipe, training, precision=precision, load_dataset=rows)
        return trl_path.build_grpo_config(training), dataset
    from grpo_kit.trainers import unsloth_path

    # What needs a GPU (fast_inference, 8-bit) and the packages, then `import unsloth` (its GRPOConfig is the one
    # built), the settings at this machine's precision; on a CPU the path runs on Unsloth's CPU backend.
    return unsloth_path.build_config(
        recipe, output_dir=output_dir, precision=detect_precision(), load_dataset=rows
    )


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
    trust_reward_code: bool = False,
    eval_prompts: int | None = None,
    flags: Mapping[str, Any] | None = None,
) -> RunPlan:
    """The recipe with its overrides (``loop`` may also come from ``overrides["loop"]``), the run folder and
    the path's config: every configuration mistake raises here (ValueError, TypeError, FileNotFoundError,
    FileExistsError, PermissionError, ImportError, RuntimeError, CheckpointError naming the fix), before a
    model is loaded, and nothing is written.

    Run folders cannot be mixed: a folder that already holds a run is refused unless ``resume`` (continue
    it: the configuration must be the one stored in its checkpoint; with ``recipe=None`` that stored
    configuration is taken, with ``small``/``overrides``/``loop``/``max_steps`` laid over it: ``max_steps`` may
    grow, which extends a finished run) or ``overwrite`` (:func:`execute` first moves the old run aside to
    ``<folder>.old-<timestamp>``). A ``resume=True`` of a folder whose run stopped before its first checkpoint
    starts that run again from step 0 (``plan.restarted``; its leftovers are moved aside). Also checked: the folder
    is writable and not a file, the model path is a model, and the ``gguf`` type can be written (before training,
    not after it). Reward code a replayed recipe resolves to (its recipe file's rewards, a stored ``--set
    rewards=``) is imported only with ``trust_reward_code`` (``grpo_kit.recipes.files.refuse_reward_code_of_a_run``).

    ``flags``: the run's flags (``RUN_FLAGS``; ``gguf`` and ``eval_prompts`` may also be given by keyword), None
    or absent for one not given: the plan stores them (``plan.flags``, ``run_config.json``) and a resume replays
    the stored run's. ``eval_prompts=0`` (held-out evaluation off) turns the recipe's evaluation during training
    (``eval_steps``) off too, before its config is built, as it turns the second held-out set off; ``run.json``
    then records no ``eval_steps``.
    """
    if resume is not None and overwrite:
        raise ValueError(
            "--resume continues the run in the folder and --overwrite moves it aside; choose one."
        )
    recipe, overrides, output_dir = _output_dir_applied(recipe, overrides, output_dir)
    given = {
        "recipe": recipe,
        "small": small,
        "overrides": dict(overrides or {}),
        "loop": loop,
        "max_steps": max_steps,
    }
    given_flags = dict(flags or {})
    for name, value in (("gguf", gguf), ("eval_prompts", eval_prompts)):  # their keyword spelling
        if value is not None:
            given_flags[name] = value
    run_dir = checkpoint = stored = None
    restart = resume is True and output_dir is not None and stopped_before_first_checkpoint(Path(output_dir))
    if resume is not None and recipe is None:
        # the run's own recipe, as it was started (the newest run of the default recipe when no folder is named),
        # with what is given besides --resume laid over it
        if restart:
            run_dir = Path(output_dir)
        else:
            run_dir, checkpoint = resolve_run_dir(_default_recipe_name(small), output_dir, resume)
        stored = _stored_invocation(run_dir, checkpoint)
    # what the user typed is trusted; a run folder's content not
    trusted = trust_reward_code or stored is None
    invocation = _resolve_invocation(
        **(given if stored is None else _laid_over(stored, given)), trust_reward_code=trusted
    )
    overrides = dict(invocation["overrides"])
    if invocation["max_steps"] is not None:  # None: the recipe's own length (or its epochs), never None
        overrides["max_steps"] = invocation["max_steps"]
    recipe = get_recipe(
        _invoked_recipe(invocation, trust_reward_code=trusted), small=invocation["small"], **overrides
    ).validate()
    if not trusted:  # the rewards the replay resolved to, before any of them is built
        from grpo_kit.recipes.files import refuse_reward_code_of_a_run

        refuse_reward_code_of_a_run(recipe.rewards, f"the run in {run_dir}")
    loop = invocation["loop"]
    if run_dir is None:
        run_dir, checkpoint = (
            (Path(output_dir), None) if restart else resolve_run_dir(recipe.name, output_dir, resume)
        )
    stored_flags = _stored_flags(run_dir, checkpoint) if resume is not None else None
    invocation["flags"] = _resolve_flags(given_flags, stored_flags, recipe)
    if invocation["flags"]["eval_prompts"] == 0:  # no held-out rows to evaluate, during training either
        recipe = without_evaluation_during_training(recipe)
    gguf = invocation["flags"]["gguf"]
    run_dir = check_output_dir(run_dir)
    check_not_in_use(run_dir)  # another process trains there now: refused before anything loads
    # the path's own rules first (CUDA, QLoRA, ...)
    path_config, train_dataset = _path_config(recipe, loop, run_dir, checkpoint)
    gguf = _check_model_before_loading(recipe, loop, gguf)
    plan = RunPlan(
        recipe, loop, run_dir, checkpoint, path_config, invocation, gguf=gguf, train_dataset=train_dataset
    )
    _settle_the_folder(plan, restart=restart, overwrite=overwrite)
    return plan


def _settle_the_folder(plan: RunPlan, *, restart: bool, overwrite: bool) -> None:
    """What the run folder already holds, settled before a model loads: a checkpoint is continued only by the
    configuration it stored; a run stopped before its first checkpoint (``restart``) and, with ``overwrite``, any
    other run are moved aside by ``prepare_run_dir``; a run in it otherwise is refused, naming the ways out."""
    run_dir = plan.output_dir
    if plan.resume is not None:
        _check_resumes_the_same_run(plan)
    elif restart:
        # its leftovers (run_config.json, the evaluation before training) go aside, as --overwrite's
        plan.restarted = True
        plan.set_aside = run_dir.with_name(f"{run_dir.name}.old-{time.strftime('%Y%m%d-%H%M%S')}")
    elif RunFolder(run_dir).holds_a_run():
        if not overwrite:
            raise FileExistsError(
                f"{run_dir} already holds a run ({RunFolder(run_dir).contents()}); training into it "
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


def _output_dir_applied(
    recipe: Recipe | str | None, overrides: Mapping[str, Any] | None, output_dir: str | Path | None
) -> tuple[Recipe | str | None, dict[str, Any], str | Path | None]:
    """TRL's ``output_dir`` key in a recipe file or a ``--set``, applied: it names the run folder unless
    ``output_dir`` is given (the command line wins, as with ``trl grpo``), relative to the working folder as in
    TRL, and it leaves the recipe (the folder a run went to is the run's, not its recipe's)."""
    overrides = dict(overrides or {})
    named = overrides.pop("output_dir", None)
    if isinstance(recipe, Recipe) and "output_dir" in recipe.training:
        training = dict(recipe.training)
        in_file = training.pop("output_dir")
        named = named or in_file
        recipe = recipe.replace(training=training)
    if named is not None and not isinstance(named, (str, os.PathLike)):
        raise ValueError(f"output_dir must be a folder path, got {named!r}.")
    return recipe, overrides, output_dir or named


def _default_recipe_name(small: bool) -> str:
    from grpo_kit.recipes.catalogue import DEFAULT_RECIPE

    return get_recipe(DEFAULT_RECIPE, small=small).name


def stopped_before_first_checkpoint(folder: Path) -> bool:
    """Whether ``folder`` holds a run that stopped before it wrote a checkpoint: its ``run_config.json`` is
    there (written when the run starts), no ``checkpoint-N`` and no ``run.json``. Nothing was trained; a
    ``--resume`` starts it again from step 0."""
    run = RunFolder(folder)
    return run.run_config_path.is_file() and run.latest_checkpoint() is None and not run.has_summary()


def _laid_over(stored: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The stored invocation with what was given besides ``--resume`` laid over it (``--max-steps 8`` extends a
    run, ``--set`` changes a setting, which the resume then checks against the checkpoint's)."""
    overrides = dict(given["overrides"])
    loop = given["loop"] or overrides.pop("loop", None) or stored["loop"]
    return {
        "recipe": stored["recipe"],
        "small": bool(stored["small"] or given["small"]),
        "overrides": {**stored["overrides"], **overrides},
        "loop": loop,
        "max_steps": given["max_steps"] if given["max_steps"] is not None else stored["max_steps"],
    }


def _stored_flags(folder: Path, checkpoint: Path | None) -> dict[str, Any] | None:
    """The flags the run in ``folder`` stored (``RUN_FLAGS``), as ``checkpoint`` (else the folder) has them."""
    stored = RunFolder(folder).stored_run_config(checkpoint)
    flags = (stored or {}).get("invocation", {}).get("flags")
    return dict(flags) if isinstance(flags, Mapping) else None


def _resolve_flags(
    given: Mapping[str, Any], stored: Mapping[str, Any] | None, recipe: Recipe
) -> dict[str, Any]:
    """Every flag of ``RUN_FLAGS``: the ones given (None: not given), else the stored run's, else the default. A
    resume keeps the run's held-out size: the comparison after training pairs the prompts evaluated before it."""
    given = {name: value for name, value in given.items() if value is not None}
    unknown = sorted(set(given) - set(RUN_FLAGS))
    if unknown:
        raise TypeError(f"unknown run flag(s) {', '.join(unknown)}; the flags are {', '.join(RUN_FLAGS)}.")
    stored = {name: value for name, value in (stored or {}).items() if name in RUN_FLAGS}
    if "eval_prompts" in given and "eval_prompts" in stored:

        def size(n):
            return recipe.eval_prompts if n is None else n

        if size(given["eval_prompts"]) != size(stored["eval_prompts"]):
            raise ValueError(
                f"--eval-prompts {given['eval_prompts']}: the run evaluated {size(stored['eval_prompts'])} held-out "
                "prompts before training, and the comparison after it pairs the same ones; resume without "
                "--eval-prompts."
            )
    return {**RUN_FLAGS, **stored, **given}


def _check_model_before_loading(recipe: Recipe, loop: str, gguf: str | None) -> str | None:
    """The model's own checks, from its config alone (no weights): its source, the LoRA targets against its
    architecture, images for a recipe that sees, the --gguf type. Returns the GGUF type to write, if any."""
    if recipe.model != TINY_MODEL:
        from grpo_kit.models import check_model_source

        check_model_source(recipe.model)
    if recipe.lora is not None and not recipe.trainable_parts and recipe.lora.target_modules != "all-linear":
        from grpo_kit.models import check_lora_targets, model_module_names

        names = model_module_names(recipe.model)  # the architecture from its config, no weights
        if names is not None:
            check_lora_targets(recipe.lora.to_peft_config(), names, recipe.model)
    if recipe.sees_images:
        from grpo_kit.models.vlm import check_model_takes_images

        check_model_takes_images(recipe.model)  # a text-only model is refused before it loads
    if gguf:
        from grpo_kit.export import check_gguf_quantization_available
        from grpo_kit.support.hardware import cuda_available

        # Unsloth writes its own GGUF types only on a GPU (its CPU backend needs a local llama.cpp for them).
        gguf = check_gguf_quantization_available(gguf, unsloth=loop == "unsloth" and cuda_available())
    return gguf


def without_evaluation_during_training(recipe: Recipe) -> Recipe:
    """``recipe`` without ``eval_steps`` / ``eval_strategy`` (itself when it has neither)."""
    from grpo_kit.config.rules import EVALUATION_SCHEDULE

    if not any(name in recipe.training for name in EVALUATION_SCHEDULE):
        return recipe
    return recipe.replace(training={k: v for k, v in recipe.training.items() if k not in EVALUATION_SCHEDULE})


def _resolve_invocation(
    recipe: Recipe | str | None,
    small: bool,
    overrides: Mapping[str, Any],
    loop: str | None,
    max_steps: int | None,
    trust_reward_code: bool = True,
) -> dict[str, Any]:
    """The arguments a run is planned with, every default filled in, so they can be stored and replayed
    (``trust_reward_code``: :func:`_invoked_recipe`'s)."""
    from grpo_kit.recipes.catalogue import DEFAULT_RECIPE

    overrides = dict(overrides)
    loop = loop or overrides.pop("loop", None)
    if loop is not None and loop not in LOOPS:
        raise ValueError(f"loop {loop!r}: choose one of {', '.join(LOOPS)}.")
    check_setting("max_steps", max_steps)  # the declared rule, as --set max_steps=N gets it
    recipe = recipe if recipe is not None else DEFAULT_RECIPE
    if isinstance(recipe, Mapping):  # a stored recipe file's content (run_config.json)
        recipe = _invoked_recipe({"recipe_file": recipe}, trust_reward_code=trust_reward_code)
    resolved = get_recipe(recipe, small=small, **overrides)
    loop = loop or resolved.loop or DEFAULT_LOOP  # --loop, else the path the recipe states, else the loop
    if max_steps is None:  # the recipe's own length, written out so a replay does not depend on the default
        max_steps = resolved.training.get("max_steps")
    invocation = {
        "recipe": recipe.name if isinstance(recipe, Recipe) else recipe,
        "small": bool(small),
        "overrides": overrides,
        "loop": loop,
        "max_steps": max_steps,
    }
    if isinstance(recipe, Recipe) and RECIPES.get(recipe.name) != recipe:
        from grpo_kit.recipes.files import recipe_to_dict

        # not the catalogue's: the recipe itself is stored (a replay, resume and `grpo-kit eval` read it back)
        invocation["recipe_file"] = recipe_to_dict(recipe)
    return invocation


#: The copy of a recipe file a run folder holds (``recipe_to_text``): resume and ``grpo-kit eval`` read it.
RECIPE_FILE = "recipe.yaml"


def _invoked_recipe(invocation: Mapping[str, Any], *, trust_reward_code: bool = True) -> Recipe | str:
    """The recipe an invocation names: the stored recipe file's content, else the catalogue name. Without
    ``trust_reward_code`` (a run folder's invocation) a recipe file's reward code is refused before it is imported
    (``grpo_kit.recipes.files.recipe_from_dict``)."""
    if "recipe_file" not in invocation:
        return invocation["recipe"]
    from grpo_kit.recipes.files import recipe_from_dict

    return recipe_from_dict(
        invocation["recipe_file"], where="the run's stored recipe", trust_reward_code=trust_reward_code
    )


def _stored_invocation(folder: Path, checkpoint: Path) -> dict[str, Any] | None:
    """How the run in ``folder`` was invoked, as ``checkpoint`` (else the folder) stored it; None if not stored."""
    stored = RunFolder(folder).stored_run_config(checkpoint)
    if not stored or "invocation" not in stored:
        return None
    from grpo_kit.config.stored import CREDENTIAL_PLACEHOLDER

    invocation = dict(stored["invocation"])
    invocation.pop("flags", None)  # the run's flags: _stored_flags
    if "recipe_file" in invocation:  # a recipe file's run: its stored content, not a catalogue name
        invocation["recipe"] = invocation.pop("recipe_file")
    # A credential was stored redacted: the replay goes without it (HF_TOKEN, or --set it again).
    invocation["overrides"] = {
        k: v for k, v in dict(invocation.get("overrides") or {}).items() if v != CREDENTIAL_PLACEHOLDER
    }
    return invocation


def _check_resumes_the_same_run(plan: RunPlan) -> None:
    """Resuming with another configuration would continue one run with another's settings: refuse it."""
    from grpo_kit.artifacts.checkpoint import CheckpointError, config_diff, drop_extended_max_steps
    from grpo_kit.loop.bookkeeping import BOOKKEEPING_FIELDS

    stored = RunFolder(plan.output_dir).stored_run_config(plan.resume)
    if stored is None:
        return  # a run from before run folders stored their configuration
    current = plan.run_config()
    diff = config_diff(
        {"recipe": stored["recipe"], "loop": stored["loop"]},
        {"recipe": current["recipe"], "loop": current["loop"]},
    )
    bookkeeping = {f"recipe.training.{name}" for name in BOOKKEEPING_FIELDS} | {"recipe.description"}
    diff = {name: values for name, values in diff.items() if name not in bookkeeping}
    drop_extended_max_steps(diff, "recipe.training.max_steps", plan.resume)  # --max-steps N extends a run
    if diff:
        listed = "; ".join(f"{name}: {old!r} (stored) -> {new!r} (now)" for name, (old, new) in diff.items())
        raise CheckpointError(
            f"--resume: {plan.output_dir} was trained with another configuration ({listed}). "
            "Resume with `--output-dir DIR --resume` alone to take the stored configuration, "
            "or start a new run in another --output-dir."
        )


def resume_command(output_dir: Path, *, trust_reward_code: bool = False) -> str:
    """``grpo-kit train --output-dir RUN --resume``: the command that continues the run in ``output_dir`` exactly.
    ``--resume`` alone replays everything the run stored (its invocation and its flags, ``RUN_FLAGS``), so the
    command is the same for every run, and it is printed when the run starts (a SIGKILL prints nothing).
    ``trust_reward_code``: the run imports reward code of its own, which a resume imports only when told."""
    words = ["grpo-kit", "train", "--output-dir", os.fspath(output_dir), "--resume"]
    if trust_reward_code:
        words.append("--trust-reward-code")
    return " ".join(shlex.quote(w) for w in words)


def prepare_run_dir(plan: RunPlan) -> None:
    """Create the run folder (moving an old run aside first when the plan says so) and its run_config.json.

    Inside :func:`execute` the folder is then locked for the rest of the run (``grpo_kit.runs.folder``): a
    second process is refused naming this one's PID, and a run that appeared there since the plan was made
    is not overwritten."""
    if plan.set_aside is not None:
        check_not_in_use(plan.output_dir)  # never move a running run aside
        plan.output_dir.rename(plan.set_aside)
    plan.output_dir.mkdir(parents=True, exist_ok=True)
    if plan.folder_lock is not None:
        plan.folder_lock.enter_context(lock_run_folder(plan.output_dir))
        if plan.resume is None and RunFolder(plan.output_dir).holds_a_run():
            raise FileExistsError(
                f"{plan.output_dir} received a run from another process after this one was planned "
                f"({RunFolder(plan.output_dir).contents()}); choose another --output-dir, or --resume it."
            )
    if plan.resume is None:
        RunFolder(plan.output_dir).write_run_config(plan.run_config())
    if "recipe_file" in plan.invocation:
        from grpo_kit.recipes.files import recipe_to_text

        # the recipe as it runs, every --set and --max-steps applied (a resume that extends the run too):
        # `--config RUN/recipe.yaml` starts this run again
        (plan.output_dir / RECIPE_FILE).write_text(recipe_to_text(plan.recipe), encoding="utf-8")
