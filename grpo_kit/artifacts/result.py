"""``RunResult``: what every training path (standalone loop, TRL, Unsloth) returns, in one vocabulary."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["RunResult"]


@dataclass
class RunResult:
    """The outcome of one training call.

    ``step_losses`` maps optimizer step -> loss for the steps run in this call (the loop: every step;
    TRL/Unsloth: the logged ones). ``log_history`` holds the ``metrics.jsonl`` records, including those
    written before a resume. ``checkpoint`` is the last ``checkpoint-N`` folder (None when none was saved).
    """

    output_dir: Path
    global_step: int
    log_history: list[dict[str, Any]]
    metrics_path: Path
    reward_curve_path: Path | None = None
    checkpoint: Path | None = None
    # the run stopped before max_steps, its checkpoint saved when a step had finished: Ctrl-C, SIGTERM, or the
    # signal watch (then ``no_signal`` says why)
    interrupted: bool = False
    # the signal watch's record (grpo_kit.evaluation.signal_watch) when steps in a row had no learning signal
    no_signal: dict[str, Any] | None = None
    step_losses: dict[int, float] = field(default_factory=dict)
    adapter_dir: Path | None = None  # Unsloth: model.save_lora(...) folder
    trainer: Any = None  # TRL/Unsloth: the GRPOTrainer
    model: Any = None  # TRL/Unsloth: the trained model (the loop trains the model it was given, in place)
    tokenizer: Any = None
