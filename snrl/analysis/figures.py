"""Figures of the analysis, as matplotlib ``Figure`` objects (no pyplot state, no backend
change). Colours come from :func:`population_color` only, so one place decides them
(to be redirected to ``snrl.plot``'s palette)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from snrl.io import atomic_path
from snrl.palette import E_COLOR, I_COLOR, MUTED_COLOR, SPIKE_COLOR, group_styles

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


def _pop_legend(ax: Any, pops: Sequence[str], **kw: Any) -> None:
    """A legend naming the population colours (E: excitatory, I: inhibitory)."""
    names = {"E": "E (excitatory)", "I": "I (inhibitory)", "all": "no Dale signs"}
    handles = [Line2D([], [], color=population_color(p), lw=2, label=names[p]) for p in pops]
    ax.legend(handles=handles, fontsize=7, frameon=False, **kw)


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
            "neuron (E then I,\nby rate)" if layer.get("sign") is not None else "neuron\n(by rate)"
        )
        _pop_legend(ax, list(_pops(layer.get("sign"), n)), loc="upper right")
        ax.set_title(_layer_title(layer["name"], n, layer.get("sign")), fontsize=9)
    axes[-1].set_xlabel("time (s)" if dt is not None else "step")
    return fig


def rate_cv_figure(layers: Sequence[Mapping[str, Any]], rate_unit: str) -> Figure:
    """Histograms of the firing rates and ISI CVs per layer: E and I as step outlines
    (neither hides the other), counts of neurons (integers).

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
            kw = {
                "histtype": "step",
                "lw": 1.5,
                "color": population_color(pop),
                "label": f"{pop} ({idx.size} neurons)",
            }
            ax_r.hist(rate[idx], bins=r_bins, **kw)
            c = cv[idx]
            ax_c.hist(c[np.isfinite(c)], bins=c_bins, **kw)
        ax_r.set_xlabel(f"firing rate ({rate_unit})")
        ax_c.set_xlabel("ISI CV")
        ax_c.axvline(1.0, color="0.5", ls="--", lw=0.8)
        for ax in (ax_r, ax_c):
            ax.set_ylabel("neurons")
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax.legend(fontsize=7, frameon=False)
        ax_r.set_title(_layer_title(layer["name"], rate.size, layer.get("sign")), fontsize=9)
    return fig


def ei_currents_figure(
    name: str,
    currents: Mapping[str, np.ndarray],
    neurons: Sequence[tuple[int, str]],
    dt: float | None,
    max_steps: int = 300,
    threshold: float | None = None,
) -> Figure:
    """Excitatory, inhibitory, external and net input current of a few neurons over time.

    Args:
        name: the panel title's layer label (e.g. ``"policy: lif0"``).
        currents: ``{"exc", "inh", "ext"}`` (T, N) from
            :func:`snrl.analysis.currents.synaptic_currents`.
        neurons: ``(index, population)`` of each neuron shown (population ``"E"``, ``"I"``
            or ``"all"``), one row each.
        dt: neuron step in seconds, or None.
        threshold: the layer's spike threshold, stated with the unit.

    The currents are in membrane-potential units added per neuron step (the potential is
    dimensionless: a neuron spikes when it reaches ``threshold``).
    """
    fig = Figure(figsize=(8, 1.6 * len(neurons) + 0.8), layout="constrained")
    axes = fig.subplots(len(neurons), 1, squeeze=False, sharex=True)[:, 0]
    e, i, x = (np.asarray(currents[k])[:max_steps] for k in ("exc", "inh", "ext"))
    t = np.arange(e.shape[0]) * (dt if dt is not None else 1)
    for ax, (j, pop) in zip(axes, neurons):
        ax.plot(t, e[:, j], color=population_color("E"), lw=0.8, label="from E neurons")
        ax.plot(t, i[:, j], color=population_color("I"), lw=0.8, label="from I neurons")
        ax.plot(t, x[:, j], color=MUTED_COLOR, lw=0.8, label="external (input, bias)")
        ax.plot(t, e[:, j] + i[:, j] + x[:, j], color="k", lw=0.8, label="net")
        ax.axhline(0, color="0.85", lw=0.5)
        kind = {"E": "excitatory", "I": "inhibitory"}.get(pop, "no Dale sign")
        ax.set_ylabel(f"neuron {j}\n({pop}: {kind})", fontsize=8)
    axes[0].legend(fontsize=7, ncol=4, frameon=False, loc="upper right")
    per = f"per {dt * 1e3:g} ms neuron step" if dt is not None else "per neuron step"
    thr = f", threshold {threshold:g}" if threshold is not None else ""
    axes[0].set_title(
        f"{name}: input currents into E and I neurons (the most active of each)\n"
        f"membrane-potential units {per} (dimensionless{thr})",
        fontsize=9,
    )
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
        f"{name}: tuning curves (E vermillion, I blue; {n_show} most tuned per input)",
        fontsize=9,
    )
    return fig


def psth_figure(
    name: str,
    panels: Mapping[str, Mapping[str, Any]],
    neurons: Sequence[tuple[int, str]],
    pre: int,
    dt: float | None,
    rate_scale: float,
    rate_unit: str,
    event: str,
) -> Figure:
    """PSTHs: one row per neuron (its population E/I in the title), one column per way of
    grouping the trials (ground truth, choice), one line per condition with its SEM band.

    Args:
        name: the layer label (e.g. ``"policy: lif0"``).
        panels: grouping (``"gt"``, ``"choice"``) -> ``{"psth": {cond: (L, N)}, "sem":
            {cond: (L, N)}, "n": {cond: trials}}``.
        neurons: ``(index, population)`` per row.
        pre: steps before the event in the window.
        dt: the duration of one activity row on the time axis: the task's seconds per env
            step over ``substeps`` for trial tasks (their clock), else the neuron step.
        rate_scale: 1 / neuron step, for Hz.

    Steps of the neighbouring trials are masked (each bin averages the trials covering it).
    """
    groupings = [g for g in panels if panels[g]["psth"]]
    cols = max(1, len(groupings))
    rows = max(1, len(neurons))
    fig = Figure(figsize=(3.2 * cols + 0.6, 1.5 * rows + 1.0), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True)
    step = dt if dt is not None else 1
    for c, g in enumerate(groupings):
        psth, sem, n = panels[g]["psth"], panels[g]["sem"], panels[g]["n"]
        styles = group_styles(len(psth))
        for r, (j, pop) in enumerate(neurons):
            ax = axes[r, c]
            for (key, y_all), (col, ls) in zip(psth.items(), styles):
                y = y_all[:, j] * rate_scale
                e = sem[key][:, j] * rate_scale
                t = (np.arange(y.size) - pre) * step
                ax.plot(t, y, lw=1.2, color=col, ls=ls, label=f"{g}={key} (n={n.get(key, 0)})")
                ax.fill_between(t, y - e, y + e, color=col, alpha=0.25, lw=0)
            ax.axvline(0, color=MUTED_COLOR, lw=0.6, ls="--")
            kind = {"E": "excitatory", "I": "inhibitory"}.get(pop, "no Dale sign")
            ax.set_title(f"neuron {j} ({pop}, {kind}); by {g}", fontsize=8)
            if r == 0:
                ax.legend(fontsize=6, frameon=False)
    fig.supxlabel(f"time from {event} ({'s' if dt is not None else 'steps'})", fontsize=8)
    fig.supylabel(f"rate ({rate_unit})", fontsize=8)
    fig.suptitle(
        f"{name}: PSTH aligned to the {event}, mean \u00b1 SEM across trials (n trials per "
        "condition)\nwithin each trial only: steps of the neighbouring trials are masked",
        fontsize=9,
    )
    return fig


def pca_figure(name: str, trajectories: Mapping[str, np.ndarray], ratio: np.ndarray) -> Figure:
    """Population trajectories per condition in the plane of PC1 and PC2 (start: circle).

    The trajectories cover only the time bins every condition's trials cover (within
    trials; the neighbouring trials are masked)."""
    fig = Figure(figsize=(4.5, 4), layout="constrained")
    ax = fig.subplots()
    keys = list(trajectories)
    for key, (col, ls) in zip(keys, group_styles(len(keys))):
        y = trajectories[key]
        yy = y[:, 1] if y.shape[1] > 1 else np.zeros(len(y))
        ax.plot(y[:, 0], yy, color=col, ls=ls, label=key)
        ax.plot(y[0, 0], yy[0], "o", color=col, ms=4)
    ax.set_xlabel(f"PC1 ({100 * ratio[0]:.0f} %)")
    if ratio.size > 1:
        ax.set_ylabel(f"PC2 ({100 * ratio[1]:.0f} %)")
    ax.legend(fontsize=7, frameon=False)
    ax.set_title(
        f"{name}: population trajectories from the trial start\n(within trials)", fontsize=9
    )
    return fig
