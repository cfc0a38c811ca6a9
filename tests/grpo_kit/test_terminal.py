"""Text is printed as text (issue 24, finding 3): OSC/CSI sequences and control characters never reach the
terminal, rich markup in user, dataset or model text is printed as written (``[/INST]`` no longer crashes
the CLI, ``[lr=1e-4]`` stays in a path, ``[link=…]`` is no hyperlink), and files keep the original."""

from __future__ import annotations

import json

import pytest

from grpo_kit.cli import main
from grpo_kit.support.terminal import markup_safe, plain

OSC_TITLE = "\x1b]0;PWNED-TITLE\x07"
CSI_CLEAR = "\x1b[2J\x1b[31m"
HOSTILE = (
    f"{OSC_TITLE}{CSI_CLEAR}<s>[INST] hi [/INST] [lr=1e-4] [link=https://evil.example]x[/link]\x9b1m\r\x08"
)


def _no_terminal_commands(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text and "\r" not in text


def test_plain_strips_sequences_and_controls_but_keeps_newlines_and_tabs():
    text = plain(HOSTILE + "\ttab\nline")
    _no_terminal_commands(text)
    assert "PWNED-TITLE" not in text  # the OSC payload goes with its sequence
    assert text.endswith("<s>[INST] hi [/INST] [lr=1e-4] [link=https://evil.example]x[/link]\ttab\nline")
    assert plain("\x1bP1;2|payload\x1b\\ok \x1b(B\x1bc done") == "ok  done"  # DCS, charset, reset


def test_markup_safe_prints_exactly_the_text():
    from rich.console import Console

    console = Console(record=True, width=400, color_system=None)
    console.print(f"[red]error:[/] {markup_safe(HOSTILE)}")
    printed = console.export_text()
    _no_terminal_commands(printed)
    assert "[INST] hi [/INST] [lr=1e-4] [link=https://evil.example]x[/link]" in printed


def test_an_error_naming_hostile_text_is_one_clean_line(capsys):
    assert main(["train", "--recipe", HOSTILE]) == 2  # unknown recipe: the message quotes the name
    out = capsys.readouterr().out
    _no_terminal_commands(out)
    assert "error:" in out and "[/INST]" in out


def test_a_path_with_brackets_is_printed_whole(tmp_path, capsys):
    folder = tmp_path / "run [lr=1e-4]"
    assert main(["train", "--set", "model=tiny", "--output-dir", str(folder), "--resume"]) == 2
    out = " ".join(capsys.readouterr().out.split())
    assert "run [lr=1e-4]" in out


@pytest.fixture(scope="module")
def adapter_folder(tmp_path_factory):
    from grpo_kit.models import tiny_model

    folder = tmp_path_factory.mktemp("adapter")
    model, tokenizer = tiny_model(seed=0, lora={"r": 4, "lora_alpha": 8, "lora_dropout": 0.0})
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_generate_prints_prompts_and_answers_as_text(adapter_folder, capsys):
    argv = ["generate", str(adapter_folder), "--base", "tiny", "--prompt", HOSTILE, "--max-new-tokens", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    _no_terminal_commands(out)
    assert "[/INST]" in " ".join(out.split()) or "[/INST" in out  # the table may fold the cell


def test_files_keep_the_original_text(tmp_path):
    from grpo_kit.evaluation.samples import Sample, write_samples

    write_samples([Sample(HOSTILE, "a", "b", None, None)], tmp_path, title="t")
    assert (
        json.loads((tmp_path / "samples.json").read_text(encoding="utf-8"))["samples"][0]["prompt"] == HOSTILE
    )


def test_the_run_table_prints_paths_and_export_lines_whole(tmp_path, capsys):
    from rich.console import Console

    from grpo_kit.cli.train import _print_summary
    from grpo_kit.export.report import ExportReport

    folder = tmp_path / "runs [lr=1e-4]"
    folder.mkdir()
    (folder / "metrics.jsonl").write_text("")
    summary = {
        "steps": 1,
        "total_seconds": 1.0,
        "train_seconds": 1.0,
        "reward_first_step": None,
        "reward_last_step": None,
        "samples_mean_reward_before": None,
        "samples_mean_reward_after": None,
    }
    report = ExportReport("adapter", folder / f"adapter{OSC_TITLE}[/INST]", 1, True, {})
    _print_summary(Console(width=400, color_system=None), folder, summary, [report])
    out = capsys.readouterr().out
    _no_terminal_commands(out)
    assert "runs [lr=1e-4]/metrics.jsonl" in out and "[/INST]" in out


def test_the_run_table_folds_a_long_path_whole_and_keeps_a_label_that_fits_half_the_width_on_one_line(
    tmp_path, capsys
):
    from rich.console import Console

    from grpo_kit.cli.train import _print_summary

    folder = tmp_path.joinpath(*["a-deep-folder-name"] * 6)  # deeper than the console is wide
    folder.mkdir(parents=True)
    (folder / "report.md").write_text("")
    summary = {"steps": 1, "total_seconds": 1.0, "train_seconds": 1.0, "reward_first_step": None}
    summary |= {
        "reward_last_step": None,
        "samples_mean_reward_before": 0.5,
        "samples_mean_reward_after": 0.75,
    }
    summary["samples"] = 4
    label = "held-out reward, samples.md (4 prompts, before → after)"  # 57 characters
    for width in (80, 120):
        _print_summary(Console(width=width, color_system=None), folder, summary, [])
        lines = capsys.readouterr().out.splitlines()
        assert "…" not in "".join(lines)  # the path wraps whole, it is not cut short
        cells = "".join(line.split("│")[2].strip() for line in lines if line.count("│") == 3)
        assert str(folder / "report.md") in cells
    assert any(label in line and "0.500 → 0.750" in line for line in lines)  # at 120 columns


def test_warnings_print_as_text():
    import warnings

    from grpo_kit.support.terminal import install_plain_warnings

    install_plain_warnings()
    install_plain_warnings()  # once is enough, twice is harmless
    text = warnings.formatwarning(f"reward {OSC_TITLE}[x] skipped", RuntimeWarning, "f.py", 1)
    _no_terminal_commands(text)
    assert "reward [x] skipped" in text
