"""Tiny envs for the CLI tests, loaded as ``tests.cli_envs:<Class>``."""

import gymnasium as gym
import numpy as np


class NanAfterEnv(gym.Env):
    """A Box env whose observation turns NaN at step 600 of its life (across episodes)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.n = 0
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        self.n += 1
        self.t += 1
        obs = np.full(2, np.nan if self.n >= 600 else 0.1 * int(action), dtype=np.float32)
        return obs, 1.0, False, self.t >= 20, {}
