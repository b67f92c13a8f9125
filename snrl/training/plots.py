"""The learning-curve figure of a run directory.

``learning_curve.png`` (1600 x 1000 px at 100 dpi, fonts readable on a slide) and
``learning_curve.svg`` next to it: mean episode return against env steps, and, on a trial
task (NeuroGym), a second panel with trial accuracy — the number that says whether the
task is learned (a decision task's return barely moves while accuracy climbs).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from snrl.errors import UserError
from snrl.io import atomic_write_bytes
from snrl.palette import GROUP_COLORS
from snrl.training.metrics import read_metrics

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["fit_title", "plot_learning_curve", "steps_label"]

#: (column, legend label, colour) drawn when the column exists and has finite values; the
#: colours are the first two of :data:`snrl.palette.GROUP_COLORS` (Okabe-Ito).
CURVES = (
    ("episode_return_mean", "training episodes (mean return)", GROUP_COLORS[0]),
    ("eval_return_mean", "evaluation (mean return)", GROUP_COLORS[1]),
)
#: The trial-accuracy panel's curves (a trial task's columns, docs/neuro.md).
ACCURACY_CURVES = (
    ("trial_accuracy", "training trials (accuracy)", GROUP_COLORS[0]),
    ("eval_trial_accuracy", "evaluation (trial accuracy)", GROUP_COLORS[1]),
)
#: Figure size in inches at :data:`DPI`: 1600 x 1000 px.
SIZE = (16.0, 10.0)
DPI = 100
#: Font sizes (points) of the title, axis labels, and ticks / legend.
FONT = {"title": 22, "label": 20, "tick": 17}


def steps_label(x: float, _pos: object = None) -> str:
    """A step count for a tick: ``20000`` -> ``"20k"``, ``1500000`` -> ``"1.5M"``."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.0f}"


def fit_title(text: Any, fig: Figure) -> bool:
    """Break a title that runs off ``fig``'s edge at its last `` · `` separators, one at a
    time, until it fits (a NeuroGym id made the run title run off the figure). Returns
    whether it changed the text (then lay the figure out again)."""
    renderer = fig.canvas.get_renderer()
    changed = False
    while True:
        box = text.get_window_extent(renderer)
        if box.x0 >= 0 and box.x1 <= fig.bbox.width:
            return changed
        head, sep, tail = text.get_text().rpartition(" · ")
        if not sep:
            return changed
        text.set_text(f"{head}\n{tail}")
        changed = True


def plot_learning_curve(
    metrics_csv: str | os.PathLike, png_path: str | os.PathLike, *, title: str | None = None
) -> Path:
    """Plot mean episode return (and evaluation return, and trial accuracy on a trial task)
    against env steps; write the PNG and an SVG of the same figure next to it.

    Uses matplotlib's Agg canvas directly (no pyplot, no global backend change); both files
    are written atomically. Rows where a column is empty/NaN are skipped for that curve.

    Args:
        metrics_csv: A metrics CSV with an ``env_step`` column.
        png_path: Output file; must end in ``.png`` (the SVG gets the same stem).
        title: Figure title (default: the run directory's name).

    Returns:
        ``png_path`` as a Path.

    Raises:
        UserError: Missing metrics file, no ``env_step``/``episode_return_mean`` column,
            or a non-.png output path.
    """
    png_path = Path(png_path)
    if png_path.suffix.lower() != ".png":
        raise UserError(f"learning curve path {png_path} must end in .png (rename it)")
    metrics = read_metrics(metrics_csv)
    missing = [c for c in ("env_step", "episode_return_mean") if c not in metrics]
    if missing:
        raise UserError(
            f"metrics file {metrics_csv} has no column(s) {', '.join(missing)} "
            f"(columns: {', '.join(metrics)}; pass a metrics.csv written by snrl)"
        )
    fig = _figure(metrics, title if title is not None else Path(metrics_csv).resolve().parent.name)
    for path, fmt in ((png_path, "png"), (png_path.with_suffix(".svg"), "svg")):
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=DPI, metadata={"Date": None} if fmt == "svg" else None)
        atomic_write_bytes(path, buf.getvalue())
    return png_path


def _finite(metrics: dict[str, np.ndarray], column: str) -> bool:
    y = metrics.get(column)
    return y is not None and y.dtype.kind == "f" and bool(np.isfinite(y).any())


def _curves(ax, steps: np.ndarray, metrics: dict[str, np.ndarray], curves) -> bool:
    drew = False
    for column, label, color in curves:
        if not _finite(metrics, column):
            continue
        y = metrics[column]
        ok = np.isfinite(y) & np.isfinite(steps)
        if ok.any():
            marker = "o" if ok.sum() < 30 else None
            ax.plot(steps[ok], y[ok], marker=marker, ms=6, lw=2.5, label=label, color=color)
            drew = True
    return drew


#: A multitask run's per-task curves are named in the legend up to this many tasks
MAX_TASK_LABELS = 6


def _task_curves(ax, steps: np.ndarray, metrics: dict[str, np.ndarray]) -> None:
    """A multitask run's evaluation accuracy per task (``eval_trial_accuracy/<task>``), thin
    lines in the next colours of the palette."""
    prefix = "eval_trial_accuracy/"
    tasks = [c for c in metrics if c.startswith(prefix) and _finite(metrics, c)]
    many = len(tasks) > MAX_TASK_LABELS  # one grey line each, one legend entry for all
    for n, column in enumerate(tasks):
        y = metrics[column]
        ok = np.isfinite(y) & np.isfinite(steps)
        color = "0.6" if many else GROUP_COLORS[(2 + n) % len(GROUP_COLORS)]
        label = "eval: " + column[len(prefix) :].removesuffix("-v0")
        if many:
            label = f"eval: each of {len(tasks)} tasks" if n == 0 else None
        ax.plot(steps[ok], y[ok], lw=1.5, ls="--", color=color, label=label)


def _figure(metrics: dict[str, np.ndarray], title: str) -> Figure:
    """The learning-curve figure (Agg canvas; matplotlib imported lazily)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=SIZE, dpi=DPI)
    FigureCanvasAgg(fig)
    trials = any(_finite(metrics, c) for c, _, _ in ACCURACY_CURVES)
    if trials:
        ax, acc = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    else:
        ax, acc = fig.add_subplot(), None
    steps = np.asarray(metrics["env_step"], dtype=np.float64)
    drew = _curves(ax, steps, metrics, CURVES)
    axes = [ax] if acc is None else [ax, acc]
    if acc is not None:
        _curves(acc, steps, metrics, ACCURACY_CURVES)
        _task_curves(acc, steps, metrics)
        acc.set_ylim(-0.02, 1.02)
        acc.set_ylabel("trial accuracy", fontsize=FONT["label"])
        acc.legend(loc="lower right", fontsize=FONT["tick"])
    if "lesson" in metrics and metrics["lesson"].dtype.kind == "f":  # a curriculum's run
        lesson = metrics["lesson"]
        for n, i in enumerate(np.flatnonzero(np.diff(lesson) > 0)):  # promoted after row i
            for a in axes:
                a.axvline(
                    steps[i],
                    color="0.3",
                    ls="--",
                    lw=1.5,
                    label=None if n or a is not ax else "promotion",
                )
            ax.text(
                steps[i],
                0.98,
                f"lesson {lesson[i + 1]:.0f} ",
                fontsize=FONT["tick"],
                rotation=90,
                ha="right",
                va="top",
                transform=ax.get_xaxis_transform(),
            )
    if drew:
        ax.legend(loc="best", fontsize=FONT["tick"])
    else:
        ax.text(
            0.5,
            0.5,
            "no finished episodes yet",
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=FONT["label"],
        )
    axes[-1].set_xlabel("environment steps", fontsize=FONT["label"])
    axes[-1].xaxis.set_major_formatter(FuncFormatter(steps_label))
    ax.set_ylabel("episode return", fontsize=FONT["label"])
    for a in axes:
        a.grid(alpha=0.3)
        a.tick_params(labelsize=FONT["tick"])
    heading = ax.set_title(title, fontsize=FONT["title"])
    fig.tight_layout()
    if fit_title(heading, fig):
        fig.tight_layout()
    return fig
