"""Callbacks (snrl.callbacks): every hook of Algorithm.learn's one loop, stopping and
resuming, the built-ins, and `snrl train --callback` under the trust rule of env modules."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import snrl
from snrl.callbacks import Callback, CallbackList, EveryNSteps, RecordActivity, StopOnReward
from snrl.training.checkpoint import load_checkpoint
from snrl.training.metrics import read_metrics
from snrl.training.rundir import read_manifest
from tests.cli_run import ENV, ROOT, assert_user_error, snrl_inproc

# PPO: 2 envs x 16 steps = 32 env steps per update (one metrics row)
PPO_TINY = dict(
    backbone="mlp",
    hidden_size=8,
    n_envs=2,
    n_steps=16,
    n_epochs=1,
    eval_interval=64,
    eval_episodes=1,
    checkpoint_interval=10,
    seed=0,
)
# DQN: one row per 40 env steps
DQN_TINY = dict(
    backbone="mlp",
    hidden_size=8,
    n_envs=2,
    learning_starts=40,
    batch_size=8,
    log_interval=40,
    eval_interval=80,
    eval_episodes=1,
    checkpoint_interval=10,
    seed=0,
)


class Recorder(Callback):
    """Writes down every hook call; ``stop_at``: return False after that update."""

    def __init__(self, stop_at: int | None = None) -> None:
        self.calls: list[str] = []
        self.rows: list[dict] = []
        self.evals: list[dict] = []
        self.checkpoints: list[tuple[int, str]] = []
        self.stop_at = stop_at

    def on_training_start(self, algo):
        self.calls.append("start")

    def on_rollout_end(self, algo):
        self.calls.append("rollout")

    def on_eval_end(self, algo, result):
        self.calls.append("eval")
        self.evals.append(result)

    def on_checkpoint(self, algo, path):
        self.calls.append("checkpoint")
        self.checkpoints.append((algo.n_updates, path.name))

    def on_update_end(self, algo, stats):
        self.calls.append("update")
        self.rows.append(dict(stats))
        if self.stop_at is not None and algo.n_updates == self.stop_at:
            return False
        return None

    def on_training_end(self, algo):
        self.calls.append("end")


@pytest.mark.parametrize(
    "cls, kw, total", [(snrl.PPO, PPO_TINY, 6 * 32), (snrl.DQN, DQN_TINY, 6 * 40)]
)
def test_a_callback_sees_every_metrics_row(tmp_path, cls, kw, total):
    rec = Recorder()
    algo = cls("CartPole-v1", run_dir=tmp_path / "run", **kw)
    history = algo.learn(total, callbacks=[rec], progress=False)
    algo.close()
    m = read_metrics(tmp_path / "run" / "metrics.csv")
    assert len(rec.rows) == len(m["env_step"]) == 6
    for col, values in m.items():  # every column of every row, as metrics.csv has it
        seen = np.array([row[col] for row in rec.rows], dtype=np.float64)
        np.testing.assert_array_equal(seen, values, err_msg=col)
    assert rec.rows[-1]["env_step"] == history["env_step"][-1] == total
    # the order of the hooks: start, per row (rollout, [eval], [checkpoint], update), end
    n_eval = int(np.isfinite(m["eval_return_mean"]).sum())
    assert rec.calls[0] == "start" and rec.calls[-1] == "end"
    assert rec.calls.count("rollout") == rec.calls.count("update") == 6
    assert rec.calls.count("eval") == len(rec.evals) == n_eval == 3
    evaluated = [r["eval_return_mean"] for r in rec.rows if not math.isnan(r["eval_return_mean"])]
    assert evaluated == [e["mean_return"] for e in rec.evals]
    # best.pt at each evaluation at least as good as before, last.pt at the end (row 6)
    assert (6, "last.pt") in rec.checkpoints
    assert all(name in ("best.pt", "last.pt") for _, name in rec.checkpoints)


def test_stopping_from_a_hook_leaves_a_run_that_resume_completes(tmp_path, capsys):
    batch, total = 32, 8 * 32
    full = snrl.PPO("CartPole-v1", run_dir=tmp_path / "full", **PPO_TINY)
    full.learn(total, progress=False)
    full.close()
    rec = Recorder(stop_at=3)
    algo = snrl.PPO("CartPole-v1", run_dir=tmp_path / "run", **PPO_TINY)
    algo.learn(total, callbacks=rec, progress=False)
    algo.close()
    assert algo.env_step == 3 * batch and rec.calls[-1] == "end"
    # last.pt written at the stop (checkpoint_interval=10 would not have written it)
    ckpt = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")
    assert ckpt["counters"]["env_step"] == 3 * batch and ckpt["counters"]["n_updates"] == 3
    assert (3, "last.pt") in rec.checkpoints
    assert len(read_metrics(tmp_path / "run" / "metrics.csv")["env_step"]) == 3
    # `snrl train --resume` completes it on the schedule of the uninterrupted run
    res = snrl_inproc(
        capsys, "train", "--out", tmp_path / "run", "--resume", "--steps", total, "--quiet"
    )
    assert res.returncode == 0, res.stderr
    m, ref = (read_metrics(tmp_path / d / "metrics.csv") for d in ("run", "full"))
    np.testing.assert_array_equal(m["env_step"], ref["env_step"])  # no row torn or doubled
    np.testing.assert_array_equal(
        np.isfinite(m["eval_return_mean"]), np.isfinite(ref["eval_return_mean"])
    )
    ckpt = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")
    assert ckpt["counters"]["n_updates"] == full.n_updates == 8


def test_stop_on_reward_stops_at_the_first_row_that_reaches_it(tmp_path):
    stop = StopOnReward(1.0)  # any CartPole episode returns >= 1: the first evaluation
    algo = snrl.PPO("CartPole-v1", run_dir=tmp_path / "run", **PPO_TINY)
    algo.learn(10 * 32, callbacks=[stop], progress=False)
    algo.close()
    m = read_metrics(tmp_path / "run" / "metrics.csv")
    assert list(m["env_step"]) == [32, 64]  # eval_interval=64: the first evaluation
    assert stop.stopped_at["env_step"] == 64 and stop.stopped_at["eval_return_mean"] >= 1
    # trial accuracy and any other column; a row without a value (NaN) never stops
    acc = StopOnReward(0.9, metric="eval_trial_accuracy")
    assert acc.on_update_end(None, {"eval_trial_accuracy": 0.95}) is False
    assert acc.on_update_end(None, {"eval_trial_accuracy": 0.5}) is None
    assert acc.on_update_end(None, {"eval_trial_accuracy": math.nan}) is None
    with pytest.raises(snrl.UserError, match="no such column.*eval_return_mean"):
        acc.on_update_end(None, {"eval_return_mean": 1.0})
    with pytest.raises(snrl.UserError, match="threshold"):
        StopOnReward("high")


def test_every_n_steps_and_callback_list(tmp_path):
    seen: list[int] = []
    inner = Recorder()
    algo = snrl.PPO("CartPole-v1", **PPO_TINY)
    every = EveryNSteps(100, lambda a, stats: seen.append(stats["env_step"]))
    algo.learn(10 * 32, callbacks=CallbackList([every, EveryNSteps(64, inner)]), progress=False)
    algo.close()
    assert seen == [128, 224, 320]  # the first rows at or past 100, 200, 300
    assert [r["env_step"] for r in inner.rows] == [64, 128, 192, 256, 320]
    assert inner.calls.count("rollout") == 10  # its other hooks: every time
    with pytest.raises(snrl.UserError, match="none of the hooks"):
        algo.learn(32, callbacks=[object()])
    with pytest.raises(snrl.UserError, match="n=0"):
        EveryNSteps(0, print)


def test_record_activity_writes_loadable_trajectories_at_the_right_updates(tmp_path):
    kw = {**PPO_TINY, "backbone": "lif", "hidden_size": 6}
    rec = RecordActivity(every=2, episodes=2, max_steps=20)
    run = tmp_path / "run"
    algo = snrl.PPO("CartPole-v1", run_dir=run, **kw)
    algo.learn(5 * 32, callbacks=[rec], progress=False)
    algo.close()
    names = sorted(p.name for p in (run / "activity").iterdir())
    assert names == [f"update_{n:06d}_episode_{i}.npz" for n in (2, 4) for i in (0, 1)]
    assert rec.written == [run / "activity" / n for n in names]
    for name in names:
        traj = snrl.Trajectory.load(run / "activity" / name)
        assert 1 <= len(traj) <= 20 and traj.meta["algo"] == "ppo"
        spiking = traj.activity.spiking()  # the LIF layer's spikes, one row per env step
        assert spiking and spiking[0].spikes.shape[0] == len(traj)
    # listed in the manifest, so that replacing the run deletes them (and nothing else)
    assert f"activity/{names[0]}" in read_manifest(run)
    snrl.PPO("CartPole-v1", run_dir=run, overwrite=True, **kw).close()
    assert not (run / "activity").exists()
    with pytest.raises(snrl.UserError, match="run directory"):
        snrl.PPO("CartPole-v1", **kw).learn(32, callbacks=[rec], progress=False)


PLANTED = """
import pathlib
pathlib.Path({marker!r}).write_text("imported")
from snrl.callbacks import Callback

class Cb(Callback):
    def on_update_end(self, algo, stats):
        pathlib.Path({rows!r}).open("a").write(str(stats["env_step"]) + "\\n")
"""


def _snrl(tmp_path, *args):
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path / "mods")])}
    return subprocess.run(
        [sys.executable, "-m", "snrl.cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )


def test_cli_callback_and_the_trust_rule_on_resume(tmp_path, capsys):
    marker, rows = tmp_path / "imported.txt", tmp_path / "rows.txt"
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "planted_cb.py").write_text(
        PLANTED.format(marker=str(marker), rows=str(rows))
    )
    out = tmp_path / "run"
    fast = ["--backbone", "mlp", "--hidden", "8", "--n-envs", "2", "--set", "n_steps=16"]
    res = _snrl(
        tmp_path,
        "train",
        *fast,
        "--steps",
        64,
        "--out",
        out,
        "--quiet",
        "--callback",
        "planted_cb:Cb",
    )
    assert res.returncode == 0, res.stderr
    assert rows.read_text().split() == ["32", "64"]  # the user named it: it ran
    assert json.loads((out / "callbacks.json").read_text()) == {"callbacks": ["planted_cb:Cb"]}
    # a run directory names the module: --resume imports nothing without trust
    marker.unlink()
    res = _snrl(tmp_path, "train", "--out", out, "--resume", "--steps", 128, "--quiet")
    assert_user_error(res, "names the callback 'planted_cb:Cb', which would import the module")
    assert "--trust-env-module" in res.stderr and "--callback planted_cb:Cb" in res.stderr
    assert not marker.exists()
    assert len(read_metrics(out / "metrics.csv")["env_step"]) == 2  # nothing trained
    res = _snrl(
        tmp_path, "train", "--out", out, "--resume", "--steps", 128, "--quiet", "--trust-env-module"
    )
    assert res.returncode == 0, res.stderr
    assert marker.exists() and rows.read_text().split() == ["32", "64", "96", "128"]
    res = snrl_inproc(capsys, "train", *fast, "--out", tmp_path / "b", "--callback", "planted_cb")
    assert_user_error(res, "module:Name")
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    "hook, rows",
    [
        ("on_training_start", 0),  # before the first iteration
        ("on_rollout_end", 1),  # the iteration finishes: its row is logged
        ("on_eval_end", 2),  # eval_interval=64: the first evaluation is on row 2
        ("on_checkpoint", 2),  # best.pt after that evaluation
    ],
)
def test_any_hook_returning_false_stops_after_the_iteration(tmp_path, hook, rows):
    class Stop(Callback):
        pass

    setattr(Stop, hook, lambda self, *args: False)
    algo = snrl.PPO("CartPole-v1", run_dir=tmp_path / "run", **PPO_TINY)
    history = algo.learn(10 * 32, callbacks=CallbackList([Stop()]), progress=False)
    algo.close()
    assert len(history.get("env_step", [])) == rows == algo.n_updates
    if rows:
        last = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")
        assert last["counters"]["n_updates"] == rows
