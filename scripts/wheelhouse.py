"""Build a minimal offline wheelhouse for one extra of grpo-kit and one target machine.

    python scripts/wheelhouse.py --extra unsloth --python 3.12 --cuda 13 \\
        --have torch,transformers,peft,accelerate,numpy,safetensors,sentencepiece,tokenizers,triton,pytest,rich,tqdm \\
        --slim --max-mib 60 --out DIR

For an air-gapped GPU box that already has CUDA torch and the usual stack, and takes at most a few tens of MiB
per transfer. The steps:

1. **Closure.** The extra's requirements come from ``pyproject.toml`` (``grpo-kit[train]`` inside an extra is
   expanded), pinned further by ``constraints.txt``. ``pip install --dry-run --ignore-installed --report`` for the
   target (``--python-version``, manylinux platforms up to ``--glibc``, ``--only-binary=:all:``) resolves the
   whole closure with each package's ``Requires-Dist``; only metadata is fetched.
2. **Plan** (:func:`plan`, pure). Walk the dependency graph from the extra's requirements. A package the target
   has (``--have``, or ``--have-freeze`` = a ``pip freeze`` of it) is a leaf: it is skipped, and so is everything
   it depends on (the target has that too). Packages in :data:`NEVER_CARRIED` are skipped with the reason (vllm:
   hundreds of MB; the Unsloth path then runs with ``fast_inference=False``), and so are packages the extra's
   packages declare but never import on the path we run (:data:`OPTIONAL_AT_RUNTIME`; ``--keep-optional``
   carries them anyway).
3. **Download** each planned wheel once (``pip download --no-deps``) into a cache outside the repository.
4. **Slim** (``--slim``, :func:`slim_wheel`, pure on a wheel file): ``bitsandbytes`` keeps only the target CUDA
   major's libraries (plus the CPU one it falls back to), ``unsloth`` drops ``studio/`` (its web UI). The wheel is
   rewritten with the same name; its ``RECORD`` lists exactly the files left, and ``top_level.txt`` loses what
   was dropped, so ``pip install --no-index --no-deps`` accepts it.
5. **Budget.** Print each wheel's size and the total; exit 1 with the biggest wheels named when the total is
   over ``--max-mib``.

Install on the target (see docs/gpu.md)::

    pip install --no-index --no-deps --target /tmp/site DIR/*.whl && export PYTHONPATH=/tmp/site
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

REPO = Path(__file__).resolve().parents[1]
PROJECT = "grpo-kit"
MIB = 2**20

#: Packages no wheelhouse carries, whatever the extra says.
NEVER_CARRIED = {
    "vllm": "cannot be carried (hundreds of MB with its CUDA kernels); the Unsloth path runs with "
    "fast_inference=False and generates with transformers",
}

#: Declared by unsloth / unsloth_zoo 2026.10.9 but not imported on the text-model QLoRA GRPO path
#: (read in their source: imported inside functions for other features, or behind try/find_spec).
OPTIONAL_AT_RUNTIME = {
    "xformers": "unsloth imports it in try/except ModuleNotFoundError and falls back to PyTorch attention; "
    "the PyPI wheel is built for one torch release, not the target's",
    "torchvision": "vision models only (unsloth checks find_spec('torchvision')); built for one torch release",
    "diffusers": "never imported by unsloth or unsloth_zoo",
    "hf_transfer": "speeds up Hub downloads; the target is offline",
    "torchao": "imported inside functions for fp8/QAT/torchao quantization only",
    "matplotlib": "grpo-kit draws its PNGs (reward curve, report card) only when matplotlib imports; without it "
    "the run writes the same JSON/Markdown and says the PNG was skipped",
}


# --- target description ----------------------------------------------------------------------------


def platform_tags(glibc: str = "2.35", machine: str = "x86_64") -> list[str]:
    """The manylinux tags a Linux machine with this glibc accepts, newest first (pip matches each exactly)."""
    major, minor = (int(x) for x in glibc.split("."))
    if major != 2 or minor < 17:
        raise ValueError(
            f"--glibc {glibc}: give the target's glibc as 2.N with N >= 17 (`ldd --version` there)."
        )
    tags = [f"manylinux_2_{n}_{machine}" for n in range(minor, 4, -1)]
    return tags + [f"manylinux2014_{machine}", f"manylinux2010_{machine}", f"manylinux1_{machine}"]


def marker_environment(python: str, machine: str = "x86_64") -> dict[str, str]:
    """PEP 508 marker values of a Linux CPython target."""
    if not re.fullmatch(r"3\.\d+", python):
        raise ValueError(f"--python {python!r}: give major.minor, e.g. 3.12.")
    return {
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": machine,
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_version": "",
        "implementation_version": f"{python}.0",
    }


# --- requirements of an extra ---------------------------------------------------------------------


def extra_requirements(pyproject: dict, extra: str) -> list[str]:
    """The requirement strings of ``extra``, with ``grpo-kit[other]`` expanded (recursively, once each)."""
    project = pyproject["project"]
    extras = project.get("optional-dependencies", {})
    if extra not in extras:
        raise ValueError(f"--extra {extra!r} is not in pyproject.toml; choose one of {sorted(extras)}.")
    own = canonicalize_name(project["name"])
    out: list[str] = []
    seen: set[str] = set()

    def expand(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for line in extras[name]:
            req = Requirement(line)
            if canonicalize_name(req.name) == own:
                for sub in sorted(req.extras):
                    expand(sub)
            elif line not in out:
                out.append(line)

    expand(extra)
    return out


def parse_have(names: str | None, freeze_file: Path | None) -> set[str]:
    """Canonical names from ``--have a,b,c`` and/or a ``pip freeze`` file (``name==ver``, ``name @ url``)."""
    have = {canonicalize_name(n.strip()) for n in (names or "").split(",") if n.strip()}
    if freeze_file is not None:
        for line in Path(freeze_file).read_text().splitlines():
            line = line.strip()
            if not line or line.startswith(("#", "-")):
                continue
            have.add(canonicalize_name(re.split(r"[=<>!~ @\[;]", line, maxsplit=1)[0]))
    return have


# --- the closure and the plan (pure) ---------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """One resolved distribution: version, wheel URL (None in synthetic closures) and dependency names."""

    version: str
    requires: tuple[str, ...] = ()
    url: str | None = None
    requirements: tuple[str, ...] = ()  # the Requires-Dist lines behind ``requires`` (with their specifiers)


def closure_from_report(report: dict, env: dict[str, str]) -> dict[str, Node]:
    """``pip install --report`` JSON -> {canonical name: Node}, edges filtered by the target's markers and the
    extras pip selected for each package."""
    closure: dict[str, Node] = {}
    for item in report["install"]:
        meta = item["metadata"]
        extras = [""] + list(item.get("requested_extras") or [])
        lines = []
        for line in meta.get("requires_dist") or []:
            req = Requirement(line)
            if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in extras):
                lines.append(line)
        requires = tuple(dict.fromkeys(canonicalize_name(Requirement(line).name) for line in lines))
        closure[canonicalize_name(meta["name"])] = Node(
            meta["version"], requires, item["download_info"]["url"], tuple(lines)
        )
    return closure


@dataclass
class Plan:
    """Which distributions to carry, and why each other one in the closure is not carried."""

    carry: list[str]
    skipped: dict[str, str] = field(default_factory=dict)


def plan(closure: dict[str, Node], roots: Iterable[str], have: set[str], exclude: dict[str, str]) -> Plan:
    """Walk from ``roots`` (requirement strings or names) through ``closure``.

    A package in ``have`` is a leaf and so is all it depends on (the target already satisfies them); a package
    in ``exclude`` is not carried and not walked through. Everything else reached is carried (sorted)."""
    have = {canonicalize_name(h) for h in have}
    exclude = {canonicalize_name(k): v for k, v in exclude.items()}
    provided: set[str] = set()
    stack = [h for h in have if h in closure]
    while stack:
        name = stack.pop()
        if name not in provided:
            provided.add(name)
            stack.extend(closure[name].requires if name in closure else ())

    skipped: dict[str, str] = {}
    carry: set[str] = set()
    stack = [canonicalize_name(Requirement(r).name) for r in roots]
    while stack:
        name = stack.pop()
        if name in carry or name in skipped:
            continue
        if name in exclude:
            skipped[name] = exclude[name]
        elif name in have:
            skipped[name] = "the target has it"
        elif name in provided:
            skipped[name] = "the target has it (a dependency of a package it has)"
        elif name not in closure:
            raise ValueError(
                f"{name} is required but missing from the resolved closure; re-run the resolution."
            )
        else:
            carry.add(name)
            stack.extend(closure[name].requires)
    return Plan(sorted(carry), dict(sorted(skipped.items())))


def parse_have_versions(freeze_file: Path | None) -> dict[str, str]:
    """{canonical name: version} for the ``name==version`` lines of a ``pip freeze`` file."""
    versions = {}
    for line in Path(freeze_file).read_text().splitlines() if freeze_file is not None else ():
        match = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+).*", line)
        if match:
            versions[canonicalize_name(match.group(1))] = match.group(2)
    return versions


def version_conflicts(
    closure: dict[str, Node], carry: Iterable[str], have_versions: dict[str, str]
) -> list[str]:
    """Requirements of carried packages that a version the target has does not meet (``pip install --no-deps``
    on the target would not notice them)."""
    problems = []
    for name in carry:
        for line in closure[name].requirements:
            req = Requirement(line)
            have = have_versions.get(canonicalize_name(req.name))
            if have is not None and not req.specifier.contains(have, prereleases=True):
                problems.append(
                    f"{name} {closure[name].version} needs {req.name}{req.specifier}, the target has "
                    f"{have}: drop {req.name} from --have/--have-freeze to carry a matching version"
                )
    return problems


class BudgetError(RuntimeError):
    pass


def check_budget(sizes: dict[str, int], max_mib: float | None) -> float:
    """Total MiB of ``sizes`` (file name -> bytes); raises BudgetError naming the biggest wheels when over."""
    total = sum(sizes.values()) / MIB
    if max_mib is not None and total > max_mib:
        biggest = ", ".join(
            f"{n} ({s / MIB:.1f} MiB)" for n, s in sorted(sizes.items(), key=lambda x: -x[1])[:4]
        )
        raise BudgetError(
            f"the wheelhouse is {total:.1f} MiB, over the budget of {max_mib:g} MiB. Biggest: {biggest}. "
            "Fixes: --slim; --have (or --have-freeze) the packages the target already has; or a larger --max-mib."
        )
    return total


# --- slimming a wheel (pure on a file) -----------------------------------------------------------------


def bitsandbytes_keep(cuda_major: int) -> Callable[[str], bool]:
    """Keep every file except the native libraries of other CUDA majors, ROCm and XPU; the CPU library stays
    (bitsandbytes loads it when no GPU library matches)."""
    pattern = re.compile(
        r"bitsandbytes/libbitsandbytes_(cuda(\d+)|rocm\d+|hip\d*|xpu\d+|mps)\.(so|dylib|dll)$"
    )

    def keep(member: str) -> bool:
        match = pattern.search(member)
        if match is None:
            return True
        cuda = match.group(2)
        return cuda is not None and cuda.startswith(str(cuda_major)) and len(cuda) == len(str(cuda_major)) + 1

    return keep


def drop_top_level(*folders: str) -> Callable[[str], bool]:
    """Keep every file outside these top-level folders."""
    return lambda member: member.split("/", 1)[0] not in folders


#: pyarrow members no import on the GRPO path loads (checked with ``readelf -d``: ``lib``, ``_fs``,
#: ``_dataset``, ``_parquet`` and ``_compute`` need neither Flight nor S3; ``pyarrow.fs`` imports ``_s3fs`` in
#: try/except): Arrow Flight (RPC), the S3 filesystem, C++ headers, Cython sources, tests, and the two extra
#: copies of ``libarrow_python`` (a wheel cannot hold symlinks; extensions load it by its SONAME ``.so.NNN``).
PYARROW_DROPPED = re.compile(
    r"^pyarrow/(include|includes|src|tests)/"
    r"|^pyarrow/[^/]*\.(pyx|pxd|pxi)$"
    r"|^pyarrow/(libarrow_flight|libarrow_python_flight|_flight|flight\.py|libarrow_s3|_s3fs|_pyarrow_cpp_tests)"
    r"|^pyarrow/libarrow_python\.so(\.\d+\.\d+\.\d+)?$"
)


def pyarrow_keep(_cuda_major: int) -> Callable[[str], bool]:
    """Keep what ``import pyarrow``, ``pyarrow.compute``, ``.dataset``, ``.parquet`` and ``.json`` load."""
    return lambda member: PYARROW_DROPPED.search(member) is None


def drop_prefixes(*prefixes: str) -> Callable[[int], Callable[[str], bool]]:
    """A keep-predicate factory that drops every member under these path prefixes."""
    return lambda _cuda_major: lambda member: not member.startswith(prefixes)


@dataclass(frozen=True)
class SlimRule:
    """How ``--slim`` rebuilds one wheel: ``keep`` (from the CUDA major) selects the members, ``what`` says what
    went; ``strip`` also removes the static symbol tables (``strip --strip-unneeded``) of its ELF shared
    libraries, which the dynamic loader never reads (``.dynsym`` stays): about 12 % of pyarrow's libraries."""

    keep: Callable[[int], Callable[[str], bool]]
    what: str
    strip: bool = False


SLIM_RULES: dict[str, SlimRule] = {
    "bitsandbytes": SlimRule(bitsandbytes_keep, "native libraries of other CUDA versions, ROCm and XPU"),
    "unsloth": SlimRule(lambda _cuda: drop_top_level("studio"), "studio/ (Unsloth Studio web UI)"),
    "pyarrow": SlimRule(
        pyarrow_keep, "Flight, S3, headers, Cython sources, tests; symbol tables", strip=True
    ),
    "pandas": SlimRule(drop_prefixes("pandas/tests/"), "pandas/tests/; symbol tables", strip=True),
}

ELF_MAGIC = b"\x7fELF"


def strip_shared_library(data: bytes) -> bytes:
    """``data`` without its static symbol table (``strip --strip-unneeded``); non-ELF data is returned as is.
    Raises RuntimeError when binutils' ``strip`` is missing or fails."""
    if not data.startswith(ELF_MAGIC):
        return data
    tool = shutil.which("strip")
    if tool is None:
        raise RuntimeError("--slim strips shared libraries with binutils' `strip`: install binutils.")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lib.so"
        path.write_bytes(data)
        run = subprocess.run(
            [tool, "--strip-unneeded", str(path)], capture_output=True, text=True, check=False
        )
        if run.returncode != 0:
            raise RuntimeError(f"strip --strip-unneeded failed: {run.stderr.strip()}")
        return path.read_bytes()


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _dist_info(names: Iterable[str]) -> str:
    tops = {n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info")}
    if len(tops) != 1:
        raise ValueError(f"a wheel has exactly one .dist-info folder; found {sorted(tops)}")
    return tops.pop()


def slim_wheel(
    src: Path,
    dst_dir: Path,
    keep: Callable[[str], bool],
    transform: Callable[[bytes], bytes] | None = None,
) -> Path:
    """Rewrite ``src`` into ``dst_dir`` (same file name) without the members ``keep`` rejects.

    ``.dist-info`` files are always kept; ``transform`` (e.g. :func:`strip_shared_library`) rewrites the other
    members' bytes. ``RECORD`` is rewritten to list exactly the files left (hash and size recomputed),
    ``top_level.txt`` loses the top-level names no file is left under. Members are deflated at level 9."""
    src, dst_dir = Path(src), Path(dst_dir)
    dst = dst_dir / src.name
    if dst.resolve() == src.resolve():
        raise ValueError("slim_wheel writes a new file: give a dst_dir other than the source wheel's folder.")
    with zipfile.ZipFile(src) as zin:
        infos = [i for i in zin.infolist() if not i.is_dir()]
        dist_info = _dist_info(i.filename for i in infos)
        record_name, top_level_name = f"{dist_info}/RECORD", f"{dist_info}/top_level.txt"
        kept = [i for i in infos if i.filename.startswith(dist_info + "/") or keep(i.filename)]
        tops_left = {i.filename.split("/", 1)[0] for i in kept}
        dst_dir.mkdir(parents=True, exist_ok=True)
        records = []
        with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
            for info in kept:
                if info.filename == record_name:
                    continue
                data = zin.read(info)
                if transform is not None and not info.filename.startswith(dist_info + "/"):
                    data = transform(data)
                if info.filename == top_level_name:
                    data = "".join(
                        line + "\n"
                        for line in data.decode().splitlines()
                        if line.split("/", 1)[0] in tops_left
                    ).encode()
                zout.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
                records.append(f"{info.filename},{_record_hash(data)},{len(data)}")
            records.append(f"{record_name},,")
            zout.writestr(record_name, "\n".join(records) + "\n")
    return dst


def verify_wheel(path: Path) -> None:
    """Raise ValueError unless every file is in RECORD with its hash and size, and RECORD lists no other file."""
    with zipfile.ZipFile(path) as z:
        names = [i.filename for i in z.infolist() if not i.is_dir()]
        record_name = f"{_dist_info(names)}/RECORD"
        rows = {}
        for line in z.read(record_name).decode().splitlines():
            if line:
                name, digest, size = line.rsplit(",", 2)
                rows[name] = (digest, size)
        if set(rows) != set(names):
            raise ValueError(
                f"{path.name}: RECORD and the files differ: {sorted(set(rows) ^ set(names))[:5]}"
            )
        for name in names:
            if name == record_name:
                continue
            data = z.read(name)
            if rows[name] != (_record_hash(data), str(len(data))):
                raise ValueError(f"{path.name}: RECORD hash or size wrong for {name}")


# --- pip (network) ---------------------------------------------------------------------------------


def _pip_target_args(python: str, glibc: str) -> list[str]:
    args = [
        "--only-binary=:all:",
        "--python-version",
        python,
        "--implementation",
        "cp",
        "--abi",
        "cp" + python.replace(".", ""),
    ]
    for tag in platform_tags(glibc):
        args += ["--platform", tag]
    return args


def resolve(requirements: list[str], *, python: str, glibc: str, constraints: Path | None) -> dict:
    """The pip install report of ``requirements`` for the target (metadata only; nothing is installed)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            *_pip_target_args(python, glibc),
            *requirements,
        ]
        if constraints is not None:
            cmd += ["-c", str(constraints)]
        run = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError("pip could not resolve the extra for the target:\n" + run.stderr[-3000:])
        return json.loads(report.read_text())


def download(name: str, version: str, cache: Path, *, python: str, glibc: str) -> Path:
    """The wheel of name==version for the target, downloaded once into ``cache``."""
    cache.mkdir(parents=True, exist_ok=True)
    for path in cache.glob("*.whl"):
        wname, wversion, _, _ = parse_wheel_filename(path.name)
        if wname == name and str(wversion) == version:
            return path
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--quiet",
        "-d",
        str(cache),
        *_pip_target_args(python, glibc),
        f"{name}=={version}",
    ]
    run = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"pip could not download {name}=={version}:\n" + run.stderr[-2000:])
    return download(name, version, cache, python=python, glibc=glibc)


# --- CLI ------------------------------------------------------------------------------------------


def build(args: argparse.Namespace) -> int:
    try:
        import tomllib
    except ModuleNotFoundError as err:  # Python 3.10: the only place this script needs 3.11
        raise RuntimeError(
            "reading pyproject.toml needs Python >= 3.11 (tomllib); run the script with it."
        ) from err
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    roots = extra_requirements(pyproject, args.extra)
    env = marker_environment(args.python)
    exclude = dict(NEVER_CARRIED)
    if not args.keep_optional:
        exclude.update(OPTIONAL_AT_RUNTIME)
    exclude.update({n.strip(): "--exclude" for n in args.exclude.split(",") if n.strip()})
    roots = [
        r
        for r in roots
        if Requirement(r).marker is None or Requirement(r).marker.evaluate({**env, "extra": ""})
    ]
    to_resolve = [
        r
        for r in roots
        if canonicalize_name(Requirement(r).name) not in {canonicalize_name(n) for n in exclude}
    ]
    constraints = None if args.no_constraints else REPO / "constraints.txt"
    print(
        f"resolving {len(to_resolve)} requirements of [{args.extra}] for CPython {args.python}, "
        f"glibc {args.glibc}, CUDA {args.cuda} ...",
        flush=True,
    )
    closure = closure_from_report(
        resolve(to_resolve, python=args.python, glibc=args.glibc, constraints=constraints), env
    )
    have = parse_have(args.have, args.have_freeze)
    result = plan(closure, roots, have, exclude)
    for name, why in result.skipped.items():
        print(f"  skip  {name}: {why}")
    conflicts = version_conflicts(closure, result.carry, parse_have_versions(args.have_freeze))
    for problem in conflicts:
        print(f"wheelhouse: version conflict: {problem}", file=sys.stderr)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    planned = {f"{n}" for n in result.carry}
    strangers = [
        p.name for p in out.glob("*.whl") if canonicalize_name(parse_wheel_filename(p.name)[0]) not in planned
    ]
    if strangers and not args.clean:
        raise SystemExit(
            f"{out} holds wheels outside this plan ({', '.join(strangers[:5])}); "
            "use an empty folder or --clean."
        )
    for p in out.glob("*.whl"):
        p.unlink()
    sizes: dict[str, int] = {}
    for name in result.carry:
        wheel = download(name, closure[name].version, Path(args.cache), python=args.python, glibc=args.glibc)
        if args.slim and name in SLIM_RULES:
            rule = SLIM_RULES[name]
            target = slim_wheel(
                wheel, out, rule.keep(args.cuda), strip_shared_library if rule.strip else None
            )
            verify_wheel(target)
            print(
                f"  slim  {name}: dropped {rule.what}: {wheel.stat().st_size / MIB:.2f} -> "
                f"{target.stat().st_size / MIB:.2f} MiB"
            )
        else:
            target = Path(shutil.copy2(wheel, out / wheel.name))
        sizes[target.name] = target.stat().st_size
    print(f"\n{len(sizes)} wheels in {out}:")
    for fname, size in sorted(sizes.items(), key=lambda x: -x[1]):
        print(f"  {size / MIB:8.2f} MiB  {fname}")
    try:
        total = check_budget(sizes, args.max_mib)
    except BudgetError as err:
        print(f"\nwheelhouse: {err}", file=sys.stderr)
        return 1
    budget = f" (budget {args.max_mib:g} MiB)" if args.max_mib is not None else ""
    print(f"  {total:8.2f} MiB  total{budget}")
    if conflicts:
        print(
            f"\nwheelhouse: {len(conflicts)} version conflict(s) with the target (above); fix them first.",
            file=sys.stderr,
        )
        return 1
    print(
        f"\ninstall on the target: pip install --no-index --no-deps --target DIR {out}/*.whl; "
        "then export PYTHONPATH=DIR"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--extra", required=True, help="the pyproject.toml extra, e.g. unsloth")
    parser.add_argument("--python", required=True, help="the target's Python, major.minor (e.g. 3.12)")
    parser.add_argument("--cuda", type=int, required=True, help="the target's CUDA major version (e.g. 13)")
    parser.add_argument("--glibc", default="2.35", help="the target's glibc (default 2.35; `ldd --version`)")
    parser.add_argument("--have", default="", help="comma-separated packages the target already has")
    parser.add_argument("--have-freeze", type=Path, help="a `pip freeze` of the target: skip what it lists")
    parser.add_argument("--exclude", default="", help="comma-separated packages not to carry (besides vllm)")
    parser.add_argument(
        "--keep-optional",
        action="store_true",
        help="also carry the runtime-optional packages (xformers, torchvision, diffusers, ...)",
    )
    parser.add_argument(
        "--slim",
        action="store_true",
        help="rebuild bitsandbytes with only the target CUDA major's library, unsloth without studio/, "
        "pyarrow without Flight/S3/headers/tests and pandas without its tests (both with stripped libraries)",
    )
    parser.add_argument("--max-mib", type=float, help="fail (exit 1) when the wheels total more than this")
    parser.add_argument("--no-constraints", action="store_true", help="resolve without constraints.txt")
    parser.add_argument(
        "--cache",
        default=str(Path.home() / ".cache" / "grpo-kit" / "wheelhouse"),
        help="download cache, outside the repository (default ~/.cache/grpo-kit/wheelhouse)",
    )
    parser.add_argument("--clean", action="store_true", help="remove wheels already in --out")
    parser.add_argument("--out", required=True, help="output folder (wheels only)")
    args = parser.parse_args(argv)
    try:
        return build(args)
    except (ValueError, RuntimeError) as err:
        print(f"wheelhouse: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
