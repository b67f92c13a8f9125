"""Spaces whose values do not start at 0 (issue 32): a ``Discrete(6, start=2)`` observation
with ``Discrete``/``MultiDiscrete`` actions that have a ``start``, through PPO and through DQN
in every replay mode (n-step transitions uniform and prioritized, one-step transitions,
sequence replay uniform and prioritized, for a feed-forward and a spiking backbone).

Sequence replay used to pad windows with observation 0, outside ``Discrete(6, start=2)``, so
the first gradient step raised "Discrete observation out of range"; padding is now a valid
observation (the space's ``start``).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from snrl.agents.dqn import DQN
from snrl.agents.ppo import PPO
from snrl.buffers import SequenceWriter

OBS = gym.spaces.Discrete(6, start=2)


class StartObsEnv(gym.Env):
    """Seven-step episodes over observations 2..7 that refuse an action outside the action
    space; they keep the actions they were given (per env instance)."""

    observation_space = OBS
    action_space: gym.Space = gym.spaces.Discrete(3, start=-1)

    def __init__(self):
        self.seen: list[np.ndarray] = []
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return int(OBS.start), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"invalid action {action!r} for {self.action_space}")
        self.seen.append(np.array(action, copy=True))
        self.t += 1
        reward = float(np.sum(action) == np.sum(self.action_space.start)) if self.t % 2 else 0.0
        obs = int(OBS.start) + self.t % int(OBS.n)
        return obs, reward, self.t >= 7 and self.t % 2 == 1, self.t >= 9, {}


class StartObsMultiDiscreteEnv(StartObsEnv):
    action_space = gym.spaces.MultiDiscrete([2, 3], start=[1, -2])


for _cls in (StartObsEnv, StartObsMultiDiscreteEnv):
    if f"Snrl{_cls.__name__}-v0" not in gym.registry:
        gym.register(f"Snrl{_cls.__name__}-v0", entry_point=_cls)


def _seen(algo) -> np.ndarray:
    return np.stack([a for env in algo._envs.envs for a in env.unwrapped.seen])


@pytest.mark.parametrize("backbone", ["mlp", "lif"])
@pytest.mark.parametrize("env", ["SnrlStartObsEnv-v0", "SnrlStartObsMultiDiscreteEnv-v0"])
def test_ppo_with_start_offset_spaces(backbone, env):
    algo = PPO(
        env, backbone=backbone, hidden_size=8, n_envs=2, n_steps=16, n_epochs=1, eval_interval=0,
        eval_episodes=2, seed=0,
    )  # fmt: skip
    algo.learn(64, progress=False)
    space = algo._envs.single_action_space
    assert all(space.contains(a) for a in _seen(algo))
    traj = algo.rollout(seed=0, record=False, deterministic=False)
    assert set(traj.observations.tolist()) <= set(range(2, 8))
    assert algo.evaluate(n_episodes=2, seed=0)["n_episodes"] == 2
    algo.close()


DQN_MODES = {
    "transition n-step uniform": dict(backbone="mlp"),
    "transition n-step prioritized": dict(backbone="mlp", prioritized=True),
    "transition one-step": dict(backbone="mlp", n_step=1),
    "sequence uniform (mlp)": dict(backbone="mlp", replay="sequence"),
    "sequence uniform (lif)": dict(backbone="lif"),
    "sequence prioritized (lif)": dict(backbone="lif", prioritized=True),
}


@pytest.mark.parametrize("mode", list(DQN_MODES))
def test_dqn_with_a_start_offset_observation_in_every_replay_mode(mode, tmp_path):
    algo = DQN(
        "SnrlStartObsEnv-v0", hidden_size=8, n_envs=2, learning_starts=40, batch_size=4,
        seq_len=4, burn_in=2, eval_interval=0, eval_episodes=2, log_interval=64, seed=0,
        **DQN_MODES[mode],
    )  # fmt: skip
    algo.learn(128, progress=False)
    assert algo.n_grad_steps > 0  # the first gradient step used to raise
    assert set(_seen(algo).tolist()) <= {-1, 0, 1}
    stored = algo.buffer.storage["obs"][: len(algo.buffer)]
    assert stored.size and stored.min() >= 2 and stored.max() <= 7  # padding included
    x = algo.agent.preprocess(stored.reshape(-1)[:3])  # what the learner feeds: one-hot
    assert x.shape == (3, 6)
    assert algo.evaluate(n_episodes=2, seed=0)["n_episodes"] == 2
    path = tmp_path / "replay.npz"
    algo.save_replay_buffer(path)
    again = DQN(
        "SnrlStartObsEnv-v0", hidden_size=8, n_envs=2, learning_starts=40, batch_size=4,
        seq_len=4, burn_in=2, eval_interval=0, eval_episodes=2, log_interval=64, seed=0,
        **DQN_MODES[mode],
    )  # fmt: skip
    again.load_replay_buffer(path)
    assert len(again.buffer) == len(algo.buffer)
    again.learn(160, progress=False)
    assert again.n_grad_steps > 0
    algo.close()
    again.close()


def test_sequence_writer_pads_with_obs_pad():
    """An episode of 2 steps in windows of burn_in 2 + seq_len 3: burn-in and tail padding,
    and the sampled ``seq_obs`` past the bootstrap position, all hold ``obs_pad``."""
    w = SequenceWriter((), seq_len=3, burn_in=2, obs_dtype=np.int64, obs_pad=2)
    state = (torch.zeros(1, 1),)
    no = np.array([False])
    w.add(np.array([5]), np.array([0]), np.array([1.0]), np.array([6]), no, no, state)
    item = w.add(
        np.array([6]), np.array([1]), np.array([1.0]), np.array([7]), np.array([True]), no, state
    )
    assert item is not None
    assert item["obs"][0].tolist() == [2, 2, 5, 6, 2]
    assert item["next_obs"][0].tolist() == [2, 2, 6, 7, 2]
    assert item["mask"][0].tolist() == [0, 0, 1, 1, 0]

    class Storage(dict):
        pass

    storage = Storage({k: v for k, v in item.items()})
    batch = w.gather(storage, np.array([0]))
    assert batch["seq_obs"][:, 0].tolist() == [2, 2, 5, 6, 7, 2]
    assert w.config()["obs_pad"] == 2
    assert SequenceWriter.from_config(w.config()).obs_pad == 2
    plain = SequenceWriter((), seq_len=3, burn_in=2)
    assert "obs_pad" not in plain.config()  # files of a zero pad read as before
    with pytest.raises(ValueError, match="obs_pad must be a number"):
        SequenceWriter((), seq_len=3, obs_pad="2")
