"""Greedy evaluation decodes its prompts in length-sorted batches; the answers must not depend on that.

``generate`` sorts greedy prompts by length and decodes them ``batch_size`` at a time, left-padded; the answers come
back in the prompts' order. Batching is memory and speed only: each answer must be the same token for token as
decoding that prompt alone (the per-prompt decode the evaluations used before batching). On the embedded model, with
the main job's held-out rows, the real chat template, prompts of different lengths (so real left padding), and a
trained-looking LoRA adapter merged for decoding.
"""

from __future__ import annotations

import pytest
import torch

from grpo_kit.rollout.generation import Decoding, _decoding_order, generate, prompt_texts


def test_greedy_prompts_are_decoded_longest_first_and_returned_in_order(tiny):
    model, tokenizer = tiny
    prompts = ["a", "a b c d e f g h", "a b c", "a b c d e f g h i j k l m n"]
    assert _decoding_order(tokenizer, prompt_texts(tokenizer, prompts)) == [3, 1, 2, 0]
    decoding = Decoding(max_new_tokens=4, greedy=True)
    batched = generate(model, tokenizer, prompts, 1, decoding.replace(batch_size=4))
    alone = [generate(model, tokenizer, [p], 1, decoding.replace(batch_size=1))[0] for p in prompts]
    assert [g[0].ids for g in batched] == [g[0].ids for g in alone]


@pytest.mark.slow
def test_one_batch_answers_equal_one_prompt_at_a_time_on_the_embedded_model():
    from grpo_kit.models import load_model
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.runs.held_out import held_out_rows, transfer_rows

    recipe = get_recipe("smoltldr-length-small")
    rows = held_out_rows(recipe, 6) + transfer_rows(recipe, 6)
    prompts = [row["prompt"] for row in rows]
    model, tokenizer = load_model(recipe.model, lora={"r": 16, "lora_alpha": 32, "lora_dropout": 0.0}, seed=0)
    with torch.no_grad():  # an adapter that changes the answers, as after training
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.02, generator=torch.Generator().manual_seed(len(name)))
    lengths = {len(tokenizer(t)["input_ids"]) for t in prompt_texts(tokenizer, prompts)}
    assert len(lengths) > 3  # prompts of different lengths: the batch is left-padded
    decoding = Decoding.from_training(recipe.training, greedy=True).replace(max_new_tokens=24)

    batched = generate(model, tokenizer, prompts, 1, decoding.replace(batch_size=len(prompts)))
    alone = [generate(model, tokenizer, [p], 1, decoding.replace(batch_size=1))[0] for p in prompts]

    assert [g[0].ids for g in batched] == [g[0].ids for g in alone]
    assert len({tuple(g[0].ids) for g in batched}) > 1  # real, different answers
