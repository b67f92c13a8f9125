"""benchmarks/bench_tensor_path.py runs both paths and prints their ratios."""

from __future__ import annotations

import pytest

pytest.importorskip("neurogym")
from tests.bench_scripts import load_benchmark  # noqa: E402


def test_bench_tensor_path_smoke(capsys):
    bench = load_benchmark("bench_tensor_path")
    argv = ["--runs", "1", "--envs", "4", "--n-steps", "4", "--updates", "2", "--hidden", "8"]
    rows = bench.main(argv)
    assert len(rows) == 1
    for row in rows:
        assert row["train_on"] > 0 and row["train_off"] > 0
        assert row["train_ratio"] == pytest.approx(row["train_on"] / row["train_off"])
        assert row["collect_on"] >= row["train_on"]  # collection is part of training's time
    assert "median ratio (on / off): training" in capsys.readouterr().out
