"""Shared test setup: one thread (the test machine has 2 shared cores), seeded generators."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture
def gen() -> torch.Generator:
    """A CPU generator seeded with 0, fresh for each test."""
    return torch.Generator().manual_seed(0)


def pytest_collection_modifyitems(config, items) -> None:
    """Tests marked ``cuda`` run where torch sees a CUDA device; elsewhere they are skipped
    with that reason (their CPU twins run everywhere)."""
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)
