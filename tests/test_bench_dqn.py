"""benchmarks/bench_dqn.py: a rerun of --speed times again into the same --out."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tests.bench_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_dqn")


@pytest.mark.parametrize("overwrite", [True, False])
def test_a_speed_run_replaces_only_its_own_earlier_run(bench, tmp_path, overwrite):
    import snrl

    run = next(r for r in bench.RUNS if r["task"] == "cartpole" and r["variant"] == "lif")
    spec = {**run, "steps": 200, "seed": 0, "overrides": {"eval_interval": 0},
            "run_dir": str(tmp_path / "speed" / "round0" / "lif"), "overwrite": overwrite}
    first = bench.worker(spec)
    mine = Path(spec["run_dir"]) / "run" / "notes.txt"
    mine.write_text("mine")
    if not overwrite:  # a learning run is never replaced unasked
        with pytest.raises(snrl.UserError, match="holds an earlier run"):
            bench.worker(spec)
        return
    second = bench.worker(spec)
    assert math.isfinite(first["wall_s"]) and math.isfinite(second["wall_s"])
    assert mine.read_text() == "mine"  # a file the run did not write stays
