"""The house's shape, held by a test: every import in ``grpo_kit/`` (lazy ones inside functions included) points
down or sideways between the rooms of ARCHITECTURE.md, never up, and no modules import each other in a circle.
``rewards/`` and ``datasets_prep/`` import nothing of ``grpo_kit``.

The graph is read from the source with ``ast`` (nothing is imported), one node per module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The rooms, bottom to top, one package each. A module may import its own room and the rooms below it. A module in
# no room (a new flat file in grpo_kit/) fails the test: put it in the package of its room.
ROOMS: list[tuple[str, tuple[str, ...]]] = [
    ("support", ("support",)),  # files, terminals, signals, progress lines; no GRPO in here
    ("core", ("core",)),  # the GRPO math, torch only, proven equal to TRL
    ("config", ("config",)),  # every setting once, and its rules
    ("models", ("models",)),  # a name, path, .gguf or alias -> (model, tokenizer)
    ("rollout", ("rollout",)),  # completions and rewards outside the optimizer step
    ("recipes", ("recipes",)),  # what to train: the Recipe and its files
    ("artifacts", ("artifacts",)),  # what a run leaves on disk
    ("evaluation", ("evaluation",)),  # held-out evaluation and what a learner reads of it
    ("loop", ("loop",)),  # the standalone trainer
    ("trainers", ("trainers",)),  # the same recipe through TRL and Unsloth
    ("export", ("export",)),
    ("runs", ("runs",)),  # plan -> execute into a run folder
    ("teaching", ("teaching",)),  # what only the lessons import
    ("cli", ("cli",)),
]  # fmt: skip


def _modules(package: str) -> dict[str, Path]:
    modules = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    return modules


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``name`` imports anywhere in its file (not its own parent packages)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names
            ]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def _room(module: str) -> int:
    short = module.removeprefix("grpo_kit.")
    best = None
    for rank, (_, prefixes) in enumerate(ROOMS):
        for prefix in prefixes:
            if (short == prefix or short.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[1]
            ):
                best = (rank, len(prefix))
    if best is None:
        pytest.fail(
            f"{module} is in no room: add it to ROOMS in tests/test_architecture.py and to ARCHITECTURE.md"
        )
    return best[0]


GRPO_KIT = _modules("grpo_kit")
GRAPH = {name: _imports(name, path, GRPO_KIT) for name, path in GRPO_KIT.items() if name != "grpo_kit"}


def test_every_import_points_down_or_sideways():
    upward = [
        f"{module} ({ROOMS[_room(module)][0]}) imports {target} ({ROOMS[_room(target)][0]})"
        for module, targets in GRAPH.items()
        for target in sorted(targets)
        if target != "grpo_kit" and _room(target) > _room(module)
    ]
    assert not upward, "\n".join(upward)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return components


def test_no_modules_import_each_other_in_a_circle():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("package", ["rewards", "datasets_prep"])
def test_rewards_and_datasets_prep_import_nothing_of_grpo_kit(package):
    known = GRPO_KIT | _modules(package)
    offenders = {
        name: sorted(t for t in _imports(name, path, known) if t.startswith("grpo_kit"))
        for name, path in _modules(package).items()
    }
    assert {name: t for name, t in offenders.items() if t} == {}


def test_grpo_kit_is_packages_not_a_flat_folder():
    flat = sorted(p.name for p in (ROOT / "grpo_kit").glob("*.py"))
    packages = sorted(p.parent.name for p in (ROOT / "grpo_kit").glob("*/__init__.py"))
    assert len(flat) <= 3, flat
    assert packages == sorted(prefix for _, (prefix,) in ROOMS), (
        "one room per package, in ARCHITECTURE.md's order"
    )
