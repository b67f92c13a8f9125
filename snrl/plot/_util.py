"""Shared helpers of snrl.plot: array coercion, figures without pyplot, atomic saving."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np

from snrl.errors import UserError, positive_number
from snrl.io import atomic_write_bytes

FORMATS = ("png", "pdf", "svg")


def as_2d(x: Any, name: str, *, batch: int = 0) -> np.ndarray:
    """A (T, N) numpy array from a (T, N) or (T, B, N) array or tensor (row ``batch``)."""
    a = np.asarray(x.detach().cpu() if hasattr(x, "detach") else x)
    if a.ndim == 3:
        if not 0 <= batch < a.shape[1]:
            raise UserError(f"batch={batch} but {name} has {a.shape[1]} rows (pick one of them)")
        a = a[:, batch]
    if a.ndim != 2:
        raise UserError(f"{name} has shape {a.shape} (give a time-first (T, N) or (T, B, N) array)")
    return a


def check_dt(dt: Any) -> float | None:
    """``dt`` in seconds per row, or None; a bad value is a user error."""
    return None if dt is None else positive_number("dt", dt, "seconds per step", "1e-3")


def new_figure(width: float, height: float, dpi: int = 100) -> Any:
    """A matplotlib Figure on its own Agg canvas (no pyplot, no global backend change)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Any, path: str | os.PathLike[str], *, dpi: int | None = None) -> Path:
    """Write ``fig`` to ``path`` (.png, .pdf or .svg by the extension), atomically.

    Raises:
        UserError: another extension, or a path that cannot be written.
    """
    out = Path(path)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise UserError(f"cannot save a figure as {os.fspath(path)!r} (use .png, .pdf or .svg)")
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=dpi)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out, buf.getvalue())
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc} (choose a writable path)") from exc
    return out
