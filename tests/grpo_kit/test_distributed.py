"""Beyond one machine, proven on one: two CPU processes (gloo) run the TRL path under torchrun.

``accelerate launch --cpu --num_processes 2`` starts only one process on CPU (measured), so the test
uses ``torchrun --nproc_per_node 2``, which TRL's GRPOTrainer (through accelerate) picks up as a
two-process data-parallel run. Each rank writes what it saw (see _ddp_worker.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("_ddp_worker.py")


@pytest.mark.timeout(240)
def test_torchrun_two_cpu_processes_run_two_grpo_steps(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2]), env.get("PYTHONPATH", "")])
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        str(WORKER),
        str(tmp_path),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=220, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    records = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    for rank, record in enumerate(records):
        assert record["rank"] == rank
        assert record["world_size"] == record["env_world_size"] == record["trainer_world_size"] == 2
        assert record["backend"] == "gloo"
        assert record["global_step"] == 2
        # per_device_train_batch_size=2: each process scored 2 of the 4 completions of each group,
        # once per step; TRL gathered the rewards across processes to normalise within the group.
        assert record["scored_per_call"] == [2, 2]
    # Both halves of each group come from the same prompt: the group spans the two processes.
    assert records[0]["prompts"] == records[1]["prompts"] and len(records[0]["prompts"]) == 2
    # Only rank 0 writes the metrics, with the gathered group statistics.
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if "reward" in m] == [1, 2]


CONFIGS = Path(__file__).parents[2] / "configs" / "accelerate"


@pytest.mark.parametrize(
    ("name", "kind", "machines"),
    [
        ("ddp.yaml", "MULTI_GPU", 1),
        ("deepspeed_zero3.yaml", "DEEPSPEED", 1),
        ("multi_node_ddp.yaml", "MULTI_GPU", 2),
    ],
)
def test_shipped_accelerate_configs_load_with_accelerate(name, kind, machines):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(CONFIGS / name))  # accelerate's own parser: unknown keys fail
    assert config.distributed_type.value == kind and config.num_machines == machines
    assert config.num_processes >= machines and not config.use_cpu
    if kind == "DEEPSPEED":
        assert config.deepspeed_config["zero_stage"] == 3
    if machines > 1:
        assert config.main_process_ip and config.main_process_port
