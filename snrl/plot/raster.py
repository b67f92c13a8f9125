"""Spike rasters of any (T, N) spike array: E/I grouped, sortable, time in s or steps."""

from __future__ import annotations

from typing import Any

import numpy as np

from snrl.errors import UserError
from snrl.palette import BG_COLOR, E_COLOR, I_COLOR, MUTED_COLOR, SPIKE_COLOR, rgb
from snrl.plot._util import as_2d, check_dt
from snrl.plot.labels import ei_counts, time_unit

__all__ = ["raster", "raster_order"]

SORTS = ("ei", "rate", "none")


def raster_order(spikes: Any, sign: Any = None, sort: Any = "ei") -> np.ndarray:
    """Display order of the neurons (top row first).

    Args:
        spikes: (T, N) spikes (anything > 0 is a spike).
        sign: (N,) ±1 Dale signs, or None.
        sort: ``"ei"`` (excitatory first, then inhibitory, index order within each),
            ``"rate"`` (E then I, each by descending firing rate), ``"none"`` (index
            order, E and I interleaved), or an explicit permutation of ``range(N)``.

    Raises:
        UserError: unknown ``sort`` or a permutation of the wrong neurons.
    """
    z = np.asarray(spikes) > 0
    n = z.shape[1]
    if not isinstance(sort, str):
        order = np.asarray(sort, dtype=np.int64).reshape(-1)
        if order.shape[0] != n or not np.array_equal(np.sort(order), np.arange(n)):
            raise UserError(f"sort= is not a permutation of the {n} neurons (give one index each)")
        return order
    if sort not in SORTS:
        raise UserError(f"sort={sort!r} (use one of {SORTS} or a permutation of the neurons)")
    if sort == "none":
        return np.arange(n)
    groups = [np.arange(n)] if sign is None else _ei_groups(sign, n)
    if sort == "rate":
        rate = z.mean(axis=0)
        groups = [g[np.argsort(-rate[g], kind="stable")] for g in groups]
    return np.concatenate(groups) if groups else np.arange(0)


def _ei_groups(sign: Any, n: int) -> list[np.ndarray]:
    s = np.asarray(sign).reshape(-1)
    if s.shape[0] != n:
        raise UserError(f"sign has {s.shape[0]} entries for {n} neurons (give one ±1 per neuron)")
    return [np.flatnonzero(s > 0), np.flatnonzero(s < 0)]


def raster_rgb(spikes: np.ndarray, sign: Any, order: np.ndarray) -> np.ndarray:
    """(N, T, 3) uint8 image of the raster rows in display order (white background)."""
    z = (np.asarray(spikes) > 0)[:, order].T  # (N, T)
    img = np.empty(z.shape + (3,), dtype=np.uint8)
    img[...] = rgb(BG_COLOR)
    if sign is None:
        img[z] = rgb(SPIKE_COLOR)
        return img
    exc = (np.asarray(sign).reshape(-1)[order] > 0)[:, None]
    img[z & exc] = rgb(E_COLOR)
    img[z & ~exc] = rgb(I_COLOR)
    return img


def raster(
    ax: Any,
    spikes: Any,
    *,
    sign: Any = None,
    dt: float | None = None,
    sort: Any = "ei",
    t0: float = 0.0,
    title: str | None = None,
    batch: int = 0,
) -> np.ndarray:
    """Draw a spike raster on a matplotlib ``ax``; returns the display order of the neurons.

    Excitatory spikes are :data:`~snrl.palette.E_COLOR`, inhibitory ones
    :data:`~snrl.palette.I_COLOR` (one colour without ``sign``). The E and I blocks are
    labelled with their neuron counts on the right edge and separated by a line. Every
    neuron is one row of the same height.

    Args:
        ax: a matplotlib Axes.
        spikes: (T, N) spikes (0/1, bool, counts), or (T, B, N) with ``batch`` picking B.
        sign: (N,) ±1 Dale sign of each neuron, or None.
        dt: seconds per row; the time axis is in seconds when given, else in steps.
        sort: neuron order, see :func:`raster_order`.
        t0: time (s, or step) of the first row.
        title: axes title (e.g. :func:`snrl.plot.labels.layer_label`).
        batch: the batch row of a (T, B, N) array.

    Shape:
        spikes: (T, N) or (T, B, N).
    """
    z = as_2d(spikes, "spikes", batch=batch)
    if sign is not None and hasattr(sign, "detach"):
        sign = sign.detach().cpu().numpy()
    dt = check_dt(dt)
    t, n = z.shape
    order = raster_order(z, sign, sort)
    scale, xlabel = time_unit(dt)
    x0, x1 = t0 - 0.5 * scale, t0 + (t - 0.5) * scale
    ax.imshow(
        raster_rgb(z, sign, order),
        aspect="auto",
        interpolation="antialiased" if t > 2000 else "nearest",
        extent=(x0, x1, n - 0.5, -0.5),
    )
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"neuron ({n})")
    counts = ei_counts(sign)
    if counts is not None and sort != "none":
        n_e, n_i = counts
        if 0 < n_e < n:
            ax.axhline(n_e - 0.5, color=MUTED_COLOR, lw=0.6)
        for text, mid, color in ((f"{n_e} E", (n_e - 1) / 2, E_COLOR),
                                 (f"{n_i} I", n_e + (n_i - 1) / 2, I_COLOR)):  # fmt: skip
            if text[0] != "0":
                ax.annotate(
                    text, (1.0, mid), xycoords=("axes fraction", "data"), xytext=(4, 0),
                    textcoords="offset points", va="center", ha="left", color=color,
                    fontweight="bold", fontsize="small",
                )  # fmt: skip
    if title:
        ax.set_title(title, loc="left", fontsize="medium")
    return order
