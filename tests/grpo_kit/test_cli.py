"""`grpo-kit`: parsing, dispatch, errors before any model loads, a real 2-step run on the tiny model that
writes every promised artifact, and Ctrl-C -> --resume in a subprocess."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_kit.cli import UsageError, main, parse_overrides, parse_value
from grpo_kit.support.hardware import cuda_available

pytestmark = pytest.mark.xdist_group("cli")

TINY = ["--set", "model=tiny", "--samples", "2"]


def test_parse_values_and_overrides():
    assert parse_value("1e-5") == 1e-5 and parse_value("8") == 8 and parse_value("true") is True
    assert parse_value("None") is None and parse_value("[1, 2]") == [1, 2] and parse_value("tiny") == "tiny"
    assert parse_overrides(["learning_rate=1e-5", "lora.r=8", "lora.lora_alpha=16", "model=tiny"]) == {
        "learning_rate": 1e-5,
        "lora": {"r": 8, "lora_alpha": 16},
        "model": "tiny",
    }
    with pytest.raises(UsageError, match="KEY=VALUE"):
        parse_overrides(["learning_rate"])
    with pytest.raises(UsageError, match="lora"):
        parse_overrides(["training.lr=1"])


def test_recipes_lists_every_recipe_on_one_line_of_80_columns(capsys, monkeypatch):
    from grpo_kit.cli.catalogue import listed_model
    from grpo_kit.recipes.catalogue import RECIPES

    monkeypatch.setenv("COLUMNS", "80")
    assert main(["recipes"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    for recipe in RECIPES.values():  # name, model and summary whole on the recipe's own line
        (row,) = [line for line in lines if line.split()[:1] in ([recipe.name], [recipe.name + "*"])]
        assert listed_model(recipe.model) in row and recipe.one_line in row
        assert recipe.description[:40] not in "\n".join(lines)  # the description waits for `recipes NAME`
    assert listed_model("HuggingFaceTB/SmolVLM-256M-Instruct") == "…/SmolVLM-256M-Instruct"


def test_recipes_name_shows_the_description_and_what_the_metric_measures(capsys):
    from grpo_kit.recipes.catalogue import get_recipe

    recipe = get_recipe("smoltldr-length-small")
    assert main(["recipes", recipe.name]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert " ".join(recipe.description.split()) in out and "Length only" in out
    assert main(["recipes", "gsm8k-cpuu"]) == 2
    assert "Did you mean 'gsm8k-cpu'" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "fix"),
    [
        (["train", "--set", "learnin_rate=1e-5"], "learning_rate"),
        (["train", "--recipe", "smoltldr-lenght"], "smoltldr-length"),
        (["train", "--max-steps", "0"], "at least 1"),
        pytest.param(  # fast_inference (vLLM inside Unsloth, the default) needs a GPU: refused, naming the setting
            ["train", "--loop", "unsloth"],
            "--set unsloth.fast_inference=false",
            marks=pytest.mark.skipif(cuda_available(), reason="a GPU runs fast_inference"),
        ),
        (["train", "--loop", "trl", "--set", "max_prompt_length=256"], "max_completion_length"),
        (["train", "--set", "num_generations=3"], "num_generations"),
        (["train", "--set", "model=no/such/model-dir/"], "no/such/model-dir"),  # issue 12: before loading
        (["train", "--set", "model=missing.gguf"], "missing.gguf"),
        (["train", "--set", "model=tiny", "--resume"], "no checkpoint-N"),
        # issue 42: a LoRA target the model lacks, refused before the weights load (peft would say so after)
        (
            ["train", "--set", "model=tiny", "--set", 'lora.target_modules=["nope_proj"]'],
            "q_proj, up_proj, v_proj",
        ),
        (["train", "--set", "model=tiny", "--resume", "--overwrite"], "choose one"),
    ],
)
def test_invalid_config_fails_before_the_model_loads(argv, fix, tmp_path, capsys, monkeypatch):

    def no_loading(recipe):  # the error must come first
        raise AssertionError("the model was loaded before the configuration was checked")

    monkeypatch.setattr("grpo_kit.runs.phases.load_recipe_model", no_loading)
    assert main([*argv, "--output-dir", str(tmp_path / "run")]) == 2
    out = capsys.readouterr().out.replace("\n", " ")
    assert "error:" in out and fix in out
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """`grpo-kit train` on the tiny model for 2 steps (shared by the tests that read its folder)."""
    run = tmp_path_factory.mktemp("cli") / "run"
    status = main(["train", *TINY, "--max-steps", "2", "--output-dir", str(run)])
    return run, status


def test_train_tiny_two_steps_writes_every_artifact(tiny_run):
    run, status = tiny_run
    assert status == 0
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "reward" in r] == [1, 2]
    assert (run / "reward_curve.png").stat().st_size > 1000
    assert (run / "adapter" / "adapter_model.safetensors").is_file()
    assert (run / "adapter" / "tokenizer.json").is_file()
    assert (run / "merged" / "model.safetensors").is_file() and (run / "merged" / "tokenizer.json").is_file()
    samples = json.loads((run / "samples.json").read_text())
    assert len(samples["samples"]) == 2 and samples["mean_reward_before"] is not None
    assert "before" in (run / "samples.md").read_text()
    summary = json.loads((run / "run.json").read_text())
    assert summary["steps"] == 2 and summary["loop"] == "standalone"
    assert [e["verified"] for e in summary["exports"]] == [True, True]
    from huggingface_hub import ModelCard

    from grpo_kit.export import check_export_files

    for folder, library in (("adapter", "peft"), ("merged", "transformers")):  # every export has its card
        card = ModelCard.load(run / folder / "README.md")
        assert card.data.library_name == library and "| steps | 2 |" in card.text
        assert "## Held-out evaluation" in card.text and check_export_files(run / folder) == []


def test_the_summary_states_the_run_folders_size(tiny_run):
    from grpo_kit.cli.train import _folder_size
    from grpo_kit.export.report import dir_size

    run, _ = tiny_run
    text = _folder_size(run)
    assert text.startswith(f"{dir_size(run) / 1e6:.0f} MB")
    checkpoints = list(run.glob("checkpoint-*"))
    assert (f"({len(checkpoints)} checkpoint" in text) if checkpoints else ("checkpoint" not in text)


def test_generate_and_export_read_a_run_folder(tiny_run, capsys, monkeypatch):
    run, _ = tiny_run
    assert main(["generate", str(run), "-n", "1", "--max-new-tokens", "4"]) == 0
    assert "base model vs trained adapter" in capsys.readouterr().out
    # a GGUF type the converter cannot write: a clear error naming what to install, not a traceback
    monkeypatch.delenv("LLAMA_CPP_DIR", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")  # no llama-quantize anywhere
    assert main(["export", str(run), "--gguf", "q4_k_m"]) == 2
    assert "llama-quantize" in capsys.readouterr().out.replace("\n", " ")


def test_losses_and_rewards_lint_subcommands(capsys):
    assert main(["losses", "--lengths", "4", "16", "--rewards", "1", "0"]) == 0
    out = capsys.readouterr().out
    assert "dr_grpo" in out and "dapo" in out
    assert main(["rewards", "lint", "rewards:think_format_reward"]) == 0
    assert "think_format_reward" in capsys.readouterr().out
    assert main(["rewards", "lint", "rewards:no_such_reward"]) != 0


def _wait_for(path_glob: Path, pattern: str, proc: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list(path_glob.glob(pattern)):
            return
        if proc.poll() is not None:
            raise AssertionError(
                f"run ended (exit {proc.returncode}) before {pattern} appeared:\n{proc.stdout.read()}"
            )
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"{pattern} did not appear within {timeout} s")


def test_preload_checks_leave_no_folder_behind(tmp_path, capsys, monkeypatch):

    monkeypatch.setattr(
        "grpo_kit.runs.phases.load_recipe_model",
        lambda recipe: pytest.fail("the model loaded before the checks"),
    )
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    assert main(["train", *TINY, "--output-dir", str(a_file)]) == 2
    assert "is a file" in capsys.readouterr().out.replace("\n", " ")
    # a GGUF type that cannot be written is found before training, not after it
    monkeypatch.delenv("LLAMA_CPP_DIR", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert main(["train", *TINY, "--gguf", "q4_k_m", "--output-dir", str(tmp_path / "run")]) == 2
    assert "llama-quantize" in capsys.readouterr().out.replace("\n", " ")
    assert not (tmp_path / "run").exists()


def _one_error_line(out: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in out, out
    return lines[0]


def test_an_inf_reward_after_loading_is_one_line_naming_the_function(tmp_path, capsys, monkeypatch):
    import rewards

    def length_reward(**kwargs):  # the recipe's factory, returning a function that gives +inf
        def length_reward_16_tokens(completions, **kw):
            return [float("inf")] * len(completions)

        return length_reward_16_tokens

    monkeypatch.setattr(rewards, "length_reward", length_reward)
    argv = [
        "train",
        *TINY,
        "--samples",
        "0",
        "--no-merge",
        "--max-steps",
        "1",
        "--output-dir",
        str(tmp_path / "r"),
    ]
    assert main(argv) == 1
    line = _one_error_line(capsys.readouterr().out)
    assert "RewardFunctionError" in line and "length_reward_16_tokens" in line and "inf" in line
    with pytest.raises(rewards.RewardFunctionError):  # --debug: the real exception and its traceback
        main([*argv, "--overwrite", "--debug"])


def test_resuming_a_corrupted_checkpoint_is_one_line(tiny_run, tmp_path, capsys):
    import shutil

    from safetensors.torch import load_file, save_file

    run = tmp_path / "copy"
    shutil.copytree(tiny_run[0], run)
    weights = run / "checkpoint-2" / "adapter_model.safetensors"
    tensors = load_file(weights)
    name = min(tensors)
    tensors[name].view(-1)[:4] = float("nan")
    save_file(tensors, weights)
    assert main(["train", "--output-dir", str(run), "--resume", "--samples", "0"]) == 1
    line = _one_error_line(capsys.readouterr().out)
    assert "CheckpointError" in line and "finite" in line


def test_export_overwrite_reaches_the_exporter(tiny_run, tmp_path, capsys):
    out = tmp_path / "out"
    (out / "merged").mkdir(parents=True)
    (out / "merged" / "model.safetensors.index.json").write_text("{}")  # a stale foreign file
    assert main(["export", str(tiny_run[0]), "--out", str(out)]) == 1
    assert "overwrite" in _one_error_line(capsys.readouterr().out)
    assert main(["export", str(tiny_run[0]), "--out", str(out), "--overwrite"]) == 0
    assert not (out / "merged" / "model.safetensors.index.json").exists()


def test_ctrl_c_saves_a_checkpoint_that_resume_continues(tmp_path):
    run = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "grpo_kit.cli",
        "train",
        *TINY,
        "--samples",
        "0",
        "--no-merge",
        "--max-steps",
        "4",
        "--set",
        "save_steps=1",
        "--set",
        "logging_steps=1",
        "--set",
        "stop_on_no_signal=false",  # the tiny model's completions are all clipped: Ctrl-C, not the watch, stops it
        "--output-dir",
        str(run),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    _wait_for(run, "checkpoint-1", proc, timeout=300)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 130, out
    assert "--resume" in out
    done_steps = sorted(int(p.name.split("-")[1]) for p in run.glob("checkpoint-*"))
    assert done_steps and done_steps[-1] < 4, out

    # The printed command continues the run: --resume alone replays every flag and setting (the run folder stores
    # them), so it resumes toward the same 4 steps with --samples 0 and --no-merge.
    command = next(line.strip() for line in out.splitlines() if line.strip().startswith("grpo-kit train --"))
    assert command == f"grpo-kit train --output-dir {run} --resume", command
    replay = [sys.executable, "-m", "grpo_kit.cli", *shlex.split(command)[1:]]
    resumed = subprocess.run(replay, check=False, capture_output=True, text=True, env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    steps = [
        json.loads(line)["step"]
        for line in (run / "metrics.jsonl").read_text().splitlines()
        if "reward" in json.loads(line)
    ]
    assert steps == [1, 2, 3, 4]  # each step exactly once: continued, not restarted
    assert json.loads((run / "run.json").read_text())["steps"] == 4
    assert not (run / "merged").exists()  # --no-merge, replayed


# ------------------------------------------------------------------ the export line of docs/cli.md, paths


def _readme_command(prefix: str) -> list[str]:
    """The command line of README.md or docs/*.md (the CLI's page) that starts with ``prefix``, exactly as written
    (comment removed)."""
    from doc_pages import first_line_starting_with

    line = first_line_starting_with(prefix)
    return shlex.split(line.split("#", 1)[0])


def test_readme_export_line_works_with_a_relative_path_from_another_folder(tiny_run, tmp_path, monkeypatch):
    """`grpo-kit export outputs/<run> --gguf q8_0` as docs/cli.md writes it, run from the user's folder: the
    converter runs with its own cwd, so a relative --outfile used to land nowhere (FileNotFoundError)."""
    import shutil

    from grpo_kit.export import find_converter

    try:
        find_converter()
    except Exception as error:
        if os.environ.get("GRPO_KIT_OFFLINE") == "1":
            pytest.skip(f"GRPO_KIT_OFFLINE=1 and llama.cpp's converter is not cached: {error}")
        raise
    work = tmp_path / "my-project"
    shutil.copytree(tiny_run[0], work / "outputs" / "tiny-run")
    monkeypatch.chdir(work)
    argv = _readme_command("grpo-kit export outputs/<run>")
    assert argv[:2] == ["grpo-kit", "export"] and "outputs/<run>" in argv
    argv = [arg.replace("<run>", "tiny-run") for arg in argv[1:]]
    assert not Path(argv[1]).is_absolute()
    assert main(argv) == 0
    gguf = work / "outputs" / "tiny-run" / "model-q8_0.gguf"
    assert gguf.stat().st_size > 100_000


def _failing_converter(folder: Path) -> Path:
    """A llama.cpp checkout whose converter fails the way a real one does: a long traceback, the cause last."""
    folder.mkdir(parents=True)
    frames = "".join(f'  File "frame{i}.py", line {i}, in f{i}\\n    f{i + 1}()\\n' for i in range(40))
    (folder / "convert_hf_to_gguf.py").write_text(
        "import sys\n"
        f"sys.stderr.write('INFO:hf-to-gguf:Loading model\\nTraceback (most recent call last):\\n{frames}')\n"
        "sys.stderr.write(\"FileNotFoundError: [Errno 2] No such file or directory: 'x.gguf'\\n\")\n"
        "sys.exit(1)\n"
    )
    return folder


def test_a_failed_gguf_export_after_training_keeps_run_json_and_the_report(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LLAMA_CPP_DIR", str(_failing_converter(tmp_path / "llama.cpp")))
    run = tmp_path / "r"
    argv = ["train", "--set", "model=tiny", "--samples", "1", "--eval-prompts", "2", "--max-steps", "1"]
    assert main([*argv, "--output-dir", str(run), "--gguf", "q8_0"]) == 1
    line = _one_error_line(capsys.readouterr().out)
    # the cause comes first, not after 40 frames of traceback; the retry command is named
    assert line.index("FileNotFoundError") < line.index("frame39.py")
    assert f"grpo-kit export {run} --gguf q8_0" in line
    summary = json.loads((run / "run.json").read_text())
    assert summary["steps"] == 1 and "FileNotFoundError" in summary["gguf_error"]
    assert (run / "report.md").is_file() and (run / "report_card.png").is_file()
    assert (run / "merged" / "model.safetensors").is_file()


def test_debug_works_before_or_after_the_subcommand(tmp_path, capsys):
    missing = str(tmp_path / "no-such-run")
    assert main(["export", missing]) == 2
    assert _one_error_line(capsys.readouterr().out)
    for argv in (["--debug", "export", missing], ["export", missing, "--debug"]):
        with pytest.raises(UsageError):
            main(argv)


def test_eval_failures_are_one_line_and_debug_shows_the_exception(tiny_run, tmp_path, capsys):
    import shutil

    run = tmp_path / "broken"
    shutil.copytree(tiny_run[0], run)
    (run / "run.json").write_text("{ not json")
    assert main(["eval", str(run)]) in (1, 2)
    assert _one_error_line(capsys.readouterr().out)
    with pytest.raises(Exception) as raised:
        main(["--debug", "eval", str(run)])
    assert not isinstance(raised.value, SystemExit)
