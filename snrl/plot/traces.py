"""Membrane-potential (or any per-unit) traces, with the spike threshold labelled."""

from __future__ import annotations

from typing import Any

import numpy as np

from snrl.errors import UserError
from snrl.palette import MUTED_COLOR, group_styles
from snrl.plot._util import as_2d, check_dt
from snrl.plot.labels import time_unit

__all__ = ["pick_units", "traces"]


def pick_units(spikes: Any, m: int) -> np.ndarray:
    """``m`` neurons whose threshold crossings show best: those spiking on about half of
    the steps first (rate·(1 − rate) largest); silent or always-on ones last."""
    rate = (np.asarray(spikes) > 0).mean(axis=0)
    return np.argsort(-(rate * (1 - rate)), kind="stable")[:m]


def traces(
    ax: Any,
    v: Any,
    *,
    units: Any = None,
    threshold: float | None = None,
    dt: float | None = None,
    t0: float = 0.0,
    ylabel: str = "membrane potential",
    batch: int = 0,
    legend: bool = True,
) -> list[Any]:
    """Draw traces of a few units on ``ax``; returns the matplotlib lines.

    Each unit gets a colour/linestyle of :func:`snrl.palette.group_styles` and a
    legend entry ``neuron <index>``. The threshold is a dashed grey line labelled
    ``threshold <value>`` inside the axes at its right end. The x-limits are those of
    :func:`~snrl.plot.raster.raster` for the same ``t0``/``dt`` and length, so a raster
    and traces stacked in one column line up in time.

    Args:
        ax: a matplotlib Axes.
        v: (T, N) values (or (T, B, N) with ``batch``).
        units: indices of the units to draw (default: the first three).
        threshold: spike threshold to draw, or None.
        dt: seconds per row (time axis in s), or None (steps).
        t0: time of the first row (s, or step).
        ylabel: y-axis label.
        batch: the batch row of a (T, B, N) array.
    """
    x = as_2d(v, "v", batch=batch).astype(np.float64, copy=False)
    dt = check_dt(dt)
    t, n = x.shape
    units = np.arange(min(3, n)) if units is None else np.asarray(units, dtype=np.int64)
    if units.size and (units.min() < 0 or units.max() >= n):
        raise UserError(f"units {units.tolist()} out of range (the array has {n} units)")
    scale, xlabel = time_unit(dt)
    time = t0 + np.arange(t) * scale
    lines = []
    for (color, ls), u in zip(group_styles(len(units)), units):
        (line,) = ax.plot(time, x[:, u], color=color, ls=ls, lw=1.2, label=f"neuron {int(u)}")
        lines.append(line)
    # the same time limits as :func:`snrl.plot.raster.raster` (row k spans k ± 1/2 step),
    # so a raster stacked above these traces lines up step for step
    ax.set_xlim(t0 - 0.5 * scale, t0 + (t - 0.5) * scale)
    if threshold is not None:
        ax.axhline(threshold, ls="--", lw=1.0, color=MUTED_COLOR)
        lo, hi = ax.get_ylim()
        below = threshold > (lo + hi) / 2  # the label on the side with more room
        # inside the axes: right-aligned at the right edge, just below (or above) the line
        ax.annotate(
            f"threshold {threshold:g}", (1.0, threshold), xycoords=("axes fraction", "data"),
            xytext=(-4, -2 if below else 2), textcoords="offset points", ha="right",
            va="top" if below else "bottom", color=MUTED_COLOR, fontsize="small", zorder=5,
            bbox=dict(facecolor="white", alpha=0.8, edgecolor="none", pad=1.0),
        )  # fmt: skip
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if legend and lines:
        ax.legend(loc="upper left", fontsize="small", frameon=False, ncol=min(len(lines), 4))
    return lines
