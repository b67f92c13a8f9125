"""The sequence writer: replay windows for recurrent Q-networks, in the manner of R2D2
(Kapturowski et al. 2019).

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
(:mod:`snrl.functional.state`); each leaf is stored as one storage field ``state_<i>``
of shape ``(capacity, ...)``.
"""

from __future__ import annotations

import collections
import os
from typing import Any

import numpy as np
import torch
from torch import Tensor

from snrl.buffers.storage import Batch, RingStorage, copy_into, require, space_config, space_kwargs
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


class SequenceWriter:
    """Fixed-length windows of one env's steps, with the recurrent state before each window.

    Args:
        obs_shape: shape of one stored observation.
        seq_len: trained steps per window (>= 1, and >= ``burn_in``).
        burn_in: steps before them used only to warm up the state (>= 0).
        stride: steps between the starts of consecutive windows of an env, in
            ``[1, seq_len]``; default ``seq_len`` (trained parts do not overlap).
        n_envs: number of envs whose steps come together in :meth:`add`.
        action_shape: shape of one action (``()`` for a discrete action).
        action_dtype: numpy dtype of the actions.
        obs_dtype: numpy dtype of the stored observations.
        state_example: a state of any batch size fixing the structure of stored states
            (e.g. ``net.initial_state(1)``); by default taken from the first :meth:`add`.
        obs_pad: the observation stored on padding steps: a valid one, since the learner
            preprocesses padding with the rest (masked out afterwards). 0 suits a Box; a
            ``Discrete(n, start=s)`` observation needs ``s`` (0 is out of its range).
    """

    kind = "sequence"
    item_name = "sequences"

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        *,
        seq_len: int,
        burn_in: int = 0,
        stride: int | None = None,
        n_envs: int = 1,
        action_shape: tuple[int, ...] = (),
        action_dtype: Any = np.int64,
        obs_dtype: Any = np.float32,
        state_example: State = None,
        obs_pad: float = 0,
    ) -> None:
        seq_len, burn_in = int(seq_len), int(burn_in)
        if isinstance(obs_pad, bool) or not isinstance(obs_pad, (int, float, np.number)):
            raise UserError(f"obs_pad must be a number, got {obs_pad!r} (a valid observation)")
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
        if int(n_envs) < 1:
            raise UserError(f"n_envs must be >= 1, got {n_envs} (pass the number of envs)")
        self.obs_shape = tuple(int(d) for d in obs_shape)
        self.seq_len = seq_len
        self.burn_in = burn_in
        self.stride = stride
        self.length = burn_in + seq_len
        self.action_shape = tuple(int(d) for d in action_shape)
        self.action_dtype = np.dtype(action_dtype)
        self.obs_dtype = np.dtype(obs_dtype)
        self.obs_pad = np.array(obs_pad, dtype=self.obs_dtype).item()
        self.n_envs = int(n_envs)

        e, n = self.n_envs, self.length
        f32 = np.dtype(np.float32)
        self._dtypes = {
            "obs": self.obs_dtype,
            "next_obs": self.obs_dtype,
            "actions": self.action_dtype,
            "rewards": f32,
            "dones": f32,
            "truncated": f32,
            "starts": np.dtype(np.bool_),
            "mask": f32,
        }
        self._shapes = {
            "obs": self.obs_shape,
            "next_obs": self.obs_shape,
            "actions": self.action_shape,
        }
        self._pad = {k: self.obs_pad if k in ("obs", "next_obs") else 0 for k in _STEP_FIELDS}
        self._win = {
            k: np.full((e, n, *self._shapes.get(k, ())), self._pad[k], dtype=self._dtypes[k])
            for k in _STEP_FIELDS
        }
        self._fill = np.zeros(e, dtype=np.int64)  # filled positions of each env's window
        self._covered = np.zeros(e, dtype=np.int64)  # positions already trained on
        self._active = np.zeros(e, dtype=bool)  # an episode is in progress

        self._template: State = None
        self._structure: Any = None
        self._leaf_specs: list[tuple[tuple[int, ...], np.dtype]] = []
        self._win_states: list[np.ndarray] = []  # per leaf: (n_envs, L, ...)
        if state_example is not None:
            self._init_states(state_example)

    def fields(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Shape and dtype of one stored window, per field (``state_<i>``: the leaves of the
        stored state, once its structure is known)."""
        out = {k: ((self.length, *self._shapes.get(k, ())), self._dtypes[k]) for k in _STEP_FIELDS}
        for i, spec in enumerate(self._leaf_specs):
            out[f"state_{i}"] = spec
        return out

    @property
    def n_pending(self) -> int:
        """Steps in open windows not yet written."""
        return int((self._fill - self._covered).clip(min=0).sum())

    def describe(self) -> str:
        return (
            f"sequences of {self.seq_len} steps (+{self.burn_in} burn-in, stride "
            f"{self.stride}) of {self.n_envs} envs (observations {self.obs_shape} "
            f"{self.obs_dtype})"
        )

    # ---- states --------------------------------------------------------------------------
    def _init_states(self, state: State) -> None:
        leaves = state_leaves(state)
        self._template = map_state(lambda t: t.detach().cpu()[:1].clone(), state)
        self._structure = _state_structure(state)
        self._leaf_specs = [(tuple(t.shape[1:]), _np_dtype(t)) for t in leaves]
        self._win_states = [
            np.zeros((self.n_envs, self.length, *shape), dtype=dt) for shape, dt in self._leaf_specs
        ]

    def _state_rows(self, state: State) -> list[np.ndarray]:
        if self._template is None:
            self._init_states(state)
        leaves = state_leaves(state)
        if len(leaves) != len(self._leaf_specs):
            raise UserError(
                f"state has {len(leaves)} tensors, the buffer stores {len(self._leaf_specs)} "
                "(pass the same backbone's state at every step)"
            )
        rows = []
        for i, (t, (shape, _)) in enumerate(zip(leaves, self._leaf_specs)):
            expected = (self.n_envs, *shape)
            if tuple(t.shape) != expected:
                raise UserError(
                    f"state tensor {i} has shape {tuple(t.shape)}, expected {expected} "
                    f"(one row per env, n_envs={self.n_envs})"
                )
            rows.append(t.detach().cpu().numpy())
        return rows

    # ---- writing -------------------------------------------------------------------------
    def add(self, obs, action, reward, next_obs, term, trunc, state=None):
        """One step of every env (arrays checked by ``ReplayBuffer.add``) -> the windows it
        completes, or ``None``. ``state`` is the recurrent state *before* this step, i.e. the
        one fed together with ``obs`` (after the reset of envs that started a new episode);
        batch n_envs (``()`` for a feed-forward network)."""
        if state is None:
            raise UserError(
                "sequence replay stores the recurrent state: pass state= (the state fed with "
                "obs; () for a feed-forward network)"
            )
        e = self.n_envs
        step = {"obs": obs, "actions": action, "rewards": reward, "next_obs": next_obs}
        rows = self._state_rows(state)
        step["dones"] = term.astype(np.float32)
        step["truncated"] = (trunc & ~term).astype(np.float32)
        step["mask"] = np.ones(e, dtype=np.float32)

        out: list[dict[str, np.ndarray]] = []
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
                out.append(self._emit(i))
                self._shift(i)
            if term[i] or trunc[i]:
                if self._fill[i] > self._covered[i]:
                    out.append(self._emit(i))  # the tail, padded
                self._active[i] = False
        if not out:
            return None
        return {k: np.stack([w[k] for w in out]) for k in out[0]}

    def _begin_episode(self, i: int, state_rows: list[np.ndarray]) -> None:
        for k, w in self._win.items():
            w[i] = self._pad[k]
        for w, r in zip(self._win_states, state_rows):
            w[i, : self.burn_in + 1] = r  # padding positions carry the episode's initial state
        self._fill[i] = self.burn_in
        self._covered[i] = self.burn_in
        self._active[i] = True

    def _emit(self, i: int) -> dict[str, np.ndarray]:
        """Env i's window as one item (copies), padding after the episode's last step."""
        f = self._fill[i]
        if f < self.length:
            for k, w in self._win.items():
                w[i, f:] = self._pad[k]
        item = {k: w[i].copy() for k, w in self._win.items()}
        for j, w in enumerate(self._win_states):
            item[f"state_{j}"] = w[i, 0].copy()
        return item

    def _shift(self, i: int) -> None:
        s, n = self.stride, self.length
        for w in (*self._win.values(), *self._win_states):
            w[i, : n - s] = w[i, s:].copy()
        self._fill[i] = n - s
        self._covered[i] = n - s

    # ---- reading -------------------------------------------------------------------------
    def gather(self, storage: RingStorage, idx: np.ndarray) -> Batch:
        """Time-first arrays of ``T = burn_in + seq_len`` steps: ``obs`` and ``next_obs``
        (T, B, *obs_shape), ``actions`` (T, B, *action_shape), ``rewards``, ``dones``
        (terminated), ``truncated``, ``mask`` (T, B) float32, ``starts`` (T, B) bool;
        ``seq_obs`` (T + 1, B, *obs_shape) and ``seq_starts`` (T + 1, B): ``obs`` with the
        next observation of each row's last valid step written right after it, so one pass
        over ``seq_obs`` gives ``Q(s_{t+1})`` at position ``t + 1`` for every valid step ``t``
        (see :func:`snrl.agents.dqn_math.sequence_nstep_targets`); ``state``: the stored
        state before step 0, same structure as the added states, CPU tensors (B, ...)."""
        batch: Batch = {
            k: np.ascontiguousarray(np.swapaxes(storage[k][idx], 0, 1)) for k in _STEP_FIELDS
        }
        # One input sequence for a single forward pass that also yields every bootstrap:
        # the true next observation of each row's last valid step goes right after it.
        b = len(idx)
        rows = np.arange(b)
        last = self.length - 1 - np.argmax(batch["mask"][::-1] > 0, axis=0)  # (B,)
        seq_obs = np.full((self.length + 1, b, *self.obs_shape), self.obs_pad, self.obs_dtype)
        seq_obs[: self.length] = batch["obs"]
        seq_obs[last + 1, rows] = batch["next_obs"][last, rows]
        batch["seq_obs"] = seq_obs
        batch["seq_starts"] = np.concatenate([batch["starts"], np.zeros((1, b), dtype=bool)])
        if self._template is None:
            batch["state"] = ()
        else:
            leaves = [
                torch.from_numpy(storage[f"state_{j}"][idx]) for j in range(len(self._leaf_specs))
            ]
            batch["state"] = _fill_state(self._template, leaves)
        return batch

    # ---- files ---------------------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return {
            **space_config(self),
            "seq_len": self.seq_len,
            "burn_in": self.burn_in,
            "stride": self.stride,
            "state_structure": self._structure,
            "state_leaves": [[list(shape), dt.str] for shape, dt in self._leaf_specs],
            **({"obs_pad": self.obs_pad} if self.obs_pad != 0 else {}),  # files before: 0
        }

    @classmethod
    def from_config(cls, cfg: dict[str, Any], state_example: State = None) -> SequenceWriter:
        """The writer of a saved config; ``state_example`` (a state of the backbone) gives
        sampled states its (named) tuple types, else namedtuples with the saved names are
        made."""
        writer = cls(
            tuple(cfg["obs_shape"]),
            seq_len=cfg["seq_len"],
            burn_in=cfg["burn_in"],
            stride=cfg["stride"],
            obs_pad=cfg.get("obs_pad", 0),
            **space_kwargs(cfg),
        )
        specs = [(tuple(shape), np.dtype(dt)) for shape, dt in cfg["state_leaves"]]
        structure = cfg["state_structure"]
        if structure is None and not specs:
            return writer
        if state_example is not None:
            got = [(tuple(t.shape[1:]), _np_dtype(t)) for t in state_leaves(state_example)]
            if got != specs:
                raise UserError(
                    f"state_example has leaves {got}, the file stores {specs} "
                    "(pass a state of the backbone that filled the buffer)"
                )
            writer._init_states(state_example)
            return writer
        leaves = [torch.zeros((1, *shape), dtype=_torch_dtype(dt)) for shape, dt in specs]
        try:
            writer._init_states(_state_from_structure(structure, leaves))
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise ValueError(f"bad state structure ({e})") from e
        return writer

    def arrays(self) -> dict[str, np.ndarray]:
        out = {f"win_{k}": v for k, v in self._win.items()}
        for i, w in enumerate(self._win_states):
            out[f"win_state_{i}"] = w
        out["env_counters"] = np.stack([self._fill, self._covered, self._active.astype(np.int64)])
        return out

    def restore(self, arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
        targets = self.arrays()
        for key, target in targets.items():
            copy_into(target, require(arrays, key, path), key, path)
        counters = targets["env_counters"]
        self._fill[:] = counters[0]
        self._covered[:] = counters[1]
        self._active[:] = counters[2].astype(bool)


def _np_dtype(t: Tensor) -> np.dtype:
    return torch.empty(0, dtype=t.dtype).numpy().dtype


def _torch_dtype(dt: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=dt)).dtype
