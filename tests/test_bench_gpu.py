"""benchmarks/bench_gpu.py stays runnable: its quick mode on the CPU writes every row."""

from __future__ import annotations

import json
import math

from tests.bench_scripts import load_benchmark


def test_quick_run_on_the_cpu_writes_every_row(tmp_path):
    bench = load_benchmark("bench_gpu")
    out = tmp_path / "gpu.json"
    res = bench.main(["--device", "cpu", "--quick", "--repeats", "1", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(res))
    assert [r["shape"] for r in res["layers"]] == [list(s) for s in bench.QUICK_LAYER_SHAPES]
    assert [(r["n_envs"], r["hidden_size"]) for r in res["ppo"]] == bench.QUICK_PPO_ROWS
    rates = [r["device_steps_per_s"] for r in res["ppo"]] + [res["dqn"]["device_steps_per_s"]]
    rates += [r["ratio"] for r in res["layers"]]
    assert all(math.isfinite(x) and x > 0 for x in rates)
