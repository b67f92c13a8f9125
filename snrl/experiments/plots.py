"""Training-history figure of one run directory, from its ``metrics.csv``.

Sized and lettered like ``learning_curve.png`` (:mod:`snrl.training.plots`): 16 inches wide
at 100 dpi, 13-20 pt text, step ticks like ``20k``, titled with the run's algorithm,
backbone, Dale, size, seed and env (from its ``config.json``). One quantity per panel; a
quantity whose values are all positive and span over two decades gets a log axis (the
dashboard's rule).
"""

from __future__ import annotations

import io
import math
import os
import types
from pathlib import Path
from typing import Any

import numpy as np

from snrl.errors import UserError
from snrl.io import atomic_write_bytes, load_json

__all__ = ["plot_history"]

# (panel title, columns) in display order; panels without data are left out.
_PANELS = (
    ("return", ("episode_return_mean", "eval_return_mean")),
    ("policy loss", ("policy_loss",)),
    ("value / TD loss", ("value_loss", "loss", "td_loss", "q_loss")),
    ("approx. KL", ("approx_kl",)),
    ("entropy", ("entropy",)),
    ("clip fraction", ("clip_fraction",)),
    ("explained variance", ("explained_variance",)),
    ("epsilon", ("epsilon",)),
    ("mean Q", ("q_mean",)),
    ("gradient norm", ("grad_norm",)),
)


def plot_history(run_dir: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Plot a run's training history: returns, losses, KL, entropy and spike rates.

    One panel per group of ``metrics.csv`` columns present in the file (spike rates are the
    ``spike_rate_<layer>`` columns, labelled by that name), against env steps; 1600 px wide
    at 100 dpi, titled with the run's description and its folder's name.

    Args:
        run_dir: a run directory (``snrl train --out`` or ``DIR/runs/<name>`` of a
            comparison).
        out: the image (``.png``, ``.svg`` or ``.pdf``; default ``run_dir/history.png``).

    Returns:
        The written path.

    Raises:
        UserError: no run directory / metrics.csv, no rows, a bad extension.
    """
    from snrl.training.metrics import read_metrics

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"run directory {run_dir} does not exist (pass a `snrl train --out`)")
    path = Path(out) if out is not None else run_dir / "history.png"
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg", "pdf"):
        raise UserError(f"--out {path} has an unknown extension (use .png, .svg or .pdf)")
    m = read_metrics(run_dir / "metrics.csv")
    if "env_step" not in m:
        raise UserError(
            f"{run_dir / 'metrics.csv'} has no env_step column (columns: {', '.join(m)}; "
            "pass a run directory whose metrics.csv snrl wrote)"
        )
    if m["env_step"].size == 0:
        raise UserError(f"{run_dir / 'metrics.csv'} has no rows yet (train longer)")

    def has(col: str) -> bool:
        return col in m and m[col].dtype.kind == "f" and bool(np.isfinite(m[col]).any())

    panels = [(t, [c for c in cols if has(c)]) for t, cols in _PANELS]
    panels = [(t, cols) for t, cols in panels if cols]
    rates = [c for c in m if c.startswith("spike_rate_") and has(c)]
    if rates:
        panels.append(("spike rate (spikes / neuron / step)", rates))
    if not panels:
        raise UserError(f"{run_dir / 'metrics.csv'} has no plottable columns (train longer)")

    fig = _figure(m, panels, f"{_run_title(run_dir)}\n{run_dir.name}")
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=DPI, metadata={"Date": None} if fmt == "svg" else None)
        atomic_write_bytes(path, buf.getvalue())
    finally:
        fig.clear()
    return path


def _figure(m: dict[str, np.ndarray], panels: list[tuple[str, list[str]]], title: str) -> Any:
    """The history figure: one panel per (title, columns), on its own Agg canvas."""
    from matplotlib.ticker import FuncFormatter

    from snrl.palette import group_styles
    from snrl.plot._util import new_figure
    from snrl.training.plots import fit_title, steps_label

    steps = m["env_step"]
    ncols = 1 if len(panels) == 1 else (2 if len(panels) <= 4 else 3)
    nrows = math.ceil(len(panels) / ncols)
    # a Figure on its own canvas: no pyplot, no global backend change
    fig = new_figure(WIDTH, ROW_HEIGHT * nrows + 1.0, dpi=DPI)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax, (name, cols) in zip(axes.flat, panels):
        for col, (color, ls) in zip(cols, group_styles(len(cols))):
            y = m[col]
            ok = np.isfinite(y)
            style = dict(marker="o", ms=5) if col == "eval_return_mean" else {}
            ax.plot(steps[ok], y[ok], lw=2, label=_LABELS.get(col, _rate_label(col)),
                    color=color, ls=ls, **style)  # fmt: skip
        if log_scale(np.concatenate([m[c][np.isfinite(m[c])] for c in cols])):
            ax.set_yscale("log")
        ax.set_title(name, fontsize=FONT["panel"])
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=FONT["tick"])
        ax.xaxis.set_major_formatter(FuncFormatter(steps_label))
        if len(cols) > 1 or name.startswith("spike rate"):
            ax.legend(fontsize=FONT["legend"])
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    for ax in list(axes.flat)[len(panels) - ncols : len(panels)]:  # the lowest in each column
        ax.set_xlabel("environment steps", fontsize=FONT["tick"])
    heading = fig.suptitle(title, fontsize=FONT["title"])
    fig.tight_layout()
    if fit_title(heading, fig):
        fig.tight_layout()
    return fig


#: Figure width and the height of one row of panels, in inches at :data:`DPI`.
WIDTH, ROW_HEIGHT = 16.0, 3.4
DPI = 100
#: Font sizes (points): the figure's title, a panel's title, ticks and axis labels, legends.
FONT = {"title": 20, "panel": 17, "tick": 14, "legend": 13}


def log_scale(values: np.ndarray) -> bool:
    """A log axis where it helps: every value positive and spanning over two decades."""
    v = np.asarray(values, dtype=np.float64)
    return v.size > 1 and bool((v > 0).all()) and float(v.max() / v.min()) > 100


def _run_title(run_dir: Path) -> str:
    """``"PPO · LIF · Dale 80/20 · 128 neurons · seed 0 · CartPole-v1"`` from the run's
    ``config.json``; the folder's name alone when that file is missing or not snrl's."""
    from snrl.agents.base import run_title

    try:
        cfg: Any = load_json((run_dir / "config.json").read_bytes(), what="config.json")
        ns = types.SimpleNamespace(**cfg)
        return run_title(str(cfg["algo"]), ns)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, UserError):
        return "training history"


#: Readable legend entries for metrics.csv columns (the files keep the column names).
_LABELS = {
    "episode_return_mean": "training episodes",
    "eval_return_mean": "evaluation",
    "value_loss": "value loss",
    "td_loss": "TD loss",
    "q_loss": "Q loss",
    "loss": "loss",
}


def _rate_label(col: str) -> str:
    """``spike_rate_lif0`` -> ``layer lif0``; other columns stay as they are."""
    return f"layer {col.removeprefix('spike_rate_')}" if col.startswith("spike_rate_") else col
