"""Envs passed as objects where an env id goes: instances (trained on as they are, copied for
evaluation), factories (called per env, with env_kwargs), vector envs (SAME_STEP), and what a
checkpoint records for each."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import snrl
from snrl.envs import make_env, make_vector_env
from snrl.envs.make import env_name
from snrl.errors import UserError

SMALL = dict(hidden_size=8, n_steps=8, n_epochs=1, eval_interval=0, eval_episodes=2, seed=0)


class Corridor(gym.Env):
    """Walk right 3 cells (reward 1 at the end); not registered with gymnasium."""

    def __init__(self, length: int = 3):
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.pos += 1 if int(action) == 1 else 0
        done = self.pos >= self.length
        return np.array([self.pos], np.float32), float(done), done, False, {}


def test_an_instance_is_trained_on_itself_and_copied_for_evaluation():
    env = gym.make("CartPole-v1")
    algo = snrl.PPO(env, **SMALL)
    assert algo.config.n_envs == 1 and algo.config.env == "CartPole-v1"
    algo.learn(16, progress=False)
    state = np.array(env.unwrapped.state, copy=True)  # the training episode, mid-way
    res = algo.evaluate(n_episodes=2, seed=5)
    assert res["n_episodes"] == 2 and np.array_equal(env.unwrapped.state, state)
    assert algo.rollout(seed=5, record=False).env == "CartPole-v1"
    # the same evaluation as with the id: copies of the instance are fresh envs
    by_id = snrl.PPO("CartPole-v1", **SMALL, n_envs=1)
    by_id.learn(16, progress=False)
    assert by_id.evaluate(n_episodes=2, seed=5)["returns"] == res["returns"]
    with pytest.raises(UserError, match="an env instance is one env"):
        snrl.PPO(gym.make("CartPole-v1"), n_envs=4)


def test_a_factory_is_called_per_env_with_env_kwargs():
    calls = []

    def factory(length=3):
        calls.append(length)
        return Corridor(length)

    algo = snrl.PPO(factory, n_envs=3, env_kwargs={"length": 2}, **SMALL)
    assert (
        algo.config.env
        == "<factory test_a_factory_is_called_per_env_with_env_kwargs.<locals>.factory>"
    )
    algo.learn(24, progress=False)
    assert calls == [2] * 6  # the probe, 3 training envs, 2 of the final evaluation
    assert algo.evaluate(n_episodes=2)["n_episodes"] == 2 and calls == [2] * 8
    with pytest.raises(UserError, match="factory .* returned a int, not a gymnasium.Env"):
        snrl.PPO(lambda: 3)


def test_a_checkpoint_of_an_unregistered_env_needs_the_env_again(tmp_path):
    algo = snrl.DQN(
        Corridor(),
        learning_starts=8,
        batch_size=2,
        seq_len=4,
        burn_in=2,
        **{k: v for k, v in SMALL.items() if k not in ("n_steps", "n_epochs")},
    )
    assert algo.config.env == "<Corridor instance>"
    algo.learn(16, progress=False)
    algo.save(tmp_path / "c.pt")
    with pytest.raises(UserError, match="was a Python object .* snrl.load\\(path, env=...\\)"):
        snrl.load(tmp_path / "c.pt")
    back = snrl.load(tmp_path / "c.pt", env=Corridor)  # a class is a factory
    assert back.env_step == 16
    assert back.evaluate(n_episodes=1)["returns"] == algo.evaluate(n_episodes=1)["returns"]


def test_a_same_step_vector_env_is_used_as_it_is():
    mode = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
    envs = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync", vector_kwargs=mode)
    algo = snrl.PPO(envs, **SMALL)
    assert algo.config.n_envs == 2 and algo.config.env == "CartPole-v1"
    history = algo.learn(256, progress=False)  # 128 steps per env: CartPole episodes end
    assert algo._envs.unwrapped is envs.unwrapped
    assert sum(history["episodes"]) > 0 and np.isfinite(history["episode_return_mean"][-1])
    by_id = snrl.PPO("CartPole-v1", n_envs=2, **SMALL).learn(256, progress=False)
    assert by_id["episode_return_mean"][-1] == history["episode_return_mean"][-1]
    assert algo.evaluate(n_episodes=2)["n_episodes"] == 2  # fresh envs from env_fns
    next_step = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    with pytest.raises(UserError, match="snrl needs SAME_STEP"):
        snrl.PPO(next_step, **SMALL).learn(8, progress=False)
    with pytest.raises(UserError, match="has 2 envs"):
        snrl.PPO(envs, n_envs=3)


def test_make_env_copies_instances_and_refuses_non_envs():
    env = Corridor()
    copy = make_env(env)
    assert copy is not env and isinstance(copy, Corridor)
    with pytest.raises(UserError, match="env_kwargs"):
        make_env(env, length=4)
    with pytest.raises(UserError, match="n_envs=2 but an env instance is one env"):
        make_vector_env(env, 2, seed=0)
    with pytest.raises(UserError, match="a gymnasium.Env instance, a factory"):
        make_env(3.5)
    assert env_name(gym.make("CartPole-v1")) == "CartPole-v1"
    assert ":" not in env_name(Corridor)
