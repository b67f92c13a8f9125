"""Issue 12: envs without frames get a task panel (observations, action vs ground truth,
reward, trial boundaries) synchronized with the raster, in TrajectoryRenderer and `snrl render`."""

from __future__ import annotations

import subprocess
import sys

import imageio.v3 as iio
import imageio_ffmpeg
import numpy as np
import pytest

from snrl.networks import Activity, LayerActivity
from snrl.render import TrajectoryRenderer
from snrl.render._panel import CHOSEN_COLOR, E_COLOR, MARK_COLOR
from snrl.trajectory import Trajectory


def task_trajectory(t: int = 30, *, trial_len: int = 10, seed: int = 0) -> Trajectory:
    """A frameless 3-channel task: trials of `trial_len` steps, reward 1 on the last step of
    each trial when the action matched the ground truth; a Dale LIF layer of 12 neurons."""
    rng = np.random.default_rng(seed)
    gt = np.repeat(rng.integers(1, 3, t // trial_len + 1), trial_len)[:t]
    actions = np.where(np.arange(t) % trial_len == trial_len - 1, gt, 0).astype(np.int64)
    new_trial = np.arange(t) % trial_len == trial_len - 1  # the trial ends after this step
    rewards = (new_trial & (actions == gt)).astype(float)
    n = 12
    traj = Trajectory(
        observations=rng.normal(0, 1, (t, 3)).astype(np.float32),
        actions=actions,
        rewards=rewards,
        terminated=np.zeros(t, bool),
        truncated=np.eye(t, dtype=bool)[-1],
        env="ToyTask-v0",
        seed=seed,
        activity=Activity(
            [
                LayerActivity(
                    "lif0",
                    "spiking",
                    n,
                    spikes=rng.random((t, n)) < 0.3,
                    v=rng.normal(0.5, 0.3, (t, n)),
                    threshold=1.0,
                    sign=np.array([1] * 9 + [-1] * 3),
                ),
            ]
        ),  # fmt: skip
        policy={"probs": np.full((t, 3), 1 / 3)},
        meta={"algo": "ppo", "backbone": "lif", "obs_names": ["fixation", "left", "right"]},
    )
    # Until Trajectory carries them (issue 12), the renderer reads these attributes if set.
    traj.task = {"gt": gt, "new_trial": new_trial, "performance": np.where(new_trial, 1.0, np.nan)}
    traj.dt = 0.1
    return traj


def test_task_panel_shows_action_ground_truth_reward_and_trial_marks():
    traj = task_trajectory()
    r = TrajectoryRenderer(traj, window=20)
    f = r.frame(15)
    canvas = r._composer.canvas
    assert canvas.env_box is None
    obs_tr, act_tr, rew_tr = canvas.task_traces
    # trial boundary (the trial that ended at step 9 -> a new one from step 10) is drawn as a
    # vertical line in every task axes, at the left edge of step 10's slot
    for rect, cols in zip(canvas.marks.rects, canvas.marks.cols):
        at10 = rect.c0 + int(np.flatnonzero(cols == 10)[0])
        at5 = rect.c0 + int(np.flatnonzero(cols == 5)[0])
        assert (f[rect.r0 : rect.r1, at10] == MARK_COLOR).all(-1).sum() >= 3  # under the lines
        assert not (f[rect.r0 : rect.r1, at5] == MARK_COLOR).all(-1).any()
    rect = act_tr.rect
    # the chosen action (orange) is drawn, but not after step 15 (page mode: later slots empty)
    act_region = f[rect.r0 : rect.r1, rect.c0 : rect.c1]
    orange = (act_region == CHOSEN_COLOR).all(-1)
    late = np.flatnonzero(act_tr.x > 15.5)
    assert orange.any() and not orange[:, late].any()
    # the raster beside it is in the same page: steps 0..15 drawn, nothing after
    m = canvas.matrices[0]
    raster = f[m.rect.r0 : m.rect.r1, m.rect.c0 : m.rect.c1]
    spikes_after = (raster[:, m.cols > 15] == E_COLOR).all(-1).any()
    assert (raster == E_COLOR).all(-1).any() and not spikes_after
    # text: time in seconds (dt = 0.1 s per step) and the trial number
    text = canvas.text(15)
    assert "t 1.50 s" in text and "trial 2" in text
    # the next page starts empty at step 20
    f20 = r.frame(20)
    region = f20[m.rect.r0 : m.rect.r1, m.rect.c0 : m.rect.c1]
    assert not (region[:, m.cols > 0] == E_COLOR).all(-1).any()


def test_task_panel_alone_without_activity():
    traj = task_trajectory(t=12)
    r = TrajectoryRenderer(traj, activity=False, window=12)
    frames = [f.copy() for f in r.frames()]
    assert len(frames) == 13
    assert r._composer.canvas.matrices == [] and len(r._composer.canvas.task_traces) == 3
    assert not np.array_equal(frames[2], frames[8])  # the traces grow


def _neurogym_trajectory(steps: int = 40) -> Trajectory:
    ngym = pytest.importorskip("neurogym")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = ngym.make("PerceptualDecisionMaking-v0", dt=100)
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    rows = {"obs": [], "act": [], "rew": [], "gt": [], "new": []}
    for _ in range(steps):
        a = int(rng.integers(3))
        rows["obs"].append(obs)
        rows["act"].append(a)
        obs, reward, term, trunc, info = env.step(a)
        rows["rew"].append(reward)
        rows["gt"].append(int(info["gt"]))
        rows["new"].append(bool(info["new_trial"]))
    env.close()
    assert env.render_mode is None  # NeuroGym tasks draw no frames
    t = steps
    spikes = rng.random((t, 16)) < 0.2
    traj = Trajectory(
        observations=np.array(rows["obs"]),
        actions=np.array(rows["act"]),
        rewards=np.array(rows["rew"], float),
        terminated=np.zeros(t, bool),
        truncated=np.eye(t, dtype=bool)[-1],
        env="PerceptualDecisionMaking-v0",
        seed=0,
        activity=Activity([LayerActivity("lif0", "spiking", 16, spikes=spikes,
                                         v=rng.normal(0.5, 0.3, (t, 16)), threshold=1.0)]),
        policy={"probs": np.full((t, 3), 1 / 3)},
        meta={"obs_names": ["fixation", "stimulus 1", "stimulus 2"],
              "action_names": ["fixate", "choose 1", "choose 2"]},
    )  # fmt: skip
    traj.task = {"gt": np.array(rows["gt"]), "new_trial": np.array(rows["new"])}
    traj.dt = 0.1
    return traj


def test_neurogym_task_renders_gif_and_mp4(tmp_path):
    traj = _neurogym_trajectory()
    r = TrajectoryRenderer(traj, window=20)
    gif = r.to_gif(tmp_path / "task.gif", fps=20)
    frames = iio.imread(gif, index=None)
    assert frames.shape[0] == len(traj) + 1
    # the GIF's 255-colour palette: nearly every pixel close, a few antialiased text edges less
    diff = np.abs(frames[25][..., :3].astype(int) - r.frame(25).astype(int))
    assert (diff <= 40).mean() > 0.9999 and diff.max() <= 64
    mp4 = r.to_mp4(tmp_path / "task.mp4", fps=20)
    n, _ = imageio_ffmpeg.count_frames_and_secs(str(mp4))
    assert n == len(traj) + 1


def test_snrl_render_on_a_run_of_a_frameless_env(tmp_path):
    """`snrl render` on a run whose env has no render modes writes the task view."""
    run = tmp_path / "run"
    base = [sys.executable, "-m", "snrl.cli"]
    train = subprocess.run(
        [*base, "train", "--env", "tests.input_envs:_Base", "--backbone", "lif", "--hidden",
         "8", "--steps", "128", "--n-envs", "1", "--set", "n_steps=64", "--set",
         "eval_interval=0", "--out", str(run), "--quiet"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert train.returncode == 0, train.stderr
    out = tmp_path / "video.gif"
    res = subprocess.run(
        [*base, "render", str(run), "--out", str(out), "--trust-env-module"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    frames = iio.imread(out, index=None)
    assert frames.shape[0] == 21  # the env's episodes last 20 steps: T + 1 frames
    assert frames.shape[1] >= 540
    bad = subprocess.run(
        [*base, "render", str(run), "--out", str(tmp_path / "big.gif"), "--scale", "9",
         "--trust-env-module"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stderr.startswith("error: scale=9")
    assert "Traceback" not in bad.stderr and not (tmp_path / "big.gif").exists()


def test_substeps_put_every_neuron_step_on_the_env_time_axis():
    rng = np.random.default_rng(1)
    t, sub, n = 10, 4, 8
    spikes = np.ones((t * sub, n), bool)  # every neuron spikes at every neuron step
    traj = Trajectory(
        substeps=sub,
        dt=0.02,
        observations=rng.normal(size=(t, 2)),
        actions=rng.integers(0, 2, t),
        rewards=np.ones(t),
        terminated=np.zeros(t, bool),
        truncated=np.eye(t, dtype=bool)[-1],
        activity=Activity([LayerActivity("lif0", "spiking", n, spikes=spikes,
                                         v=np.zeros((t * sub, n)), threshold=1.0)]),
    )  # fmt: skip
    r = TrajectoryRenderer(traj, window=10)
    f = r.frame(5)
    m = r._composer.canvas.matrices[0]
    raster = f[m.rect.r0 : m.rect.r1, m.rect.c0 : m.rect.c1]
    spiking_cols = (raster != 255).any(-1).any(0)
    # frame 5 shows neuron steps 0 .. 5 * 4 + 3 = 23 of the 40 in the page, nothing later
    np.testing.assert_array_equal(spiking_cols, m.cols <= 23)
    assert "t 0.10 s" in r._composer.canvas.text(5)  # dt is per env step
