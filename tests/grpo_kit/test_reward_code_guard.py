"""A run folder you did not write imports no reward code (issue 55): `grpo-kit eval RUN` and `--resume` judge every
reward the run would build by the file it would import, resolved as the loader resolves it (recipe.yaml,
run_config.json, a checkpoint's invocation, run.json's settings, `rewards` and `reward_funcs` alike). Each payload
here writes a marker file when imported; the marker must not appear, and the command says one line naming
--trust-reward-code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rewards
from grpo_kit.artifacts.checkpoint import read_checkpoint_config
from grpo_kit.cli import main
from grpo_kit.recipes.files import RecipeFileError, load_recipe_file, recipe_from_text
from grpo_kit.runs.folder import RunFolder
from grpo_kit.runs.plan import RECIPE_FILE, plan_run, prepare_run_dir

pytestmark = pytest.mark.xdist_group("cli")

RECIPE = """\
name: guarded
model: tiny
dataset: {source: rows.jsonl, prompt: question}
rewards:
  - {name: length_reward, kwargs: {ideal_length: 8}}
training: {max_steps: 1, per_device_train_batch_size: 2, num_generations: 2, max_completion_length: 4}
"""


def _payload(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n\n"
        "def fn(completions, **kwargs):\n    return [0.0 for _ in completions]\n"
    )


@pytest.fixture
def run(tmp_path, monkeypatch) -> Path:
    """A planned run of a recipe file with a shipped reward (run_config.json, recipe.yaml, run.json, an adapter
    folder), in tmp_path/work/run; the working folder is tmp_path/work."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "rows.jsonl").write_text("".join(json.dumps({"question": f"q{i}"}) + "\n" for i in range(8)))
    (work / "guarded.yaml").write_text(RECIPE)
    plan = plan_run(load_recipe_file(work / "guarded.yaml"), output_dir=work / "run")
    prepare_run_dir(plan)
    (work / "run" / "adapter").mkdir()
    (work / "run" / "adapter" / "adapter_config.json").write_text("{}")
    (work / "run" / "run.json").write_text(
        json.dumps({"recipe": "guarded", "model": "tiny", "loop": "standalone"})
    )
    checkpoint = work / "run" / "checkpoint-1"  # what --resume continues from, with the invocation it stored
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text("{}")
    RunFolder(checkpoint).write_run_config(read_checkpoint_config(work / "run"))
    return work / "run"


def _write_run_config(run: Path, config: dict, into: Path | None = None) -> None:
    """The run's stored configuration, in the run folder and its checkpoint (or only in ``into``)."""
    for folder in [into] if into else [run, run / "checkpoint-1"]:
        RunFolder(folder).root.mkdir(exist_ok=True)
        RunFolder(folder).write_run_config(config)


def _store_invocation(run: Path, rewards_value, *, into: Path | None = None, key: str = "rewards") -> None:
    config = read_checkpoint_config(run)
    recipe_file = config["invocation"]["recipe_file"]
    del recipe_file["rewards"]
    recipe_file[key] = rewards_value
    _write_run_config(run, config, into)


def _refused(argv, capsys, marker: Path, *, names: str = "--trust-reward-code") -> str:
    code = main(argv)
    said = capsys.readouterr()
    text = said.out + said.err
    assert not marker.exists(), "the payload ran"
    assert code == 2 and "Traceback" not in text, text
    assert names in text and len(text.strip().splitlines()) == 1, text
    return text


# --- resume: the stored invocation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["rewards.py:fn", "rewards./../../evil.py:fn", "{tmp}/evil.py:fn"],
    ids=["rewards.py", "rewards-dot-dot", "absolute"],
)
def test_resume_alone_imports_no_reward_code_of_the_stored_invocation(run, tmp_path, capsys, name):
    marker = tmp_path / "marker"
    _payload(run.parent / "rewards.py", marker)  # what a relative name resolves to (the working folder)
    _payload(tmp_path / "evil.py", marker)
    _store_invocation(run, [name.format(tmp=tmp_path)])
    _refused(["train", "--output-dir", str(run), "--resume"], capsys, marker)


def test_resume_from_a_checkpoint_imports_no_code_its_invocation_names(run, tmp_path, capsys):
    marker = tmp_path / "marker"
    _payload(tmp_path / "evil.py", marker)
    _store_invocation(run, [{"name": "rewards./../../evil.py:fn"}], into=run / "checkpoint-1")
    _refused(["train", "--resume", str(run / "checkpoint-1")], capsys, marker)


def test_resume_imports_no_code_a_stored_set_rewards_names(run, tmp_path, capsys):
    marker = tmp_path / "marker"
    _payload(tmp_path / "evil.py", marker)
    config = read_checkpoint_config(run)
    config["invocation"]["overrides"] = {"rewards": [{"name": f"{tmp_path}/evil.py:fn"}]}
    _write_run_config(run, config)
    _refused(["train", "--output-dir", str(run), "--resume"], capsys, marker)


def test_resume_imports_no_code_named_in_trls_key(run, tmp_path, capsys):
    marker = tmp_path / "marker"
    _payload(tmp_path / "evil.py", marker)
    _store_invocation(run, [f"{tmp_path}/evil.py:fn"], key="reward_funcs")
    _refused(["train", "--output-dir", str(run), "--resume"], capsys, marker)


# --- grpo-kit eval RUN: recipe.yaml and run.json ---------------------------------------------------------


def _recipe_yaml(run: Path, rewards_lines: str) -> None:
    text = RECIPE.replace("rewards:\n  - {name: length_reward, kwargs: {ideal_length: 8}}\n", rewards_lines)
    text = text.replace("rows.jsonl", str(run.parent / "rows.jsonl"))
    (run / RECIPE_FILE).write_text(text)


@pytest.mark.parametrize(
    "rewards_lines",
    [
        "rewards: [rewards.py:fn]\n",
        "rewards: ['rewards./../../evil.py:fn']\n",
        "reward_funcs: [rewards.py:fn]\n",
        "rewards:\n  - {name: '{tmp}/evil.py:fn', weight: 1.0}\n",
        "rewards:\n  - {name: rewards.lint.main, kwargs: {argv: ['evil:fn']}}\n",  # lint imports evil.py
    ],
    ids=["rewards.py", "rewards-dot-dot", "trl-key", "absolute", "package-function-with-arguments"],
)
def test_eval_imports_no_reward_code_of_the_run_folder(run, tmp_path, capsys, rewards_lines):
    marker = tmp_path / "marker"
    _payload(run / "rewards.py", marker)  # beside recipe.yaml: what a relative name resolves to
    _payload(tmp_path / "evil.py", marker)
    _payload(run.parent / "evil.py", marker)
    _recipe_yaml(run, rewards_lines.replace("{tmp}", str(tmp_path)))
    _refused(["eval", str(run), "--out", str(tmp_path / "card")], capsys, marker)
    assert not (tmp_path / "card").exists()


def test_eval_refuses_rewards_and_reward_funcs_together(run, tmp_path, capsys):
    marker = tmp_path / "marker"
    _payload(run / "payload.py", marker)
    _recipe_yaml(run, "rewards: [length_reward]\nreward_funcs: [payload.py:fn]\n")
    text = _refused(["eval", str(run), "--out", str(tmp_path / "card")], capsys, marker, names="reward_funcs")
    assert "keep one" in text


def test_eval_imports_no_code_run_json_settings_name(run, tmp_path, capsys):
    marker = tmp_path / "marker"
    _payload(tmp_path / "evil.py", marker)
    summary = json.loads((run / "run.json").read_text())
    summary["training"] = {"rewards": [f"{tmp_path}/evil.py:fn"]}
    (run / "run.json").write_text(json.dumps(summary))
    _refused(["eval", str(run), "--out", str(tmp_path / "card")], capsys, marker)


def test_trusted_code_still_loads_and_shipped_rewards_need_no_trust(run, tmp_path):
    marker = tmp_path / "marker"
    _payload(run / "rewards.py", marker)
    _recipe_yaml(run, "rewards: [rewards.py:fn, {name: rewards.length_reward, kwargs: {ideal_length: 4}}]\n")
    with pytest.raises(RecipeFileError, match="trust-reward-code"):
        load_recipe_file(run / RECIPE_FILE, trust_reward_code=False)
    assert not marker.exists()
    assert load_recipe_file(run / RECIPE_FILE).rewards[0].name == f"{(run / 'rewards.py').resolve()}:fn"
    assert marker.exists()  # named by you: imported
    _recipe_yaml(
        run, "rewards: [{name: length_reward, kwargs: {ideal_length: 4}}, rewards.accuracy_reward]\n"
    )
    assert len(load_recipe_file(run / RECIPE_FILE, trust_reward_code=False).rewards) == 2


# --- module.function, found beside the recipe or in the working folder as trl grpo finds it ----------------


@pytest.mark.parametrize("where", ["run-folder", "working-folder"])
def test_eval_imports_no_module_reward_found_beside_the_run_or_in_the_working_folder(
    run, tmp_path, capsys, where
):
    marker = tmp_path / "marker"
    _payload((run if where == "run-folder" else run.parent) / "payload.py", marker)
    _recipe_yaml(run, "reward_funcs: [payload.fn]\n")
    text = _refused(["eval", str(run), "--out", str(tmp_path / "card")], capsys, marker)
    assert "payload.py:fn" in text  # judged by the file it would import


def test_resume_imports_no_module_reward_of_the_stored_invocation(run, tmp_path, capsys):
    marker = tmp_path / "marker"
    _payload(run.parent / "payload.py", marker)  # the working folder
    _store_invocation(run, ["payload.fn"], key="reward_funcs")
    _refused(["train", "--output-dir", str(run), "--resume"], capsys, marker)


@pytest.mark.parametrize("name", ["json.loads", "os.system", "subprocess.getoutput"])
def test_a_run_folder_names_no_installed_module_as_a_reward(run, tmp_path, capsys, name):
    """Installed modules' functions are no reward functions of a run folder's: refused without the flag, and a
    payload named like the module, beside the run, imports neither as that module nor as a file."""
    marker = tmp_path / "marker"
    _recipe_yaml(run, f"reward_funcs: [{name}]\n")
    _refused(["eval", str(run), "--out", str(tmp_path / "card")], capsys, marker)
    module = name.split(".")[0]
    _payload(run / f"{module}.py", marker)
    _refused(["eval", str(run), "--out", str(tmp_path / "card")], capsys, marker, names=f"{module}.py")
    assert getattr(__import__(module), "__file__", "") != str(run / f"{module}.py")


def test_a_trusted_module_reward_of_the_run_folder_loads_from_its_file(run, tmp_path):
    marker = tmp_path / "marker"
    _payload(run / "payload.py", marker)
    _recipe_yaml(run, "reward_funcs: [payload.fn]\n")
    with pytest.raises(RecipeFileError, match="trust-reward-code"):
        load_recipe_file(run / RECIPE_FILE, trust_reward_code=False)
    assert not marker.exists()
    assert load_recipe_file(run / RECIPE_FILE).rewards[0].name == f"{(run / 'payload.py').resolve()}:fn"
    assert marker.exists()


# --- what resolves to the installed rewards package --------------------------------------------------------


def test_only_names_resolving_into_the_installed_rewards_package_need_no_trust(tmp_path, monkeypatch):
    from grpo_kit.recipes.reward_specs import imports_only_installed_rewards

    package = Path(rewards.__file__).resolve().parent
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outside.py").write_text("raise SystemExit('imported')\n")
    (tmp_path / "rewards.").mkdir()
    (tmp_path / "linked").symlink_to(tmp_path)  # a folder whose path starts inside, resolving outside
    for name in (
        "length_reward",
        "rewards.length_reward",
        "rewards.visual.visual_choice_reward",
        "model:some/reward-model",
        f"{package}/__init__.py:length_reward",
        f"{package}/visual.py:visual_choice_reward",
    ):
        assert imports_only_installed_rewards(name), name
    for name in (
        "rewards.py:fn",
        "rewards./../outside.py:fn",
        f"{package}/../outside.py:fn",
        f"{tmp_path}/linked/outside.py:fn",
        "outside.fn",
        "os.system",
        "rewards.outside.fn",
        "rewards_extra.module.fn",
    ):
        assert not imports_only_installed_rewards(name), name
    # a function of the package is called with a run folder's arguments only when it is a reward factory
    assert imports_only_installed_rewards("length_reward", {"ideal_length": 8})
    assert imports_only_installed_rewards("rewards.length_reward", {"ideal_length": 8})
    for name, kwargs in (
        ("rewards.lint.main", {"argv": ["outside:fn"]}),  # it would import outside.py
        ("rewards.lint._resolve", {"target": "outside:fn"}),
        ("accuracy_reward", {"anything": 1}),
    ):
        assert not imports_only_installed_rewards(name, kwargs), name


# --- recipe files: one list of rewards, no key twice -----------------------------------------------------


def test_rewards_and_reward_funcs_together_are_refused():
    text = RECIPE.replace("dataset: {source: rows.jsonl, prompt: question}", "dataset: gsm8k") + (
        "reward_funcs: [accuracy_reward]\n"
    )
    with pytest.raises(RecipeFileError, match="rewards and reward_funcs .* keep one"):
        recipe_from_text(text)


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ("max_steps: 3\nmax_steps: 1\n", "max_steps", 4),
        ("training:\n  learning_rate: 1.0e-4\n  learning_rate: 1.0e-5\n", "learning_rate", 5),
        ("rewards:\n  - {name: length_reward, name: accuracy_reward}\n", "name", 4),
    ],
)
def test_a_yaml_key_written_twice_is_refused_naming_the_line(text, key, line):
    with pytest.raises(RecipeFileError, match=rf"line {line}: '{key}' is set twice"):
        recipe_from_text("model: tiny\ndataset: gsm8k\n" + text)


def test_yaml_merge_keys_are_not_duplicates():
    text = "base: &b {a: 1}\nmodel: tiny\n"
    from grpo_kit.recipes.parsing import parse_recipe_text

    assert parse_recipe_text(text + "other: {<<: *b, a: 2}\n", "yaml", "f")["other"] == {"a": 2}


@pytest.mark.parametrize("key", ["rewards", "reward_funcs"])
def test_a_reward_factory_without_its_arguments_is_one_line(tmp_path, monkeypatch, capsys, key):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"question": f"q{i}"}) + "\n" for i in range(8)))
    text = RECIPE.replace(
        "rewards:\n  - {name: length_reward, kwargs: {ideal_length: 8}}", f"{key}: [length_reward]"
    )
    (tmp_path / "factory.yaml").write_text(text)
    code = main(["train", "--config", "factory.yaml", "--output-dir", "run"])
    said = capsys.readouterr()
    out = said.out + said.err
    assert code == 2 and "Traceback" not in out and len(out.strip().splitlines()) == 1, out
    assert "'length_reward' is a reward factory: give its arguments (ideal_length, unit)" in out
    assert "{name: length_reward, kwargs: {ideal_length: ...}}" in out
