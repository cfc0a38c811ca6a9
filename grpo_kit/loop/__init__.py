"""The standalone plain-PyTorch GRPO trainer: ``training.py`` holds the step and ``train``, ``plumbing.py`` the
batches and optimizer, ``bookkeeping.py`` the run's logging, checkpoints and stops. The names of 0.1's
``grpo_kit.loop`` module are re-exported here (``from grpo_kit.loop import train``)."""

from grpo_kit.loop.training import GRPOLoopConfig, LoopState, MicroBatch, Rollout, RunResult, Samples, train

__all__ = ["GRPOLoopConfig", "LoopState", "MicroBatch", "Rollout", "RunResult", "Samples", "train"]
