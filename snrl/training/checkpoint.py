"""Checkpoints: nested dicts of tensors and plain values, written atomically, loaded safely.

A checkpoint file is ``torch.save({"format": "snrl-checkpoint", "version": 1,
"payload": payload})``. Only tensors, ``int``/``float``/``bool``/``str``/``None`` and
lists/tuples/dicts of them are allowed, so it loads with ``torch.load(weights_only=True)``
and never runs pickled code.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from snrl.errors import UserError
from snrl.io import atomic_open

__all__ = ["load_checkpoint", "rng_state", "save_checkpoint", "set_rng_state"]

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


def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> None:
    """Write ``payload`` to ``path`` atomically (temp file + fsync + ``os.replace``).

    Args:
        path: Destination file; parent directories are created.
        payload: A dict of tensors, numbers, strings, ``None`` and nested lists/tuples/dicts.

    Raises:
        TypeError: If ``payload`` holds anything else (nothing is written).
    """
    if not isinstance(payload, dict):
        raise TypeError(f"checkpoint payload must be a dict, got {type(payload).__name__}")
    _validate(payload, "payload")
    with atomic_open(path, "wb") as f:
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
        try:
            obj = torch.load(f, map_location="cpu", weights_only=True)
        except Exception as e:  # UnpicklingError, RuntimeError/OSError (bad zip), EOFError...
            text = str(e).strip()
            first = text.splitlines()[0][:200] if text else "file empty or truncated"
            raise UserError(
                f"checkpoint {path} is corrupt or not an snrl checkpoint ({type(e).__name__}: "
                f"{first}; re-create it or use another checkpoint)"
            ) from e
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
