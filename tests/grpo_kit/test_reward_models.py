"""Reward models on every path: a tiny random sequence-classification model scores the same on the loop and TRL.

The model is a random 2-layer ``LlamaForSequenceClassification`` with the SmolLM2 tokenizer, saved to a
folder so it is also given by *path*, as a user gives a Hub id. Its reward is checked against the model's
own logit for the rendered text, against TRL's ``_calculate_rewards`` on the same completions, and it
trains a step on the standalone loop and on the TRL path.
"""

from __future__ import annotations

import pytest
import torch
from test_loop import LORA, prompts, small_config

from grpo_kit.artifacts.metrics_log import read_metrics
from grpo_kit.loop.training import train
from grpo_kit.models import tiny_model
from grpo_kit.rollout.reward_models import RewardModelFunc, as_reward_funcs, unwrap_for_trl

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def tiny_reward_model(seed: int = 1):
    from transformers import LlamaForSequenceClassification

    policy, tokenizer = tiny_model(seed=0)
    config = policy.config.__class__(**{**policy.config.to_dict(), "num_labels": 1})
    config.architectures = ["LlamaForSequenceClassification"]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForSequenceClassification(config)
    return model, tokenizer


@pytest.fixture(scope="module")
def reward_model_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-rm")
    model, tokenizer = tiny_reward_model()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


TEXT_PROMPTS = ["Question 1:", "Question 1:", "Q2", "Q2"]
TEXT_COMPLETIONS = [" yes", " no, certainly not", " 42", ""]


def direct_logit(model, tokenizer, text: str) -> float:
    """The model's logit for one text, unbatched: what the reward must be."""
    encoded = tokenizer(text, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        return model.eval()(**encoded).logits[0, 0].item()


def test_the_reward_is_the_models_logit_for_the_rendered_text():
    model, tokenizer = tiny_reward_model()
    func = RewardModelFunc(model, tokenizer, batch_size=3)  # two batches, padded on the right
    assert func.__name__ == "LlamaForSequenceClassification"  # an unsaved model has no id: its class
    scores = func(prompts=TEXT_PROMPTS, completions=TEXT_COMPLETIONS)
    expected = [direct_logit(model, tokenizer, p + c) for p, c in zip(TEXT_PROMPTS, TEXT_COMPLETIONS)]
    assert scores == pytest.approx(expected, abs=1e-5)
    assert len(set(scores)) > 1  # a random model still tells texts apart
    # Chat prompts: the chat template over prompt + completion messages.
    chat_prompt = [{"role": "user", "content": "Hi?"}]
    completion = [{"role": "assistant", "content": "Hello."}]
    text = tokenizer.apply_chat_template(chat_prompt + completion, tokenize=False)
    assert func(prompts=[chat_prompt], completions=[completion]) == pytest.approx(
        [direct_logit(model, tokenizer, text)], abs=1e-5
    )
    assert not model.training


def test_the_same_rewards_as_trl_on_the_same_completions(reward_model_dir, tmp_path):
    """The TRL path hands TRL the model itself; TRL's _calculate_rewards and ours agree exactly."""
    from datasets import Dataset

    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.trainers import trl_path

    policy, tokenizer = tiny_model(seed=0)
    recipe = get_recipe(
        "smoltldr-length-small",
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        eval_steps=None,
    )
    trainer = trl_path.build_trainer(
        recipe,
        model=policy,
        tokenizer=tokenizer,
        train_dataset=Dataset.from_dict({"prompt": ["Question 1:", "Q2"]}),
        reward_funcs=[str(reward_model_dir)],
        output_dir=tmp_path,
        max_steps=1,
        device="cpu",
    )
    assert isinstance(trainer.reward_funcs[0], torch.nn.Module)  # passed through: TRL scores it
    assert trainer.reward_func_names == [reward_model_dir.name]
    inputs = [{"prompt": p} for p in TEXT_PROMPTS]
    theirs = trainer._calculate_rewards(inputs, TEXT_PROMPTS, TEXT_COMPLETIONS, [[1]] * 4)[:, 0]
    [ours] = as_reward_funcs([str(reward_model_dir)])
    assert ours.__name__ == reward_model_dir.name
    assert ours(prompts=TEXT_PROMPTS, completions=TEXT_COMPLETIONS) == theirs.tolist()


def test_a_reward_model_trains_on_the_loop_and_the_trl_path(reward_model_dir, tmp_path):
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.trainers import trl_path

    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    rm, rm_tokenizer = tiny_reward_model()
    result = train(
        model,
        tokenizer,
        prompts(),
        [rm],
        small_config(tmp_path / "loop", max_steps=1),
        reward_processing_classes=[rm_tokenizer],
    )
    assert result.global_step == 1
    [record] = read_metrics(tmp_path / "loop" / "metrics.jsonl")
    name = RewardModelFunc(rm, rm_tokenizer).__name__
    assert isinstance(record[f"rewards/{name}/mean"], float) and record["reward_std"] > 0

    recipe = get_recipe(
        "smoltldr-length-small",
        rewards=[f"model:{reward_model_dir}"],
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        save_steps=1000,
        eval_steps=None,
    )
    trl_result = trl_path.train_with_trl(
        recipe,
        model_loader=lambda name, **kw: tiny_model(seed=0),
        output_dir=tmp_path / "trl",
        max_steps=1,
        device="cpu",
    )
    assert trl_result.global_step == 1
    assert f"rewards/{reward_model_dir.name}/mean" in trl_result.log_history[0]


def test_a_model_that_is_not_sequence_classification_is_refused_before_training(tmp_path):
    causal, tokenizer = tiny_model(seed=0)
    with pytest.raises(TypeError, match="LlamaForCausalLM, not a sequence-classification model"):
        as_reward_funcs([causal], [tokenizer])
    causal.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    with pytest.raises(TypeError, match="LlamaForCausalLM checkpoint, not a sequence-classification"):
        as_reward_funcs(str(tmp_path))
    with pytest.raises(ValueError, match="reward_processing_classes"):
        as_reward_funcs([causal], [tokenizer, tokenizer])


def test_functions_and_models_mix_and_unwrap_for_trl():
    from rewards import correctness_reward

    model, tokenizer = tiny_reward_model()
    funcs = as_reward_funcs([correctness_reward, model], [None, tokenizer])
    assert funcs[0] is correctness_reward and isinstance(funcs[1], RewardModelFunc)
    unwrapped, classes = unwrap_for_trl(funcs)
    assert unwrapped == [correctness_reward, model] and classes == [None, tokenizer]
    assert unwrap_for_trl([correctness_reward]) == ([correctness_reward], None)
