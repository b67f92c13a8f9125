"""The comparison directory on disk: its manifest, its lock and the run status files.

``DIR/compare.json`` is the manifest: it marks ``DIR`` as a directory that ``snrl compare``
wrote (``"kind": "snrl compare"``) and records the request. A comparison writes into a
directory that does not exist, is empty, or holds such a manifest, and refuses any other
(nothing of the user's is overwritten). ``DIR/.compare.lock`` is held (``flock``) while a
comparison runs, so two comparisons never share ``DIR``. ``DIR/status/<run>.json`` records
each finished run: ``"done"`` with its results or ``"failed"`` with its error.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from snrl.errors import UserError
from snrl.io import check_no_links, hold_lock, write_json_atomic

__all__ = [
    "MANIFEST",
    "MANIFEST_KIND",
    "check_compare_dir",
    "check_existing_run",
    "jsonable",
    "lock",
    "read_status",
    "write_manifest",
    "write_status",
]

MANIFEST = "compare.json"
MANIFEST_KIND = "snrl compare"
_LOCK = ".compare.lock"


def jsonable(value: Any) -> Any:
    """``value`` with numpy scalars as Python numbers and non-finite floats as
    ``None`` (NaN) or ``"inf"`` / ``"-inf"``, so it is strict JSON."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (np.floating, np.integer)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _is_manifest(path: Path) -> bool:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    if not isinstance(data, dict):
        return False
    if data.get("kind") == MANIFEST_KIND:
        return True
    # comparisons written before the manifest had a kind: the request's own keys
    keys = set(data)
    return {"algo", "backbones", "seeds", "steps"} <= keys and bool({"env", "env_id"} & keys)


def check_compare_dir(out: Path) -> None:
    """Refuse ``out`` unless a comparison may write there: it does not exist, is an empty
    directory (a stale lock file of ours counts as empty), or holds a compare manifest.

    Raises:
        UserError: ``out`` is a file, or a non-empty directory that no comparison wrote
            (the message lists what is there).
    """
    if not out.exists():
        return
    if not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory (choose another --out)")
    for name in ("runs", "status"):  # a crafted comparison: its runs would be written elsewhere
        check_no_links(out, name)
    if (out / "runs").is_dir():
        for run in sorted((out / "runs").iterdir()):
            check_no_links(out, Path("runs") / run.name)
    entries = sorted(p.name for p in out.iterdir() if p.name != _LOCK)
    if not entries or _is_manifest(out / MANIFEST):
        return
    shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
    raise UserError(
        f"--out {out} is not empty and is not an snrl compare directory (it holds {shown}; "
        f"no {MANIFEST} written by snrl compare) (choose a new or empty --out)"
    )


def write_manifest(out: Path, request: Mapping[str, Any]) -> None:
    """Write ``compare.json``: the marker and the request."""
    write_json_atomic(out / MANIFEST, jsonable({"kind": MANIFEST_KIND, **request}))


@contextlib.contextmanager
def lock(out: Path) -> Iterator[None]:
    """Hold ``out/.compare.lock`` (creating ``out``) while the block runs (see
    :func:`snrl.io.hold_lock`: never through a link; the holder is named).

    Raises:
        UserError: another comparison holds it.
    """
    out.mkdir(parents=True, exist_ok=True)
    with hold_lock(
        out / _LOCK,
        what=f"comparison directory {out}",
        hint="another `snrl compare` is running on it: wait for it, or use another --out",
    ):
        yield


def read_status(path: str | os.PathLike) -> dict[str, Any] | None:
    """A run's status record, or None when it is missing or torn."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def write_status(path: str | os.PathLike, record: Mapping[str, Any]) -> None:
    """Write a run's status record (atomically)."""
    write_json_atomic(path, jsonable(dict(record)))


def check_existing_run(run_dir: str | os.PathLike, config: Mapping[str, Any]) -> None:
    """An existing run directory must hold the same config (else it is another experiment).

    Raises:
        UserError: naming the keys that differ.
    """
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        return
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return  # torn or unreadable: the run is restarted afresh
    if not isinstance(stored, dict):
        return
    stored.pop("algo", None)

    def differs(key: str) -> bool:
        # a key asked as None is resolved by the run (dt: from the task) and saved resolved
        if key in config and config[key] is None and key in stored:
            return False
        return stored.get(key) != config.get(key)

    diff = sorted(k for k in set(stored) | set(config) if differs(k))
    if diff:
        raise UserError(
            f"run {run_dir} exists with a different config ({', '.join(diff)}) "
            "(use another --out, or delete that run directory)"
        )
