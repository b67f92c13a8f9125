"""Shared test setup: one thread (the test machine has 2 shared cores), seeded generators."""

from __future__ import annotations

import os

# One BLAS/OpenMP thread, set before numpy and torch load their thread pools, for this process
# and (inherited through os.environ) every process a test starts. numpy's OpenBLAS starts one
# thread per core, and on a loaded 2-core machine its threads spin waiting for each other:
# the x.T @ x of the decoder's shrinkage covariance (snrl.analysis.dynamics, 400 x 128) took
# 5.4 ms of CPU per call with the default pool against 0.35 ms on one thread (load 7), and
# every `snrl analyze` in the tests and in the docs' blocks fits thousands of them.
# setdefault: a value set by hand is kept. (pytest and its plugins import no numpy before
# this file: checked with `-p no:cacheprovider` and the dev extras.)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import pytest  # noqa: E402
import torch  # noqa: E402

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
