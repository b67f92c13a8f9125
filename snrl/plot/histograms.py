"""Histograms of per-neuron firing rates, excitatory and inhibitory apart."""

from __future__ import annotations

from typing import Any

import numpy as np

from snrl.palette import E_COLOR, I_COLOR, SPIKE_COLOR
from snrl.plot._util import as_2d, check_dt
from snrl.plot.labels import ei_counts, rate_unit

__all__ = ["neuron_rates", "rate_histogram"]


def neuron_rates(spikes: Any, dt: float | None = None, *, batch: int = 0) -> np.ndarray:
    """(N,) mean firing rate of each neuron: Hz when ``dt`` (s per row) is given, else
    spikes per step."""
    z = as_2d(spikes, "spikes", batch=batch)
    scale, _ = rate_unit(check_dt(dt))
    return (z > 0).mean(axis=0) * scale


def rate_histogram(
    ax: Any,
    spikes: Any,
    *,
    sign: Any = None,
    dt: float | None = None,
    bins: int = 20,
    batch: int = 0,
) -> dict[str, np.ndarray]:
    """Histogram of the neurons' mean rates on ``ax`` (E and I stacked, in the palette's
    colours); returns the rates by group (``"E"``, ``"I"`` or ``"all"``).

    Args:
        ax: a matplotlib Axes.
        spikes: (T, N) spikes (or (T, B, N) with ``batch``).
        sign: (N,) ±1 Dale signs, or None.
        dt: seconds per row (rates in Hz), or None (spikes per step).
        bins: number of bins between 0 and the largest rate.
    """
    dt = check_dt(dt)
    rates = neuron_rates(spikes, dt, batch=batch)
    _, xlabel = rate_unit(dt)
    hi = float(rates.max()) if rates.size and rates.max() > 0 else 1.0
    edges = np.linspace(0.0, hi * 1.0001, bins + 1)
    counts = ei_counts(sign)
    if counts is None:
        groups = {"all": rates}
        colors = [SPIKE_COLOR]
    else:
        s = np.asarray(sign.detach().cpu() if hasattr(sign, "detach") else sign).reshape(-1)
        groups = {"E": rates[s > 0], "I": rates[s < 0]}
        colors = [E_COLOR, I_COLOR]
    labels = [f"{k} ({v.size})" if k != "all" else f"{v.size} neurons" for k, v in groups.items()]
    ax.hist(list(groups.values()), bins=edges, stacked=True, color=colors, label=labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("neurons")
    ax.legend(fontsize="small", frameon=False)
    return groups
