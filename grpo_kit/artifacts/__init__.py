"""What a run leaves on disk: checkpoints, metrics.jsonl, completions tables, plots, results."""
