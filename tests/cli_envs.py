"""Tiny envs for the CLI tests, loaded as ``tests.cli_envs:<Class>``."""

import gymnasium as gym
import numpy as np

from tests.input_envs import _Base


class NanAfterEnv(_Base):
    """A Box env whose observation turns NaN at step 600 of its life (across episodes)."""

    def step(self, action):
        _, reward, terminated, truncated, info = super().step(action)
        obs = np.full(2, np.nan if self.n >= 600 else 0.1 * int(action), dtype=np.float32)
        return obs, reward, terminated, truncated, info


class DictObsEnv(gym.Env):
    """A Dict observation (a position Box and a Discrete cue), two actions: the reward is 1
    when the action names the cue. Episodes last 8 steps."""

    observation_space = gym.spaces.Dict(
        {"cue": gym.spaces.Discrete(2), "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
    )
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        self.cue = int(self.np_random.integers(2))
        pos = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return {"cue": self.cue, "pos": pos}

    def step(self, action):
        reward = float(int(action) == self.cue)
        self.t += 1
        return self._obs(), reward, False, self.t >= 8, {}
