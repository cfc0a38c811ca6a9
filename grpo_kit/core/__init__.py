"""The GRPO math, torch only, proven equal to TRL: advantages, KL, log-probs, the sampler, the losses."""
