"""Shared test setup: one thread (the test machine has 2 shared cores), seeded generators."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture
def gen() -> torch.Generator:
    """A CPU generator seeded with 0, fresh for each test."""
    return torch.Generator().manual_seed(0)
