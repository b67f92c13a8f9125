"""Checkpoints: nested dicts of tensors and plain values, written atomically, loaded safely.

A checkpoint file is ``torch.save({"format": "snrl-checkpoint", "version": 1,
"payload": payload})``. Only tensors, ``int``/``float``/``bool``/``str``/``None`` and
lists/tuples/dicts of them are allowed, so it loads with ``torch.load(weights_only=True)``
and never runs pickled code.
"""

from __future__ import annotations

import math
import os
import pickle
import random
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from snrl.envs.remote import is_remote_env
from snrl.errors import UserError
from snrl.io import atomic_open, deferred_signals

__all__ = [
    "algo_checkpoint_schema",
    "check_persistable",
    "check_schema",
    "corrupt_checkpoint",
    "generator_state_schema",
    "load_checkpoint",
    "read_algo_checkpoint",
    "rng_state",
    "rng_state_schema",
    "save_checkpoint",
    "set_rng_state",
]

_FORMAT = "snrl-checkpoint"
_VERSION = 1
_LEAVES = (torch.Tensor, int, float, bool, str, type(None))


def _validate(obj: Any, where: str) -> None:
    if isinstance(obj, _LEAVES):
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            if not isinstance(k, (str, int)):
                raise TypeError(f"checkpoint key {where}[{k!r}] must be str or int")
            _validate(v, f"{where}[{k!r}]")
        return
    if isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _validate(v, f"{where}[{i}]")
        return
    raise TypeError(
        f"checkpoint value {where} is a {type(obj).__module__}.{type(obj).__name__}; only "
        "tensors, int, float, bool, str, None and lists/tuples/dicts of them are allowed "
        "(convert numpy arrays with torch.as_tensor and numpy scalars with float()/int())"
    )


#: Options of a remote env that are secrets: snrl never writes them to a run's files.
SECRET_ENV_KWARGS = ("token",)


def _field(config: Any, name: str) -> Any:
    return config.get(name) if isinstance(config, Mapping) else getattr(config, name, None)


def check_persistable(config: Any) -> None:
    """Refuse a config that carries a remote env's secret (its ``token``) in ``env_kwargs``
    or a curriculum lesson's: a config is written whole to ``config.json`` and to every
    checkpoint, and docs/remote.md promises that the token never lands there.

    Args:
        config: An algorithm config (dataclass) or its dict (``config_to_dict``).

    Raises:
        UserError: naming the key and where the token goes instead.
    """
    if not is_remote_env(_field(config, "env")):
        return
    options = [_field(config, "env_kwargs")]
    options += [_field(lesson, "env_kwargs") for lesson in _field(config, "curriculum") or ()]
    keys = {k for kw in options if isinstance(kw, Mapping) for k in kw}
    found = sorted(keys & set(SECRET_ENV_KWARGS))
    if found:
        raise UserError(
            f"env_kwargs holds {', '.join(found)} for the remote env, which snrl would write "
            "to config.json and every checkpoint (give the token in the SNRL_ENV_TOKEN "
            "environment variable instead, see docs/remote.md)"
        )


def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` atomically (temp file + fsync + ``os.replace``).

    Args:
        path: Destination file; parent directories are created.
        payload: A dict of tensors, numbers, strings, ``None`` and nested lists/tuples/dicts.

    Raises:
        TypeError: If ``payload`` holds anything else (nothing is written).
        UserError: If its ``config`` holds a remote env's token (:func:`check_persistable`).
    """
    if not isinstance(payload, dict):
        raise TypeError(f"checkpoint payload must be a dict, got {type(payload).__name__}")
    _validate(payload, "payload")
    if isinstance(payload.get("config"), Mapping):
        check_persistable(payload["config"])
    # a signal inside torch.save would surface as its zip writer's RuntimeError: held
    with deferred_signals(), atomic_open(path, "wb") as f:
        torch.save({"format": _FORMAT, "version": _VERSION, "payload": payload}, f)


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint`, on the CPU, without pickled code.

    Args:
        path: The checkpoint file.

    Returns:
        The payload dict.

    Raises:
        UserError: If the file does not exist, or is corrupt, truncated, holds arbitrary
            pickled objects, or is not an snrl checkpoint.
    """
    path = Path(path)
    if not path.exists():
        raise UserError(
            f"checkpoint {path} does not exist (check the path; a run directory keeps them in "
            "checkpoints/best.pt and checkpoints/last.pt)"
        )
    if path.is_dir():
        raise UserError(f"checkpoint {path} is a directory (pass the .pt file inside it)")
    with open(path, "rb") as f:  # an unreadable file raises OSError here, as it should
        head = f.read(2)
        f.seek(0)
        try:
            with warnings.catch_warnings():  # torch warns about pickle protocols on stderr
                warnings.simplefilter("ignore")
                obj = torch.load(f, map_location="cpu", weights_only=True)
        except Exception as e:  # UnpicklingError, RuntimeError/OSError (bad zip), EOFError...
            text = str(e).strip()
            pickled = head[:1] == b"\x80" or head == b"PK"  # a pickle, or torch's zip of one
            if isinstance(e, pickle.UnpicklingError) and pickled and "weights only" in text.lower():
                # torch's own text ends in advice to load with weights_only=False: never that
                raise UserError(
                    f"checkpoint {path} is not a safe snrl checkpoint (it holds pickled Python "
                    "objects, which snrl never unpickles because that can run code; use a "
                    "checkpoint written by snrl)"
                ) from None
            first = text.splitlines()[0][:200] if text else "file empty or truncated"
            if "weights only" in text.lower():  # never quote torch's advice to load unsafely
                first = "not a file of tensors that loads without unpickling code"
            raise UserError(
                f"checkpoint {path} is corrupt or not an snrl checkpoint ({type(e).__name__}: "
                f"{first}; re-create it or use another checkpoint)"
            ) from None
    if (
        not isinstance(obj, dict)
        or obj.get("format") != _FORMAT
        or not isinstance(obj.get("payload"), dict)
    ):
        raise UserError(
            f"checkpoint {path} is corrupt or not an snrl checkpoint (it has no snrl header; "
            "pass a file written by snrl)"
        )
    if obj.get("version") != _VERSION:
        raise UserError(
            f"checkpoint {path} has format version {obj.get('version')!r}, this snrl reads "
            f"version {_VERSION} (use the snrl version that wrote it)"
        )
    return obj["payload"]


def rng_state() -> dict[str, Any]:
    """The global RNG states of python ``random``, numpy and torch (CPU, and CUDA if present).

    Returns:
        A dict of tensors and plain values (passes ``weights_only`` loading).
    """
    version, internal, gauss_next = random.getstate()
    np_name, np_keys, np_pos, np_has_gauss, np_cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": {
            "version": int(version),
            "internal": torch.tensor(internal, dtype=torch.int64),
            "gauss_next": gauss_next,
        },
        "numpy": {
            "name": str(np_name),
            "keys": torch.from_numpy(np.asarray(np_keys, dtype=np.int64)),
            "pos": int(np_pos),
            "has_gauss": int(np_has_gauss),
            "cached_gaussian": float(np_cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["torch_cuda"] = list(torch.cuda.get_rng_state_all())
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore the global RNG states captured by :func:`rng_state`.

    CUDA states are restored only when CUDA is available with the same device count.
    """
    py = state["python"]
    random.setstate(
        (int(py["version"]), tuple(int(v) for v in py["internal"].tolist()), py["gauss_next"])
    )
    npst = state["numpy"]
    np.random.set_state(
        (
            npst["name"],
            npst["keys"].numpy().astype(np.uint32),
            int(npst["pos"]),
            int(npst["has_gauss"]),
            float(npst["cached_gaussian"]),
        )
    )
    torch.set_rng_state(state["torch"])
    cuda = state.get("torch_cuda")
    if cuda is not None and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)


# ---- schema ---------------------------------------------------------------------------------
# A schema is a type (``int`` excludes bool; ``float`` accepts int), a tuple of schemas (any
# of them), a dict (required keys; a key ending in "?" is optional), or one of the classes
# below. :func:`check_schema` returns the first mismatch as text.


class TensorOf:
    """A tensor of ``dtype`` (None: any) and ``shape`` (None: any)."""

    def __init__(self, dtype: torch.dtype | None = None, shape: tuple[int, ...] | None = None):
        self.dtype, self.shape = dtype, shape

    def check(self, obj: Any, where: str) -> str | None:
        if not isinstance(obj, torch.Tensor):
            return f"{where} is a {type(obj).__name__}, not a tensor"
        if self.dtype is not None and obj.dtype != self.dtype:
            return f"{where} has dtype {obj.dtype}, expected {self.dtype}"
        if self.shape is not None and tuple(obj.shape) != self.shape:
            return f"{where} has shape {tuple(obj.shape)}, expected {self.shape}"
        return None


class ListOf:
    """A list or tuple whose items match ``item``."""

    def __init__(self, item: Any):
        self.item = item

    def check(self, obj: Any, where: str) -> str | None:
        if not isinstance(obj, (list, tuple)):
            return f"{where} is a {type(obj).__name__}, not a list"
        for i, v in enumerate(obj):
            err = check_schema(v, self.item, f"{where}[{i}]")
            if err:
                return err
        return None


class DictOf:
    """A dict with str keys whose values match ``value``."""

    def __init__(self, value: Any):
        self.value = value

    def check(self, obj: Any, where: str) -> str | None:
        if not isinstance(obj, dict):
            return f"{where} is a {type(obj).__name__}, not a dict"
        for k, v in obj.items():
            if not isinstance(k, str):
                return f"{where} has a non-string key {k!r}"
            err = check_schema(v, self.value, f"{where}[{k!r}]")
            if err:
                return err
        return None


class Where:
    """``schema`` and a predicate on the value; ``text`` says what the predicate wants."""

    def __init__(self, schema: Any, pred: Any, text: str):
        self.schema, self.pred, self.text = schema, pred, text

    def check(self, obj: Any, where: str) -> str | None:
        err = check_schema(obj, self.schema, where)
        if err:
            return err
        return None if self.pred(obj) else f"{where} must be {self.text}"


def _type_ok(obj: Any, tp: type) -> bool:
    if tp is int:
        return isinstance(obj, int) and not isinstance(obj, bool)
    if tp is float:
        return isinstance(obj, (int, float)) and not isinstance(obj, bool)
    return isinstance(obj, tp)


def _type_label(schema: Any) -> str:
    if isinstance(schema, tuple):
        return " or ".join(_type_label(s) for s in schema)
    if schema is type(None) or schema is None:
        return "None"
    if isinstance(schema, dict):
        return "dict"
    if isinstance(schema, type):
        return schema.__name__
    return type(schema).__name__


def check_schema(obj: Any, schema: Any, where: str = "checkpoint") -> str | None:
    """The first way ``obj`` does not match ``schema`` (e.g. ``"counters['env_step'] is a
    str, expected int"``), or None when it matches."""
    if schema is None:
        schema = type(None)
    if hasattr(schema, "check") and not isinstance(schema, type):
        return schema.check(obj, where)
    if isinstance(schema, tuple):
        errors = [check_schema(obj, s, where) for s in schema]
        if all(errors):
            kinds = [s for s in schema if isinstance(s, type) or s is None]
            if len(kinds) == len(schema):  # plain types: one combined message
                return f"{where} is a {type(obj).__name__}, expected {_type_label(schema)}"
            return errors[0]
        return None
    if isinstance(schema, dict):
        if not isinstance(obj, dict):
            return f"{where} is a {type(obj).__name__}, not a dict"
        for key, sub in schema.items():
            optional = key.endswith("?")
            name = key[:-1] if optional else key
            if name not in obj:
                if optional:
                    continue
                return f"{where}[{name!r}] is missing"
            err = check_schema(obj[name], sub, f"{where}[{name!r}]")
            if err:
                return err
        return None
    if isinstance(schema, type):
        if _type_ok(obj, schema):
            return None
        return f"{where} is a {type(obj).__name__}, expected {_type_label(schema)}"
    raise TypeError(f"bad schema {schema!r}")


def _in_range(lo: int, hi: int):
    def pred(v: Any) -> bool:
        if isinstance(v, torch.Tensor):
            return bool(v.numel() == 0 or (v.min() >= lo and v.max() < hi))
        return lo <= v < hi

    return pred


def rng_state_schema() -> dict[str, Any]:
    """The schema of :func:`rng_state`'s dict (sizes as this build of torch/numpy has them)."""
    torch_state = TensorOf(torch.uint8, tuple(torch.get_rng_state().shape))
    return {
        "python": {
            "version": int,
            "internal": Where(
                TensorOf(torch.int64, (625,)),
                lambda t: bool(
                    (t[:624] >= 0).all() and (t[:624] < 2**32).all() and 0 <= t[624] <= 624
                ),
                "625 integers: 624 in [0, 2**32) and a position in [0, 624]",
            ),
            "gauss_next": (float, None),
        },
        "numpy": {
            "name": Where(str, lambda s: s == "MT19937", "'MT19937'"),
            "keys": Where(TensorOf(torch.int64, (624,)), _in_range(0, 2**32), "in [0, 2**32)"),
            "pos": Where(int, _in_range(0, 625), "in [0, 624]"),
            "has_gauss": int,
            "cached_gaussian": float,
        },
        "torch": torch_state,
        "torch_cuda?": ListOf(TensorOf(torch.uint8)),
    }


def generator_state_schema() -> TensorOf:
    """The schema of a CPU ``torch.Generator().get_state()``."""
    return TensorOf(torch.uint8, tuple(torch.Generator().get_state().shape))


def algo_checkpoint_schema() -> dict[str, Any]:
    """The schema every algorithm checkpoint's payload must match before any of it is used
    (what :meth:`snrl.agents.base.Algorithm.save` writes)."""
    finite_nonneg = Where(float, lambda v: math.isfinite(v) and v >= 0, "finite and >= 0")
    return {
        "algo": str,
        "config": dict,
        "custom_backbones": bool,
        "agent": dict,  # contents: load_state_dict checks them against the built agent
        "optimizer": {"state": dict, "param_groups": ListOf(dict)},
        "counters": {
            "env_step": Where(int, lambda v: v >= 0, ">= 0"),
            "n_updates": Where(int, lambda v: v >= 0, ">= 0"),
            "best_eval": Where(float, lambda v: not math.isnan(v), "a number (not NaN)"),
            "wall_time": finite_nonneg,
        },
        "rng": rng_state_schema(),
        "generator": generator_state_schema(),
        "agent_generator?": generator_state_schema(),
        "extra?": dict,
    }


def corrupt_checkpoint(path: Any, what: str) -> UserError:
    """The error for a checkpoint that fails its schema or its agent."""
    return UserError(
        f"checkpoint {path} is corrupt or not an snrl checkpoint ({what}; re-create it or use "
        "another checkpoint)"
    )


def read_algo_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load an algorithm checkpoint safely and check it against
    :func:`algo_checkpoint_schema` before any of it is used.

    Raises:
        UserError: Not an snrl agent checkpoint, or corrupt (naming the first mismatch).
    """
    d = load_checkpoint(Path(path))
    if "algo" not in d or "config" not in d or "agent" not in d:
        raise UserError(f"{path} is not an snrl agent checkpoint (pass a checkpoints/*.pt file)")
    err = check_schema(d, algo_checkpoint_schema(), "payload")
    if err:
        raise corrupt_checkpoint(path, err)
    return d
