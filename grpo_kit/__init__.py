"""grpo-kit: GRPO from the formula to an exported model."""

__version__ = "0.1.0"
