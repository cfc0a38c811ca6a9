"""Completions and rewards outside the optimizer step: generation, scoring, tools and environments."""
