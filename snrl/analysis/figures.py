"""Figures of the analysis, as matplotlib ``Figure`` objects (no pyplot state, no backend
change). Colours come from :mod:`snrl.palette` (:func:`population_color` for E and I), so
one place decides them. On a trial task the raster and current figures mark each trial's
start (a vertical line) and its periods (light bands named in a legend below the figure,
:func:`trial_markers`). For a paper or a talk see :mod:`snrl.analysis.style`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from snrl.analysis.trials import period_steps
from snrl.io import atomic_path
from snrl.palette import (
    E_COLOR,
    I_COLOR,
    MUTED_COLOR,
    SPIKE_COLOR,
    group_styles,
    period_colors,
)

__all__ = [
    "connectivity_figure",
    "decoding_figure",
    "ei_currents_figure",
    "pca_figure",
    "population_color",
    "psth_figure",
    "raster_figure",
    "rate_cv_figure",
    "save_figure",
    "trial_markers",
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


def trial_markers(
    trials: Sequence[Mapping[str, Any]] | None, substeps: int = 1, env_dt: float | None = None
) -> dict[str, list[Any]] | None:
    """Where the trials of an episode and their periods lie on the time axis of the raster
    and current figures, in neuron steps (rows; env step k covers rows ``k * substeps ..
    (k + 1) * substeps - 1``).

    Args:
        trials: the trajectory's trial records (:mod:`snrl.envs.trials`); None or empty:
            not a trial task (no markers).
        substeps: neuron steps per env step.
        env_dt: the task's seconds per env step (places the periods; None: starts only).

    Returns:
        ``{"starts": [first row of each trial], "periods": [(name, first row, stop row)],
        "names": [period names in the task's order]}`` (periods by
        :func:`snrl.analysis.trials.period_steps`; a period without a step, like the
        fixation NeuroGym's reset consumed, is left out, its name kept), or None.
    """
    if not trials:
        return None
    k = int(substeps)
    starts, periods, names = [], [], {}
    for trial in trials:
        starts.append(int(trial["start_step"]) * k)
        names.update(dict.fromkeys(str(n) for n in trial.get("periods") or {}))
        for name, (a, b) in period_steps(trial, env_dt).items():
            periods.append((name, a * k, b * k))
    return {"starts": starts, "periods": periods, "names": list(names)}


def _draw_trial_markers(ax: Any, markers: Mapping[str, Any] | None, step: float, n: int) -> None:
    """Light bands per trial period and a line per trial start, on rows ``0 .. n - 1`` of
    an axis whose row r sits at ``r * step`` (a boundary between rows at ``(r - 0.5) *
    step``). Artists carry ``gid`` ``"period:<name>"`` and ``"trial_start"``."""
    if not markers:
        return
    colors = period_colors(markers["names"])
    for name, a, b in markers["periods"]:
        if a < n:
            x0, x1 = (a - 0.5) * step, (min(b, n) - 0.5) * step
            ax.axvspan(x0, x1, color=colors[name], lw=0, zorder=0, gid=f"period:{name}")
    for r in markers["starts"]:
        if 0 <= r < n:
            x = (r - 0.5) * step
            ax.axvline(x, color=MUTED_COLOR, lw=0.8, zorder=0.5, gid="trial_start")


def _trial_legend(fig: Figure, markers: Mapping[str, Any] | None, n: int) -> None:
    """A legend below the figure naming the period bands and the trial-start line shown."""
    if not markers:
        return
    from matplotlib.patches import Patch

    shown = {p[0] for p in markers["periods"] if p[1] < n}
    colors = period_colors(markers["names"])
    handles: list[Any] = [Line2D([], [], color=MUTED_COLOR, lw=0.8, label="trial start")]
    handles += [
        Patch(facecolor=colors[name], edgecolor=MUTED_COLOR, lw=0.5, label=f"{name} period")
        for name in markers["names"]
        if name in shown
    ]
    fig.legend(
        handles=handles,
        loc="outside lower center",
        ncol=min(len(handles), 6),
        fontsize=7,
        frameon=False,
    )


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
    layers: Sequence[Mapping[str, Any]],
    dt: float | None,
    max_steps: int = 500,
    markers: Mapping[str, Any] | None = None,
) -> Figure:
    """Spike raster of one episode per layer, neurons sorted by firing rate (highest on top)
    within E then I.

    Args:
        layers: dicts ``{"name", "spikes" (T, N), "sign" (N,) or None, "order" (N,) or None}``.
        dt: neuron step in seconds (time axis in s), or None (steps).
        max_steps: the first steps shown.
        markers: a trial task's :func:`trial_markers` (trial starts and period bands), or
            None.
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
        _draw_trial_markers(ax, markers, step, s.shape[0])
        ax.set_ylim(row - 0.5, -0.5)
        ax.set_xlim(-0.5 * step, (s.shape[0] - 0.5) * step)
        ax.set_ylabel(
            "neuron (E then I,\nby rate)" if layer.get("sign") is not None else "neuron\n(by rate)"
        )
        _pop_legend(ax, list(_pops(layer.get("sign"), n)), loc="upper right")
        ax.set_title(_layer_title(layer["name"], n, layer.get("sign")), fontsize=9)
    axes[-1].set_xlabel("time (s)" if dt is not None else "step")
    if len(layers):
        _trial_legend(fig, markers, np.asarray(layers[0]["spikes"])[:max_steps].shape[0])
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
    markers: Mapping[str, Any] | None = None,
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
        markers: a trial task's :func:`trial_markers`, or None.

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
        _draw_trial_markers(ax, markers, dt if dt is not None else 1.0, t.size)
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
    _trial_legend(fig, markers, t.size)
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


def _arr(values: Sequence[Any]) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _label_order(v: str) -> tuple[int, Any]:
    """Sort key of a label ``"key=value"`` or ``"value"``: numbers by value, then text."""
    try:
        return (0, float(v.split("=", 1)[-1]))
    except ValueError:
        return (1, v)


def _group_order(g: str) -> tuple[Any, ...]:
    """Sort key of a group label ``"gt=1, coh=6.4"``: part by part, numbers by value."""
    return tuple(_label_order(part) for part in g.split(", "))


def _choice_axis_styles(groups: Sequence[str]) -> dict[str, tuple[str, Any]]:
    """Colour by the last ``key=value`` of a group label (e.g. the coherence), line style by
    the rest (e.g. the ground truth): ``"gt=1, coh=6.4"``."""
    from snrl.palette import GROUP_COLORS, LINESTYLES

    def split(g: str) -> tuple[str, str]:
        head, _, last = g.rpartition(", ")
        return head, last

    lasts = sorted({split(g)[1] for g in groups}, key=_label_order)
    heads = sorted({split(g)[0] for g in groups})
    return {
        g: (
            GROUP_COLORS[lasts.index(split(g)[1]) % len(GROUP_COLORS)],
            LINESTYLES[heads.index(split(g)[0]) % len(LINESTYLES)],
        )
        for g in groups
    }


def decoding_figure(name: str, dynamics: Mapping[str, Any]) -> Figure:
    """Time-resolved decoding of each task variable (cross-validated accuracy +- SEM over
    folds, the label-shuffle null's mean and 95th percentile, chance), the held-out choice
    axis by stimulus condition, and the cross-validated PCA spectrum.

    Args:
        name: the layer label (e.g. ``"policy: lif0"``).
        dynamics: :meth:`snrl.analysis.run.NetworkAnalysis.dynamics`.
    """
    dec = dynamics["decoding"]
    step = dynamics.get("bin_seconds")
    unit = "s" if step else "env steps"
    step = step or 1.0
    n_top = max(1, len(dec))
    fig = Figure(figsize=(max(8.0, 3.0 * n_top), 6.4), layout="constrained")
    grid = fig.add_gridspec(2, max(n_top, 2))
    for c, (var, res) in enumerate(dec.items()):
        ax = fig.add_subplot(grid[0, c])
        acc, sem = _arr(res["accuracy"]), _arr(res["sem"])
        t = (np.arange(acc.size) + 1) * step  # bin k: activity up to the end of step k
        ax.plot(t, acc, color=SPIKE_COLOR, lw=1.5, label="decoder (held out)")
        ax.fill_between(t, acc - sem, acc + sem, color=SPIKE_COLOR, alpha=0.2, lw=0)
        if any(v is not None for v in res["null_mean"]):
            ax.plot(t, _arr(res["null_mean"]), color=MUTED_COLOR, lw=1, label="shuffled labels")
            ax.plot(
                t, _arr(res["null_q95"]), color=MUTED_COLOR, lw=0.8, ls="--", label="shuffle 95 %"
            )
        ax.plot(t, _arr(res["chance"]), color=MUTED_COLOR, lw=0.8, ls=":", label="chance")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(f"time from trial start ({unit})", fontsize=8)
        ax.set_ylabel("accuracy", fontsize=8)
        n = [v for v in res["n"] if v is not None]
        classes = ", ".join(res["classes"][:6])
        ax.set_title(f"{var} ({classes}; {max(n) if n else 0} trials)", fontsize=8)
        if c == 0:
            ax.legend(fontsize=6, frameon=False, loc="lower right")
    ax = fig.add_subplot(grid[1, 0])
    ca = dynamics.get("choice_axis")
    if ca:
        styles = _choice_axis_styles(list(ca["mean"]))
        for g in sorted(ca["mean"], key=_group_order):
            m = ca["mean"][g]
            m, e = np.asarray(_arr(m)), np.asarray(_arr(ca["sem"][g]))
            t = (np.arange(m.size) + 1) * step
            col, ls = styles[g]
            ax.plot(t, m, color=col, ls=ls, lw=1.2, label=f"{g} (n={ca['n'][g]})")
            ax.fill_between(t, m - e, m + e, color=col, alpha=0.15, lw=0)
        ax.axhline(0, color="0.85", lw=0.5)
        a, b = ca["axis_labels"]
        ax.set_ylabel(f"choice axis (-1: choice {a}, +1: {b})", fontsize=8)
        if ca["mean"]:
            ax.legend(fontsize=5, frameon=False, ncol=2)
    ax.set_xlabel(f"time from trial start ({unit})", fontsize=8)
    ax.set_title("held-out choice axis, mean \u00b1 SEM", fontsize=8)
    ax = fig.add_subplot(grid[1, 1])
    dim = dynamics.get("dimensionality")
    if dim:
        frac = _arr(dim["cv_fraction"])
        ax.bar(np.arange(1, frac.size + 1), frac, color=SPIKE_COLOR)
        ax.axhline(0, color="0.5", lw=0.5)
        ax.set_xlabel("principal axis (fitted on half of the trials)", fontsize=8)
        ax.set_ylabel("share of repeatable variance", fontsize=8)
        pr = dim.get("participation_ratio")
        ax.set_title(
            f"cross-validated PCA: {dim['cv_dimensionality']} axes hold 90 %\n"
            f"participation ratio {pr:.1f} (condition means), "
            f"{dim['n_conditions']} conditions",
            fontsize=8,
        )
    fig.suptitle(
        f"{name}: what the population encodes over the trial ({dynamics['n_trials']} trials; "
        f"{dynamics['parameters']['folds']}-fold cross-validated shrinkage LDA, "
        f"{dynamics['parameters']['n_shuffles']} label shuffles)",
        fontsize=9,
    )
    return fig


def connectivity_figure(
    name: str,
    w: np.ndarray,
    w0: np.ndarray | None,
    sign: Any,
    selectivity: Mapping[str, Any] | None = None,
) -> Figure:
    """Recurrent weights by E/I block (histograms, trained vs initial), the eigenvalues in
    the complex plane with the spectral radius, and same- vs opposite-preference E->E weights.

    Args:
        name: the layer label.
        w, w0: (N, N) effective recurrent weights after and before training (row =
            presynaptic); ``w0`` None: after only.
        sign: (N,) Dale signs or None.
        selectivity: :func:`snrl.analysis.connectivity.selectivity_connectivity` or None.
    """
    from snrl.analysis.connectivity import ei_blocks, eigenspectrum

    fig = Figure(figsize=(10, 6), layout="constrained")
    grid = fig.add_gridspec(2, 4)
    if sign is not None:
        blocks, blocks0 = ei_blocks(w, sign), (None if w0 is None else ei_blocks(w0, sign))
        for c, (bname, b) in enumerate(blocks.items()):
            ax = fig.add_subplot(grid[0, c])
            off = b["pre"][:, None] != b["post"][None, :]
            vals = b["weights"][off]
            vals0 = None if blocks0 is None else blocks0[bname]["weights"][off]
            both = vals if vals0 is None else np.concatenate([vals, vals0])
            lo, hi = (float(both.min()), float(both.max())) if both.size else (0.0, 1.0)
            bins = np.linspace(lo, hi if hi > lo else lo + 1e-9, 31)
            col = population_color(bname[0])
            if vals0 is not None:
                ax.hist(
                    vals0, bins=bins, histtype="step", color=MUTED_COLOR, lw=1.2, label="initial"
                )
            ax.hist(vals, bins=bins, histtype="step", color=col, lw=1.5, label="trained")
            ax.set_title(f"{bname} ({b['pre'].size} \u2192 {b['post'].size})", fontsize=8)
            ax.set_xlabel("weight (membrane units per spike)", fontsize=7)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            if c == 0:
                ax.set_ylabel("synapses", fontsize=8)
                ax.legend(fontsize=6, frameon=False)
    ax = fig.add_subplot(grid[1, 0:2])
    th = np.linspace(0, 2 * np.pi, 200)
    for mat, col, label in ((w0, MUTED_COLOR, "initial"), (w, SPIKE_COLOR, "trained")):
        if mat is None:
            continue
        ev = eigenspectrum(mat)
        r = float(np.abs(ev).max())
        ax.plot(ev.real, ev.imag, ".", ms=3, color=col, label=f"{label}: radius {r:.2f}")
        ax.plot(r * np.cos(th), r * np.sin(th), color=col, lw=0.6, ls="--")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("Re \u03bb", fontsize=8)
    ax.set_ylabel("Im \u03bb", fontsize=8)
    ax.legend(fontsize=7, frameon=False)
    ax.set_title("eigenvalues of the recurrent matrix (dashed: spectral radius)", fontsize=8)
    ax = fig.add_subplot(grid[1, 2:4])
    if selectivity and selectivity.get("difference") is not None:
        vals = [selectivity["same"], selectivity["opposite"]]
        ax.bar([0, 1], vals, color=[population_color("E"), MUTED_COLOR])
        ax.set_xticks(
            [0, 1],
            [
                f"same preference\n({selectivity['n_same_pairs']} pairs)",
                f"opposite\n({selectivity['n_opposite_pairs']} pairs)",
            ],
            fontsize=7,
        )
        ax.set_ylabel("mean E\u2192E weight", fontsize=8)
        ax.set_title(
            f"E cells by preference ({selectivity.get('groups', '')})\n"
            f"difference {selectivity['difference']:.3g}, permutation p = "
            f"{selectivity['p_value']:.3g}",
            fontsize=8,
        )
    else:
        ax.set_axis_off()
        ax.text(
            0.5,
            0.5,
            "no selectivity (not a trial task, or no Dale signs)",
            ha="center",
            va="center",
            fontsize=8,
            transform=ax.transAxes,
        )
    title = "trained" + (" vs initial (rebuilt from the run's seed)" if w0 is not None else "")
    fig.suptitle(f"{name}: recurrent connectivity by E/I type, {title}", fontsize=9)
    return fig
