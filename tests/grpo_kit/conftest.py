"""Fixtures shared by the grpo_kit tests."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """The tiny model's matrices are too small to split across threads; on a busy 2-core CI box the threads'
    spin-waiting made a GRPO step ~10x slower (measured: 15 s vs 0.7 s per step). Results do not depend on it."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
