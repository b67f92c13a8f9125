"""CartPole variants that fail for chosen seeds, for the failure-isolation tests
(loaded as ``tests.experiments.crash_env:CrashOnSeed``)."""

import os

from gymnasium.envs.classic_control.cartpole import CartPoleEnv


class CrashOnSeed(CartPoleEnv):
    """Raises when reset with seed 20; kills its whole process when reset with seed 30.
    Episodes end after 100 steps (a class is made without gymnasium's registered
    TimeLimit, and a trained policy may balance forever)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self._t = getattr(self, "_t", 0) + 1
        return obs, reward, terminated, truncated or self._t >= 100, info

    def reset(self, *, seed=None, options=None):
        self._t = 0
        if seed == 20:
            raise RuntimeError("boom at seed 20")
        if seed == 30:
            os._exit(3)  # a crash outside Python: the worker process dies
        return super().reset(seed=seed, options=options)
