"""The `unsloth` extra pins a combination that resolves: each pinned package accepts every other pin.

Version coupling is the top complaint of Unsloth users (unsloth caps trl/transformers, vllm pins torch
exactly). This machine has no CUDA and cannot install the GPU packages, so their declared dependencies
are *recorded* below, and checked live instead whenever the packages are installed (on a GPU box after
`pip install ".[unsloth]"`).

Source of the record: the `Requires-Dist` lines (without extras) of the wheels' METADATA, fetched on
2026-11-29 with `pip download --no-deps unsloth==2026.10.9 unsloth_zoo==2026.10.9 bitsandbytes==0.50.2`
and, for vllm (a 300+ MB wheel), `pip install --dry-run --no-deps --ignore-installed --report r.json
vllm==0.31.0` (PyPI's metadata file; re-recorded on 2026-12-01 when the pin moved from 0.32.0, which lies
outside TRL 1.15's `[vllm]` extra, to 0.31.0). Only requirements on packages grpo-kit pins (pyproject extras, constraints.txt)
are kept. What this cannot catch: conflicts deeper in the tree (one was found by a full
`pip install --dry-run` resolution: vllm -> mistral_common needs numpy<2.4, while constraints.txt pins
numpy 2.4.6 for the CPU environment; hence pyproject says to install this extra without it).
"""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]

RECORDED: dict[str, tuple[str, tuple[str, ...]]] = {
    "unsloth": (
        "2026.10.9",
        (
            "unsloth_zoo>=2026.10.9",
            "packaging",
            "torch<2.15.0,>=2.4.0",
            "numpy",
            "tqdm",
            "psutil",
            "bitsandbytes!=0.46.0,!=0.48.0,>=0.45.5",
            "datasets!=4.0.*,!=4.1.0,!=4.4.*,!=4.5.0,<5.0.0,>=3.4.1",
            "accelerate>=0.34.1",
            "peft!=0.11.0,>=0.18.0",
            "huggingface_hub>=0.34.0",
            "transformers!=4.53.0,!=4.54.0,!=4.55.0,!=4.55.1,!=4.57.0,!=4.57.4,!=4.57.5,!=5.0.0,!=5.1.0,<=5.17.0,>=4.52.4",
            "trl!=0.19.0,<=1.15.0,>=0.18.2",
            "typer>=0.19.0",
            "rich",
            "pydantic",
            "pyyaml",
            "click>=8.0",
            "certifi>=2026.10.19",
        ),
    ),
    "unsloth_zoo": (
        "2026.10.9",
        (
            'torch<2.15.0,>=2.4.0; sys_platform != "darwin" or platform_machine != "arm64"',
            'accelerate>=0.34.1; sys_platform != "darwin" or platform_machine != "arm64"',
            'trl!=0.19.0,<=1.15.0,>=0.18.2; sys_platform != "darwin" or platform_machine != "arm64"',
            'peft!=0.11.0,>=0.18.0; sys_platform != "darwin" or platform_machine != "arm64"',
            "packaging>=24.1",
            "transformers!=4.53.0,!=4.54.0,!=4.55.0,!=4.55.1,!=4.57.4,!=4.57.5,!=5.0.0,!=5.1.0,<=5.17.0,>=4.52.4",
            "datasets!=4.0.*,!=4.1.0,!=4.4.*,!=4.5.0,<5.0.0,>=3.4.1",
            "tqdm",
            "psutil",
            "numpy",
            "huggingface_hub>=0.34.0",
            "pillow",
            "regex",
            "msgspec",
            "typing_extensions",
            "filelock",
            "requests",
            "certifi>=2026.10.19",
        ),
    ),
    "bitsandbytes": (
        "0.50.2",
        (
            "torch<3,>=2.4",
            "numpy>=1.17",
            "packaging>=20.9",
        ),
    ),
    "vllm": (
        "0.31.0",
        (
            "regex",
            "psutil",
            "sentencepiece",
            "numpy",
            "requests>=2.26.0",
            "tqdm",
            "transformers<5.18.0,>=5.10.4",
            "huggingface_hub>=1.31.0",
            "tokenizers>=0.21.1",
            "safetensors>=0.6.2",
            'protobuf!=6.30.*,!=6.31.*,!=6.32.*,!=6.33.0.*,!=6.33.1.*,!=6.33.2.*,!=6.33.3.*,!=6.33.4.*,>=5.29.6; platform_machine != "s390x"',
            'protobuf==7.36.1; platform_machine == "s390x"',
            "starlette>=1.0.1",
            "aiohttp>=3.13.3",
            "pydantic>=2.12.0",
            "pillow",
            "typing_extensions>=4.10",
            "filelock>=3.16.1",
            "jsonschema>=4.23.0",
            "pyzmq>=25.0.0",
            "msgspec",
            "pyyaml",
            "watchfiles",
            "opentelemetry-sdk>=1.27.0",
            "opentelemetry-api>=1.27.0",
            "torch==2.13.0",
        ),
    ),
}

# The platforms the extra is for: Linux x86_64 with CUDA, Python 3.11 (ours) and 3.12 (Colab).
TARGET_ENVIRONMENTS = [
    {
        **default_environment(),
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "python_version": version,
        "python_full_version": f"{version}.0",
        "extra": "",
    }
    for version in ("3.11", "3.12")
]


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _exact_pins(requirements) -> dict[str, str]:
    """{canonical name: version} for every `name==version` requirement (self-references skipped)."""
    pins = {}
    for line in requirements:
        req = Requirement(line)
        if canonicalize_name(req.name) == "grpo-kit":
            continue
        specs = list(req.specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{line!r} is not an exact pin"
        pins[canonicalize_name(req.name)] = specs[0].version
    return pins


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, version = line.split("==")
            pins[canonicalize_name(name)] = version
    return pins


def _requirements(package: str) -> tuple[str, tuple[str, ...], str]:
    """(version, requirement strings, where they came from): installed metadata if present, else the record."""
    try:
        dist = importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        version, reqs = RECORDED[package]
        return version, reqs, "recorded"
    reqs = tuple(r for r in (dist.requires or []) if "extra ==" not in r)
    return dist.version, reqs, "installed"


def _conflicts(requirements, pins: dict[str, str]) -> list[str]:
    problems = []
    for line in requirements:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        if name not in pins:
            continue
        applies = req.marker is None or any(req.marker.evaluate(env) for env in TARGET_ENVIRONMENTS)
        if applies and not req.specifier.contains(pins[name], prereleases=True):
            problems.append(f"needs {line!r} but {name}=={pins[name]} is pinned")
    return problems


def test_unsloth_extra_pins_exactly_the_recorded_versions():
    extras = _extras()
    assert "grpo-kit[train]" in extras["unsloth"]
    pins = _exact_pins(extras["unsloth"])
    assert set(pins) == {"unsloth", "unsloth-zoo", "bitsandbytes", "vllm"}
    for package, (version, _) in RECORDED.items():
        # Bumping a pin without re-recording its requirements must fail here.
        assert pins[canonicalize_name(package)] == version, package


@pytest.mark.parametrize("package", sorted(RECORDED))
def test_each_gpu_package_accepts_every_other_pin(package):
    extras = _extras()
    pins = {**_exact_pins(extras["train"]), **_exact_pins(extras["unsloth"])}
    version, requirements, source = _requirements(package)
    assert version == pins[canonicalize_name(package)], f"installed {package} {version} is not the pinned one"
    assert _conflicts(requirements, pins) == [], f"{package} ({source} metadata)"


def test_the_train_pins_sit_inside_unsloths_declared_ranges():
    """The train extra's trl/transformers/datasets (and torch/peft/accelerate) are what Unsloth accepts."""
    train = _exact_pins(_extras()["train"])
    for package in ("unsloth", "unsloth_zoo"):
        _, requirements, _ = _requirements(package)
        declared = {canonicalize_name(Requirement(r).name): Requirement(r) for r in requirements}
        for name in ("trl", "transformers", "datasets", "torch", "peft", "accelerate"):
            assert declared[name].specifier.contains(train[name]), (
                package,
                name,
                str(declared[name].specifier),
            )


def test_cpu_constraints_satisfy_the_direct_requirements_too():
    """constraints.txt (the CPU lock) agrees with every direct requirement of the GPU packages; the one
    known transitive conflict (numpy, via vllm -> mistral_common) is documented in pyproject."""
    constraints = _constraints()
    for package in RECORDED:
        _, requirements, _ = _requirements(package)
        assert _conflicts(requirements, constraints) == [], package


def test_a_conflict_would_be_reported():
    # The checker itself: trl 1.16 would violate unsloth's trl<=1.15.0 cap.
    problems = _conflicts(RECORDED["unsloth"][1], {"trl": "1.16.0", "torch": "2.13.0"})
    assert len(problems) == 1 and re.search(r"trl.*<=1\.15\.0.*trl==1\.16\.0", problems[0])


def _trl_vllm_range() -> tuple[str, Requirement]:
    """(trl version, its `[vllm]` extra's requirement on vllm), from the installed TRL's own metadata."""
    requirements = [Requirement(r) for r in importlib.metadata.requires("trl") or []]
    for req in requirements:
        if (
            canonicalize_name(req.name) == "vllm"
            and req.marker is not None
            and req.marker.evaluate({**TARGET_ENVIRONMENTS[0], "extra": "vllm"})
        ):
            return importlib.metadata.version("trl"), req
    raise AssertionError("the installed trl declares no `[vllm]` extra requirement on vllm")


def _outside_trl_vllm_range(pins: dict[str, str]) -> list[str]:
    trl_version, req = _trl_vllm_range()
    if "vllm" in pins and not req.specifier.contains(pins["vllm"], prereleases=True):
        return [f"vllm=={pins['vllm']} is pinned but trl {trl_version}[vllm] needs vllm{req.specifier}"]
    return []


def test_every_pinned_vllm_lies_inside_the_pinned_trls_vllm_extra():
    """TRL warns when it finds a vllm outside its `[vllm]` extra (and its vLLM client follows that API)."""
    extras = _extras()
    pins = {**_exact_pins(extras["train"]), **_exact_pins(extras["unsloth"])}
    assert importlib.metadata.version("trl") == pins["trl"], "the installed trl is not the pinned one"
    assert "vllm" in pins
    for source, version in (("pyproject unsloth extra", pins["vllm"]), *_other_vllm_pins()):
        assert _outside_trl_vllm_range({"vllm": version}) == [], source


def _other_vllm_pins() -> list[tuple[str, str]]:
    """vllm pinned anywhere else in the repository (scripts, docs, constraints)."""
    found = []
    for path in [ROOT / "constraints.txt", *ROOT.glob("scripts/*"), *ROOT.glob("docs/*.md")]:
        if path.is_file():
            for version in re.findall(r"\bvllm==([0-9][0-9a-z.]*[0-9a-z])", path.read_text()):
                found.append((str(path.relative_to(ROOT)), version))
    return found


def test_a_vllm_outside_trls_range_would_be_reported():
    # vllm 0.32.0 (the previous pin) lies outside TRL 1.15's `vllm<=0.31.0`.
    problems = _outside_trl_vllm_range({"vllm": "0.32.0"})
    assert len(problems) == 1 and "vllm==0.32.0" in problems[0] and "<=0.31.0" in problems[0]


def test_no_deprecated_server_command_remains_in_the_repository():
    """TRL 1.15 deprecates its `vllm-serve` subcommand; docs and messages show `vllm serve` (TRL's docs)."""
    import subprocess

    files = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    deprecated = "trl " + "vllm-serve"
    found = [
        name
        for name in files
        if (ROOT / name).is_file() and deprecated in (ROOT / name).read_text(errors="ignore")
    ]
    assert found == []


def test_qlora_extra_pins_the_bitsandbytes_of_the_unsloth_extra_and_of_constraints():
    """`grpo-kit[qlora]` (4-bit QLoRA on CPU or CUDA, in dev too) and the Unsloth path use one bitsandbytes."""
    extras = _extras()
    assert "grpo-kit[train]" in extras["qlora"] and "grpo-kit[train,qlora,notebooks,logging]" in extras["dev"]
    qlora = _exact_pins(extras["qlora"])
    assert qlora == {"bitsandbytes": _exact_pins(extras["unsloth"])["bitsandbytes"]}
    assert _constraints()["bitsandbytes"] == qlora["bitsandbytes"]
