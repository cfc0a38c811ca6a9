"""Issue 27, item 5: a second held-out set written differently from the training rows, shipped with the package
(datasets_prep/tldr_handwritten.jsonl, datasets_prep/gsm8k_handwritten.jsonl), named by the recipe's
``transfer_eval``, evaluated before and after beside the held-out rows and reported in run.json, the report card
and the CLI's summary; gsm8k-handwritten is asked in the course's own setting (no worked example), while the
recipe's held-out rows carry the example its training fades out."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib.resources
import io
import json
import operator
import re
import sys
from fnmatch import fnmatch
from pathlib import Path

import pytest

from datasets_prep import SYSTEM_PROMPT, TRANSFER_SETS, synthetic_gsm8k, synthetic_tldr, transfer_set_rows
from grpo_kit.cli import main
from grpo_kit.recipes.catalogue import RECIPES, get_recipe
from grpo_kit.runs.held_out import held_out_rows, prompt_key, training_dataset, transfer_rows

pytestmark = pytest.mark.xdist_group("cli")

ROOT = Path(__file__).resolve().parents[2]
SMOLTLDR_SETS = [name for name, r in RECIPES.items() if r.transfer_eval == "tldr-handwritten"]
# one step of two prompts x 4 completions of 8 tokens on the tiny model, 4 held-out prompts
TINY_RUN = [
    "--set",
    "model=tiny",
    "--set",
    "max_completion_length=8",
    "--set",
    "per_device_train_batch_size=8",
]


def test_the_set_ships_inside_the_package_and_holds_40_posts():
    spec = TRANSFER_SETS["tldr-handwritten"]
    resource = importlib.resources.files("datasets_prep").joinpath(spec.file)
    assert resource.is_file()
    # pip install . ships it: the file sits in a package folder and matches its package-data globs
    if sys.version_info >= (3, 11):
        import tomllib

        globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
            "*"
        ]
        assert any(fnmatch(spec.file, g) for g in globs), globs
    rows = transfer_set_rows("tldr-handwritten")
    posts = [r["prompt"] for r in rows]
    assert len(posts) == 40 == spec.size and len(set(posts)) == 40
    assert all(isinstance(p, str) and p.strip() for p in posts)


def test_the_posts_are_written_apart_from_the_generator():
    posts = [r["prompt"] for r in transfer_set_rows("tldr-handwritten")]
    generated = {row["prompt"] for seed in (0, 1, 2) for row in synthetic_tldr(2000, seed=seed)}
    assert not generated & set(posts)
    # none of the generator's openers, headlines, closings or "(24F)" ages
    for marker in ("Throwaway because", "Long time lurker", "Need advice:", "So basically", "Any advice on"):
        assert not [p for p in posts if marker in p], marker
    assert not [p for p in posts if re.search(r"\(\d\d[FM]\)", p)]
    # lengths from one sentence to about eight (the generator writes four to six)
    sentences = [len(re.findall(r"[.!?](?:\s|$)", p)) for p in posts]
    assert min(sentences) == 1 and max(sentences) >= 8
    assert sum(p.rstrip().endswith("?") for p in posts) >= 5  # questions too
    assert any("\n- " in p for p in posts)  # and a list


@pytest.mark.parametrize("name", SMOLTLDR_SETS)
def test_rows_render_as_the_training_rows_do_and_are_never_training_prompts(name):
    recipe = get_recipe(name)
    training = training_dataset(recipe)
    rows = transfer_rows(recipe, training=training)
    posts = [r["prompt"] for r in transfer_set_rows("tldr-handwritten")]
    assert len(rows) == 40
    assert transfer_rows(recipe, 32, training=training) == rows[:32] and transfer_rows(recipe, 0) == []
    instruction = recipe.dataset_kwargs.get("instruction")
    first = training[0]["prompt"]
    for row, post in zip(rows, posts):
        if instruction is None:  # the course's plain-text prompt, as its training rows
            assert isinstance(first, str) and row["prompt"] == post
        else:  # one user message, instruction + post, as its training rows
            assert [m["role"] for m in row["prompt"]] == [m["role"] for m in first] == ["user"]
            assert row["prompt"][0]["content"] == f"{instruction}\n\n{post}"
            assert first[0]["content"].startswith(f"{instruction}\n\n")
    keys = {prompt_key(r["prompt"]) for r in rows}
    assert not keys & {prompt_key(p) for p in training["prompt"]}
    assert not keys & {prompt_key(r["prompt"]) for r in held_out_rows(recipe, recipe.eval_prompts)}


def test_a_training_prompt_is_dropped_from_the_set_and_said():
    from datasets import Dataset

    recipe = get_recipe("smoltldr-length-small")
    rendered = transfer_rows(recipe)
    training = Dataset.from_list([{"prompt": rendered[3]["prompt"]}, *training_dataset(recipe).to_list()[:4]])
    with pytest.warns(UserWarning, match="1 of the 40 rows of held-out set 'tldr-handwritten'"):
        rows = transfer_rows(recipe, training=training)
    assert len(rows) == 39 and rendered[3] not in rows
    assert transfer_rows(get_recipe("smoltldr-length")) == []  # no second set: nothing, not an error


@pytest.mark.parametrize(
    "value, fix",
    [
        ("nope", "use one of ['gsm8k-handwritten', 'shapes-transfer', 'tldr-handwritten'], or None"),
        (3, "is not a held-out set shipped"),
    ],
)
def test_a_bad_transfer_eval_is_refused_naming_the_fix(value, fix):
    with pytest.raises(ValueError, match=re.escape(fix)):
        get_recipe("smoltldr-length-small", transfer_eval=value)
    with pytest.raises(ValueError, match=re.escape(fix)):
        dataclasses.replace(RECIPES["smoltldr-length-small"], transfer_eval=value)


def test_a_set_written_for_another_dataset_is_refused(capsys):
    with pytest.raises(ValueError, match="holds smoltldr rows, but the recipe trains on gsm8k"):
        get_recipe("gsm8k-cpu", transfer_eval="tldr-handwritten")
    with pytest.raises(ValueError, match="holds gsm8k rows, but the recipe trains on smoltldr"):
        get_recipe("smoltldr-length-small", transfer_eval="gsm8k-handwritten")
    assert main(["train", "--set", "transfer_eval=nope", "--max-steps", "1"]) == 2  # before any model loads
    out = " ".join(capsys.readouterr().out.split())
    assert "transfer_eval='nope'" in out and "Traceback" not in out


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """One step on the tiny model, 4 held-out prompts and 4 of those written differently: (folder, status, stdout)."""
    folder = tmp_path_factory.mktemp("transfer") / "run"
    argv = ["train", *TINY_RUN, "--samples", "1", "--eval-prompts", "4", "--max-steps", "1", "--no-merge"]
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.setenv("COLUMNS", "200")  # the summary's rows on one line each
        status = main([*argv, "--output-dir", str(folder)])
    return folder, status, out.getvalue()


def test_a_run_reports_both_sets_in_run_json_the_report_card_and_its_summary(tiny_run):
    folder, status, out = tiny_run
    assert status == 0, out[-2000:]
    summary = json.loads((folder / "run.json").read_text())
    held, other = summary["evaluation"], summary["transfer_evaluation"]
    assert held["num_prompts"] == 4 and other["num_prompts"] == 4  # as many rows as the held-out set
    assert other["set"] == "tldr-handwritten" and other["label"] == "held-out, written differently"
    assert other["metric"] == held["metric"] == "length_error/length_reward_16_tokens"
    assert other["ci_low"] <= other["mean_diff"] <= other["ci_high"] and other["verdict"] in (
        "improved",
        "no change",
        "worse",
    )
    card = json.loads((folder / "eval.json").read_text())
    assert card["before"]["settings"]["num_prompts"] == 4  # the held-out section as it was
    second = card["transfer"]
    expected = [json.dumps(r["prompt"]) for r in transfer_rows(get_recipe("smoltldr-length-small"))[:4]]
    assert second["before"]["prompts"] == second["after"]["prompts"]  # paired
    assert [json.dumps(json.loads(p)) for p in second["before"]["prompts"]] == expected
    assert second["before"]["settings"] == card["before"]["settings"]  # same decoding, same count
    c = second["comparisons"][other["metric"]]
    assert (c["mean_diff"], c["ci_low"], c["ci_high"]) == (
        other["mean_diff"],
        other["ci_low"],
        other["ci_high"],
    )
    report = (folder / "report.md").read_text()
    assert report.index("4 held-out prompts") < report.index("## held-out, written differently (4 prompts)")
    assert report.index("## held-out, written differently (4 prompts)") < report.index("## Answers before")
    assert "`tldr-handwritten`" in report
    line = next(x for x in out.splitlines() if "held-out, written differently" in x)
    assert "(4 prompts)" in line and "CI [" in line and other["verdict"] in line


def test_eval_of_the_run_folder_keeps_the_second_set(tiny_run, capsys):
    folder, status, _ = tiny_run
    assert status == 0
    assert main(["eval", str(folder), "--num-prompts", "2"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "held-out, written differently: length_error/length_reward_16_tokens (2 prompts)" in out
    card = json.loads((folder / "eval.json").read_text())
    assert (
        card["after"]["settings"]["num_prompts"] == 2
        and card["transfer"]["after"]["settings"]["num_prompts"] == 2
    )
    assert "## held-out, written differently (2 prompts)" in (folder / "report.md").read_text()


def test_evaluation_off_turns_the_second_set_off(tmp_path):
    folder = tmp_path / "run"
    argv = ["train", *TINY_RUN, "--samples", "0", "--eval-prompts", "0", "--max-steps", "1", "--no-merge"]
    assert main([*argv, "--output-dir", str(folder)]) == 0
    summary = json.loads((folder / "run.json").read_text())
    assert "transfer_evaluation" not in summary and "evaluation" not in summary
    assert not (folder / "eval.json").exists()


# --- gsm8k-handwritten: 40 problems written by hand, asked with the course's system prompt alone --------------


_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


def _value(node: ast.AST) -> float:
    """An annotation's arithmetic (+ - * / on integers), evaluated without eval()."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_value(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](_value(node.left), _value(node.right))
    raise AssertionError(f"not plain arithmetic: {ast.dump(node)}")


def test_the_gsm8k_set_ships_and_every_answer_checks_out():
    from rewards import extract_hash_answer

    spec = TRANSFER_SETS["gsm8k-handwritten"]
    assert importlib.resources.files("datasets_prep").joinpath(spec.file).is_file()
    rows = transfer_set_rows("gsm8k-handwritten")
    assert len(rows) == 40 == spec.size and len({r["question"] for r in rows}) == 40
    steps = []
    for row in rows:
        *lines, final = row["answer"].splitlines()
        assert re.fullmatch(r"#### -?\d+", final), row["answer"]  # GSM8K's ending, an integer
        calcs = [c for line in lines for c in re.findall(r"<<([^=<>]+)=(-?\d+)>>(-?\d+)", line)]
        assert calcs and len(calcs) == row["answer"].count("<<"), row["answer"]
        for expr, value, shown in calcs:  # every calculation is right, and written as it is annotated
            assert _value(ast.parse(expr, mode="eval").body) == int(value) == int(shown), (
                expr,
                row["question"],
            )
        assert int(extract_hash_answer(row["answer"])) == int(calcs[-1][1])  # the answer is the last result
        steps.append(len(calcs))
    assert sorted(set(steps)) == [1, 2, 3, 4]  # one calculation to four
    lengths = [len(r["question"]) for r in rows]
    assert min(lengths) < 80 and max(lengths) > 250


def test_the_gsm8k_problems_are_written_apart_from_the_generator():
    from datasets_prep.gsm8k import WORKED_EXAMPLES
    from datasets_prep.synthetic import NAMES

    questions = [r["question"] for r in transfer_set_rows("gsm8k-handwritten")]
    generated = {row["question"] for seed in (0, 1, 4321) for row in synthetic_gsm8k(2000, seed=seed)}
    assert not generated & set(questions) and not {e["question"] for e in WORKED_EXAMPLES} & set(questions)
    words = {w for q in questions for w in re.findall(r"[A-Z][a-z]+", q)}
    assert not words & {name for name, _, _ in NAMES}  # none of its people
    # none of its families' phrasing: trips in miles per hour, ages, "X has N things now", daily tasks
    for marker in (
        "miles per hour",
        "years old",
        "have now",
        "every day for",
        "shares all of them",
        "tulip",
        "marble",
        "pencils",
        "cartons",
        "crates",
        "cookies",
    ):
        assert not [q for q in questions if marker in q], marker


def test_gsm8k_cpu_asks_the_set_without_the_worked_example_and_its_held_out_rows_with_it():
    from datasets_prep.gsm8k import worked_example_turns

    recipe = get_recipe("gsm8k-cpu")
    training = training_dataset(recipe)
    spec = TRANSFER_SETS["gsm8k-handwritten"]
    assert spec.loader_kwargs == {"worked_example": False} and "no worked example" in spec.description
    rows = transfer_rows(recipe, training=training)
    raw = transfer_set_rows("gsm8k-handwritten")
    assert len(rows) == 40
    for row, problem in zip(rows, raw):  # the course's prompt: the system prompt alone, then the question
        assert row["prompt"] == [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": problem["question"]},
        ]
        assert row["answer"] == problem["answer"].rsplit("#### ", 1)[1]
    # the held-out rows carry the example wherever they sit, as the first training rows do (not the fade's tail)
    held = held_out_rows(recipe, recipe.eval_prompts, training=training)
    assert len(held) == recipe.eval_prompts
    examples = {tuple(m["content"] for m in worked_example_turns(i)) for i in range(6)}
    assert all(tuple(m["content"] for m in r["prompt"][1:3]) in examples for r in held)
    assert all(r["prompt"][0] == training[0]["prompt"][0] and len(r["prompt"]) == 4 for r in held)
    assert [m["role"] for m in training[-1]["prompt"]] == ["system", "user"]  # the last training rows: none
    keys = {prompt_key(r["prompt"]) for r in rows}
    assert not keys & {prompt_key(p) for p in training["prompt"]}


def test_the_labels_say_which_set_is_asked_without_the_example():
    from grpo_kit.evaluation.report_card import WRITTEN_DIFFERENTLY, transfer_label

    assert transfer_label("gsm8k-handwritten") == f"{WRITTEN_DIFFERENTLY}, without the worked example"
    assert transfer_label("tldr-handwritten") == WRITTEN_DIFFERENTLY  # asked as its held-out rows are


def test_a_fade_with_shuffled_rows_is_refused_by_the_cli(capsys):
    argv = ["train", "--recipe", "gsm8k-cpu", "--set", "shuffle_dataset=true", "--max-steps", "1"]
    assert main(argv) == 2  # before any model loads
    out = " ".join(capsys.readouterr().out.split())
    assert "set shuffle_dataset=False in training, or drop the fade" in out and "Traceback" not in out


@pytest.fixture(scope="module")
def tiny_gsm8k_run(tmp_path_factory):
    """gsm8k-cpu for one step on the tiny model, 4 held-out problems and 4 of gsm8k-handwritten."""
    folder = tmp_path_factory.mktemp("transfer-gsm8k") / "run"
    argv = ["train", "--recipe", "gsm8k-cpu", *TINY_RUN, "--samples", "1", "--eval-prompts", "4"]
    argv += ["--max-steps", "1", "--no-merge", "--output-dir", str(folder)]
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.setenv("COLUMNS", "200")
        status = main(argv)
    return folder, status, out.getvalue()


def test_a_gsm8k_run_reports_the_set_without_the_example_beside_the_held_out_rows_with_it(tiny_gsm8k_run):
    folder, status, out = tiny_gsm8k_run
    assert status == 0, out[-2000:]
    label = "held-out, written differently, without the worked example"
    other = json.loads((folder / "run.json").read_text())["transfer_evaluation"]
    assert other["set"] == "gsm8k-handwritten" and other["label"] == label and other["num_prompts"] == 4
    assert other["description"] == TRANSFER_SETS["gsm8k-handwritten"].description
    card = json.loads((folder / "eval.json").read_text())
    assert card["transfer"]["label"] == label and "no worked example" in card["transfer"]["description"]
    held = [json.loads(p) for p in card["before"]["prompts"]]
    written = [json.loads(p) for p in card["transfer"]["before"]["prompts"]]
    assert all(len(p) == 4 for p in held) and all(len(p) == 2 for p in written)  # with the example / without
    report = " ".join((folder / "report.md").read_text().split())
    assert f"## {label} (4 prompts)" in report
    assert "`gsm8k-handwritten` (`transfer_eval`): 40 grade-school problems written by hand" in report
    assert "and `worked_example=False` where the rows above keep the recipe's own" in report
    assert "with the same instruction, template" not in report  # what the tldr set's section says, not this
    line = next(x for x in out.splitlines() if label in x)
    assert "(4 prompts)" in line and "CI [" in line
