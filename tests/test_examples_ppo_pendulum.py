"""examples/ppo_pendulum.py runs as a user would run it, and its settings are the benchmark's."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ppo_pendulum.py"
TOML = ROOT / "benchmarks" / "configs" / "pendulum_lif.toml"


def test_quick_run_trains_checkpoints_and_evaluates(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    # 16 envs x 128 steps = 2048 env steps per update; --quick asks for 4096: two updates
    assert summary["env_steps"] == 4096
    assert [s for s, _ in summary["periodic_evals"]] == [2048, 4096]
    # a Pendulum episode is 200 steps with a reward in [-(pi^2 + 0.1 * 8^2 + 0.001 * 2^2), 0]
    worst = -200 * (math.pi**2 + 0.1 * 64 + 0.001 * 4)
    for key in ("best_return", "last_return"):
        assert worst <= summary[key] <= 0, (key, summary[key])
    # the best checkpoint is the better of the two periodic evaluations (10 episodes each,
    # different seeds from the final 20-episode evaluation, so only its existence is checked)
    assert (out / "checkpoints" / "best.pt").is_file()
    assert (out / "checkpoints" / "last.pt").is_file()
    rows = (out / "metrics.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + 2  # header + one row per update
    rates = summary["spike_rates"]
    assert rates and all(0.0 < r < 1.0 for r in rates.values()), rates
    assert summary["config"]["backbone"] == "lif" and summary["config"]["force_dale_law"]


def test_example_settings_equal_the_benchmark_toml() -> None:
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        import ppo_pendulum
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    with open(TOML, "rb") as f:
        toml = tomllib.load(f)
    assert toml == ppo_pendulum.SETTINGS
