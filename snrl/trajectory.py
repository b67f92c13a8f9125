"""A recorded episode: observations, actions, rewards, frames and the network's activity.

A :class:`Trajectory` is a plain container of numpy arrays plus JSON-able metadata. It is
what ``agent.rollout(record=True)`` returns and what :class:`snrl.render.TrajectoryRenderer`
draws. Time is the first axis of every array.

Frame convention: ``frames`` holds ``T + 1`` images. ``frames[0]`` is rendered right after
``env.reset``; ``frames[t + 1]`` right after step ``t`` (the step that took ``actions[t]``
having seen ``observations[t]``). Rendered videos show all ``T + 1`` frames.

The network's activity is a :class:`snrl.networks.Activity` of numpy arrays, one
:class:`~snrl.networks.LayerActivity` per layer of the policy backbone (``traj.activity[0]``,
``traj.activity["lif0"].spikes``), each array ``(T, N)``.

Trial tasks (NeuroGym) add ``task``: per-step arrays ``"gt"`` (ground-truth action, float,
NaN where the env gave none), ``"new_trial"`` (bool, True at the last step of a trial) and
``"performance"`` (float, NaN except at trial ends); ``trials``: the completed trials as
dicts (:data:`snrl.envs.trials.TRIAL_KEYS`; ``start_step``/``end_step`` index this
trajectory); and ``dt``: the task's time step in seconds (``None`` when the env declares
none). ``substeps`` is the number of network steps per env step: with ``substeps > 1`` the
activity arrays have ``T * substeps`` rows (rows ``t * substeps ... (t + 1) * substeps - 1``
belong to step ``t``).

Files are ``.npz`` archives written with :func:`numpy.savez` (atomically) and read with
``allow_pickle=False``: arrays plus one JSON string entry for the metadata. Nothing is
unpickled when loading. Files of format version 1 (activity stored under
``"<layer>.<field>"`` keys) and 2 (no task fields) are still read.
"""

from __future__ import annotations

import json
import os
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snrl.errors import UserError, explain_foreign_calls
from snrl.io import atomic_open, load_json
from snrl.networks.activity import KINDS, Activity, as_numpy

__all__ = ["Trajectory", "layer_dicts"]

_FORMAT = "snrl.trajectory"
_VERSION = 3


def layer_dicts(layers: Sequence[Any] | None) -> list[dict[str, Any]]:
    """Normalize layer descriptions to plain JSON-able dicts.

    Args:
        layers: ``LayerInfo`` tuples (from ``backbone.layer_info()``), dicts with the keys
            ``name``, ``kind``, ``size`` and optionally ``threshold``, ``sign``, or ``None``.

    Returns:
        A list of dicts ``{"name", "kind", "size", "threshold", "sign"}`` where ``threshold``
        is a float or ``None`` and ``sign`` a list of ±1 ints or ``None``.

    Raises:
        UserError: a layer lacks a field, has an unknown kind, or a sign of the wrong length.
    """
    out: list[dict[str, Any]] = []
    for i, layer in enumerate(layers or []):
        if isinstance(layer, Mapping):
            get = layer.get
        else:

            def get(key: str, default: Any = None, _layer: Any = layer) -> Any:
                return getattr(_layer, key, default)

        name, kind, size = get("name"), get("kind"), get("size")
        if not isinstance(name, str) or not name:
            raise UserError(f"layer {i} has no name (give each layer a non-empty 'name')")
        if kind not in KINDS:
            raise UserError(f"layer {name!r} has kind {kind!r} (use one of {KINDS})")
        if size is None or int(size) < 0:
            raise UserError(f"layer {name!r} has size {size!r} (give the number of units)")
        threshold = get("threshold")
        sign = get("sign")
        if sign is not None:
            sign_arr = as_numpy(sign).reshape(-1)
            if sign_arr.shape[0] != int(size) or not np.all(np.abs(sign_arr) == 1):
                raise UserError(
                    f"layer {name!r} sign has {sign_arr.shape[0]} entries for size {size} "
                    "(give one ±1 per neuron, or None)"
                )
            sign = [int(s) for s in sign_arr]
        out.append(
            {
                "name": name,
                "kind": kind,
                "size": int(size),
                "threshold": None if threshold is None else float(threshold),
                "sign": sign,
            }
        )
    return out


def _numeric(name: str, x: Any) -> np.ndarray:
    """``x`` as a numpy array of numbers or bools (what every array of a trajectory holds).

    Raises:
        UserError: Naming ``name`` and the dtype (strings, objects, records, complex).
    """
    arr = as_numpy(x)
    if arr.dtype.kind not in "biuf":
        raise UserError(f"{name} has dtype {arr.dtype} (give an array of numbers or bools)")
    return arr


class Trajectory:
    """One recorded episode (or a prefix of one) of a single environment.

    Args:
        observations: (T, *obs_shape) the observation the agent acted on at step t.
        actions: (T, ...) the action taken at step t.
        rewards: (T,) reward received after step t.
        terminated: bool (T,) the episode terminated at step t.
        truncated: bool (T,) the episode was truncated at step t.
        env: gymnasium id of the environment (``""`` if unknown).
        seed: the seed passed to ``env.reset(seed=...)`` at the start, or ``None``.
        frames: uint8 (T + 1, H, W, 3) RGB frames, ``frames[0]`` after reset and
            ``frames[t + 1]`` after step t; or ``None`` (the renderer can re-simulate them).
        activity: the policy backbone's per-step :class:`~snrl.networks.Activity`, every
            array (T, N) (tensors are converted to numpy); None: no activity.
        policy: ``name -> (T, K)`` per-step policy outputs: ``"probs"`` (Discrete action
            probabilities), ``"q_values"`` (DQN), ``"mean"``/``"std"`` (Box),
            ``"logit_noise"`` (the exploration offsets of a Discrete ``use_sde`` policy acting
            stochastically). A 1-D array is taken as (T, 1).
        meta: JSON-able extra information (algo, backbone, ...).
        task: ``name -> (T, ...)`` per-step task arrays (``"gt"``, ``"new_trial"``,
            ``"performance"``) of a trial task, or ``None``.
        trials: the completed trials (JSON-able dicts), or ``None``.
        dt: seconds per env step when the env declares a time step, else ``None``.
        substeps: network steps per env step (activity arrays have ``T * substeps`` rows).

    Raises:
        UserError: lengths disagree (the message names the mismatching field), frames are
            not uint8 RGB, an activity array is not (T, N) with N the layer's size, or
            ``meta`` is not JSON-able.
    """

    @explain_foreign_calls(
        "snrl.Trajectory(...)",
        {},
        default="snrl.Trajectory is one recorded episode as arrays (observations=, actions=, "
        "rewards=, terminated=, truncated=, keywords only), not NeuroTorch's list of "
        "Experience; record one with algo.rollout(seed=0, record=True)",
    )
    def __init__(
        self,
        *,
        observations: Any,
        actions: Any,
        rewards: Any,
        terminated: Any,
        truncated: Any,
        env: str = "",
        seed: int | None = None,
        frames: Any | None = None,
        activity: Activity | None = None,
        policy: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        task: Mapping[str, Any] | None = None,
        trials: Sequence[Mapping[str, Any]] | None = None,
        dt: float | None = None,
        substeps: int = 1,
    ) -> None:
        self.observations = _numeric("observations", observations)
        self.actions = _numeric("actions", actions)
        self.rewards = _numeric("rewards", rewards).astype(np.float64, copy=False)
        self.terminated = _numeric("terminated", terminated).astype(bool, copy=False)
        self.truncated = _numeric("truncated", truncated).astype(bool, copy=False)
        self.env = str(env)
        self.seed = None if seed is None else int(seed)
        self.frames = None if frames is None else _numeric("frames", frames)
        if activity is not None and not isinstance(activity, Activity):
            raise UserError(
                f"activity= is a {type(activity).__name__}; pass a snrl.Activity (a mapping "
                "'<layer>.<field>' -> array converts with Activity.from_flat(mapping, layers))"
            )
        self.activity = (Activity.from_flat({}, []) if activity is None else activity).to_numpy()
        policy_arrays = {str(k): _numeric(f"policy[{k!r}]", v) for k, v in (policy or {}).items()}
        self.policy = {k: v[:, None] if v.ndim == 1 else v for k, v in policy_arrays.items()}
        self.meta = dict(meta or {})
        self.task = (
            None if task is None else {str(k): _numeric(f"task[{k!r}]", v) for k, v in task.items()}
        )
        self.trials = None if trials is None else [dict(t) for t in trials]
        self.dt = None if dt is None else float(dt)
        self.substeps = substeps
        self._validate()

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        if self.observations.ndim < 1:
            raise UserError("observations must have a time axis (give an array shaped (T, ...))")
        t = self.observations.shape[0]
        for name in ("actions", "rewards", "terminated", "truncated"):
            arr = getattr(self, name)
            if arr.ndim < 1 or arr.shape[0] != t:
                got = arr.shape[0] if arr.ndim else "a scalar"
                raise UserError(
                    f"{name} has length {got} but observations has length {t} "
                    f"(give one entry per step)"
                )
        for name in ("rewards", "terminated", "truncated"):
            if getattr(self, name).ndim != 1:
                raise UserError(
                    f"{name} has shape {getattr(self, name).shape} (give a 1-D array of length T)"
                )
        if self.frames is not None:
            f = self.frames
            if f.ndim != 4 or f.shape[-1] != 3:
                raise UserError(
                    f"frames have shape {f.shape} (give uint8 RGB frames shaped (T + 1, H, W, 3))"
                )
            if f.dtype != np.uint8:
                raise UserError(f"frames have dtype {f.dtype} (convert them to uint8 0..255)")
            if f.shape[0] != t + 1:
                raise UserError(
                    f"frames has length {f.shape[0]} but observations has length {t} "
                    f"(give T + 1 frames: frames[0] after reset, frames[t + 1] after step t)"
                )
        s = self.substeps
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)) or s < 1:
            raise UserError(f"substeps={s!r} (give the network steps per env step, an int >= 1)")
        self.substeps = int(s)
        if self.dt is not None and not (np.isfinite(self.dt) and self.dt > 0):
            raise UserError(f"dt={self.dt} (give the env's time step in seconds > 0, or None)")
        rows = t * self.substeps
        for layer in self.activity:
            for field, arr in layer.fields.items():
                _numeric(f"activity {layer.name}.{field}", arr)
                if arr.ndim != 2 or arr.shape[0] != rows:
                    per = "" if self.substeps == 1 else f" x substeps {self.substeps}"
                    raise UserError(
                        f"activity {layer.name}.{field} has shape {arr.shape} but observations "
                        f"has length {t}{per} (give a (T * substeps, N) array per field: "
                        "squeeze the batch axis of each step)"
                    )
                if arr.shape[1] != layer.size:
                    raise UserError(
                        f"activity {layer.name}.{field} has {arr.shape[1]} units but layer "
                        f"{layer.name!r} has size {layer.size} (make them agree)"
                    )
            if layer.sign is not None and (
                layer.sign.shape != (layer.size,) or not np.all(np.abs(layer.sign) == 1)
            ):
                raise UserError(
                    f"layer {layer.name!r} sign has shape {layer.sign.shape} for size "
                    f"{layer.size} (give one ±1 per neuron, or None)"
                )
        for key, arr in self.policy.items():
            if arr.ndim != 2 or arr.shape[0] != t:
                raise UserError(
                    f"policy[{key!r}] has shape {arr.shape} but observations has length {t} "
                    "(give a (T, K) array per key)"
                )
        for key, arr in (self.task or {}).items():
            if arr.ndim < 1 or arr.shape[0] != t:
                raise UserError(
                    f"task[{key!r}] has shape {arr.shape} but observations has length {t} "
                    "(give one entry per step)"
                )
        for name, value in (("meta", self.meta), ("trials", self.trials)):
            try:
                json.dumps(value)
            except (TypeError, ValueError) as exc:
                raise UserError(
                    f"{name} is not JSON-able: {exc} (keep {name} to str/int/float/bool/list/dict)"
                ) from exc

    # ------------------------------------------------------------------ accessors
    def __len__(self) -> int:
        """Number of steps T."""
        return int(self.observations.shape[0])

    def __repr__(self) -> str:
        frames = "none" if self.frames is None else "x".join(map(str, self.frames.shape[1:3]))
        return (
            f"Trajectory(env={self.env!r}, T={len(self)}, seed={self.seed}, "
            f"return={self.total_reward:.3g}, frames={frames}, activity={self.activity.names})"
        )

    @property
    def total_reward(self) -> float:
        """Sum of rewards over the trajectory (the episode return when it is complete)."""
        return float(self.rewards.sum())

    @property
    def cumulative_reward(self) -> np.ndarray:
        """(T,) ``np.cumsum(rewards)``: the return so far after each step."""
        return np.cumsum(self.rewards)

    @property
    def has_frames(self) -> bool:
        """Whether ``frames`` are stored."""
        return self.frames is not None

    @property
    def layers(self) -> list[dict[str, Any]]:
        """The policy backbone's layers as plain dicts ``{"name", "kind", "size",
        "threshold", "sign"}`` (from ``activity``)."""
        return self.activity.info()

    def layer(self, name: str) -> dict[str, Any] | None:
        """The layer dict called ``name``, or ``None``."""
        for layer in self.layers:
            if layer["name"] == name:
                return layer
        return None

    def replace(self, **changes: Any) -> Trajectory:
        """A new trajectory with some fields replaced (arrays are shared, not copied)."""
        fields = {
            "observations": self.observations,
            "actions": self.actions,
            "rewards": self.rewards,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "env": self.env,
            "seed": self.seed,
            "frames": self.frames,
            "activity": self.activity,
            "policy": self.policy,
            "meta": self.meta,
            "task": self.task,
            "trials": self.trials,
            "dt": self.dt,
            "substeps": self.substeps,
        }
        unknown = set(changes) - set(fields)
        if unknown:
            raise UserError(f"unknown trajectory fields {sorted(unknown)} (use {sorted(fields)})")
        fields.update(changes)
        return Trajectory(**fields)

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike[str], *, compress: bool = True) -> Path:
        """Write the trajectory to an ``.npz`` file, atomically.

        Args:
            path: destination; written exactly as given (no extension is added).
                Parent directories are created.
            compress: use :func:`numpy.savez_compressed` (frames shrink a lot).

        Returns:
            The path written.

        Raises:
            UserError: the directory cannot be created or written.
        """
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(
                f"cannot create directory {path.parent}: {exc.strerror or exc} "
                "(choose a writable output path)"
            ) from exc
        activity = [dict(layer.info(), fields=list(layer.fields)) for layer in self.activity]
        policy_keys = list(self.policy)
        header = {
            "format": _FORMAT,
            "version": _VERSION,
            "env": self.env,
            "seed": self.seed,
            "meta": self.meta,
            "activity": activity,
            "policy_keys": policy_keys,
            "has_frames": self.frames is not None,
            "task_keys": None if self.task is None else list(self.task),
            "trials": self.trials,
            "dt": self.dt,
            "substeps": self.substeps,
        }
        arrays: dict[str, np.ndarray] = {
            "header": np.array(json.dumps(header)),
            "observations": self.observations,
            "actions": self.actions,
            "rewards": self.rewards,
            "terminated": self.terminated,
            "truncated": self.truncated,
        }
        if self.frames is not None:
            arrays["frames"] = self.frames
        for i, layer in enumerate(self.activity):
            for j, arr in enumerate(layer.fields.values()):
                arrays[f"activity_{i}_{j}"] = arr
        for i, key in enumerate(policy_keys):
            arrays[f"policy_{i}"] = self.policy[key]
        for i, arr in enumerate((self.task or {}).values()):
            arrays[f"task_{i}"] = arr
        for key, arr in arrays.items():
            if arr.dtype == object:
                raise UserError(
                    f"{key} has dtype object (store numeric arrays only; they cannot be saved "
                    "without pickle)"
                )
        writer = np.savez_compressed if compress else np.savez
        try:
            with atomic_open(path, "wb") as fh:
                writer(fh, **arrays)
        except OSError as exc:
            raise UserError(
                f"cannot write {path}: {exc.strerror or exc} (choose a writable output path)"
            ) from exc
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Trajectory:
        """Read a trajectory written by :meth:`save` (no pickle is ever loaded).

        Raises:
            UserError: the file is missing, not an npz, or not a snrl trajectory.
        """
        path = Path(path)
        if not path.is_file():
            raise UserError(f"no trajectory file at {path} (check the path)")
        try:
            with np.load(path, allow_pickle=False) as data:
                header = _read_header(data, path)
                return cls(
                    observations=data["observations"],
                    actions=data["actions"],
                    rewards=data["rewards"],
                    terminated=data["terminated"],
                    truncated=data["truncated"],
                    env=header.get("env", header.get("env_id", "")),  # env_id: v1 files
                    seed=header["seed"],
                    frames=data["frames"] if header["has_frames"] else None,
                    activity=_load_activity(data, header),
                    policy={k: data[f"policy_{i}"] for i, k in enumerate(header["policy_keys"])},
                    meta=header["meta"],
                    task=_load_task(data, header),
                    trials=header.get("trials"),  # absent before version 3
                    dt=header.get("dt"),
                    substeps=int(header.get("substeps", 1)),
                )
        except UserError:
            raise
        except (
            OSError,
            EOFError,  # an empty or cut file
            ValueError,
            KeyError,
            zipfile.BadZipFile,
            zlib.error,  # a damaged compressed member
            NotImplementedError,  # a zip compression method Python lacks
        ) as exc:
            raise UserError(
                f"cannot read trajectory {path}: {exc} (the file is corrupt or not from "
                "Trajectory.save)"
            ) from exc


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_strs(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


#: The header keys of a trajectory file: (key, required, check, what it must be).
_HEADER_KEYS: tuple[tuple[str, bool, Any, str], ...] = (
    ("env", False, lambda v: isinstance(v, str), "a string"),
    ("env_id", False, lambda v: isinstance(v, str), "a string"),
    ("seed", True, lambda v: v is None or _is_int(v), "an integer or null"),
    ("has_frames", True, lambda v: isinstance(v, bool), "true or false"),
    ("policy_keys", True, _is_strs, "a list of strings"),
    ("meta", True, lambda v: isinstance(v, dict), "an object"),
    ("task_keys", False, lambda v: v is None or _is_strs(v), "a list of strings or null"),
    (
        "trials",
        False,
        lambda v: v is None or (isinstance(v, list) and all(isinstance(t, dict) for t in v)),
        "a list of objects or null",
    ),
    ("dt", False, lambda v: v is None or _is_number(v), "a number or null"),
    ("substeps", False, lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
)
#: The keys of one layer in a header's ``activity`` (format 2+) or ``layers`` (format 1).
_LAYER_KEYS: tuple[tuple[str, bool, Any, str], ...] = (
    ("name", True, lambda v: isinstance(v, str), "a string"),
    ("kind", True, lambda v: isinstance(v, str), "a string"),
    ("size", True, lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    ("threshold", False, lambda v: v is None or _is_number(v), "a number or null"),
    (
        "sign",
        False,
        lambda v: v is None or (isinstance(v, list) and all(_is_int(x) for x in v)),
        "a list of ±1 or null",
    ),
)


def _bad_keys(d: dict[str, Any], keys: Any, where: str) -> str | None:
    for key, required, ok, what in keys:
        if key not in d:
            if required:
                return f"{where} lacks {key!r}"
        elif not ok(d[key]):
            return f"{where} {key}={d[key]!r} is not {what}"
    return None


def _bad_header(header: Any) -> str | None:
    """What is wrong with the header of a trajectory file (format and version checked), or
    None when every key :meth:`Trajectory.load` reads has the type it needs."""
    why = _bad_keys(header, _HEADER_KEYS, "header")
    if why:
        return why
    version = header["version"]
    layers_key, layer_keys = ("activity", (*_LAYER_KEYS, ("fields", True, _is_strs, "strings")))
    if version < 2:
        if not _is_strs(header.get("activity_keys")):
            return "header activity_keys is not a list of strings"
        layers_key, layer_keys = "layers", _LAYER_KEYS
    layers = header.get(layers_key)
    if not isinstance(layers, list):
        return f"header {layers_key}={layers!r} is not a list of layers"
    for i, layer in enumerate(layers):
        if not isinstance(layer, dict):
            return f"header {layers_key}[{i}]={layer!r} is not an object"
        why = _bad_keys(layer, layer_keys, f"header {layers_key}[{i}]")
        if why:
            return why
    return None


def _read_header(data: Any, path: Path) -> dict[str, Any]:
    """The checked header of an open trajectory file.

    Raises:
        UserError: not an snrl trajectory, a newer format, or a header key of the wrong type.
        KeyError, ValueError: no header entry, or one that is not JSON text.
    """
    raw = data["header"]
    if raw.ndim != 0 or raw.dtype.kind != "U":
        raise UserError(
            f"{path} is not a snrl trajectory (its header is a {raw.dtype} array of shape "
            f"{raw.shape}, not JSON text; save one with .save())"
        )
    header = load_json(str(raw[()]), what=f"the header of {path}")
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        raise UserError(f"{path} is not a snrl trajectory (save one with .save())")
    version = header.get("version", 1)
    if not _is_int(version) or version < 1:
        raise UserError(
            f"{path} has trajectory format version {version!r} (not an integer >= 1: the file "
            "is corrupt or not from Trajectory.save)"
        )
    if version > _VERSION:
        raise UserError(
            f"{path} has trajectory format version {version} "
            f"(this snrl reads up to {_VERSION}; upgrade snrl)"
        )
    why = _bad_header(header)
    if why:
        raise UserError(
            f"cannot read trajectory {path}: {why} (the file is corrupt or not from "
            "Trajectory.save)"
        )
    return header


def _load_activity(data: Any, header: dict[str, Any]) -> Activity:
    """The activity stored in an npz (format 2: per layer; format 1: flat keys)."""
    if int(header.get("version", 1)) < 2:
        flat = {k: data[f"activity_{i}"] for i, k in enumerate(header["activity_keys"])}
        return Activity.from_flat(flat, layer_dicts(header["layers"]))
    flat = {}
    for i, layer in enumerate(header["activity"]):
        for j, field in enumerate(layer["fields"]):
            flat[f"{layer['name']}.{field}"] = data[f"activity_{i}_{j}"]
    return Activity.from_flat(flat, layer_dicts(header["activity"]))


def _load_task(data: Any, header: dict[str, Any]) -> dict[str, np.ndarray] | None:
    """The per-step task arrays of a format-3 file (``None``: none, or an older file)."""
    keys = header.get("task_keys")
    if keys is None:
        return None
    return {k: data[f"task_{i}"] for i, k in enumerate(keys)}
