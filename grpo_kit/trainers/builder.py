"""One ``GRPOTrainer`` builder for the TRL and Unsloth paths: they differ only in how the model is loaded
(and patched), which a :class:`ModelBackend` says; the GRPOConfig, the checks, the trainer assembly, the
metrics/Ctrl-C/finite-weights callbacks, ``training_args.bin`` without credentials and the :class:`~grpo_kit.artifacts.result.RunResult` are shared here.

    backend = ModelBackend(name="TRL", precision=..., check=..., load=..., peft_config=...)
    trainer = assemble_grpo_trainer(recipe, backend, output_dir="runs/x", learning_rate=1e-5)
    result = run_trainer(trainer, output_dir="runs/x", title="TRL")

A run's settings are checked once (:func:`check_config`) and its GRPOConfig is built once (:func:`grpo_config`,
the only place grpo-kit builds one): by ``grpo_kit.runs.plan_run`` for a planned run, whose config then trains as
it is (``assemble_grpo_trainer(..., args=plan.path_config)`` checks and builds nothing again), else by
:func:`assemble_grpo_trainer` itself.

``assemble_grpo_trainer(..., trainer_kwargs={"tools": [...], "environment_factory": ...})`` forwards extra
``GRPOTrainer`` arguments unchanged; a recipe's ``tools="calculator"`` fills ``tools`` (``grpo_kit.rollout.tool_sets``),
and the tools, ``max_tool_calling_iterations`` and the tokenizer's tool template are checked before the model
loads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_kit.artifacts.result import RunResult
from grpo_kit.config.rules import (
    LOOP_ONLY_FIELDS,
    check_grpo_settings,
    check_report_to,
    check_training_fields,
    evaluation_settings,
    training_value,
    vllm_server_command,
)
from grpo_kit.recipes.catalogue import Recipe, get_recipe
from grpo_kit.rollout.tool_sets import check_tool_setup, prepare_tool_tokenizer
from grpo_kit.support.hardware import Precision
from grpo_kit.trainers.run import resume_point, run_trainer  # re-exported: running what is built here
from grpo_kit.trainers.vllm_colocate_cpu import cpu_colocate_generation

__all__ = [
    "ModelBackend",
    "assemble_grpo_trainer",
    "build_and_train",
    "check_config",
    "check_training",
    "grpo_config",
    "grpo_config_kwargs",
    "refuse_guided_sampling",
    "resume_point",
    "run_trainer",
    "save_args_without_credentials",
    "tool_trainer_kwargs",
    "use_one_line_progress",
    "world_size",
]


@dataclass(frozen=True)
class ModelBackend:
    """What differs between the TRL and the Unsloth path: everything about the model."""

    name: str  # "TRL" | "Unsloth": shown in the reward curve's title
    precision: Callable[[], Precision]  # the precision to train in
    check: Callable[
        [Recipe, dict[str, Any], Precision], None
    ]  # path-only checks; may import/patch; no weights
    load: Callable[
        [Recipe, Precision, Any], tuple[Any, Any]
    ]  # (recipe, precision, GRPOConfig) -> (model, tok)
    peft_config: Callable[[Recipe, Any], Any]  # LoRA for GRPOTrainer(peft_config=...), or None


def world_size() -> int:
    """The number of training processes (torchrun / accelerate set WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def grpo_config_kwargs(
    recipe: Recipe,
    *,
    output_dir: str | os.PathLike,
    max_steps: int | None = None,
    report_to: str | Sequence[str] | None = None,
    precision: Precision | None = None,
    **overrides: Any,
) -> dict[str, Any]:
    """The GRPOConfig keyword arguments for this run: ``recipe.training`` and reward weights, then precision
    flags (given explicitly: TRL's config would default to bf16), then the arguments and ``overrides``
    (GRPOConfig names), which win. Asking for one 16-bit mode switches the other off."""
    training: dict[str, Any] = dict(recipe.grpo_training())
    if precision is not None:
        training.update(precision.trainer_kwargs())
    training["output_dir"] = os.fspath(output_dir)
    if report_to is not None or "report_to" not in training:  # the recipe's (--set report_to=...) otherwise
        training["report_to"] = "none" if report_to is None else report_to
    if max_steps is not None:
        training["max_steps"] = max_steps
    for wanted, other in (("fp16", "bf16"), ("bf16", "fp16")):
        if overrides.get(wanted) and other not in overrides:
            training[other] = False
    training.update(overrides)
    for name in LOOP_ONLY_FIELDS:  # the standalone loop's own settings; GRPOTrainer has no such field
        training.pop(name, None)
    return training


def check_training(training: Mapping[str, Any], *, world_size: int = 1) -> None:
    """The checks every GRPOTrainer path makes on its GRPOConfig keyword arguments (``grpo_kit.config.rules``)."""
    check_training_fields({k: v for k, v in training.items() if k != "reward_weights"}, where="training")
    check_grpo_settings(training, world_size=world_size)
    check_report_to(training_value(training, "report_to"))


def refuse_guided_sampling(recipe: Recipe, train_dataset: Any = None, *, path: str = "TRL") -> None:
    """Refuse, before anything loads, a recipe or dataset that samples from a ``sampling_prompt`` (guided
    sampling, ``Recipe.guided_sampling``): GRPOTrainer samples from and trains on one ``prompt`` and would
    pass the column to the reward functions unread. Only the standalone loop applies it."""
    from datasets_prep import SAMPLING_PROMPT

    columns = getattr(train_dataset, "column_names", None) or []
    if recipe.guided_sampling or SAMPLING_PROMPT in columns:
        raise ValueError(
            f"recipe {recipe.name!r}: the completions are drawn from a {SAMPLING_PROMPT!r} column and trained "
            f"under 'prompt' (guided sampling), which only the standalone loop does; the {path} path would "
            "sample from 'prompt'. Use --loop standalone, or drop worked_example_guides."
        )


def check_config(
    recipe: Recipe,
    training: Mapping[str, Any],
    backend_check: Callable[[Recipe, Any, Precision], None] | None,
    precision: Precision | None,
    *,
    world_size: int = 1,
    trainer_kwargs: Mapping[str, Any] | None = None,
    tokenizer: Any = None,
    dataset: Any = None,
    load_dataset: Callable[[], Any] | None = None,
) -> tuple[dict[str, Any], Any]:
    """The one check pass on a run's GRPOConfig keyword arguments, before the model loads: the shared rules
    (:func:`check_training`), the tools, the environments (played on the training rows' first rows: ``dataset``,
    else ``load_dataset()``, default ``recipe.load_dataset``, loaded only for a recipe with an environment) and
    ``max_tool_calling_iterations`` (``grpo_kit.rollout.tool_sets.check_tool_setup``; a given ``tokenizer`` gets its tool
    template), the vLLM server note, then the path's own checks (``backend_check`` at ``precision``; skipped
    when either is None). Returns (the ``GRPOTrainer`` keyword arguments with ``tools`` /
    ``environment_factory`` resolved, the dataset: given, loaded here to play the environments, or None)."""
    check_training(training, world_size=world_size)
    if recipe.environment is not None and dataset is None:
        dataset = (load_dataset or recipe.load_dataset)()  # the environments are played on its first rows
    resolved = check_tool_setup(
        recipe.tools,
        recipe.tool_template,
        training,
        trainer_kwargs or {},
        tokenizer,
        environment=recipe.environment,
        dataset=dataset,
    )
    if training.get("use_vllm") and training.get("vllm_mode") == "server" and _is_main_process():
        print(server_mode_note(recipe.model, training), flush=True)  # before the hardware checks refuse
    if backend_check is not None and precision is not None:
        backend_check(recipe, training, precision)
    return resolved, dataset


def grpo_config(training: Mapping[str, Any]):
    """The GRPOConfig of ``training``: the one place grpo-kit builds one. Its own __post_init__ checks run
    here, still before the model loads; the object returned is the one that trains."""
    from trl import GRPOConfig

    scheduled = evaluation_settings(training)  # eval_steps alone -> eval_strategy="steps", written out
    if scheduled:  # TRL checks its eval batch against num_generations_eval, though its sampled evaluation
        scheduled["num_generations_eval"] = 1  # never runs: grpo_kit.runs.during_training evaluates instead
    return GRPOConfig(**{**training, **scheduled})


def assemble_grpo_trainer(
    recipe: Recipe | str,
    backend: ModelBackend,
    *,
    args: Any = None,
    model: Any = None,
    tokenizer: Any = None,
    train_dataset: Any = None,
    reward_funcs: Sequence[Callable] | None = None,
    output_dir: str | os.PathLike | None = None,
    max_steps: int | None = None,
    report_to: str | Sequence[str] | None = None,
    callbacks: Sequence[Any] | None = None,
    trainer_kwargs: Mapping[str, Any] | None = None,
    **overrides: Any,
):
    """A ready ``trl.GRPOTrainer``: settings → the check pass (:func:`check_config`: shared, then the backend's)
    → GRPOConfig (:func:`grpo_config`) → model (``backend.load`` unless ``model``/``tokenizer`` are given) →
    trainer. Nothing loads before every check passed. ``trainer_kwargs`` go to ``GRPOTrainer`` unchanged
    (``tools=``, ``environment_factory=``, ...). ``reward_funcs`` may hold reward models as TRL's do (ids, paths,
    sequence-classification models, with ``trainer_kwargs["reward_processing_classes"]``): checked here, then
    handed to TRL, which scores them.

    ``args``: a GRPOConfig already built and checked (``grpo_kit.runs.plan_run``'s ``plan.path_config``): that
    very object trains, and nothing is checked or built again (the environments were played when it was
    planned); ``output_dir``, ``max_steps``, ``report_to`` and the overrides are then its own, not arguments."""
    from grpo_kit.rollout.reward_models import as_reward_funcs

    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    refuse_guided_sampling(recipe, train_dataset, path=backend.name)
    precision = backend.precision()
    trainer_kwargs = dict(trainer_kwargs or {})
    reward_processing_classes = trainer_kwargs.pop("reward_processing_classes", None)
    if reward_funcs is not None:
        # A reward model that is not sequence-classification is refused here, before the policy loads.
        reward_funcs = as_reward_funcs(reward_funcs, reward_processing_classes)
    if args is None:
        args, trainer_kwargs, train_dataset = _checked_grpo_config(
            recipe,
            backend,
            precision,
            reward_funcs=reward_funcs,
            trainer_kwargs=trainer_kwargs,
            tokenizer=tokenizer,
            train_dataset=train_dataset,
            output_dir=output_dir,
            max_steps=max_steps,
            report_to=report_to,
            overrides=overrides,
        )
    else:
        _refuse_settings_beside_args(args, output_dir, max_steps, report_to, overrides)
        trainer_kwargs = tool_trainer_kwargs(recipe, trainer_kwargs)
        if tokenizer is not None and _uses_tools(trainer_kwargs):
            prepare_tool_tokenizer(tokenizer, recipe.tool_template)  # the given tokenizer's template
    _refuse_evaluation_without_rows(recipe, args, trainer_kwargs)
    from trl import GRPOTrainer

    model, tokenizer = _policy_and_tokenizer(
        recipe, backend, precision, args, model, tokenizer, trainer_kwargs
    )
    train_dataset = _checked_train_dataset(recipe, args, model, tokenizer, train_dataset)
    if reward_funcs is None:
        reward_funcs = recipe.build_reward_funcs(tokenizer)
    reward_funcs, reward_processing_classes = _reward_funcs_for_trl(recipe, reward_funcs, overrides)
    if reward_processing_classes is not None:
        trainer_kwargs["reward_processing_classes"] = reward_processing_classes
    peft_config = backend.peft_config(recipe, model)
    reference_like_policy(args, model, peft_config)
    with _QuietModelInitKwargsNote(), cpu_colocate_generation(args, on_cuda=precision.device == "cuda"):
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward_funcs,
            args=args,
            train_dataset=train_dataset,
            processing_class=tokenizer,
            peft_config=peft_config,
            callbacks=list(callbacks or []),
            **trainer_kwargs,
        )
    use_one_line_progress(trainer)
    save_args_without_credentials(trainer)
    return trainer


def _checked_grpo_config(
    recipe: Recipe,
    backend: ModelBackend,
    precision: Precision,
    *,
    reward_funcs: Sequence[Callable] | None,
    trainer_kwargs: dict[str, Any],
    tokenizer: Any,
    train_dataset: Any,
    output_dir: str | os.PathLike | None,
    max_steps: int | None,
    report_to: str | Sequence[str] | None,
    overrides: Mapping[str, Any],
) -> tuple[Any, dict[str, Any], Any]:
    """``build_trainer``'s settings through the check pass (:func:`check_config`) into the GRPOConfig
    (:func:`grpo_config`); returns (the GRPOConfig, the resolved ``GRPOTrainer`` keyword arguments, the dataset)."""
    training = grpo_config_kwargs(
        recipe,
        output_dir=Path(output_dir or Path("outputs") / recipe.name),
        max_steps=max_steps,
        report_to=report_to,
        precision=precision,
        **overrides,
    )
    if reward_funcs is not None and len(reward_funcs) != len(recipe.rewards):
        # The weights come from the recipe; a different number of functions needs its own weights.
        training["reward_weights"] = overrides.get("reward_weights", [1.0] * len(reward_funcs))
    trainer_kwargs, train_dataset = check_config(
        recipe,
        training,
        backend.check,
        precision,
        world_size=world_size(),
        trainer_kwargs=trainer_kwargs,
        tokenizer=tokenizer,
        dataset=train_dataset,
    )
    return grpo_config(training), trainer_kwargs, train_dataset  # TRL's own config checks, before any loading


def _uses_tools(trainer_kwargs: Mapping[str, Any]) -> bool:
    return "tools" in trainer_kwargs or "environment_factory" in trainer_kwargs


def _refuse_evaluation_without_rows(recipe: Recipe, args: Any, trainer_kwargs: Mapping[str, Any]) -> None:
    """A GRPOConfig that schedules evaluations needs the held-out rows (``eval_dataset``) grpo_kit.runs adds."""
    if (
        str(getattr(args.eval_strategy, "value", args.eval_strategy)) != "no"
        and "eval_dataset" not in trainer_kwargs
    ):
        raise ValueError(
            f"recipe {recipe.name!r}: eval_steps={args.eval_steps} evaluates its held-out rows during training, which "
            "grpo_kit.runs does (grpo-kit train; train(..., evaluate=...)); this trainer has none to evaluate. "
            "Train through grpo-kit train, or set eval_steps=None."
        )


def _policy_and_tokenizer(
    recipe: Recipe,
    backend: ModelBackend,
    precision: Precision,
    args: Any,
    model: Any,
    tokenizer: Any,
    trainer_kwargs: Mapping[str, Any],
) -> tuple[Any, Any]:
    """The policy and its tokenizer: those given, else ``backend.load``'s (a tool template on the loaded
    tokenizer); a VLM recipe's ``trainable_parts`` chosen on either."""
    if model is None:
        model, loaded_tokenizer = backend.load(recipe, precision, args)
        if tokenizer is None and _uses_tools(trainer_kwargs):
            prepare_tool_tokenizer(loaded_tokenizer, recipe.tool_template)  # the loaded tokenizer's template
        tokenizer = tokenizer or loaded_tokenizer
    elif tokenizer is None:
        raise ValueError("a model was given without its tokenizer; pass tokenizer= too.")
    if recipe.trainable_parts:  # a VLM, loaded here or handed in, trains the parts the recipe names only
        from grpo_kit.models.lora import is_peft_model
        from grpo_kit.models.vlm import select_trainable

        if not ("lm_lora" in recipe.trainable_parts and is_peft_model(model)):  # a PeftModel: chosen already
            model = select_trainable(model, recipe.trainable_parts, lora=recipe.lora, seed=args.seed)
    return model, tokenizer


def _checked_train_dataset(recipe: Recipe, args: Any, model: Any, tokenizer: Any, train_dataset: Any) -> Any:
    """The training rows (``recipe.load_dataset()`` unless given), once the completions fit the model's
    context and, for rows with images, the model takes images."""
    from grpo_kit.core.sampling import check_fits_context

    check_fits_context(model, 1, args.max_completion_length)  # before TRL allocates for 100,000 tokens
    if train_dataset is None:
        train_dataset = recipe.load_dataset()
    from datasets_prep.images import rows_have_images

    if rows_have_images(train_dataset):  # images need a processor, not a tokenizer (TRL's VLM path)
        from grpo_kit.models.vlm import check_model_takes_images

        check_model_takes_images(recipe.model, processing_class=tokenizer)
    return train_dataset


def _reward_funcs_for_trl(
    recipe: Recipe, reward_funcs: Sequence[Callable], overrides: Mapping[str, Any]
) -> tuple[list[Callable], Any]:
    """Reward models go to TRL as models with their tokenizers: TRL scores them (grpo_kit.rollout.reward_models);
    every function is bounded by ``reward_timeout``. Returns (the functions, their processing classes or None)."""
    from grpo_kit.rollout.reward_models import unwrap_for_trl
    from rewards.calling import bounded_reward_func

    reward_funcs, reward_processing_classes = unwrap_for_trl(list(reward_funcs))
    # reward_timeout (a loop field, kept out of GRPOConfig) bounds each call here too; overrunning stops the run.
    timeout = overrides.get("reward_timeout", training_value(recipe.training, "reward_timeout"))
    return [bounded_reward_func(fn, timeout) for fn in reward_funcs], reward_processing_classes


def _refuse_settings_beside_args(args, output_dir, max_steps, report_to, overrides) -> None:
    """With a built GRPOConfig (``args=``) every setting is already in it: a second one beside it would be
    dropped, so it is refused (an ``output_dir`` equal to ``args.output_dir`` is the same setting)."""
    given = sorted(overrides)
    if max_steps is not None:
        given.append("max_steps")
    if report_to is not None:
        given.append("report_to")
    if output_dir is not None and os.fspath(output_dir) != args.output_dir:
        given.append("output_dir")
    if given:
        raise TypeError(
            f"{', '.join(given)} given beside args=: the GRPOConfig already holds the run's settings; set them "
            "when it is built (plan_run overrides), or leave args out."
        )


def tool_trainer_kwargs(recipe: Recipe, trainer_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``trainer_kwargs`` with the recipe's ``tools`` (a tool-set name -> its functions) and ``environment``
    (its factory) filled in, as :func:`check_config` resolves them, without checking or playing anything
    again: for a GRPOConfig whose check pass already ran (``assemble_grpo_trainer(args=...)``)."""
    from grpo_kit.rollout.environments import resolve_environment_factory
    from grpo_kit.rollout.tool_sets import resolve_tools

    kwargs = dict(trainer_kwargs)
    tools = resolve_tools(kwargs.get("tools", recipe.tools))
    if tools is not None:
        kwargs["tools"] = tools
    if kwargs.get("environment_factory") is None and recipe.environment is not None:
        kwargs["environment_factory"] = resolve_environment_factory(recipe.environment)
    return kwargs


def build_and_train(
    recipe: Recipe | str,
    build: Callable[..., Any],
    *,
    path: str,
    args: Any = None,
    resume_from_checkpoint: str | os.PathLike | bool | None = None,
    plot: bool = True,
    evaluate: Any = None,
    **kwargs: Any,
) -> RunResult:
    """What ``trl_path.train_with_trl`` and ``unsloth_path.train_with_unsloth`` share: the run folder
    (``args.output_dir`` when a built GRPOConfig is given, else ``output_dir``, default ``outputs/<recipe>``), the
    checkpoint to resume (checked before anything loads), ``build(recipe, args=..., **kwargs)``
    (``trl_path.build_trainer`` or ``unsloth_path.build_unsloth_trainer``) and :func:`run_trainer`; ``path``
    ("TRL" | "Unsloth") titles the reward curve. The trainer is ``result.trainer``. ``evaluate``: the held-out
    evaluation ``eval_steps`` schedules
    (``grpo_kit.runs.during_training.HeldOutDuringTraining``: called with (model, step), its ``rows`` the
    ``eval_dataset`` Trainer schedules with); required when the GRPOConfig schedules one."""
    recipe = get_recipe(recipe) if isinstance(recipe, str) else recipe
    if args is not None:
        output_dir = Path(args.output_dir)
    else:
        output_dir = Path(kwargs.pop("output_dir", None) or Path("outputs") / recipe.name)
        kwargs["output_dir"] = output_dir
    resume, keep_up_to_step = resume_point(output_dir, resume_from_checkpoint)  # before anything loads
    if (
        evaluate is None
        and args is not None
        and str(getattr(args.eval_strategy, "value", args.eval_strategy)) != "no"
    ):
        raise ValueError(
            f"eval_steps={args.eval_steps}: the trainer says when to evaluate, not what; pass evaluate=fn(model, "
            "step) -> metrics (grpo_kit.runs.during_training, which grpo-kit train uses), or drop eval_steps."
        )
    if evaluate is not None:  # Trainer wants an eval_dataset to schedule evaluations: the held-out prompts
        from datasets import Dataset

        trainer_kwargs = dict(kwargs.pop("trainer_kwargs", None) or {})
        trainer_kwargs["eval_dataset"] = Dataset.from_dict({"prompt": [r["prompt"] for r in evaluate.rows]})
        kwargs["trainer_kwargs"] = trainer_kwargs
    from grpo_kit.evaluation.signal_watch import SignalWatch

    # the watch's settings: the recipe's, as the built GRPOConfig or the overrides beside it have them
    given = vars(args) if args is not None else kwargs
    watch = SignalWatch.from_settings(
        {
            **recipe.training,
            **{k: given[k] for k in ("max_completion_length", "logging_steps") if k in given},
            **{k: kwargs[k] for k in ("no_signal_steps", "stop_on_no_signal") if k in kwargs},
        }
    )
    trainer = build(recipe, args=args, **kwargs)
    return run_trainer(
        trainer,
        output_dir=output_dir,
        resume=resume,
        keep_up_to_step=keep_up_to_step,
        title=f"{recipe.name} ({path})",
        plot=plot,
        evaluate=evaluate,
        watch=watch,
    )


@contextlib.contextmanager
def _credentials_removed(args) -> Iterator[None]:
    """``args`` (a GRPOConfig) with every credential field (``hub_token``) set to None for a moment."""
    from grpo_kit.config.stored import is_credential_field

    held = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(args)
        if is_credential_field(f.name) and getattr(args, f.name) is not None
    }
    for name in held:
        setattr(args, name, None)
    try:
        yield
    finally:
        for name, value in held.items():
            setattr(args, name, value)


def save_args_without_credentials(trainer) -> None:
    """Trainer pickles its whole ``args`` into every checkpoint's ``training_args.bin`` (and the Hub push
    does again), ``hub_token`` included. Both run with the credential fields emptied; the trainer keeps
    them for its own Hub calls."""
    for name in ("_save", "_push_from_checkpoint"):
        original = getattr(trainer, name, None)
        if original is None:
            continue

        def without(*args, _original=original, **kwargs):
            with _credentials_removed(trainer.args):
                return _original(*args, **kwargs)

        setattr(trainer, name, without)


def reference_like_policy(args, model, peft_config) -> None:
    """The reference model (β > 0, full fine-tune: TRL loads a second copy) in the policy's dtype and attention
    implementation, as TRL 1.16 builds it. TRL 1.15 loads it from ``args.model_init_kwargs`` only, which
    default to fp32: a bf16 policy would be compared with an fp32 reference (twice the memory, and KL measured
    across precisions). So the two keys are set there, unless the user set them; with LoRA (the adapter
    disabled is the reference) or β = 0 there is no reference model and nothing changes."""
    from peft import PeftModel

    if not args.beta or peft_config is not None or isinstance(model, PeftModel):
        return
    kwargs = dict(args.model_init_kwargs or {})
    kwargs.setdefault("dtype", model.dtype)
    attention = getattr(model.config, "_attn_implementation", None)
    if attention is not None:
        kwargs.setdefault("attn_implementation", attention)
    args.model_init_kwargs = kwargs


class _QuietModelInitKwargsNote:
    """TRL 1.15 logs that ``model_init_kwargs`` are ignored for an instantiated policy; it still builds the
    reference model from them (:func:`reference_like_policy`), so that one misleading line is filtered."""

    _TEXT = "but your model is already instantiated"

    def filter(self, record) -> bool:
        return self._TEXT not in record.getMessage()

    def __enter__(self):
        import logging

        self._logger = logging.getLogger("trl.trainer.grpo_trainer")
        self._logger.addFilter(self)
        return self

    def __exit__(self, *exc) -> None:
        self._logger.removeFilter(self)


def server_mode_note(model: str, training: Mapping[str, Any]) -> str:
    """What ``vllm_mode="server"`` needs first: the exact ``vllm serve`` command for the recipe's model (an alias
    such as ``smollm2-135m-instruct`` becomes its Hub id), and where the trainer will look for it."""
    from grpo_kit.models import ALIASES

    host = training.get("vllm_server_host", "0.0.0.0")
    port = training.get("vllm_server_port", 8000)
    command = vllm_server_command(ALIASES.get(model, model), port=port)
    return (
        f"vllm_mode='server': the trainer connects to a vLLM server at {host}:{port}. Start it first, on GPUs "
        f"the trainer does not use (docs/distributed.md):\n  {command}"
    )


def _is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def use_one_line_progress(trainer) -> None:
    """The standalone loop's progress on this path too: one line per logged step (``step 3/24 · reward -12.5 ·
    loss 0.0012 · 4.9 s/step · ETA 1m 48s``, ``grpo_kit.support.reporting.PlainProgress``), in place of
    transformers' tqdm bar and its Python-dict line per log (``ProgressCallback``, ``PrinterCallback``) and of its
    IPython widget (``NotebookProgressCallback``, picked whenever ``marimo`` has been imported, which draws nothing in
    marimo and crashed ``on_train_end`` after an interrupted run). The logs themselves go to metrics.jsonl
    (``grpo_kit.trainers.run``). ``disable_tqdm=True`` prints nothing."""
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from grpo_kit.support.reporting import PlainProgress

    for callback in list(trainer.callback_handler.callbacks):
        if isinstance(callback, (PrinterCallback, ProgressCallback)) or (
            type(callback).__name__
            in ("NotebookProgressCallback", "OneLineProgress")  # (calling it twice: one)
        ):
            trainer.remove_callback(callback)

    class OneLineProgress(TrainerCallback):
        def __init__(self) -> None:
            self.lines: PlainProgress | None = None

        def on_train_begin(self, args, state, control, **kwargs):
            if not args.disable_tqdm and state.is_world_process_zero:
                self.lines = PlainProgress(start_step=state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            training_step = logs and (
                "loss" in logs or "reward" in logs
            )  # not an evaluation's, not the summary
            if self.lines is not None and training_step and "train_runtime" not in logs:
                self.lines.update(state.global_step, state.max_steps, logs)

    trainer.add_callback(OneLineProgress())
