"""grpo-kit reward functions (filled in by the rewards work)."""
