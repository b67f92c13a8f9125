"""Per-environment wrappers applied by :func:`snrl.envs.make_vector_env`."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from snrl.errors import EnvError, UserError

__all__ = ["FiniteCheck", "SeedOnFirstReset"]


def _all_finite(x: Any) -> bool:
    # Called twice per env step: a Python number (most rewards) and a float array (most
    # observations) take the short ways (a third of a vector env step went here before).
    if isinstance(x, float | int):
        return math.isfinite(x)
    if isinstance(x, np.ndarray):
        return x.dtype.kind not in "fc" or bool(np.isfinite(x).all())
    arr = np.asarray(x)
    if arr.dtype.kind not in "fc":
        return True
    return bool(np.isfinite(arr).all())


class FiniteCheck(gym.Wrapper):
    """Raise :class:`UserError` as soon as the env emits a NaN/inf observation or reward, or
    a Box observation whose shape is not its ``observation_space``'s; raise
    :class:`EnvError` (naming the env and the step) when its ``reset``/``step`` raises.

    Steps are counted from 1 over the wrapper's whole life (all episodes); the message also
    names the step within the current episode.

    Args:
        env: The env to watch.
        env_id: The name used in the error message.
        index: Which sub-env of a vector env this is (named in the message).
    """

    def __init__(self, env: gym.Env, *, env_id: str, index: int = 0) -> None:
        super().__init__(env)
        self._env_id = env_id
        self._index = index
        self.total_steps = 0
        self.episode_steps = 0

    def _fail(self, what: str, value: Any) -> None:
        raise UserError(
            f"env {self._env_id} returned a non-finite {what} at step {self.total_steps} "
            f"(sub-env {self._index}, step {self.episode_steps} of its episode, value {value!r}; "
            "fix the environment or wrap it to sanitize its outputs)"
        )

    def _crashed(self, where: str, error: Exception) -> EnvError:
        text = " ".join(str(error).split()) or "no message"
        return EnvError(
            f"env {self._env_id} raised {type(error).__name__} in {where} (sub-env "
            f"{self._index}): {text} (fix the environment; a run keeps its last checkpoint)"
        )

    def _check_shape(self, obs: Any, where: str) -> None:
        space = self.env.observation_space
        if not isinstance(space, gym.spaces.Box):
            return
        shape = obs.shape if isinstance(obs, np.ndarray) else np.shape(obs)
        if shape != space.shape:
            raise UserError(
                f"env {self._env_id} returned an observation of shape {np.shape(obs)} at "
                f"{where}, but its observation_space has shape {space.shape} (sub-env "
                f"{self._index}; make the env's observations match its observation_space)"
            )

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        try:
            obs, info = self.env.reset(**kwargs)
        except UserError:
            raise
        except Exception as e:  # the user's env: name it instead of showing its traceback
            raise self._crashed(f"reset after step {self.total_steps}", e) from e
        self.episode_steps = 0
        self._check_shape(obs, f"reset after step {self.total_steps}")
        if not _all_finite(obs):
            raise UserError(
                f"env {self._env_id} returned a non-finite observation at reset after step "
                f"{self.total_steps} (sub-env {self._index}, value {obs!r}; fix the "
                "environment or wrap it to sanitize its outputs)"
            )
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        try:
            obs, reward, terminated, truncated, info = self.env.step(action)
        except UserError:
            raise
        except Exception as e:  # the user's env: name it instead of showing its traceback
            where = f"step {self.total_steps + 1} (step {self.episode_steps + 1} of its episode)"
            raise self._crashed(where, e) from e
        self.total_steps += 1
        self.episode_steps += 1
        self._check_shape(obs, f"step {self.total_steps}")
        if not _all_finite(obs):
            self._fail("observation", obs)
        if not _all_finite(reward):
            self._fail("reward", reward)
        return obs, reward, terminated, truncated, info


class SeedOnFirstReset(gym.Wrapper):
    """Use ``seed`` for the first ``reset`` that is not given one; seed the action space too.

    Later resets without a seed continue the env's own generator, so a run is reproducible
    from ``seed`` alone.

    Args:
        env: The env to seed.
        seed: The seed for its first reset (``None``: do nothing).
    """

    def __init__(self, env: gym.Env, *, seed: int | None) -> None:
        super().__init__(env)
        self._pending_seed = seed
        if seed is not None:
            env.action_space.seed(seed)

    def reset(self, *, seed: int | None = None, options: dict | None = None):  # noqa: D102
        if seed is None:
            seed = self._pending_seed
        self._pending_seed = None
        return self.env.reset(seed=seed, options=options)
