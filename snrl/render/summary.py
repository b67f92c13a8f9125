"""A static one-figure summary of an episode, for papers: rasters, rates, return.

```python
from snrl.render import plot_episode
plot_episode(traj, "fig/episode.png")      # also .pdf / .svg
```

Rows, sharing the time axis (env steps):

1. one raster per spiking layer (excitatory spikes red, inhibitory blue, neurons grouped E
   then I; black without Dale signs), or a heatmap of hidden activations for ANN layers;
2. the population firing rate of each spiking layer over time: the fraction of its neurons
   that spiked, per step (a centred moving average over ``smooth`` steps), in spikes per
   neuron per step, or in Hz when ``trajectory.meta["dt"]`` (seconds per step) is given;
3. the return after 0..T steps, with terminated/truncated marked at the end.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from snrl.errors import UserError
from snrl.io import atomic_open
from snrl.palette import group_styles
from snrl.plot.labels import layer_label
from snrl.render._panel import E_COLOR, I_COLOR, SPIKE_COLOR, _hex, matrix_layers, matrix_of
from snrl.trajectory import Trajectory

__all__ = ["plot_episode"]


def _moving_average(x: np.ndarray, n: int) -> np.ndarray:
    """Centred moving average with a window shrunk at the edges (same length as x)."""
    if n <= 1 or x.size == 0:
        return x.astype(np.float64)
    kernel = np.ones(n)
    num = np.convolve(x, kernel, mode="same")
    den = np.convolve(np.ones_like(x, dtype=np.float64), kernel, mode="same")
    return num / den


def _raster_image(spikes: np.ndarray, sign: np.ndarray | None) -> tuple[np.ndarray, int]:
    """(N, T, 3) RGB raster (white background), neurons ordered E then I; returns n_exc."""
    z = spikes > 0
    n = z.shape[1]
    img = np.full((n, z.shape[0], 3), 255, dtype=np.uint8)
    if sign is None:
        img[z.T] = SPIKE_COLOR
        return img, n
    s = np.asarray(sign)
    order = np.concatenate([np.flatnonzero(s > 0), np.flatnonzero(s < 0)])
    zt = z[:, order].T
    colors = np.where((s[order] > 0)[:, None], 0, 1)  # 0 = E, 1 = I per row
    img[zt & (colors == 0)] = E_COLOR
    img[zt & (colors == 1)] = I_COLOR
    return img, int(np.sum(s > 0))


def plot_episode(
    trajectory: Trajectory,
    path: str | os.PathLike[str],
    *,
    smooth: int = 10,
    dpi: int = 150,
    title: str | None = None,
    max_layers: int = 4,
) -> Path:
    """Save a static figure of one episode: rasters, firing rates, cumulative return.

    Args:
        trajectory: the episode (T >= 1 steps).
        path: output image; the extension picks the format (``.png``, ``.pdf``, ``.svg``).
            Parent directories are created; the file is written atomically.
        smooth: moving-average window of the firing-rate curves, in steps.
        dpi: resolution of raster formats.
        title: figure title (default: env id, algorithm, backbone, return).
        max_layers: at most this many layers get a raster/heatmap row.

    Returns:
        The path written.

    Raises:
        UserError: empty trajectory, unsupported extension, unwritable path.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not isinstance(trajectory, Trajectory):
        raise UserError(f"expected a snrl.Trajectory, got {type(trajectory).__name__}")
    t = len(trajectory)
    if t == 0:
        raise UserError("cannot plot an empty trajectory (T=0; record at least one step)")
    out = Path(path)
    ext = out.suffix.lower().lstrip(".")
    fig = Figure(figsize=(8, 2), dpi=dpi)
    canvas = FigureCanvasAgg(fig)
    supported = canvas.get_supported_filetypes()
    if ext not in supported:
        raise UserError(f"cannot save a figure as {os.fspath(path)!r} (use .png, .pdf or .svg)")
    for above in (out.parent, *out.parent.parents):
        if above.exists():
            if not above.is_dir():
                raise UserError(f"cannot write {out}: {above} is a file (choose another path)")
            break

    traj = trajectory
    mats = matrix_layers(traj, max_layers)
    spiking = [m for m in mats if m.kind == "spiking"]
    heights = [2.2 if m.kind == "spiking" else 1.6 for m in mats]
    if spiking:
        heights.append(1.2)
    heights.append(1.0)
    fig.set_size_inches(8, 0.9 + sum(heights))
    axes = fig.subplots(len(heights), 1, sharex=True, height_ratios=heights, squeeze=False)[:, 0]
    extent = (-0.5, t - 0.5, None, None)
    row = 0
    index = {layer.name: i for i, layer in enumerate(traj.activity)}
    backbone = traj.meta.get("backbone")
    for layer in mats:
        _matrix_row(fig, axes[row], layer, index[layer.name], backbone, extent)
        row += 1
    if spiking:
        _rate_row(axes[row], traj, spiking, index, backbone, smooth)
        row += 1
    _return_row(axes[row], traj)
    axes[-1].set_xlim(-0.5, t + 0.5)
    if title is None:
        meta = traj.meta
        parts = [traj.env, meta.get("algo"), meta.get("backbone")]
        title = "  ".join(str(p) for p in parts if p) + f"  return {traj.total_reward:.4g}"
    fig.suptitle(title, fontsize=10)
    fig.align_ylabels(axes)
    fig.tight_layout()

    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create {out.parent}: {exc} (choose a writable path)") from exc
    try:
        with atomic_open(out, "wb") as fh:
            fig.savefig(fh, format=ext)
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc} (choose a writable path)") from exc
    return out


def _matrix_row(fig: Any, ax: Any, layer: Any, i: int, backbone: Any, extent: tuple) -> None:
    """A raster (spiking, E and I coloured) or a heatmap (ANN) of one layer."""
    arr = matrix_of(layer)
    n = arr.shape[1]
    ext4 = (extent[0], extent[1], n - 0.5, -0.5)
    if layer.kind == "spiking":
        img, n_e = _raster_image(arr, layer.sign)
        # "antialiased": when steps outnumber pixels, spikes blend instead of vanishing.
        ax.imshow(img, aspect="auto", interpolation="antialiased", extent=ext4)
        if layer.sign is not None and 0 < n_e < n:
            ax.axhline(n_e - 0.5, color="#999999", lw=0.5)
            ax.set_yticks([(n_e - 1) / 2, (n_e + n - 1) / 2], ["E", "I"])
            for lab, c in zip(ax.get_yticklabels(), (E_COLOR, I_COLOR)):
                lab.set_color(_hex(c))
        ax.set_ylabel(f"neuron ({n})")
    else:
        vmax = float(np.percentile(np.abs(arr), 99)) or 1.0
        im = ax.imshow(
            np.asarray(arr, dtype=np.float64).T, aspect="auto", interpolation="nearest",
            cmap="RdBu_r", vmin=-vmax, vmax=vmax, extent=ext4,
        )  # fmt: skip
        fig.colorbar(im, cax=ax.inset_axes((1.01, 0.0, 0.012, 1.0)))
        ax.set_ylabel(f"unit ({n})")
    ax.set_title(layer_label(layer, i, backbone=backbone), loc="left", fontsize=9)


def _rate_row(
    ax: Any, traj: Trajectory, spiking: list, index: dict, backbone: Any, smooth: int
) -> None:
    """Population firing rate of each spiking layer (Hz when the time step is known)."""
    t = len(traj)
    dt = getattr(traj, "dt", None)  # seconds per env step (rollouts record it)
    dt = dt if dt is not None else traj.meta.get("dt")
    sub = int(getattr(traj, "substeps", None) or 1)
    ok = isinstance(dt, (int, float)) and dt > 0
    scale = sub / float(dt) if ok else 1.0  # per neuron step -> Hz
    for layer, (color, ls) in zip(spiking, group_styles(len(spiking))):
        z = layer.spikes > 0
        rate = z.reshape(t, sub, -1).mean(axis=(1, 2)) * scale  # per env step
        ax.plot(np.arange(t), _moving_average(rate, smooth), lw=1.2, color=color, ls=ls,
                label=layer_label(layer, index[layer.name], backbone=backbone))  # fmt: skip
    ax.set_ylabel("rate (Hz)" if scale != 1.0 else "spikes /\nneuron / step")
    ax.set_ylim(bottom=0)
    if len(spiking) > 1:
        ax.legend(fontsize=7, frameon=False)


def _return_row(ax: Any, traj: Trajectory) -> None:
    """The return after 0..T steps, and how the episode ended."""
    t = len(traj)
    ret = np.concatenate([[0.0], traj.cumulative_reward])
    ax.plot(np.arange(t + 1), ret, color="#333333", lw=1.4)
    ax.set_ylabel("return")
    ax.set_xlabel("env step")
    end = "terminated" if traj.terminated[-1] else "truncated" if traj.truncated[-1] else ""
    if end:
        ax.annotate(
            end, (t, traj.cumulative_reward[-1]), xytext=(-4, 4), textcoords="offset points",
            ha="right", fontsize=7, color="#555555",
        )  # fmt: skip
