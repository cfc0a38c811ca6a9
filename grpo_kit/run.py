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
import json
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_kit.recipes import Recipe, get_recipe
from grpo_kit.result import RunResult

__all__ = [
    "DEFAULT_LOOP",
    "LOOPS",
    "TINY_MODEL",
    "RunOutcome",
    "RunPlan",
    "base_model_name",
    "execute",
    "held_out",
    "load_adapter",
    "load_model",
    "plan_run",
    "run_paths",
    "to_loop_config",
    "train_on_path",
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
        raise ValueError(f"{', '.join(unknown)} are not GRPOLoopConfig fields; choose from {', '.join(sorted(loop_fields))}")
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
            raise FileNotFoundError(f"resume {resume}: no such checkpoint folder; pass a checkpoint-N folder or "
                                    "resume the latest one (--resume without a value).")
        return (Path(output_dir) if output_dir else checkpoint.parent), checkpoint
    if output_dir:
        from grpo_kit.checkpoint import latest_checkpoint

        if latest_checkpoint(output_dir) is None:
            raise FileNotFoundError(f"resume: {output_dir} has no checkpoint-N folder; train without resuming first, "
                                    "or pass a checkpoint folder.")
        return Path(output_dir), True
    run = _newest_run_with_checkpoint(recipe_name)
    if run is None:
        raise FileNotFoundError(f"resume: no outputs/{recipe_name}-*/checkpoint-N found; pass an output folder "
                                "(--output-dir RUN) or a checkpoint.")
    return run, True


def _path_config(recipe: Recipe, loop: str, output_dir: Path, resume: Any):
    """Every check the chosen path makes before a model is loaded. Returns the path's config."""
    if loop == "standalone":
        if recipe.quantization:
            raise ValueError(f"recipe {recipe.name!r} uses {recipe.quantization} quantization, which the standalone "
                             "loop does not do; use --loop trl (QLoRA) or --loop unsloth on a GPU.")
        if recipe.tools:
            raise ValueError(f"recipe {recipe.name!r} trains with tools ({recipe.tools!r}); the standalone loop has "
                             "no tool loop. Use --loop trl (TRL's GRPOTrainer runs the tools).")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # fields only TRL has (optim, ...) are listed in run.json
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


def plan_run(recipe: Recipe | str, *, small: bool = False, overrides: Mapping[str, Any] | None = None,
             loop: str | None = None, max_steps: int | None = None, output_dir: str | Path | None = None,
             resume: Any = None) -> RunPlan:
    """The recipe with its overrides (``loop`` may also come from ``overrides["loop"]``), the run folder and
    the path's config: every configuration mistake raises here (ValueError, TypeError, FileNotFoundError,
    ImportError, RuntimeError naming the fix), before a model is loaded."""
    overrides = dict(overrides or {})
    loop = loop or overrides.pop("loop", None) or DEFAULT_LOOP
    if loop not in LOOPS:
        raise ValueError(f"loop {loop!r}: choose one of {', '.join(LOOPS)}.")
    if max_steps is not None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}.")
        overrides["max_steps"] = max_steps
    recipe = get_recipe(recipe, small=small, **overrides).validate()
    run_dir, resume = resolve_run_dir(recipe.name, output_dir, resume)
    return RunPlan(recipe, loop, run_dir, resume, _path_config(recipe, loop, run_dir, resume))


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


def run_paths(source: Path) -> tuple[Path | None, Path | None]:
    """(adapter folder, model folder) found in ``source`` (a run folder, an adapter or a model folder)."""
    source = Path(source)
    if (source / "adapter" / "adapter_config.json").is_file():
        return source / "adapter", (source / "merged" if (source / "merged" / "config.json").is_file() else None)
    if (source / "adapter_config.json").is_file():
        return source, None
    if (source / "config.json").is_file():
        return None, source
    raise FileNotFoundError(f"{source} holds no adapter (adapter_config.json, adapter/) and no model (config.json); "
                            "pass a `grpo-kit train` run folder, an adapter folder or a model folder.")


def base_model_name(source: Path, adapter_dir: Path, base: str | None = None) -> str:
    """Which base model the adapter belongs to: ``base``, else the run's run.json, else adapter_config.json."""
    if base:
        return base
    for run_json in (Path(source) / "run.json", Path(adapter_dir).parent / "run.json"):
        if run_json.is_file():
            return json.loads(run_json.read_text())["model"]
    name = json.loads((Path(adapter_dir) / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if name:
        return name
    raise ValueError(f"cannot tell which base model the adapter in {adapter_dir} belongs to; pass --base MODEL.")


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


# --- the run -------------------------------------------------------------------------------------------


def train_on_path(plan: RunPlan, model: Any, tokenizer: Any, dataset: Any, reward_funcs: list) -> RunResult:
    """Train ``model`` on the plan's path (standalone loop or TRL); the result's ``model`` is the trained one."""
    if plan.loop == "standalone":
        from grpo_kit import loop

        return loop.train(model, tokenizer, dataset, reward_funcs, plan.path_config,
                          reward_weights=plan.recipe.reward_weights)
    from grpo_kit import trl_path

    return trl_path.train(plan.recipe, model=model, tokenizer=tokenizer, train_dataset=dataset,
                          reward_funcs=reward_funcs, output_dir=plan.output_dir, resume_from_checkpoint=plan.resume,
                          save_final=False)


def _nothing(_message: str):
    return contextlib.nullcontext()


def execute(plan: RunPlan, *, samples: int = 4, merge: bool = True, gguf: str | None = None,
            status: Callable[[str], Any] = _nothing, preflight: Callable[..., dict | None] | None = None,
            evaluate: Callable[..., dict | None] | None = None) -> RunOutcome:
    """Run the plan into its folder. ``samples``: held-out prompts answered before and after; ``merge``:
    write the merged 16-bit model; ``gguf``: also a GGUF of that type; ``status(message)``: a context
    manager shown while a phase runs (the CLI passes ``console.status``). An interrupted run returns
    right after training (``outcome.result.interrupted``), without samples, exports or run.json."""
    from grpo_kit import samples as samples_mod

    recipe = plan.recipe
    if plan.loop == "unsloth":
        from grpo_kit import unsloth_path

        return RunOutcome(plan, unsloth_path.train(recipe, output_dir=plan.output_dir,
                                                   resume_from_checkpoint=plan.resume))
    started = time.perf_counter()
    plan.output_dir.mkdir(parents=True, exist_ok=True)
    max_tokens = int(recipe.training.get("max_completion_length", 64))
    with status("loading model and data…"):
        model, tokenizer = load_model(recipe)
        dataset = recipe.load_dataset()
        reward_funcs = recipe.build_reward_funcs(tokenizer)
        prompts, columns = held_out(recipe, samples)
    checks = preflight(plan, model, tokenizer, dataset, reward_funcs) if preflight else None
    with status("answers before training…"):
        before = samples_mod.generate_answers(model, tokenizer, prompts, max_new_tokens=max_tokens)

    result = train_on_path(plan, model, tokenizer, dataset, reward_funcs)
    if result.interrupted:
        return RunOutcome(plan, result)
    model = result.model
    train_seconds = time.perf_counter() - started

    from grpo_kit.export import save_adapter, save_merged

    reports = []
    with status("answers after training, exports…"):
        after = samples_mod.generate_answers(model, tokenizer, prompts, max_new_tokens=max_tokens)
        pairs = samples_mod.before_after(prompts, before, after, reward_funcs=reward_funcs,
                                         reward_weights=recipe.reward_weights, columns=columns)
        samples_mod.write_samples(pairs, plan.output_dir,
                                  title=f"{recipe.name}: before / after {result.global_step} GRPO steps")
        if recipe.lora is not None:
            reports.append(save_adapter(model, tokenizer, plan.output_dir / "adapter"))
        if merge:
            reports.append(save_merged(model, tokenizer, plan.output_dir / "merged"))
        if gguf:
            from grpo_kit.export import save_gguf

            source = plan.output_dir / "merged" if merge else model
            reports.append(save_gguf(source, plan.output_dir / f"model-{gguf}.gguf", gguf, tokenizer=tokenizer))
    evaluation = evaluate(plan, model, tokenizer, reward_funcs) if evaluate else None
    rewards = [r["reward"] for r in result.log_history if r.get("reward") is not None]
    summary = {
        "recipe": recipe.name, "loop": plan.loop, "model": recipe.model, "steps": result.global_step,
        "train_seconds": round(train_seconds, 1), "total_seconds": round(time.perf_counter() - started, 1),
        "reward_first_step": rewards[0] if rewards else None, "reward_last_step": rewards[-1] if rewards else None,
        "samples_mean_reward_before": samples_mod.mean_reward(pairs, "before"),
        "samples_mean_reward_after": samples_mod.mean_reward(pairs, "after"),
        "exports": [{"kind": r.kind, "path": str(r.path), "size_bytes": r.size_bytes, "verified": r.verified}
                    for r in reports],
        "training": dict(recipe.training),
    }
    if checks is not None:
        summary["preflight"] = checks
    if evaluation is not None:
        summary["evaluation"] = evaluation
    (plan.output_dir / "run.json").write_text(json.dumps(summary, indent=2, default=str))
    return RunOutcome(plan, result, summary, reports)
