"""The model a run trains: the recipe's model (a name, path or alias, ``"tiny"`` included: see
``grpo_kit.models``) with the recipe's LoRA adapter, seeded by the run's seed. A recipe with
``quantization="4bit"`` (QLoRA) gets a bitsandbytes NF4 base, on CPU or CUDA, prepared for k-bit training
(``peft.prepare_model_for_kbit_training``: the norms and embeddings in fp32, input gradients on) before
the adapter is added."""

from __future__ import annotations

from typing import Any

from grpo_kit.config.rules import training_value
from grpo_kit.recipes.recipe import Recipe

__all__ = ["load_recipe_model"]


def load_recipe_model(recipe: Recipe) -> tuple[Any, Any]:
    """The recipe's model and tokenizer, with its LoRA adapter."""
    from grpo_kit import models

    model, tokenizer = models.load_model(recipe.model, quantization=recipe.quantization)
    seed = int(training_value(recipe.training, "seed"))
    if recipe.trainable_parts:  # a vision-language model: only the chosen parts train (grpo_kit.models.vlm)
        from grpo_kit.models.vlm import select_trainable

        return select_trainable(model, recipe.trainable_parts, lora=recipe.lora, seed=seed), tokenizer
    if recipe.quantization is not None:
        from peft import prepare_model_for_kbit_training

        # Checkpointing here only when the recipe asks for it; the path that trains applies its own setting
        # (the loop's start_run, Trainer's gradient_checkpointing) either way.
        asked = recipe.training.get("gradient_checkpointing") is True
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=asked)
    if recipe.lora is not None:
        # LoRA's A matrices start random: seed them, or the same recipe and seed give another run each time.
        model = models.add_lora(model, recipe.lora.to_peft_config(), seed=seed)
    return model, tokenizer
