"""Training-history figure of one run directory, from its ``metrics.csv``."""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

import numpy as np

from snrl.errors import UserError
from snrl.io import atomic_write_bytes

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
    ``spike_rate_<layer>`` columns, labelled by that name), against env steps.

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
    steps = m["env_step"]

    def has(col: str) -> bool:
        return col in m and m[col].dtype.kind == "f" and bool(np.isfinite(m[col]).any())

    panels = [(t, [c for c in cols if has(c)]) for t, cols in _PANELS]
    panels = [(t, cols) for t, cols in panels if cols]
    rates = [c for c in m if c.startswith("spike_rate_") and has(c)]
    if rates:
        panels.append(("spike rate (spikes / neuron / step)", rates))
    if not panels:
        raise UserError(f"{run_dir / 'metrics.csv'} has no plottable columns (train longer)")

    from snrl.palette import group_styles
    from snrl.plot._util import new_figure

    ncols = 1 if len(panels) == 1 else (2 if len(panels) <= 4 else 3)
    nrows = math.ceil(len(panels) / ncols)
    # a Figure on its own canvas: no pyplot, no global backend change
    fig = new_figure(4.2 * ncols, 2.5 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    try:
        for ax, (title, cols) in zip(axes.flat, panels):
            for col, (color, ls) in zip(cols, group_styles(len(cols))):
                y = m[col]
                ok = np.isfinite(y)
                style = dict(marker="o", ms=3) if col == "eval_return_mean" else {}
                ax.plot(steps[ok], y[ok], lw=1.2, label=_LABELS.get(col, _rate_label(col)),
                        color=color, ls=ls, **style)  # fmt: skip
            ax.set_title(title, fontsize=9)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=8)
            if len(cols) > 1 or title.startswith("spike rate"):
                ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(panels) :]:
            ax.set_visible(False)
        for ax in axes[-1]:
            ax.set_xlabel("env steps", fontsize=8)
        fig.suptitle(run_dir.name, fontsize=10)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=100)
        atomic_write_bytes(path, buf.getvalue())
    finally:
        fig.clear()
    return path


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
