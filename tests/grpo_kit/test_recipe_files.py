"""Recipe files (issue 43): your own task from an empty folder through the CLI only, in grpo-kit's keys, TRL's
keys and TOML; bad files refused in one line naming the field and the fix; every shipped recipe written as a
file and read back equal; `grpo-kit new NAME` and docs/own_task.md's command that trains it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_kit.cli import main

pytestmark = pytest.mark.xdist_group("cli")

REWARD_MODULE = '''
def first_word_reward(completions, answer, **kwargs):
    """1.0 when the completion starts with the row's answer."""
    texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
    return [1.0 if t.strip().lower().startswith(a) else 0.0 for t, a in zip(texts, answer)]
'''
COLOURS = ["red", "blue", "green", "black", "white", "yellow"]
THINGS = ["sky", "grass", "snow", "coal", "sun", "blood", "sea", "leaf", "milk", "night", "lemon", "rose"]

GRPO_KIT_YAML = """\
name: colours
model: tiny
dataset:
  source: data/colours.jsonl
  prompt: question
  columns: {answer: colour}
  held_out: {fraction: 0.25, seed: 3}
rewards:
  - my_rewards.py:first_word_reward
  - {name: length_reward, weight: 0.1, kwargs: {ideal_length: 8}}
lora: {r: 4, lora_alpha: 8}
eval_prompts: 2
training:
  learning_rate: 1.0e-4
  per_device_train_batch_size: 4
  num_generations: 4
  max_completion_length: 8
  max_steps: 2
"""
# TRL's `trl grpo --config` keys: flat GRPOConfig fields, ModelConfig's LoRA keys, ScriptArguments' dataset keys
TRL_YAML = """\
model_name_or_path: tiny
dataset_name: data/colours.jsonl
reward_funcs: [my_rewards.py:first_word_reward]
use_peft: true
lora_r: 4
lora_alpha: 8
learning_rate: 1e-4
per_device_train_batch_size: 4
num_generations: 4
max_completion_length: 8
max_steps: 2
eval_prompts: 2
"""
GRPO_KIT_TOML = """\
name = "colours"
model = "tiny"
eval_prompts = 2
rewards = ["my_rewards.py:first_word_reward"]
held_out = {fraction = 0.25, seed = 3}

[dataset]
source = "data/colours.jsonl"
prompt = "question"
columns = {answer = "colour"}

[lora]
r = 4

[training]
learning_rate = 1e-4
per_device_train_batch_size = 4
num_generations = 4
max_completion_length = 8
max_steps = 2
"""


def _write_task(folder: Path, recipe_name: str, recipe_text: str, *, prompt_column: str = "question") -> Path:
    (folder / "data").mkdir(parents=True)
    rows = [
        {prompt_column: f"One word: the colour of {thing}?", "colour": COLOURS[i % len(COLOURS)]}
        for i, thing in enumerate(THINGS)
    ]
    if prompt_column == "prompt":
        for row in rows:
            row["answer"] = row.pop("colour")
    (folder / "data" / "colours.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "my_rewards.py").write_text(REWARD_MODULE)
    (folder / recipe_name).write_text(recipe_text)
    return folder / recipe_name


def _cli(*args: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "grpo_kit.cli", *args],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


@pytest.mark.parametrize(
    ("recipe_name", "text", "loop"),
    [
        ("colours.yaml", GRPO_KIT_YAML, "standalone"),
        ("trl_config.yaml", TRL_YAML, "trl"),
        ("colours.toml", GRPO_KIT_TOML, "standalone"),
    ],
    ids=["grpo-kit-keys", "trl-keys", "toml"],
)
def test_your_own_task_from_an_empty_folder_trains_through_the_cli(tmp_path, recipe_name, text, loop):
    work = tmp_path / "my-task"
    _write_task(work, recipe_name, text, prompt_column="prompt" if "dataset_name" in text else "question")
    done = _cli(
        "train",
        "--config",
        recipe_name,
        "--loop",
        loop,
        "--output-dir",
        "run",
        "--no-merge",
        "--no-preflight",
        cwd=work,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run = work / "run"
    for name in ("run.json", "report.md", "report_card.png", "eval.json", "samples.md", "metrics.jsonl"):
        assert (run / name).is_file(), name
    assert (run / "adapter" / "adapter_config.json").is_file()
    card = (
        run / "adapter" / "README.md"
    ).read_text()  # the model card: the reward by its file, no local path
    assert "`my_rewards.py:first_word_reward()`" in card and str(work) not in card
    summary = json.loads((run / "run.json").read_text())
    assert summary["steps"] == 2 and summary["loop"] == loop
    assert "ci_low" in summary["evaluation"] and summary["evaluation"]["num_prompts"] == 2
    # the held-out rows: carved by the seeded fraction and recorded, or the reserved rows (TRL's keys name none)
    expected = (
        {"source": "carved", "fraction": 0.25, "seed": 3} if "held_out" in text else {"source": "reserved"}
    )
    assert expected.items() <= summary["held_out"].items()
    # the run folder keeps the recipe itself: it reads back from anywhere, with its files found
    from grpo_kit.recipes.files import load_recipe_file

    copy = load_recipe_file(run / "recipe.yaml")
    assert copy.rewards[0].name == f"{work.resolve() / 'my_rewards.py'}:first_word_reward"
    assert copy.dataset_source == str(work.resolve() / "data" / "colours.jsonl")


def test_grpo_kit_eval_and_resume_find_a_file_recipe_again(tmp_path):
    """`grpo-kit eval RUN` and `--resume` read the recipe the run folder kept, from another folder, with the
    recipe file itself gone."""
    work = tmp_path / "task"
    _write_task(work, "colours.yaml", GRPO_KIT_YAML)
    argv = [
        "train",
        "--config",
        str(work / "colours.yaml"),
        "--no-preflight",  # the tiny model's completions are all clipped: pre-flight says no-go
        "--set",
        "learning_rate=2e-4",
        "--set",
        "lora.r=2",
    ]
    assert main([*argv, "--output-dir", str(work / "run"), "--no-merge"]) == 0
    summary = json.loads((work / "run" / "run.json").read_text())
    assert summary["training"]["learning_rate"] == 2e-4  # --set works on a recipe file as on a shipped recipe
    assert json.loads((work / "run" / "adapter" / "adapter_config.json").read_text())["r"] == 2
    (work / "colours.yaml").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # The run folder names my_rewards.py: without --trust-reward-code neither command imports it.
    for argv in (
        ["eval", str(work / "run"), "--out", "card"],
        ["train", "--output-dir", str(work / "run"), "--resume"],
    ):
        refused = _cli(*argv, cwd=elsewhere)
        said = refused.stdout + refused.stderr
        assert refused.returncode == 2 and "Traceback" not in said, said
        assert "my_rewards.py:first_word_reward" in said and "--trust-reward-code" in said
    assert not (elsewhere / "card").exists()
    done = _cli("eval", str(work / "run"), "--out", "card", "--trust-reward-code", cwd=elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    card = json.loads((elsewhere / "card" / "eval.json").read_text())
    assert len(card["before"]["prompts"]) == 2 and "reward/first_word_reward" in card["comparisons"]
    resumed = _cli(
        "train",
        "--output-dir",
        str(work / "run"),
        "--resume",
        "--no-merge",
        "--trust-reward-code",
        cwd=elsewhere,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "recipe colours" in resumed.stdout


BAD_FILES = {
    "unknown key": ("learnin_rate: 1.0e-4\n", "unknown key 'learnin_rate'", "learning_rate"),
    "TRL key with no counterpart": ("torch_dtype: bfloat16\n", "torch_dtype", "bf16: true"),
    "missing file": (
        "dataset: {source: data/nothing.jsonl, prompt: question}\n",
        "data/nothing.jsonl",
        "fix the path",
    ),
    "reward that does not import": ("rewards: [broken.py:reward]\n", "broken.py", "SyntaxError"),
    "wrong signature": ("rewards: [my_rewards.py:no_kwargs]\n", "no_kwargs", "**kwargs"),
    "held-out split overlapping training": (
        "held_out: {split: test}\n",
        "held_out split 'test' shares 12 of its 12 prompts",
        "fraction: 0.2",
    ),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_bad_recipe_file_is_one_line_naming_the_field_and_the_fix(case, tmp_path, capsys, monkeypatch):
    change, field, fix = BAD_FILES[case]
    base = {k: v for k, v in _yaml(GRPO_KIT_YAML).items()}
    base.update(_yaml(change))
    import yaml

    path = _write_task(tmp_path, "bad.yaml", yaml.safe_dump(base))
    (tmp_path / "broken.py").write_text("def reward(completions, **kwargs)\n    return []\n")
    (tmp_path / "my_rewards.py").write_text(
        REWARD_MODULE + "\n\ndef no_kwargs(completions, answer):\n    return []\n"
    )

    def no_loading(recipe):  # the error must come first
        raise AssertionError("the model was loaded before the recipe file was checked")

    monkeypatch.setattr("grpo_kit.runs.phases.load_recipe_model", no_loading)
    assert main(["train", "--config", str(path), "--output-dir", str(tmp_path / "run")]) == 2
    out = capsys.readouterr().out.strip()
    assert out.startswith("error:") and "Traceback" not in out
    flat = " ".join(out.split())
    assert field in flat and fix in flat, flat
    assert not (tmp_path / "run").exists()


def test_preflight_reads_a_recipe_file(tmp_path, capsys):
    path = _write_task(tmp_path, "colours.yaml", GRPO_KIT_YAML)
    status = main(["preflight", "--config", str(path), "--num-prompts", "2"])
    out = " ".join(capsys.readouterr().out.split())
    assert status in (0, 1) and "first_word_reward" in out, out  # go or no-go: the tiny model is random
    assert main(["preflight", "--config", str(path), "--recipe", "gsm8k-cpu"]) == 2
    assert "pass one of them" in capsys.readouterr().out


def _yaml(text: str) -> dict:
    import yaml

    return yaml.safe_load(text)


def test_a_bad_recipe_file_through_the_cli_prints_no_traceback(tmp_path):
    _write_task(tmp_path, "bad.yaml", GRPO_KIT_YAML.replace("my_rewards.py", "missing_rewards.py"))
    done = _cli("train", "--config", "bad.yaml", cwd=tmp_path)
    assert done.returncode == 2
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert "Traceback" not in done.stderr and "missing_rewards.py" in " ".join(lines)


def test_a_module_reward_is_looked_up_as_trl_grpo_looks_it_up(tmp_path, monkeypatch):
    """`module.function` (trl grpo's form): beside the recipe file first, then in the working folder, stored as
    the file it found; a folder's module named like an installed one, or none anywhere, is one line."""
    from grpo_kit.recipes.files import RecipeFileError, recipe_from_text

    task, work = tmp_path / "task", tmp_path / "work"
    _write_task(task, "r.yaml", GRPO_KIT_YAML)
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(work), str(task))])
    text = GRPO_KIT_YAML.replace("my_rewards.py:first_word_reward", "my_rewards.first_word_reward")
    beside = f"{(task / 'my_rewards.py').resolve()}:first_word_reward"
    assert recipe_from_text(text, base_dir=task).rewards[0].name == beside
    (work / "my_rewards.py").write_text(REWARD_MODULE)  # the recipe file's folder comes first
    assert recipe_from_text(text, base_dir=task).rewards[0].name == beside
    (task / "my_rewards.py").unlink()  # then the working folder
    (work / "pkg").mkdir()
    (work / "pkg" / "scoring.py").write_text(REWARD_MODULE)
    assert (
        recipe_from_text(text, base_dir=task).rewards[0].name == f"{work / 'my_rewards.py'}:first_word_reward"
    )
    packaged = recipe_from_text(text.replace("my_rewards.", "pkg.scoring."), base_dir=task)
    assert packaged.rewards[0].name == f"{work / 'pkg' / 'scoring.py'}:first_word_reward"
    assert packaged.rewards[0].build().__name__ == "first_word_reward"

    (work / "json.py").write_text(REWARD_MODULE)  # shadows the standard library's json
    with pytest.raises(
        RecipeFileError, match=r"json\.py has the name of the installed module 'json'.*json\.py:loads"
    ):
        recipe_from_text(text.replace("my_rewards.first_word_reward", "json.loads"), base_dir=task)
    with pytest.raises(RecipeFileError, match=r"no module 'missing' beside the recipe file .*missing\.py:fn"):
        recipe_from_text(text.replace("my_rewards.first_word_reward", "missing.fn"), base_dir=task)
    assert "missing" not in sys.modules and "my_rewards" not in sys.modules  # imported as files, not as names


@pytest.mark.parametrize("where", ["beside-the-recipe", "working-folder"])
def test_a_module_reward_trains_through_the_cli(tmp_path, monkeypatch, capsys, where):
    """`reward_funcs: [my_rewards.first_word_reward]` with my_rewards.py beside the recipe file, or in the working
    folder, trains (one step, evaluation off); the working-folder case also reads its rows through TRL's
    `datasets:` keys (a json builder's data_files, the columns kept, test_split_size carved)."""
    task, work = tmp_path / "task", tmp_path / "work"
    text = TRL_YAML.replace("my_rewards.py:first_word_reward", "my_rewards.first_word_reward")
    text = text.replace("max_steps: 2\n", "max_steps: 1\n")  # eval_prompts: 2 leaves 10 of 12 rows to train
    if where == "working-folder":
        text = text.replace(
            "dataset_name: data/colours.jsonl\n",
            "datasets: [{path: json, data_files: data/colours.jsonl, columns: [prompt, answer]}]\n"
            "test_split_size: 0.25\n",
        )
    _write_task(task, "trl_config.yaml", text, prompt_column="prompt")
    work.mkdir()
    if where == "working-folder":
        (task / "my_rewards.py").rename(work / "my_rewards.py")
    monkeypatch.chdir(work)
    argv = ["train", "--config", str(task / "trl_config.yaml"), "--output-dir", "run"]
    assert main([*argv, "--eval-prompts", "0", "--samples", "0", "--no-merge", "--no-preflight"]) == 0, (
        capsys.readouterr().out
    )
    summary = json.loads((work / "run" / "run.json").read_text())
    assert summary["steps"] == 1
    folder = task if where == "beside-the-recipe" else work
    stored = (work / "run" / "recipe.yaml").read_text()
    assert f"{folder.resolve() / 'my_rewards.py'}:first_word_reward" in stored
    if where == "working-folder":
        assert {"source": "carved", "fraction": 0.25, "seed": 0}.items() <= summary["held_out"].items()
        assert _yaml(stored)["dataset_kwargs"]["select_columns"] == ["prompt", "answer"]


def test_trl_keys_mean_what_the_grpo_kit_keys_mean(tmp_path):
    from grpo_kit.recipes.files import recipe_from_text

    _write_task(tmp_path, "r.yaml", GRPO_KIT_YAML)
    text = """\
model_name_or_path: Qwen/Qwen2.5-0.5B-Instruct
dataset_name: trl-lib/DeepMath-103K
dataset_config: default
dataset_train_split: train
dataset_test_split: test
reward_funcs: [accuracy_reward, my_rewards.py:first_word_reward]
reward_weights: [1.0, 0.5]
use_peft: true
lora_r: 32
lora_alpha: 64
lora_target_modules: [q_proj, v_proj]
load_in_4bit: true
learning_rate: 3e-6
"""
    recipe = recipe_from_text(text, base_dir=tmp_path, default_name="trl-style")
    assert recipe.name == "trl-style" and recipe.model == "Qwen/Qwen2.5-0.5B-Instruct"
    assert (recipe.dataset, recipe.dataset_source, recipe.dataset_split) == (
        "prompts",
        "trl-lib/DeepMath-103K",
        "train",
    )
    assert recipe.dataset_kwargs == {"config": "default", "held_out": {"split": "test"}}
    assert [s.weight for s in recipe.rewards] == [1.0, 0.5] and recipe.quantization == "4bit"
    assert (recipe.lora.r, recipe.lora.lora_alpha, recipe.lora.target_modules) == (
        32,
        64,
        ("q_proj", "v_proj"),
    )
    assert recipe.training == {"learning_rate": 3e-6}  # 3e-6 a number, as YAML 1.2 and TRL read it
    assert (
        recipe_from_text(
            "use_peft: false\n"
            + text.replace("use_peft: true\n", "").split("lora_r")[0]
            + "learning_rate: 1.0e-5\n",
            base_dir=tmp_path,
        ).lora
        is None
    )


TRL_DATA = "model_name_or_path: tiny\nreward_funcs: [my_rewards.py:first_word_reward]\n"
#: Every dataset key trl grpo reads (ScriptArguments, DatasetMixtureConfig and its DatasetConfig entries), applied
#: with TRL's meaning: the text after TRL_DATA -> (dataset_source, dataset_split, dataset_kwargs).
TRL_DATA_APPLIED = {
    "dataset_name, dataset_config, splits": (
        "dataset_name: data\ndataset_config: default\ndataset_train_split: train\ndataset_test_split: test\n",
        ("data", "train", {"config": "default", "held_out": {"split": "test"}}),
    ),
    "datasets: a json builder's data_files": (
        "datasets: [{path: json, data_files: data/colours.jsonl, split: train, columns: [question, colour]}]\n",
        ("data/colours.jsonl", "train", {"select_columns": ["question", "colour"]}),
    ),
    "datasets: a folder's data_dir, a configuration name, test_split_size": (
        (
            "datasets: [{path: ., data_dir: data, name: default, split: validation}]\ntest_split_size: 0.25\n"
            "dataset_train_split: train\ndataset_test_split: test\n"
        ),
        ("data", "validation", {"config": "default", "held_out": {"fraction": 0.25, "seed": 0}}),
    ),
    "datasets with a dataset: table naming the prompt column (TRL's keys name none)": (
        "datasets: [{path: data/colours.jsonl}]\ndataset: {prompt: question, columns: {answer: colour}}\n",
        ("data/colours.jsonl", "train", {"prompt": "question", "columns": {"answer": "colour"}}),
    ),
}
TRL_DATA_REFUSED = {
    "a mixture": ("datasets: [{path: data}, {path: data}]\n", "join the rows into one file"),
    "datasets and dataset_name": ("datasets: [{path: data}]\ndataset_name: data\n", "keep datasets:"),
    "datasets and a named test split": (
        "datasets: [{path: data}]\ndataset_test_split: test\n",
        "test_split_size",
    ),
    "datasets and dataset:": ("datasets: [{path: data}]\ndataset: data\n", "keep datasets:"),
    "fraction": ("datasets: [{path: data, fraction: 0.5}]\n", "TRL keeps every row: drop it"),
    "several data_files": (
        "datasets: [{path: json, data_files: [a.jsonl, b.jsonl]}]\n",
        "one data_files: FILE",
    ),
    "data_files beside a path": ("datasets: [{path: data, data_files: a.jsonl}]\n", "name the file itself"),
    "an unknown entry key": ("datasets: [{path: data, revision: main}]\n", "an entry has path, name"),
    "test_split_size as a count": ("datasets: [{path: data}]\ntest_split_size: 3\n", "between 0 and 1"),
    "test_split_size without datasets": (
        "dataset_name: data\ntest_split_size: 0.2\n",
        "held_out: {fraction: 0.2",
    ),
    "dataset_streaming": ("dataset_name: data\ndataset_streaming: true\n", "loads the rows into memory"),
    "streaming": ("datasets: [{path: data}]\nstreaming: true\n", "loads the rows into memory"),
}


@pytest.mark.parametrize("case", list(TRL_DATA_APPLIED))
def test_every_trl_dataset_key_is_applied_with_trls_meaning(tmp_path, case):
    from grpo_kit.recipes.files import recipe_from_text

    _write_task(tmp_path, "r.yaml", GRPO_KIT_YAML)
    text, (source, split, kwargs) = TRL_DATA_APPLIED[case]
    recipe = recipe_from_text(TRL_DATA + text, base_dir=tmp_path)
    assert (recipe.dataset, recipe.dataset_source) == ("prompts", str(tmp_path / source))
    assert (recipe.dataset_split, dict(recipe.dataset_kwargs)) == (split, kwargs)


@pytest.mark.parametrize("case", list(TRL_DATA_REFUSED))
def test_a_trl_dataset_key_grpo_kit_cannot_mean_is_one_line_naming_what_to_write(tmp_path, case):
    from grpo_kit.recipes.files import RecipeFileError, recipe_from_text

    _write_task(tmp_path, "r.yaml", GRPO_KIT_YAML)
    text, fix = TRL_DATA_REFUSED[case]
    with pytest.raises(RecipeFileError) as refused:
        recipe_from_text(TRL_DATA + text, base_dir=tmp_path)
    assert fix in str(refused.value) and "\n" not in str(refused.value), str(refused.value)


def test_trls_columns_keep_only_the_listed_columns(tmp_path):
    from grpo_kit.recipes.files import recipe_from_text

    _write_task(tmp_path, "r.yaml", GRPO_KIT_YAML)
    (tmp_path / "data" / "colours.jsonl").write_text(
        "".join(json.dumps({"question": f"q{i}", "colour": "red", "note": i}) + "\n" for i in range(4))
    )
    entry = "datasets: [{path: json, data_files: data/colours.jsonl, columns: [question, colour]}]\n"
    recipe = recipe_from_text(TRL_DATA + entry + "dataset: {prompt: question}\n", base_dir=tmp_path)
    assert sorted(recipe.load_dataset().column_names) == ["colour", "prompt", "question"]  # no 'note'
    dropped = recipe_from_text(
        TRL_DATA + entry.replace("question, ", "") + "dataset: {prompt: question}\n", base_dir=tmp_path
    )
    with pytest.raises(ValueError, match=r"drops 'question', which the prompt or a reward reads; add it"):
        dropped.load_dataset()


def test_a_reward_model_named_by_trls_key_comes_first(tmp_path):
    from grpo_kit.recipes.files import recipe_from_text

    _write_task(tmp_path, "r.yaml", GRPO_KIT_YAML)
    text = TRL_DATA + "dataset_name: data\nreward_model_name_or_path: org/rm\nreward_weights: [1.0, 0.5]\n"
    recipe = recipe_from_text(text, base_dir=tmp_path)
    assert [(s.name.rsplit("/", 1)[-1], s.weight) for s in recipe.rewards] == [
        ("rm", 1.0),
        ("my_rewards.py:first_word_reward", 0.5),
    ]
    assert recipe.rewards[0].name == "model:org/rm"


@pytest.mark.parametrize("name", ["math.sqrt", "os.system"])
def test_a_module_function_that_is_no_reward_is_one_line(tmp_path, monkeypatch, capsys, name):
    _write_task(tmp_path, "r.yaml", TRL_YAML.replace("my_rewards.py:first_word_reward", name))
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--config", "r.yaml", "--output-dir", "run"]) == 2
    out = capsys.readouterr().out.strip()
    assert len(out.splitlines()) == 1 and "takes no `completions` argument" in out, out
    assert not (tmp_path / "run").exists()


def test_carved_held_out_rows_are_never_training_rows():
    from datasets_prep import load_prompts

    rows = [{"prompt": f"question {i}", "answer": str(i)} for i in range(40)]
    held = {"fraction": 0.2, "seed": 7}
    train = load_prompts("train", rows, held_out=held)
    held_out = load_prompts("train", rows, held_out=held, part="held_out")
    train_ids = {r["answer"] for r in train}
    held_ids = {r["answer"] for r in held_out}
    assert len(held_ids) == 8 and not train_ids & held_ids and len(train_ids | held_ids) == 40
    assert held_ids == {r["answer"] for r in load_prompts("train", rows, held_out=held, part="held_out")}
    assert held_ids != {
        r["answer"] for r in load_prompts("train", rows, held_out={**held, "seed": 8}, part="held_out")
    }
    assert train[0]["prompt"] == [{"role": "user", "content": "question 0"}]


def test_a_40_row_test_split_is_evaluated_on_eval_prompts_rows_and_the_summary_says_it_was_cut(
    tmp_path, monkeypatch
):
    """`held_out: {split: test}` with 40 test rows and the default eval_prompts (32): the run says, in its summary
    and run.json, that 32 of the 40 were evaluated and how to evaluate them all."""
    monkeypatch.setenv("COLUMNS", "240")  # the summary table's row on one line
    work = tmp_path / "task"
    (work / "data").mkdir(parents=True)
    for split, numbers in (("train", range(24)), ("test", range(100, 140))):
        rows = [
            {"question": f"One word: the colour of thing {i}?", "colour": COLOURS[i % 6]} for i in numbers
        ]
        (work / "data" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (work / "my_rewards.py").write_text(REWARD_MODULE)
    recipe = GRPO_KIT_YAML.replace("data/colours.jsonl", "data").replace(
        "held_out: {fraction: 0.25, seed: 3}", "held_out: {split: test}"
    )
    (work / "colours.yaml").write_text(
        recipe.replace("eval_prompts: 2\n", "").replace("max_steps: 2", "max_steps: 1")
    )
    done = _cli(
        "train",
        "--config",
        "colours.yaml",
        "--output-dir",
        "run",
        "--no-merge",
        "--samples",
        "0",
        "--no-preflight",
        cwd=work,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((work / "run" / "run.json").read_text())
    assert summary["held_out"] == {"source": "named split", "split": "test", "rows": 32, "split_rows": 40}
    assert summary["evaluation"]["num_prompts"] == 32
    (line,) = [line for line in done.stdout.splitlines() if "held-out rows" in line]  # one row of the summary
    assert "32 of 40 rows of the test split (eval_prompts); --eval-prompts 40 evaluates it whole" in line, (
        done.stdout
    )


def test_every_shipped_recipe_written_as_a_file_reads_back_equal(tmp_path, capsys):
    from grpo_kit.recipes.catalogue import RECIPES
    from grpo_kit.recipes.files import load_recipe_file, recipe_from_text, recipe_to_text

    for recipe in RECIPES.values():
        assert recipe_from_text(recipe_to_text(recipe), where=recipe.name) == recipe, recipe.name
    assert main(["recipes", "--show", "gsm8k-cpu", "--as-yaml"]) == 0
    path = tmp_path / "gsm8k.yaml"
    path.write_text(capsys.readouterr().out)
    assert load_recipe_file(path) == RECIPES["gsm8k-cpu"]


OWN_TASK = Path(__file__).resolve().parents[2] / "docs" / "own_task.md"  # the README's "Your own task", moved
README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_as_yaml_line_writes_a_file_that_trains_as_the_recipe(tmp_path):
    """`grpo-kit recipes --show gsm8k-cpu --as-yaml > my_task.yaml` as docs/own_task.md writes it: the file reads back
    as the shipped recipe."""
    from grpo_kit.recipes.catalogue import RECIPES
    from grpo_kit.recipes.files import load_recipe_file

    line = _readme_line(OWN_TASK, "grpo-kit recipes --show")
    done = _shell(line, tmp_path)
    assert done.returncode == 0, done.stderr
    assert load_recipe_file(tmp_path / "my_task.yaml") == RECIPES["gsm8k-cpu"]


def test_readme_recipe_file_example_reads(tmp_path):
    """docs/own_task.md's example recipe file, as written, beside the two files it names."""
    from grpo_kit.recipes.files import load_recipe_file

    text = OWN_TASK.read_text(encoding="utf-8").split("# Your own task", 1)[1]
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "my_task.jsonl").write_text('{"question": "2 + 2?", "solution": "4"}\n' * 2)
    (tmp_path / "my_rewards.py").write_text(
        "def exact_answer(completions, solution=None, **kwargs):\n    return [0.0] * len(completions)\n"
    )
    (tmp_path / "my_task.yaml").write_text(block)
    recipe = load_recipe_file(tmp_path / "my_task.yaml")
    assert recipe.dataset == "prompts" and recipe.dataset_kwargs["held_out"] == {"fraction": 0.2, "seed": 0}
    assert [s.weight for s in recipe.rewards] == [1.0, 0.1] and recipe.lora.r == 8


def test_new_refuses_odd_names_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("../escape", "a/b", ".hidden", "_x", "two words", "x" * 65, "dot.ted"):
        assert main(["new", name]) == 2, name
        out = capsys.readouterr().out.strip()
        assert out.startswith("error:") and len(out.splitlines()) <= 2, out
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    assert main(["new", "my-task"]) == 0
    assert main(["new", "my-task"]) == 2 and "already exists" in capsys.readouterr().out
    files = sorted(p.name for p in (tmp_path / "my-task").iterdir())
    assert files == [
        "README.md",
        "my-task.jsonl",
        "my-task.yaml",
        "my_task_rewards.py",
        "test_my_task_rewards.py",
    ]
    assert len((tmp_path / "my-task" / "my-task.jsonl").read_text().splitlines()) == 20


def test_the_scaffold_reward_test_passes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["new", "demo"]) == 0
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_demo_rewards.py"],
        check=False,
        cwd=tmp_path / "demo",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr


def _readme_line(path: Path, prefix: str) -> str:
    """The line of ``path`` that starts with ``prefix``, exactly as written (a trailing comment removed)."""
    line = next(line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith(prefix))
    return line.split("  #", 1)[0].strip()


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """``command`` in bash, with this interpreter's ``grpo-kit`` first on PATH."""
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        ["bash", "-c", command], check=False, cwd=cwd, capture_output=True, text=True, env=env, timeout=900
    )


def _code_block_commands(readme: Path) -> list[str]:
    """Every command in ``readme``'s bash code blocks, in order, as written (a trailing comment removed)."""
    blocks = readme.read_text(encoding="utf-8").split("```bash\n")[1:]
    lines = [line for block in blocks for line in block.split("```", 1)[0].splitlines()]
    return [line.split("  #", 1)[0].strip() for line in lines if line.strip() and not line.startswith("#")]


def test_the_scaffold_readme_names_the_run_folder_its_eval_reads(tmp_path, monkeypatch, capsys):
    """Every command that trains the scaffold (its README, docs/own_task.md, the README, `grpo-kit new`'s own
    line) writes to outputs/NAME, the folder the scaffold README's eval reads; without --output-dir a run would
    go to outputs/NAME-<timestamp>."""
    monkeypatch.chdir(tmp_path)
    assert main(["new", "my-task"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    commands = _code_block_commands(tmp_path / "my-task" / "README.md")
    assert [c.split()[1] for c in commands] == ["preflight", "train", "eval"]
    train, evaluate = commands[1], commands[2]
    assert "--output-dir outputs/my-task " in train + " " and evaluate.startswith(
        "grpo-kit eval outputs/my-task "
    )
    assert "grpo-kit train --config my-task.yaml --output-dir outputs/my-task" in said
    docs = _readme_line(OWN_TASK, "grpo-kit new demo")
    assert docs.endswith("--output-dir outputs/demo") and f"`{docs}`" in README.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_scaffold_readme_commands_run_as_written(tmp_path, monkeypatch):
    """`grpo-kit new demo`, then every command of its README's code blocks, in order, exactly as written, from the
    task folder: pre-flight, 2 steps on the embedded SmolLM2-135M on CPU into outputs/demo, and eval on that run."""
    monkeypatch.chdir(tmp_path)
    assert main(["new", "demo"]) == 0
    task = tmp_path / "demo"
    commands = _code_block_commands(task / "README.md")
    assert len(commands) == 3
    for command in commands:
        done = _shell(command, task)
        assert done.returncode == 0, command + done.stdout[-3000:] + done.stderr[-3000:]
    run = task / "outputs" / "demo"
    summary = json.loads((run / "run.json").read_text())
    assert summary["model"] == "smollm2-135m-instruct" and summary["steps"] == 2
    assert summary["held_out"] == {"source": "carved", "fraction": 0.2, "seed": 0}
    assert (run / "report.md").is_file() and (run / "adapter" / "adapter_config.json").is_file()


@pytest.mark.slow
def test_readme_new_task_trains_on_the_embedded_model_as_written(tmp_path):
    """docs/own_task.md's `grpo-kit new demo && cd demo && grpo-kit train ...`, exactly as written, on the embedded
    SmolLM2-135M on CPU, into the run folder the scaffold README's eval reads; then that eval, as written."""
    command = _readme_line(OWN_TASK, "grpo-kit new demo")
    assert (
        command
        == "grpo-kit new demo && cd demo && grpo-kit train --config demo.yaml --output-dir outputs/demo"
    )
    assert f"`{command}`" in README.read_text(encoding="utf-8")  # the README shows the same line
    done = _shell(command, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    task = tmp_path / "demo"
    (run,) = (task / "outputs").iterdir()
    assert run.name == "demo"
    summary = json.loads((run / "run.json").read_text())
    assert summary["model"] == "smollm2-135m-instruct" and summary["steps"] == 2
    (evaluate,) = [c for c in _code_block_commands(task / "README.md") if c.startswith("grpo-kit eval")]
    done = _shell(evaluate, task)
    assert done.returncode == 0, evaluate + done.stdout[-3000:] + done.stderr[-3000:]
    assert (run / "report.md").is_file()
