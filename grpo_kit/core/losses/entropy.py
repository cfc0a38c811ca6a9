"""Entropy regularization, as TRL 1.15's ``GRPOTrainer``: a static bonus, or Skywork-OR1's adaptive coefficient.

The objective becomes ``L = L_policy − c · H``, with ``H`` the *mean per-token entropy* (nats) of the policy
over the tokens the policy loss acts on: every completion token, or the high-entropy subset when
``top_entropy_quantile < 1``. ``H`` is a plain token mean for every ``loss_type`` (not the loss type's own
normalisation), divided only by ``gradient_accumulation_steps``, so ``c`` means the same thing for every loss.
Its gradient flows through the entropies (``grpo_kit.core.logprobs``, ``entropy_requires_grad=True``).

``entropy_bonus`` is that term; ``compute_loss(..., entropies=..., entropy_coef=c)`` subtracts it and logs
``policy_loss`` (the loss before the bonus). ``EntropyControl`` holds ``c`` across steps:

* static (``use_adaptive_entropy=False``): ``c = entropy_coef`` for the whole run; ``0`` turns the bonus off;
* adaptive (Skywork-OR1, https://huggingface.co/papers/2505.22312): after every optimizer step the mean
  entropy of the step's tokens ``H_step`` (one token-weighted mean over all its micro-batches) moves ``c`` by
  ``entropy_coef_delta`` – up when ``H_step ≤ entropy_target``, down otherwise – clamped to
  ``[entropy_coef_min, entropy_coef_max]``. The next step applies ``c`` only if ``H_step ≤ entropy_target``,
  else 0. Before the first step ``H_step = inf``: no bonus. ``entropy_coef`` is the initial value.

The state (``c`` and the last ``H_step``) is part of a checkpoint (``state_dict``), as TRL's
``entropy_ctrl_state.json``. Simplification: one process (TRL all-reduces the window sums across ranks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from grpo_kit.core.losses.validation import ENTROPY_FIELDS  # torch-free, beside the other loss defaults

__all__ = ["ENTROPY_FIELDS", "EntropyControl", "check_entropy_settings", "entropy_bonus"]


def entropy_bonus(
    entropies: torch.Tensor, effective_mask: torch.Tensor, gradient_accumulation_steps: int = 1
) -> torch.Tensor:
    """``H``: the mean of ``entropies`` ``(B, T)`` over ``effective_mask`` ``(B, T)``, divided by the accumulation
    steps (TRL's ``entropy_loss``, in TRL's order of operations). 0 when no token counts."""
    return (
        (entropies * effective_mask).sum() / effective_mask.sum().clamp(min=1.0) / gradient_accumulation_steps
    )


def check_entropy_settings(values: dict[str, Any]) -> None:
    """The numbers must make sense: TRL accepts anything; a negative step or an empty range would silently
    pin or invert the controller."""
    s = {**ENTROPY_FIELDS, **{k: v for k, v in values.items() if k in ENTROPY_FIELDS}}
    for name in (
        "entropy_coef",
        "entropy_coef_min",
        "entropy_coef_max",
        "entropy_coef_delta",
        "entropy_target",
    ):
        value = s[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{name}={value!r} must be a finite number.")
    if not isinstance(s["use_adaptive_entropy"], bool):
        raise TypeError(f"use_adaptive_entropy={s['use_adaptive_entropy']!r} must be True or False.")
    if s["use_adaptive_entropy"]:
        if s["entropy_coef_delta"] < 0:
            raise ValueError(
                f"entropy_coef_delta={s['entropy_coef_delta']} must be >= 0 "
                f"(TRL default {ENTROPY_FIELDS['entropy_coef_delta']})."
            )
        if not s["entropy_coef_min"] <= s["entropy_coef_max"]:
            raise ValueError(
                f"entropy_coef_min={s['entropy_coef_min']} must be <= entropy_coef_max={s['entropy_coef_max']}."
            )
        if s["entropy_target"] < 0:
            raise ValueError(
                f"entropy_target={s['entropy_target']} must be >= 0 nats; set it near the `entropy` logged "
                "in the first steps."
            )


@dataclass
class EntropyControl:
    """The entropy coefficient of a run and, in adaptive mode, its controller (TRL 1.15 semantics).

    Per micro-batch: ``applied_coef()`` (``None`` when the bonus is off) goes to ``compute_loss``, then
    ``observe(entropies, effective_mask)``; after the optimizer step: ``end_step()``.
    """

    entropy_coef: float = ENTROPY_FIELDS["entropy_coef"]
    use_adaptive_entropy: bool = ENTROPY_FIELDS["use_adaptive_entropy"]
    entropy_coef_min: float = ENTROPY_FIELDS["entropy_coef_min"]
    entropy_coef_max: float = ENTROPY_FIELDS["entropy_coef_max"]
    entropy_coef_delta: float = ENTROPY_FIELDS["entropy_coef_delta"]
    entropy_target: float = ENTROPY_FIELDS["entropy_target"]
    last_world_entropy: float = math.inf  # H of the previous optimizer step; inf before the first
    enabled: bool = field(init=False)
    _window: torch.Tensor | None = field(default=None, init=False, repr=False)  # (2,) [Σ H·m, Σ m]

    def __post_init__(self) -> None:
        check_entropy_settings(vars(self))
        self.entropy_coef = float(self.entropy_coef)
        # Fixed for the run, as TRL's _entropy_bonus_enabled: adaptive stays on even when c reaches 0.
        self.enabled = self.entropy_coef != 0.0 or self.use_adaptive_entropy

    @classmethod
    def from_config(cls, config: Any) -> EntropyControl:
        """From any object with GRPOConfig's entropy field names (``GRPOConfig``, ``GRPOLoopConfig``)."""
        return cls(**{name: getattr(config, name, default) for name, default in ENTROPY_FIELDS.items()})

    def applied_coef(self) -> float | None:
        """The coefficient every micro-batch of this optimizer step applies; ``None`` when the bonus is off."""
        if not self.enabled:
            return None
        if self.use_adaptive_entropy:
            return self.entropy_coef if self.last_world_entropy <= self.entropy_target else 0.0
        return self.entropy_coef

    def observe(self, entropies: torch.Tensor, effective_mask: torch.Tensor) -> None:
        """Add one micro-batch's entropy sum and token count ``(B, T)`` to this step's window (adaptive only)."""
        if not self.use_adaptive_entropy:
            return
        stats = torch.stack([(entropies * effective_mask).sum(), effective_mask.sum()]).detach()  # (2,)
        self._window = stats if self._window is None else self._window + stats

    def end_step(self) -> None:
        """After the optimizer step: move the adaptive coefficient (TRL does this on the step's last micro-batch)."""
        if not self.use_adaptive_entropy or self._window is None:
            return
        world_entropy = (self._window[0] / self._window[1].clamp(min=1.0)).item()
        if world_entropy <= self.entropy_target:
            self.entropy_coef = min(self.entropy_coef + self.entropy_coef_delta, self.entropy_coef_max)
        else:
            self.entropy_coef = max(self.entropy_coef - self.entropy_coef_delta, self.entropy_coef_min)
        self.last_world_entropy = world_entropy
        self._window = None

    def discard_step(self) -> None:
        """A skipped (bad) step: forget its window, as if it never ran."""
        self._window = None

    def state_dict(self) -> dict[str, float]:
        """What a checkpoint stores (TRL's ``entropy_ctrl_state.json``): plain floats, exact through JSON."""
        return {"entropy_coef": self.entropy_coef, "last_world_entropy": self.last_world_entropy}

    def load_state_dict(self, state: dict[str, float]) -> None:
        self.entropy_coef = float(state["entropy_coef"])
        self.last_world_entropy = float(state["last_world_entropy"])
        self._window = None
