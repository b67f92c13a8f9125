"""Task time per env step: which envs declare it (snrl.envs.timing)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from snrl.envs import make_env
from snrl.envs.timing import env_time_step


class _ClaimsDt(gym.Env):
    """Not a NeuroGym task, with a ``dt`` attribute that must not be trusted."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)
    dt = 100


def test_neurogym_task_dt_in_ms_gives_seconds() -> None:
    core = pytest.importorskip("neurogym.core")

    class FakeTask(core.BaseEnv):
        def __init__(self) -> None:
            super().__init__(dt=100)

    assert env_time_step(FakeTask()) == pytest.approx(0.1)
    # a real task, through snrl's make_env and its wrappers: GoNogo's default dt is 100 ms
    env = make_env("neurogym.envs.native.gonogo:GoNogo", dt=20)
    try:
        assert env_time_step(env) == pytest.approx(0.02)
    finally:
        env.close()


def test_other_envs_declare_no_task_time() -> None:
    # CartPole has tau (its integration step), MuJoCo a dt in seconds: neither is read
    env = make_env("CartPole-v1")
    try:
        assert env_time_step(env) is None
    finally:
        env.close()
    assert env_time_step(_ClaimsDt()) is None
    assert env_time_step(gym.wrappers.TimeLimit(_ClaimsDt(), 5)) is None
