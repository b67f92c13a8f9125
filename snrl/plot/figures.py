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
    layer: Any = None,
    path: str | os.PathLike[str] | None = None,
) -> Any:
    """Rasters, membrane traces and rate histograms of a network's activity.

    Works on what any backbone's ``run`` returns (no trajectory needed)::

        res = net.run(x, net.initial_state(1))
        activity_figure(res.activity, dt=1e-3, path="activity.png")

    or on what a bare layer's ``run`` returns (pass the layer for its threshold, Dale signs
    and name)::

        lif = LIF(4, 20)
        activity_figure(lif.run(x, lif.initial_state(1)), layer=lif, dt=1e-3)

    Rows: one raster per spiking layer (labelled "Layer 1: LIF, 80 neurons (64 E / 16 I)"),
    the membrane traces of ``n_traces`` neurons of the first spiking layer with its threshold,
    and one histogram of per-neuron rates per spiking layer (Hz when ``dt`` is given).

    Args:
        activity: a :class:`snrl.networks.Activity` (arrays (T, N) or (T, B, N)), or a
            spiking layer's :class:`~snrl.layers.LayerOutput` (``layer.run(x, state)``).
        dt: seconds per step of the arrays (time in s, rates in Hz), or None (steps).
        batch: the batch row drawn when arrays are (T, B, N).
        max_layers: at most this many spiking layers.
        n_traces: membrane traces drawn.
        sort: raster neuron order (see :func:`snrl.plot.raster.raster_order`).
        title: figure title.
        backbone: the backbone name, for labels when layer names say nothing.
        layer: with a ``LayerOutput``, the layer that made it (threshold, ``recurrent_sign``);
            without it the raster has no E/I colours and the traces no threshold.
        path: also save the figure there (.png, .pdf, .svg; atomic).

    Returns:
        The matplotlib :class:`~matplotlib.figure.Figure` (no pyplot involved).

    Raises:
        UserError: no spiking layer (a leaky integrator's output has no spikes), bad
            ``dt``/``batch``/``sort``, unwritable ``path``.
    """
    dt = check_dt(dt)
    activity = _as_activity(activity, layer)
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


def _as_activity(activity: Any, layer: Any) -> Any:
    """``activity`` itself, or a one-layer Activity from a layer's ``LayerOutput``."""
    from snrl.layers.base import LayerOutput
    from snrl.networks.activity import Activity, LayerActivity

    if not isinstance(activity, LayerOutput):
        if layer is not None:
            raise UserError("layer= goes with a layer's run output (pass layer.run(...))")
        return activity
    out = activity.out
    if layer is not None and getattr(layer, "threshold", None) is None:
        raise UserError(
            f"{type(layer).__name__} has no spikes to draw (pass a spiking layer's output)"
        )
    if layer is None and not bool(((out == 0) | (out == 1)).all()):
        raise UserError(
            "this layer output has no spikes (values other than 0/1: a leaky integrator's "
            "membrane?); pass a spiking layer's run output"
        )
    # "LIFLayer" -> "lif", the name layer_label knows
    name = type(layer).__name__.removesuffix("Layer").lower() if layer is not None else "layer"
    sign = getattr(layer, "recurrent_sign", None)
    return Activity(
        [
            LayerActivity(
                name=name,
                kind="spiking",
                size=int(out.shape[-1]),
                spikes=out,
                v=activity.v,
                extra=dict(activity.traces),
                threshold=None if layer is None else float(layer.threshold),
                sign=None if sign is None else sign.detach().cpu(),
            )
        ]
    )
