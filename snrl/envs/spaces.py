"""Which gymnasium spaces snrl supports, and how observations become flat float vectors.

Supported observation spaces: ``Box`` (any shape; flattened to float32) and ``Discrete``
(one-hot encoded). Supported action spaces: ``Discrete``, ``MultiDiscrete`` (1-D ``nvec``) and
``Box`` for PPO; ``Discrete`` only for DQN.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from snrl.errors import UserError

__all__ = ["ObsFlattener", "check_spaces", "flatten_obs_size", "ALGOS"]

ALGOS = ("ppo", "dqn")

_SUPPORTED_OBS = "Box (any shape, flattened) or Discrete (one-hot)"
_SUPPORTED_ACT = {"ppo": "Discrete, MultiDiscrete or Box", "dqn": "Discrete"}


def _space_name(space: object) -> str:
    return f"{type(space).__name__} ({space})"


def check_spaces(observation_space: spaces.Space, action_space: spaces.Space, *, algo: str) -> None:
    """Raise :class:`UserError` unless ``algo`` can train on these (single-env) spaces.

    Args:
        observation_space: The single-environment observation space.
        action_space: The single-environment action space.
        algo: ``"ppo"`` or ``"dqn"``.

    Raises:
        UserError: For an unknown ``algo`` or an unsupported space, naming the space and
            listing the supported ones.
    """
    if algo not in ALGOS:
        raise UserError(f"unknown algorithm {algo!r} (use one of: {', '.join(ALGOS)})")
    if not isinstance(observation_space, (spaces.Box, spaces.Discrete)):
        raise UserError(
            f"unsupported observation space {_space_name(observation_space)} "
            f"(snrl supports {_SUPPORTED_OBS}; wrap the env, e.g. with "
            "gymnasium.wrappers.FlattenObservation, to get a Box)"
        )
    if algo == "dqn":
        if not isinstance(action_space, spaces.Discrete):
            raise UserError(
                f"DQN needs a Discrete action space, got {_space_name(action_space)} "
                "(use --algo ppo for Box/MultiDiscrete)"
            )
        return
    if isinstance(action_space, spaces.MultiDiscrete):
        if action_space.nvec.ndim != 1:
            raise UserError(
                f"unsupported action space {_space_name(action_space)}: MultiDiscrete with a "
                f"{action_space.nvec.ndim}-D nvec (snrl supports a 1-D nvec; reshape the "
                "action space of the env to 1-D)"
            )
        return
    if not isinstance(action_space, (spaces.Discrete, spaces.Box)):
        raise UserError(
            f"unsupported action space {_space_name(action_space)} "
            f"(PPO supports {_SUPPORTED_ACT['ppo']}; DQN supports {_SUPPORTED_ACT['dqn']})"
        )


def flatten_obs_size(space: spaces.Space) -> int:
    """Length of the flat float vector an observation of ``space`` becomes.

    Args:
        space: A ``Box`` (size = product of its shape) or ``Discrete`` (size = ``n``).

    Returns:
        The flat size.

    Raises:
        UserError: For any other space.
    """
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape, dtype=np.int64))
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    raise UserError(
        f"unsupported observation space {_space_name(space)} (snrl supports {_SUPPORTED_OBS})"
    )


class ObsFlattener:
    """Turns batched observations of a single-env space into a (B, size) float32 array.

    ``Box`` observations are reshaped to (B, prod(shape)) and cast to float32; ``Discrete``
    observations (integers in ``[start, start + n)``) become one-hot rows of length ``n``.

    Args:
        space: The single-environment observation space (``Box`` or ``Discrete``).
    """

    def __init__(self, space: spaces.Space) -> None:
        self.space = space
        self.size = flatten_obs_size(space)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Flatten a batch of observations.

        Args:
            obs: (B, *space.shape) for Box, (B,) integers for Discrete.

        Returns:
            (B, size) float32 array.

        Raises:
            ValueError: If the batch does not have the space's shape.
        """
        obs = np.asarray(obs)
        if isinstance(self.space, spaces.Discrete):
            if obs.ndim != 1:
                raise ValueError(
                    f"expected a batch of Discrete observations of shape (B,), got {obs.shape}"
                )
            index = obs.astype(np.int64) - int(self.space.start)
            if index.size and (index.min() < 0 or index.max() >= self.size):
                raise ValueError(
                    f"Discrete observation out of range [{self.space.start}, "
                    f"{self.space.start + self.size}): {obs}"
                )
            out = np.zeros((obs.shape[0], self.size), dtype=np.float32)
            out[np.arange(obs.shape[0]), index] = 1.0
            return out
        shape = tuple(self.space.shape)
        if obs.shape[1:] != shape:
            raise ValueError(
                f"expected a batch of observations of shape (B, {', '.join(map(str, shape))}), "
                f"got {obs.shape}"
            )
        return obs.reshape(obs.shape[0], self.size).astype(np.float32, copy=False)

    def single(self, obs: np.ndarray | int) -> np.ndarray:
        """Flatten one (unbatched) observation to a (size,) float32 array."""
        return self(np.asarray(obs)[None])[0]
