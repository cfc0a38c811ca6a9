"""benchmarks/bench_learning.py: what a curve point means, and docs/benchmarks.md's command on the tiny model."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from doc_pages import lines_starting_with

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_learning", ROOT / "benchmarks" / "bench_learning.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(points, train_minutes):
    return {
        "train_minutes": train_minutes,
        "points": [
            {"step": s, "minutes": m, "minute_checkpoints": c, "metric": v, "per_prompt": [v]}
            for s, m, c, v in points
        ],
    }


RUN = _run([(3, 1.1, [1.0], 9.0), (8, 2.6, [2.0], 6.0), (9, 3.2, [3.0], 3.0), (12, 3.9, [], 2.5)], 4.0)


def test_minutes_to_target_is_the_training_minutes_of_the_first_point_past_the_drop():
    bench = _bench()
    assert bench.minutes_to_target(RUN, 17.0, 0.6, lower_is_better=True) == 2.6  # 6.0 <= 17 * 0.4
    assert bench.minutes_to_target(RUN, 17.0, 0.9, lower_is_better=True) is None
    rising = _run([(1, 0.5, [], 0.9)], 1.0)
    assert bench.minutes_to_target(rising, 0.5, 0.6, lower_is_better=False) == 0.5


def test_a_side_that_never_reaches_the_target_bounds_the_ratio_by_its_whole_run():
    bench = _bench()
    slow = _run([(8, 5.0, [5.0], 6.0)], 8.0)  # reaches 6.0 at minute 5
    never = _run([(8, 5.0, [5.0], 9.0)], 10.0)  # stays above the target for its 10 minutes
    assert bench.target_ratio(RUN, slow, 17.0, 0.6, True) == ("=", 2.6 / 5.0)
    assert bench.target_ratio(RUN, never, 17.0, 0.6, True) == ("<", 2.6 / 10.0)  # TRL would need > 10 minutes
    assert bench.target_ratio(never, slow, 17.0, 0.6, True) == (">", 10.0 / 5.0)
    assert bench.target_ratio(never, never, 17.0, 0.6, True) is None
    assert bench.median_ratio([("=", 0.7), ("<", 0.2), ("=", 0.3)]) == ("<=", 0.3)
    assert bench.median_ratio([("=", 0.7), ("=", 0.3)]) == ("=", 0.5)
    assert bench.median_ratio([("<", 0.2), (">", 2.0), ("=", 0.3)]) is None  # bounds both ways: no median
    assert bench.median_ratio([None]) is None


def test_a_minute_reads_its_checkpoint_else_the_last_point_before_it_else_the_base():
    bench = _bench()
    assert bench.value_at_minute(RUN, 2.0, 17.0) == (6.0, 8)
    assert bench.value_at_minute(RUN, 0.5, 17.0) == (17.0, 0)  # nothing evaluated yet: the base model
    assert bench.value_at_minute(RUN, 5.0, 17.0) == (2.5, "12, ended")  # the run is over: its final model
    assert bench.point_at_step(RUN, 9)["metric"] == 3.0 and bench.point_at_step(RUN, 10) is None


def _readme_command() -> str:
    (line,) = lines_starting_with("python benchmarks/bench_learning.py")  # docs/benchmarks.md
    return line.split("#")[0].strip()


@pytest.mark.timeout(600)
def test_the_readme_command_on_the_tiny_model_writes_curves_for_every_seed_and_side(tmp_path):
    """docs/benchmarks.md's line as written (its relative script path resolved from the repo), run from another folder
    with the tiny model and two steps appended: two seeds on each side, in two worker processes."""
    command = shlex.split(_readme_command())
    assert command[:2] == ["python", "benchmarks/bench_learning.py"]
    tiny = [
        "--set",
        "model=tiny",
        "--max-steps",
        "2",
        "--step-every",
        "1",
        "--eval-prompts",
        "2",
        "--seeds",
        "1,2",
    ]
    argv = [sys.executable, str(ROOT / command[1]), *command[2:], *tiny, "--every", "0.01"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        argv, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=580
    )
    assert done.returncode == 0, done.stderr[-3000:]

    data = json.loads((tmp_path / "outputs" / "bench_learning" / "curves.json").read_text())
    assert data["metric"] == "length_error/length_reward_16_tokens" and data["max_steps"] == 2
    assert data["jobs"] == 2 and set(data["sides"]) == {"standalone", "trl"}
    for side in data["sides"].values():
        assert set(side) == {"1", "2"}
        for run in side.values():
            assert [p["step"] for p in run["points"]] == [1, 2]  # --step-every 1: both steps evaluated
            assert all(len(p["per_prompt"]) == 2 and p["metric"] >= 0 for p in run["points"])
            assert 0 < run["points"][-1]["minutes"] <= run["train_minutes"]
    png = (tmp_path / "outputs" / "bench_learning" / "curves.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"

    out = done.stdout
    assert re.search(
        r"^\s+2 \| .* \| .*[+-]\d+\.\d\d \[[+-]\d+\.\d\d, [+-]\d+\.\d\d\] n=4", out, re.MULTILINE
    ), out
    assert "standalone: seed 1 " in out and "trl: seed 1 " in out
    assert "steps per training minute, median: standalone" in out


def test_the_swapped_samplers_draw_exactly_the_other_trainers_way(tmp_path):
    """Issue #45's cross arms on the tiny model, same seed, same prompts: the loop with ``--sampler generate`` draws
    the very completions ``model.generate`` draws; TRL with ``--sampler loop`` draws the very completions the loop's
    own sampler draws; the loop's sampler is back afterwards."""
    import warnings

    import torch

    from grpo_kit import runs
    from grpo_kit.core.sampling import sample_completions, stop_token_ids
    from grpo_kit.loop import training as loop
    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.trainers import trl_path

    bench = _bench()
    recipe = get_recipe("smoltldr-length-small", model="tiny", max_completion_length=6, seed=3)
    model, tokenizer = runs.load_recipe_model(recipe)
    rows = [dict(r) for r in recipe.load_dataset().select(range(2))]
    eos = stop_token_ids(model, tokenizer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        config = runs.to_loop_config(recipe, output_dir=str(tmp_path), save_steps=0)
    ids, mask = loop._encode_prompts(model, tokenizer, [r["prompt"] for r in rows], config)

    torch.manual_seed(0)
    with bench.sampled_by_generate(loop):
        swapped = loop._sample(model, tokenizer, rows, config, eos).completion_ids
    assert loop.sample_completions is sample_completions  # restored
    torch.manual_seed(0)
    generated = model.generate(
        input_ids=ids.repeat_interleave(4, 0),
        attention_mask=mask.repeat_interleave(4, 0),
        do_sample=True,
        max_new_tokens=6,
        top_k=0,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
    )[:, ids.size(1) :]
    assert torch.equal(swapped[:, : generated.size(1)], generated)

    trainer = trl_path.build_trainer(
        recipe,
        model=model,
        tokenizer=tokenizer,
        train_dataset=recipe.load_dataset(),
        reward_funcs=recipe.build_reward_funcs(tokenizer),
        output_dir=tmp_path / "trl",
        save_strategy="no",
        report_to="none",
        eval_steps=None,
        trainer_kwargs={"rollout_func": bench.rollout_with_loop_sampler(recipe, tokenizer)},
    )
    torch.manual_seed(1)
    through_trl = trainer._generate([r["prompt"] for r in rows for _ in range(4)])[1]
    torch.manual_seed(1)
    own = loop._sample(model, tokenizer, rows, config, eos)
    assert [list(c) for c in through_trl] == [
        c[: int(n)].tolist() for c, n in zip(own.completion_ids, own.lengths)
    ]


def test_compare_pairs_every_two_arms_by_seed_and_prompt(tmp_path):
    bench = _bench()
    for name, values in (("a", [4.0, 6.0]), ("b", [5.0, 9.0])):
        folder = tmp_path / name
        folder.mkdir()
        run = {"points": [{"step": 8, "metric": sum(values) / 2, "per_prompt": values}]}
        (folder / "curves.json").write_text(json.dumps({"sides": {"trl": {"42": run}}}))
    out = bench.compare([str(tmp_path / "a" / "curves.json"), str(tmp_path / "b" / "curves.json")], 8)
    assert "8 | 5.00 | 7.00" in out
    assert "a/trl − b/trl, step 8: -2.00 [" in out and "per seed 42: -2.00" in out


def test_compare_pools_the_seeds_of_files_given_one_name(tmp_path):
    bench = _bench()
    for name, seed, loop, trl in (
        ("first", "42", [4.0, 6.0], [5.0, 9.0]),
        ("second", "1", [3.0, 3.0], [3.0, 5.0]),
    ):
        folder = tmp_path / name
        folder.mkdir()
        sides = {
            side: {seed: {"points": [{"step": 8, "metric": sum(v) / 2, "per_prompt": v}]}}
            for side, v in (("standalone", loop), ("trl", trl))
        }
        (folder / "curves.json").write_text(json.dumps({"sides": sides}))
    paths = [f"all={tmp_path / name / 'curves.json'}" for name in ("first", "second")]
    out = bench.compare(paths, 8)
    assert "step | all/standalone | all/trl" in out
    assert "per seed 1: -1.00, 42: -2.00" in out and "(n=4;" in out  # both files' seeds, paired by seed
    with pytest.raises(ValueError, match="seed 42 of standalone is in an earlier file"):
        bench.compare([paths[0], paths[0]], 8)
