"""log_extra and the completions table: the loop and TRL leave the same file; report.md and evaluate read it.

``accuracy_reward`` logs ``solution``, ``gold_parsed`` and ``answer_parsed`` through ``log_extra``; with
``log_completions=True`` they must land, next to the prompt, the completion, each reward and the advantage,
in ``completions/completions_<step>.parquet`` of the run folder, on the standalone loop as on TRL.
"""

from __future__ import annotations

import io

import pytest
import torch
from test_loop import LORA, even_token_share, small_config

from grpo_kit.artifacts.completions_table import (
    CompletionsTable,
    completions_file,
    read_completions,
    report_rows,
)
from grpo_kit.loop.training import train
from grpo_kit.models import tiny_model
from rewards import accuracy_reward

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

EXPECTED_COLUMNS = [
    "step",
    "prompt",
    "completion",
    "accuracy_reward",
    "even_token_share",
    "answer_parsed",
    "gold_parsed",
    "solution",
    "advantage",
]


def math_rows(n: int = 8) -> list[dict]:
    return [{"prompt": f"What is {i} + {i}?", "solution": f"${2 * i}$"} for i in range(n)]


def test_the_loop_writes_trls_completions_table_with_the_log_extra_columns(tmp_path):
    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    config = small_config(tmp_path, max_steps=2, log_completions=True, num_completions_to_print=2)
    train(model, tokenizer, math_rows(), [accuracy_reward, even_token_share], config)
    tables = read_completions(tmp_path)
    assert [t["step"].iloc[0] for t in tables] == [1, 2]
    first = tables[0]
    assert list(first.columns) == EXPECTED_COLUMNS
    assert len(first) == 8  # the generation batch: 2 prompts x 4 completions
    # The columns accuracy_reward logged belong to the rows they describe (G rows per prompt).
    prompts = list(first["prompt"])
    for prompt, solution in zip(prompts, first["solution"]):
        assert solution == f"${2 * int(prompt.split()[2])}$"
    assert first["even_token_share"].between(0, 1).all()
    assert abs(first["advantage"].sum()) < 1e-4  # group-relative: zero-sum per group
    lines = report_rows(tmp_path, rows_per_step=2)
    body = [line for line in lines if line.startswith(("| 1 ", "| 2 "))]
    assert len(body) == 4 and "solution" in lines[4]


def test_no_file_without_log_completions(tmp_path):
    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    train(model, tokenizer, math_rows(), [accuracy_reward], small_config(tmp_path, max_steps=1))
    assert not (tmp_path / "completions").exists() and report_rows(tmp_path) == []


def test_the_trl_path_writes_the_same_file(tmp_path):
    from datasets import Dataset

    from grpo_kit.recipes.catalogue import get_recipe
    from grpo_kit.trainers import trl_path

    model, tokenizer = tiny_model(seed=0)
    recipe = get_recipe(
        "smoltldr-length-small",
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=6,
        eval_steps=None,
    )
    trainer = trl_path.build_trainer(
        recipe,
        model=model,
        tokenizer=tokenizer,
        train_dataset=Dataset.from_list(math_rows(4)),
        reward_funcs=[accuracy_reward, even_token_share],
        output_dir=tmp_path,
        max_steps=1,
        device="cpu",
        log_completions=True,
        logging_steps=1,
        save_steps=1000,
    )
    trainer.train()
    [table] = read_completions(tmp_path)
    assert list(table.columns) == EXPECTED_COLUMNS
    assert completions_file(tmp_path, 1).exists()


def test_printed_rows_are_text_not_markup_or_terminal_codes():
    from rich.console import Console

    table = CompletionsTable()
    table.log_extra("note", ["[bold red]gold[/bold red]"])
    table.record(["\x1b[31mprompt"], ["[link=file:///etc]x[/link]"], {"r": [1.0]}, [0.5])
    out = io.StringIO()
    table.print_sample(3, None, console=Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "[bold red]gold[/bold red]" in text and "[link=file:///etc]x[/link]" in text
    assert "\x1b" not in text


def test_evaluate_keeps_the_log_extra_columns_of_the_greedy_answers():
    from grpo_kit.evaluation import GeneratedCompletion, evaluate

    rows = math_rows(3)

    def sampler(prompts, num_generations):
        return [
            [GeneratedCompletion(text=f"The answer is ${2 * i}$", num_tokens=5, ended=True)] for i in range(3)
        ]

    report = evaluate(None, None, rows, [accuracy_reward], num_prompts=3, sampler=sampler)
    assert report.extra["solution"] == [r["solution"] for r in rows]
    assert set(report.extra) == {"solution", "gold_parsed", "answer_parsed"}
    assert report.per_prompt["reward/accuracy_reward"] == [1.0, 1.0, 1.0]
    assert type(report).from_dict(report.to_dict()).extra == report.extra


def test_report_md_shows_rows_of_the_first_and_last_step(tmp_path):
    from grpo_kit.evaluation import EvalReport
    from grpo_kit.evaluation.report_card import write_report_card

    for step in (1, 5, 9):
        table = CompletionsTable()
        table.log_extra("solution", ["$2$", "$2$"])
        table.record(
            ["What is 1 + 1?"] * 2, [f"step {step} a", f"step {step} b|pipe"], {"r": [1.0, 0.0]}, [0.7, -0.7]
        )
        table.write(tmp_path, step)

    def report(value: float) -> EvalReport:
        return EvalReport(
            per_prompt={"reward": [value, value + 1.0]},
            prompts=["p0", "p1"],
            completions=["a", "b"],
            reward_names=["r"],
            reward_kinds={"r": "other"},
            settings={},
        )

    files = write_report_card(tmp_path, report(0.0), report(1.0), n_boot=200)
    text = files["report.md"].read_text()
    assert "## Completions (first and last logged step)" in text
    assert "step 1 a" in text and "step 9 b&#124;pipe" in text and "step 5" not in text


def test_a_bad_step_leaves_no_log_extra_values_behind(tmp_path):
    """An overflowing batch (a bad step, skipped) logged its column too; the next batch's rows keep their own."""
    calls = []

    def overflow_once(completions, log_extra, **kwargs):
        calls.append(len(completions))
        log_extra("call", [len(calls)] * len(completions))
        return [1e308 if len(calls) == 1 else float(i % 2) for i in range(len(completions))]

    torch.manual_seed(0)
    model, tokenizer = tiny_model(seed=0, lora=LORA)
    config = small_config(tmp_path, max_steps=1, log_completions=True, num_completions_to_print=0)
    with pytest.warns(RuntimeWarning, match="overflow"):
        train(model, tokenizer, math_rows(), [overflow_once], config)
    (table,) = read_completions(tmp_path)
    assert len(calls) == 2 and list(table["call"]) == [2] * 8
