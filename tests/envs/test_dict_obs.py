"""Dict observation spaces are flattened where snrl makes the env (as Stable-Baselines3's
MultiInputPolicy concatenates them); an env object snrl cannot copy is refused with the fix."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import snrl
from snrl.envs import make_env
from snrl.envs.spaces import flatten_obs_env
from snrl.errors import UserError
from tests.cli_envs import DictObsEnv
from tests.cli_run import snrl_inproc

TINY = dict(backbone="lif", hidden_size=8, n_envs=2, n_steps=8, seed=0, eval_interval=0)


def test_a_dict_observation_is_one_vector_key_by_key():
    env = make_env(DictObsEnv)  # a factory
    assert isinstance(env.observation_space, gym.spaces.Box)
    assert env.observation_space.shape == (4,)
    obs, _ = env.reset(seed=3)
    raw = DictObsEnv()
    raw_obs, _ = raw.reset(seed=3)
    # keys in the Dict's (sorted) order: the cue one-hot (2), then the position (2)
    expected = np.concatenate([np.eye(2)[raw_obs["cue"]], raw_obs["pos"]]).astype(np.float32)
    np.testing.assert_array_equal(obs, expected)
    box = gym.make("CartPole-v1")
    assert flatten_obs_env(box) is box  # any other env unchanged
    # a Tuple of Discretes, one-hot side by side: Blackjack's (32, 11, 2) is 45 values
    blackjack = make_env("Blackjack-v1")
    assert blackjack.observation_space.shape == (45,)
    obs, _ = blackjack.reset(seed=0)
    assert obs.shape == (45,) and obs.sum() == 3


def test_ppo_trains_on_a_dict_env_and_records_it():
    algo = snrl.PPO(DictObsEnv, **TINY)
    assert algo.agent.obs_size == 4
    history = algo.learn(total_steps=64, progress=False)
    assert history["env_step"][-1] == 64 and np.isfinite(history["policy_loss"]).all()
    traj = algo.rollout(seed=0, record=False)
    assert traj.observations.shape == (8, 4)
    res = algo.evaluate(n_episodes=2, seed=1)
    assert res["n_episodes"] == 2 and 0.0 <= res["mean_return"] <= 8.0
    algo.close()
    dqn = snrl.DQN(DictObsEnv, backbone="mlp", hidden_size=8, n_envs=2, learning_starts=16,
                   batch_size=4, eval_interval=0, seed=0)  # fmt: skip
    assert dqn.learn(total_steps=48, progress=False)["env_step"][-1] == 48
    dqn.close()


def test_a_dict_env_by_name_from_the_cli(tmp_path, capsys):
    out = tmp_path / "run"
    res = snrl_inproc(
        capsys, "train", "--env", "tests.cli_envs:DictObsEnv", "--backbone", "mlp",
        "--hidden", "8", "--n-envs", "2", "--steps", "32", "--set", "n_steps=8",
        "--set", "eval_episodes=1", "--out", out, "--quiet",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert (out / "checkpoints" / "last.pt").exists()


def test_an_env_instance_with_dict_observations_is_refused_with_the_fix():
    with pytest.raises(UserError, match="pass a factory, env=lambda: MyEnv()"):
        snrl.PPO(DictObsEnv(), backbone="mlp", hidden_size=8)
    bad = DictObsEnv()
    bad.observation_space = gym.spaces.Dict({"t": gym.spaces.Text(5)})
    with pytest.raises(UserError, match="unsupported observation space Text"):
        flatten_obs_env(bad)
