"""The same recipe through TRL's GRPOTrainer and Unsloth: GRPOConfig built once, the SFT warm-up."""
