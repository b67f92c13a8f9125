"""Whole figures of a network's activity, for a bare network as for a recorded episode."""

from __future__ import annotations

import os
from typing import Any

from snrl.errors import UserError
from snrl.plot._util import as_2d, check_dt, new_figure, save_figure
from snrl.plot.histograms import rate_histogram
from snrl.plot.labels import layer_label
from snrl.plot.raster import raster
from snrl.plot.traces import pick_units, traces

__all__ = ["activity_figure", "save_figure"]


def activity_figure(
    activity: Any,
    *,
    dt: float | None = None,
    batch: int = 0,
    max_layers: int = 4,
    n_traces: int = 3,
    sort: Any = "ei",
    title: str | None = None,
    backbone: str | None = None,
    path: str | os.PathLike[str] | None = None,
) -> Any:
    """Rasters, membrane traces and rate histograms of a network's activity.

    Works on what any backbone's ``run`` returns (no trajectory needed)::

        res = net.run(x, net.initial_state(1))
        activity_figure(res.activity, dt=1e-3, path="activity.png")

    Rows: one raster per spiking layer (labelled "Layer 1: LIF, 80 neurons (64 E / 16 I)"),
    the membrane traces of ``n_traces`` neurons of the first spiking layer with its threshold,
    and one histogram of per-neuron rates per spiking layer (Hz when ``dt`` is given).

    Args:
        activity: a :class:`snrl.networks.Activity` (arrays (T, N) or (T, B, N)).
        dt: seconds per step of the arrays (time in s, rates in Hz), or None (steps).
        batch: the batch row drawn when arrays are (T, B, N).
        max_layers: at most this many spiking layers.
        n_traces: membrane traces drawn.
        sort: raster neuron order (see :func:`snrl.plot.raster.raster_order`).
        title: figure title.
        backbone: the backbone name, for labels when layer names say nothing.
        path: also save the figure there (.png, .pdf, .svg; atomic).

    Returns:
        The matplotlib :class:`~matplotlib.figure.Figure` (no pyplot involved).

    Raises:
        UserError: no spiking layer, bad ``dt``/``batch``/``sort``, unwritable ``path``.
    """
    dt = check_dt(dt)
    layers = [(i, a) for i, a in enumerate(activity) if a.kind == "spiking"][:max_layers]
    if not layers:
        raise UserError("the activity has no spiking layer (draw a spiking backbone's activity)")
    with_v = next(((i, a) for i, a in layers if a.v is not None), None)
    n_rows = len(layers) + (1 if with_v and n_traces else 0) + 1
    heights = [2.4] * len(layers) + ([1.6] if with_v and n_traces else []) + [1.8]
    fig = new_figure(9.0, 0.6 + sum(heights) + 0.35 * n_rows)
    grid = fig.add_gridspec(n_rows, len(layers), height_ratios=heights)
    axes = []
    for row, (i, layer) in enumerate(layers):
        ax = fig.add_subplot(grid[row, :])
        raster(ax, layer.spikes, sign=layer.sign, dt=dt, sort=sort, batch=batch,
               title=layer_label(layer, i, backbone=backbone))  # fmt: skip
        axes.append(ax)
    row = len(layers)
    if with_v and n_traces:
        i, layer = with_v
        ax = fig.add_subplot(grid[row, :], sharex=axes[0])
        units = pick_units(as_2d(layer.spikes, "spikes", batch=batch), n_traces)
        traces(ax, layer.v, units=units, threshold=layer.threshold, dt=dt, batch=batch)
        ax.set_title(f"Membrane potential, layer {i + 1}", loc="left", fontsize="medium")
        row += 1
    for col, (i, layer) in enumerate(layers):
        ax = fig.add_subplot(grid[row, col])
        rate_histogram(ax, layer.spikes, sign=layer.sign, dt=dt, batch=batch)
        ax.set_title(f"Firing rates, layer {i + 1}", loc="left", fontsize="medium")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        save_figure(fig, path)
    return fig
