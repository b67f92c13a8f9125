"""Episode step limits: an env without a TimeLimit (a user's ``module:Class``) cannot hang
evaluation or rollouts; ``max_episode_steps`` truncates training episodes, and PPO
bootstraps the truncation; a NeuroGym id without neurogym says how to install it."""

from __future__ import annotations

import importlib.util

import gymnasium as gym
import numpy as np
import pytest
import torch

import snrl
from snrl.envs import make_env
from snrl.envs.neurogym import EVAL_MAX_EPISODE_STEPS, INSTALL_LINE, limit_episode_steps
from snrl.errors import UserError

ENDLESS = "tests.envs.test_neurogym_limits:EndlessEnv"


class EndlessEnv(gym.Env):
    """Never terminates nor truncates; constant observation, reward 1."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.array([0.5, -0.5], np.float32), {}

    def step(self, action):
        return np.array([0.5, -0.5], np.float32), 1.0, False, False, {}


def test_evaluation_of_an_env_without_limit_ends_at_the_fallback(monkeypatch):
    assert EVAL_MAX_EPISODE_STEPS == 10_000
    monkeypatch.setattr("snrl.agents.evaluation.EVAL_MAX_EPISODE_STEPS", 37)
    algo = snrl.PPO(ENDLESS, backbone="mlp", hidden_size=8, n_envs=1)
    res = algo.evaluate(n_episodes=2)
    assert res["mean_length"] == 37 and res["returns"] == [37.0, 37.0]
    assert "n_trials" not in res  # not a trial task
    traj = algo.rollout(seed=0, record=False)
    assert len(traj) == 37 and traj.truncated[-1] and traj.task is None and traj.dt is None


def test_config_max_episode_steps_bounds_evaluation_and_training():
    algo = snrl.PPO(
        ENDLESS, backbone="mlp", hidden_size=8, n_envs=2, n_steps=8, max_episode_steps=5
    )
    assert algo.evaluate(n_episodes=2)["mean_length"] == 5
    hist = algo.learn(32, progress=False)  # 16 steps per env: 3 episodes of 5 each
    assert sum(hist["episodes"]) == 6
    assert "trials" not in hist


def test_ppo_bootstraps_the_truncation_from_the_final_observation():
    gamma = 0.5
    algo = snrl.PPO(
        ENDLESS,
        backbone="mlp",
        hidden_size=8,
        n_envs=1,
        n_steps=4,
        gamma=gamma,
        gae_lambda=1.0,
        normalize_obs=False,
        max_episode_steps=4,
    )
    algo._start_envs()
    buf = algo._collect()[0]
    agent = algo.agent
    with torch.no_grad():
        x = agent.preprocess(np.array([[0.5, -0.5]], np.float32))
        v_final = float(agent.value(x, agent.initial_state(1).critic)[0])
    assert abs(v_final) > 1e-4
    # G_3 = r + gamma V(final obs); G_t = r + gamma G_{t+1} inside the episode (lambda = 1)
    want = [1 + gamma * v_final]
    for _ in range(3):
        want.insert(0, 1 + gamma * want[0])
    np.testing.assert_allclose(buf.returns[:, 0].numpy(), want, rtol=1e-5)
    algo.close()


def test_limit_replaces_an_outer_time_limit_and_keeps_an_equal_one():
    env = make_env("CartPole-v1")
    assert limit_episode_steps(env) is env
    assert limit_episode_steps(env, 500) is env
    shorter = limit_episode_steps(env, 7)
    shorter.reset(seed=0)
    for t in range(7):
        *_, trunc, _ = shorter.step(0 if t % 2 else 1)
    assert trunc


def test_neurogym_id_without_neurogym_names_the_install_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "neurogym" else real(name, *a)
    )
    monkeypatch.delitem(gym.registry, "GoNogo-v0", raising=False)
    with pytest.raises(UserError, match="neurogym is not installed") as e:
        make_env("GoNogo-v0")
    assert INSTALL_LINE in str(e.value)
    with pytest.raises(UserError, match="unknown env id"):
        make_env("NotATask-v0")
