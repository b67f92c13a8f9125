"""Sequence replay for recurrent Q-networks, in the manner of R2D2 (Kapturowski et al. 2019).

Each stored item is a window of ``L = burn_in + seq_len`` consecutive steps of one env,
together with the recurrent state the actor had *before* the window's first step (the
"stored state"). The learner starts from that state, runs the first ``burn_in`` steps
without training on them (to refresh a possibly stale state), and trains on the last
``seq_len`` steps.

Windows never cross an episode boundary (as in R2D2). Every episode is laid out as

    [burn_in padding steps] + [episode steps] + [tail padding up to a multiple]

and windows are cut from it every ``stride`` steps (default ``seq_len``: the trained parts
tile the episode and each window's burn-in is the end of the previous window). So every
step of an episode is trained on at least once (exactly once with ``stride == seq_len``),
the first steps of an episode included. Per step the window carries:

- ``mask``: 1 on real steps, 0 on padding (train only where ``mask[burn_in:]`` is 1);
- ``starts``: True on the first step of an episode. Before feeding step ``t`` the learner
  re-initializes those rows: ``state = net.reset_state(state, starts[t])``; then the stored
  state of a window that begins with padding does not matter;
- ``dones`` (terminated) and ``truncated``: how the episode ended on that step; ``next_obs``
  holds the true next observation (the final one at an episode end), so a truncated last
  step can bootstrap.

A sampled batch also carries ``seq_obs`` (T + 1 steps): ``obs`` with the next observation
of each row's last valid step written right after it. A learner runs the online and the
target network once over ``seq_obs`` (from the stored state, resetting at ``seq_starts``):
position ``t`` gives ``Q(s_t, .)`` and position ``t + 1`` gives ``Q(s_{t+1}, .)`` for every
valid step ``t`` (windows never cross an episode, so ``s_{t+1}`` is always in the same
episode), which :func:`snrl.agents.dqn_math.sequence_nstep_targets` turns into n-step targets.

Recurrent states are any nested (named) tuple of ``(B, ...)`` tensors
(:mod:`snrl.functional.state`); each leaf is stored as one numpy array ``(capacity, ...)``.
"""

from __future__ import annotations

import collections
import os
from typing import Any

import numpy as np
import torch
from torch import Tensor

from snrl.buffers.replay import (
    ProportionalPriorities,
    env_rows,
    json_array,
    load_npz,
    make_rng,
    read_json_array,
    require,
    rng_from_state,
    save_npz_atomic,
)
from snrl.errors import UserError
from snrl.functional.state import State, map_state, state_leaves

_STEP_FIELDS = ("obs", "next_obs", "actions", "rewards", "dones", "truncated", "starts", "mask")


def _state_structure(state: State) -> Any:
    """A JSON description of a state's nesting (leaf positions, tuple and field names)."""
    counter = iter(range(1 << 30))

    def walk(s: State) -> Any:
        if isinstance(s, Tensor):
            return {"leaf": next(counter)}
        if isinstance(s, tuple):
            node: dict[str, Any] = {"items": [walk(x) for x in s]}
            if hasattr(s, "_fields"):
                node["name"] = type(s).__name__
                node["fields"] = list(s._fields)
            return node
        if s is None:
            return None
        raise TypeError(f"not a recurrent state: {type(s).__name__}")

    return walk(state)


def _state_from_structure(structure: Any, leaves: list[Tensor]) -> State:
    """Rebuild a state from :func:`_state_structure` output, with generic namedtuples."""
    if structure is None:
        return None
    if "leaf" in structure:
        return leaves[int(structure["leaf"])]
    items = [_state_from_structure(x, leaves) for x in structure["items"]]
    if "fields" in structure:
        cls = collections.namedtuple(structure["name"], structure["fields"])
        return cls(*items)
    return tuple(items)


def _fill_state(template: State, leaves: list[Tensor]) -> State:
    """``template`` with its leaves replaced, in :func:`state_leaves` order."""
    it = iter(leaves)
    return map_state(lambda _t: next(it), template)


class SequenceReplayBuffer:
    """Fixed-length sequences with stored recurrent states, sampled uniformly.

    Args:
        capacity: number of stored sequences (oldest are overwritten).
        obs_shape: shape of one observation.
        seq_len: trained steps per sequence (>= 1, and >= ``burn_in``).
        burn_in: steps before them used only to warm up the state (>= 0).
        stride: steps between the starts of consecutive windows of an env, in
            ``[1, seq_len]``; default ``seq_len`` (trained parts do not overlap).
        action_shape: shape of one action (``()`` for a discrete action).
        action_dtype: numpy dtype of the actions.
        obs_dtype: numpy dtype of the stored observations.
        n_envs: number of envs whose steps come together in :meth:`add`.
        state_example: a state of any batch size fixing the structure of stored states
            (e.g. ``net.initial_state(1)``); by default taken from the first :meth:`add`.
        seed: seed or ``np.random.Generator`` for sampling.
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        *,
        seq_len: int,
        burn_in: int = 0,
        stride: int | None = None,
        action_shape: tuple[int, ...] = (),
        action_dtype: Any = np.int64,
        obs_dtype: Any = np.float32,
        n_envs: int = 1,
        state_example: State = None,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        seq_len, burn_in = int(seq_len), int(burn_in)
        if seq_len < 1:
            raise UserError(f"seq_len must be >= 1, got {seq_len} (e.g. 40)")
        if burn_in < 0:
            raise UserError(f"burn_in must be >= 0, got {burn_in} (0 disables burn-in)")
        if seq_len < burn_in:
            raise UserError(
                f"sequence length {seq_len} is shorter than burn-in {burn_in} "
                "(raise seq_len or lower burn_in so that seq_len >= burn_in)"
            )
        stride = seq_len if stride is None else int(stride)
        if not 1 <= stride <= seq_len:
            raise UserError(
                f"stride must be in [1, seq_len={seq_len}], got {stride} "
                "(a larger stride would skip steps)"
            )
        if int(capacity) < 1:
            raise UserError(f"capacity must be >= 1, got {capacity} (pass a positive capacity)")
        if int(n_envs) < 1:
            raise UserError(f"n_envs must be >= 1, got {n_envs} (pass the number of envs)")
        self.capacity = int(capacity)
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.seq_len = seq_len
        self.burn_in = burn_in
        self.stride = stride
        self.length = burn_in + seq_len
        self.action_shape = tuple(int(d) for d in action_shape)
        self.action_dtype = np.dtype(action_dtype)
        self.obs_dtype = np.dtype(obs_dtype)
        self.n_envs = int(n_envs)
        self.rng = make_rng(seed)
        self.pos = 0
        self.size = 0

        c, e, n = self.capacity, self.n_envs, self.length
        self._dtypes = {
            "obs": self.obs_dtype,
            "next_obs": self.obs_dtype,
            "actions": self.action_dtype,
            "rewards": np.dtype(np.float32),
            "dones": np.dtype(np.float32),
            "truncated": np.dtype(np.float32),
            "starts": np.dtype(np.bool_),
            "mask": np.dtype(np.float32),
        }
        self._shapes = {
            "obs": self.obs_shape,
            "next_obs": self.obs_shape,
            "actions": self.action_shape,
        }
        self.data = {
            k: np.zeros((c, n, *self._shapes.get(k, ())), dtype=self._dtypes[k])
            for k in _STEP_FIELDS
        }
        self._win = {
            k: np.zeros((e, n, *self._shapes.get(k, ())), dtype=self._dtypes[k])
            for k in _STEP_FIELDS
        }
        self._fill = np.zeros(e, dtype=np.int64)  # filled positions of each env's window
        self._covered = np.zeros(e, dtype=np.int64)  # positions already trained on
        self._active = np.zeros(e, dtype=bool)  # an episode is in progress

        self._template: State = None
        self._structure: Any = None
        self.states: list[np.ndarray] = []  # per leaf: (capacity, ...)
        self._win_states: list[np.ndarray] = []  # per leaf: (n_envs, L, ...)
        if state_example is not None:
            self._init_states(state_example)

    # ----------------------------------------------------------------- states
    def _init_states(self, state: State) -> None:
        leaves = state_leaves(state)
        self._template = map_state(lambda t: t.detach().cpu()[:1].clone(), state)
        self._structure = _state_structure(state)
        self.states = [np.zeros((self.capacity, *t.shape[1:]), dtype=_np_dtype(t)) for t in leaves]
        self._win_states = [
            np.zeros((self.n_envs, self.length, *t.shape[1:]), dtype=_np_dtype(t)) for t in leaves
        ]

    def _state_rows(self, state: State) -> list[np.ndarray]:
        if self._template is None:
            self._init_states(state)
        leaves = state_leaves(state)
        if len(leaves) != len(self.states):
            raise UserError(
                f"state has {len(leaves)} tensors, the buffer stores {len(self.states)} "
                "(pass the same backbone's state at every step)"
            )
        rows = []
        for i, (t, store) in enumerate(zip(leaves, self.states)):
            shape = (self.n_envs, *store.shape[1:])
            if tuple(t.shape) != shape:
                raise UserError(
                    f"state tensor {i} has shape {tuple(t.shape)}, expected {shape} "
                    f"(one row per env, n_envs={self.n_envs})"
                )
            rows.append(t.detach().cpu().numpy())
        return rows

    # ----------------------------------------------------------------- adding
    def __len__(self) -> int:
        return self.size

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
        state: State,
    ) -> int:
        """Add one step of every env.

        Args:
            obs: (n_envs, *obs_shape) observations the actions were chosen on.
            action: (n_envs, *action_shape) actions taken.
            reward: (n_envs,) rewards.
            next_obs: (n_envs, *obs_shape) true next observations (the final observation at
                an episode end, not the reset one).
            terminated: (n_envs,) bool.
            truncated: (n_envs,) bool.
            state: the recurrent state *before* this step, i.e. the one fed together with
                ``obs`` (after the reset of envs that started a new episode); batch n_envs.

        Returns:
            The number of sequences written by this call.
        """
        e = self.n_envs
        step = {
            "obs": self._check("obs", obs, (e, *self.obs_shape), self.obs_dtype),
            "actions": self._check("action", action, (e, *self.action_shape), self.action_dtype),
            "rewards": self._check("reward", reward, (e,), np.float32),
            "next_obs": self._check("next_obs", next_obs, (e, *self.obs_shape), self.obs_dtype),
        }
        term = self._check("terminated", terminated, (e,), np.bool_)
        trunc = self._check("truncated", truncated, (e,), np.bool_)
        rows = self._state_rows(state)
        step["dones"] = term.astype(np.float32)
        step["truncated"] = (trunc & ~term).astype(np.float32)
        step["mask"] = np.ones(e, dtype=np.float32)

        written = 0
        for i in range(e):
            first = not self._active[i]
            if first:
                self._begin_episode(i, [r[i] for r in rows])
            f = self._fill[i]
            for k, v in step.items():
                self._win[k][i, f] = v[i]
            self._win["starts"][i, f] = first
            for w, r in zip(self._win_states, rows):
                w[i, f] = r[i]
            self._fill[i] = f + 1
            if self._fill[i] == self.length:
                self._emit(i)
                written += 1
                self._shift(i)
            if term[i] or trunc[i]:
                if self._fill[i] > self._covered[i]:
                    self._emit(i)  # the tail, padded
                    written += 1
                self._active[i] = False
        return written

    def _begin_episode(self, i: int, state_rows: list[np.ndarray]) -> None:
        for w in self._win.values():
            w[i] = 0
        for w, r in zip(self._win_states, state_rows):
            w[i, : self.burn_in + 1] = r  # padding positions carry the episode's initial state
        self._fill[i] = self.burn_in
        self._covered[i] = self.burn_in
        self._active[i] = True

    def _emit(self, i: int) -> None:
        f = self._fill[i]
        if f < self.length:  # padding after the episode's last step
            for w in self._win.values():
                w[i, f:] = 0
        j = self.pos
        for k, w in self._win.items():
            self.data[k][j] = w[i]
        for store, w in zip(self.states, self._win_states):
            store[j] = w[i, 0]
        self.pos = (self.pos + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        self._on_write(j)

    def _shift(self, i: int) -> None:
        s, n = self.stride, self.length
        for w in (*self._win.values(), *self._win_states):
            w[i, : n - s] = w[i, s:].copy()
        self._fill[i] = n - s
        self._covered[i] = n - s

    def _on_write(self, index: int) -> None:
        """Hook for subclasses: row ``index`` was (over)written."""

    # --------------------------------------------------------------- sampling
    def _check_batch(self, batch_size: int) -> None:
        if int(batch_size) < 1:
            raise UserError(f"batch_size must be >= 1, got {batch_size} (pass a positive size)")
        if batch_size > self.size:
            raise UserError(
                f"cannot sample {batch_size} sequences: only {self.size} stored "
                "(raise learning_starts so the buffer fills before learning, or lower batch_size)"
            )

    def _gather(self, idx: np.ndarray, weights: np.ndarray) -> dict[str, Any]:
        batch: dict[str, Any] = {
            k: np.ascontiguousarray(np.swapaxes(self.data[k][idx], 0, 1)) for k in _STEP_FIELDS
        }
        # One input sequence for a single forward pass that also yields every bootstrap:
        # the true next observation of each row's last valid step goes right after it.
        b = len(idx)
        rows = np.arange(b)
        last = self.length - 1 - np.argmax(batch["mask"][::-1] > 0, axis=0)  # (B,)
        seq_obs = np.zeros((self.length + 1, b, *self.obs_shape), dtype=self.obs_dtype)
        seq_obs[: self.length] = batch["obs"]
        seq_obs[last + 1, rows] = batch["next_obs"][last, rows]
        batch["seq_obs"] = seq_obs
        batch["seq_starts"] = np.concatenate([batch["starts"], np.zeros((1, b), dtype=bool)])
        leaves = [torch.from_numpy(store[idx]) for store in self.states]
        batch["state"] = _fill_state(self._template, leaves) if self._template is not None else ()
        batch["indices"] = idx.astype(np.int64)
        batch["weights"] = weights.astype(np.float32)
        return batch

    def sample(self, batch_size: int) -> dict[str, Any]:
        """Draw ``batch_size`` sequences uniformly (with replacement).

        Returns:
            Time-first arrays of ``T = burn_in + seq_len`` steps: ``obs`` and ``next_obs``
            (T, B, *obs_shape), ``actions`` (T, B, *action_shape), ``rewards``, ``dones``
            (terminated), ``truncated``, ``mask`` (T, B) float32, ``starts`` (T, B) bool;
            ``seq_obs`` (T + 1, B, *obs_shape) and ``seq_starts`` (T + 1, B): ``obs`` with
            the next observation of each row's last valid step written right after it, so
            one pass over ``seq_obs`` gives ``Q(s_{t+1})`` at position ``t + 1`` for every
            valid step ``t`` (see :func:`snrl.agents.dqn_math.sequence_nstep_targets`);
            ``state``: the stored state before step 0, same structure as the added states,
            CPU tensors (B, ...); ``indices`` (B,) int64; ``weights`` (B,) float32 (ones).
        """
        self._check_batch(batch_size)
        idx = self.rng.integers(0, self.size, size=int(batch_size))
        return self._gather(idx, np.ones(int(batch_size)))

    def iter_batches(self, batch_size: int, n_batches: int):
        """Yield ``n_batches`` batches, each drawn by :meth:`sample` when requested."""
        for _ in range(int(n_batches)):
            yield self.sample(batch_size)

    # ----------------------------------------------------------------- saving
    def _config(self) -> dict[str, Any]:
        return {
            "class": type(self).__name__,
            "capacity": self.capacity,
            "obs_shape": list(self.obs_shape),
            "seq_len": self.seq_len,
            "burn_in": self.burn_in,
            "stride": self.stride,
            "action_shape": list(self.action_shape),
            "action_dtype": self.action_dtype.str,
            "obs_dtype": self.obs_dtype.str,
            "n_envs": self.n_envs,
            "state_structure": self._structure,
            "state_leaves": [[list(s.shape[1:]), s.dtype.str] for s in self.states],
        }

    @classmethod
    def _kwargs_from_config(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        return {
            "seq_len": cfg["seq_len"],
            "burn_in": cfg["burn_in"],
            "stride": cfg["stride"],
            "action_shape": tuple(cfg["action_shape"]),
            "action_dtype": np.dtype(cfg["action_dtype"]),
            "obs_dtype": np.dtype(cfg["obs_dtype"]),
            "n_envs": cfg["n_envs"],
        }

    def _arrays(self) -> dict[str, np.ndarray]:
        s = self.size
        arrays = {f"data_{k}": v[:s] for k, v in self.data.items()}
        arrays.update({f"win_{k}": v for k, v in self._win.items()})
        for i, (store, w) in enumerate(zip(self.states, self._win_states)):
            arrays[f"state_{i}"] = store[:s]
            arrays[f"win_state_{i}"] = w
        arrays["env_counters"] = np.stack(
            [self._fill, self._covered, self._active.astype(np.int64)]
        )
        return arrays

    def save(self, path: str | os.PathLike) -> None:
        """Write the buffer (sequences, open windows, sampler state) to an .npz, atomically."""
        arrays = self._arrays()
        arrays["config"] = json_array(self._config())
        arrays["counters"] = np.array([self.pos, self.size], dtype=np.int64)
        arrays["rng_state"] = json_array(self.rng.bit_generator.state)
        save_npz_atomic(path, arrays)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        *,
        state_example: State = None,
        seed: int | np.random.Generator | None = None,
    ):
        """Read a buffer written by :meth:`save`.

        Args:
            path: the .npz file.
            state_example: a state of the backbone, to give sampled states its (named) tuple
                types; by default namedtuples with the saved type and field names are made.
            seed: if given, reseeds sampling; by default the saved sampler state is restored.

        Raises:
            UserError: the file is missing or corrupt, holds another kind of buffer, or
                ``state_example`` does not match the saved states.
        """
        arrays = load_npz(path, "sequence buffer")
        cfg = read_json_array(arrays, "config", path)
        if cfg.get("class") != cls.__name__:
            raise UserError(
                f"buffer file {str(path)!r} holds a {cfg.get('class')}, not a {cls.__name__} "
                f"(load it with {cfg.get('class')}.load)"
            )
        try:
            kwargs = cls._kwargs_from_config(cfg)
            buf = cls(cfg["capacity"], tuple(cfg["obs_shape"]), **kwargs)
            leaf_specs = [(tuple(shape), np.dtype(dt)) for shape, dt in cfg["state_leaves"]]
            structure = cfg["state_structure"]
        except (KeyError, TypeError, ValueError) as e:
            raise UserError(f"buffer file {str(path)!r} has a bad config ({e}) (save again)") from e
        if structure is not None or leaf_specs:
            leaves = [torch.zeros((1, *shape), dtype=_torch_dtype(dt)) for shape, dt in leaf_specs]
            if state_example is not None:
                ex_leaves = state_leaves(state_example)
                got = [(tuple(t.shape[1:]), _np_dtype(t)) for t in ex_leaves]
                if got != leaf_specs:
                    raise UserError(
                        f"state_example has leaves {got}, the file stores {leaf_specs} "
                        "(pass a state of the backbone that filled the buffer)"
                    )
                buf._init_states(state_example)
            else:
                try:
                    example = _state_from_structure(structure, leaves)
                except (KeyError, TypeError, ValueError, IndexError) as e:
                    raise UserError(
                        f"buffer file {str(path)!r} has a bad state structure ({e}) (save again)"
                    ) from e
                buf._init_states(example)
        buf._restore(arrays, path)
        if seed is not None:
            buf.rng = make_rng(seed)
        else:
            buf.rng = rng_from_state(read_json_array(arrays, "rng_state", path), path)
        return buf

    def _restore(self, arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
        pos, size = (int(v) for v in require(arrays, "counters", path))
        if not (0 <= size <= self.capacity and 0 <= pos < self.capacity):
            raise UserError(f"buffer file {str(path)!r} has bad counters (save it again)")
        self.pos, self.size = pos, size
        targets = {f"data_{k}": v[:size] for k, v in self.data.items()}
        targets.update({f"win_{k}": v for k, v in self._win.items()})
        for i, (store, w) in enumerate(zip(self.states, self._win_states)):
            targets[f"state_{i}"] = store[:size]
            targets[f"win_state_{i}"] = w
        targets["env_counters"] = np.zeros((3, self.n_envs), dtype=np.int64)
        for key, target in targets.items():
            source = require(arrays, key, path)
            if source.shape != target.shape:
                raise UserError(
                    f"buffer file {str(path)!r}: {key!r} has shape {source.shape}, expected "
                    f"{target.shape} (the file is corrupt; save the buffer again)"
                )
            target[...] = source
        counters = targets["env_counters"]
        self._fill[:] = counters[0]
        self._covered[:] = counters[1]
        self._active[:] = counters[2].astype(bool)


def _np_dtype(t: Tensor) -> np.dtype:
    return torch.empty(0, dtype=t.dtype).numpy().dtype


def _torch_dtype(dt: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=dt)).dtype


class PrioritizedSequenceReplayBuffer(ProportionalPriorities, SequenceReplayBuffer):
    """Sequence replay drawn in proportion to R2D2's sequence priority.

    A sequence's priority is ``p = eta * max_t |delta_t| + (1 - eta) * mean_t |delta_t|``
    over its valid trained steps, plus ``eps``; it is drawn with probability
    ``p^alpha / sum p^alpha`` and weighted by ``(N P)^-beta / max (N P)^-beta``, with beta
    annealed linearly from ``beta0`` to 1 over ``beta_steps`` sample calls (or ``step=``).
    New sequences get the largest priority so far.

    Args:
        capacity, obs_shape, seq_len, ...: as :class:`SequenceReplayBuffer`.
        alpha: priority exponent (R2D2: 0.9).
        beta0: importance-sampling exponent at the start (R2D2: 0.6).
        beta_steps: sample calls (or ``step`` units) over which beta reaches 1.
        eta: weight of the max in the priority mix (R2D2: 0.9).
        eps: added to priorities so none is 0.
    """

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        *,
        alpha: float = 0.9,
        beta0: float = 0.6,
        beta_steps: int = 100_000,
        eta: float = 0.9,
        eps: float = 1e-6,
        **kwargs: Any,
    ) -> None:
        if not 0.0 <= float(eta) <= 1.0:
            raise UserError(f"eta must be in [0, 1], got {eta} (0.9 in R2D2)")
        self.eta = float(eta)
        self._init_priorities(
            capacity,
            alpha=alpha,
            beta0=beta0,
            beta_steps=beta_steps,
            eps=eps,
            usual="alpha 0.9 and beta0 0.6 in R2D2",
        )
        super().__init__(capacity, obs_shape, **kwargs)

    def _on_write(self, index: int) -> None:
        self.tree.update(np.array([index]), self.max_priority**self.alpha)

    def sample(self, batch_size: int, *, step: int | None = None) -> dict[str, Any]:
        """Draw sequences in proportion to priority^alpha (stratified); see the base class."""
        self._check_batch(batch_size)
        return self._gather(*self._draw(batch_size, step))

    def update_priorities(self, indices: Any, td_errors: Any, mask: Any = None) -> np.ndarray:
        """Set sequence priorities from the TD errors of their trained steps.

        Args:
            indices: (B,) ``indices`` of a sampled batch.
            td_errors: (T', B) TD errors of the trained steps (numpy or tensor).
            mask: (T', B) 1 for valid steps (e.g. ``batch["mask"][burn_in:]``), or None.

        Returns:
            (B,) the new priorities (before ``alpha``).
        """

        def as_np(x: Any) -> np.ndarray:
            if hasattr(x, "detach"):
                x = x.detach().cpu().numpy()
            return np.asarray(x, dtype=np.float64)

        td = np.abs(as_np(td_errors))
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if td.ndim != 2 or td.shape[1] != idx.size:
            raise UserError(
                f"td_errors has shape {td.shape}, expected (T, {idx.size}) "
                "(pass time-first TD errors of the sampled batch)"
            )
        m = np.ones_like(td) if mask is None else as_np(mask)
        if m.shape != td.shape:
            raise UserError(f"mask has shape {m.shape}, expected {td.shape} (match td_errors)")
        count = np.maximum(m.sum(axis=0), 1.0)
        mean = (td * m).sum(axis=0) / count
        peak = np.where(m > 0, td, 0.0).max(axis=0)
        pri = self.eta * peak + (1.0 - self.eta) * mean + self.eps
        self._set_priorities(idx, pri)
        return pri

    def _config(self) -> dict[str, Any]:
        cfg = super()._config()
        cfg.update(
            alpha=self.alpha,
            beta0=self.beta0,
            beta_steps=self.beta_steps,
            eta=self.eta,
            eps=self.eps,
        )
        return cfg

    @classmethod
    def _kwargs_from_config(cls, cfg: dict[str, Any]) -> dict[str, Any]:
        kwargs = super()._kwargs_from_config(cfg)
        kwargs.update(
            alpha=cfg["alpha"],
            beta0=cfg["beta0"],
            beta_steps=cfg["beta_steps"],
            eta=cfg["eta"],
            eps=cfg["eps"],
        )
        return kwargs

    def _arrays(self) -> dict[str, np.ndarray]:
        return {**super()._arrays(), **self._priority_arrays()}

    def _restore(self, arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
        super()._restore(arrays, path)
        self._restore_priorities(arrays, path)
