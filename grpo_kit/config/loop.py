"""``GRPOLoopConfig``: the settings of the standalone loop (``grpo_kit.loop.training.train``), checked before any model
loads.

Field names are TRL ``GRPOConfig``'s wherever they mean the same thing; each field's default, range and help are
declared in ``grpo_kit.config.declarations``. The rules every path shares run in
``grpo_kit.config.rules.check_grpo_settings``; the few only this loop needs (whole steps, the epochs behind
``max_steps=-1``, the scheduler name) are here.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields
from typing import Any, Protocol

from grpo_kit.config.declarations import ON_REWARD_ERROR, loop_field
from grpo_kit.config.rules import check_grpo_settings, check_report_to, evaluation_interval
from grpo_kit.core.losses.entropy import check_entropy_settings
from grpo_kit.core.losses.validation import ENTROPY_FIELDS

__all__ = ["ON_REWARD_ERROR", "GRPOLoopConfig", "to_loop_config"]


class TrainingFields(Protocol):
    """What ``to_loop_config`` reads of a recipe (``grpo_kit.recipes.Recipe``): its name and GRPO fields."""

    name: str

    def grpo_training(self) -> dict[str, Any]: ...


@dataclass
class GRPOLoopConfig:
    """Settings of the standalone loop. Every name that exists in TRL's ``GRPOConfig`` means the same thing
    and has the same default unless its declaration says why not. Validated in ``__post_init__``, before any
    model is loaded.

    Each field's default and help are declared once, in ``grpo_kit.config.declarations.SETTINGS`` (read a
    field's help with ``GRPOLoopConfig.__dataclass_fields__["beta"].metadata["help"]``, as TRL's fields)."""

    # --- run ---
    output_dir: str = loop_field("output_dir")
    max_steps: int = loop_field("max_steps")
    num_train_epochs: float = loop_field("num_train_epochs")
    seed: int = loop_field("seed")
    shuffle_dataset: bool = loop_field("shuffle_dataset")
    logging_steps: int = loop_field("logging_steps")
    save_steps: int = loop_field("save_steps")
    eval_strategy: str = loop_field("eval_strategy")
    eval_steps: int | None = loop_field("eval_steps")
    save_total_limit: int | None = loop_field("save_total_limit")
    resume_from_checkpoint: str | bool | None = loop_field("resume_from_checkpoint")
    disable_tqdm: bool = loop_field("disable_tqdm")
    report_to: str | list[str] | None = loop_field("report_to")  # noqa: RUF009 (a field)
    log_completions: bool = loop_field("log_completions")
    num_completions_to_print: int | None = loop_field("num_completions_to_print")
    max_bad_steps: int = loop_field("max_bad_steps")
    on_reward_error: str = loop_field("on_reward_error")
    reward_timeout: float | None = loop_field("reward_timeout")
    no_signal_steps: int = loop_field("no_signal_steps")
    stop_on_no_signal: bool = loop_field("stop_on_no_signal")

    # --- batch and generation ---
    num_generations: int = loop_field("num_generations")
    per_device_train_batch_size: int = loop_field("per_device_train_batch_size")
    gradient_accumulation_steps: int = loop_field("gradient_accumulation_steps")
    max_completion_length: int = loop_field("max_completion_length")
    temperature: float = loop_field("temperature")
    top_p: float = loop_field("top_p")
    top_k: int = loop_field("top_k")
    min_p: float | None = loop_field("min_p")
    repetition_penalty: float = loop_field("repetition_penalty")
    chat_template_kwargs: dict[str, Any] | None = loop_field("chat_template_kwargs")  # noqa: RUF009 (a field)
    bf16: bool = loop_field("bf16")
    bf16_sampling: bool = loop_field("bf16_sampling")
    gradient_checkpointing: bool = loop_field("gradient_checkpointing")

    # --- optimisation ---
    learning_rate: float = loop_field("learning_rate")
    lr_scheduler_type: str = loop_field("lr_scheduler_type")
    warmup_steps: float = loop_field("warmup_steps")
    weight_decay: float = loop_field("weight_decay")
    adam_beta1: float = loop_field("adam_beta1")
    adam_beta2: float = loop_field("adam_beta2")
    adam_epsilon: float = loop_field("adam_epsilon")
    max_grad_norm: float = loop_field("max_grad_norm")

    # --- GRPO ---
    beta: float = loop_field("beta")
    num_iterations: int = loop_field("num_iterations")
    epsilon: float = loop_field("epsilon")
    epsilon_high: float | None = loop_field("epsilon_high")
    delta: float | None = loop_field("delta")
    loss_type: str = loop_field("loss_type")
    importance_sampling_level: str = loop_field("importance_sampling_level")
    scale_rewards: str | bool = loop_field("scale_rewards")
    reward_weights: list[float] | None = loop_field("reward_weights")  # noqa: RUF009 (a field)
    multi_objective_aggregation: str = loop_field("multi_objective_aggregation")
    mask_truncated_completions: bool = loop_field("mask_truncated_completions")
    top_entropy_quantile: float = loop_field("top_entropy_quantile")
    use_bias_correction_kl: bool = loop_field("use_bias_correction_kl")
    entropy_coef: float = loop_field("entropy_coef")
    use_adaptive_entropy: bool = loop_field("use_adaptive_entropy")
    entropy_coef_min: float = loop_field("entropy_coef_min")
    entropy_coef_max: float = loop_field("entropy_coef_max")
    entropy_coef_delta: float = loop_field("entropy_coef_delta")
    entropy_target: float = loop_field("entropy_target")
    sapo_temperature_pos: float = loop_field("sapo_temperature_pos")
    sapo_temperature_neg: float = loop_field("sapo_temperature_neg")
    vespo_k_pos: float = loop_field("vespo_k_pos")
    vespo_lambda_pos: float = loop_field("vespo_lambda_pos")
    vespo_k_neg: float = loop_field("vespo_k_neg")
    vespo_lambda_neg: float = loop_field("vespo_lambda_neg")

    def __post_init__(self) -> None:
        # The rules every path shares (every setting's declared range, group size, whole groups, loss type,
        # advantages): grpo_kit.config.rules. What follows is only what the loop adds.
        check_grpo_settings({f.name: getattr(self, f.name) for f in fields(self)})
        for name in (
            "logging_steps",
            "save_steps",
        ):  # TRL's fraction of the run (a float < 1) is not the loop's
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int (got {value!r} of type {type(value).__name__}).")
        check_report_to(self.report_to)
        schedule = {"eval_steps": self.eval_steps, "logging_steps": self.logging_steps}
        if self.eval_strategy != "no":  # a field's default is not a choice: eval_steps alone means "steps"
            schedule["eval_strategy"] = self.eval_strategy
        interval = evaluation_interval(schedule)
        self.eval_strategy, self.eval_steps = ("no", None) if interval is None else ("steps", interval)
        self.scale_rewards = {True: "group", False: "none"}.get(self.scale_rewards, self.scale_rewards)
        if self.max_steps == -1 and not self.num_train_epochs > 0:
            raise ValueError("with max_steps=-1 the run length comes from num_train_epochs; set it > 0.")
        check_entropy_settings({name: getattr(self, name) for name in ENTROPY_FIELDS})
        if self.reward_weights is not None:
            if isinstance(self.reward_weights, (str, bytes)) or not all(
                isinstance(w, (int, float)) and not isinstance(w, bool) for w in self.reward_weights
            ):
                raise TypeError(
                    "reward_weights must be a list of numbers, one per reward function (or None)."
                )
            self.reward_weights = [float(w) for w in self.reward_weights]
        _check_scheduler(self.lr_scheduler_type)

    @property
    def prompts_per_generation(self) -> int:
        """Distinct prompts in one generation batch."""
        return self.per_device_train_batch_size * self.gradient_accumulation_steps // self.num_generations


def _check_scheduler(name: str) -> None:
    from transformers.trainer_utils import SchedulerType

    valid = [s.value for s in SchedulerType]
    if name not in valid:
        raise ValueError(f"lr_scheduler_type={name!r} is unknown; use one of {valid}.")


def to_loop_config(recipe: TrainingFields, **overrides: Any) -> GRPOLoopConfig:
    """A :class:`GRPOLoopConfig` from the recipe's training fields with the same names.

    GRPOConfig fields the standalone loop has no counterpart for (``optim``, ...) are left out with a
    warning that names them; ``overrides`` are applied last and must be GRPOLoopConfig fields.
    """
    loop_fields = {f.name for f in fields(GRPOLoopConfig) if f.init}
    unknown = sorted(set(overrides) - loop_fields)
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)} are not GRPOLoopConfig fields; choose from {', '.join(sorted(loop_fields))}"
        )
    values = recipe.grpo_training()
    kept = {k: v for k, v in values.items() if k in loop_fields}
    dropped = sorted(k for k in values if k not in loop_fields)
    if dropped:
        warnings.warn(
            f"recipe {recipe.name!r}: the standalone loop has no {', '.join(dropped)}; they are ignored "
            "(use --loop trl for the full GRPOConfig).",
            UserWarning,
            stacklevel=2,
        )
    kept.update(overrides)
    return GRPOLoopConfig(**kept)
