"""``N`` trial-task envs stepped by one tensor op: :class:`TaskVectorEnv`, a gymnasium
``VectorEnv`` in ``SAME_STEP`` autoreset mode.

How a step works. Trials are drawn in bulk (a *pool* of a few thousand at once, by
:func:`snrl.tasks.spec.build_trials`) with, for every step and action, the reward, whether the
trial ends and its performance. Each env holds a copy of its current trial's tables; a step
is a gather at ``(env, step in trial, action)``, and the envs whose trial ended take the next
trials of the pool. No Python loop runs over envs, and the rules are never evaluated per step.

What it returns matches ``snrl.envs.make_vector_env`` on a NeuroGym id (docs/tasks.md):

* ``obs`` float32 ``(N, C)``, ``reward`` float64, ``terminated`` (always False) and
  ``truncated`` (the episode's step limit) bool, as numpy arrays (torch tensors with
  ``as_tensors=True``);
* infos as snrl's ``TrialInfo`` on a NeuroGym task gives them, batched: ``gt``, ``new_trial``,
  and where a trial ended ``performance``, ``trial_periods`` ({period: (N, 2) s}) and
  ``trial_start`` (``conditions``, ``t0``, ``dt``, ``fixation``), each with its ``_key`` mask;
* where an episode ended: ``final_obs`` (object array), ``final_info`` (the step's infos with
  ``episode`` = {``r``, ``l``, ``t``}, as gymnasium's ``RecordEpisodeStatistics``), masks.

A reset, like NeuroGym's, takes one step of the new trial itself with the last action
(NeuroGym samples it from an action space seeded 0, which gives ``n - 1``); the agent starts
at the trial's second step.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector.utils import batch_space
from torch import Tensor

from snrl.envs.neurogym import TRIALS_PER_EPISODE
from snrl.errors import UserError
from snrl.tasks.spec import TaskSpec, build_trials

__all__ = ["TaskVectorEnv", "default_episode_steps"]


class _Pool(NamedTuple):
    """Trials drawn ahead, as the rows the envs copy."""

    rows: Tensor  # (M, T, W) float32: obs, gt, (reward, ends, performance) per action
    meta: Tensor  # (M, 2P + K + 1) float64: period starts, ends (ms), reported values, length


_PROBE_TRIALS = 10_000  # trials drawn (seed 0) to estimate the mean trial length


def default_episode_steps(spec: TaskSpec, trials: int = TRIALS_PER_EPISODE) -> int:
    """``trials`` trials of mean length (the mean over 10,000 trials drawn with seed 0): the
    step limit of an episode, as snrl gives a NeuroGym task."""
    gen = torch.Generator().manual_seed(0)
    probe = build_trials(spec, gen, _PROBE_TRIALS)
    return max(1, int(np.ceil(trials * float(probe.length.double().mean()))))


class TaskVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` envs of one batched task (see the module docstring).

    Args:
        spec: The task.
        num_envs: Number of envs.
        device: Where the tables live and the steps run (``"cpu"``, ``"cuda"``).
        seed: Seed of the first :meth:`reset` without one (``None``: fresh entropy).
        max_episode_steps: Steps per episode (``None``: :func:`default_episode_steps`).
        pool_size: Trials drawn at once (``None``: ``max(4 * num_envs, 1024)``).
        as_tensors: Return torch tensors on ``device`` instead of numpy arrays (obs, reward,
            terminated, truncated; the infos stay numpy).
    """

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(
        self,
        spec: TaskSpec,
        num_envs: int,
        *,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        max_episode_steps: int | None = None,
        pool_size: int | None = None,
        as_tensors: bool = False,
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise UserError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        if max_episode_steps is not None and max_episode_steps < 1:
            raise UserError(f"max_episode_steps must be >= 1, got {max_episode_steps!r}")
        try:
            self.device = torch.device(device)
            torch.empty(0, device=self.device)
        except (RuntimeError, AssertionError) as e:
            raise UserError(f"device {device!r} is not available ({e}; use 'cpu')") from None
        self.spec = spec
        self.num_envs = num_envs
        self.as_tensors = as_tensors
        self.metadata = {**self.metadata, "dt": spec.dt / 1000.0}
        self.single_observation_space = gym.spaces.Box(
            -np.inf, np.inf, shape=(spec.n_obs,), dtype=np.float32
        )
        self.single_action_space = gym.spaces.Discrete(spec.n_act)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.max_episode_steps = (
            default_episode_steps(spec) if max_episode_steps is None else int(max_episode_steps)
        )
        self.pool_size = max(int(pool_size or max(4 * num_envs, 1024)), num_envs)
        self._seed = seed
        self._gen = torch.Generator(device=self.device)
        self._pool: _Pool | None = None
        self._cursor = 0
        self._names = spec.period_names
        self._reported = list(spec.reported)
        self._cols_obs = spec.n_obs
        n = num_envs
        self._rows = torch.arange(n, device=self.device)
        self._tab = torch.zeros(n, 1, self._width, device=self.device)
        meta = 2 * len(self._names) + len(self._reported) + 1
        self._meta = torch.zeros(n, meta, dtype=torch.float64, device=self.device)
        self._t = torch.zeros(n, dtype=torch.int64, device=self.device)
        self._ep_return = torch.zeros(n, dtype=torch.float64, device=self.device)
        self._ep_length = torch.zeros(n, dtype=torch.int64, device=self.device)
        self._ep_start = np.zeros(n)
        self._started = False

    @property
    def _width(self) -> int:
        """Columns of a step's row: obs (C), gt, then reward/ends/performance per action."""
        return self.spec.n_obs + 1 + 3 * self.spec.n_act

    # ---- the pool of trials ---------------------------------------------------------------
    def _refill(self, need: int) -> None:
        steps = self._tab.shape[1]
        pool = build_trials(self.spec, self._gen, max(self.pool_size, need), steps=steps)
        width = pool.obs.shape[1]
        if width > steps:  # a longer trial than any before: widen the envs' tables
            pad = torch.zeros(self.num_envs, width - steps, self._width, device=self.device)
            self._tab = torch.cat([self._tab, pad], dim=1)
        m = pool.obs.shape[0]
        rows = torch.cat(
            [pool.obs, pool.gt[..., None].to(torch.float32), pool.outcome.reshape(m, width, -1)],
            dim=-1,
        )
        cond = [pool.values[k] for k in self._reported]
        meta = torch.stack(
            [*pool.start.T, *pool.end.T, *cond, pool.length.to(torch.float64)], dim=1
        )
        self._pool = _Pool(rows, meta)
        self._cursor = 0

    def _load(self, idx: Tensor) -> None:
        """The next trials of the pool into the envs ``idx`` (their step goes to 0)."""
        k = int(idx.numel())
        if k == 0:
            return
        if self._pool is None or self._cursor + k > self._pool.rows.shape[0]:
            self._refill(k)
        assert self._pool is not None
        take = slice(self._cursor, self._cursor + k)
        self._cursor += k
        self._tab.index_copy_(0, idx, self._pool.rows[take])
        self._meta.index_copy_(0, idx, self._pool.meta[take])
        self._t.index_fill_(0, idx, 0)

    def _outcome_of(self, actions: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Reward, ends, performance and ground truth of ``actions`` at the envs' steps."""
        row = self._tab[self._rows, self._t]  # (N, W)
        c = self._cols_obs
        col = c + 1 + 3 * actions
        picked = row.gather(1, torch.stack([col, col + 1, col + 2], dim=1))
        return picked[:, 0], picked[:, 1] > 0.5, picked[:, 2], row[:, c]

    def _start_episodes(self, idx: Tensor) -> None:
        """New episodes in the envs ``idx``: a new trial, and NeuroGym's reset step."""
        self._load(idx)
        last = torch.full((int(idx.numel()),), self.spec.n_act - 1, device=self.device)
        row = self._tab[idx, 0]
        col = self._cols_obs + 1 + 3 * last + 1
        ends = row.gather(1, col[:, None])[:, 0] > 0.5
        self._t.index_fill_(0, idx, 1)
        if bool(ends.any()):  # the reset step ended the trial (abort): the next one, at 0
            self._load(idx[ends])
        self._ep_return.index_fill_(0, idx, 0.0)
        self._ep_length.index_fill_(0, idx, 0)
        self._ep_start[idx.cpu().numpy()] = time.perf_counter()

    def _obs(self) -> Tensor:
        return self._tab[self._rows, self._t, : self._cols_obs]

    # ---- gymnasium API ------------------------------------------------------------------
    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env (a new episode, a new trial).

        Args:
            seed: Seeds the task's generator (an int; a list uses its first entry, gymnasium's
                per-env seeds). ``None``: the constructor's seed at the first reset, else the
                generator goes on.
            options: Unused (gymnasium's signature).
        """
        if isinstance(seed, (list, tuple)):
            seed = seed[0] if seed else None
        if seed is None and not self._started:
            seed = self._seed
        if seed is not None:
            self._gen.manual_seed(int(seed))
            self.action_space.seed(int(seed))
            self._pool = None
        elif not self._started:
            self._gen.seed()
        self._started = True
        self._start_episodes(self._rows)
        infos = self._trial_start({}, np.ones(self.num_envs, dtype=bool))
        return self._out(self._obs()), infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """One step of every env (see the module docstring)."""
        if not self._started:
            raise UserError("step() before reset() (call envs.reset() first)")
        a = torch.as_tensor(np.asarray(actions) if not isinstance(actions, Tensor) else actions)
        a = a.to(self.device, torch.int64).reshape(-1)
        if a.numel() != self.num_envs:
            raise UserError(f"step() got {a.numel()} actions for {self.num_envs} envs")
        if bool(((a < 0) | (a >= self.spec.n_act)).any()):
            raise UserError(f"actions must be in [0, {self.spec.n_act}), got {a.tolist()[:8]}")
        reward, ends, perf, gt = self._outcome_of(a)
        self._ep_return += reward.to(torch.float64)
        self._ep_length += 1
        truncated = self._ep_length >= self.max_episode_steps
        ended_meta = self._meta.clone() if bool(ends.any()) else None
        self._t += 1
        self._load(ends.nonzero()[:, 0])
        infos: dict[str, Any] = {}
        new_np = ends.cpu().numpy()
        infos["gt"] = gt.to(torch.int64).cpu().numpy()
        infos["new_trial"] = new_np
        if ended_meta is not None:
            infos["performance"] = perf.to(torch.float64).cpu().numpy()
            infos["_performance"] = new_np
            infos["trial_periods"] = self._periods(ended_meta)
            infos["_trial_periods"] = new_np
        obs = self._obs()
        done = truncated.cpu().numpy()
        if done.any():
            infos = self._end_episodes(infos, obs, done, truncated)
            obs = self._obs()
            infos = self._trial_start(infos, new_np | done)
        elif ended_meta is not None:
            infos = self._trial_start(infos, new_np)
        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        reward64 = reward.to(torch.float64)
        if self.as_tensors:
            return obs, reward64, terminated, truncated, infos
        return self._out(obs), reward64.cpu().numpy(), terminated.cpu().numpy(), done, infos

    def _out(self, obs: Tensor) -> Any:
        return obs if self.as_tensors else obs.cpu().numpy()

    def _end_episodes(
        self, infos: dict[str, Any], obs: Tensor, done: np.ndarray, truncated: Tensor
    ) -> dict[str, Any]:
        idx = truncated.nonzero()[:, 0]
        final_obs = np.empty(self.num_envs, dtype=object)
        obs_np = obs.cpu().numpy()
        for i in np.flatnonzero(done):
            final_obs[i] = obs_np[i].copy()
        now = time.perf_counter()
        episode = {
            "r": self._ep_return.cpu().numpy().copy(),
            "l": self._ep_length.cpu().numpy().copy(),
            "t": np.round(now - self._ep_start, 6),
        }
        final_info = {**infos, "episode": episode, "_episode": done}
        if "trial_start" in final_info:  # the next trial of the finished episode: not played
            final_info.pop("trial_start")
            final_info.pop("_trial_start")
        self._start_episodes(idx)
        return {
            **infos,
            "final_obs": final_obs,
            "_final_obs": done,
            "final_info": final_info,
            "_final_info": done,
        }

    def _periods(self, meta: Tensor) -> dict[str, np.ndarray]:
        p = len(self._names)
        bounds = (meta[:, : 2 * p] / 1000.0).cpu().numpy()
        return {
            name: np.stack([bounds[:, i], bounds[:, p + i]], axis=1)
            for i, name in enumerate(self._names)
        }

    def _trial_start(self, infos: dict[str, Any], mask: np.ndarray) -> dict[str, Any]:
        p = len(self._names)
        meta = self._meta.cpu().numpy()
        conditions = {}
        for j, (name, kind) in enumerate(self.spec.reported.items()):
            col = meta[:, 2 * p + j]
            conditions[name] = col.astype(np.int64) if kind is int else col
        n = self.num_envs
        dt = self.spec.dt / 1000.0
        infos["trial_start"] = {
            "conditions": conditions,
            "t0": self._t.cpu().numpy() * dt,
            "dt": np.full(n, dt),
            "fixation": np.full(n, self.spec.fixation_action, dtype=np.int64),
        }
        infos["_trial_start"] = mask
        return infos

    # ---- what snrl reads of a trial task ------------------------------------------------
    @property
    def dt(self) -> float:
        """The task step, ms (NeuroGym's unit)."""
        return float(self.spec.dt)

    def close_extras(self, **kwargs: Any) -> None:  # noqa: D102
        self._pool = None
