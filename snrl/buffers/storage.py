"""Replay storage: a ring of preallocated numpy arrays, one per named field, and the helpers
that read and write replay files (.npz without pickle, written through :mod:`snrl.io`).

Nothing is stored per item as a Python object: an item (a transition, or a window of steps)
is one row of every field array, and writing ``K`` items is one fancy-indexed assignment per
field. When the ring is full the oldest rows are overwritten.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from snrl.errors import UserError
from snrl.io import atomic_open

Batch = dict[str, Any]


class RingStorage:
    """``capacity`` rows of named numpy fields, written in a ring.

    Args:
        capacity: number of rows (>= 1).
    """

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or int(capacity) < 1:
            raise UserError(f"capacity must be >= 1, got {capacity} (pass a positive capacity)")
        self.capacity = int(capacity)
        self.fields: dict[str, np.ndarray] = {}
        self.pos = 0
        self.size = 0

    def add_field(self, name: str, shape: tuple[int, ...], dtype: Any) -> None:
        """Allocate field ``name`` with rows of ``shape`` and ``dtype`` (zeros)."""
        self.fields[name] = np.zeros((self.capacity, *shape), dtype=np.dtype(dtype))

    def __getitem__(self, name: str) -> np.ndarray:
        """The whole (capacity, ...) array of a field (rows ``>= size`` are unused)."""
        return self.fields[name]

    def write(self, items: dict[str, np.ndarray]) -> np.ndarray:
        """Write ``K`` rows (one (K, ...) array per field) after the newest row.

        Returns:
            (K,) int64 row indices written.
        """
        k = len(next(iter(items.values())))
        idx = (self.pos + np.arange(k)) % self.capacity
        # rows that do not wrap around are one slice (a copy, not a gather-scatter)
        rows = slice(self.pos, self.pos + k) if self.pos + k <= self.capacity else idx
        for name, arr in self.fields.items():
            arr[rows] = items[name]
        self.pos = int((self.pos + k) % self.capacity)
        self.size = min(self.size + k, self.capacity)
        return idx.astype(np.int64)

    def arrays(self) -> dict[str, np.ndarray]:
        """The filled rows of every field and the ring counters, for :func:`save_arrays`."""
        out = {f"data_{k}": v[: self.size] for k, v in self.fields.items()}
        out["counters"] = np.array([self.pos, self.size], dtype=np.int64)
        return out

    def restore(self, arrays: dict[str, np.ndarray], path: str | os.PathLike) -> None:
        """Load what :meth:`arrays` wrote (fields already allocated)."""
        pos, size = (int(v) for v in require(arrays, "counters", path))
        if not (0 <= size <= self.capacity and 0 <= pos < self.capacity):
            raise UserError(f"buffer file {str(path)!r} has bad counters (save it again)")
        self.pos, self.size = pos, size
        for name, target in self.fields.items():
            copy_into(target[:size], require(arrays, f"data_{name}", path), name, path)


# ---- files -------------------------------------------------------------------------------
def space_config(writer: Any) -> dict[str, Any]:
    """The part of a replay writer's config that every kind has: its kind, the number of envs
    and the observation and action spaces."""
    return {
        "kind": writer.kind,
        "obs_shape": list(writer.obs_shape),
        "n_envs": writer.n_envs,
        "action_shape": list(writer.action_shape),
        "action_dtype": writer.action_dtype.str,
        "obs_dtype": writer.obs_dtype.str,
    }


def space_kwargs(cfg: dict[str, Any]) -> dict[str, Any]:
    """The writer keywords of a :func:`space_config` (``obs_shape`` is positional)."""
    return {
        "n_envs": cfg["n_envs"],
        "action_shape": tuple(cfg["action_shape"]),
        "action_dtype": np.dtype(cfg["action_dtype"]),
        "obs_dtype": np.dtype(cfg["obs_dtype"]),
    }


def make_rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    """A numpy Generator from a seed, or the Generator itself."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def save_arrays(path: str | os.PathLike, arrays: dict[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` as an uncompressed .npz, atomically (:mod:`snrl.io`)."""
    with atomic_open(path, "wb") as f:
        np.savez(f, **arrays)


def load_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read every array of an .npz without pickle; a missing or corrupt file is a UserError."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"replay buffer file {str(path)!r} not found (check the path)")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as e:
        raise UserError(
            f"replay buffer file {str(path)!r} is corrupt or not an .npz ({e}) "
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


#: The numpy bit generators a saved sampler state may name.
BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def rng_from_state(state: Any, path: str | os.PathLike) -> np.random.Generator:
    """A Generator restored from ``bit_generator.state`` saved as JSON."""
    name = state.get("bit_generator") if isinstance(state, dict) else None
    if name not in BIT_GENERATORS:  # a file names it: never call what it names otherwise
        raise UserError(
            f"buffer file {str(path)!r} has a bad sampler state (bit_generator={name!r}, not "
            f"one of {', '.join(BIT_GENERATORS)}) (pass seed= to load)"
        )
    try:
        bit_gen = getattr(np.random, name)()
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


def copy_into(target: np.ndarray, source: np.ndarray, key: str, path: str | os.PathLike) -> None:
    """``target[...] = source`` after checking the shapes (a mismatch means a corrupt file)."""
    if source.shape != target.shape:
        raise UserError(
            f"buffer file {str(path)!r}: {key!r} has shape {source.shape}, expected "
            f"{target.shape} (the file is corrupt; save the buffer again)"
        )
    target[...] = source


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
