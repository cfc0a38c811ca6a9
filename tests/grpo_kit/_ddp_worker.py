"""One rank of the two-process CPU run in test_distributed.py (launched by ``torchrun --nproc_per_node 2``).

Trains two GRPO steps of the TRL path on the tiny model and writes ``rank<R>.json`` with what this
process saw: its rank, the world size and backend of the process group TRL/accelerate set up, the
steps it ran and the prompts it generated for.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def length_reward(completions, **kwargs):
    """Prefer 12-character completions (a stand-in task; any reward works for the test)."""
    texts = [c if isinstance(c, str) else c[-1]["content"] for c in completions]
    return [-abs(12 - len(t)) / 12 for t in texts]


def main(out_dir: str) -> None:
    import torch.distributed as dist
    from datasets import Dataset

    from grpo_kit.models import tiny_model
    from grpo_kit.trainers import trl_path

    seen_prompts: list[str] = []
    scored_per_call: list[int] = []

    def recording_reward(completions, prompts, **kwargs):
        seen_prompts.extend(p[-1]["content"] if isinstance(p, list) else p for p in prompts)
        scored_per_call.append(len(completions))
        return length_reward(completions)

    model, tokenizer = tiny_model(seed=0)
    dataset = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": f"Summarize post {i}."}] for i in range(16)]}
    )
    result = trl_path.train_with_trl(
        "smoltldr-length-small",
        model=model,
        tokenizer=tokenizer,
        train_dataset=dataset,
        reward_funcs=[recording_reward],
        output_dir=out_dir,
        max_steps=2,
        eval_steps=None,  # no held-out rows here to evaluate during training
        per_device_train_batch_size=2,
        num_generations=4,
        max_completion_length=8,
        save_steps=1000,
        plot=False,
        save_final=False,
    )
    rank = dist.get_rank()
    record = {
        "rank": rank,
        "env_world_size": int(os.environ["WORLD_SIZE"]),
        "world_size": dist.get_world_size(),
        "backend": dist.get_backend(),
        "global_step": result.global_step,
        "prompts": sorted(set(seen_prompts)),
        "scored_per_call": scored_per_call,
        "trainer_world_size": result.trainer.args.world_size,
    }
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1])
