"""Drive the pinned TRL's own GRPO code on given tensors, for the parity tests.

One tiny ``trl.GRPOTrainer`` (random 2-layer Llama from ``grpo_kit.models.tiny_model``, three reward
functions whose outputs the test sets) is built once per test process (``trl_trainer()``, cached), and
each case reconfigures it instead of building a new one (a build costs seconds, a case milliseconds):

* ``configure``: sets the ``GRPOConfig`` fields ``_compute_loss`` reads from ``self.args`` and re-derives
  the attributes ``GRPOTrainer.__init__`` copies from them (``loss_type``, ``beta``, ``epsilon_low``,
  ``epsilon_high = epsilon_high or epsilon``, ``importance_sampling_level``, ``max_completion_length``),
  plus ``current_gradient_accumulation_steps``, which the HF training loop sets on every step.
  ``test_losses.py`` checks that a freshly built trainer derives ``epsilon_high`` the same way.
* ``trl_loss``: calls the real ``GRPOTrainer._compute_loss`` with the log-prob computation replaced by
  the test's leaf tensor – the only thing substituted: the model forward is not what is under test,
  and the gradient has to flow into a tensor we own to compare it.
* ``trl_advantages``: calls the real ``GRPOTrainer._generate_and_score_completions`` (the advantage
  computation is inlined there): the reward functions return the test's rewards, and the advantages and
  TRL's logged reward metrics are read from its output and ``_metrics``. Generation goes through TRL's own
  ``rollout_func`` hook with fixed token ids: what is sampled does not enter the advantages, and
  ``model.generate`` would cost 1–2 s per call on the shared CI cores (measured), 10× the whole case.
"""

from __future__ import annotations

import functools
import math
import tempfile
from collections.abc import Sequence

import torch

NUM_REWARD_FUNCS = 3
_preset_rewards: list[list[float | None]] = [[] for _ in range(NUM_REWARD_FUNCS)]


def _preset_reward(index: int):
    def reward(completions, **kwargs):
        values = list(_preset_rewards[index])
        assert len(values) == len(completions), "trl_advantages sets one reward per completion"
        return values

    reward.__name__ = f"preset_{index}"
    return reward


REWARD_FUNC_NAMES = [f"preset_{i}" for i in range(NUM_REWARD_FUNCS)]


def _fixed_rollout(prompts, trainer):
    """TRL's ``rollout_func`` contract: token ids for each prompt and its completion, plus their log-probs."""
    eos = trainer.processing_class.eos_token_id
    return {
        "prompt_ids": [[1, 2] for _ in prompts],
        "completion_ids": [[3, 4, eos] for _ in prompts],
        "logprobs": [[0.0, 0.0, 0.0] for _ in prompts],
    }


@functools.lru_cache(maxsize=1)
def trl_trainer():
    """The shared tiny GRPOTrainer (train mode, beta=0, epsilon_high unset, as GRPOConfig's defaults)."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from grpo_kit.models import tiny_model

    model, tokenizer = tiny_model(seed=0)
    args = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="grpo_kit_trl_harness_"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=4,
        report_to="none",
        use_cpu=True,
        logging_strategy="no",
        save_strategy="no",
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[_preset_reward(i) for i in range(NUM_REWARD_FUNCS)],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["one two", "three four"]}),
        processing_class=tokenizer,
    )
    trainer.model.train()
    # Set after __init__, which would only add an "experimental feature" warning; _generate reads it per call.
    trainer.rollout_func = _fixed_rollout
    trainer.harness_mixed_precision = trainer.accelerator.state.mixed_precision
    # What __init__ derived from the untouched config, before any `configure` call changes it.
    trainer.harness_initial_epsilons = (
        args.epsilon,
        args.epsilon_high,
        trainer.epsilon_low,
        trainer.epsilon_high,
    )
    return trainer


def _restore_accelerator_state(trainer) -> None:
    """Re-create accelerate's process-global state if something reset it since the trainer was built.

    Every ``TrainingArguments``/``GRPOConfig`` built in this process (by any test) calls
    ``AcceleratorState._reset_state``; the cached trainer's accelerator reads that shared state.
    """
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    if not AcceleratorState._shared_state:
        Accelerator(cpu=True, mixed_precision=trainer.harness_mixed_precision)


def configure(
    trainer,
    *,
    loss_type: str,
    beta: float = 0.0,
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    delta: float | None = None,
    importance_sampling_level: str = "token",
    use_bias_correction_kl: bool = True,
    max_completion_length: int = 4,
    gradient_accumulation_steps: int = 1,
    steps_per_generation: int | None = None,
    sapo_temperature_pos: float = 1.0,
    sapo_temperature_neg: float = 1.05,
    vespo_k_pos: float = 2.0,
    vespo_lambda_pos: float = 3.0,
    vespo_k_neg: float = 3.0,
    vespo_lambda_neg: float = 2.0,
    top_entropy_quantile: float = 1.0,
    entropy_coef: float = 0.0,
    use_adaptive_entropy: bool = False,
    entropy_coef_min: float = 0.0,
    entropy_coef_max: float = 1.0,
    entropy_coef_delta: float = 0.005,
    entropy_target: float = 0.2,
) -> None:
    """Put ``trainer`` in the state a GRPOTrainer built with these GRPOConfig fields is in during training
    (for the entropy controller: at the start of a run, before its first step)."""
    args = trainer.args
    args.loss_type = loss_type
    args.beta = beta
    args.epsilon = epsilon
    args.epsilon_high = epsilon_high
    args.delta = delta
    args.importance_sampling_level = importance_sampling_level
    args.use_bias_correction_kl = use_bias_correction_kl
    args.max_completion_length = max_completion_length
    args.gradient_accumulation_steps = gradient_accumulation_steps
    # GRPOConfig.__post_init__: steps_per_generation defaults to gradient_accumulation_steps.
    args.steps_per_generation = (
        gradient_accumulation_steps if steps_per_generation is None else steps_per_generation
    )
    args.sapo_temperature_pos = sapo_temperature_pos
    args.sapo_temperature_neg = sapo_temperature_neg
    args.vespo_k_pos = vespo_k_pos
    args.vespo_lambda_pos = vespo_lambda_pos
    args.vespo_k_neg = vespo_k_neg
    args.vespo_lambda_neg = vespo_lambda_neg
    args.top_entropy_quantile = top_entropy_quantile
    args.entropy_coef = entropy_coef
    args.use_adaptive_entropy = use_adaptive_entropy
    args.entropy_coef_min = entropy_coef_min
    args.entropy_coef_max = entropy_coef_max
    args.entropy_coef_delta = entropy_coef_delta
    args.entropy_target = entropy_target
    # What GRPOTrainer.__init__ copies from args (trl/trainer/grpo_trainer.py, "Multi-step" and above).
    trainer.loss_type = args.loss_type
    trainer.beta = args.beta
    trainer.importance_sampling_level = args.importance_sampling_level
    trainer.max_completion_length = args.max_completion_length
    trainer.epsilon_low = args.epsilon
    trainer.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
    trainer.top_entropy_quantile = args.top_entropy_quantile
    trainer.entropy_coef = args.entropy_coef
    trainer.use_adaptive_entropy = args.use_adaptive_entropy
    trainer._entropy_bonus_enabled = trainer.entropy_coef != 0.0 or trainer.use_adaptive_entropy
    trainer._last_world_entropy = float("inf")
    trainer._entropy_window_stats = None
    # Set by transformers' Trainer for each accumulation window (all windows full here).
    trainer.current_gradient_accumulation_steps = gradient_accumulation_steps


def trl_loss(
    trainer,
    per_token_logps: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    *,
    old_per_token_logps: torch.Tensor | None = None,
    ref_per_token_logps: torch.Tensor | None = None,
    num_items_in_batch: int | None = None,
    entropies: torch.Tensor | None = None,
    last_micro_batch: bool = True,
):
    """TRL's ``(loss, d loss / d per_token_logps, metrics)`` for these tensors (``configure`` first).

    With ``entropies`` ``(B, T)`` the model's entropies are those (a leaf too) and the result is
    ``(loss, d loss / d per_token_logps, d loss / d entropies, metrics)``, ``entropy`` included.
    ``last_micro_batch=False``: a micro-batch before the end of an accumulation window (accelerate's
    ``sync_gradients`` is False), where the adaptive entropy controller only accumulates.
    """
    leaf = per_token_logps.detach().clone().requires_grad_(True)  # (B, T)
    entropy_leaf = None if entropies is None else entropies.detach().clone().requires_grad_(True)  # (B, T)
    batch_size, length = leaf.shape
    inputs = {
        "prompt_ids": torch.zeros(batch_size, 1, dtype=torch.long),
        "prompt_mask": torch.ones(batch_size, 1, dtype=torch.long),
        "completion_ids": torch.zeros(batch_size, length, dtype=torch.long),
        "completion_mask": completion_mask.long(),
        "advantages": advantages,
        # TRL: accelerator.gather(loss_mask.sum()).sum(), a 0-dim long tensor
        "num_items_in_batch": torch.tensor(
            int(completion_mask.sum()) if num_items_in_batch is None else num_items_in_batch
        ),
    }
    if old_per_token_logps is not None:
        inputs["old_per_token_logps"] = old_per_token_logps
    if ref_per_token_logps is not None:
        inputs["ref_per_token_logps"] = ref_per_token_logps

    def given_logps(*args, **kwargs):
        given_entropies = torch.zeros_like(leaf) if entropy_leaf is None else entropy_leaf
        return leaf, given_entropies, None  # (log-probs, entropies, MoE aux loss)

    _restore_accelerator_state(trainer)
    trainer._metrics["train"].clear()
    trainer._get_per_token_logps_and_entropies = given_logps
    gradient_state = trainer.accelerator.gradient_state
    gradient_state._set_sync_gradients(last_micro_batch)
    try:
        loss = trainer._compute_loss(trainer.model, inputs)
    finally:
        del trainer._get_per_token_logps_and_entropies
        gradient_state._set_sync_gradients(True)
    loss.backward()
    metrics = {name: values[-1] for name, values in trainer._metrics["train"].items()}
    if entropy_leaf is None:
        metrics.pop("entropy")  # the entropy of the model's distribution: not given, so not compared
        return loss.detach(), leaf.grad, metrics
    grad = torch.zeros_like(entropy_leaf) if entropy_leaf.grad is None else entropy_leaf.grad
    return loss.detach(), leaf.grad, grad, metrics


def trl_advantages(
    trainer,
    rewards_per_func: Sequence[Sequence[float | None]],
    num_generations: int,
    *,
    reward_weights: Sequence[float] | None = None,
    scale_rewards: str = "group",
    multi_objective_aggregation: str = "sum_then_normalize",
) -> tuple[torch.Tensor, dict[str, float]]:
    """TRL's advantages ``(N,)`` and logged reward metrics for rows of ``NUM_REWARD_FUNCS`` rewards (None allowed)."""
    rows = [list(row) for row in rewards_per_func]
    assert all(len(row) == NUM_REWARD_FUNCS for row in rows)
    for index in range(NUM_REWARD_FUNCS):
        _preset_rewards[index] = [row[index] for row in rows]
    trainer.num_generations = num_generations
    # Generation aligned with the optimiser step, so TRL skips the old-log-prob forward pass (as configured by
    # GRPOConfig's defaults; `configure` may have changed them for a loss case).
    trainer.args.gradient_accumulation_steps = trainer.args.steps_per_generation = 1
    # The trainer is shared: a loss case may have left beta > 0, which would ask this adapter-less model for
    # reference log-probs. Advantages do not depend on beta.
    trainer.beta = trainer.args.beta = 0.0
    trainer.scale_rewards = scale_rewards
    trainer.multi_objective_aggregation = multi_objective_aggregation
    weights = [1.0] * NUM_REWARD_FUNCS if reward_weights is None else list(reward_weights)
    trainer.reward_weights = torch.tensor(weights, dtype=torch.float32)  # as GRPOTrainer.__init__ builds it
    _restore_accelerator_state(trainer)
    trainer._metrics["train"].clear()
    prompts = [{"prompt": f"prompt {i // num_generations}"} for i in range(len(rows))]
    output = trainer._generate_and_score_completions(prompts)
    wanted = ("reward", "reward_std", "frac_reward_zero_std", "rewards/")
    metrics = {
        name: values[-1] for name, values in trainer._metrics["train"].items() if name.startswith(wanted)
    }
    return output["advantages"], metrics


def same_float(a: float, b: float, tol: float = 1e-6) -> bool:
    """Equal within ``tol``, NaN equal to NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(1.0, abs(b))
