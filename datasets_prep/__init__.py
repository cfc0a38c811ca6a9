"""Dataset formatters and offline data for GRPO lessons."""
