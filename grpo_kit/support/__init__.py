"""Plumbing with no GRPO in it: the hardware, signals, paths, the terminal, progress lines."""
