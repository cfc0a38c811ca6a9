"""QLoRA through the CLI on a CPU: `grpo-kit train --set quantization=4bit` on the TRL path and on the
standalone loop, on the tiny model loaded 4-bit by bitsandbytes' CPU backend (issue #41, item 2).

What a run must show: the base's linear layers are bitsandbytes ``Linear4bit`` while it trains (run.json's
``quantization`` record, and the run folder reloaded as it trained), it evaluates before and after, and its
merged export is a plain 16-bit model (merged onto the 16-bit base: no quantization_config, no uint8 weights).
"""

from __future__ import annotations

import json
import shlex

import pytest

from grpo_kit.cli import main

pytestmark = pytest.mark.xdist_group("cli")
bnb = pytest.importorskip("bitsandbytes")

# appended to the README's lines: the tiny model, a short run (the last --max-steps/--eval-prompts wins)
TINY = ["--set", "model=tiny", "--samples", "2", "--eval-prompts", "2"]


def _readme_command(prefix: str) -> list[str]:
    """The command line of README.md or docs/*.md (docs/cpu.md, "QLoRA on CPU") that starts with ``prefix``, exactly
    as written (comment removed)."""
    from doc_pages import first_line_starting_with

    line = first_line_starting_with(prefix)
    return shlex.split(line.split("#", 1)[0])


def _train(folder, readme_line: str, *args) -> int:
    argv = _readme_command(readme_line)
    assert argv[:2] == ["grpo-kit", "train"] and "quantization=4bit" in argv
    return main([*argv[1:], *TINY, *args, "--output-dir", str(folder)])


def _check_qlora_run(folder, loop: str, steps: int) -> dict:
    import torch
    from safetensors.torch import load_file

    summary = json.loads((folder / "run.json").read_text())
    assert summary["loop"] == loop and summary["steps"] == steps
    record = summary["quantization"]
    assert record["quantization"] == "4bit" and record["quant_type"] == "nf4" and record["double_quant"]
    assert record["layer_type"] == "Linear4bit" and record["quantized_layers"] == 14
    assert record["bitsandbytes"] == "0.50.2"
    if not torch.cuda.is_available():
        assert record["device"] == "cpu" and record["compute_dtype"] == "float32"
    assert summary["evaluation"]["num_prompts"] == 2  # evaluated before and after
    assert [(e["kind"], e["verified"]) for e in summary["exports"]] == [("adapter", True), ("merged", True)]
    merged = folder / "merged"
    config = json.loads((merged / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "bfloat16"
    weights = load_file(merged / "model.safetensors")
    assert {t.dtype for t in weights.values()} == {torch.bfloat16}  # 16-bit, not NF4 bytes
    assert weights["model.layers.0.self_attn.q_proj.weight"].shape == (64, 64)
    return summary


def test_qlora_on_the_trl_path_trains_evaluates_and_exports_merged(tmp_path):
    folder = tmp_path / "run"
    assert _train(folder, "grpo-kit train --set quantization=4bit --loop trl", "--max-steps", "2") == 0
    _check_qlora_run(folder, "trl", 2)
    # the run folder reloads as it trained: the adapter on the 4-bit base
    from grpo_kit.runs.folder import TrainedModel

    model, _ = TrainedModel.locate(folder).load()
    assert sum(isinstance(m, bnb.nn.Linear4bit) for m in model.get_base_model().modules()) >= 14


def test_qlora_on_the_standalone_loop_samples_and_scores_through_linear4bit(tmp_path):
    """The loop's sampler leaves peft's bitsandbytes LoRA layers unmerged (only plain ``nn.Linear`` is
    packed for oneDNN) and its log-probs are an ordinary forward: both work on ``Linear4bit``."""
    folder = tmp_path / "run"
    assert _train(folder, "grpo-kit train --set quantization=4bit --max-steps", "--max-steps", "1") == 0
    _check_qlora_run(folder, "standalone", 1)


def test_8bit_on_the_standalone_loop_is_refused_before_loading_naming_the_trl_loop(
    tmp_path, capsys, monkeypatch
):
    def no_loading(recipe):  # the refusal must come first
        raise AssertionError("the model was loaded before the configuration was checked")

    monkeypatch.setattr("grpo_kit.runs.phases.load_recipe_model", no_loading)
    argv = ["train", "--set", "model=tiny", "--set", "quantization=8bit", "--output-dir", str(tmp_path / "r")]
    assert main(argv) == 2
    out = capsys.readouterr().out.replace("\n", " ")
    assert "error:" in out and "8bit" in out and "--loop trl" in out
    assert not (tmp_path / "r").exists()


def test_bf16_on_a_cpu_without_native_bf16_is_refused_before_loading(tmp_path, capsys, monkeypatch):
    """docs/cpu.md's LoRA, bf16 and QLoRA table has no bf16 row on such a CPU: this is what `--set bf16=true` said there."""
    import grpo_kit.support.hardware

    def no_loading(recipe):
        raise AssertionError("the model was loaded before bf16 was refused")

    monkeypatch.setattr("grpo_kit.runs.phases.load_recipe_model", no_loading)
    monkeypatch.setattr(grpo_kit.support.hardware, "cpu_has_native_bf16", lambda: False)
    monkeypatch.setattr(grpo_kit.support.hardware, "cuda_available", lambda: False)
    argv = ["train", "--set", "model=tiny", "--set", "bf16=true", "--output-dir", str(tmp_path / "r")]
    assert main(argv) == 2
    out = capsys.readouterr().out.replace("\n", " ")
    assert "neither AMX nor AVX512-BF16" in out and "bf16=False" in out
    assert not (tmp_path / "r").exists()
