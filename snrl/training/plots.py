"""The learning-curve figure of a run directory."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from snrl.errors import UserError
from snrl.io import atomic_write_bytes
from snrl.palette import GROUP_COLORS
from snrl.training.metrics import read_metrics

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_learning_curve"]

#: (column, legend label, colour) drawn when the column exists and has finite values; the
#: colours are the first two of :data:`snrl.palette.GROUP_COLORS` (Okabe-Ito).
CURVES = (
    ("episode_return_mean", "training episodes (mean return)", GROUP_COLORS[0]),
    ("eval_return_mean", "evaluation (mean return)", GROUP_COLORS[1]),
)


def plot_learning_curve(
    metrics_csv: str | os.PathLike, png_path: str | os.PathLike, *, title: str | None = None
) -> Path:
    """Plot mean episode return (and evaluation return, if logged) against env steps.

    Uses matplotlib's Agg canvas directly (no pyplot, no global backend change); the PNG is
    written atomically. Rows where a column is empty/NaN are skipped for that curve.

    Args:
        metrics_csv: A metrics CSV with an ``env_step`` column.
        png_path: Output file; must end in ``.png``.
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
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    atomic_write_bytes(png_path, buf.getvalue())
    return png_path


def _figure(metrics: dict[str, np.ndarray], title: str) -> Figure:
    """The learning-curve figure (Agg canvas; matplotlib imported lazily)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    steps = np.asarray(metrics["env_step"], dtype=np.float64)
    drew = False
    for column, label, color in CURVES:
        if column not in metrics or metrics[column].dtype.kind != "f":
            continue
        y = metrics[column]
        ok = np.isfinite(y) & np.isfinite(steps)
        if ok.any():
            marker = "." if ok.sum() < 30 else None
            ax.plot(steps[ok], y[ok], marker=marker, label=label, color=color)
            drew = True
    if "lesson" in metrics and metrics["lesson"].dtype.kind == "f":  # a curriculum's run
        lesson = metrics["lesson"]
        for n, i in enumerate(np.flatnonzero(np.diff(lesson) > 0)):  # promoted after row i
            ax.axvline(steps[i], color="0.4", ls="--", lw=1, label=None if n else "promotion")
            ax.text(
                steps[i],
                0.98,
                f"lesson {lesson[i + 1]:.0f} ",
                fontsize=8,
                rotation=90,
                ha="right",
                va="top",
                transform=ax.get_xaxis_transform(),
            )
    if drew:
        ax.legend(loc="best")
    else:
        ax.text(
            0.5, 0.5, "no finished episodes yet", ha="center", va="center", transform=ax.transAxes
        )
    ax.set_xlabel("environment steps")
    ax.set_ylabel("episode return")
    ax.grid(alpha=0.3)
    ax.set_title(title)
    fig.tight_layout()
    return fig
