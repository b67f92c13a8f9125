"""Experience replay with n-step returns, uniform and prioritized.

Transitions live in preallocated numpy arrays (a ring of ``capacity`` rows); nothing is
stored per transition as a Python object. Steps of a vector env are added as one batch
``(n_envs, ...)`` and the n-step return is formed inside the buffer, per env:

    R_t = sum_{k=0}^{m-1} gamma^k r_{t+k},     discount_t = gamma^m,     m = min(n, steps left)

A stored row is ``(obs_t, a_t, R_t, obs_{t+m}, gamma^m, done)`` and the learner's target is
``R_t + discount_t * (1 - done_t) * Q(obs_{t+m})``. When an episode ends at step ``t + m - 1``
every pending transition of that env is written out with its shortened ``m`` (none is lost):

- terminated: ``done = 1`` (no bootstrap);
- truncated (time limit): ``done = 0`` and ``obs_{t+m}`` is the true final observation, so the
  target bootstraps from it.

Prioritized replay (Schaul et al. 2016, proportional variant): transition ``i`` is drawn
with probability ``P(i) = p_i^alpha / sum_k p_k^alpha`` where ``p_i = |delta_i| + eps``, by
stratified sampling over a :class:`~snrl.buffers.sumtree.SumTree`; importance weights
``w_i = (N P(i))^-beta / max_j (N P(j))^-beta`` (the max weight belongs to the smallest
probability, tracked by the tree's min).
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from snrl.buffers.sumtree import SumTree
from snrl.errors import UserError

Batch = dict[str, np.ndarray]


def make_rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    """A numpy Generator from a seed, or the Generator itself."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def save_npz_atomic(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` as an uncompressed .npz, atomically (temp file + rename)."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        raise UserError(f"directory {str(directory)!r} does not exist (create it first)")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_npz(path: str | os.PathLike, what: str) -> dict[str, np.ndarray]:
    """Read every array of an .npz without pickle; a missing or corrupt file is a UserError."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{what} file {str(path)!r} not found (check the path)")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
        raise UserError(
            f"{what} file {str(path)!r} is corrupt or not an .npz ({e}) "
            "(delete it and save the buffer again)"
        ) from e


def json_array(obj: Any) -> np.ndarray:
    """A JSON document as a 0-d unicode array (storable without pickle)."""
    return np.array(json.dumps(obj, default=lambda o: np.asarray(o).tolist()))


def read_json_array(arrays: dict[str, np.ndarray], key: str, path: str | os.PathLike) -> Any:
    """Parse a JSON document stored by :func:`json_array`; errors become UserError."""
    try:
        return json.loads(str(arrays[key][()]))
    except (KeyError, ValueError, TypeError) as e:
        raise UserError(
            f"buffer file {str(path)!r} lacks a valid {key!r} entry ({e}) "
            "(it was not written by save(); save the buffer again)"
        ) from e


def rng_from_state(state: Any, path: str | os.PathLike) -> np.random.Generator:
    """A Generator restored from ``bit_generator.state`` saved as JSON."""
    try:
        bit_gen = getattr(np.random, state["bit_generator"])()
        bit_gen.state = state
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise UserError(
            f"buffer file {str(path)!r} has a bad sampler state ({e}) (pass seed= to load)"
        ) from e
    return np.random.Generator(bit_gen)


def require(arrays: dict[str, np.ndarray], key: str, path: str | os.PathLike) -> np.ndarray:
    """``arrays[key]``, or a UserError saying the file is incomplete."""
    if key not in arrays:
        raise UserError(
            f"buffer file {str(path)!r} has no {key!r} array "
            "(it is incomplete or not a buffer file; save the buffer again)"
        )
    return arrays[key]


def env_rows(name: str, x: Any, shape: tuple[int, ...], dtype: Any, n_envs: int) -> np.ndarray:
    """``x`` (array or tensor, possibly on a GPU) as a numpy array of ``shape`` and ``dtype``;
    a wrong shape is a :class:`UserError` (one row per env is expected)."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.shape != shape:
        raise UserError(
            f"{name} has shape {arr.shape}, expected {shape} "
            f"(pass one row per env, n_envs={n_envs})"
        )
    return arr.astype(dtype, copy=False)


class ReplayBuffer:
    """Uniform replay of n-step transitions from one or more envs.

    Args:
        capacity: number of stored transitions (oldest are overwritten).
        obs_shape: shape of one observation.
        action_shape: shape of one action (``()`` for a discrete action).
        action_dtype: numpy dtype of the actions.
        obs_dtype: numpy dtype of the stored observations.
        n_envs: number of envs whose steps come together in :meth:`add`.
        n_step: n of the n-step return (1 = one-step TD).
        gamma: discount factor per env step.
        seed: seed or ``np.random.Generator`` for sampling.
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        *,
        action_shape: tuple[int, ...] = (),
        action_dtype: Any = np.int64,
        obs_dtype: Any = np.float32,
        n_envs: int = 1,
        n_step: int = 1,
        gamma: float = 0.99,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        if int(capacity) < 1:
            raise UserError(f"capacity must be >= 1, got {capacity} (pass a positive capacity)")
        if int(n_envs) < 1:
            raise UserError(f"n_envs must be >= 1, got {n_envs} (pass the number of envs)")
        if int(n_step) < 1:
            raise UserError(f"n_step must be >= 1, got {n_step} (use 1 for one-step TD)")
        if not 0.0 <= float(gamma) <= 1.0:
            raise UserError(f"gamma must be in [0, 1], got {gamma} (e.g. 0.99)")
        self.capacity = int(capacity)
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.action_shape = tuple(int(d) for d in action_shape)
        self.action_dtype = np.dtype(action_dtype)
        self.obs_dtype = np.dtype(obs_dtype)
        self.n_envs = int(n_envs)
        self.n_step = int(n_step)
        self.gamma = float(gamma)
        self.rng = make_rng(seed)

        c = self.capacity
        self.obs = np.zeros((c, *self.obs_shape), dtype=self.obs_dtype)
        self.next_obs = np.zeros((c, *self.obs_shape), dtype=self.obs_dtype)
        self.actions = np.zeros((c, *self.action_shape), dtype=self.action_dtype)
        self.rewards = np.zeros(c, dtype=np.float32)
        self.discounts = np.zeros(c, dtype=np.float32)
        self.dones = np.zeros(c, dtype=np.float32)
        self.pos = 0
        self.size = 0

        # Pending (not yet n steps old) transitions per env, oldest first.
        e, n = self.n_envs, self.n_step
        self._p_obs = np.zeros((e, n, *self.obs_shape), dtype=self.obs_dtype)
        self._p_act = np.zeros((e, n, *self.action_shape), dtype=self.action_dtype)
        self._p_rew = np.zeros((e, n), dtype=np.float64)
        self._p_len = np.zeros(e, dtype=np.int64)

    # ------------------------------------------------------------------ adding
    def __len__(self) -> int:
        return self.size

    @property
    def n_pending(self) -> int:
        """Steps added but not yet written as transitions (waiting for n steps or an end)."""
        return int(self._p_len.sum())

    def _check(self, name: str, x: Any, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return env_rows(name, x, shape, dtype, self.n_envs)

    def add(
        self,
        obs: Any,
        action: Any,
        reward: Any,
        next_obs: Any,
        terminated: Any,
        truncated: Any,
    ) -> np.ndarray:
        """Add one step of every env.

        ``next_obs`` must be the true next observation of each env: at an episode end, the
        final observation (from ``info["final_obs"]`` / before any auto-reset), not the first
        observation of the next episode. Do not add the auto-reset step of a next-step
        auto-resetting vector env.

        Args:
            obs: (n_envs, *obs_shape) observations the actions were chosen on.
            action: (n_envs, *action_shape) actions taken.
            reward: (n_envs,) rewards received.
            next_obs: (n_envs, *obs_shape) observations after the step.
            terminated: (n_envs,) bool, the episode reached a terminal state.
            truncated: (n_envs,) bool, the episode was cut (time limit); bootstraps.

        Returns:
            (K,) int64 buffer indices of the transitions written by this call (K may be 0).
        """
        e = self.n_envs
        obs = self._check("obs", obs, (e, *self.obs_shape), self.obs_dtype)
        action = self._check("action", action, (e, *self.action_shape), self.action_dtype)
        reward = self._check("reward", reward, (e,), np.float64)
        next_obs = self._check("next_obs", next_obs, (e, *self.obs_shape), self.obs_dtype)
        term = self._check("terminated", terminated, (e,), np.bool_)
        trunc = self._check("truncated", truncated, (e,), np.bool_)

        if self.n_step == 1:  # fast path: every step is a finished transition
            return self._write(
                obs,
                action,
                reward,
                next_obs,
                np.full(e, self.gamma),
                term.astype(np.float32),
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
            return np.zeros(0, dtype=np.int64)
        # One write per call (one priority-tree update for all envs).
        return self._write(*(np.concatenate(parts) for parts in zip(*out)))

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
        """Every pending transition of env i, cut at the episode end; clears pending."""
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

    def _write(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        returns: np.ndarray,
        next_obs: np.ndarray,
        discounts: np.ndarray,
        dones: np.ndarray,
    ) -> np.ndarray:
        k = len(obs)
        idx = (self.pos + np.arange(k)) % self.capacity
        self.obs[idx] = obs
        self.actions[idx] = actions
        self.rewards[idx] = returns
        self.next_obs[idx] = next_obs
        self.discounts[idx] = discounts
        self.dones[idx] = dones
        self.pos = int((self.pos + k) % self.capacity)
        self.size = min(self.size + k, self.capacity)
        self._on_write(idx)
        return idx.astype(np.int64)

    def _on_write(self, indices: np.ndarray) -> None:
        """Hook for subclasses: rows ``indices`` were (over)written."""

    # ---------------------------------------------------------------- sampling
    def _check_batch(self, batch_size: int) -> None:
        if int(batch_size) < 1:
            raise UserError(f"batch_size must be >= 1, got {batch_size} (pass a positive size)")
        if batch_size > self.size:
            raise UserError(
                f"cannot sample {batch_size} transitions: only {self.size} stored "
                "(raise learning_starts so the buffer fills before learning, or lower batch_size)"
            )

    def _gather(self, idx: np.ndarray, weights: np.ndarray) -> Batch:
        return {
            "obs": self.obs[idx],
            "actions": self.actions[idx],
            "rewards": self.rewards[idx],
            "next_obs": self.next_obs[idx],
            "discounts": self.discounts[idx],
            "dones": self.dones[idx],
            "indices": idx.astype(np.int64),
            "weights": weights.astype(np.float32),
        }

    def sample(self, batch_size: int) -> Batch:
        """Draw ``batch_size`` transitions uniformly (with replacement).

        Returns:
            ``obs`` (B, *obs_shape), ``actions`` (B, *action_shape), ``rewards`` (B,) n-step
            returns, ``next_obs`` (B, *obs_shape), ``discounts`` (B,) gamma^m, ``dones`` (B,)
            1.0 where the episode terminated, ``indices`` (B,) int64, ``weights`` (B,) ones.
        """
        self._check_batch(batch_size)
        idx = self.rng.integers(0, self.size, size=int(batch_size))
        return self._gather(idx, np.ones(int(batch_size)))

    def iter_batches(self, batch_size: int, n_batches: int) -> Iterator[Batch]:
        """Yield ``n_batches`` batches, each drawn by :meth:`sample` when it is requested."""
        for _ in range(int(n_batches)):
            yield self.sample(batch_size)

    # ----------------------------------------------------------------- saving
    def _config(self) -> dict[str, Any]:
        return {
            "class": type(self).__name__,
            "capacity": self.capacity,
            "obs_shape": list(self.obs_shape),
            "action_shape": list(self.action_shape),
            "action_dtype": self.action_dtype.str,
            "obs_dtype": self.obs_dtype.str,
            "n_envs": self.n_envs,
            "n_step": self.n_step,
            "gamma": self.gamma,
        }

    def _arrays(self) -> dict[str, np.ndarray]:
        s = self.size
        return {
            "obs": self.obs[:s],
            "next_obs": self.next_obs[:s],
            "actions": self.actions[:s],
            "rewards": self.rewards[:s],
            "discounts": self.discounts[:s],
            "dones": self.dones[:s],
            "pending_obs": self._p_obs,
            "pending_actions": self._p_act,
            "pending_rewards": self._p_rew,
            "pending_len": self._p_len,
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the buffer (contents, pending steps, sampler state) to an .npz, atomically."""
        arrays = self._arrays()
        arrays["config"] = json_array(self._config())
        arrays["counters"] = np.array([self.pos, self.size], dtype=np.int64)
        arrays["rng_state"] = json_array(self.rng.bit_generator.state)
        save_npz_atomic(path, arrays)

    @classmethod
    def _kwargs_from_config(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        """Constructor keywords (besides capacity and obs_shape) from a saved config."""
        return dict(
            action_shape=tuple(cfg["action_shape"]),
            action_dtype=np.dtype(cfg["action_dtype"]),
            obs_dtype=np.dtype(cfg["obs_dtype"]),
            n_envs=cfg["n_envs"],
            n_step=cfg["n_step"],
            gamma=cfg["gamma"],
        )

    @classmethod
    def _from_config(cls, cfg: dict[str, Any]) -> ReplayBuffer:
        return cls(cfg["capacity"], tuple(cfg["obs_shape"]), **cls._kwargs_from_config(cfg))

    def _restore(self, arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
        pos, size = (int(v) for v in require(arrays, "counters", path))
        if not (0 <= size <= self.capacity and 0 <= pos < self.capacity):
            raise UserError(f"buffer file {str(path)!r} has bad counters (save it again)")
        self.pos, self.size = pos, size
        for key, target in (
            ("obs", self.obs),
            ("next_obs", self.next_obs),
            ("actions", self.actions),
            ("rewards", self.rewards),
            ("discounts", self.discounts),
            ("dones", self.dones),
        ):
            _copy_into(target[:size], require(arrays, key, path), key, path)
        _copy_into(self._p_obs, require(arrays, "pending_obs", path), "pending_obs", path)
        _copy_into(self._p_act, require(arrays, "pending_actions", path), "pending_actions", path)
        _copy_into(self._p_rew, require(arrays, "pending_rewards", path), "pending_rewards", path)
        _copy_into(self._p_len, require(arrays, "pending_len", path), "pending_len", path)

    @classmethod
    def load(cls, path: str | os.PathLike, *, seed: int | np.random.Generator | None = None):
        """Read a buffer written by :meth:`save`.

        Args:
            path: the .npz file.
            seed: if given, reseeds sampling; by default the saved sampler state is restored.

        Raises:
            UserError: the file is missing, corrupt, or holds another kind of buffer.
        """
        arrays = load_npz(path, "replay buffer")
        cfg = read_json_array(arrays, "config", path)
        if cfg.get("class") != cls.__name__:
            raise UserError(
                f"buffer file {str(path)!r} holds a {cfg.get('class')}, not a {cls.__name__} "
                f"(load it with {cfg.get('class')}.load)"
            )
        try:
            buf = cls._from_config(cfg)
        except (KeyError, TypeError) as e:
            raise UserError(f"buffer file {str(path)!r} has a bad config ({e}) (save again)") from e
        buf._restore(arrays, path)
        if seed is not None:
            buf.rng = make_rng(seed)
        else:
            buf.rng = rng_from_state(read_json_array(arrays, "rng_state", path), path)
        return buf


def _copy_into(target: np.ndarray, source: np.ndarray, key: str, path: str | os.PathLike) -> None:
    if source.shape != target.shape:
        raise UserError(
            f"buffer file {str(path)!r}: {key!r} has shape {source.shape}, expected "
            f"{target.shape} (the file is corrupt; save the buffer again)"
        )
    target[...] = source


class ProportionalPriorities:
    """Proportional prioritization (Schaul et al. 2016) over a :class:`SumTree`, shared by
    :class:`PrioritizedReplayBuffer` and the prioritized sequence buffer.

    The buffer keeps ``tree``, ``alpha``, ``beta0``, ``beta_steps``, ``eps``, ``max_priority``
    and ``n_sampled``; new items get ``max_priority``; sampling is stratified over the total
    priority mass; importance weights are normalized by the smallest probability (max 1).
    """

    tree: SumTree
    rng: np.random.Generator
    size: int

    def _init_priorities(
        self,
        capacity: int,
        *,
        alpha: float,
        beta0: float,
        beta_steps: int,
        eps: float,
        usual: str,
    ) -> None:
        """Validate and store the prioritization parameters (``usual`` names the customary
        alpha/beta0 values for the error messages)."""
        if float(alpha) < 0:
            raise UserError(f"alpha must be >= 0, got {alpha} ({usual})")
        if not 0.0 <= float(beta0) <= 1.0:
            raise UserError(f"beta0 must be in [0, 1], got {beta0} ({usual})")
        if int(beta_steps) < 1:
            raise UserError(f"beta_steps must be >= 1, got {beta_steps} (pass a positive count)")
        if not float(eps) > 0:
            raise UserError(f"eps must be > 0, got {eps} (1e-6 is usual)")
        self.alpha = float(alpha)
        self.beta0 = float(beta0)
        self.beta_steps = int(beta_steps)
        self.eps = float(eps)
        self.max_priority = 1.0
        self.n_sampled = 0
        self.tree = SumTree(int(capacity))

    def beta(self, step: int | None = None) -> float:
        """Importance-sampling exponent at ``step`` (default: the number of sample calls)."""
        t = self.n_sampled if step is None else int(step)
        return self.beta0 + (1.0 - self.beta0) * min(1.0, max(t, 0) / self.beta_steps)

    def _draw(self, batch_size: int, step: int | None) -> tuple[np.ndarray, np.ndarray]:
        """Stratified proportional draw: ``batch_size`` equal segments of the priority mass,
        one item uniformly within each. Returns the indices and IS weights
        ``(N P_i)^-beta / (N P_min)^-beta``."""
        b = int(batch_size)
        beta = self.beta(step)
        self.n_sampled += 1
        total = self.tree.total
        idx = self.tree.find((np.arange(b) + self.rng.random(b)) * (total / b))
        weights = ((self.tree[idx] / total) / (self.tree.min / total)) ** (-beta)
        return idx, weights

    def _set_priorities(self, idx: np.ndarray, pri: np.ndarray) -> None:
        """Store priorities ``pri`` (before ``alpha``) of items ``idx``."""
        if idx.size and (idx.min() < 0 or idx.max() >= self.size):
            raise UserError(
                f"indices out of range [0, {self.size}) (pass the indices returned by sample)"
            )
        self.tree.update(idx, pri**self.alpha)
        if pri.size:
            self.max_priority = max(self.max_priority, float(pri.max()))

    def _priority_arrays(self) -> dict[str, np.ndarray]:
        return {
            "priorities": self.tree.priorities[: self.size],
            "per_counters": np.array([self.max_priority, float(self.n_sampled)]),
        }

    def _restore_priorities(self, arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
        pri = require(arrays, "priorities", path)
        if pri.shape != (self.size,) or not np.all(np.isfinite(pri)) or np.any(pri < 0):
            raise UserError(f"buffer file {str(path)!r} has bad priorities (save it again)")
        self.tree.load_priorities(pri, self.size)
        counters = require(arrays, "per_counters", path)
        self.max_priority = float(counters[0])
        self.n_sampled = int(counters[1])


class PrioritizedReplayBuffer(ProportionalPriorities, ReplayBuffer):
    """Proportional prioritized replay of n-step transitions.

    New transitions get the largest priority seen so far (so each is replayed at least once
    soon). ``beta`` rises linearly from ``beta0`` to 1 over ``beta_steps`` calls of
    :meth:`sample`; pass ``step=`` to :meth:`sample` to anneal by your own counter instead
    (e.g. env steps since learning started), then ``beta_steps`` is in that unit.

    Args:
        capacity, obs_shape, action_shape, action_dtype, obs_dtype, n_envs, n_step, gamma,
            seed: as :class:`ReplayBuffer`.
        alpha: priority exponent (0 = uniform).
        beta0: importance-sampling exponent at the start.
        beta_steps: sample calls (or ``step`` units) over which beta reaches 1.
        eps: added to ``|td_error|`` so no priority is 0.
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        *,
        alpha: float = 0.6,
        beta0: float = 0.4,
        beta_steps: int = 100_000,
        eps: float = 1e-6,
        **kwargs: Any,
    ) -> None:
        self._init_priorities(
            capacity,
            alpha=alpha,
            beta0=beta0,
            beta_steps=beta_steps,
            eps=eps,
            usual="alpha 0.6 and beta0 0.4 are usual",
        )
        super().__init__(capacity, obs_shape, **kwargs)

    def _on_write(self, indices: np.ndarray) -> None:
        self.tree.update(indices, self.max_priority**self.alpha)

    def sample(self, batch_size: int, *, step: int | None = None) -> Batch:
        """Draw ``batch_size`` transitions in proportion to priority^alpha.

        The total priority mass is split into ``batch_size`` equal segments and one
        transition is drawn uniformly within each (stratified sampling).

        Args:
            batch_size: B.
            step: the annealing step for beta; by default the count of sample calls.

        Returns:
            As :meth:`ReplayBuffer.sample`, with ``weights`` (B,) the normalized
            importance-sampling weights (max 1).
        """
        self._check_batch(batch_size)
        return self._gather(*self._draw(batch_size, step))

    def update_priorities(self, indices: Any, td_errors: Any) -> None:
        """Set ``p_i = |td_error_i| + eps`` for sampled transitions.

        Args:
            indices: (B,) ``indices`` of a sampled batch.
            td_errors: (B,) TD errors (numpy or tensor).
        """
        if hasattr(td_errors, "detach"):
            td_errors = td_errors.detach().cpu().numpy()
        pri = np.abs(np.asarray(td_errors, dtype=np.float64)).reshape(-1) + self.eps
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if pri.shape != idx.shape:
            raise UserError(
                f"td_errors has {pri.size} values for {idx.size} indices "
                "(pass one TD error per sampled transition)"
            )
        self._set_priorities(idx, pri)

    def _config(self) -> dict[str, Any]:
        cfg = super()._config()
        cfg.update(alpha=self.alpha, beta0=self.beta0, beta_steps=self.beta_steps, eps=self.eps)
        return cfg

    @classmethod
    def _kwargs_from_config(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        kwargs = super()._kwargs_from_config(cfg)
        kwargs.update(
            alpha=cfg["alpha"], beta0=cfg["beta0"], beta_steps=cfg["beta_steps"], eps=cfg["eps"]
        )
        return kwargs

    def _arrays(self) -> dict[str, np.ndarray]:
        return {**super()._arrays(), **self._priority_arrays()}

    def _restore(self, arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
        super()._restore(arrays, path)
        self._restore_priorities(arrays, path)
