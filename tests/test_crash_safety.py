"""Crash safety: SIGKILL ``snrl train`` at seeded random moments -- at a random time, half-way
through writing ``last.pt`` or ``best.pt``, in the middle of a periodic evaluation -- and
check after every kill that the run directory is consistent and that ``--resume`` works,
and at the end that ``metrics.csv`` has every update's row exactly once.

The kills from inside the process come from ``tests/crash_run.py`` (see its docstring).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from snrl.io import is_own_temp
from snrl.training.checkpoint import load_checkpoint
from snrl.training.metrics import read_metrics
from snrl.training.rundir import LOCK, MANIFEST, read_manifest

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
UPDATE = 256  # env steps per PPO update: 8 envs x 32 steps
CEILING = UPDATE * 1000  # never reached: every run is killed, the last one is given --steps
FALLBACK_S = 25.0  # a kill from inside that has not happened by then comes from outside
ARGS = [
    "train",
    "--backbone",
    "mlp",
    "--hidden",
    "16",
    "--n-envs",
    "8",
    "--set",
    "eval_interval=512",
    "--set",
    "eval_episodes=2",
    "--set",
    "checkpoint_interval=1",
    "--quiet",
]


def _check_consistent(out: Path) -> int:
    """The invariants a killed run must keep; returns the number of metrics rows."""
    steps = read_metrics(out / "metrics.csv")["env_step"] if (out / "metrics.csv").exists() else []
    np.testing.assert_array_equal(steps, np.arange(1, len(steps) + 1) * UPDATE)
    last = out / "checkpoints" / "last.pt"
    if last.exists():
        step = load_checkpoint(last)["counters"]["env_step"]
        assert step in set(np.asarray(steps).tolist()), "last.pt points at a logged update"
    if (out / "checkpoints" / "best.pt").exists():
        load_checkpoint(out / "checkpoints" / "best.pt")  # complete, never half-written
    listed = {e.rstrip("/") for e in read_manifest(out)}
    for p in out.rglob("*"):
        rel = str(p.relative_to(out))
        assert rel in (MANIFEST, LOCK) or rel in listed or is_own_temp(p.name), rel
    return len(steps)


def _kill_plans(n: int, seed: int) -> list[str]:
    """n kill moments: a third from inside (checkpoint writes, evaluations), the rest timed."""
    rng = np.random.default_rng(seed)
    inside = ["save:last:", "save:best:", "eval:"]
    plans = []
    for i in range(max(3, n // 3)):
        kind = inside[i % 3]
        # best.pt is written only on an improvement: its first write of a process
        plans.append(kind + ("1" if kind == "save:best:" else str(int(rng.integers(1, 4)))))
    plans = plans[:n] + [f"time:{rng.uniform(4.0, 12.0):.2f}" for _ in range(n - len(plans))]
    plans = [plans[i] for i in rng.permutation(len(plans))]
    # the first start is fresh: a promotion is certain there (best.pt's first write)
    first = plans.index("save:best:1")
    return [plans[first], *plans[:first], *plans[first + 1 :]]


def _train(out: Path, plan: str, resume: bool, steps: int) -> subprocess.CompletedProcess:
    """``snrl train`` killed by ``plan``; ``returncode`` -9 when it was killed."""
    cmd = [sys.executable, str(ROOT / "tests" / "crash_run.py"), *ARGS, "--out", str(out)]
    cmd += ["--steps", str(steps), "--resume" if resume else "--force"]
    env = dict(ENV)
    limit = FALLBACK_S
    if plan.startswith("time:"):
        limit = float(plan[5:])
    elif plan:
        env["SNRL_KILL_AT"] = plan
        env["SNRL_KILL_NOTE"] = str(out.parent / "kill-note")
    proc = subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    if plan:
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
    out_, err = proc.communicate(timeout=600)
    return subprocess.CompletedProcess(cmd, proc.returncode, out_, err)


def _kill_cycles(tmp_path: Path, n_kills: int, seed: int) -> dict:
    out = tmp_path / "run"
    record = {"kills": 0, "resumed_after_kill": 0, "fresh_starts": 0}  # + kills by kind
    t0 = time.perf_counter()
    for plan in _kill_plans(n_kills, seed):
        resume = (out / "checkpoints" / "last.pt").exists()
        if not resume and out.exists():  # killed before its first last.pt: say so, start again
            res = subprocess.run(
                [sys.executable, "-m", "snrl.cli", "train", "--out", str(out), "--resume"],
                capture_output=True,
                text=True,
                env=ENV,
                cwd=ROOT,
            )
            assert res.returncode == 2 and "nothing to resume" in res.stderr, res.stderr
        note = out.parent / "kill-note"
        note.unlink(missing_ok=True)
        res = _train(out, plan, resume, CEILING)
        assert res.returncode == -signal.SIGKILL, (plan, res.returncode, res.stderr)
        record["kills"] += 1
        if note.exists():
            kind = plan.rsplit(":", 1)[0]
            record[kind] = record.get(kind, 0) + 1
            if kind.startswith("save:"):  # the half-written temp is there, the file is whole
                name = kind.split(":")[1]
                assert list((out / "checkpoints").glob(f".{name}.pt.*.tmp"))
        record["resumed_after_kill" if resume else "fresh_starts"] += 1
        _check_consistent(out)
    last = out / "checkpoints" / "last.pt"
    resume = last.exists()
    done = (load_checkpoint(last)["counters"]["env_step"] if resume else 0) + 2 * UPDATE
    res = _train(out, "", resume, done)
    assert res.returncode == 0, res.stderr
    assert _check_consistent(out) == done // UPDATE
    # kills left temps behind; the next start removed them
    assert not [p for p in out.rglob("*") if is_own_temp(p.name)]
    record["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(record))
    return record


def test_three_kills_in_a_checkpoint_write_an_evaluation_and_a_promotion(tmp_path):
    kinds = {p.rsplit(":", 1)[0] for p in _kill_plans(3, seed=0)}
    assert kinds == {"save:last", "save:best", "eval"}
    record = _kill_cycles(tmp_path, 3, seed=0)
    assert record["kills"] == 3
    assert record["save:best"] == 1 and record["save:last"] + record["eval"] >= 1


@pytest.mark.slow
def test_twenty_seeded_kills_every_resume_works(tmp_path):
    record = _kill_cycles(tmp_path, 20, seed=1)
    assert record["kills"] == 20 and record["resumed_after_kill"] >= 15
