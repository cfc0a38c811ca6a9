"""What only the lessons (and ``grpo-kit losses``) import: lesson helpers, practicum cells, demos."""
