"""benchmarks/bench_eprop.py runs (its numbers are in docs/benchmarks.md)."""

from __future__ import annotations

import pytest

from tests.bench_scripts import load_benchmark


@pytest.mark.parametrize("method", ["bptt", "eprop"])
@pytest.mark.parametrize("neuron", ["lif", "alif"])
def test_memory_cell_runs(method, neuron):
    b = load_benchmark("bench_eprop")
    row = b._memory_one(method, 5, neuron)
    assert row["method"] == method and row["T"] == 5 and row["extra_bytes"] >= 0
