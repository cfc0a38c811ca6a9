"""Shared test configuration: GPU tests skip without CUDA."""

from __future__ import annotations

import importlib.util

import pytest


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    # Only GPU tests need the (slow) torch import to decide whether to skip them.
    if not gpu_items or _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA (run scripts/gpu_smoke.sh on a GPU machine)")
    for item in gpu_items:
        item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def tiny():
    """A randomly initialised 2-layer Llama + the SmolLM2 tokenizer, built once per test session.

    Tests that train it must deepcopy the model first (``copy.deepcopy(tiny[0])``) so other tests
    see the same initial weights; ``grpo_kit.models.tiny_model(seed)`` gives a fresh one (< 1 s).
    """
    from grpo_kit.models import tiny_model

    return tiny_model(seed=0)
