#!/usr/bin/env bash
# Release check: build the sdist and wheel, `twine check` them, install the wheel into a clean venv (with
# its extras) and import the three packages there, from a folder outside the repository.
#
#   scripts/check_wheel.sh           # extras "train" (CI: .ci/run)
#   scripts/check_wheel.sh ""        # the base install only (math-verify): tests/test_packaging.py
#
# build and twine come from PyPI into a throwaway venv (pinned here: they are release tools, not grpo-kit
# dependencies). Everything is made under a temporary folder, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
EXTRAS=${1-train}
PY=${PYTHON:-python3}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/grpo-kit-wheel.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1
unset PYTHONPATH

"$PY" -m venv "$WORK/tools"
"$WORK/tools/bin/python" -m pip install -q build==1.6.1 twine==7.0.0
"$WORK/tools/bin/python" -m build --outdir "$WORK/dist" "$ROOT" >"$WORK/build.log" 2>&1 \
    || { tail -n 30 "$WORK/build.log"; exit 1; }
"$WORK/tools/bin/python" -m twine check --strict "$WORK"/dist/*
wheel=$(ls "$WORK"/dist/*.whl)
echo "built $(basename "$wheel") and $(basename "$(ls "$WORK"/dist/*.tar.gz)")"

"$PY" -m venv "$WORK/clean"
if [ -n "$EXTRAS" ]; then
    "$WORK/clean/bin/python" -m pip install -q -c "$ROOT/constraints.txt" torch==2.13.0 "$wheel[$EXTRAS]"
else
    "$WORK/clean/bin/python" -m pip install -q -c "$ROOT/constraints.txt" "$wheel"
fi
cd "$WORK"  # not the repository: the imports must come from the installed wheel
"$WORK/clean/bin/python" - <<'PY'
import pathlib

import datasets_prep
import grpo_kit
import rewards

for module in (rewards, datasets_prep, grpo_kit):
    assert "site-packages" in pathlib.Path(module.__file__).parts, module.__file__
print("imported rewards, datasets_prep, grpo_kit from the installed wheel")

import importlib.resources

# the held-out sets a recipe's transfer_eval names are package data (pyproject.toml: package-data)
for spec in datasets_prep.TRANSFER_SETS.values():
    if spec.file is None:  # a set drawn by its loader (shapes-transfer): nothing shipped to check
        continue
    data = importlib.resources.files("datasets_prep").joinpath(spec.file)
    assert data.is_file(), f"{spec.file} is not in the wheel"
    assert sum(1 for line in data.read_text(encoding="utf-8").splitlines() if line.strip()) == spec.size
shipped = sorted(name for name, spec in datasets_prep.TRANSFER_SETS.items() if spec.file is not None)
print(f"the wheel ships the held-out sets {', '.join(shipped)}")

# every recipe of the catalogue is a recipe file in the package (grpo_kit/recipes/shipped/<name>.yaml)
from grpo_kit.recipes.catalogue import RECIPES

for name in RECIPES:
    assert importlib.resources.files("grpo_kit.recipes").joinpath(f"shipped/{name}.yaml").is_file(), name
print(f"the wheel ships the {len(RECIPES)} recipe files")
PY
if [ -n "$EXTRAS" ]; then
    "$WORK/clean/bin/grpo-kit" recipes >/dev/null
    echo "grpo-kit recipes runs with the [$EXTRAS] extras"
fi
