"""The standalone plain-PyTorch GRPO trainer: ``training.py`` holds the step and ``train``, ``plumbing.py`` the
batches and optimizer, ``bookkeeping.py`` the run's logging, checkpoints and stops."""

from grpo_kit.loop.training import train

__all__ = ["train"]
