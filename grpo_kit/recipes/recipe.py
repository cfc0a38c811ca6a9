"""The recipe type and its rules: :class:`Recipe`, :class:`LoraSettings`, :class:`UnslothSettings`.

A :class:`Recipe` says *what* to train (model, dataset, rewards, adapter, quantization) and *how*
(``training``: a dict whose keys are TRL ``GRPOConfig`` field names, so the same dict feeds
``GRPOConfig(**training)`` in the TRL and Unsloth paths and, through ``grpo_kit.runs.to_loop_config``, the
standalone loop's ``GRPOLoopConfig``, which uses the same names where they mean the same thing).

This module holds the type, every rule a recipe is checked against when it is created
(``Recipe.__post_init__``) or planned (``Recipe.validate``), and the tables those rules read: the dataset
loaders by name (:data:`DATASET_LOADERS`), the synthetic row generators (:data:`SYNTHETIC_ROWS`), the image
datasets (:data:`IMAGE_DATASETS`), and the loader arguments that make a curriculum
(:data:`CURRICULUM_KWARGS`) or guided sampling (:data:`GUIDED_SAMPLING_KWARGS`). The named recipes
themselves, the catalogue, are data in ``grpo_kit.recipes.catalogue``, which re-exports these names.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from datasets_prep.gsm8k import check_worked_example
from datasets_prep.sft_rows import PICTURE_SFT_DATASETS, SFT_DATASETS
from datasets_prep.shipped import TRANSFER_SETS
from grpo_kit.config.declarations import LORA_DEFAULTS
from grpo_kit.config.rules import (
    LOOP_ONLY_FIELDS,
    RETIRED_TRAINING_FIELDS,
    check_training_fields,
    grpo_config_field_names,
    training_value,
)
from grpo_kit.recipes.reward_specs import REWARD_MODEL_PREFIX, RewardSpec
from grpo_kit.rollout.environments import check_environment_names
from grpo_kit.rollout.tool_sets import check_tool_names

__all__ = [
    "CURRICULUM_KWARGS",
    "DATASET_LOADERS",
    "GUIDED_SAMPLING_KWARGS",
    "IMAGE_DATASETS",
    "REWARD_MODEL_PREFIX",
    "SYNTHETIC_ROWS",
    "LoraSettings",
    "Recipe",
    "RewardSpec",
    "UnslothSettings",
    "WarmupSFT",
    "apply_overrides",
]

# Loaders in datasets_prep, by the name a recipe uses.
DATASET_LOADERS = {
    "smoltldr": "load_smoltldr",
    "gsm8k": "load_gsm8k",
    "deepmath": "load_deepmath",
    "tool_tasks": "load_tool_task_split",
    "environment_tasks": "load_environment_task_split",
    "prompts": "load_prompts",  # your own rows: a file, a folder or a Hub id (grpo_kit.recipes.files)
    "shapes": "load_shapes",
}
#: Datasets whose rows carry TRL's ``image`` column: trained on the TRL path only, by a vision-language model.
IMAGE_DATASETS = ("shapes",)
# Raw-row generators for dataset_source="synthetic" (offline, CPU-sized runs and tests).
SYNTHETIC_ROWS = {"smoltldr": "synthetic_tldr", "gsm8k": "synthetic_gsm8k"}
#: Loader arguments that make a row's prompt depend on its place in the dataset order (a curriculum), by
#: loader: gsm8k's ``worked_example_fade`` (the worked example fades out over the first rows). A recipe that
#: sets one must train the rows in order (``training["shuffle_dataset"] = False``), and the rows it evaluates
#: on are rendered without it (:attr:`Recipe.held_out_kwargs`).
CURRICULUM_KWARGS: dict[str, tuple[str, ...]] = {"gsm8k": ("worked_example_fade",)}
#: Loader arguments that give each row a ``sampling_prompt`` (``datasets_prep.SAMPLING_PROMPT``), by loader:
#: gsm8k's ``worked_example_guides`` (the worked example only in the prompt the completions are drawn from).
#: Only the standalone loop samples from another prompt than it trains on; the TRL and Unsloth paths refuse
#: such a recipe (``grpo_kit.trainers.builder.refuse_guided_sampling``), and held-out rows are rendered without it.
GUIDED_SAMPLING_KWARGS: dict[str, str] = {"gsm8k": "worked_example_guides"}


def _is_int_at_least(value: Any, minimum: int) -> bool:
    """An int (not a bool) >= ``minimum``: the rule for a recipe's counts."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


@dataclass(frozen=True)
class LoraSettings:
    """A LoRA adapter (peft ``LoraConfig`` names).

    r: the adapter rank. lora_alpha: scale numerator (the update is scaled by lora_alpha / r).
    lora_dropout: dropout on the adapter input. target_modules: "all-linear" (every linear layer
    except the output head) or a list of module names such as ["q_proj", "v_proj"]. Defaults:
    ``grpo_kit.config.declarations.LORA_DEFAULTS``.
    """

    r: int = LORA_DEFAULTS["r"]
    lora_alpha: int = LORA_DEFAULTS["lora_alpha"]
    lora_dropout: float = LORA_DEFAULTS["lora_dropout"]
    target_modules: str | tuple[str, ...] = LORA_DEFAULTS["target_modules"]

    def to_peft_config(self):
        """A ``peft.LoraConfig`` for causal-LM training."""
        from peft import LoraConfig

        targets = self.target_modules if isinstance(self.target_modules, str) else list(self.target_modules)
        return LoraConfig(
            task_type="CAUSAL_LM",
            r=self.r,
            lora_alpha=self.lora_alpha,
            lora_dropout=self.lora_dropout,
            target_modules=targets,
        )


@dataclass(frozen=True)
class UnslothSettings:
    """Arguments only the Unsloth path uses (``FastLanguageModel.from_pretrained``/``get_peft_model``).

    max_seq_length: prompt + completion tokens Unsloth and its vLLM engine reserve.
    fast_inference: generate with vLLM inside the training process. Needs a CUDA GPU: on a CPU (Unsloth's CPU
        backend) a recipe with it is refused before anything loads, naming ``--set unsloth.fast_inference=false``
        (``unsloth_path.check_machine``), never switched off quietly.
    gpu_memory_utilization: the share of GPU memory vLLM may take (lower it on out-of-memory).
    use_gradient_checkpointing: "unsloth" is Unsloth's offloading variant (longer contexts).
    random_state: the seed Unsloth uses for the adapter init.
    """

    max_seq_length: int = 1024
    fast_inference: bool = True
    gpu_memory_utilization: float = 0.6
    use_gradient_checkpointing: str | bool = "unsloth"
    random_state: int = 3407


@dataclass(frozen=True)
class WarmupSFT:
    """A supervised warm-up before GRPO (the Unsloth GRPO notebooks' "pre fine-tuning for formatting"): a few
    steps of SFT on prompt-completion rows, on the same (LoRA) model, then GRPO from the result
    (``grpo_kit.trainers.sft_warmup``: TRL's ``SFTTrainer`` on the TRL path, a plain masked cross-entropy step on the
    standalone loop; the loss is on the completion tokens only).

    dataset: a built-in set (``datasets_prep.sft_rows.SFT_DATASETS``: "shapes-captions", a vision-language
        recipe's alignment stage, 1,024 pictures each described in a sentence; "gsm8k-worked", 300 worked GSM8K
        solutions in the course's format) or a local ``.jsonl`` file (a recipe file's path, relative to it).
    columns: the file's column for ``prompt`` and for ``completion`` (``{"prompt": "question"}``); default {}:
        the columns are named ``prompt`` and ``completion``. Both text, or both chat messages.
    steps: optimizer steps (>= 1), each on ``batch_size`` rows taken in a seeded shuffled order, epoch after
        epoch. Default 30.
    learning_rate: AdamW's learning rate, constant (> 0, at most 1). Default 2e-4 (LoRA).
    batch_size: rows per step (>= 1). Default 8.
    rows: use the first this many rows of the set (>= 1), None: all. Default None.
    max_length: prompt + completion tokens kept per row (>= 16); a longer row is cut at the end. Default 512.
    """

    dataset: str = "gsm8k-worked"
    columns: Mapping[str, str] = field(default_factory=dict)
    steps: int = 30
    learning_rate: float = 2e-4
    batch_size: int = 8
    rows: int | None = None
    max_length: int = 512

    def __post_init__(self):
        where = "warmup_sft"
        if not isinstance(self.dataset, str) or not (
            self.dataset in SFT_DATASETS or self.dataset.endswith(".jsonl")
        ):
            raise ValueError(
                f"{where}.dataset={self.dataset!r}: name a built-in set ({', '.join(SFT_DATASETS)}) or a "
                ".jsonl file of prompt-completion rows."
            )
        if not isinstance(self.columns, Mapping) or not all(
            k in ("prompt", "completion") and isinstance(v, str) and v for k, v in self.columns.items()
        ):
            raise ValueError(
                f"{where}.columns={self.columns!r}: map 'prompt' and/or 'completion' to column names, e.g. "
                "{prompt: question, completion: solution}."
            )
        for name, minimum in (("steps", 1), ("batch_size", 1), ("max_length", 16)):
            if not _is_int_at_least(getattr(self, name), minimum):
                raise ValueError(f"{where}.{name}={getattr(self, name)!r}: must be an int >= {minimum}.")
        if self.rows is not None and not _is_int_at_least(self.rows, 1):
            raise ValueError(
                f"{where}.rows={self.rows!r}: must be an int >= 1 (the first rows used), or null for all."
            )
        lr = self.learning_rate
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr <= 1:
            raise ValueError(f"{where}.learning_rate={lr!r}: must be a number in (0, 1], e.g. 2e-4.")


@dataclass(frozen=True)
class Recipe:
    """A named GRPO configuration.

    name: the recipe's name (what it teaches).
    description: one paragraph for ``grpo-kit train --help`` and the docs.
    model: a ``grpo_kit.models`` alias ("smollm2-135m-instruct"), a Hub id or a local path.
    dataset: which ``datasets_prep`` loader builds the prompts (:data:`DATASET_LOADERS`): "smoltldr", "gsm8k",
        "deepmath", ..., or "prompts": your own rows (``datasets_prep.load_prompts``; a recipe file's ``dataset``).
    dataset_source: the loader's ``source``: None = the dataset's Hub id; "synthetic" = generated
        raw rows (offline; smoltldr and gsm8k only); otherwise a Hub id, a local dir or a data file.
    dataset_size: keep only this many rows (None = all). For "synthetic" it is the number generated.
    dataset_split: the split to load.
    dataset_kwargs: extra keyword arguments for the loader (e.g. smoltldr's ``instruction``, gsm8k's
        ``worked_example`` and ``worked_example_fade``, checked here). An argument of :data:`CURRICULUM_KWARGS`
        (a fade) orders the rows, so it needs ``training["shuffle_dataset"] = False`` (TRL's RepeatSampler and
        the standalone loop then take the rows in dataset order); a recipe that sets one and shuffles is
        refused, since shuffling would silently undo it.
    rewards: the reward functions and their weights, in order.
    lora: the LoRA adapter, or None for full fine-tuning.
    quantization: None, "4bit" (QLoRA, bitsandbytes NF4; CPU or CUDA, either loop) or "8bit" (--loop trl).
        Needs bitsandbytes (``grpo-kit[qlora]``).
    unsloth: settings only the Unsloth path reads.
    training: GRPOConfig fields (TRL names). ``output_dir`` is chosen by the caller, not here.
    eval_prompts: held-out prompts evaluated before and after every run (``grpo_kit.evaluation``, greedy,
        paired bootstrap CI); 32 is the fewest that tells learning from noise on the CPU recipes. 0: off.
    eval_samples: also this many seeded samples per held-out prompt at the recipe's training decoding
        (``k`` of ``grpo_kit.evaluation.evaluate``: ``mean@k``, ``pass@k/<name>``, ``accuracy@k``), the same
        seeds before and after. Default 1: greedy answers only. A task the base model already solves greedily
        (the environment recipe: 32/32) shows what training changed only in the samples it trains on.
    transfer_eval: a held-out set shipped with the package (``datasets_prep.shipped.TRANSFER_SETS``:
        "tldr-handwritten", "gsm8k-handwritten", 40 rows each) evaluated before and after as well: its first
        ``eval_prompts`` rows (both sets weigh the same, and a quick ``--eval-prompts 4`` stays quick), the
        same decoding, the same paired bootstrap, and reported beside the held-out rows (run.json's
        ``transfer_evaluation``, the report card's "held-out, written differently" table). Its rows are
        written apart from the training rows' generator and rendered through the recipe's own loader (same
        instruction, same template; a set's ``loader_kwargs`` change what it says it changes, e.g.
        gsm8k-handwritten is asked without the worked example), so a gain there is learning that transfers,
        not the generator learned. Default None: no second set (only a recipe whose held-out rows come from
        its training rows' generator needs one); off with evaluation (``eval_prompts=0``).
    tools: a tool set from ``grpo_kit.rollout.tool_sets.TOOL_SETS`` ("calculator") passed as ``GRPOTrainer(tools=...)``.
    tool_template: a ``grpo_kit.rollout.tool_sets.TOOL_TEMPLATES`` name ("chatml") installing a tool-calling chat
        template on the tokenizer, for models whose own template has none (SmolLM2); None keeps the model's.
    environment: a ``grpo_kit.rollout.environments.ENVIRONMENTS`` name ("counter") passed as
        ``GRPOTrainer(environment_factory=...)``: one instance per rollout, ``reset(**row)``, its public
        methods as tools, ``get_reward()`` summed with ``rewards`` (weight 1). A tuple of names
        (``("counter", "lock")``) is TRL's dict of factories: each row's ``environment`` column picks one,
        and only that environment's tools are shown. Default None: no environment. TRL path only.
    summary: a few words (at most 27 characters, so that the ``grpo-kit recipes`` table of name, model and
        summary fits 80 columns); the description stays behind ``grpo-kit recipes NAME``. Default "": the
        description's first words.
    trainable_parts: for a vision-language model, the parts trained (``grpo_kit.models.vlm.select_trainable``):
        any of "vision_tower", "projector", "lm_lora" (LoRA with ``lora``'s settings on the language model
        only); () = the usual LoRA / full fine-tuning.
    measures: what the reward and the held-out headline metric measure, and what they do not, in plain
        words; the report card (report.md, report_card.png) prints it next to the verdict so that
        "improved" is read as what it is. Default "": nothing is claimed.
    warmup_sft: a supervised warm-up (:class:`WarmupSFT`) run after the evaluation before training and before
        GRPO, on the standalone loop and the TRL path (the Unsloth path refuses it before the model loads);
        the held-out rows are evaluated after it too (the report's "SFT only" column). Default None: none.
    loop: the training path the recipe runs on unless ``--loop`` says otherwise ("standalone", "trl",
        "unsloth"); None: the standalone loop. Recipes with images, tools or an environment say "trl" (the path
        that runs them).
    """

    name: str
    description: str
    model: str
    dataset: str
    dataset_source: str | None = None
    dataset_size: int | None = None
    dataset_split: str = "train"
    dataset_kwargs: Mapping[str, Any] = field(default_factory=dict)
    rewards: tuple[RewardSpec, ...] = ()
    lora: LoraSettings | None = field(default_factory=LoraSettings)
    quantization: str | None = None
    unsloth: UnslothSettings = field(default_factory=UnslothSettings)
    training: Mapping[str, Any] = field(default_factory=dict)
    eval_prompts: int = 32
    eval_samples: int = 1
    transfer_eval: str | None = None
    tools: str | None = None
    tool_template: str | None = None
    environment: str | tuple[str, ...] | None = None
    summary: str = ""
    measures: str = ""
    trainable_parts: tuple[str, ...] = ()
    warmup_sft: WarmupSFT | None = None
    loop: str | None = None

    @property
    def one_line(self) -> str:
        """``summary``, else the description cut at 27 characters."""
        if self.summary:
            return self.summary
        text = " ".join(self.description.split())
        return text if len(text) <= 27 else text[:26].rstrip() + "…"

    def __post_init__(self):
        if self.dataset not in DATASET_LOADERS:
            raise ValueError(
                f"recipe {self.name!r}: unknown dataset {self.dataset!r}; use one of {sorted(DATASET_LOADERS)}"
            )
        if self.dataset_source == "synthetic" and self.dataset not in SYNTHETIC_ROWS:
            raise ValueError(
                f"recipe {self.name!r}: dataset_source='synthetic' exists for {sorted(SYNTHETIC_ROWS)} only; "
                "point dataset_source at a local file instead."
            )
        if self.loop not in (None, "standalone", "trl", "unsloth"):
            raise ValueError(
                f"recipe {self.name!r}: loop must be standalone, trl or unsloth (or absent), not {self.loop!r}"
            )
        if self.quantization not in (None, "4bit", "8bit"):
            raise ValueError(
                f"recipe {self.name!r}: quantization must be None, '4bit' or '8bit', not {self.quantization!r}"
            )
        if not self.rewards:
            raise ValueError(f"recipe {self.name!r}: give at least one reward function in rewards=")
        if not _is_int_at_least(self.eval_prompts, 0):
            raise ValueError(
                f"recipe {self.name!r}: eval_prompts must be an int >= 0 (held-out prompts evaluated "
                f"before/after; 0 turns evaluation off), got {self.eval_prompts!r}."
            )
        if not _is_int_at_least(self.eval_samples, 1):
            raise ValueError(
                f"recipe {self.name!r}: eval_samples must be an int >= 1 (1: greedy answers only; k > 1: also k "
                f"seeded samples per held-out prompt), got {self.eval_samples!r}."
            )
        if self.transfer_eval is not None:
            shipped = TRANSFER_SETS.get(self.transfer_eval) if isinstance(self.transfer_eval, str) else None
            if shipped is None:
                raise ValueError(
                    f"recipe {self.name!r}: transfer_eval={self.transfer_eval!r} is not a held-out set shipped "
                    f"with grpo-kit; use one of {sorted(TRANSFER_SETS)}, or None for no second held-out set."
                )
            if shipped.dataset != self.dataset:
                raise ValueError(
                    f"recipe {self.name!r}: transfer_eval={self.transfer_eval!r} holds {shipped.dataset} rows, "
                    f"but the recipe trains on {self.dataset}; use a set written for {self.dataset}, or None."
                )
        if not isinstance(self.dataset_kwargs, Mapping):
            raise ValueError(  # noqa: TRY004 - the recipe rules are ValueErrors, one line each on the CLI
                f"recipe {self.name!r}: dataset_kwargs={self.dataset_kwargs!r} must be a mapping of the loader's "
                """arguments; on the command line write it as JSON: --set 'dataset_kwargs={"tasks": ["colour"]}'."""
            )
        if self.dataset == "gsm8k":
            kwargs = self.dataset_kwargs
            check_worked_example(
                kwargs.get("worked_example", False),
                kwargs.get("worked_example_fade"),
                where=f"recipe {self.name!r}: dataset_kwargs",
                guides=kwargs.get("worked_example_guides", False),
            )
        if self.dataset_size is not None and not _is_int_at_least(self.dataset_size, 1):
            raise ValueError(
                f"recipe {self.name!r}: dataset_size={self.dataset_size!r} must be an int >= 1 (the training "
                "rows to keep), or None for every row."
            )
        if "reward_weights" in self.training:
            raise ValueError(
                f"recipe {self.name!r}: put weights on each RewardSpec(weight=...), not in training['reward_weights']."
            )
        shuffle = training_value(self.training, "shuffle_dataset")
        if self.curriculum and shuffle is not False:
            names = ", ".join(f"{k}={v!r}" for k, v in self.curriculum.items())
            raise ValueError(
                f"recipe {self.name!r}: dataset_kwargs {names} is a curriculum in dataset order, but "
                f"shuffle_dataset={shuffle!r} shuffles the rows (TRL's default "
                "True); set shuffle_dataset=False in training, or drop the fade."
            )
        if self.trainable_parts and ("lm_lora" in self.trainable_parts) != (self.lora is not None):
            raise ValueError(
                f"recipe {self.name!r}: trainable_parts {list(self.trainable_parts)} and lora={self.lora!r} disagree; "
                "with 'lm_lora' give lora=LoraSettings(...), without it lora=None."
            )
        if self.warmup_sft is not None and not isinstance(self.warmup_sft, WarmupSFT):
            raise ValueError(
                f"recipe {self.name!r}: warmup_sft must be a WarmupSFT(dataset=..., steps=...) or None, "
                f"got {self.warmup_sft!r}."
            )
        if self.warmup_sft is not None and (self.warmup_sft.dataset in PICTURE_SFT_DATASETS) != bool(
            self.trainable_parts
        ):
            raise ValueError(
                f"recipe {self.name!r}: warmup_sft.dataset {self.warmup_sft.dataset!r} "
                + (
                    "aligns a vision-language model's pictures; name its trainable_parts (a VLM recipe) or "
                    "warm up on text rows."
                    if self.trainable_parts == ()
                    else "is text, and this is a vision-language recipe (trainable_parts); align it on "
                    f"pictures with warmup_sft.dataset {PICTURE_SFT_DATASETS[0]!r}."
                )
            )
        check_tool_names(self.tools, self.tool_template, where=f"recipe {self.name!r}")
        check_environment_names(self.environment, where=f"recipe {self.name!r}")
        # GRPOConfig field names are checked by validate() (it imports trl, which takes seconds).

    def validate(self) -> Recipe:
        """Check ``training`` against the installed GRPOConfig; returns self."""
        check_training_fields(self.training, where=f"recipe {self.name!r}")
        return self

    @property
    def curriculum(self) -> dict[str, Any]:
        """The :data:`CURRICULUM_KWARGS` of ``dataset_kwargs`` that are set (not None): loader arguments that
        make a row's prompt depend on its place in the dataset order. ``{}`` for most recipes."""
        names = CURRICULUM_KWARGS.get(self.dataset, ())
        return {k: self.dataset_kwargs[k] for k in names if self.dataset_kwargs.get(k) is not None}

    @property
    def held_out_kwargs(self) -> dict[str, Any]:
        """``dataset_kwargs`` changes for the rows the recipe evaluates on (``grpo_kit.runs.held_out``): every
        curriculum argument off, so that a held-out row's prompt never depends on where it sits in a list. With
        a fading worked example (``worked_example_fade``), every held-out row carries the example, as the
        first training rows do; the fade's end, the prompt without it, is what a shipped set such as
        gsm8k-handwritten asks (its ``loader_kwargs``). With guided sampling (:attr:`guided_sampling`) the
        held-out rows carry the example in their ``prompt``, the one column evaluation reads. ``{}`` without
        either."""
        kwargs: dict[str, Any] = dict.fromkeys(self.curriculum)
        if self.guided_sampling:  # the example goes back into the prompt: the with-example figure
            kwargs[GUIDED_SAMPLING_KWARGS[self.dataset]] = False
        return kwargs

    @property
    def guided_sampling(self) -> bool:
        """True when the loader gives each row a ``sampling_prompt`` (:data:`GUIDED_SAMPLING_KWARGS`): the
        completions are drawn from it and the update scores them under ``prompt``. Standalone loop only."""
        name = GUIDED_SAMPLING_KWARGS.get(self.dataset)
        return bool(name and self.dataset_kwargs.get(name))

    @property
    def sees_images(self) -> bool:
        """True when the rows carry images (:data:`IMAGE_DATASETS`): TRL path, vision-language model."""
        return self.dataset in IMAGE_DATASETS

    @property
    def reward_names(self) -> list[str]:
        return [spec.name for spec in self.rewards]

    @property
    def reward_weights(self) -> list[float]:
        return [float(spec.weight) for spec in self.rewards]

    def build_reward_funcs(self, tokenizer: Any = None) -> list[Callable]:
        """The reward callables, in the order of ``reward_weights``."""
        return [spec.build(tokenizer) for spec in self.rewards]

    def load_dataset(
        self, source: Any = None, *, size: int | None = None, dataset_kwargs: Mapping[str, Any] | None = None
    ):
        """The training prompts: a ``datasets.Dataset`` with a ``prompt`` column (datasets_prep loaders).

        ``source`` overrides ``dataset_source`` (same meanings); ``size`` overrides ``dataset_size``;
        ``dataset_kwargs`` update the recipe's ``dataset_kwargs`` for this call (held-out rows:
        :attr:`held_out_kwargs`; a shipped set: its ``loader_kwargs`` on top).
        """
        import datasets_prep

        source = self.dataset_source if source is None else source
        size = self.dataset_size if size is None else size
        if source == "synthetic":
            make_rows = getattr(datasets_prep, SYNTHETIC_ROWS[self.dataset])
            source = make_rows(size or 64, seed=0)
        loader = getattr(datasets_prep, DATASET_LOADERS[self.dataset])
        kwargs = {**self.dataset_kwargs, **(dataset_kwargs or {})}
        dataset = loader(split=self.dataset_split, source=source, **kwargs)
        if size is not None and len(dataset) > size:
            dataset = dataset.select(range(size))
        return dataset

    def grpo_training(self) -> dict[str, Any]:
        """``training`` plus the reward weights, ready for ``GRPOConfig(output_dir=..., **...)``."""
        return {**dict(self.training), "reward_weights": self.reward_weights}

    def replace(self, **changes: Any) -> Recipe:
        """A copy with some fields changed, validated again (``__post_init__`` and :meth:`validate`)."""
        return dataclasses.replace(self, **changes).validate()


_RECIPE_FIELDS = {f.name for f in dataclasses.fields(Recipe)} - {"name", "training"}


def _reward_spec(entry: Any) -> RewardSpec:
    """One ``rewards`` override entry: a name, a :class:`RewardSpec`, or ``{"name", "weight", "kwargs"}``."""
    if isinstance(entry, (str, RewardSpec)):
        return RewardSpec(entry) if isinstance(entry, str) else entry
    fields = {field.name for field in dataclasses.fields(RewardSpec)}
    if isinstance(entry, Mapping) and "name" in entry and set(entry) <= fields:
        return RewardSpec(**entry)
    raise ValueError(
        f'rewards entry {entry!r} is not understood; give a reward name or {{"name": ..., "weight": 1.0, '
        '"kwargs": {}}, e.g. --set rewards=\'["visual_answer_reward", {"name": "visual_choice_reward", '
        '"weight": 0.2}]\'.'
    )


def apply_overrides(recipe: Recipe, overrides: Mapping[str, Any]) -> Recipe:
    """``recipe`` with ``overrides`` applied (``grpo_kit.recipes.catalogue.get_recipe``'s rule), validated again.

    Recipe fields replace the recipe's (``lora={"r": 8}`` and ``unsloth={...}`` change some of their fields;
    reward names become :class:`RewardSpec`); GRPOConfig fields go into ``training``; any other key is refused
    with the closest names. No overrides: the recipe itself.
    """
    if not overrides:
        return recipe

    recipe_changes: dict[str, Any] = {}
    training = dict(recipe.training)
    valid_training = grpo_config_field_names() | LOOP_ONLY_FIELDS
    for key, value in overrides.items():
        if key in _RECIPE_FIELDS:
            recipe_changes[key] = value
        elif key in valid_training or key in RETIRED_TRAINING_FIELDS:
            training[key] = value
        else:
            close = difflib.get_close_matches(key, sorted(_RECIPE_FIELDS | valid_training), n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ValueError(
                f"unknown override {key!r} for recipe {recipe.name!r}.{hint} Recipe fields: "
                f"{', '.join(sorted(_RECIPE_FIELDS))}; any GRPOConfig field (learning_rate, max_steps, ...) "
                "goes into training."
            )
    if isinstance(recipe_changes.get("lora"), Mapping):
        recipe_changes["lora"] = dataclasses.replace(recipe.lora or LoraSettings(), **recipe_changes["lora"])
    if isinstance(recipe_changes.get("unsloth"), Mapping):
        recipe_changes["unsloth"] = dataclasses.replace(recipe.unsloth, **recipe_changes["unsloth"])
    if isinstance(recipe_changes.get("warmup_sft"), Mapping):
        recipe_changes["warmup_sft"] = dataclasses.replace(
            recipe.warmup_sft or WarmupSFT(), **recipe_changes["warmup_sft"]
        )
    if "rewards" in recipe_changes:
        recipe_changes["rewards"] = tuple(_reward_spec(r) for r in recipe_changes["rewards"])
    return dataclasses.replace(recipe, training=training, **recipe_changes).validate()
