"""The run's title on its figures: algorithm, backbone, Dale, size, seed, env."""

from __future__ import annotations

import snrl
from snrl.agents.base import run_title


def test_title_names_algo_backbone_dale_size_seed() -> None:
    algo = snrl.PPO("CartPole-v1", n_envs=1, hidden_size=16, force_dale_law=True, seed=7)
    assert run_title("ppo", algo.config) == (
        "PPO · LIF · Dale 80/20 · 16 neurons · seed 7 · CartPole-v1"
    )
    algo = snrl.PPO("CartPole-v1", n_envs=1, hidden_size=8, backbone="gru", seed=1)
    assert run_title("ppo", algo.config) == "PPO · GRU · 8 units · seed 1 · CartPole-v1"
    algo = snrl.PPO("CartPole-v1", n_envs=1, hidden_size=8, backbone="alif", force_dale_law=False)
    assert "ALIF · no Dale · 8 neurons" in run_title("ppo", algo.config)


def test_title_says_shared_trunk() -> None:
    algo = snrl.PPO("CartPole-v1", n_envs=1, hidden_size=16, shared_trunk=True, seed=2)
    assert run_title("ppo", algo.config) == (
        "PPO · LIF · Dale 80/20 · 16 neurons · shared trunk · seed 2 · CartPole-v1"
    )
    algo.close()
