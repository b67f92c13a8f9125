"""Which gymnasium spaces snrl supports, how observations become flat float vectors and how
an agent's actions become env actions.

Supported observation spaces: ``Box`` (any shape; flattened to float32) and ``Discrete``
(one-hot encoded). A ``Dict`` or ``Tuple`` of them (nested too) is flattened into one ``Box``
where snrl makes the env (:func:`flatten_obs_env`, called by :func:`snrl.envs.make_env`): the
sub-observations side by side, a Dict's in its key order, Discrete ones one-hot, as
Stable-Baselines3's ``MultiInputPolicy`` concatenates them.

Supported action spaces: ``Discrete`` and ``MultiDiscrete`` (1-D ``nvec``; any ``start``)
and ``Box`` (any shape; the agent acts on the flattened vector). An algorithm states what it
needs (``discrete_actions=True`` for a Q-learner); this module knows no algorithm names.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from gymnasium.wrappers import FlattenObservation

from snrl.errors import UserError

__all__ = ["ActionMap", "ObsFlattener", "check_spaces", "flatten_obs_env", "flatten_obs_size"]

_SUPPORTED_OBS = (
    "Box (any shape, flattened), Discrete (one-hot), or a Dict or Tuple of them, which snrl "
    "flattens in the envs it makes"
)
_SUPPORTED_ACT = "Discrete, MultiDiscrete (1-D) or Box"


def _space_name(space: object) -> str:
    """``Type (space)`` on one line (a 2-D MultiDiscrete prints over several lines)."""
    return " ".join(f"{type(space).__name__} ({space})".split())


def check_spaces(
    observation_space: spaces.Space,
    action_space: spaces.Space,
    *,
    discrete_actions: bool = False,
    who: str = "this algorithm",
    hint: str = "",
) -> None:
    """Raise :class:`UserError` unless snrl can act in these (single-env) spaces.

    Args:
        observation_space: The single-environment observation space.
        action_space: The single-environment action space.
        discrete_actions: The caller needs a ``Discrete`` action space (one head unit per
            action, e.g. Q-learning).
        who: Names the caller in the message (e.g. ``"DQN"``).
        hint: How to fix a non-Discrete action space when ``discrete_actions`` (e.g. which
            other algorithm to use).

    Raises:
        UserError: For an unsupported space, naming the space and listing the supported ones.
    """
    if isinstance(observation_space, (spaces.Dict, spaces.Tuple)):
        _check_nested(observation_space)
        raise UserError(
            f"observation space {_space_name(observation_space)} of an env object snrl trains "
            "on as given (an instance or a vector env is not copied, so snrl cannot flatten "
            "it; pass a factory, env=lambda: MyEnv(), or an env id, whose Dict/Tuple "
            "observations snrl flattens, or wrap it in gymnasium.wrappers.FlattenObservation)"
        )
    if not isinstance(observation_space, (spaces.Box, spaces.Discrete)):
        raise UserError(
            f"unsupported observation space {_space_name(observation_space)} "
            f"(snrl supports {_SUPPORTED_OBS}; wrap the env, e.g. with "
            "gymnasium.wrappers.FlattenObservation, to get a Box)"
        )
    if discrete_actions and not isinstance(action_space, spaces.Discrete):
        raise UserError(
            f"{who} needs a Discrete action space, got {_space_name(action_space)} "
            f"({hint or 'wrap the env to give it a Discrete action space'})"
        )
    ActionMap(action_space)  # raises for the unsupported ones


def _check_nested(space: spaces.Space) -> None:
    """Raise :class:`UserError` unless every leaf of a Dict/Tuple space is a Box or a
    Discrete (what snrl flattens)."""
    children = space.spaces.values() if isinstance(space, spaces.Dict) else space.spaces
    for child in children:
        if isinstance(child, (spaces.Dict, spaces.Tuple)):
            _check_nested(child)
        elif not isinstance(child, (spaces.Box, spaces.Discrete)):
            raise UserError(
                f"unsupported observation space {_space_name(child)} inside "
                f"{type(space).__name__} (snrl supports {_SUPPORTED_OBS})"
            )


def flatten_obs_env(env: Any) -> Any:
    """``env`` with its ``Dict`` or ``Tuple`` observations flattened into one float ``Box``
    (``gymnasium.wrappers.FlattenObservation``: the sub-observations side by side, a Dict's
    in its key order, Discrete ones one-hot); any other env unchanged.

    Raises:
        UserError: A leaf space other than Box or Discrete (e.g. Text, Graph, Sequence).
    """
    space = getattr(env, "observation_space", None)
    if not isinstance(space, (spaces.Dict, spaces.Tuple)):
        return env
    _check_nested(space)
    return FlattenObservation(env)


class ActionMap:
    """The one place where an agent's actions become env actions, for one action space.

    The agent acts on a flat vector of ``size`` head units and produces, per env:

    - ``Discrete(n, start)``: an index in ``[0, n)``; the env gets ``start + index``;
    - ``MultiDiscrete(nvec, start)`` (1-D): indices ``(len(nvec),)``; the env gets
      ``start + indices``;
    - ``Box(shape)``: a flat float vector ``(prod(shape),)``; the env gets it clipped to the
      bounds and reshaped to ``shape``, in the space's dtype.

    ``nvec`` lists the number of choices per discrete sub-action (``[n]`` for Discrete,
    empty for Box).

    Args:
        space: The single-environment action space.

    Raises:
        UserError: For an action space snrl does not support.
    """

    def __init__(self, space: spaces.Space) -> None:
        self.space = space
        if isinstance(space, spaces.Discrete):
            self.kind = "discrete"
            self.size = int(space.n)
            self.shape: tuple[int, ...] = ()
            self.nvec = [self.size]
            self._offset = np.int64(space.start)
        elif isinstance(space, spaces.MultiDiscrete):
            if space.nvec.ndim != 1:
                raise UserError(
                    f"unsupported action space {_space_name(space)}: MultiDiscrete with a "
                    f"{space.nvec.ndim}-D nvec (snrl supports a 1-D nvec; reshape the action "
                    "space of the env to 1-D)"
                )
            self.kind = "multidiscrete"
            self.nvec = [int(n) for n in space.nvec]
            self.size = int(sum(self.nvec))
            self.shape = (len(self.nvec),)
            self._offset = np.asarray(space.start, dtype=np.int64)
        elif isinstance(space, spaces.Box):
            self.kind = "box"
            self.size = int(np.prod(space.shape, dtype=np.int64))
            self.shape = (self.size,)
            self.nvec = []
            self._low = np.asarray(space.low, dtype=np.float64).reshape(-1)
            self._high = np.asarray(space.high, dtype=np.float64).reshape(-1)
        else:
            raise UserError(
                f"unsupported action space {_space_name(space)} (snrl supports {_SUPPORTED_ACT})"
            )

    @property
    def discrete(self) -> bool:
        """Integer actions (Discrete or MultiDiscrete)."""
        return self.kind != "box"

    def to_env(self, action: np.ndarray) -> np.ndarray:
        """Agent actions ``(B, *self.shape)`` -> env actions ``(B, *space.shape)``.

        Raises:
            ValueError: If the batch does not have the agent's action shape.
        """
        action = np.asarray(action)
        if action.shape[1:] != self.shape:
            raise ValueError(
                f"expected agent actions of shape (B, {', '.join(map(str, self.shape))}), "
                f"got {action.shape}"
            )
        if self.kind == "box":
            clipped = np.clip(action, self._low, self._high)
            out = clipped.reshape(action.shape[0], *self.space.shape)
            return out.astype(self.space.dtype, copy=False)
        return (action.astype(np.int64, copy=False) + self._offset).astype(
            self.space.dtype, copy=False
        )

    def to_env_tensor(self, action: torch.Tensor) -> torch.Tensor:
        """:meth:`to_env` on a tensor, where it is (for a batched env that takes tensors on
        the agent's device): the same values, as a tensor of the space's dtype."""
        if tuple(action.shape[1:]) != self.shape:
            raise ValueError(
                f"expected agent actions of shape (B, {', '.join(map(str, self.shape))}), "
                f"got {tuple(action.shape)}"
            )
        dtype = torch.from_numpy(np.zeros(0, dtype=self.space.dtype)).dtype
        if self.kind == "box":
            low, high = (torch.as_tensor(b, device=action.device) for b in (self._low, self._high))
            clipped = torch.clamp(action.to(torch.float64), low, high)
            return clipped.reshape(action.shape[0], *self.space.shape).to(dtype)
        if not np.any(self._offset) and dtype == torch.int64:  # the common case: one cast
            return action.to(torch.int64)
        offset = torch.as_tensor(self._offset, device=action.device)
        return (action.to(torch.int64) + offset).to(dtype)


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
    """Turns batched observations of a single-env space into a (..., size) float32 array.

    ``Box`` observations are reshaped to (..., prod(shape)) and cast to float32; ``Discrete``
    observations (integers in ``[start, start + n)``) become one-hot rows of length ``n``.
    Any number (>= 1) of leading batch dimensions is kept: (B, ...) or (T, B, ...).

    Args:
        space: The single-environment observation space (``Box`` or ``Discrete``).
    """

    def __init__(self, space: spaces.Space) -> None:
        self.space = space
        self.size = flatten_obs_size(space)

    def __call__(self, obs: Any) -> Any:
        """Flatten a batch of observations.

        Args:
            obs: (*batch, *space.shape), e.g. (B, *shape) for Box or (B,) integers for
                Discrete; numpy (or anything ``np.asarray`` takes) or a torch tensor.

        Returns:
            (*batch, size) float32 array; for a tensor of Box observations a float32 tensor
            on its device (a batched env's observations stay where they are).

        Raises:
            ValueError: If the batch does not end with the space's shape.
        """
        if isinstance(obs, torch.Tensor) and isinstance(self.space, spaces.Box):
            return self._box_tensor(obs)
        if isinstance(obs, torch.Tensor):
            obs = obs.cpu().numpy()  # Discrete: one-hot rows below
        obs = np.asarray(obs)
        shape = tuple(self.space.shape)
        lead = obs.shape[: obs.ndim - len(shape)]
        if obs.ndim <= len(shape) or obs.shape[len(lead) :] != shape:
            raise ValueError(
                f"expected a batch of observations of shape (B, {', '.join(map(str, shape))}), "
                f"got {obs.shape}"
                if shape
                else f"expected a batch of Discrete observations of shape (B,), got {obs.shape}"
            )
        if isinstance(self.space, spaces.Discrete):
            index = obs.astype(np.int64) - int(self.space.start)
            if index.size and (index.min() < 0 or index.max() >= self.size):
                raise ValueError(
                    f"Discrete observation out of range [{self.space.start}, "
                    f"{self.space.start + self.size}): {obs}"
                )
            out = np.zeros((index.size, self.size), dtype=np.float32)
            out[np.arange(index.size), index.reshape(-1)] = 1.0
            return out.reshape(*lead, self.size)
        return obs.reshape(*lead, self.size).astype(np.float32, copy=False)

    def _box_tensor(self, obs: torch.Tensor) -> torch.Tensor:
        """A batch of Box observations that is a tensor (a batched env's, on its device):
        flattened and cast to float32 as a tensor, where it is (no numpy round trip)."""
        shape = tuple(self.space.shape)
        lead = tuple(obs.shape[: obs.ndim - len(shape)])
        if obs.ndim <= len(shape) or tuple(obs.shape[len(lead) :]) != shape:
            raise ValueError(
                f"expected a batch of observations of shape (B, {', '.join(map(str, shape))}), "
                f"got {tuple(obs.shape)}"
            )
        return obs.reshape(*lead, self.size).to(torch.float32)

    def single(self, obs: np.ndarray | int) -> np.ndarray:
        """Flatten one (unbatched) observation to a (size,) float32 array."""
        return self(np.asarray(obs)[None])[0]
