"""Small synthetic trajectories for the render tests."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from snrl.networks import Activity, LayerActivity
from snrl.trajectory import Trajectory


def cartpole_trajectory(
    *,
    steps: int = 20,
    seed: int = 0,
    frames: bool = True,
    backbone: str = "lif",
    hidden: int = 16,
) -> Trajectory:
    """Play CartPole with seeded random actions, recording frames and fake activity.

    Stops early if the episode ends. Activity is random but of the right shapes/kinds.
    """
    rng = np.random.default_rng(seed)
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    obs, _ = env.reset(seed=seed)
    observations, actions, rewards, terms, truncs = [], [], [], [], []
    imgs = [env.render()] if frames else None
    for _ in range(steps):
        a = int(rng.integers(2))
        observations.append(obs)
        actions.append(a)
        obs, r, term, trunc, _ = env.step(a)
        rewards.append(r)
        terms.append(term)
        truncs.append(trunc)
        if frames:
            imgs.append(env.render())
        if term or trunc:
            break
    env.close()
    t = len(actions)
    if backbone == "lif":
        sign = np.array([1] * (hidden - hidden // 4) + [-1] * (hidden // 4))
        spikes = (rng.random((t, hidden)) < 0.2).astype(np.float32)
        v = rng.normal(0.5, 0.4, (t, hidden)).astype(np.float32)
        readout = rng.normal(0, 1, (t, 2)).astype(np.float32)
        activity = Activity(
            [
                LayerActivity("lif0", "spiking", hidden, spikes=spikes, v=v, threshold=1.0,
                              sign=sign),
                LayerActivity("readout", "readout", 2, v=readout),
            ]
        )  # fmt: skip
    else:
        h = np.tanh(rng.normal(0, 1, (t, hidden))).astype(np.float32)
        activity = Activity([LayerActivity("mlp0", "ann", hidden, extra={"h": h})])
    p = rng.random(t)
    return Trajectory(
        observations=np.array(observations),
        actions=np.array(actions),
        rewards=np.array(rewards),
        terminated=np.array(terms),
        truncated=np.array(truncs),
        env="CartPole-v1",
        seed=seed,
        frames=np.array(imgs) if frames else None,
        activity=activity,
        policy={"probs": np.stack([p, 1 - p], axis=1)},
        meta={"algo": "ppo", "backbone": backbone},
    )


@pytest.fixture
def spiking_traj() -> Trajectory:
    return cartpole_trajectory(steps=12, seed=1)


@pytest.fixture
def ann_traj() -> Trajectory:
    return cartpole_trajectory(steps=12, seed=2, backbone="mlp")
