"""A user's snntorch RLeaky network, given as ``backbone=``, learns CartPole with PPO (slow)."""

import math

import pytest
import snntorch as snn
import torch
from torch import nn

import snrl
from snrl.render import TrajectoryRenderer


@pytest.mark.slow
def test_user_rleaky_network_solves_cartpole(tmp_path):
    torch.manual_seed(0)  # the user's own initialization (snrl's seed= does not reach it)
    net = nn.Sequential(
        nn.Linear(4, 128), snn.RLeaky(beta=0.9, linear_features=128, init_hidden=True)
    )
    algo = snrl.PPO("CartPole-v1", backbone=net, seed=20261204)  # a seed no tuning saw
    history = algo.learn(150_000, progress=False)
    best = max(r for r in history["eval_return_mean"] if not math.isnan(r))
    traj = algo.rollout(seed=0, record=True)
    algo.close()
    # measured: 500.0, first at ~75k steps (docs/interop.md, "Measured")
    assert best >= 475, best
    # the recorded episode holds the user's neurons' spikes, and its video draws them
    spikes = traj.activity["rleaky1"].spikes
    assert spikes.shape[1] == 128 and 0 < spikes.mean() < 1
    video = TrajectoryRenderer(traj, activity=True).to_file(tmp_path / "run.gif", fps=30)
    assert video.stat().st_size > 0
