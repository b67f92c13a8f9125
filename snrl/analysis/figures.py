"""Figures of the analysis, as matplotlib ``Figure`` objects (no pyplot state, no backend
change). Colours come from :func:`population_color` only, so one place decides them
(to be redirected to ``snrl.plot``'s palette)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from snrl.io import atomic_path
from snrl.palette import E_COLOR, I_COLOR, SPIKE_COLOR

__all__ = [
    "ei_currents_figure",
    "pca_figure",
    "population_color",
    "psth_figure",
    "raster_figure",
    "rate_cv_figure",
    "save_figure",
    "tuning_figure",
]

_COLORS = {"E": E_COLOR, "I": I_COLOR, "all": SPIKE_COLOR}


def population_color(pop: str) -> str:
    """The colour of a population: ``"E"`` (excitatory), ``"I"`` (inhibitory), ``"all"``."""
    return _COLORS.get(pop, _COLORS["all"])


def save_figure(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` atomically; the format follows the suffix (``.png``, ``.svg``)."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip("."), dpi=150, bbox_inches="tight")
    return path


def _pops(sign: Any, n: int) -> dict[str, np.ndarray]:
    if sign is None:
        return {"all": np.arange(n)}
    s = np.asarray(sign)
    return {"E": np.flatnonzero(s > 0), "I": np.flatnonzero(s < 0)}


def _layer_title(name: str, n: int, sign: Any) -> str:
    if sign is None:
        return f"{name}: {n} neurons"
    s = np.asarray(sign)
    return f"{name}: {n} neurons ({int((s > 0).sum())} E / {int((s < 0).sum())} I)"


def raster_figure(
    layers: Sequence[Mapping[str, Any]], dt: float | None, max_steps: int = 500
) -> Figure:
    """Spike raster of one episode per layer, neurons sorted by firing rate (highest on top)
    within E then I.

    Args:
        layers: dicts ``{"name", "spikes" (T, N), "sign" (N,) or None, "order" (N,) or None}``.
        dt: neuron step in seconds (time axis in s), or None (steps).
        max_steps: the first steps shown.
    """
    fig = Figure(figsize=(8, 2.2 * len(layers) + 0.6), layout="constrained")
    axes = fig.subplots(len(layers), 1, squeeze=False)[:, 0]
    for ax, layer in zip(axes, layers):
        s = np.asarray(layer["spikes"])[:max_steps]
        n = s.shape[1]
        rate = s.mean(0)
        row = 0
        step = dt if dt is not None else 1.0
        for pop, idx in _pops(layer.get("sign"), n).items():
            idx = idx[np.argsort(-rate[idx], kind="stable")]
            trains = [np.flatnonzero(s[:, j]) * step for j in idx]
            if trains:
                ax.eventplot(
                    trains,
                    lineoffsets=np.arange(row, row + len(trains)),
                    linelengths=0.8,
                    linewidths=max(0.4, min(1.5, 150.0 / max(s.shape[0], 1))),
                    colors=population_color(pop),
                )
            row += idx.size
        ax.set_ylim(row - 0.5, -0.5)
        ax.set_xlim(-0.5 * step, (s.shape[0] - 0.5) * step)
        ax.set_ylabel(
            "neuron (E red, I blue;\nby rate)"
            if layer.get("sign") is not None
            else "neuron (by rate)"
        )
        ax.set_title(_layer_title(layer["name"], n, layer.get("sign")), fontsize=9)
    axes[-1].set_xlabel("time (s)" if dt is not None else "step")
    return fig


def rate_cv_figure(layers: Sequence[Mapping[str, Any]], rate_unit: str) -> Figure:
    """Histograms of the firing rates and ISI CVs per layer, E and I overlaid.

    Args:
        layers: dicts ``{"name", "rate" (N,), "cv_isi" (N,), "sign"}``.
    """
    fig = Figure(figsize=(8, 2.4 * len(layers) + 0.4), layout="constrained")
    axes = fig.subplots(len(layers), 2, squeeze=False)
    for (ax_r, ax_c), layer in zip(axes, layers):
        rate, cv = np.asarray(layer["rate"]), np.asarray(layer["cv_isi"])
        pops = _pops(layer.get("sign"), rate.size)
        r_bins = np.linspace(0, max(float(rate.max()), 1e-9), 26)
        c_bins = np.linspace(0, max(float(np.nanmax(cv)) if np.isfinite(cv).any() else 1, 1), 26)
        for pop, idx in pops.items():
            kw = {"alpha": 0.6, "color": population_color(pop), "label": f"{pop} ({idx.size})"}
            ax_r.hist(rate[idx], bins=r_bins, **kw)
            c = cv[idx]
            ax_c.hist(c[np.isfinite(c)], bins=c_bins, **kw)
        ax_r.set_xlabel(f"firing rate ({rate_unit})")
        ax_c.set_xlabel("ISI CV")
        ax_c.axvline(1.0, color="0.5", ls="--", lw=0.8)
        for ax in (ax_r, ax_c):
            ax.set_ylabel("neurons")
            ax.legend(fontsize=7, frameon=False)
        ax_r.set_title(_layer_title(layer["name"], rate.size, layer.get("sign")), fontsize=9)
    return fig


def ei_currents_figure(
    name: str,
    currents: Mapping[str, np.ndarray],
    neurons: Sequence[int],
    dt: float | None,
    max_steps: int = 300,
) -> Figure:
    """Excitatory, inhibitory, external and net input current of a few neurons over time."""
    fig = Figure(figsize=(8, 1.6 * len(neurons) + 0.6), layout="constrained")
    axes = fig.subplots(len(neurons), 1, squeeze=False, sharex=True)[:, 0]
    e, i, x = (np.asarray(currents[k])[:max_steps] for k in ("exc", "inh", "ext"))
    t = np.arange(e.shape[0]) * (dt if dt is not None else 1)
    for ax, j in zip(axes, neurons):
        ax.plot(t, e[:, j], color=population_color("E"), lw=0.8, label="excitatory")
        ax.plot(t, i[:, j], color=population_color("I"), lw=0.8, label="inhibitory")
        ax.plot(t, x[:, j], color="0.6", lw=0.8, label="external")
        ax.plot(t, e[:, j] + i[:, j] + x[:, j], color="k", lw=0.8, label="net")
        ax.axhline(0, color="0.8", lw=0.5)
        ax.set_ylabel(f"neuron {j}")
    axes[0].legend(fontsize=7, ncol=4, frameon=False, loc="upper right")
    axes[0].set_title(f"{name}: input currents (membrane units per step)", fontsize=9)
    axes[-1].set_xlabel("time (s)" if dt is not None else "step")
    return fig


def tuning_figure(
    name: str,
    centres: Sequence[np.ndarray],
    curves: Sequence[np.ndarray],
    sign: Any,
    labels: Sequence[str],
    rate_scale: float,
    rate_unit: str,
    n_show: int = 6,
) -> Figure:
    """Tuning curves: mean rate vs each observation dimension, for the ``n_show`` neurons
    whose curve varies most per dimension (E and I coloured)."""
    d = len(centres)
    fig = Figure(figsize=(2.6 * d, 2.6), layout="constrained")
    axes = fig.subplots(1, d, squeeze=False)[0]
    s = None if sign is None else np.asarray(sign)
    for j, ax in enumerate(axes):
        c = np.asarray(curves[j]) * rate_scale  # (bins, N)
        if not c.size:
            ax.set_xlabel(labels[j])
            continue
        spread = c.max(0) - c.min(0)
        for k in np.argsort(-np.asarray(spread))[:n_show]:
            pop = "all" if s is None else ("E" if s[k] > 0 else "I")
            ax.plot(centres[j], c[:, k], "-o", ms=2, lw=1, color=population_color(pop))
        ax.set_xlabel(labels[j])
    axes[0].set_ylabel(f"rate ({rate_unit})")
    fig.suptitle(
        f"{name}: tuning curves (E red, I blue; {n_show} most tuned per input)", fontsize=9
    )
    return fig


def psth_figure(
    name: str,
    psth: Mapping[str, np.ndarray],
    neurons: Sequence[int],
    pre: int,
    dt: float | None,
    rate_scale: float,
    rate_unit: str,
    event: str,
) -> Figure:
    """A grid of PSTHs: one panel per neuron, one line per condition.

    ``dt`` here is the duration of one activity row on the time axis: the task's seconds
    per env step over ``substeps`` for trial tasks (their clock), else the neuron step;
    rates are scaled by ``rate_scale`` (1 / neuron step, for Hz)."""
    cols = 4
    rows = max(1, int(np.ceil(len(neurons) / cols)))
    fig = Figure(figsize=(2.4 * cols, 1.9 * rows + 0.5), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    cmap = __import__("matplotlib").colormaps["viridis"]
    keys = list(psth)
    for ax, j in zip(axes, neurons):
        for c, key in enumerate(keys):
            y = psth[key][:, j] * rate_scale
            t = (np.arange(y.size) - pre) * (dt if dt is not None else 1)
            ax.plot(t, y, lw=1, color=cmap(c / max(len(keys) - 1, 1)), label=key)
        ax.axvline(0, color="0.6", lw=0.6, ls="--")
        ax.set_title(f"neuron {j}", fontsize=8)
    for ax in axes[len(neurons) :]:
        ax.set_visible(False)
    axes[0].legend(fontsize=6, frameon=False)
    fig.supxlabel(f"time from {event} ({'s' if dt is not None else 'steps'})", fontsize=8)
    fig.supylabel(f"rate ({rate_unit})", fontsize=8)
    fig.suptitle(f"{name}: PSTH by condition", fontsize=9)
    return fig


def pca_figure(name: str, trajectories: Mapping[str, np.ndarray], ratio: np.ndarray) -> Figure:
    """Population trajectories per condition in the plane of PC1 and PC2 (start: circle)."""
    fig = Figure(figsize=(4.5, 4), layout="constrained")
    ax = fig.subplots()
    cmap = __import__("matplotlib").colormaps["viridis"]
    keys = list(trajectories)
    for c, key in enumerate(keys):
        y = trajectories[key]
        col = cmap(c / max(len(keys) - 1, 1))
        ax.plot(y[:, 0], y[:, 1] if y.shape[1] > 1 else np.zeros(len(y)), color=col, label=key)
        ax.plot(y[0, 0], y[0, 1] if y.shape[1] > 1 else 0, "o", color=col, ms=4)
    ax.set_xlabel(f"PC1 ({100 * ratio[0]:.0f} %)")
    if ratio.size > 1:
        ax.set_ylabel(f"PC2 ({100 * ratio[1]:.0f} %)")
    ax.legend(fontsize=7, frameon=False)
    ax.set_title(f"{name}: population trajectories", fontsize=9)
    return fig
