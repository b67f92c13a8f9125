"""Tiny envs for the CLI tests, loaded as ``tests.cli_envs:<Class>``."""

import numpy as np

from tests.input_envs import _Base


class NanAfterEnv(_Base):
    """A Box env whose observation turns NaN at step 600 of its life (across episodes)."""

    def step(self, action):
        _, reward, terminated, truncated, info = super().step(action)
        obs = np.full(2, np.nan if self.n >= 600 else 0.1 * int(action), dtype=np.float32)
        return obs, reward, terminated, truncated, info
