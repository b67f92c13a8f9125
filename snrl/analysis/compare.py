"""Spiking variants side by side: the analysis of every run of a comparison directory
(``snrl compare``), grouped by variant, with bootstrap intervals over seeds.

Each run contributes one value per number (its ``all`` population, first spiking layer);
a group's entry is the mean over its runs and a percentile bootstrap interval of that mean
(the interval function is passed in: ``snrl analyze`` passes
:func:`snrl.experiments.stats.bootstrap_ci`, which lives on a higher floor).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from snrl.analysis.stats import METRICS

__all__ = ["COMPARED", "compare_figure", "compare_summaries"]

#: The numbers compared across variants (population ``all`` of the first spiking layer).
COMPARED = (
    "rate_mean",
    "cv_isi_mean",
    "fano_mean",
    "corr_mean",
    "fraction_silent",
    "ei_ratio",
    "ei_correlation",
)


def _value(summary: Mapping[str, Any], key: str) -> float:
    layer = next(iter(summary["layers"].values()))
    entry = layer["populations"]["all"].get(key)
    v = None if entry is None else entry.get("value")
    return float("nan") if v is None else float(v)


def compare_summaries(
    runs: Sequence[Mapping[str, Any]],
    ci: Callable[[Sequence[float]], tuple[float, float]],
) -> dict[str, Any]:
    """Group runs by variant and summarize each compared number.

    Args:
        runs: dicts ``{"name", "group", "seed", "summary"}`` (``summary``: a
            :meth:`NetworkAnalysis.summary`), or ``"skipped"`` with a reason instead.
        ci: ``values -> (low, high)``, an interval of the mean.

    Returns:
        ``{"groups": {group: {number: {"mean", "ci_low", "ci_high", "n", "values", "unit",
        "definition"}}}, "runs": [...]}`` (JSON-able; NaN as None).
    """
    groups: dict[str, dict[str, list[float]]] = {}
    listed = []
    for r in runs:
        if r.get("summary") is None:
            listed.append({k: r.get(k) for k in ("name", "group", "seed", "skipped")})
            continue
        g = groups.setdefault(r["group"], {k: [] for k in COMPARED})
        for k in COMPARED:
            g[k].append(_value(r["summary"], k))
        unit = r["summary"].get("rate_unit")
        listed.append({"name": r["name"], "group": r["group"], "seed": r.get("seed")})

    def num(x: float) -> float | None:
        return float(x) if np.isfinite(x) else None

    out: dict[str, Any] = {}
    for group, vals in groups.items():
        out[group] = {}
        for k, v in vals.items():
            x = np.asarray(v, dtype=np.float64)
            ok = x[np.isfinite(x)]
            lo, hi = ci(ok) if ok.size else (float("nan"), float("nan"))
            m = METRICS[k]
            out[group][k] = {
                "mean": num(ok.mean()) if ok.size else None,
                "ci_low": num(lo),
                "ci_high": num(hi),
                "n": int(ok.size),
                "values": [num(float(a)) for a in x],
                "unit": unit if k == "rate_mean" else m.unit,
                "definition": m.definition,
            }
    return {
        "format": "snrl.analysis.compare",
        "version": 1,
        "interval": "95% percentile bootstrap interval of the mean over runs (seeds)",
        "groups": out,
        "runs": listed,
    }


def compare_figure(result: Mapping[str, Any]) -> Figure:
    """One panel per compared number: each group's mean over seeds with its interval and
    the single runs as dots."""
    groups = list(result["groups"])
    keys = [k for k in COMPARED if any(result["groups"][g][k]["n"] for g in groups)]
    cols = min(4, max(len(keys), 1))
    rows = max(1, int(np.ceil(len(keys) / cols)))
    fig = Figure(figsize=(3.0 * cols, 2.6 * rows + 0.4), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax, k in zip(axes, keys):
        for i, g in enumerate(groups):
            e = result["groups"][g][k]
            if e["mean"] is None:
                continue
            lo = e["mean"] - (e["ci_low"] if e["ci_low"] is not None else e["mean"])
            hi = (e["ci_high"] if e["ci_high"] is not None else e["mean"]) - e["mean"]
            ax.bar(i, e["mean"], width=0.6, color="#bbbbbb", yerr=[[lo], [hi]], capsize=3)
            vals = [v for v in e["values"] if v is not None]
            ax.plot(np.full(len(vals), i), vals, "o", color="k", ms=3)
        ax.set_xticks(range(len(groups)), groups, rotation=30, ha="right", fontsize=7)
        ax.set_xlim(-0.8, len(groups) - 0.2)
        unit = result["groups"][groups[0]][k]["unit"]
        ax.set_title(f"{k} ({unit})", fontsize=8)
    for ax in axes[len(keys) :]:
        ax.set_visible(False)
    return fig
