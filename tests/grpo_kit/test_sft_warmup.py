"""The SFT warm-up stage (issue 43 item 3): ``warmup_sft`` on the standalone loop and the TRL path, its data
(``datasets_prep.sft_rows``: held out means held out), its loss (completion tokens only), a run through the CLI
that records both stages, the refusals (bad values, the Unsloth path) and a resumed run that does not run it
again. Tiny model, seconds each."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from grpo_kit.cli import main
from grpo_kit.recipes.catalogue import RECIPES
from grpo_kit.recipes.recipe import WarmupSFT

pytestmark = pytest.mark.xdist_group("cli")


# --- data ----------------------------------------------------------------------------------------------


def _question(row) -> str:
    return row["prompt"][-1]["content"]


def test_worked_solutions_are_in_the_course_format_asked_without_the_example():
    from datasets_prep.gsm8k import SYSTEM_PROMPT
    from datasets_prep.sft_rows import gsm8k_worked_solutions
    from rewards import correctness_reward, strict_format_reward

    rows = gsm8k_worked_solutions(300)
    assert len(rows) == 300 and rows == gsm8k_worked_solutions(300)  # seeded, offline
    assert len({_question(r) for r in rows}) == 300
    for row in rows:  # the course's system prompt alone: no worked exchange before the question
        assert [m["role"] for m in row["prompt"]] == ["system", "user"]
        assert row["prompt"][0]["content"] == SYSTEM_PROMPT
    completions = [r["completion"] for r in rows]
    assert strict_format_reward(completions) == [0.5] * 300
    scores = correctness_reward(completions=completions, answer=[r["answer"] for r in rows])
    assert scores == [2.0] * 300
    text = rows[0]["completion"][0]["content"]
    assert "<<" not in text and "=" in text  # a calculation on the problem's numbers, no GSM8K annotations


def test_worked_solutions_share_no_problem_with_training_held_out_or_handwritten_rows():
    from datasets_prep import transfer_set_rows
    from datasets_prep.sft_rows import HELD_OUT_SEED, gsm8k_worked_solutions
    from grpo_kit.runs.held_out import HELD_OUT_SEEDS, held_out_rows, training_dataset

    assert HELD_OUT_SEED == HELD_OUT_SEEDS["gsm8k"]
    sft = {_question(r) for r in gsm8k_worked_solutions(300)}
    recipe = RECIPES["gsm8k-cpu-sft"]
    training = training_dataset(recipe)
    assert len(training) == 80
    assert not sft & {q for q in training["question"]}
    held_out = held_out_rows(recipe, 40, training=training)
    assert len(held_out) == 40 and not sft & {_question(r) for r in held_out}
    assert not sft & {r["question"] for r in transfer_set_rows("gsm8k-handwritten")}
    # gsm8k-cpu's rows are the same problems (the example aside): none of them either
    assert not sft & set(training_dataset(RECIPES["gsm8k-cpu"])["question"])


def test_sft_rows_from_a_jsonl_file_with_columns(tmp_path):
    from datasets_prep.sft_rows import load_sft_rows

    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"q": f"q{i}", "a": f"a{i}"}) + "\n" for i in range(5)))
    rows = load_sft_rows(str(path), {"prompt": "q", "completion": "a"}, rows=3)
    assert rows == [{"prompt": f"q{i}", "completion": f"a{i}"} for i in range(3)]
    with pytest.raises(ValueError, match=r"no column 'prompt'.*warmup_sft.columns"):
        load_sft_rows(str(path))


# --- the loss ------------------------------------------------------------------------------------------


def _tiny():
    from grpo_kit.runs.models import load_recipe_model

    return load_recipe_model(RECIPES["gsm8k-cpu-sft"].replace(model="tiny"))


def _loss_on(model, tokenizer, rows, warmup) -> float:
    from grpo_kit.trainers.sft_warmup import _batch, completion_loss, tokenize_row

    tokenized = [tokenize_row(r, tokenizer, warmup.max_length) for r in rows]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    with torch.no_grad():
        return float(completion_loss(model, *_batch(tokenized, pad, next(model.parameters()).device)))


@pytest.mark.parametrize("path", ["standalone", "trl"])
def test_the_sft_step_lowers_the_sft_loss_on_its_rows(path, tmp_path):
    from grpo_kit.trainers import sft_warmup

    model, tokenizer = _tiny()
    warmup = WarmupSFT(dataset="gsm8k-worked", rows=8, steps=8, batch_size=4, learning_rate=1e-2)
    rows = sft_warmup.warmup_rows(warmup)
    before = _loss_on(model, tokenizer, rows, warmup)
    if path == "trl":
        losses = sft_warmup.train_trl(model, tokenizer, rows, warmup, seed=0, output_dir=tmp_path, bf16=False)
    else:
        losses = sft_warmup.train_standalone(model, tokenizer, rows, warmup, seed=0)
    after = _loss_on(model, tokenizer, rows, warmup)
    assert len(losses) == 8 and losses[-1] < losses[0]
    assert after < before - 0.2, (before, after)


class _FixedLogits(torch.nn.Module):
    """A 'model' whose logits are a parameter: the gradient says which positions the loss reads."""

    def __init__(self, shape):
        super().__init__()
        self.logits = torch.nn.Parameter(torch.zeros(shape))

    def forward(self, input_ids, attention_mask, logits_to_keep=0):  # transformers' meaning of logits_to_keep
        kept = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        return type("Out", (), {"logits": self.logits[:, kept]})()


def test_the_loss_is_on_completion_tokens_only():
    from grpo_kit.trainers.sft_warmup import _batch, completion_loss, tokenize_row

    _, tokenizer = _tiny()
    row = {
        "prompt": [{"role": "user", "content": "What is 2 + 3?"}],
        "completion": [{"role": "assistant", "content": "<answer>\n5\n</answer>"}],
    }
    short = {"prompt": "Say hi.", "completion": "hi"}
    tokenized = [tokenize_row(row, tokenizer, 512), tokenize_row(short, tokenizer, 512)]
    input_ids, attention, completion = _batch(tokenized, tokenizer.pad_token_id or 0, "cpu")
    n_prompt = [mask.index(1) for _, mask in tokenized]
    assert all(n > 0 for n in n_prompt) and tokenized[0][1][n_prompt[0] :] == [1] * (
        len(tokenized[0][1]) - n_prompt[0]
    )
    model = _FixedLogits((2, input_ids.shape[1], len(tokenizer)))
    loss = completion_loss(model, input_ids, attention, completion)
    loss.backward()
    read = model.logits.grad.abs().sum(-1)[:, :-1] > 0  # position t predicts token t + 1
    for i, (ids, mask) in enumerate(tokenized):
        expected = torch.zeros(input_ids.shape[1] - 1, dtype=torch.bool)
        expected[n_prompt[i] - 1 : len(ids) - 1] = (
            True  # targets: the completion tokens, no prompt, no padding
        )
        assert torch.equal(read[i], expected), i
    # a prompt token changed: the same targets, the same loss (the prompt is context, never a target)
    changed = input_ids.clone()
    changed[0, 1] = (changed[0, 1] + 1) % len(tokenizer)
    assert torch.equal(completion_loss(model, changed, attention, completion), loss.detach())
    # the mean is over completion tokens, not over the padded (B, T)
    n_targets = int(completion[:, 1:].sum())
    assert loss.item() == pytest.approx(torch.log(torch.tensor(float(len(tokenizer)))).item(), rel=1e-5)
    assert n_targets == sum(sum(mask) for _, mask in tokenized) - sum(m[0] for _, m in tokenized)


def test_the_loss_read_at_the_kept_positions_is_the_loss_over_the_whole_logits():
    import torch.nn.functional as F

    from grpo_kit.trainers.sft_warmup import _batch, completion_loss, tokenize_row

    model, tokenizer = _tiny()
    rows = [
        {"prompt": "What is 2 + 3? Think first.", "completion": "5"},
        {"prompt": "Hi.", "completion": "Hello there!"},
    ]
    input_ids, attention, completion = _batch(
        [tokenize_row(row, tokenizer, 512) for row in rows], tokenizer.pad_token_id or 0, "cpu"
    )
    with torch.no_grad():
        # (B, T-1, V): the logits at every position, as the loss read them before logits_to_keep
        logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
        mask = (completion[:, 1:] * attention[:, 1:]).float()
        per_token = F.cross_entropy(logits.transpose(1, 2), input_ids[:, 1:], reduction="none")
        whole = (per_token * mask).sum() / mask.sum()
        kept = completion_loss(model, input_ids, attention, completion)
        assert torch.allclose(kept, whole, rtol=1e-6, atol=0)


# --- refusals ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"steps": 0}, r"warmup_sft.steps=0: must be an int >= 1"),
        ({"learning_rate": 0}, r"warmup_sft.learning_rate=0: must be a number in \(0, 1\]"),
        (
            {"dataset": "nope"},
            r"warmup_sft.dataset='nope': name a built-in set \(gsm8k-worked, shapes-captions\) or a .jsonl",
        ),
        ({"columns": {"answer": "x"}}, r"warmup_sft.columns=.*map 'prompt' and/or 'completion'"),
        ({"batch_size": True}, r"warmup_sft.batch_size=True: must be an int >= 1"),
        ({"rows": 0}, r"warmup_sft.rows=0: must be an int >= 1"),
    ],
)
def test_bad_warmup_values_are_refused_in_one_line(changes, message):
    with pytest.raises(ValueError, match=message) as info:
        WarmupSFT(**changes)
    assert "\n" not in str(info.value)


def test_bad_warmup_in_a_recipe_file_or_set_is_one_line(tmp_path, capsys):
    from grpo_kit.recipes.files import RecipeFileError, recipe_from_text

    base = (
        "name: t\nmodel: tiny\ndataset: gsm8k\ndataset_source: synthetic\nrewards: [strict_format_reward]\n"
    )
    with pytest.raises(
        RecipeFileError, match=r"warmup_sft: unknown key 'stepz'; its keys are dataset, columns"
    ):
        recipe_from_text(base + "warmup_sft: {stepz: 3}\n", base_dir=tmp_path)
    with pytest.raises(
        RecipeFileError, match=r"warmup_sft.dataset: no such file .*missing.jsonl; fix the path"
    ):
        recipe_from_text(base + "warmup_sft: {dataset: missing.jsonl}\n", base_dir=tmp_path)
    with pytest.raises(RecipeFileError, match=r"warmup_sft.learning_rate=-1: must be a number"):
        recipe_from_text(base + "warmup_sft: {learning_rate: -1}\n", base_dir=tmp_path)
    toml = recipe_from_text(
        base.replace(": ", " = ")
        .replace("= [", '= ["')
        .replace("]\n", '"]\n')
        .replace("= t\n", '= "t"\n')
        .replace("= tiny", '= "tiny"')
        .replace("= gsm8k", '= "gsm8k"')
        .replace("= synthetic", '= "synthetic"')
        + "[warmup_sft]\nsteps = 5\n",
        "toml",
        base_dir=tmp_path,
    )
    assert toml.warmup_sft == WarmupSFT(steps=5)
    status = main(
        ["train", "--recipe", "gsm8k-cpu-sft", "--set", "warmup_sft.steps=-2", "--set", "model=tiny"]
    )
    out = " ".join("".join(capsys.readouterr()).split())
    assert status == 2 and "warmup_sft.steps=-2: must be an int >= 1" in out and "Traceback" not in out


def test_the_unsloth_path_refuses_warmup_before_the_model_loads():
    from grpo_kit.config.trainers import check_recipe_fields
    from grpo_kit.runs.plan import plan_run

    recipe = RECIPES["gsm8k-cpu-sft"]
    check_recipe_fields(recipe, "standalone")
    check_recipe_fields(recipe, "trl")
    with pytest.raises(
        ValueError,
        match=r"warmup_sft: the unsloth path does not implement warmup_sft; --loop "
        r"standalone or --loop trl does\. Use .*, or drop it \(--set warmup_sft=null\)\.",
    ):
        plan_run("gsm8k-cpu-sft", overrides={"model": "tiny"}, loop="unsloth")
    check_recipe_fields(dataclasses.replace(recipe, warmup_sft=None), "unsloth")


# --- a run through the CLI -----------------------------------------------------------------------------

_FILE_RECIPE = """\
name: sft-file
model: tiny
dataset: gsm8k
dataset_source: synthetic
dataset_size: 8
transfer_eval: gsm8k-handwritten
rewards: [strict_format_reward, correctness_reward]
lora: {r: 4, lora_alpha: 8}
eval_prompts: 2
warmup_sft: {dataset: sft.jsonl, columns: {prompt: question, completion: solution}, steps: 2, batch_size: 2}
training: {per_device_train_batch_size: 2, num_generations: 2, max_completion_length: 8, max_steps: 2}
"""


def _check_run(run: Path, path: str) -> dict:
    summary = json.loads((run / "run.json").read_text())
    warm = summary["warmup_sft"]
    assert warm["ran"] is True and warm["steps"] == 2 and warm["path"].startswith(path)
    assert warm["first_loss"] > 0 and warm["last_loss"] > 0 and warm["seconds"] >= 0
    for key in ("evaluation", "grpo_added", "transfer_evaluation", "transfer_grpo_added"):
        assert {"metric", "before", "after", "ci_low", "ci_high", "headline"} <= set(warm[key]), key
    assert warm["grpo_added"]["before"] == warm["evaluation"]["after"]  # the SFT-only column, both ways
    assert summary["steps"] == 2 and summary["evaluation"]["num_prompts"] == 2
    report = (run / "report.md").read_text()
    assert "## SFT warm-up, then GRPO" in report and "| metric | base | SFT only | SFT + GRPO |" in report
    assert json.loads((run / "warmup_sft" / "losses.json").read_text())["loss"][0] == warm["first_loss"]
    assert "SFT warm-up before GRPO" in (run / "adapter" / "README.md").read_text()  # the model card
    return summary


# the tiny model, a 2-step warm-up on 4 rows, short completions
_TINY_WARMUP = [
    "--set",
    "model=tiny",
    "--set",
    "warmup_sft.steps=2",
    "--set",
    "warmup_sft.rows=4",
    "--set",
    "warmup_sft.batch_size=2",
    "--set",
    "max_completion_length=8",
]


def test_a_run_with_warmup_through_the_cli_standalone(tmp_path):
    run = tmp_path / "run"
    argv = [
        "train",
        "--recipe",
        "gsm8k-cpu-sft",
        *_TINY_WARMUP,
        "--set",
        "save_steps=1",
        "--max-steps",
        "2",
        "--eval-prompts",
        "2",
        "--samples",
        "1",
        "--no-merge",
        "--output-dir",
        str(run),
    ]
    assert main(argv) == 0
    _check_run(run, "standalone")
    first = json.loads((run / "run.json").read_text())["warmup_sft"]
    # resumed: the checkpoint holds the warm-up's weights, so it does not run again; the stage as it ran (its
    # "SFT only" evaluation) is read back from warmup_sft/stage.json, so a stopped run loses nothing of it
    assert main([*argv, "--resume"]) == 0  # the latest checkpoint (an explicit checkpoint-N: see the report)
    warm = json.loads((run / "run.json").read_text())["warmup_sft"]
    assert "stage.json" in warm["read_back"] and warm["ran"] is True
    assert warm["evaluation"]["before"] == first["evaluation"]["before"]
    assert (
        warm["evaluation"]["after"] == first["evaluation"]["after"]
        and warm["last_loss"] == first["last_loss"]
    )
    assert "## SFT warm-up, then GRPO" in (run / "report.md").read_text()
    # a run folder without the file (written before it existed): the stage is said not to have run again
    (run / "warmup_sft" / "stage.json").unlink()
    assert main([*argv, "--resume"]) == 0
    warm = json.loads((run / "run.json").read_text())["warmup_sft"]
    assert warm["ran"] is False and "not run again" in warm["reason"] and "checkpoint" in warm["reason"]


def test_a_recipe_file_with_warmup_through_the_cli_trl(tmp_path):
    rows = [
        {
            "question": [{"role": "user", "content": f"{i} + 1?"}],
            "solution": [{"role": "assistant", "content": f"<answer>\n{i + 1}\n</answer>"}],
        }
        for i in range(4)
    ]
    (tmp_path / "sft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "task.yaml").write_text(_FILE_RECIPE)
    run = tmp_path / "run"
    argv = ["train", "--config", str(tmp_path / "task.yaml"), "--loop", "trl", "--samples", "1", "--no-merge"]
    argv.append("--no-preflight")  # the tiny model's completions are all clipped: pre-flight says no-go
    assert main([*argv, "--output-dir", str(run)]) == 0
    summary = _check_run(run, "trl.SFTTrainer")
    assert summary["warmup_sft"]["rows"] == 4 and summary["warmup_sft"]["dataset"] == str(
        tmp_path / "sft.jsonl"
    )


# --- pre-flight checks the model GRPO starts from -------------------------------------------------------


def _lora_b_norm(model) -> float:
    return float(sum(p.detach().abs().sum() for n, p in model.named_parameters() if "lora_B" in n))


def test_train_preflight_samples_the_model_after_the_warm_up(tmp_path):
    """LoRA's B matrices start at zero; the model pre-flight is handed already holds the warm-up's update."""
    from grpo_kit import runs

    plan = runs.plan_run(
        "gsm8k-cpu-sft",
        overrides={
            "model": "tiny",
            "warmup_sft": {"steps": 2, "rows": 4, "batch_size": 2},
            "max_completion_length": 8,
        },
        max_steps=1,
        output_dir=tmp_path / "run",
    )
    seen = []
    real = runs.preflight_hook(force=True, num_prompts=2)

    def recording(plan, model, tokenizer, dataset, reward_funcs):
        seen.append(_lora_b_norm(model))
        return real(plan, model, tokenizer, dataset, reward_funcs)

    runs.execute(plan, samples=0, merge=False, preflight=recording, eval_prompts=0)
    assert len(seen) == 1 and seen[0] > 0  # after the SFT steps, not the freshly loaded adapter (0)
    summary = json.loads((tmp_path / "run" / "run.json").read_text())
    assert summary["preflight"]["sampled"] == "the model after the SFT warm-up"
    assert summary["warmup_sft"]["ran"] is True


def test_the_preflight_command_warms_up_first_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # every temporary folder under tmp_path
    status = main(["preflight", "--recipe", "gsm8k-cpu-sft", *_TINY_WARMUP, "--num-prompts", "2"])
    out = capsys.readouterr().out
    assert status in (0, 1), out  # go (0) or no-go (1): the tiny random model may be either
    assert "pre-flight samples the model after the recipe's SFT warm-up (2 steps" in " ".join(out.split())
    assert list(tmp_path.iterdir()) == []  # the warm-up's folder is removed
