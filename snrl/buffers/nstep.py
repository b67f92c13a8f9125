"""The n-step writer: turns the steps of a vector env into n-step transitions, per env.

    R_t = sum_{k=0}^{m-1} gamma^k r_{t+k},     discount_t = gamma^m,     m = min(n, steps left)

A written item is ``(obs_t, a_t, R_t, obs_{t+m}, gamma^m, done)`` and the learner's target is
``R_t + discount_t * (1 - done_t) * Q(obs_{t+m})``. Steps wait per env until they are ``n``
steps old; when an episode ends at step ``t + m - 1`` every pending step of that env is
written with its shortened ``m`` (none is lost):

- terminated: ``done = 1`` (no bootstrap);
- truncated (time limit): ``done = 0`` and ``obs_{t+m}`` is the true final observation, so the
  target bootstraps from it.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from snrl.buffers.storage import Batch, RingStorage, copy_into, require, space_config, space_kwargs
from snrl.errors import UserError


class NStepWriter:
    """n-step transitions from ``n_envs`` envs (for feed-forward Q-networks).

    Args:
        obs_shape: shape of one stored observation.
        n_envs: number of envs whose steps come together in :meth:`add`.
        n_step: n of the n-step return (1 = one-step TD).
        gamma: discount factor per env step.
        action_shape: shape of one action (``()`` for a discrete action).
        action_dtype: numpy dtype of the actions.
        obs_dtype: numpy dtype of the stored observations.
    """

    kind = "n_step"
    item_name = "transitions"

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        *,
        n_envs: int = 1,
        n_step: int = 1,
        gamma: float = 0.99,
        action_shape: tuple[int, ...] = (),
        action_dtype: Any = np.int64,
        obs_dtype: Any = np.float32,
    ) -> None:
        if int(n_envs) < 1:
            raise UserError(f"n_envs must be >= 1, got {n_envs} (pass the number of envs)")
        if int(n_step) < 1:
            raise UserError(f"n_step must be >= 1, got {n_step} (use 1 for one-step TD)")
        if not 0.0 <= float(gamma) <= 1.0:
            raise UserError(f"gamma must be in [0, 1], got {gamma} (e.g. 0.99)")
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.n_envs = int(n_envs)
        self.n_step = int(n_step)
        self.gamma = float(gamma)
        self.action_shape = tuple(int(d) for d in action_shape)
        self.action_dtype = np.dtype(action_dtype)
        self.obs_dtype = np.dtype(obs_dtype)
        # Pending (not yet n steps old) steps per env, oldest first.
        e, n = self.n_envs, self.n_step
        self._p_obs = np.zeros((e, n, *self.obs_shape), dtype=self.obs_dtype)
        self._p_act = np.zeros((e, n, *self.action_shape), dtype=self.action_dtype)
        self._p_rew = np.zeros((e, n), dtype=np.float64)
        self._p_len = np.zeros(e, dtype=np.int64)

    def fields(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Shape and dtype of one stored transition, per field."""
        f32 = np.dtype(np.float32)
        return {
            "obs": (self.obs_shape, self.obs_dtype),
            "next_obs": (self.obs_shape, self.obs_dtype),
            "actions": (self.action_shape, self.action_dtype),
            "rewards": ((), f32),
            "discounts": ((), f32),
            "dones": ((), f32),
        }

    @property
    def n_pending(self) -> int:
        """Steps added but not yet written (waiting for n steps or an episode end)."""
        return int(self._p_len.sum())

    def describe(self) -> str:
        return (
            f"{self.n_step}-step transitions of {self.n_envs} envs "
            f"(observations {self.obs_shape} {self.obs_dtype})"
        )

    # ---- writing -------------------------------------------------------------------------
    def add(self, obs, action, reward, next_obs, term, trunc, state=None):
        """One step of every env (arrays checked by ``ReplayBuffer.add``) -> the transitions
        it completes, or ``None``. ``state`` is ignored: transitions carry no state."""
        e = self.n_envs
        if self.n_step == 1:  # every step is a finished transition
            return self._rows(
                obs, action, reward, next_obs, np.full(e, self.gamma), term.astype(np.float32)
            )
        out: list[tuple[np.ndarray, ...]] = []
        for i in range(e):
            k = self._p_len[i]
            self._p_obs[i, k] = obs[i]
            self._p_act[i, k] = action[i]
            self._p_rew[i, k] = reward[i]
            self._p_len[i] = k = k + 1
            if term[i] or trunc[i]:
                out.append(self._flush(i, next_obs[i], float(term[i])))
            elif k == self.n_step:
                out.append(self._emit_oldest(i, next_obs[i]))
        if not out:
            return None
        return self._rows(*(np.concatenate(parts) for parts in zip(*out)))

    @staticmethod
    def _rows(obs, actions, returns, next_obs, discounts, dones) -> dict[str, np.ndarray]:
        return {
            "obs": obs,
            "actions": actions,
            "rewards": returns,
            "next_obs": next_obs,
            "discounts": discounts,
            "dones": dones,
        }

    def _emit_oldest(self, i: int, next_obs: np.ndarray) -> tuple[np.ndarray, ...]:
        """The full n-step transition of env i's oldest pending step; drops it from pending."""
        n = self.n_step
        ret = float(np.sum(self._p_rew[i, :n] * self.gamma ** np.arange(n)))
        row = (
            self._p_obs[i, :1].copy(),
            self._p_act[i, :1].copy(),
            np.array([ret]),
            next_obs[None],
            np.array([self.gamma**n]),
            np.zeros(1, dtype=np.float32),
        )
        self._p_obs[i, :-1] = self._p_obs[i, 1:].copy()
        self._p_act[i, :-1] = self._p_act[i, 1:].copy()
        self._p_rew[i, :-1] = self._p_rew[i, 1:].copy()
        self._p_len[i] -= 1
        return row

    def _flush(self, i: int, next_obs: np.ndarray, done: float) -> tuple[np.ndarray, ...]:
        """Every pending step of env i as a transition cut at the episode end."""
        m = int(self._p_len[i])
        rew = self._p_rew[i, :m]
        returns = np.zeros(m)
        acc = 0.0
        for k in range(m - 1, -1, -1):
            acc = rew[k] + self.gamma * acc
            returns[k] = acc
        steps = m - np.arange(m)  # m, m-1, ..., 1 steps to the final observation
        rows = (
            self._p_obs[i, :m].copy(),
            self._p_act[i, :m].copy(),
            returns,
            np.broadcast_to(next_obs, (m, *self.obs_shape)),
            self.gamma**steps,
            np.full(m, done, dtype=np.float32),
        )
        self._p_len[i] = 0
        return rows

    # ---- reading -------------------------------------------------------------------------
    def gather(self, storage: RingStorage, idx: np.ndarray) -> Batch:
        """``obs`` (B, *obs_shape), ``actions`` (B, *action_shape), ``rewards`` (B,) n-step
        returns, ``next_obs`` (B, *obs_shape), ``discounts`` (B,) gamma^m, ``dones`` (B,) 1.0
        where the episode terminated."""
        return {k: storage[k][idx] for k in self.fields()}

    # ---- files ---------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return {**space_config(self), "n_step": self.n_step, "gamma": self.gamma}

    @classmethod
    def from_config(cls, cfg: dict[str, Any], state_example: Any = None) -> NStepWriter:
        return cls(
            tuple(cfg["obs_shape"]), n_step=cfg["n_step"], gamma=cfg["gamma"], **space_kwargs(cfg)
        )

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "pending_obs": self._p_obs,
            "pending_actions": self._p_act,
            "pending_rewards": self._p_rew,
            "pending_len": self._p_len,
        }

    def restore(self, arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
        for key, target in self.arrays().items():
            copy_into(target, require(arrays, key, path), key, path)
