"""``compute_loss``: one GRPO micro-batch loss, step by step, equal to TRL 1.15.0's ``_compute_loss``.

    1. importance ratio r = exp(log π_θ − log π_old), per token or per sequence     (policy.py)
    2. KL penalty k3(π_θ, π_ref), optionally × r                                   (grpo_kit/core/kl.py)
    3. per-token objective of the loss type                                         (policy.py)
    4. + β · KL
    5. average with the loss type's normalisation                                   (aggregation.py)
    6. − c · H, the entropy bonus, when ``entropy_coef`` is given                   (entropy.py)

"Equal" means value *and* gradient with respect to ``per_token_logps`` (and ``entropies``), for one process in
training mode without vLLM importance sampling; ``tests/grpo_kit/test_losses.py`` proves it against the
installed TRL, with and without the high-entropy token mask and the entropy bonus. The entropies need the
model's whole distribution: the loop computes them (``grpo_kit.core.logprobs``) and passes them in.

TRL behaviours reproduced on purpose (parity first), each documented where it happens:

* ``cispo`` with ``epsilon_high=None`` caps the ratio at ``epsilon`` = 0.2 (``compute_loss`` warns, a
  configuration refuses it: ``validation.check_cispo_cap``), and ``cispo_clip_ratio`` only counts tokens
  with A > 0.
* ``clip_ratio/*`` are measured on the ratio *after* the ``delta`` cap.
* Sequence-level metrics (``(B, 1)`` tensors, ``vespo/phi_seq_mean``) average over every row, fully masked
  ones included; a token-level tensor with T = 1 is averaged the same way (``metrics.py``).
* ``dr_grpo`` divides by the *micro*-batch size × ``max_completion_length``; ``dapo``/``cispo``/``vespo``
  by the generation batch's token count × ``gradient_accumulation_steps / steps_per_generation``.
* At sequence level the KL bias correction multiplies each token's KL by its sequence's ratio.
* SAPO picks its temperature with A > 0, VESPO its (k, λ) with A ≥ 0; both build those per-row constants
  in float32 (``torch.where`` with Python floats), whatever the log-probs' dtype.
"""

from __future__ import annotations

import warnings

import torch

from grpo_kit.core.kl import bias_corrected_kl, k3_kl
from grpo_kit.core.losses.aggregation import aggregate_loss
from grpo_kit.core.losses.entropy import entropy_bonus
from grpo_kit.core.losses.metrics import global_masked_mean
from grpo_kit.core.losses.policy import PolicyInputs, PolicySettings, importance_log_weights
from grpo_kit.core.losses.registry import LOSS_TYPES
from grpo_kit.core.losses.validation import LossSettings, check_loss_options


def _check_tensors(
    per_token_logps: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    old_per_token_logps: torch.Tensor | None,
    ref_per_token_logps: torch.Tensor | None,
    beta: float,
) -> None:
    if not isinstance(per_token_logps, torch.Tensor) or per_token_logps.dim() != 2:
        raise ValueError(
            "per_token_logps must be a (B, T) tensor of log π_θ for each completion token; got "
            f"{getattr(per_token_logps, 'shape', type(per_token_logps).__name__)}."
        )
    if not per_token_logps.is_floating_point():
        raise TypeError("per_token_logps must be a floating-point tensor (log-probabilities).")
    shape = tuple(per_token_logps.shape)
    if not isinstance(completion_mask, torch.Tensor) or tuple(completion_mask.shape) != shape:
        raise ValueError(
            f"completion_mask must have the shape of per_token_logps {shape}; got "
            f"{tuple(getattr(completion_mask, 'shape', ()))}. Pass the (B, T) mask of the completion tokens."
        )
    if not bool(((completion_mask == 0) | (completion_mask == 1)).all()):
        raise ValueError("completion_mask must contain only 0 and 1 (1 = a completion token that counts).")
    if not isinstance(advantages, torch.Tensor) or tuple(advantages.shape) != (shape[0],):
        raise ValueError(
            f"advantages must have shape (B,) = ({shape[0]},), one per completion; got "
            f"{tuple(getattr(advantages, 'shape', ()))}. Use grpo_kit.core.advantages.compute_advantages(...)."
        )
    for name, tensor in (
        ("old_per_token_logps", old_per_token_logps),
        ("ref_per_token_logps", ref_per_token_logps),
    ):
        if tensor is not None and tuple(tensor.shape) != shape:
            raise ValueError(
                f"{name} must have the shape of per_token_logps {shape}; got {tuple(tensor.shape)}. "
                "Compute it on the same padded completions."
            )
    if beta != 0.0 and ref_per_token_logps is None:
        raise ValueError(
            f"beta={beta} adds a KL penalty to a reference model; pass ref_per_token_logps (the reference "
            "model's log-probs of the same tokens) or set beta=0.0."
        )


def compute_loss(
    per_token_logps: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    *,
    old_per_token_logps: torch.Tensor | None = None,
    ref_per_token_logps: torch.Tensor | None = None,
    loss_type: str = LossSettings.loss_type,
    beta: float = LossSettings.beta,
    epsilon: float = LossSettings.epsilon,
    epsilon_high: float | None = LossSettings.epsilon_high,
    delta: float | None = LossSettings.delta,
    importance_sampling_level: str = LossSettings.importance_sampling_level,
    use_bias_correction_kl: bool = LossSettings.use_bias_correction_kl,
    max_completion_length: int | None = LossSettings.max_completion_length,
    num_items_in_batch: float | torch.Tensor | None = None,
    gradient_accumulation_steps: int = LossSettings.gradient_accumulation_steps,
    steps_per_generation: int | None = None,
    sapo_temperature_pos: float = LossSettings.sapo_temperature_pos,
    sapo_temperature_neg: float = LossSettings.sapo_temperature_neg,
    vespo_k_pos: float = LossSettings.vespo_k_pos,
    vespo_lambda_pos: float = LossSettings.vespo_lambda_pos,
    vespo_k_neg: float = LossSettings.vespo_k_neg,
    vespo_lambda_neg: float = LossSettings.vespo_lambda_neg,
    entropies: torch.Tensor | None = None,
    entropy_mask: torch.Tensor | None = None,
    entropy_coef: float | None = None,
    settings: LossSettings | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The GRPO loss of one micro-batch and TRL's metrics for it.

    Args:
        per_token_logps: ``(B, T)`` log π_θ of each completion token; the loss is differentiated through it.
        advantages: ``(B,)`` one advantage per completion (``compute_advantages``).
        completion_mask: ``(B, T)`` 1 for tokens that count, 0 for padding (rows may be all 0).
        old_per_token_logps: ``(B, T)`` log π_old of the sampling policy; ``None`` means
            ``per_token_logps.detach()`` (on-policy: ``num_iterations=1``).
        ref_per_token_logps: ``(B, T)`` reference log-probs; required when ``beta != 0``.
        loss_type: a key of ``LOSS_TYPES``: grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo, vespo.
        beta: KL coefficient (k3 estimator); 0 disables the KL term and its metric.
        epsilon, epsilon_high: clip range [1 − ε, 1 + ε_high]; ``epsilon_high=None`` means ``epsilon``. For
            ``cispo``, ``epsilon_high`` is the absolute ratio cap ε_max – and TRL's fallback to ``epsilon`` (0.2)
            is a trap this function reproduces for parity (a configuration refuses it: ``check_cispo_cap``).
        delta: optional upper cap on the ratio in the clipped losses (INTELLECT-2 two-sided clipping).
        importance_sampling_level: "token" or "sequence" (GSPO); luspo at "token" and vespo at "sequence"
            warn with TRL's advice and compute what TRL computes.
        use_bias_correction_kl: multiply the KL term by the importance ratio (DeepSeek-V3.2).
        max_completion_length: the constant of ``dr_grpo`` (required for it).
        num_items_in_batch: active tokens in the whole generation batch (``dapo``/``cispo``/``vespo``);
            ``None`` means ``completion_mask.sum()``.
        gradient_accumulation_steps: micro-batches per optimiser step; the loss is pre-divided for them.
        steps_per_generation: micro-batches per generation batch; ``None`` means ``gradient_accumulation_steps``.
        sapo_temperature_pos, sapo_temperature_neg, vespo_*: the SAPO / VESPO shape parameters.
        entropies: ``(B, T)`` per-token entropies of π_θ (nats); logged as ``entropy``, and differentiated
            through by the bonus (pass them with a graph: ``grpo_kit.core.logprobs``, ``entropy_requires_grad``).
        entropy_mask: ``(B, T)`` bool, the high-entropy tokens (``grpo_kit.core.logprobs.entropy_mask``,
            ``top_entropy_quantile < 1``): the per-token loss and the bonus act only on them, while the
            normalisation and the metrics still count every token of ``completion_mask`` (TRL).
        entropy_coef: ``None`` = no bonus; a number c (0 included: adaptive control while it is gated off)
            subtracts ``c · H`` (``losses.entropy.entropy_bonus``) and logs ``policy_loss``, the loss before it.
        settings: a :class:`LossSettings`; when given, it supplies every hyper-parameter above (the keyword
            defaults above are its defaults, TRL GRPOConfig's).

    Returns:
        ``(loss, metrics)``: a 0-dim tensor to call ``.backward()`` on, and floats under TRL's names –
        ``kl`` (when ``beta != 0``), ``clip_ratio/{low_mean,high_mean,region_mean,low_min,high_max}``
        (grpo, bnpo, dr_grpo, dapo, luspo), ``cispo_clip_ratio``, ``vespo/phi_seq_mean``, ``entropy`` (when
        ``entropies`` are given), ``policy_loss`` (when ``entropy_coef`` is).
    """
    if settings is None:  # the keywords above, gathered in the one carrier
        settings = LossSettings(
            loss_type=loss_type,
            beta=beta,
            epsilon=epsilon,
            epsilon_high=epsilon_high,
            delta=delta,
            importance_sampling_level=importance_sampling_level,
            use_bias_correction_kl=use_bias_correction_kl,
            max_completion_length=max_completion_length,
            gradient_accumulation_steps=gradient_accumulation_steps,
            sapo_temperature_pos=sapo_temperature_pos,
            sapo_temperature_neg=sapo_temperature_neg,
            vespo_k_pos=vespo_k_pos,
            vespo_lambda_pos=vespo_lambda_pos,
            vespo_k_neg=vespo_k_neg,
            vespo_lambda_neg=vespo_lambda_neg,
        )
    return _micro_batch_loss(
        settings,
        per_token_logps,
        advantages,
        completion_mask,
        old_per_token_logps,
        ref_per_token_logps,
        num_items_in_batch,
        steps_per_generation,
        entropies,
        entropy_mask,
        entropy_coef,
    )


def _micro_batch_loss(
    s: LossSettings,
    per_token_logps: torch.Tensor,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    old_per_token_logps: torch.Tensor | None,
    ref_per_token_logps: torch.Tensor | None,
    num_items_in_batch: float | torch.Tensor | None,
    steps_per_generation: int | None,
    entropies: torch.Tensor | None,
    entropy_mask: torch.Tensor | None,
    entropy_coef: float | None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """``compute_loss`` on its settings ``s``: the checks, then the six steps of the module docstring."""
    _check_tensors(
        per_token_logps, advantages, completion_mask, old_per_token_logps, ref_per_token_logps, s.beta
    )
    _check_entropy_inputs(per_token_logps, entropies, entropy_mask, entropy_coef)
    _check_settings(s, per_token_logps.size(1), steps_per_generation)

    loss_spec = LOSS_TYPES[s.loss_type]
    # An integer mask, as TRL's: token counts stay exact integers whatever the log-probs' dtype (bf16!).
    mask = completion_mask.long()  # (B, T)
    advantages = advantages.unsqueeze(1)  # (B, 1)
    if old_per_token_logps is None:
        old_per_token_logps = per_token_logps.detach()  # on-policy: ratio 1, gradient ∇log π_θ

    # 1. importance ratio
    log_ratio = per_token_logps - old_per_token_logps  # (B, T)
    log_weights = importance_log_weights(log_ratio, mask, s.importance_sampling_level)  # (B, T) or (B, 1)
    ratio = torch.exp(log_weights)  # (B, T) or (B, 1)

    # 2. KL to the reference model
    if s.beta != 0.0:
        per_token_kl = k3_kl(per_token_logps, ref_per_token_logps)  # (B, T)
        if s.use_bias_correction_kl:
            per_token_kl = bias_corrected_kl(per_token_kl, ratio)  # (B, T)

    # 3. the loss type's per-token objective
    inputs = PolicyInputs(per_token_logps, log_ratio, ratio, advantages, mask)
    term = loss_spec.objective(inputs, PolicySettings.from_loss_settings(s))
    per_token_loss = term.per_token_loss  # (B, T) or (B, 1)
    if entropy_mask is not None:  # only the high-entropy "forking" tokens carry the policy gradient
        per_token_loss = per_token_loss * entropy_mask  # (B, T)

    # 4. KL penalty
    if s.beta != 0.0:
        per_token_loss = per_token_loss + s.beta * per_token_kl  # (B, T)

    # 5. normalisation
    if num_items_in_batch is not None:
        num_items_in_batch = _token_count(num_items_in_batch, per_token_logps.device)  # 0-dim
    # TRL's policy_loss is the value before the division by the accumulation steps (except for the
    # generation-batch normalisation, whose normaliser already includes them): aggregate first, divide after.
    global_norm = loss_spec.normalization == "global_token_mean"
    loss = aggregate_loss(
        per_token_loss,
        mask,
        loss_spec.normalization,
        gradient_accumulation_steps=s.gradient_accumulation_steps if global_norm else 1,
        max_completion_length=s.max_completion_length,
        num_items_in_batch=num_items_in_batch,
        steps_per_generation=steps_per_generation,
    )  # 0-dim
    policy_loss = loss.detach()
    if not global_norm:
        loss = loss / s.gradient_accumulation_steps

    # 6. entropy bonus: − c · mean per-token entropy over the tokens the policy loss acts on
    metrics: dict[str, float] = {}
    if entropy_coef is not None:
        effective_mask = mask if entropy_mask is None else mask * entropy_mask  # (B, T)
        loss = loss - entropy_coef * entropy_bonus(entropies, effective_mask, s.gradient_accumulation_steps)
        metrics["policy_loss"] = policy_loss.item()

    if s.beta != 0.0:
        metrics["kl"] = global_masked_mean(per_token_kl.detach(), mask)
    if entropies is not None:
        metrics["entropy"] = global_masked_mean(entropies.detach(), mask)
    metrics.update(term.metrics)
    return loss, metrics


def _check_settings(s: LossSettings, num_positions: int, steps_per_generation: int | None) -> None:
    """The hyper-parameter rules of every call (``check_loss_options``), and the cispo cap below 1 warned."""
    check_loss_options(
        loss_type=s.loss_type,
        importance_sampling_level=s.importance_sampling_level,
        beta=s.beta,
        epsilon=s.epsilon,
        epsilon_high=s.epsilon_high,
        delta=s.delta,
        max_completion_length=s.max_completion_length,
    )
    if s.max_completion_length is not None and num_positions > s.max_completion_length:
        raise ValueError(
            f"the completions have {num_positions} token positions but max_completion_length="
            f"{s.max_completion_length}; pass the max_completion_length the completions were generated with."
        )
    if s.gradient_accumulation_steps < 1 or (steps_per_generation is not None and steps_per_generation < 1):
        raise ValueError("gradient_accumulation_steps and steps_per_generation must be positive integers.")
    if s.loss_type == "cispo" and (s.epsilon if s.epsilon_high is None else s.epsilon_high) < 1:
        warnings.warn(
            "loss_type='cispo' with an importance-ratio cap below 1 (epsilon_high unset falls back to epsilon) "
            "scales every on-policy token down; set epsilon_high, e.g. 5.0.",
            UserWarning,
            stacklevel=4,  # compute_loss's caller
        )


def _token_count(num_items_in_batch: float | torch.Tensor, device: torch.device) -> torch.Tensor:
    """``num_items_in_batch`` as a 0-dim tensor on ``device``, refused unless one non-negative number."""
    num_items_in_batch = torch.as_tensor(num_items_in_batch, device=device)
    if num_items_in_batch.numel() != 1 or bool(num_items_in_batch < 0):
        raise ValueError(
            "num_items_in_batch must be one non-negative number (tokens in the generation batch)."
        )
    return num_items_in_batch.reshape(())


def _check_entropy_inputs(
    per_token_logps: torch.Tensor,
    entropies: torch.Tensor | None,
    entropy_mask: torch.Tensor | None,
    entropy_coef: float | None,
) -> None:
    shape = tuple(per_token_logps.shape)
    for name, tensor in (("entropies", entropies), ("entropy_mask", entropy_mask)):
        if tensor is not None and (not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != shape):
            raise ValueError(
                f"{name} must have the shape of per_token_logps {shape}; got "
                f"{tuple(getattr(tensor, 'shape', ()))}. Compute it on the same padded completions."
            )
    if entropy_coef is not None and entropies is None:
        raise ValueError(
            f"entropy_coef={entropy_coef} adds an entropy bonus; pass the per-token entropies "
            "(grpo_kit.core.logprobs.per_token_logps(..., compute_entropy=True, entropy_requires_grad=True))."
        )
