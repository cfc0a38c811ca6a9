"""The recipe catalogue: named, documented GRPO configurations shared by the three training paths.

Data: every shipped recipe (:data:`RECIPES`), its CPU-sized siblings (:data:`SMALL_VARIANTS`), the
configurations the lessons run (``_LESSON_VARIANTS``), :data:`DEFAULT_RECIPE`, and :func:`get_recipe`, which
picks one and applies overrides. The recipe type and its rules live in ``grpo_kit.recipes.recipe``; its public
names are re-exported here, so ``from grpo_kit.recipes.catalogue import Recipe, LoraSettings`` keeps working.

    >>> from grpo_kit.recipes.catalogue import get_recipe
    >>> r = get_recipe("smoltldr-length", small=True, learning_rate=1e-5)
    >>> r.name, r.training["learning_rate"]
    ('smoltldr-length-small', 1e-05)

Recipes are named after what they teach (ARCHITECTURE.md). Course numbers refer to the Hugging
Face LLM course, chapter 12 ("Implementing GRPO in TRL" and "Practical exercise: GRPO with Unsloth").
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from grpo_kit.config.rules import EVALUATION_SCHEDULE
from grpo_kit.recipes.recipe import (
    CURRICULUM_KWARGS,
    DATASET_LOADERS,
    GUIDED_SAMPLING_KWARGS,
    IMAGE_DATASETS,
    REWARD_MODEL_PREFIX,
    SYNTHETIC_ROWS,
    LoraSettings,
    Recipe,
    RewardSpec,
    UnslothSettings,
    WarmupSFT,
    apply_overrides,
)

__all__ = [
    "CURRICULUM_KWARGS",
    "DATASET_LOADERS",
    "DEFAULT_RECIPE",
    "GUIDED_SAMPLING_KWARGS",
    "IMAGE_DATASETS",
    "RECIPES",
    "REWARD_MODEL_PREFIX",
    "SMALL_VARIANTS",
    "SYNTHETIC_ROWS",
    "LoraSettings",
    "Recipe",
    "RewardSpec",
    "UnslothSettings",
    "WarmupSFT",
    "get_recipe",
]

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
# The course's five and calculation_reward (0.5: the reasoning shows a right calculation on a number of the
# problem, 0.25: a wrong one): with the five alone, gsm8k-cpu-guided and gsm8k-cpu-sft learned to write one
# number as their reasoning (docs/results.md).
_GSM8K_REWARDS_WITH_WORK_SHOWN = (*_GSM8K_REWARDS, RewardSpec("calculation_reward", 1.0))

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
            # the held-out rows every 8 steps too (greedy, as before and after): the report card's held-out
            # curve beside the training reward; 4 evaluations of 32 prompts, kept off the training clock
            "eval_steps": 8,
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
        rewards=_GSM8K_REWARDS_WITH_WORK_SHOWN,
        lora=LoraSettings(r=16, lora_alpha=32, target_modules="all-linear"),
        training=dict(_GSM8K_CPU_TRAINING),
    ),
    Recipe(
        name="gsm8k-cpu-sft",
        summary="course 12.6, SFT warm-up",
        measures=_GSM8K_MEASURES,
        description=(
            "gsm8k-cpu with the Unsloth GRPO notebooks' 'pre fine-tuning for formatting' step instead of the "
            "worked example: first a short SFT warm-up (warmup_sft: 40 steps of 8 rows at lr 2e-4, constant, on "
            "the same LoRA adapter; the loss on the answer's tokens only; 6-13 min with one thread, two runs sharing 2 cores) "
            "on 300 "
            "synthetic worked solutions in the course's format (datasets_prep.sft_rows, 'gsm8k-worked': "
            "synthetic GSM8K problems of another seed, none of them a training, held-out or gsm8k-handwritten "
            "problem, asked with the system prompt alone and answered '<reasoning> the calculation </reasoning> "
            "<answer> N </answer>'), then gsm8k-cpu's GRPO with the course's system prompt alone: no worked "
            "example in any prompt (load_gsm8k(worked_example=False)), no fade, no guided sampling, and "
            "gsm8k-cpu-guided's sixth reward, calculation_reward (with the course's five alone, the TRL path's "
            "seed 42 learned to write one number as its reasoning: flagged 'reasoning of 2 words or fewer' "
            "0% -> 100%, accuracy after SFT 20% -> 0% after GRPO). Why the warm-up: from "
            "the system prompt alone the 135M model writes the tags for no problem, so GRPO has no signal; after "
            "the warm-up it writes the layout, the groups differ, and GRPO has something to reinforce. The held-out "
            "rows and gsm8k-handwritten are both asked without the example; the report card's extra table shows "
            "base, SFT only and SFT + GRPO, so what GRPO added is read apart from what SFT taught. Runs on the "
            "standalone loop and the TRL path (the Unsloth path refuses warmup_sft). Otherwise gsm8k-cpu's "
            "settings: lr 5e-4 constant, clip 1.0, 4 completions of <= 96 tokens at T=0.8, 2 problems per step, "
            "40 steps, one pass over 80 in order."
        ),
        model="smollm2-135m-instruct",
        dataset="gsm8k",
        dataset_source="synthetic",
        dataset_size=80,
        dataset_kwargs={"worked_example": False},
        transfer_eval="gsm8k-handwritten",
        rewards=_GSM8K_REWARDS_WITH_WORK_SHOWN,
        lora=LoraSettings(r=16, lora_alpha=32, target_modules="all-linear"),
        training=dict(_GSM8K_CPU_TRAINING),
        warmup_sft=WarmupSFT(dataset="gsm8k-worked", steps=40, learning_rate=2e-4, batch_size=8),
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
        # tool_template="chatml" (grpo_kit.rollout.tool_template). Full fine-tuning instead of LoRA and lr 5e-5
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
            "processing_class, TRL's image column). Each prompt opens the answer ('The shape is'), so 3 tokens hold "
            "the colour word. The reward (visual_answer_reward) teaches the vision tower and the projector to read "
            "the picture (the language model frozen; trainable_parts can add a LoRA on it). TRL path only (--loop "
            "trl). Measured in docs/results.md: above chance in 200 steps, not yet 80 %."
        ),
        model="smolvlm-cpu",
        dataset="shapes",
        dataset_kwargs={"tasks": ["colour"]},  # a list: what a recipe file reads back
        dataset_size=512,
        rewards=(RewardSpec("visual_answer_reward", 1.0),),
        # The language model stays frozen (docs/results.md, "GRPO that sees", has the runs behind each value): a LoRA
        # on it collapsed at learning rate 1e-4 (every answer the same non-colour, held-out 0 by step 50). The rows
        # open the answer ("The shape is"), so 3 tokens hold the colour word; without the opening, most groups named
        # no colour and every setting tried failed. At learning rate 3e-4 or more the answers collapsed to one colour.
        lora=None,
        trainable_parts=("vision_tower", "projector"),
        eval_prompts=64,
        transfer_eval="shapes-transfer",
        training={
            "learning_rate": 1e-4,
            "lr_scheduler_type": "constant",
            "optim": "adamw_torch",
            "logging_steps": 1,
            "per_device_train_batch_size": 16,  # 2 pictures x 8 answers
            "num_generations": 8,
            "max_completion_length": 3,
            "temperature": 1.0,
            "max_steps": 200,
            "save_steps": 100,
            "gradient_checkpointing": False,
            "remove_unused_columns": False,
        },
    )
)

_RECIPE_LIST.append(
    Recipe(
        name="shapes-vlm-gpu",
        summary="GRPO that sees (GPU)",
        measures=(
            "Accuracy on three visual questions (a shape's colour, how many dots, which side the square is on): the "
            "first answer word named equals the picture's. It says nothing about any other question or picture."
        ),
        description=(
            "A real small VLM, HuggingFaceTB/SmolVLM-256M-Instruct (pretrained vision tower and language model), "
            "through TRL's GRPOTrainer VLM path on one GPU, on the same offline Pillow tasks as shapes-vlm-cpu "
            "(colour, count, side). The settings are Unsloth's vision GRPO notebook's (Qwen3-VL): a LoRA r=16, "
            "alpha 16, no dropout, on the language model only (its vision layers frozen, as the notebook's "
            "finetune_vision_layers=False), GSPO (importance_sampling_level='sequence', loss_type='dr_grpo', "
            "mask_truncated_completions=False), lr 5e-6 cosine with 10 % warm-up, AdamW 8-bit, beta2 0.99, weight "
            "decay 0.1, max_grad_norm 0.1, 2 completions per prompt, bf16 where the GPU has it (the TRL path's choice). Answers are one word, so completions stop "
            "at 64 tokens (the notebook's 1024 is for reasoning). --loop trl only: Unsloth's FastVisionModel path is "
            "not wired here, and the standalone loop refuses images. Checked on CPU up to loading the Hub weights "
            "(tests/grpo_kit/test_vlm.py); not yet run on a GPU."
        ),
        model="HuggingFaceTB/SmolVLM-256M-Instruct",
        dataset="shapes",
        # No answer opening: SmolVLM's own chat template would close that assistant turn and open another, and its
        # pretrained language model answers in words (completions of up to 64 tokens).
        dataset_kwargs={"tasks": ["colour", "count", "side"], "opening": False},
        dataset_size=1024,
        rewards=(RewardSpec("visual_answer_reward", 1.0),),
        lora=LoraSettings(r=16, lora_alpha=16, lora_dropout=0.0),
        trainable_parts=("lm_lora",),
        eval_prompts=128,
        transfer_eval="shapes-transfer",
        training={
            "learning_rate": 5e-6,
            "adam_beta1": 0.9,
            "adam_beta2": 0.99,
            "weight_decay": 0.1,
            "warmup_steps": 0.1,  # transformers 5: a float < 1 is a ratio (the notebook's warmup_ratio=0.1)
            "lr_scheduler_type": "cosine",
            "optim": "adamw_8bit",
            "logging_steps": 1,
            "per_device_train_batch_size": 2,
            "gradient_accumulation_steps": 1,
            "num_generations": 2,
            "max_completion_length": 64,
            "max_steps": 250,
            "save_steps": 60,
            "max_grad_norm": 0.1,
            "importance_sampling_level": "sequence",
            "mask_truncated_completions": False,
            "loss_type": "dr_grpo",
            "remove_unused_columns": False,
        },
    )
)

RECIPES: dict[str, Recipe] = {recipe.name: recipe for recipe in _RECIPE_LIST}
# Recipes with a CPU-sized sibling reachable through get_recipe(name, small=True).
SMALL_VARIANTS = {"smoltldr-length": "smoltldr-length-small", "gsm8k-unsloth": "gsm8k-cpu"}

DEFAULT_RECIPE = "smoltldr-length-small"


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
    return apply_overrides(recipe, overrides)


def _variant(
    base: str, *, name: str, summary: str, description: str, training: Mapping[str, Any], **fields: Any
) -> Recipe:
    """A named variant of a catalogue recipe: what a lesson runs, so it is listed, planned and tested like the
    rest (``grpo-kit train --recipe NAME`` runs exactly the lesson's configuration). ``training`` updates the
    base's training fields; the GRPOConfig names are checked where every recipe's are, when a run is planned
    (importing the catalogue stays free of TRL). The base's evaluation during training (``eval_steps``) is not
    inherited: a lesson trains through ``trl_path.train_with_trl`` and evaluates in its own cells, before and
    after."""
    recipe = RECIPES[base]
    inherited = {k: v for k, v in recipe.training.items() if k not in EVALUATION_SCHEDULE}
    return dataclasses.replace(
        recipe,
        name=name,
        summary=summary,
        description=description,
        training={**inherited, **training},
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
