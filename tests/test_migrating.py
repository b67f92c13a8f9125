"""Calls written for NeuroTorch, a huskarl-style DQN or Stable-Baselines3 fail with a
MigrationError that says snrl's way and points to docs/migrating.md (which names them)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
import torch

import snrl
from snrl.buffers import ReplayBuffer
from snrl.errors import MIGRATING, MigrationError, UserError, explain_foreign_calls
from tests.cli_run import assert_user_error, snrl_inproc

ROOT = Path(__file__).resolve().parents[1]
TINY = dict(backbone="mlp", hidden_size=8, n_envs=1, seed=0)


def _refused(call, *fragments):
    """``call()`` raises a MigrationError (a TypeError and a UserError) naming the page."""
    with pytest.raises(MigrationError) as info:
        call()
    text = str(info.value)
    assert isinstance(info.value, TypeError) and isinstance(info.value, UserError)
    assert text.endswith(f"see {MIGRATING})") and "\n" not in text
    for fragment in fragments:
        assert fragment in text, text
    return text


def test_sb3_policy_kwargs_names_the_options():
    _refused(
        lambda: snrl.PPO("CartPole-v1", policy_kwargs={"net_arch": [64, 64]}, **TINY),
        "unknown PPO option 'policy_kwargs'",
        "hidden_size=",
    )
    _refused(lambda: snrl.PPO("CartPole-v1", learning_rate=1e-3, **TINY), "is lr")


def test_sb3_learn_total_timesteps():
    algo = snrl.PPO("CartPole-v1", **TINY)
    _refused(lambda: algo.learn(total_timesteps=100), "learn(total_steps=N)")
    assert algo.env_step == 0  # nothing ran
    algo.close()


def test_sb3_policy_string_first():
    _refused(lambda: snrl.PPO("MlpPolicy", "CartPole-v1"), "snrl.PPO(env, backbone=...)")


def test_huskarl_dqn_with_a_positional_model():
    model = torch.nn.Linear(4, 2)
    _refused(lambda: snrl.DQN("CartPole-v1", model), "snrl.DQN(env, policy=q_network)")
    _refused(lambda: snrl.DQN(model, actions=2), "snrl.DQN(env, policy=q_network)")
    _refused(lambda: snrl.DQN("CartPole-v1", actions=2, **TINY), "action space")
    _refused(lambda: snrl.DQN("CartPole-v1", memsize=1000, **TINY), "buffer_size")


def test_neurotorch_agent_with_env_and_policy():
    env = gym.make("CartPole-v1")
    _refused(
        lambda: snrl.Agent(env=env, policy=torch.nn.Linear(4, 2)),
        "snrl.PPO(env, policy=module)",
    )
    agent = snrl.Agent(env.observation_space, env.action_space)  # snrl's own call still works
    assert agent.obs_size == 4
    env.close()


def test_neurotorch_trajectory_of_experiences():
    _refused(lambda: snrl.Trajectory(experiences=[]), "algo.rollout(seed=0, record=True)")
    _refused(lambda: snrl.Trajectory(), "one recorded episode")


def test_neurotorch_curriculum_and_replay_buffer():
    _refused(
        lambda: snrl.Curriculum(name="c", lessons=[{"max_steps": 10}]),
        "takes only the lessons",
    )
    assert len(snrl.Curriculum([{"max_steps": 10}]).lessons) == 1
    _refused(lambda: ReplayBuffer(capacity=100, use_priority=True), "buffer_size=")


def test_a_wrong_call_without_a_hint_is_python_s_own_error():
    @explain_foreign_calls("f(...)", {"old": "use new="})
    def f(a, *, new=1):
        return a + new

    assert f(1, new=2) == 3
    with pytest.raises(TypeError) as info:
        f(1, 2)
    assert not isinstance(info.value, MigrationError) and "positional" in str(info.value)
    _refused(lambda: f(1, old=2), "f(...): got an unexpected keyword argument 'old'; use new=")

    def g(**kwargs):
        raise TypeError("inside g")  # raised by the body: never taken for a wrong call

    with pytest.raises(TypeError, match="^inside g$"):
        explain_foreign_calls("g(...)", {"x": "y"}, default="z")(g)(x=1)


def test_the_cli_names_snrl_s_key(tmp_path, capsys):
    res = snrl_inproc(capsys, "train", "--set", "learning_rate=1e-3", "--out", tmp_path / "r")
    assert_user_error(res, "learning_rate is lr; see docs/migrating.md")
    assert not (tmp_path / "r").exists()


def test_the_page_names_every_name_the_errors_send_there():
    text = (ROOT / MIGRATING).read_text(encoding="utf-8")
    for name in (
        "Trajectory",
        "ReplayBuffer",
        "Curriculum",
        "Agent",
        "policy_kwargs",
        "total_timesteps",
        "learning_rate",
        "MlpPolicy",
        "memsize",
        "nsteps",
    ):
        assert name in text, name
    for section in (
        "## NeuroTorch -> snrl",
        "## A huskarl-style DQN -> snrl",
        "## Stable-Baselines3 -> snrl",
    ):
        assert section in text
