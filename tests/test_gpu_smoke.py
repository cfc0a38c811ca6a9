"""scripts/gpu_smoke.sh / gpu_smoke.py on a machine without CUDA: they stop at once, loudly, before installing or
loading anything; and the pure parts (the recipe both paths share, the per-step summary, the Markdown record)."""

from __future__ import annotations

import datetime
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("gpu_smoke", REPO / "scripts" / "gpu_smoke.py")
gpu_smoke = importlib.util.module_from_spec(spec)
sys.modules["gpu_smoke"] = gpu_smoke
spec.loader.exec_module(gpu_smoke)

needs_no_cuda = pytest.mark.skipif(
    importlib.util.find_spec("torch") is not None and __import__("torch").cuda.is_available(),
    reason="checks the behaviour without CUDA",
)


@needs_no_cuda
def test_shell_script_stops_early_without_cuda(tmp_path):
    wheelhouse = tmp_path / "whl"
    wheelhouse.mkdir()
    (wheelhouse / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip")
    site, out = tmp_path / "site", tmp_path / "out"
    run = subprocess.run(
        ["bash", str(REPO / "scripts" / "gpu_smoke.sh"), str(out), "--model", "smoke-model"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHON": sys.executable, "WHEELHOUSE": str(wheelhouse), "SITE": str(site)},
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "no CUDA GPU visible" in run.stderr and "run it on a CUDA GPU" in run.stderr
    assert not site.exists() and not out.exists()  # nothing installed, nothing written


@needs_no_cuda
def test_python_script_stops_early_without_cuda(tmp_path):
    run = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gpu_smoke.py"), "--out", str(tmp_path / "o")],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert "no CUDA GPU visible" in run.stderr and "CUDA machine" in run.stderr
    assert not (tmp_path / "o").exists()


def test_both_paths_share_one_recipe_that_passes_the_unsloth_checks():
    from grpo_kit.trainers import unsloth_path

    recipe = gpu_smoke.smoke_recipe("smoke-model", fast_inference=False)
    assert recipe.model == "smoke-model" and recipe.quantization == "4bit"
    assert recipe.unsloth.fast_inference is False and recipe.training["optim"] == "paged_adamw_8bit"
    training = unsloth_path.grpo_config_kwargs(recipe, output_dir="out", max_steps=3)
    unsloth_path.check_settings(recipe, training)  # raises on a setting Unsloth would reject
    kwargs = unsloth_path.from_pretrained_kwargs(recipe, model_name="smoke-model")
    assert kwargs["fast_inference"] is False and kwargs["load_in_4bit"] is True


def test_summarise_steps_leaves_out_the_first_step():
    steps = [
        {"step": 1, "seconds": 30.0, "peak_gib": 1.5},
        {"step": 2, "seconds": 1.0, "peak_gib": 2.0},
        {"step": 3, "seconds": 3.0, "peak_gib": 1.0},
    ]
    assert gpu_smoke.summarise_steps(steps) == {
        "first_step_s": 30.0,
        "mean_step_s_after_first": 2.0,
        "peak_gib": 2.0,
    }
    assert gpu_smoke.summarise_steps([])["peak_gib"] is None


def test_results_record_has_date_gpu_versions_command_and_side_by_side():
    summary = {
        "versions": {"torch": "2.11.0", "unsloth": "2026.10.9", "vllm": None},
        "model": "smoke-model",
        "steps": 2,
        "precision": {"status": "ok", "gpu": "NVIDIA H200"},
        "unsloth": {
            "status": "ok",
            "fast_inference": False,
            "first_step_s": 20.5,
            "mean_step_s_after_first": 0.5,
            "peak_gib": 1.25,
            "steps": [
                {"step": 1, "seconds": 20.5, "reward": -10.0, "loss": 0.0},
                {"step": 2, "seconds": 0.5, "reward": -8.5, "loss": 0.01},
            ],
        },
        "qlora_trl": {"status": "FAILED", "error": "RuntimeError: boom\nmore"},
        "gguf": {"status": "skipped", "skipped": "no adapter"},
    }
    text = gpu_smoke.results_markdown(
        summary,
        "scripts/gpu_smoke.sh out --model smoke-model",
        datetime.datetime(2026, 11, 30, 21, 0, tzinfo=datetime.timezone.utc),
    )
    assert text.startswith("## 2026-11-30 21:00 UTC — NVIDIA H200")
    assert "`scripts/gpu_smoke.sh out --model smoke-model`" in text
    assert "torch 2.11.0, unsloth 2026.10.9" in text and "vllm" not in text
    assert "unsloth ok, qlora_trl FAILED, gguf skipped" in text
    assert "- qlora_trl failed: `RuntimeError: boom`" in text
    assert "| Unsloth | ok (fast_inference=False) | 20.5 | 0.5 | 1.25 |" in text
    assert "| QLoRA TRL + PEFT | FAILED: RuntimeError: boom" in text
    assert "| 2 | -8.5 | 0.01 | 0.5 | – | – | – |" in text


@needs_no_cuda
def test_cli_accepts_the_smoke_unsloth_flags_and_stops_before_loading(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpo_kit.cli",
            "train",
            "--recipe",
            "smoltldr-length-small",
            "--loop",
            "unsloth",
            "--max-steps",
            "2",
            "--output-dir",
            str(tmp_path / "run"),
            "--set",
            "model=smoke-model",
            "--set",
            "quantization=4bit",
            "--set",
            "unsloth.fast_inference=false",
            "--set",
            "unsloth.max_seq_length=512",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"},
    )
    # Every flag is accepted (no usage error naming --set); on a CPU the Unsloth path runs on Unsloth's CPU
    # backend, so the run stops at the next check before loading: the model folder (or, without `make
    # unsloth-cpu`, the missing unsloth package).
    out = run.stdout + run.stderr
    assert run.returncode != 0 and "--set" not in run.stderr
    assert ("smoke-model" in out) if importlib.util.find_spec("unsloth") else ("needs unsloth" in out), out


def test_a_failed_export_after_training_keeps_the_step_measurements(tmp_path, monkeypatch):
    import argparse
    import json

    def trained_then_export_failed(args):
        return {"steps": [{"step": 1, "seconds": 2.0}], "errors": ["merged_16bit: OSError: disk full"]}

    def crashed(args):
        raise RuntimeError("CUDA error: out of memory")

    monkeypatch.setitem(gpu_smoke.CHECK_FUNCS, "unsloth", trained_then_export_failed)
    monkeypatch.setitem(gpu_smoke.CHECK_FUNCS, "qlora_trl", crashed)
    assert gpu_smoke.run_one(argparse.Namespace(check="unsloth", out=tmp_path)) == 1
    unsloth = json.loads((tmp_path / "unsloth.json").read_text())
    assert unsloth["status"] == "FAILED" and unsloth["steps"] == [{"step": 1, "seconds": 2.0}]
    assert unsloth["error"] == "merged_16bit: OSError: disk full"
    assert gpu_smoke.run_one(argparse.Namespace(check="qlora_trl", out=tmp_path)) == 1
    qlora = json.loads((tmp_path / "qlora_trl.json").read_text())
    assert qlora["status"] == "FAILED" and qlora["error"] == "RuntimeError: CUDA error: out of memory"
    assert "Traceback" in qlora["traceback"]
