"""Progress where the user looks: a bar whose count never passes its total on a terminal, a
line every 10 % on a log (a subprocess with stderr to a pipe), nothing with --quiet."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from snrl.training import Progress
from snrl.training import progress as progress_module

ROOT = Path(__file__).resolve().parents[2]


def test_terminal_bar_never_passes_its_total(monkeypatch, capsys):
    monkeypatch.setattr(progress_module, "_stderr_is_tty", lambda: True)
    bar = Progress(5_000, mode=None)
    assert bar.mode == "bar"
    for _ in range(20):  # PPO's whole updates: 20 x 256 = 5,120 env steps
        bar.update(256, ret=10.0)
        assert bar.n <= 5_000 and bar._bar.n <= bar._bar.total == 5_000
    bar.close()
    err = capsys.readouterr().err
    assert "5.00k/5.00k" in err and "5.12k" not in err


def test_log_lines_every_tenth_with_the_total(capsys):
    bar = Progress(1_000, mode="lines", title="PPO lif on CartPole-v1")
    for _ in range(8):  # 8 x 128 = 1,024 steps: 8 tenths crossed, then clamped at 1,000
        bar.update(128, ret=float("nan"), eval=12.5)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 8
    assert lines[0].startswith("PPO lif on CartPole-v1: env_step 128/1,000 (13 %), ")
    assert lines[-1].startswith("PPO lif on CartPole-v1: env_step 1,000/1,000 (100 %)")
    assert all("steps/s" in line and "eval 12.5" in line and "return" not in line for line in lines)


def _train(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snrl.cli", "train", "--backbone", "mlp", "--hidden", "8"]
    cmd += ["--steps", "1000", "--n-envs", "4", "--set", "n_steps=16", "--set", "n_epochs=1"]
    cmd += ["--set", "eval_interval=0", "--set", "eval_episodes=1", "--out", str(tmp_path / "r")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SNRL_MAX_STEPS", None)
    return subprocess.run(
        [*cmd, *extra], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_snrl_train_to_a_pipe_writes_progress_lines(tmp_path):
    res = _train(tmp_path)
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if "env_step" in ln]
    # 16 updates of 64 steps: one line per tenth of 1,000 crossed, the last at the total
    assert len(lines) == 10, res.stderr
    counts = [
        int(m.group(1).replace(",", ""))
        for ln in lines
        for m in [re.search(r"env_step ([\d,]+)/1,000 ", ln)]
    ]
    assert counts == sorted(counts) and counts[-1] == 1_000
    # the label is the run title (algo, backbone, size, seed, env: snrl.agents.run_title)
    title = "PPO · MLP · 8 units · seed 0 · CartPole-v1"
    assert lines[0].startswith(f"{title}: env_step 128/1,000 (13 %)")
    assert all("steps/s" in ln for ln in lines)


def test_snrl_train_quiet_is_silent(tmp_path, capsys):
    from snrl.cli import main

    args = ["train", "--backbone", "mlp", "--hidden", "8", "--steps", "64", "--n-envs", "2"]
    args += ["--set", "n_steps=8", "--set", "eval_interval=0", "--set", "eval_episodes=1"]
    assert main([*args, "--out", str(tmp_path / "r"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert main([*args, "--out", str(tmp_path / "s")]) == 0  # without --quiet: lines
    assert "env_step 64/64 (100 %)" in capsys.readouterr().err


def test_notebook_mode_uses_tqdm_auto_and_clamps(capsys):
    bar = Progress(100, mode="notebook")
    bar.update(150, ret=1.0)
    assert bar.n == 100 and bar._bar.n == 100
    bar.close()
