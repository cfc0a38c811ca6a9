"""Named, documented GRPO configurations shared by the three training paths.

A :class:`Recipe` says *what* to train (model, dataset, rewards, adapter, quantization) and *how*
(``training``: a dict whose keys are TRL ``GRPOConfig`` field names, so the same dict feeds
``GRPOConfig(**training)`` in the TRL and Unsloth paths and, through ``grpo_kit.runs.to_loop_config``, the
standalone loop's ``GRPOLoopConfig``, which uses the same names where they mean the same thing).

    >>> from grpo_kit.recipes import get_recipe
    >>> r = get_recipe("smoltldr-length", small=True, learning_rate=1e-5)
    >>> r.name, r.training["learning_rate"]
    ('smoltldr-length-small', 1e-05)

Recipes are named after what they teach (ARCHITECTURE.md). Course numbers refer to the Hugging
Face LLM course, chapter 12 ("Implementing GRPO in TRL" and "Practical exercise: GRPO with Unsloth").
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from datasets_prep.gsm8k import check_worked_example
from datasets_prep.shipped import TRANSFER_SETS
from grpo_kit.environments import check_environment_names
from grpo_kit.reward_specs import REWARD_MODEL_PREFIX, RewardSpec
from grpo_kit.settings import (
    LOOP_ONLY_FIELDS,
    RETIRED_TRAINING_FIELDS,
    check_training_fields,
    grpo_config_field_names,
)
from grpo_kit.tool_sets import check_tool_names

__all__ = [
    "RECIPES",
    "REWARD_MODEL_PREFIX",
    "LoraSettings",
    "Recipe",
    "RewardSpec",
    "UnslothSettings",
    "get_recipe",
]

# Loaders in datasets_prep, by the name a recipe uses.
DATASET_LOADERS = {
    "smoltldr": "load_smoltldr",
    "gsm8k": "load_gsm8k",
    "deepmath": "load_deepmath",
    "tool_tasks": "load_tool_task_split",
    "environment_tasks": "load_environment_task_split",
    "prompts": "load_prompts",  # your own rows: a file, a folder or a Hub id (grpo_kit.recipe_files)
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
#: such a recipe (``grpo_kit.trainer_builder.refuse_guided_sampling``), and held-out rows are rendered without it.
GUIDED_SAMPLING_KWARGS: dict[str, str] = {"gsm8k": "worked_example_guides"}


def _is_int_at_least(value: Any, minimum: int) -> bool:
    """An int (not a bool) >= ``minimum``: the rule for a recipe's counts."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


@dataclass(frozen=True)
class LoraSettings:
    """A LoRA adapter (peft ``LoraConfig`` names).

    r: the adapter rank. lora_alpha: scale numerator (the update is scaled by lora_alpha / r).
    lora_dropout: dropout on the adapter input. target_modules: "all-linear" (every linear layer
    except the output head) or a list of module names such as ["q_proj", "v_proj"].
    """

    r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.0
    target_modules: str | tuple[str, ...] = "all-linear"

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
    tools: a tool set from ``grpo_kit.tool_sets.TOOL_SETS`` ("calculator") passed as ``GRPOTrainer(tools=...)``.
    tool_template: a ``grpo_kit.tool_sets.TOOL_TEMPLATES`` name ("chatml") installing a tool-calling chat
        template on the tokenizer, for models whose own template has none (SmolLM2); None keeps the model's.
    environment: a ``grpo_kit.environments.ENVIRONMENTS`` name ("counter") passed as
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
        if self.curriculum and self.training.get("shuffle_dataset", True) is not False:
            names = ", ".join(f"{k}={v!r}" for k, v in self.curriculum.items())
            raise ValueError(
                f"recipe {self.name!r}: dataset_kwargs {names} is a curriculum in dataset order, but "
                f"shuffle_dataset={self.training.get('shuffle_dataset', True)!r} shuffles the rows (TRL's default "
                "True); set shuffle_dataset=False in training, or drop the fade."
            )
        if self.trainable_parts and ("lm_lora" in self.trainable_parts) != (self.lora is not None):
            raise ValueError(
                f"recipe {self.name!r}: trainable_parts {list(self.trainable_parts)} and lora={self.lora!r} disagree; "
                "with 'lm_lora' give lora=LoraSettings(...), without it lora=None."
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


# --- the recipes ---------------------------------------------------------------------------------

_GSM8K_MEASURES = (
    "Format and correctness: strict format is the layout <reasoning>...</reasoning><answer>...</answer>; "
    "accuracy is the number in <answer> equal to the gold answer. The right layout says nothing about "
    "right reasoning, and a right number can follow wrong reasoning."
)

_GSM8K_REWARDS = (
    # Course 12.6 passes the five functions without reward_weights (all 1.0); the magnitudes live in
    # the functions: correctness 2.0, int 0.5, the two formats 0.5 each, xmlcount up to 0.5 -> max 4.
    RewardSpec("xmlcount_reward", 1.0),
    RewardSpec("soft_format_reward", 1.0),
    RewardSpec("strict_format_reward", 1.0),
    RewardSpec("int_reward", 1.0),
    RewardSpec("correctness_reward", 1.0),
)

# gsm8k-cpu's settings, which gsm8k-cpu-guided shares (see gsm8k-cpu's description for each value's reason).
_GSM8K_CPU_TRAINING = {
    "learning_rate": 5e-4,
    "lr_scheduler_type": "constant",
    "max_grad_norm": 1.0,
    "optim": "adamw_torch",
    "logging_steps": 1,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "num_generations": 4,
    "max_completion_length": 96,
    "temperature": 0.8,
    "max_steps": 40,
    "save_steps": 10,
    "gradient_checkpointing": False,
    "shuffle_dataset": False,  # the fade is a curriculum: rows in dataset order (refused otherwise)
}

_SMOLTLDR_DESCRIPTION = (
    "Course 12.5: teach SmolLM2-135M-Instruct to write ~50-character TL;DR summaries of Reddit posts "
    "with a single length reward (-|50 - len(completion)|), LoRA r=16 on all linear layers. "
    "The course's max_prompt_length=512 is gone from TRL 1.x and its optim='adamw_8bit' needs bitsandbytes "
    "and the TRL path, so this recipe uses adamw_torch and runs on either loop, anywhere (slowly on CPU; see "
    "smoltldr-length-small)."
)

_RECIPE_LIST = [
    Recipe(
        name="smoltldr-length",
        description=_SMOLTLDR_DESCRIPTION,
        summary="course 12.5, full size",
        measures=(
            "Length only: the reward and the headline count the answer's characters against a target of 50. "
            "Neither checks that the answer summarises the post: a comment about the post of the right "
            "length scores as well as a summary. Read the answers next to the verdict."
        ),
        model="smollm2-135m-instruct",
        dataset="smoltldr",
        rewards=(RewardSpec("length_reward", 1.0, {"ideal_length": 50, "unit": "chars"}),),
        lora=LoraSettings(r=16, lora_alpha=32, target_modules="all-linear"),
        training={
            "learning_rate": 2e-5,
            "per_device_train_batch_size": 8,
            "gradient_accumulation_steps": 2,
            "num_generations": 8,
            "max_completion_length": 96,
            "num_train_epochs": 1,
            "optim": "adamw_torch",
            "logging_steps": 1,
            "remove_unused_columns": False,
        },
    ),
    Recipe(
        name="smoltldr-length-small",
        summary="course 12.5 on CPU (length)",
        measures=(
            "Length only: the reward and the headline count the answer's tokens against a target of 16. "
            "Neither checks that the answer summarises the post: a comment about the post of the right "
            "length scores as well as a summary. Read the answers next to the verdict."
        ),
        description=(
            "smoltldr-length sized for a 2-core CPU (under 10 minutes, offline): the embedded SmolLM2-135M "
            "asked to summarise 64 synthetic posts in one sentence (a chat prompt, so the instruct model "
            "answers instead of stopping at once), 4 completions of <= 64 tokens per prompt, rewarded for "
            "being 16 tokens long; LoRA at a CPU-run learning rate, 32 steps (one pass over the 64 prompts)."
        ),
        model="smollm2-135m-instruct",
        dataset="smoltldr",
        dataset_source="synthetic",
        dataset_size=64,
        dataset_kwargs={"instruction": "Summarize this post in one short sentence."},
        # Its held-out posts come from synthetic_tldr, as its training posts do: the hand-written set says
        # whether a shorter answer there carries over to posts written differently. Lesson 4's two variants
        # (_LESSON_VARIANTS) inherit it with the data. smoltldr-length has none: its held-out rows are the
        # Hub's test split of real posts, not a generator's.
        transfer_eval="tldr-handwritten",
        # Tokens, not characters (the course's pitfall): a truncated answer (64 tokens, -48) and an
        # empty one (-15) both score below a short sentence, so "say nothing" is not a hack here.
        rewards=(RewardSpec("length_reward", 1.0, {"ideal_length": 16, "unit": "tokens"}),),
        lora=LoraSettings(r=16, lora_alpha=32, target_modules="all-linear"),
        training={
            # 15x the GPU recipe's 2e-5: 32 steps must move the adapter visibly. Measured on 32 held-out
            # prompts (mean |length - 16| tokens, greedy): 2e-4 x 24 steps gave -65 % (seed 42) and -35 % (seed 7);
            # 3e-4 x 32 steps gives -74 % and -78 %, each with a 95 % CI of the change excluding 0.
            "learning_rate": 3e-4,
            "per_device_train_batch_size": 8,
            "gradient_accumulation_steps": 1,
            "num_generations": 4,
            "max_completion_length": 64,
            "max_steps": 32,
            "optim": "adamw_torch",
            "logging_steps": 1,
            "save_steps": 8,
            "gradient_checkpointing": False,  # TRL turns it on by default; it only slows a 135M model on CPU
            "remove_unused_columns": False,
        },
    ),
    Recipe(
        name="gsm8k-unsloth",
        summary="course 12.6, Unsloth + vLLM",
        measures=_GSM8K_MEASURES,
        description=(
            "Course 12.6: Gemma-3-1B-it in 4-bit QLoRA (r=32) with Unsloth + vLLM on one GPU, GSM8K with the "
            "five rewards (xmlcount, soft/strict format, int, correctness). The course's per-device batch of 1 "
            "is raised to num_generations=6 (Unsloth does this itself; plain TRL needs it written down), "
            "max_prompt_length=256 is gone from TRL 1.x, so max_completion_length = 1024 - 256."
        ),
        model="unsloth/gemma-3-1b-it",
        dataset="gsm8k",
        rewards=_GSM8K_REWARDS,
        lora=LoraSettings(
            r=32,
            lora_alpha=32,
            target_modules=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        ),
        quantization="4bit",
        unsloth=UnslothSettings(max_seq_length=1024, gpu_memory_utilization=0.6, random_state=3407),
        training={
            "learning_rate": 5e-6,
            "adam_beta1": 0.9,
            "adam_beta2": 0.99,
            "weight_decay": 0.1,
            "warmup_steps": 0.1,  # transformers 5: a float < 1 is a ratio (the course's warmup_ratio=0.1)
            "lr_scheduler_type": "cosine",
            "optim": "paged_adamw_8bit",
            "logging_steps": 1,
            "per_device_train_batch_size": 6,
            "gradient_accumulation_steps": 1,
            "num_generations": 6,
            "max_completion_length": 768,
            "max_steps": 250,
            "save_steps": 250,
            "max_grad_norm": 0.1,
        },
    ),
    Recipe(
        name="gsm8k-cpu",
        summary="course 12.6 on CPU (format)",
        measures=_GSM8K_MEASURES,
        description=(
            "Course 12.6's five rewards on the embedded SmolLM2-135M and 80 synthetic GSM8K problems, sized for a "
            "2-core CPU (about 10 minutes of training): the model learns the <reasoning>/<answer> format, and "
            "is evaluated on the course's own prompt too. What differs from the course, and why: (1) a worked "
            "exchange in the course's format before the question, one of six in turn, faded out during training "
            "(load_gsm8k(worked_example=True, worked_example_fade=64), the rows in order: shuffle_dataset=False): "
            "from the system prompt alone the 135M model writes the tags for none of 40 held-out problems, every "
            "group scores the same and GRPO has no signal (grpo-kit preflight says NO-GO), so steps 1-5 show an "
            "example with both problems; with one example on every row the format learned held only with it "
            "there (issue #27: 0 % strict format on problems asked with the system prompt alone), and with one "
            "example faded out the model learned to repeat that example word for word, so six examples thin out "
            "and steps 30-40 show none. Held-out rows carry an example; the second set, gsm8k-handwritten, is 40 "
            "problems written by hand, asked with the system prompt alone. Measured (seeds 42 and 7): there the "
            "layout is not learned (0 % strict format): once the example is gone, GRPO reinforces the partial "
            "credit left (xmlcount's tags around any word, a bare number in <answer>); the system prompt's own "
            "template, '...' in both sections, which the model copied while it paid, earns nothing now; (2) learning rate 5e-4, constant, clip 1.0 "
            "instead of 5e-6 cosine with clip 0.1: LoRA r=16 must move in 40 steps, not 250; (3) 4 completions "
            "of <= 96 tokens at T=0.8, 2 problems per step, one pass over the 80 in order. A 135M model rarely "
            "solves the problems: the format is the lesson."
        ),
        model="smollm2-135m-instruct",
        dataset="gsm8k",
        dataset_source="synthetic",
        # One pass in order: 40 steps x 2 problems = the 80 rows, row 2(s-1) and 2(s-1)+1 at step s, on both
        # paths (TRL's RepeatSampler and the loop's _epoch_order with shuffle_dataset=False). The example fades
        # over rows 0-63 (datasets_prep.gsm8k.worked_example_rows: 33 of them carry one, rows 0-9 all, row 56 the
        # last), so the last 11 steps train on the course's own prompt. A shorter fade (48 rows, the last 19
        # steps without) was measured too: the model then filled the template with '...' and a number and never
        # stopped after </answer> (strict format 0 % without the example, 72.5 % with it). Before the fade it
        # drew 80 of 128 problems shuffled; now the first 80 of those 128 (synthetic_gsm8k is prefix-stable), once.
        dataset_size=80,
        dataset_kwargs={"worked_example": True, "worked_example_fade": 64},
        transfer_eval="gsm8k-handwritten",
        rewards=_GSM8K_REWARDS,
        lora=LoraSettings(r=16, lora_alpha=32, target_modules="all-linear"),
        training=dict(_GSM8K_CPU_TRAINING),
    ),
    Recipe(
        name="gsm8k-unsloth-cpu",
        summary="course 12.6, Unsloth on CPU",
        measures=_GSM8K_MEASURES,
        description=(
            "Course 12.6's Unsloth practicum sized for a CPU: gsm8k-cpu's problems, rewards and training on the "
            "embedded SmolLM2-135M, loaded by Unsloth (FastLanguageModel, Unsloth's CPU backend without a GPU) "
            "in 4-bit NF4 (QLoRA, bitsandbytes' CPU kernels), LoRA r=16 through get_peft_model, GRPO through "
            "TRL's trainer as Unsloth patches it. What differs from gsm8k-unsloth, and why: the model and data "
            "are gsm8k-cpu's (offline, 40 steps on 2 cores); fast_inference=False (vLLM inside Unsloth needs a "
            "CUDA GPU; transformers generates); adamw_torch, not paged_adamw_8bit (Unsloth's CPU backend would "
            "swap an 8-bit optimizer for AdamW, so it is refused there; it runs adamw_torch as adamw_torch_fused, "
            "the same AdamW, which run.json's training records); no gradient checkpointing (Unsloth's 'unsloth' offloading is plain recomputation on "
            "CPU and only slows a 135M model). The merged export is the 16-bit base plus the adapter."
        ),
        model="smollm2-135m-instruct",
        dataset="gsm8k",
        dataset_source="synthetic",
        dataset_size=80,
        dataset_kwargs={"worked_example": True, "worked_example_fade": 64},
        transfer_eval="gsm8k-handwritten",
        rewards=_GSM8K_REWARDS,
        lora=LoraSettings(
            r=16,
            lora_alpha=32,
            target_modules=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"),
        ),
        quantization="4bit",
        # 512 tokens hold the worked example, the problem and 96 completion tokens.
        unsloth=UnslothSettings(
            max_seq_length=512, fast_inference=False, use_gradient_checkpointing=False, random_state=3407
        ),
        training=dict(_GSM8K_CPU_TRAINING),
    ),
    Recipe(
        name="gsm8k-cpu-guided",
        summary="course 12.6, guided (loop)",
        measures=_GSM8K_MEASURES,
        description=(
            "gsm8k-cpu with the worked example moved out of the prompt the model trains on, for the standalone "
            "loop only (--loop standalone; the TRL and Unsloth paths refuse it): each step samples its "
            "completions from the prompt with the example (load_gsm8k(worked_example=True, "
            "worked_example_fade=64, worked_example_guides=True): the same fade, the example in a "
            "sampling_prompt column) and trains on them under the course's prompt alone (guided sampling: "
            "off-policy while the example is there, no importance weight; steps 30-40 sample from the course's "
            "prompt, plain GRPO). The model so learns to write, from the system prompt alone, what it writes "
            "with the example; gsm8k-cpu, which trains under the example's prompt, learned the layout only "
            "with the example there. A sixth reward, calculation_reward (0.5: the reasoning shows a right "
            "calculation on a number of the problem; 0.25: a wrong one), because with the course's five the "
            "model learned to write one number as its reasoning. Otherwise gsm8k-cpu's settings: lr 5e-4 constant, clip 1.0, "
            "4 completions of <= 96 tokens at T=0.8, 2 problems per step, 40 steps, one pass over 80 in order."
        ),
        model="smollm2-135m-instruct",
        dataset="gsm8k",
        dataset_source="synthetic",
        dataset_size=80,
        dataset_kwargs={"worked_example": True, "worked_example_fade": 64, "worked_example_guides": True},
        transfer_eval="gsm8k-handwritten",
        rewards=(*_GSM8K_REWARDS, RewardSpec("calculation_reward", 1.0)),
        lora=LoraSettings(r=16, lora_alpha=32, target_modules="all-linear"),
        training=dict(_GSM8K_CPU_TRAINING),
    ),
    Recipe(
        name="calculator-tool-cpu",
        summary="a tool call (TRL tools=)",
        measures=(
            "Tool success: a well-formed multiply(a, b) call AND the right final number. The wording of "
            "the answer around the number is not judged."
        ),
        description=(
            "GRPO with a tool (TRL's tools=, lesson 8): the embedded SmolLM2-135M learns to answer '3-digit x "
            "2-digit' questions by calling multiply(a, b) once, then stating the result. One worked tool "
            "exchange in each prompt, 4 completions of <= 64 tokens at T=1.0, reward = a well-formed call AND "
            "the correct final answer. Full fine-tuning on CPU, about 8 steps in 10 minutes."
        ),
        model="smollm2-135m-instruct",
        dataset="tool_tasks",
        dataset_size=256,
        # The held-out split (load_tool_task_split("test", ...) with the same kwargs) is drawn before the
        # training rows, so it never overlaps them.
        dataset_kwargs={"n_train": 256, "n_test": 32, "seed": 0, "kinds": ["multiply"], "n_examples": 1},
        # Only the success reward counts (weight 1); the call and answer rewards are logged for the lesson's
        # plots with weight 0. Rewarding a well-formed call alone let runs "call, then answer wrongly".
        rewards=(
            RewardSpec("tool_success_reward", 1.0),
            RewardSpec("tool_call_reward", 0.0),
            RewardSpec("tool_answer_reward", 0.0),
        ),
        # What differs from the course (HF LLM course, chapter 12) and why: the course trains no tools. TRL's
        # tool loop needs a tokenizer whose template renders tool calls; SmolLM2's has none, hence
        # tool_template="chatml" (grpo_kit.tool_template). Full fine-tuning instead of LoRA and lr 5e-5
        # constant (course: 2e-5 LoRA) because ~8 CPU steps must move a 135M model measurably; beta=0 (TRL's
        # default, no reference model) saves a forward pass per step on CPU.
        lora=None,
        tools="calculator",
        tool_template="chatml",
        training={
            "learning_rate": 5e-5,
            "lr_scheduler_type": "constant",
            "per_device_train_batch_size": 8,
            "gradient_accumulation_steps": 1,
            "num_generations": 4,
            "max_completion_length": 64,
            "max_tool_calling_iterations": 1,
            "temperature": 1.0,
            "max_steps": 8,
            "optim": "adamw_torch",
            "logging_steps": 1,
            "save_strategy": "no",
            "gradient_checkpointing": False,
            "remove_unused_columns": False,
        },
    ),
    Recipe(
        name="counter-lock-env-cpu",
        summary="two environments (TRL)",
        measures=(
            "Episode success, read from each environment's state by its get_reward: the counter ends at the "
            "target, or the lock is open. A well-formed call (tool_call_reward) adds partial credit; the text "
            "of the final answer is not judged."
        ),
        description=(
            "GRPO in an environment (TRL's environment_factory, lesson 9): rows alternate between a counter "
            "(increment(step) until it reads the target) and a lock (enter_code(code)), routed by the "
            "dataset's environment column, each prompt showing only its environment's tool. One worked "
            "exchange per prompt, 4 completions at T=1.0, up to 2 tool calls: the state keeps every call, so "
            "a second increment overshoots. Full fine-tuning of the embedded SmolLM2-135M on CPU."
        ),
        model="smollm2-135m-instruct",
        dataset="environment_tasks",
        dataset_size=256,
        # The held-out split (load_environment_task_split("test", ...) with the same kwargs) is drawn before
        # the training rows and shares no target with them.
        dataset_kwargs={"n_train": 256, "n_test": 32, "seed": 0, "environments": ["counter", "lock"]},
        # Greedy, the base model already copies the worked example (32/32 held-out episodes succeed); the
        # 4 samples per row at the training temperature are where it fails and where GRPO changes it.
        eval_samples=4,
        # Each environment's get_reward (weight 1, TRL's) is the success; tool_call_reward is the trainer-owned
        # format reward, summed with it.
        rewards=(RewardSpec("tool_call_reward", 0.5),),
        # As calculator-tool-cpu (lesson 8): full fine-tuning at lr 5e-5 constant so a few CPU steps move the
        # model; beta=0; the chatml tool template because SmolLM2's own template renders no tool calls.
        lora=None,
        environment=("counter", "lock"),
        tool_template="chatml",
        training={
            "learning_rate": 5e-5,
            "lr_scheduler_type": "constant",
            "per_device_train_batch_size": 8,
            "gradient_accumulation_steps": 1,
            "num_generations": 4,
            "max_completion_length": 64,
            "max_tool_calling_iterations": 2,
            "temperature": 1.0,
            "max_steps": 8,
            "optim": "adamw_torch",
            "logging_steps": 1,
            "save_strategy": "no",
            "gradient_checkpointing": False,
            "remove_unused_columns": False,
        },
    ),
    Recipe(
        name="deepmath-accuracy",
        summary="TRL quick start (GPU)",
        measures=(
            "Accuracy: math-verify's verdict that the final answer equals the gold one. The reasoning "
            "that leads to it is not checked."
        ),
        description=(
            "TRL's GRPO quick start: Qwen2.5-0.5B-Instruct, full fine-tuning, math-verify accuracy_reward on "
            "trl-lib/DeepMath-103K with GRPOConfig defaults (8 completions per prompt). Meant for GPUs "
            "(the TRL docs run it with torchrun on 8 GPUs for about a day)."
        ),
        model="Qwen/Qwen2.5-0.5B-Instruct",
        dataset="deepmath",
        rewards=(RewardSpec("accuracy_reward", 1.0),),
        lora=None,
        training={"logging_steps": 10},
    ),
]

_RECIPE_LIST.append(
    Recipe(
        name="shapes-vlm-cpu",
        summary="GRPO that sees (CPU)",
        measures=(
            "Accuracy on one visual question: the first colour word the answer names equals the colour of the "
            "shape drawn (4 colours: chance is 25 %). It says nothing about any other question or picture."
        ),
        description=(
            "RL that learns to see, on a laptop: smolvlm-cpu (the embedded SmolLM2-135M as the language model, "
            "a small random CLIP vision tower and projector, transformers' Llava) answers 'what colour is the "
            "shape?' on 64x64 Pillow pictures through TRL's GRPOTrainer VLM path (the processor as "
            "processing_class, TRL's image column). The reward (visual_answer_reward) teaches the vision tower, "
            "and the projector to read the picture (the language model frozen; trainable_parts can add a LoRA on it). "
            "TRL path only (--loop trl)."
        ),
        model="smolvlm-cpu",
        dataset="shapes",
        dataset_kwargs={"tasks": ["colour"]},  # a list: what a recipe file reads back
        dataset_size=512,
        rewards=(RewardSpec("visual_answer_reward", 1.0),),
        # The language model stays frozen: in a first run (LoRA r=8 on it too, learning_rate 1e-3, T=1.0 then 0.8)
        # its answers drifted to 10 rambling tokens with no colour word by step 6, and the reward stayed 0.
        lora=None,
        trainable_parts=("vision_tower", "projector"),
        eval_prompts=64,
        transfer_eval="shapes-transfer",
        training={
            "learning_rate": 5e-4,
            "lr_scheduler_type": "constant",
            "optim": "adamw_torch",
            "logging_steps": 1,
            "per_device_train_batch_size": 8,
            "num_generations": 8,
            "max_completion_length": 10,
            "temperature": 0.8,
            "max_steps": 60,
            "save_steps": 40,
            "gradient_checkpointing": False,
            "remove_unused_columns": False,
        },
    )
)

RECIPES: dict[str, Recipe] = {recipe.name: recipe for recipe in _RECIPE_LIST}
# Recipes with a CPU-sized sibling reachable through get_recipe(name, small=True).
SMALL_VARIANTS = {"smoltldr-length": "smoltldr-length-small", "gsm8k-unsloth": "gsm8k-cpu"}

DEFAULT_RECIPE = "smoltldr-length-small"


_RECIPE_FIELDS = {f.name for f in dataclasses.fields(Recipe)} - {"name", "training"}


def get_recipe(name: str, *, small: bool = False, **overrides: Any) -> Recipe:
    """The recipe called ``name`` with ``overrides`` applied.

    Overrides are Recipe fields (``model="..."``, ``dataset_source="data.jsonl"``, ``lora=None``,
    ``lora={"r": 8}`` to change some LoRA fields) or GRPOConfig fields, which go into ``training``
    (``learning_rate=1e-5``, ``max_steps=3``). ``small=True`` picks the CPU-sized sibling.
    """
    if isinstance(name, Recipe):
        recipe = name
    else:
        if name not in RECIPES:
            close = difflib.get_close_matches(str(name), list(RECIPES), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown recipe {name!r}.{hint} Recipes: {', '.join(RECIPES)}")
        recipe = RECIPES[name]
    if small:
        if recipe.name.endswith("-small") or recipe.name in SMALL_VARIANTS.values():
            pass
        elif recipe.name in SMALL_VARIANTS:
            recipe = RECIPES[SMALL_VARIANTS[recipe.name]]
        else:
            raise ValueError(
                f"recipe {recipe.name!r} has no small variant; small=True works for {', '.join(SMALL_VARIANTS)}."
            )
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
    if "rewards" in recipe_changes:
        recipe_changes["rewards"] = tuple(
            RewardSpec(r) if isinstance(r, str) else r for r in recipe_changes["rewards"]
        )
    return dataclasses.replace(recipe, training=training, **recipe_changes).validate()


def _variant(
    base: str, *, name: str, summary: str, description: str, training: Mapping[str, Any], **fields: Any
) -> Recipe:
    """A named variant of a catalogue recipe: what a lesson runs, so it is listed, planned and tested like the
    rest (``grpo-kit train --recipe NAME`` runs exactly the lesson's configuration). ``training`` updates the
    base's training fields; the GRPOConfig names are checked where every recipe's are, when a run is planned
    (importing the catalogue stays free of TRL)."""
    recipe = RECIPES[base]
    return dataclasses.replace(
        recipe,
        name=name,
        summary=summary,
        description=description,
        training={**recipe.training, **training},
        **fields,
    )


# What the lessons run besides the recipes above (lesson 4's two CPU runs, lesson 8's GPU model and CI size).
_LESSON_VARIANTS = [
    _variant(
        "smoltldr-length-small",
        name="smoltldr-course-cpu",
        summary="course 12.5 as taught, CPU",
        description=(
            "Lesson 4, part 1: course 12.5's own setting on a 2-core CPU, pitfall included: plain-text posts "
            "(no chat prompt, so the instruct model often stops at once) and a target of 50 characters. "
            "Synthetic posts, 4 completions of <= 48 tokens, 4 prompts a step, lr 1.5e-3 so 6 steps move the "
            "adapter. Measured in lesson 4 (32 held-out posts, greedy): |length - 50| falls, the answers "
            "collapse to empty ones, and the report card says 'reward hack suspected'."
        ),
        dataset_kwargs={},
        rewards=RECIPES["smoltldr-length"].rewards,
        measures=RECIPES["smoltldr-length"].measures,
        training={
            "learning_rate": 1.5e-3,
            "per_device_train_batch_size": 4,
            "max_completion_length": 48,
            "max_steps": 6,
        },
    ),
    _variant(
        "smoltldr-length-small",
        name="smoltldr-length-quick",
        summary="the main job in 8 steps",
        description=(
            "Lesson 4, part 2: smoltldr-length-small (a chat prompt, a target of 16 tokens) in 8 steps at lr "
            "1e-3 instead of 32 at 3e-4, so it learns within a lesson on a 2-core CPU. Measured in lesson 4's "
            "default run (32 held-out posts, greedy): |length - 16| 20.1 -> 5.3 tokens, 95 % CI of the change "
            "[-20.8, -9.4]."
        ),
        training={"learning_rate": 1e-3, "max_steps": 8},
    ),
    _variant(
        "calculator-tool-cpu",
        name="calculator-tool-smoke",
        summary="a tool call, CI size",
        description=(
            "calculator-tool-cpu at the size lesson 8 runs in CI (`-- --small`): 1 prompt x 4 completions of "
            "<= 40 tokens a step on 16 training questions. Every part runs (tools, rollouts, evaluation with "
            "the tools); a few steps cannot move the model, so expect a held-out change of about 0."
        ),
        dataset_size=16,
        training={"per_device_train_batch_size": 4, "max_completion_length": 40, "max_steps": 2},
    ),
    _variant(
        "counter-lock-env-cpu",
        name="counter-lock-env-smoke",
        summary="two environments, CI size",
        description=(
            "counter-lock-env-cpu at the size lesson 9 runs in CI (`-- --small`): 1 prompt x 4 completions of "
            "<= 40 tokens a step on 16 training rows. Every part runs (environments, rollouts, get_reward, "
            "evaluation replaying the episodes); two steps cannot move the model, so expect a change of about 0."
        ),
        dataset_size=16,
        training={"per_device_train_batch_size": 4, "max_completion_length": 40, "max_steps": 2},
    ),
]
RECIPES.update({recipe.name: recipe for recipe in _LESSON_VARIANTS})
