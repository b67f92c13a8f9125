"""``N`` trial-task envs stepped by one tensor op: :class:`TaskVectorEnv`, a gymnasium
``VectorEnv`` in ``SAME_STEP`` autoreset mode.

How a step works. Trial variables are drawn in bulk (a *pool* of a few thousand trials at
once, :func:`snrl.tasks.spec.draw_trials`). A trial's tables (observation, noise level,
ground truth and, for every step and action, the reward, whether the trial ends and its
performance; :func:`snrl.tasks.spec.trial_tables`) depend only on its variables, and
NeuroGym's tasks have few distinct trials (their durations are whole steps, their conditions
lists), so the engine keeps a *bank* of the distinct trials' tables, built once each (a
refill finds its trials there by a hash of their variables). A table row (a step of a trial)
repeats across steps and trials (ContextDecisionMaking's 972 trials of 40 steps have 40
distinct rows), so the bank stores each distinct row once, and a trial as the index of its
rows among them; an env is a pointer into it: its cell ``(trial, step)``. A step is a gather
of the envs' rows' indices and a few gathers of rows from that small table; the envs whose
trial ended point at the next trials of the pool; the observation noise is drawn per step
(the same independent Gaussian per step and channel as NeuroGym's per-trial draw) from the
env's ``torch.Generator``. No Python loop runs over envs, and no rule is evaluated per step.
On the CPU the step runs on numpy views of the engine's tensors (a numpy op on a thousand
numbers costs a third of a torch op's dispatch), on other devices on the tensors. A bank
that outgrows :data:`BANK_FLOATS` (tasks with continuous variables) is rebuilt from the
trials in use.

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

import contextlib
import dataclasses
import time
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector.utils import batch_space
from torch import Tensor

from snrl.envs.neurogym import TRIALS_PER_EPISODE
from snrl.envs.trials import unbatch_info
from snrl.errors import UserError
from snrl.tasks.spec import TaskSpec, draw_trials, period_bounds, trial_tables

__all__ = ["TaskEnv", "TaskVectorEnv", "default_episode_steps"]


#: Floats the bank of distinct trials may hold before it is rebuilt from the trials in use.
BANK_FLOATS = 1 << 25
_PROBE_TRIALS = 10_000  # trials drawn (seed 0) to estimate the mean trial length
#: Batches of _PROBE_TRIALS draws that prime the bank, at most (TaskVectorEnv._prime)
_PRIME_BATCHES = 10
#: Step on numpy views on the CPU (False: on the tensors, as on other devices; tests compare)
_NUMPY_ON_CPU = True


def _firsts(inverse: Tensor, count: int) -> Tensor:
    """The first position of each of ``count`` groups in ``inverse`` (a group per position)."""
    order = torch.arange(inverse.shape[0], device=inverse.device)
    first = torch.full((count,), inverse.shape[0], dtype=torch.int64, device=inverse.device)
    return first.scatter_reduce(0, inverse, order, reduce="amin")


def _unique_rows(keys: Tensor) -> tuple[Tensor, Tensor]:
    """``torch.unique(keys, dim=0, return_inverse=True)``, the distinct rows in any order:
    each column's values coded as integers, the codes of a row combined into one int64 (when
    the numbers of distinct values multiply to less than 2**62), then a 1-D unique, which
    is ten times faster than ``unique_dim``."""
    codes = torch.zeros(keys.shape[0], dtype=torch.int64, device=keys.device)
    radix = 1
    for j in range(keys.shape[1]):
        values, inverse = torch.unique(keys[:, j], return_inverse=True)
        codes += inverse * radix
        radix *= int(values.numel())
        if radix >= 1 << 62:
            return torch.unique(keys, dim=0, return_inverse=True)
    distinct, inverse = torch.unique(codes, return_inverse=True)
    return keys[_firsts(inverse, distinct.numel())], inverse


def _distinct_rows(rows: Tensor) -> tuple[Tensor, Tensor]:
    """The distinct rows of a float32 table, bit for bit (``-0.0`` is not ``0.0``), in any
    order, and each row's index among them: a 1-D unique of the rows' hashes, checked (rows
    whose hashes collide fall back to ``torch.unique(dim=0)``)."""
    bits = rows.view(torch.int32)
    hashes, inverse = torch.unique(_row_hash(bits.double()), return_inverse=True)
    first = _firsts(inverse, hashes.numel())
    if bool((bits[first][inverse] == bits).all()):
        return rows[first], inverse
    distinct, inverse = torch.unique(bits, dim=0, return_inverse=True)
    return distinct.view(torch.float32), inverse


def _row_hash(keys: Tensor) -> Tensor:
    """A float64 hash of each row of float64 ``keys``: its dot product with fixed random
    weights in ``[1, 2)`` (equal rows, equal hashes; distinct rows collide only by a rounding
    accident, and :meth:`TaskVectorEnv._find` checks every hit)."""
    gen = torch.Generator().manual_seed(0x5EED)
    w = torch.rand(keys.shape[1], generator=gen, dtype=torch.float64).add_(1.0)
    return (keys * w.to(keys.device)).sum(1)


def _hashed(table: Tensor) -> tuple[Tensor, Tensor]:
    """The sorted hashes of ``table``'s rows and their rows (what :func:`_lookup` searches)."""
    return torch.sort(_row_hash(table.double()))


def _lookup(table: Tensor, hashed: tuple[Tensor, Tensor], keys: Tensor) -> tuple[Tensor, Tensor]:
    """The rows of ``table`` equal to each row of ``keys``, and where there is none (the id
    there is meaningless): a binary search of the keys' hashes among ``hashed`` (the table's,
    :func:`_hashed`), every hit checked against ``table``, so a hash collision can only add a
    row twice, never give a wrong one."""
    sorted_hashes, order = hashed
    if sorted_hashes.numel() == 0:
        return torch.zeros_like(keys[:, 0], dtype=torch.int64), torch.ones_like(
            keys[:, 0], dtype=torch.bool
        )
    h = _row_hash(keys.double())
    pos = torch.searchsorted(sorted_hashes, h).clamp_(max=sorted_hashes.numel() - 1)
    ids = order[pos]
    hit = (sorted_hashes[pos] == h) & (table[ids] == keys).all(1)
    return ids, ~hit


def _take(table: Any, idx: Any) -> Any:
    """The rows ``idx`` of ``table`` (a numpy array or a tensor, as the step's arrays)."""
    if isinstance(table, np.ndarray):
        return table.take(idx, axis=0)
    return table.index_select(0, idx)


def _host(x: Any) -> np.ndarray:
    """``x`` as a numpy array (no copy where it is one or a CPU tensor)."""
    return x if isinstance(x, np.ndarray) else x.cpu().numpy()


def _flatnonzero(mask: Any) -> Any:
    """The indices where ``mask`` is true, in the mask's kind of array."""
    return mask.nonzero()[0] if isinstance(mask, np.ndarray) else mask.nonzero()[:, 0]


def default_episode_steps(spec: TaskSpec, trials: int = TRIALS_PER_EPISODE) -> int:
    """``trials`` trials of mean length (the mean over 10,000 trials drawn with seed 0): the
    step limit of an episode, as snrl gives a NeuroGym task."""
    gen = torch.Generator().manual_seed(0)
    _, _, length = period_bounds(spec, draw_trials(spec, gen, _PROBE_TRIALS))
    return max(1, int(np.ceil(trials * float(length.double().mean()))))


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
        n_actions: Actions of the action space (``None``: the task's own). An action the task
            lacks is a response that is never right: it breaks fixation in a fixation period
            and is a wrong answer in the decision period (the rule's tables for a non-fixation
            action that differs from every ground truth). The multitask env
            (:mod:`snrl.tasks.multitask`) gives every task the largest action count.
        bank_floats: Floats the bank of distinct trials may hold before it is rebuilt from
            the trials in use (``None``: :data:`BANK_FLOATS`; the multitask env gives each of ``K``
            tasks a ``K``-th).
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
        n_actions: int | None = None,
        bank_floats: int | None = None,
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
        # NeuroGym's reset step takes the task's last action (see the module docstring)
        self._reset_action = spec.n_act - 1
        if n_actions is not None:
            if isinstance(n_actions, bool) or not isinstance(n_actions, int):
                raise UserError(f"n_actions must be an integer, got {n_actions!r}")
            if n_actions < spec.n_act:
                raise UserError(
                    f"n_actions={n_actions} is fewer than the {spec.n_act} actions of {spec.name}"
                )
            spec = dataclasses.replace(spec, n_act=n_actions)
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
        self._bank_floats = BANK_FLOATS if bank_floats is None else int(bank_floats)
        self._gen = torch.Generator(device=self.device)
        self._names = spec.period_names
        self._reported = list(spec.reported)
        self._noisy = bool(spec.noise)
        c, a = spec.n_obs, spec.n_act
        self._c = c
        #: a bank row: obs (C), noise std (C), zeros to a multiple of 4, then (reward, ends,
        #: performance, gt) per action: seen as blocks of 4 floats, a step's outcome for one
        #: action is one block, fetched by one index_select
        self._head = -(-2 * c // 4) * 4
        self._width = self._head + 4 * a
        self._quads = self._width // 4
        n = num_envs
        dev = self.device
        #: the per-step arrays are numpy on the CPU (a numpy op on 1,024 numbers costs a
        #: third of a torch op's dispatch; the tensors behind them are shared, not copied)
        #: and tensors on other devices; _x turns a tensor into the step's kind of array
        self._np = dev.type == "cpu" and _NUMPY_ON_CPU
        self._xp: Any = np if self._np else torch
        self._keys: list[str] | None = None
        self._bank_keys = torch.zeros(0, 0, dtype=torch.float64, device=dev)
        self._bank_meta = torch.zeros(
            0, 2 * len(self._names) + len(self._reported) + 1, dtype=torch.float64, device=dev
        )
        self._pool = self._x(torch.zeros(0, dtype=torch.int64, device=dev))  # bank ids ahead
        self._cursor = 0
        self._id = self._x(torch.zeros(n, dtype=torch.int64, device=dev))  # each env's trial
        self._t = self._x(torch.zeros(n, dtype=torch.int64, device=dev))  # its step in it
        self._cell = self._x(torch.zeros(n, dtype=torch.int64, device=dev))  # trial * T + step
        self._row = self._x(torch.zeros(n, dtype=torch.int64, device=dev))  # its distinct row
        self._blk = self._x(torch.zeros(n, dtype=torch.int64, device=dev))  # action 0's block
        self._perf = self._x(torch.zeros(n, device=dev))  # its trial's performance so far
        self._ep_return = self._x(torch.zeros(n, dtype=torch.float64, device=dev))
        self._eps_t = torch.zeros(n, self._c, device=dev)  # the step's observation noise
        self._eps = self._x(self._eps_t)
        self._ep_steps = 0  # every env's episode starts at reset and ends at the step limit
        self._ep_start = 0.0
        self._dt_s = np.full(n, spec.dt / 1000.0)
        self._fixation = np.full(n, spec.fixation_action, dtype=np.int64)
        self._started = False
        self._set_bank(torch.zeros(0, self._width, device=dev),
                       torch.zeros(0, 1, dtype=torch.int64, device=dev), self._bank_keys,
                       self._bank_meta)  # fmt: skip
        self._prime()

    def _x(self, tensor: Tensor) -> Any:
        """``tensor`` as the step's kind of array (a numpy view of it on the CPU)."""
        return tensor.numpy() if self._np else tensor

    # ---- the bank of distinct trials and the pool ---------------------------------------
    def _set_bank(self, rows: Tensor, index: Tensor, keys: Tensor, meta: Tensor) -> None:
        """The bank: its distinct rows ``(D, W)``, each trial's row at each step ``(U, T)``
        (int64), the trials' variables ``(U, K)`` and what the infos report of them."""
        self._rows, self._index, self._bank_keys, self._bank_meta = rows, index, keys, meta
        self._trial_hashes = _hashed(keys)
        self._row_hashes = _hashed(rows.view(torch.int32))
        self._quad = rows.view(-1, 4)
        # the rewards again as float64, rounded to 1e-6 once here (the table is float32:
        # -0.1 is stored as -0.100000001; 1e-6 is finer than float32 resolves above 8), so
        # NeuroGym's reward table comes back exact; indexed by the same block numbers
        reward64 = self._quad[:, 0].double().mul_(1e6).round_().div_(1e6)
        self._quad_x, self._reward_x = self._x(self._quad), self._x(reward64)
        # a step's observation and its noise std, each a contiguous (U T, C) copy (numpy's
        # take copies a strided table whole before gathering, and its arithmetic on rows of
        # C strided values loops once per row)
        c = self._c
        self._obs_x = self._x(rows[:, :c].contiguous())
        self._std_x = self._x(rows[:, c : 2 * c].contiguous()) if self._noisy else None
        # each cell's row, and its action 0's block (two gathers a step, no arithmetic)
        self._index_x = self._x(index.view(-1))
        self._block_x = self._x(index.view(-1) * self._quads + self._head // 4)
        # the envs' cells move with the bank's width; their rows are read again (_point) by
        # whoever changed the bank (_load's callers): a trial just ended may point past it
        self._cell = self._id * index.shape[1] + self._t
        # what the infos report of each bank trial, as numpy (read on the host every step)
        p = len(self._names)
        host = meta.cpu().numpy()
        self._bounds_np = np.ascontiguousarray(
            (host[:, : 2 * p] / 1000.0).reshape(-1, 2, p).transpose(0, 2, 1)
        )
        # the reported conditions: an int64 and a float64 table (variable, trial), each
        # gathered once per trial start; (name, table, row) in the spec's order
        kinds = list(self.spec.reported.values())
        self._cond_tabs = tuple(
            np.ascontiguousarray(
                host[:, [2 * p + j for j, k in enumerate(kinds) if (k is int) == is_int]].T,
                dtype=np.int64 if is_int else np.float64,
            )
            for is_int in (True, False)
        )
        ints = [name for name, k in self.spec.reported.items() if k is int]
        floats = [name for name, k in self.spec.reported.items() if k is not int]
        self._cond_where = [
            (name, 0, ints.index(name)) if k is int else (name, 1, floats.index(name))
            for name, k in self.spec.reported.items()
        ]

    def _rows_of(self, values: dict[str, Tensor], steps: int) -> tuple[Tensor, Tensor]:
        """Table rows (m, T, W) and meta (m, M) of trials with these variables."""
        tr = trial_tables(self.spec, values, steps=steps)
        m, width = tr.obs.shape[:2]
        per_action = torch.cat(
            [
                tr.outcome,
                tr.gt[..., None, None].to(torch.float32).expand(m, width, self.spec.n_act, 1),
            ],
            dim=-1,
        )
        pad = tr.obs.new_zeros(m, width, self._head - 2 * self._c)
        rows = torch.cat([tr.obs, tr.noise_std, pad, per_action.reshape(m, width, -1)], dim=-1)
        cond = [tr.values[k] for k in self._reported]
        meta = torch.stack([*tr.start.T, *tr.end.T, *cond, tr.length.to(torch.float64)], dim=1)
        return rows, meta

    def _refill(self, need: int) -> None:
        """Draw the next pool (its trials' bank ids)."""
        m = max(self.pool_size, need)
        self._pool = self._x(self._bank_ids(draw_trials(self.spec, self._gen, m)))
        self._cursor = 0

    def _prime(self) -> None:
        """Put the distinct trials of batches of 10,000 draws (a generator of its own, seed
        0) in the bank before the first step, so that steps rarely build tables (a task with
        random durations would otherwise keep finding rare trials for thousands of steps, a
        refill that builds a few costing as much as ten steps): one batch more while the last
        one found new trials but fewer than a quarter of it (more: continuous variables,
        whose trials are all new), :data:`_PRIME_BATCHES` at most, each added a pool at a time
        until half the bank is used. The bank holds no randomness of the env: seeded runs are
        the same with or without it."""
        gen = torch.Generator(device=self.device).manual_seed(0)
        for _ in range(_PRIME_BATCHES):
            known = self._bank_keys.shape[0]
            values = draw_trials(self.spec, gen, _PROBE_TRIALS)
            for lo in range(0, _PROBE_TRIALS, self.pool_size):
                self._bank_ids({k: v[lo : lo + self.pool_size] for k, v in values.items()})
                if 2 * (self._rows.numel() + self._index.numel()) > self._bank_floats:
                    return
            if not 0 < self._bank_keys.shape[0] - known < _PROBE_TRIALS // 4:
                break

    def _bank_ids(self, values: dict[str, Tensor]) -> Tensor:
        """The bank ids of trials with these variables; new distinct trials are built and
        added to the bank."""
        m = int(next(iter(values.values())).shape[0])
        if self._keys is None:
            self._keys = sorted(values)
            self._bank_keys = torch.zeros(
                0, len(self._keys), dtype=torch.float64, device=self.device
            )
        keys = torch.stack([values[k] for k in self._keys], dim=1)
        steps = self._index.shape[1]
        if self._rows.numel() + self._index.numel() + m * steps * self._width > self._bank_floats:
            self._compact()
        ids, missing = self._find(keys)
        new = missing.nonzero()[:, 0]
        if new.numel():  # trials not in the bank: their distinct rows are built and added
            u = self._bank_keys.shape[0]
            uniq, inverse = _unique_rows(keys[new])
            ids[new] = u + inverse
            fresh = {k: uniq[:, j] for j, k in enumerate(self._keys)}
            rows, meta = self._rows_of(fresh, steps)
            table, cells = self._add_rows(rows.reshape(-1, self._width))
            index = self._index
            if rows.shape[1] > steps:  # a longer trial than any before: widen (with row 0:
                # the cells past a trial's end are never read, its last step ends it)
                index = torch.cat([index, index.new_zeros(u, rows.shape[1] - steps)], dim=1)
            self._set_bank(
                table,
                torch.cat([index, cells.view(rows.shape[:2])]),
                torch.cat([self._bank_keys, uniq]),
                torch.cat([self._bank_meta, meta]),
            )
        return ids

    def _add_rows(self, rows: Tensor) -> tuple[Tensor, Tensor]:
        """The bank's distinct rows with those of ``rows`` ``(R, W)`` added, and the index of
        each of ``rows`` among them (the bank's rows keep theirs)."""
        distinct, inverse = _distinct_rows(rows)
        bits = self._rows.view(torch.int32)
        ids, missing = _lookup(bits, self._row_hashes, distinct.view(torch.int32))
        new = missing.nonzero()[:, 0]
        ids[new] = self._rows.shape[0] + torch.arange(new.numel(), device=ids.device)
        return torch.cat([self._rows, distinct[new]]), ids[inverse]

    def _find(self, keys: Tensor) -> tuple[Tensor, Tensor]:
        """The bank ids of the trials with these keys, and where a trial is not in the bank
        (its id there is meaningless; :func:`_lookup`)."""
        return _lookup(self._bank_keys, self._trial_hashes, keys)

    def _compact(self) -> None:
        """Keep only the bank's trials that envs are in, and their rows (a task with
        continuous variables)."""
        keep, ids = torch.unique(torch.as_tensor(self._id), return_inverse=True)
        used, index = torch.unique(self._index[keep], return_inverse=True)
        self._id = self._x(ids)
        self._set_bank(self._rows[used], index, self._bank_keys[keep], self._bank_meta[keep])
        self._pool = self._pool[:0]

    def _point(self) -> None:
        """Each env's row and action 0's block, read from its cell (after a step moved it or
        :meth:`_load` set it; nothing to read in the empty bank before the first trials)."""
        if self._index_x.shape[0]:
            self._row = _take(self._index_x, self._cell)
            self._blk = _take(self._block_x, self._cell)

    def _load(self, idx: Any) -> None:
        """The next trials of the pool into the envs ``idx`` (their step goes to 0; the
        caller reads their rows, :meth:`_point`)."""
        k = int(idx.shape[0])
        if k == 0:
            return
        if self._cursor + k > self._pool.shape[0]:
            self._refill(k)
        new = self._pool[self._cursor : self._cursor + k]
        self._cursor += k
        self._id[idx] = new
        self._cell[idx] = new * self._index.shape[1]
        self._t[idx] = 0
        self._perf[idx] = 0.0

    def _start_episodes(self, idx: Any) -> None:
        """New episodes in the envs ``idx``: a new trial, and NeuroGym's reset step."""
        self._load(idx)
        self._point()
        quad = _take(self._quad_x, self._blk[idx] + self._reset_action)
        ends = quad[:, 1] > 0.5
        self._t[idx] = 1
        self._cell[idx] += 1
        if bool(ends.any()):  # the reset step ended the trial (abort): the next one, at 0
            self._load(idx[ends])
        self._point()
        self._ep_return[idx] = 0.0
        self._ep_steps = 0
        self._ep_start = time.perf_counter()

    def _obs(self) -> Any:
        obs = _take(self._obs_x, self._row)
        if not self._noisy:
            return obs
        torch.randn(self._eps_t.shape, generator=self._gen, out=self._eps_t)
        eps = self._eps
        eps *= _take(self._std_x, self._row)
        obs += eps
        return obs

    def _all(self) -> Any:
        """Every env's index, as the step's arrays."""
        return self._x(torch.arange(self.num_envs, device=self.device))

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
        with self._mode():
            obs, infos = self._reset(seed)
        return self._out(obs), infos

    def _mode(self) -> Any:
        """Inference mode around a call with torch steps (no autograd bookkeeping on its small
        ops); nothing on the CPU, whose step is numpy (entering the mode is a few % of it)."""
        return contextlib.nullcontext() if self._np else torch.inference_mode()

    def _out(self, x: Any) -> Any:
        """A returned array: numpy, or with ``as_tensors`` a tensor (a fresh one: tensors made
        in inference mode cannot enter autograd)."""
        if not self.as_tensors:
            return _host(x)
        return torch.from_numpy(x) if isinstance(x, np.ndarray) else x.clone()

    def _reset(self, seed: int | list[int] | None) -> tuple[Any, dict[str, Any]]:
        if isinstance(seed, (list, tuple)):
            seed = seed[0] if seed else None
        if seed is None and not self._started:
            seed = self._seed
        if seed is not None:
            self._gen.manual_seed(int(seed))
            self.action_space.seed(int(seed))
            self._pool = self._pool[:0]  # the bank stays: it holds no randomness
        elif not self._started:
            self._gen.seed()
        self._started = True
        self._start_episodes(self._all())
        infos = self._trial_start({}, np.ones(self.num_envs, dtype=bool))
        return self._obs(), infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """One step of every env (see the module docstring)."""
        with self._mode():
            obs, reward, done, infos = self._step(self._actions(actions))
        if self.as_tensors:
            truncated = torch.as_tensor(done, device=self.device)
            return self._out(obs), self._out(reward), torch.zeros_like(truncated), truncated, infos
        return _host(obs), _host(reward), np.zeros(self.num_envs, dtype=bool), done, infos

    def _actions(self, actions: Any) -> Any:
        """The actions as the step's int64 array, checked."""
        if not self._started:
            raise UserError("step() before reset() (call envs.reset() first)")
        if isinstance(actions, Tensor) and not self._np:
            a = actions.to(self.device, torch.int64).reshape(-1)
            lo, hi = (int(x) for x in torch.aminmax(a)) if a.numel() else (0, 0)
        else:
            if isinstance(actions, Tensor):
                actions = actions.detach().to("cpu", torch.int64).numpy()
            arr = np.asarray(actions).reshape(-1)
            lo, hi = (int(arr.min()), int(arr.max())) if arr.size else (0, 0)
            a = arr.astype(np.int64, copy=False)
            if not self._np:
                a = torch.from_numpy(a).to(self.device)
        if a.shape[0] != self.num_envs:
            raise UserError(f"step() got {a.shape[0]} actions for {self.num_envs} envs")
        if lo < 0 or hi >= self.spec.n_act:
            raise UserError(f"actions must be in [0, {self.spec.n_act}), got {a.tolist()[:8]}")
        return a

    def _step(self, a: Any) -> tuple[Any, Any, np.ndarray, dict[str, Any]]:
        block = self._blk + a
        picked = _take(self._quad_x, block)  # (N, 4): reward, ends, performance, gt
        reward = _take(self._reward_x, block)
        ends = picked[:, 1] > 0.5
        perf = self._xp.maximum(self._perf, picked[:, 2], out=self._perf)
        self._ep_return += reward
        self._ep_steps += 1
        self._t += 1
        self._cell += 1
        new_np = _host(ends)
        any_new = bool(new_np.any())
        infos: dict[str, Any] = {
            "gt": _host(picked[:, 3]).astype(np.int64),
            "new_trial": new_np,
        }
        if any_new:
            infos["performance"] = _host(perf).copy()
            infos["_performance"] = new_np
            infos["trial_periods"] = self._periods()
            infos["_trial_periods"] = new_np
            self._load(_flatnonzero(ends))
        self._point()
        obs = self._obs()
        if self._ep_steps >= self.max_episode_steps:
            infos = self._end_episodes(infos, obs)
            obs = self._obs()
            done = np.ones(self.num_envs, dtype=bool)
            infos = self._trial_start(infos, done)
        else:
            done = np.zeros(self.num_envs, dtype=bool)
            if any_new:
                infos = self._trial_start(infos, new_np)
        return obs, reward, done, infos

    def _end_episodes(self, infos: dict[str, Any], obs: Any) -> dict[str, Any]:
        """Every env's episode ends at this step (they all started at the same reset)."""
        n = self.num_envs
        done = np.ones(n, dtype=bool)
        final_obs = np.empty(n, dtype=object)
        final_obs[:] = list(_host(obs).copy())
        episode = {
            "r": _host(self._ep_return).copy(),
            "l": np.full(n, self._ep_steps, dtype=np.int64),
            "t": np.full(n, round(time.perf_counter() - self._ep_start, 6)),
        }
        final_info = {**infos, "episode": episode, "_episode": done}
        self._start_episodes(self._all())
        return {
            **infos,
            "final_obs": final_obs,
            "_final_obs": done,
            "final_info": final_info,
            "_final_info": done,
        }

    def _periods(self) -> dict[str, np.ndarray]:
        """Period bounds (s) of the envs' current trials: {period: (N, 2)}."""
        bounds = self._bounds_np.take(_host(self._id), axis=0)
        return {name: bounds[:, i] for i, name in enumerate(self._names)}

    def _trial_start(self, infos: dict[str, Any], mask: np.ndarray) -> dict[str, Any]:
        ids = _host(self._id)
        taken = [tab.take(ids, axis=1) for tab in self._cond_tabs]
        infos["trial_start"] = {
            "conditions": {name: taken[g][i] for name, g, i in self._cond_where},
            "t0": _host(self._t) * self._dt_s,
            "dt": self._dt_s,
            "fixation": self._fixation,
        }
        infos["_trial_start"] = mask
        return infos

    # ---- what snrl reads of a trial task ------------------------------------------------
    @property
    def dt(self) -> float:
        """The task step, ms (NeuroGym's unit)."""
        return float(self.spec.dt)

    @property
    def fixation_channel(self) -> int | None:
        """The observation channel of the fixation cue (NeuroGym's ``fixation``), or None."""
        channel = self.spec.obs_names.get("fixation")
        return channel if isinstance(channel, int) else None

    def close_extras(self, **kwargs: Any) -> None:  # noqa: D102
        self._pool = self._pool[:0]


class VectorSlotEnv(gym.Env):
    """A single env read off a batched one (``self._vec``): its single spaces, its clock and
    NeuroGym's ``dt`` metadata. :class:`TaskEnv` and the multitask env build on it."""

    metadata = {"render_modes": []}
    #: the env declares its step in ``dt`` (ms), as a NeuroGym task (snrl.envs.timing)
    declares_task_time = True

    def _adopt(self, vec: Any) -> None:
        """Take ``vec`` as the batched env behind this one, with its spaces and clock."""
        self._vec = vec
        self.observation_space = vec.single_observation_space
        self.action_space = vec.single_action_space
        self.metadata = {**self.metadata, "dt": vec.metadata["dt"]}

    @property
    def dt(self) -> float:
        """The task's step, ms."""
        return self._vec.dt


class TaskEnv(VectorSlotEnv):
    """One env of a batched task, where snrl needs a single env (reading the spaces and the
    clock, recording a rollout) of a task that has no NeuroGym class (docs/tasks.md): env 0
    of a :class:`TaskVectorEnv` of one env, with its observation, actions and infos.

    Args:
        spec: The task.
        max_episode_steps: As :class:`TaskVectorEnv`.
    """

    def __init__(self, spec: TaskSpec, max_episode_steps: int | None = None) -> None:
        self._adopt(TaskVectorEnv(spec, 1, seed=None, max_episode_steps=max_episode_steps))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """A new episode (``seed``: the task's seed, as the vector env's)."""
        super().reset(seed=seed)
        obs, infos = self._vec.reset(seed=seed)
        return obs[0], unbatch_info(infos, 0)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One step; at the episode's step limit, truncated with the episode's last
        observation and infos."""
        obs, reward, _, truncated, infos = self._vec.step(np.asarray([int(action)]))
        if truncated[0]:
            return (
                infos["final_obs"][0],
                float(reward[0]),
                False,
                True,
                unbatch_info(infos["final_info"], 0),
            )
        return obs[0], float(reward[0]), False, False, unbatch_info(infos, 0)

    def close(self) -> None:  # noqa: D102
        self._vec.close()
