"""The DQN example runs as a user would run it (quick mode)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_dqn_cartpole_lif_example_quick(tmp_path):
    res = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "dqn_cartpole_lif.py"),
            "--quick",
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    assert "best checkpoint:" in res.stdout
    assert "Dale's law holds on every recurrent synapse after training: True" in res.stdout
    assert "greedy episode:" in res.stdout
    assert (tmp_path / "run" / "checkpoints" / "best.pt").exists()
    assert (tmp_path / "run" / "metrics.csv").exists()
