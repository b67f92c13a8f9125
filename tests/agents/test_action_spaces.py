"""Action spaces end to end: the env receives valid actions from PPO and DQN (Discrete and
MultiDiscrete with ``start``, a 2-D Box); old checkpoints' agent keys still load."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from snrl.agents.dqn import DQN
from snrl.agents.ppo import PPO


class StrictEnv(gym.Env):
    """Five-step episodes whose ``step`` refuses any action outside the action space and keeps
    the actions it was given (per env instance)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    action_space: gym.Space

    def __init__(self):
        self.seen: list[np.ndarray] = []
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 2).astype(np.float32), {}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"invalid action {action!r} for {self.action_space}")
        self.seen.append(np.array(action, copy=True))
        self.t += 1
        obs = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return obs, float(np.sum(action)), False, self.t >= 5, {}


class StartDiscrete(StrictEnv):
    action_space = gym.spaces.Discrete(3, start=-1)


class StartMultiDiscrete(StrictEnv):
    action_space = gym.spaces.MultiDiscrete([2, 3], start=[1, -2])


LOW = np.array([[0.0, -1.0], [-2.0, 0.5]], dtype=np.float32)


class Box2x2(StrictEnv):
    action_space = gym.spaces.Box(LOW, LOW + 1.0, dtype=np.float32)


for _cls in (StartDiscrete, StartMultiDiscrete, Box2x2):
    if f"Snrl{_cls.__name__}-v0" not in gym.registry:
        gym.register(f"Snrl{_cls.__name__}-v0", entry_point=_cls)


def _seen(algo) -> np.ndarray:
    return np.stack([a for env in algo._envs.envs for a in env.unwrapped.seen])


PPO_SMALL = dict(
    backbone="mlp", hidden_size=8, n_envs=2, n_steps=16, n_epochs=1, eval_interval=0,
    eval_episodes=2, seed=0,
)  # fmt: skip


def test_ppo_sends_start_offset_discrete_actions():
    algo = PPO("SnrlStartDiscrete-v0", **PPO_SMALL)
    algo.learn(64, progress=False)
    assert set(_seen(algo).tolist()) == {-1, 0, 1}  # start .. start + n - 1, all of them
    traj = algo.rollout(seed=0, record=False, deterministic=False)
    assert set(traj.actions.tolist()) <= {-1, 0, 1}
    assert algo.evaluate(n_episodes=2, seed=0)["n_episodes"] == 2
    algo.close()


def test_ppo_sends_start_offset_multidiscrete_actions():
    algo = PPO("SnrlStartMultiDiscrete-v0", **PPO_SMALL)
    assert algo.agent.head_size == 5
    algo.learn(64, progress=False)
    seen = _seen(algo)
    assert seen.shape[1:] == (2,)
    assert set(seen[:, 0].tolist()) == {1, 2} and set(seen[:, 1].tolist()) == {-2, -1, 0}
    algo.rollout(seed=0, record=False, deterministic=False)
    algo.close()


def test_ppo_acts_in_a_2x2_box():
    """The policy outputs the 4 flattened actions; the env gets them clipped, as (2, 2)."""
    algo = PPO("SnrlBox2x2-v0", log_std_init=1.0, **PPO_SMALL)
    assert algo.agent.head_size == 4
    algo.learn(64, progress=False)
    seen = _seen(algo)
    assert seen.shape[1:] == (2, 2) and seen.dtype == np.float32
    assert np.all(seen >= LOW) and np.all(seen <= LOW + 1.0)
    assert np.any(seen == LOW) and np.any(seen == LOW + 1.0)  # wide samples were clipped
    traj = algo.rollout(seed=0, record=False)
    assert traj.actions.shape[1:] == (2, 2)
    algo.close()


@pytest.mark.parametrize("backbone", ["mlp", "lif"])
def test_dqn_sends_start_offset_discrete_actions(backbone):
    algo = DQN(
        "SnrlStartDiscrete-v0", backbone=backbone, hidden_size=8, n_envs=2, learning_starts=40,
        batch_size=4, seq_len=4, burn_in=2, eval_interval=0, eval_episodes=2, log_interval=64,
        seed=0,
    )  # fmt: skip
    algo.learn(128, progress=False)
    assert algo.n_grad_steps > 0
    assert set(_seen(algo).tolist()) == {-1, 0, 1}
    stored = algo.buffer.storage["actions"][: len(algo.buffer)]
    assert stored.min() >= 0 and stored.max() <= 2  # replay keeps the Q-network's indices
    traj = algo.rollout(seed=0, record=False, deterministic=False)
    assert set(traj.actions.tolist()) <= {-1, 0, 1}
    algo.close()


def test_dqn_refuses_non_discrete_actions_once_with_the_fix():
    with pytest.raises(ValueError, match=r"DQN needs a Discrete action space.*--algo ppo"):
        DQN("SnrlBox2x2-v0", backbone="mlp")


def test_dqn_replay_stores_raw_observations_and_preprocesses_them_like_the_actor():
    """FrozenLake's observations are Discrete(16): replay stores the raw integers (not 16
    floats); the learner one-hot encodes and normalizes them through agent.preprocess."""
    algo = DQN(
        "FrozenLake-v1", backbone="mlp", hidden_size=8, n_envs=2, learning_starts=64,
        batch_size=8, eval_interval=0, eval_episodes=1, log_interval=128, seed=0,
    )  # fmt: skip
    algo.learn(128, progress=False)
    obs = algo.buffer.storage["obs"]
    assert obs.shape == (algo.config.buffer_size,) and obs.dtype == np.int64
    stored = obs[: len(algo.buffer)]
    assert stored.min() >= 0 and stored.max() < 16
    x = algo.agent.preprocess(stored[:5])
    one_hot = np.eye(16, dtype=np.float32)[stored[:5]]
    torch.testing.assert_close(x, algo.agent.obs_norm(torch.as_tensor(one_hot)))
    algo.close()


def test_old_checkpoint_keys_still_load():
    """snrl 0.1 called DQN's Q-network ``policy`` and kept Box bounds in PPO's state_dict."""
    algo = DQN("CartPole-v1", backbone="mlp", hidden_size=8, seed=0)
    new = algo.agent.state_dict()
    old = {k.replace("q_net.", "policy.", 1): v for k, v in new.items()}
    assert any(k.startswith("policy.") for k in old)
    other = DQN("CartPole-v1", backbone="mlp", hidden_size=8, seed=1)
    other.agent.load_state_dict(old)
    for k, v in other.agent.state_dict().items():
        assert torch.equal(v, new[k]), k
    assert not hasattr(other.agent, "policy")  # the 0.1 name of the attribute is gone
    assert other.agent.actor is other.agent.q_net

    ppo = PPO("Pendulum-v1", backbone="mlp", hidden_size=8, seed=0)
    sd = ppo.agent.state_dict()
    sd["act_low"], sd["act_high"] = torch.tensor([-2.0]), torch.tensor([2.0])
    ppo.agent.load_state_dict(sd)  # strict: the old bounds are dropped, nothing is missing
    assert ppo.agent.actor is ppo.agent.policy
