"""Issue 10 wired into runs: held-out evaluation before/after every `grpo-kit train`, `grpo-kit eval`,
`grpo-kit preflight` and `train --preflight/--force`, on the tiny random model through the CLI."""

from __future__ import annotations

import json

import pytest

from grpo_kit.cli import main

pytestmark = pytest.mark.xdist_group("cli")

TINY = ["--set", "model=tiny", "--samples", "2"]


def _no_model_loading(monkeypatch):

    def no_loading(recipe):  # the error must come before this
        raise AssertionError("the model was loaded before the input was checked")

    monkeypatch.setattr("grpo_kit.runs.phases.load_recipe_model", no_loading)


@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory):
    """One step on the tiny model with pre-flight forced through and 4 held-out prompts evaluated."""
    folder = tmp_path_factory.mktemp("eval") / "run"
    status = main(
        [
            "train",
            *TINY,
            "--max-steps",
            "1",
            "--eval-prompts",
            "4",
            "--preflight",
            "--force",
            "--output-dir",
            str(folder),
        ]
    )
    return folder, status


def test_train_writes_the_report_card_and_states_the_headline(evaluated_run):
    folder, status = evaluated_run
    assert status == 0
    card = json.loads((folder / "eval.json").read_text())
    assert (
        card["before"]["settings"]["num_prompts"] == 4 and card["before"]["settings"]["decoding"] == "greedy"
    )
    assert card["before"]["prompts"] == card["after"]["prompts"]  # paired: the same held-out prompts
    assert "length_error/length_reward_16_tokens" in card["comparisons"]
    assert "| metric | before | after |" in (folder / "report.md").read_text()
    assert (folder / "report_card.png").stat().st_size > 1000
    summary = json.loads((folder / "run.json").read_text())
    evaluation = summary["evaluation"]
    assert evaluation["metric"] == "length_error/length_reward_16_tokens" and evaluation["num_prompts"] == 4
    assert evaluation["ci_low"] <= evaluation["mean_diff"] <= evaluation["ci_high"]
    assert evaluation["verdict"] in ("improved", "no change", "worse")
    # the tiny model never ends its answers: pre-flight said no-go, and --force trained anyway
    assert summary["preflight"]["verdict"] == "no-go" and summary["preflight"]["forced"] is True


def test_samples_reuse_the_evaluation_answers(evaluated_run):
    folder, _ = evaluated_run
    card = json.loads((folder / "eval.json").read_text())
    samples = json.loads((folder / "samples.json").read_text())["samples"]
    assert [s["before"] for s in samples] == [c.strip() for c in card["before"]["completions"][:2]]
    assert [s["reward_after"] for s in samples] == card["after"]["per_prompt"]["reward"][:2]


def test_eval_re_evaluates_a_run_folder(evaluated_run, capsys):
    folder, _ = evaluated_run
    assert main(["eval", str(folder), "--num-prompts", "3", "--k", "2"]) == 0
    assert "held-out length_error" in capsys.readouterr().out
    card = json.loads((folder / "eval.json").read_text())
    assert card["after"]["settings"]["num_prompts"] == 3 and card["after"]["settings"]["k"] == 2
    assert "mean@2" in card["comparisons"]
    # the adapter starts at B = 0 and one step on a model that never ends moves nothing:
    # the base model (adapter disabled) answers what the trained one answers
    assert card["before"]["completions"] == card["after"]["completions"]


def test_eval_on_a_folder_that_is_neither_a_run_nor_a_model(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("hello")
    assert main(["eval", str(tmp_path)]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "neither a run folder nor a model" in out and "config.json" in out and "Traceback" not in out


def test_interrupted_eval_leaves_the_run_folder_as_it_was(evaluated_run, monkeypatch):
    from grpo_kit.artifacts import plots

    folder, _ = evaluated_run
    before = {name: (folder / name).read_bytes() for name in ("eval.json", "report.md", "report_card.png")}

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(plots, "plot_report_card", ctrl_c)
    assert main(["eval", str(folder), "--num-prompts", "2"]) == 130
    assert {name: (folder / name).read_bytes() for name in before} == before
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp") or ".tmp." in p.name]


def test_preflight_no_go_refuses_to_train_without_force(tmp_path, capsys):
    assert main(["preflight", "--set", "model=tiny", "--num-prompts", "2"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "NO-GO" in out and "no EOS" in out and "Fix:" in out
    run_dir = tmp_path / "run"
    assert main(["train", *TINY, "--max-steps", "1", "--preflight", "--output-dir", str(run_dir)]) == 1
    assert "--force" in capsys.readouterr().out
    assert not run_dir.exists()  # a refused run leaves no folder behind


def test_preflight_dataset_without_prompt_column_fails_before_the_model_loads(monkeypatch, capsys):
    from datasets import Dataset

    from grpo_kit.recipes.catalogue import Recipe

    _no_model_loading(monkeypatch)
    monkeypatch.setattr(
        Recipe, "load_dataset", lambda self, *a, **k: Dataset.from_dict({"question": ["2+2?"]})
    )
    assert main(["preflight", "--set", "model=tiny"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "no 'prompt' column" in out and "question" in out


def test_preflight_reward_function_that_raises_is_named_with_its_row(monkeypatch, capsys):
    import rewards

    def broken_reward(completions, **kwargs):
        return [
            1.0 / len(c if isinstance(c, str) else c[0]["content"]) for c in completions
        ]  # "" divides by 0

    _no_model_loading(monkeypatch)
    monkeypatch.setattr(rewards, "broken_reward", broken_reward, raising=False)
    assert main(["preflight", "--set", "model=tiny", "--set", 'rewards=["broken_reward"]']) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "broken_reward" in out and "row 0" in out and "ZeroDivisionError" in out


def test_train_preflight_checks_inputs_before_the_model_loads(monkeypatch, tmp_path, capsys):
    from datasets import Dataset

    from grpo_kit.recipes.catalogue import Recipe

    _no_model_loading(monkeypatch)
    monkeypatch.setattr(Recipe, "load_dataset", lambda self, *a, **k: Dataset.from_dict({"text": ["x"]}))
    assert main(["train", *TINY, "--preflight", "--output-dir", str(tmp_path / "run")]) == 2
    assert "no 'prompt' column" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("argv", "fix"),
    [
        (["train", "--eval-prompts", "-1"], "--eval-prompts must be >= 0"),
        (["train", "--set", "eval_prompts=-3"], "eval_prompts must be an int >= 0"),
        (["train", "--force"], "--force only matters with --preflight"),
    ],
)
def test_bad_evaluation_options_fail_before_the_model_loads(argv, fix, monkeypatch, tmp_path, capsys):
    _no_model_loading(monkeypatch)
    assert main([*argv, "--set", "model=tiny", "--output-dir", str(tmp_path / "run")]) == 2
    assert fix in " ".join(capsys.readouterr().out.split())


def test_validate_inputs_accepts_a_token_length_reward_without_a_tokenizer():
    # Trainers always pass completion_ids; the probe must too, or every token-counting reward "raises".
    from grpo_kit.evaluation.preflight import validate_inputs
    from rewards import length_reward

    funcs = validate_inputs([{"prompt": "Summarize: a post."}], [length_reward(16, unit="tokens")])
    assert len(funcs) == 1


def test_headline_metric_follows_what_the_recipe_teaches():
    from grpo_kit.evaluation import headline_metric

    assert (
        headline_metric({"reward": 1, "length_error/length_reward": 1, "format": 1})
        == "length_error/length_reward"
    )
    assert headline_metric({"reward": 1, "format": 1, "at_max/strict_format_reward": 1}) == (
        "at_max/strict_format_reward"
    )
    assert headline_metric({"reward": 1, "eos": 1}) == "reward"


def test_the_trl_path_writes_the_report_card_too(tmp_path):
    folder = tmp_path / "run"
    assert (
        main(
            [
                "train",
                *TINY,
                "--loop",
                "trl",
                "--max-steps",
                "1",
                "--eval-prompts",
                "2",
                "--no-merge",
                "--output-dir",
                str(folder),
            ]
        )
        == 0
    )
    card = json.loads((folder / "eval.json").read_text())
    assert card["after"]["settings"]["num_prompts"] == 2
    summary = json.loads((folder / "run.json").read_text())
    assert summary["loop"] == "trl" and summary["evaluation"]["num_prompts"] == 2
    assert summary["eval_seconds"] > 0
