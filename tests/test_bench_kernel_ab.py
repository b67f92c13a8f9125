"""benchmarks/bench_kernel_ab.py: its equality check passes for the same kernel source and
catches a kernel whose numbers changed."""

from __future__ import annotations

import pytest

from snrl.functional import _native
from tests.bench_scripts import load_benchmark


def test_kernel_ab_equality_check(tmp_path, monkeypatch):
    if _native._compiler() is None:
        pytest.skip("no C compiler")
    monkeypatch.setattr(_native, "_STATE", {})  # the builds of this test, then snrl's again
    bench = load_benchmark("bench_kernel_ab")
    source = (bench.ROOT / bench.KERNEL).read_bytes()
    spike = b"z[j] = v[j] > threshold ? 1.0f : 0.0f;"
    assert source.count(spike) == 1  # the forward's spike rule (a different one below)
    base = bench.build(source, tmp_path, "base")
    same = bench.build(source + b"\n", tmp_path, "same")
    assert "equal bit for bit" in bench.check_equal({"base": base, "tree": same})
    changed = bench.build(
        source.replace(spike, b"z[j] = v[j] > 0.5f * threshold ? 1.0f : 0.0f;"), tmp_path, "x"
    )
    with pytest.raises(AssertionError, match="forward differs at N=7"):
        bench.check_equal({"base": base, "tree": changed})
