"""benchmarks/bench_tasks.py runs and prints one row per task and the geometric mean."""

from __future__ import annotations

import pytest

pytest.importorskip("neurogym")
from tests.bench_scripts import load_benchmark  # noqa: E402


def test_bench_tasks_smoke(capsys):
    bench = load_benchmark("bench_tasks")
    rows = bench.main(["--tasks", "GoNogo-v0", "--envs", "8", "--ng-steps", "2", "--steps", "5"])
    assert [r["task"] for r in rows] == ["GoNogo-v0"]
    assert rows[0]["neurogym"] > 0 and rows[0]["snrl"] > 0
    assert rows[0]["ratio"] == pytest.approx(rows[0]["snrl"] / rows[0]["neurogym"])
    assert "geometric mean ratio" in capsys.readouterr().out
