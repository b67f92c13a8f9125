"""Tiny envs for the tests (most of them misbehaving, for tests/test_reliability_inputs.py),
loaded as ``tests.input_envs:<Class>``."""

import gymnasium as gym
import numpy as np


class _Base(gym.Env):
    """A Box(2) env with two actions; episodes of 20 steps; ``self.n`` counts life steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.n = 0
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, dtype=np.float32), {}

    def obs(self):
        return np.full(2, 0.1 * (self.t % 3), dtype=np.float32)

    def reward(self):
        return 1.0

    def step(self, action):
        self.n += 1
        self.t += 1
        return self.obs(), self.reward(), False, self.t >= 20, {}


class CrashAt300Env(_Base):
    """``step`` raises at step 300 of the env's life, with a two-line message."""

    def step(self, action):
        if self.n + 1 >= 300:
            raise RuntimeError("simulator lost contact\nsecond line of the message")
        return super().step(action)


class HugeRewardEnv(_Base):
    """Rewards of 1e300: finite in float64, infinite as float32."""

    def reward(self):
        return 1e300


class BigRewardEnv(_Base):
    """Rewards of 1e30 from step 200 of its life: finite as float32, their squares are not."""

    def reward(self):
        return 1e30 if self.n >= 200 else 1.0


class WrongShapeEnv(_Base):
    """Observations of shape (3,) where the space says (2,)."""

    def obs(self):
        return np.zeros(3, dtype=np.float32)


class NanObsAt3Env(_Base):
    """NaN observations from step 3 of each episode."""

    def obs(self):
        return np.full(2, np.nan if self.t >= 3 else 0.0, dtype=np.float32)


class MultiDiscreteEnv(_Base):
    """A 1-D MultiDiscrete action space (a valid one)."""

    action_space = gym.spaces.MultiDiscrete([2, 3])


class MultiDiscrete2DEnv(_Base):
    """A 2-D MultiDiscrete action space (its repr spans two lines)."""

    action_space = gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 5]]))
