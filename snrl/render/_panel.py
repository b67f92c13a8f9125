"""The video frame, composed from numpy pieces over a background drawn once by matplotlib.

Matplotlib draws the static parts once (axes, ticks, labels, legends, threshold line, colour
bars) into a background image the size of the whole video frame. Per frame, the canvas copies
that background and paints only what changes, straight into pixel rectangles located from
the axes' transforms:

- left column: the env frame (cropped to its content, enlarged by a whole factor when there
  is room), or for envs without frames the **task panel**: observation channels, the chosen
  action against the ground truth, and the reward, as scrolling traces with trial boundaries
  as vertical lines; below it the policy output at this step: bars for ``probs``/``q_values``
  (the chosen action highlighted), mean with a ±std whisker and the taken action as a tick
  for Box actions;
- right column: a scrolling matrix per layer over the last ``window`` env steps, newest at the
  right edge: a spike raster for spiking layers (excitatory and inhibitory neurons in the
  palette's E and I colours, grouped E then I, every neuron the same whole number of pixel
  rows; near-black without signs) or a heatmap of hidden activations for ANN layers (with its
  colour bar); below them the membrane potential of a few neurons with the labelled
  threshold (hidden activations of the most variable units for ANN agents);
- top: a title line and a text line (step, time, reward, return, trial), fixed-width glyphs
  pre-rendered once.

All sizes scale with ``scale``; at ``scale=1`` the frame is at least 540 pixels high and no
text is smaller than 14 pixels. Colours come from :mod:`snrl.palette`, labels from
:mod:`snrl.plot.labels`.

Frame ``k`` (0..T) of a trajectory of T steps shows the window ending at step
``min(k, T - 1)`` (with ``substeps`` neuron steps per env step, the raster rows of that env
step), the policy output of step ``k`` (none on the last frame, k = T), the reward received on
the step that led to frame ``k`` and the return accumulated so far.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import snrl.palette as pal
from snrl.networks.activity import LayerActivity
from snrl.plot.labels import backbone_label, ei_counts, layer_label

E_COLOR = pal.rgb(pal.E_COLOR)
I_COLOR = pal.rgb(pal.I_COLOR)
SPIKE_COLOR = pal.rgb(pal.SPIKE_COLOR)
PRE_COLOR = (236, 236, 236)
BG_COLOR = pal.rgb(pal.BG_COLOR)
BAR_COLOR = (150, 160, 175)
CHOSEN_COLOR = pal.rgb(pal.CHOSEN_COLOR)
MARK_COLOR = (96, 96, 96)
TRACE_COLORS = tuple(pal.rgb(c) for c, _ in pal.group_styles(4))
TEXT_COLOR = pal.rgb(pal.TEXT_COLOR)
GT_COLOR = (26, 26, 26)

BASE_HEIGHT = 540
"""Frame height at scale 1 (half of 1080p: projected full-screen, everything doubles)."""
MIN_PANEL_HEIGHT = BASE_HEIGHT
TEXT_PX = 14
"""Smallest text at scale 1, in pixels (tick labels)."""
LAYOUTS = ("compact", "16:9")
"""Frame shapes: as large as the content needs, or exactly 16:9 (slides, 1080p screens)."""
TITLE_PX = 28
"""The title's text height at scale 1, in pixels."""


def _hex(c: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*c)


class Glyphs:
    """Fixed-width text rendered once per character, then composed by copying tiles."""

    def __init__(self, *, px: float = 16.0, color: tuple[int, int, int] = TEXT_COLOR):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fontsize = px * 72 / 100
        chars = [chr(c) for c in range(32, 127)]
        em = px
        self.w = int(np.ceil(0.602 * em))
        self.h = int(np.ceil(1.25 * em))
        fig = Figure(figsize=(self.w * len(chars) / 100, self.h / 100), dpi=100)
        FigureCanvasAgg(fig)
        fig.patch.set_facecolor(_hex(BG_COLOR))
        base = 0.27 * em / self.h
        for i, ch in enumerate(chars):
            fig.text(i / len(chars), base, ch, fontfamily="DejaVu Sans Mono",
                     fontsize=fontsize, color=_hex(color), va="baseline", ha="left")  # fmt: skip
        fig.canvas.draw()
        img = np.asarray(fig.canvas.buffer_rgba())[..., :3]
        self.tiles = {
            ch: img[:, i * self.w : (i + 1) * self.w].copy() for i, ch in enumerate(chars)
        }

    def draw(self, out: np.ndarray, row: int, col: int, text: str) -> None:
        """Paint ``text`` with its top-left corner at (row, col), clipped to ``out``."""
        max_chars = max((out.shape[1] - col) // self.w, 0)
        text = text[:max_chars]
        if not text or row + self.h > out.shape[0]:
            return
        tiles = [self.tiles.get(ch, self.tiles["?"]) for ch in text]
        out[row : row + self.h, col : col + self.w * len(text)] = np.concatenate(tiles, axis=1)


@functools.lru_cache(maxsize=4)
def _glyphs(px: int = 16) -> Glyphs:
    """A glyph set, built once per process and size (its tiles are never modified)."""
    return Glyphs(px=px)


@dataclass
class Rect:
    """Pixel rectangle ``out[r0:r1, c0:c1]`` inside an axes' frame, plus its data mapping."""

    r0: int
    r1: int
    c0: int
    c1: int
    ax: Any

    @property
    def h(self) -> int:
        return self.r1 - self.r0

    @property
    def w(self) -> int:
        return self.c1 - self.c0

    def data_x(self, height: int) -> np.ndarray:
        """(w,) data x coordinate at the centre of each pixel column."""
        inv = self.ax.transData.inverted()
        cols = np.arange(self.c0, self.c1) + 0.5
        pts = np.stack([cols, np.full_like(cols, height / 2)], axis=1)
        return inv.transform(pts)[:, 0]

    def row_of(self, values: np.ndarray, height: int) -> np.ndarray:
        """Pixel row (float) of data y ``values``."""
        v = np.asarray(values, dtype=np.float64)
        pts = np.stack([np.zeros(v.size), v.ravel()], axis=1)
        y = self.ax.transData.transform(pts)[:, 1]
        return (height - y).reshape(v.shape)


def _rect(ax: Any, height: int) -> Rect:
    """The interior (inside the 1-pixel spines) of an axes placed on whole pixels."""
    x0, y0, x1, y1 = ax.get_window_extent().extents
    return Rect(
        r0=round(height - y1) + 1,
        r1=round(height - y0) - 1,
        c0=round(x0) + 1,
        c1=round(x1) - 1,
        ax=ax,
    )


def _slot_x(rect: Rect, window: int, height: int, unit: float, page: bool) -> np.ndarray:
    """(w,) fractional window slot (0 = first/oldest .. window-1) of each pixel column.

    Scrolling: data x runs -(window - 1) .. 0 slots (0 = now); pages: 0 .. window - 1."""
    x = rect.data_x(height) / unit
    return np.clip(x if page else x + window - 1, 0, window - 1)


def _slots(rect: Rect, window: int, height: int, unit: float, page: bool) -> np.ndarray:
    """(w,) window slot shown by each pixel column."""
    return np.rint(_slot_x(rect, window, height, unit, page)).astype(np.int64)


class _Matrix:
    """A scrolling (pixel rows x window) image: raster codes or heatmap levels -> palette."""

    def __init__(
        self,
        codes: np.ndarray,
        palette: np.ndarray,
        rect: Rect,
        window: int,
        h: int,
        unit: float,
        *,
        page: bool = False,
        blank: np.ndarray | None = None,
    ):
        # codes: (rect.h, rows) uint8 already reduced to the rect's height.
        pre = palette.shape[0] - 1
        pad = np.full((codes.shape[0], window - 1), pre, dtype=np.uint8)
        self.padded = np.ascontiguousarray(np.concatenate([pad, codes], axis=1))
        self.palette = palette
        self.rect = rect
        self.window = window
        self.page = page
        self.cols = _slots(rect, window, h, unit, page)
        self.blank = blank  # (rect.h, 3) colour of steps not reached yet (pages)

    def paint(self, end: int, out: np.ndarray, start: int = 0) -> None:
        """Scrolling: the window ending at row ``end``; pages: rows ``start ..`` up to end."""
        r = self.rect
        if not self.page:
            idx = end + self.cols
            out[r.r0 : r.r1, r.c0 : r.c1] = np.take(self.palette, self.padded[:, idx], 0)
            return
        rows = start + self.cols
        idx = np.minimum(rows, end) + self.window - 1
        region = out[r.r0 : r.r1, r.c0 : r.c1]
        region[...] = np.take(self.palette, self.padded[:, idx], 0)
        region[:, rows > end] = BG_COLOR


def neuron_rows(n: int, avail: int) -> tuple[int, int]:
    """``(px_per_neuron, neurons_per_row)`` for n neurons in at most ``avail`` pixel rows:
    every neuron gets the same whole number of rows, or every pixel row pools the same number
    of neurons (the last row may pool fewer)."""
    if n <= 0:
        return 1, 1
    if n <= avail:
        return max(avail // n, 1), 1
    return 1, math.ceil(n / max(avail, 1))


def matrix_height(n: int, avail: int) -> int:
    """Interior height in pixels of an n-neuron matrix given ``avail`` rows (even rows)."""
    px, group = neuron_rows(n, avail)
    return n * px if group == 1 else math.ceil(n / group)


def raster_codes(spikes: np.ndarray, sign: Any, h: int) -> tuple[np.ndarray, Any]:
    """Reduce (T, N) spikes to (h, T) palette codes; returns codes and display order.

    Codes: 0 background, 1 excitatory spike, 2 inhibitory spike, 3 spike (no sign),
    4 before the episode. With N <= h every neuron takes ``h // N`` rows (the rest stays
    background at the bottom); with N > h each pixel row pools ``ceil(N / h)`` neurons and
    shows a spike if any of them spiked.
    """
    z = spikes > 0
    n = z.shape[1]
    if sign is None:
        order = np.arange(n)
        codes = np.where(z, 3, 0).astype(np.uint8)
    else:
        s = np.asarray(sign)
        order = np.concatenate([np.flatnonzero(s > 0), np.flatnonzero(s < 0)])
        codes = np.where(z, np.where(s > 0, 1, 2)[None, :], 0).astype(np.uint8)
    codes = codes[:, order].T  # (N, T)
    out = np.zeros((h, z.shape[0]), np.uint8)
    if n == 0:
        return out, order
    px, group = neuron_rows(n, h)
    if group == 1:
        block = np.repeat(codes, px, axis=0)
    else:
        block = np.maximum.reduceat(codes, np.arange(0, n, group), axis=0)
    out[: min(h, block.shape[0])] = block[:h]
    return out, order


RASTER_PALETTE = np.array([BG_COLOR, E_COLOR, I_COLOR, SPIKE_COLOR, PRE_COLOR], dtype=np.uint8)


def heatmap_palette() -> np.ndarray:
    """(256, 3): 255 levels of a blue-white-red map, then the before-episode grey."""
    from matplotlib import colormaps

    lv = colormaps["RdBu_r"](np.linspace(0, 1, 255))[:, :3]
    return np.concatenate([np.round(lv * 255), [PRE_COLOR]]).astype(np.uint8)


def heatmap_vmax(x: np.ndarray) -> float:
    """Symmetric colour scale of a heatmap: the 99th percentile of |x| (1 if that is 0)."""
    vmax = float(np.percentile(np.abs(x), 99)) if np.size(x) else 1.0
    return vmax if vmax > 0 else 1.0


def heatmap_codes(h_values: np.ndarray, h: int) -> tuple[np.ndarray, float]:
    """Reduce (T, N) activations to (h, T) levels 0..254 (symmetric scale); returns vmax.

    Rows follow :func:`raster_codes` (whole rows per unit, or pooled groups: the mean)."""
    x = np.asarray(h_values, dtype=np.float64)
    n = x.shape[1]
    vmax = heatmap_vmax(x)
    out = np.full((h, x.shape[0]), 127, np.uint8)
    if n == 0:
        return out, vmax
    px, group = neuron_rows(n, h)
    if group == 1:
        xr = np.repeat(x.T, px, axis=0)
    else:
        starts = np.arange(0, n, group)
        sums = np.add.reduceat(x.T, starts, axis=0)
        counts = np.diff(np.append(starts, n))[:, None]
        xr = sums / counts
    levels = np.rint((np.clip(xr / vmax, -1, 1) + 1) * 127).astype(np.uint8)
    out[: min(h, levels.shape[0])] = levels[:h]
    return out, vmax


class _Traces:
    """Lines of a few series over the window, one colour each (NaN: no line)."""

    def __init__(
        self,
        values: np.ndarray,
        colors: list[tuple[int, int, int]],
        rect: Rect,
        window: int,
        h: int,
        unit: float,
        *,
        steps: bool = False,
        width: float = 1.0,
        page: bool = False,
    ):
        rows = rect.row_of(values, h)  # (T, m) float pixel rows
        pad = np.full((window - 1, values.shape[1]), np.nan)
        self.rows = np.concatenate([pad, rows], axis=0)  # (T + W - 1, m)
        x = _slot_x(rect, window, h, unit, page)  # fractional slot per pixel column
        self.page = page
        self.window = window
        self.x = x
        if steps:  # piecewise constant (actions, ground truth): no interpolation
            self.i0 = np.clip(np.rint(x).astype(np.int64), 0, window - 1)
            self.frac = np.zeros_like(x)
        else:
            self.i0 = np.minimum(np.floor(x).astype(np.int64), max(window - 2, 0))
            self.frac = x - self.i0 if window > 1 else np.zeros_like(x)
        self.rect = rect
        self.colors = [np.array(c, np.uint8) for c in colors]
        self.rr = np.arange(rect.r0, rect.r1, dtype=np.float64)[:, None]
        self.width = width

    def paint(self, end: int, out: np.ndarray, start: int = 0) -> None:
        r = self.rect
        region = out[r.r0 : r.r1, r.c0 : r.c1]
        if self.page:  # data index of slot 0 is `start`; nothing after `end`
            i0 = start + self.i0 + self.window - 1
            late = start + self.x > end + 1e-9
        else:
            i0 = end + self.i0
            late = None
        last = self.rows.shape[0] - 1
        for j, color in enumerate(self.colors):
            a = self.rows[np.minimum(i0, last), j]
            b = self.rows[np.minimum(i0 + 1, last), j]
            y = a * (1 - self.frac) + b * self.frac
            if late is not None:
                y = np.where(late, np.nan, y)
            y_prev = np.concatenate([y[:1], y[:-1]])
            lo = np.fmin(y, y_prev) - self.width
            hi = np.fmax(y, y_prev) + self.width
            ok = ~(np.isnan(y) | np.isnan(y_prev))
            mask = (self.rr >= lo) & (self.rr <= hi) & ok
            region[mask] = color


class _Marks:
    """Vertical lines (trial boundaries) at the flagged steps of a scrolling window."""

    def __init__(
        self,
        flags: np.ndarray,
        rects: list[Rect],
        window: int,
        h: int,
        unit: float,
        *,
        page: bool = False,
        width: int = 1,
    ):
        pad = np.zeros(window - 1, bool)
        self.flags = np.concatenate([pad, np.asarray(flags, bool), [False]])
        self.rects = rects
        self.page = page
        self.width = max(int(width), 1)  # pixel columns of a line
        self.cols = []
        for rect in rects:
            x = rect.data_x(h) / unit + (0 if page else window - 1)
            # a boundary at slot s is drawn at its left edge (between steps s-1 and s)
            self.cols.append(np.floor(x + 0.5).astype(np.int64))
        self.window = window

    def paint(self, end: int, out: np.ndarray, start: int = 0) -> None:
        last = self.flags.shape[0] - 1
        for rect, cols in zip(self.rects, self.cols):
            slot = np.clip(cols, 0, self.window - 1)
            if self.page:
                step = start + slot
                hit = self.flags[np.minimum(step + self.window - 1, last)] & (step <= end)
                hit &= (cols >= 0) & (cols <= self.window - 1)
            else:
                hit = self.flags[end + slot] & (cols >= 1) & (cols <= self.window - 1)
            # only the first pixel column of each slot
            first = np.concatenate([[True], cols[1:] != cols[:-1]])
            sel = np.flatnonzero(hit & first)
            if sel.size:
                cols_px = (sel[:, None] + np.arange(self.width)[None, :]).ravel()
                cols_px = cols_px[cols_px < rect.w]
                out[rect.r0 : rect.r1, rect.c0 + cols_px] = MARK_COLOR


class _Bars:
    """Bars (probs / q-values) or mean ± std (Box) of the policy at one step."""

    def __init__(
        self,
        values: np.ndarray,
        rect: Rect,
        h: int,
        *,
        chosen: np.ndarray | None,
        std: np.ndarray | None,
        taken: np.ndarray | None,
        base: float,
    ):
        t, k = values.shape
        self.rect = rect
        self.top = np.rint(rect.row_of(values, h)).astype(np.int64)  # (T, K)
        self.base = int(np.rint(rect.row_of(np.array([base]), h)[0]))
        self.chosen = chosen
        x = rect.data_x(h)
        self.cols = []
        for i in range(k):
            inside = np.flatnonzero(np.abs(x - i) <= 0.35)
            self.cols.append((int(inside[0]), int(inside[-1]) + 1) if inside.size else (0, 0))
        self.whisk = None
        if std is not None:
            lo = rect.row_of(values - std, h)
            hi = rect.row_of(values + std, h)
            self.whisk = np.rint(np.stack([np.fmin(lo, hi), np.fmax(lo, hi)], -1)).astype(int)
        self.taken = None if taken is None else np.rint(rect.row_of(taken, h)).astype(np.int64)
        self.t = t

    def paint(self, step: int, out: np.ndarray) -> None:
        if step >= self.t:
            return
        r = self.rect
        region = out[r.r0 : r.r1, r.c0 : r.c1]
        hgt = r.h
        for i, (a, b) in enumerate(self.cols):
            if b <= a:
                continue
            top, base = self.top[step, i], self.base
            y0 = int(np.clip(min(top, base), r.r0, r.r1)) - r.r0
            y1 = int(np.clip(max(top, base) + 1, r.r0, r.r1)) - r.r0
            chosen = self.chosen is not None and int(self.chosen[step]) == i
            region[y0:y1, a:b] = CHOSEN_COLOR if chosen else BAR_COLOR
            mid = (a + b) // 2
            if self.whisk is not None:
                w0, w1 = (np.clip(self.whisk[step, i], r.r0, r.r1 - 1) - r.r0).tolist()
                region[w0 : w1 + 1, max(mid - 1, 0) : mid + 1] = TEXT_COLOR
            if self.taken is not None:
                y = int(np.clip(self.taken[step, i], r.r0, r.r1 - 1)) - r.r0
                region[max(y - 2, 0) : min(y + 2, hgt), a:b] = CHOSEN_COLOR


def matrix_of(layer: LayerActivity) -> np.ndarray | None:
    """The (T, N) array a layer is drawn with: spikes (spiking layers), ``h`` (ANN layers)."""
    if layer.kind == "spiking":
        return layer.spikes
    if layer.kind == "ann":
        return layer.get("h")
    return None


def matrix_layers(traj: Any, max_layers: int) -> list[LayerActivity]:
    """Layers to draw as matrices: spiking layers (spikes) and ANN layers (``h``)."""
    return [layer for layer in traj.activity if matrix_of(layer) is not None][:max_layers]


def _trace_source(traj: Any, mats: list[LayerActivity], m: int) -> dict[str, Any] | None:
    """Which units to draw as traces, the threshold line (if any) and the label."""
    index = {layer.name: i for i, layer in enumerate(traj.activity)}
    for layer in mats:
        if layer.kind == "spiking" and layer.v is not None:
            # Neurons that spike on about half of the steps show threshold crossings best;
            # silent or always-on neurons come last.
            rate = (layer.spikes > 0).mean(axis=0)
            units = np.argsort(-(rate * (1 - rate)), kind="stable")[:m]
            label = f"Membrane potential, layer {index[layer.name] + 1}"
            return dict(values=layer.v, units=units, threshold=layer.threshold, label=label,
                        unit_word="neuron")  # fmt: skip
    for layer in mats:
        if layer.kind == "ann":
            h = layer.get("h")
            units = np.argsort(-h.var(axis=0), kind="stable")[:m]
            label = f"Hidden activation, layer {index[layer.name] + 1}"
            return dict(values=h, units=units, threshold=None, label=label, unit_word="unit")
    for layer in traj.activity:
        if layer.v is not None:
            units = np.arange(min(m, layer.v.shape[1]))
            label = "Readout potential" if layer.kind == "readout" else f"{layer.name} v"
            return dict(values=layer.v, units=units, threshold=None, label=label,
                        unit_word="unit")  # fmt: skip
    return None


def _policy_source(traj: Any) -> dict[str, Any] | None:
    """Which policy output to draw, and how."""
    pol = traj.policy
    if "probs" in pol:
        return dict(kind="bars", key="probs", ylabel="P(action)", lim=(0.0, 1.0))
    if "q_values" in pol:
        return dict(kind="bars", key="q_values", ylabel="Q(action)", lim=None)
    if "mean" in pol:
        return dict(kind="box", key="mean", ylabel="action", lim=None)
    if pol:
        key = next(iter(pol))
        return dict(kind="bars", key=key, ylabel=key, lim=None)
    return None


def _limits(*arrays: np.ndarray | None, include: tuple[float, ...] = ()) -> tuple[float, float]:
    vals = [np.asarray(a, dtype=np.float64).ravel() for a in arrays if a is not None]
    vals.append(np.asarray(include, dtype=np.float64))
    v = np.concatenate(vals)
    v = v[np.isfinite(v)]
    lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 1.0)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    pad = 0.08 * (hi - lo)
    return lo - pad, hi + pad


def _ticks_with(lim: tuple[float, float], mark: float | None, n: int = 4) -> list[float]:
    """Nice y ticks inside ``lim`` that include ``mark`` (the threshold) when given."""
    from matplotlib.ticker import MaxNLocator

    ticks = [t for t in MaxNLocator(n).tick_values(*lim) if lim[0] <= t <= lim[1]]
    if mark is None or not lim[0] <= mark <= lim[1]:
        return ticks
    close = 0.18 * (lim[1] - lim[0])
    return sorted([t for t in ticks if abs(t - mark) > close] + [float(mark)])


def _fmt(v: float) -> str:
    return f"{v:g}"


def task_arrays(traj: Any) -> dict[str, Any]:
    """What the task panel draws, from a trajectory: observation channels (T, F), the action
    (T,), the ground truth (T,) or None, the reward (T,), trial starts (T,) bool or None."""
    t = len(traj)
    obs = np.asarray(traj.observations, dtype=np.float64).reshape(t, -1)
    acts = np.asarray(traj.actions)
    action = acts.reshape(t, -1)[:, 0].astype(np.float64) if acts.size else np.zeros(t)
    task = getattr(traj, "task", None) or {}
    gt = task.get("gt") if isinstance(task, dict) else None
    new_trial = task.get("new_trial") if isinstance(task, dict) else None
    if gt is not None:
        gt = np.asarray(gt, dtype=np.float64).reshape(t, -1)[:, 0]
    if new_trial is not None:
        new_trial = np.asarray(new_trial, dtype=bool).reshape(t)
    return dict(obs=obs, action=action, gt=gt, reward=np.asarray(traj.rewards, np.float64),
                new_trial=new_trial, discrete=np.issubdtype(acts.dtype, np.integer))  # fmt: skip


class _Sheet:
    """The layout of one video's figure while :class:`VideoCanvas` builds it: the scale and
    its pixel function, font sizes, margins, column boxes, the figure and its time window."""

    def __init__(self, scale: float) -> None:
        self.s = scale
        self.fig: Any = None

    def px(self, v: float) -> int:
        """``v`` pixels at scale 1, at this video's scale (at least 1)."""
        return max(int(round(v * self.s)), 1)


class VideoCanvas:
    """Every frame of the video of one trajectory, painted over a static background.

    Args:
        traj: a :class:`snrl.Trajectory` with T >= 1.
        frame_hw: height and width of the env frames, or ``None`` to draw the task panel
            (envs without frames).
        crop: ``(y0, y1, x0, x1)`` part of each env frame shown (its content), or None.
        activity: draw the network column (rasters, traces) and the policy.
        scale: size factor; 1 gives frames at least 540 pixels high, text >= 14 pixels.
        window: env steps shown by the scrolling matrices and traces.
        panel_width: width of the network column at scale 1, pixels.
        max_traces: units drawn as traces.
        max_layers: layers drawn as matrices.
        timeline: ``"page"``: the window is a fixed page of ``window`` steps with absolute
            time ticks, filled from the left as the episode goes on, then the next page;
            ``"scroll"``: the newest step at the right edge, relative time ticks ("now").
            Pages change a few pixel columns per frame (small GIFs); scrolling changes every
            column.
        layout: ``"compact"``: the frame is as large as its content needs (about 2.5:1
            with the task panel); ``"16:9"``: the frame is stretched to exactly 16:9 (width
            a multiple of 32 pixels), the extra room going to the panels, so that it fills
            a slide without letterboxing.

    Attributes:
        texts: every text drawn on the background (titles, axis and tick labels, legend
            entries), as built for the first frame.
    """

    def __init__(
        self,
        traj: Any,
        *,
        frame_hw: tuple[int, int] | None,
        crop: tuple[int, int, int, int] | None = None,
        activity: bool = True,
        scale: float = 1.0,
        window: int = 100,
        panel_width: int = 640,
        max_traces: int = 3,
        max_layers: int = 3,
        timeline: str = "page",
        layout: str = "compact",
    ) -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"layout={layout!r} (use one of {', '.join(LAYOUTS)})")
        self.layout = layout
        task = self._read(traj, window, timeline)
        mats = matrix_layers(traj, max_layers) if activity else []
        trace = _trace_source(traj, mats, max_traces) if activity else None
        policy = _policy_source(traj) if activity else None
        g = self._layout(scale, frame_hw, crop, policy, bool(mats or trace), panel_width)
        self._title(traj, g)
        task_axes: list[Any] = []
        task_spec: list[tuple[Any, np.ndarray, list, bool]] = []
        if frame_hw is not None:
            env_bottom = g.height - (g.xtick_h + g.bars_h + g.title_h + g.px(8) if policy else 0)
            self.env_box = (
                g.top + max(env_bottom - g.top - g.fh, 0) // 2,
                (g.left_w - g.fw) // 2,
                g.fh,
                g.fw,
            )
        else:
            task_axes, task_spec = self._task_axes(traj, task, g, policy)
        bar_ax = self._policy_axes(traj, policy, g, frame_hw) if policy else None
        mat_axes, trace_top = self._matrix_axes(traj, mats, trace, g)
        trace_ax = self._trace_axes(trace, trace_top, g) if trace else None

        g.fig.canvas.draw()
        self.background = np.asarray(g.fig.canvas.buffer_rgba())[..., :3].copy()
        self.texts = self._texts(g.fig)
        self._fig = g.fig
        self._page_shown = 0
        self._painters(traj, task, g, mat_axes, trace, trace_ax, task_axes, task_spec, bar_ax)
        self.buf = self.background.copy()
        if not self.page:
            g.fig.clear()
            self._fig = None

    @staticmethod
    def _texts(fig: Any) -> list[str]:
        """Every text the background shows (titles, labels, legends, tick labels)."""
        from matplotlib.text import Text

        return [t.get_text() for t in fig.findobj(Text) if t.get_text() and t.get_visible()]

    # ------------------------------------------------------------------ building
    def _read(self, traj: Any, window: int, timeline: str) -> dict[str, Any]:
        """What the frames show of ``traj`` besides activity: length, time step, returns,
        trial numbers and performance; returns its task arrays (:func:`task_arrays`)."""
        self.t = t = len(traj)
        if timeline not in ("page", "scroll"):
            raise ValueError(f"timeline={timeline!r} (use 'page' or 'scroll')")
        self.page = timeline == "page"
        if self.page:  # an episode shorter than the window fills one page
            window = max(min(window, t), 2)
        self.window = window
        self.sub = int(getattr(traj, "substeps", None) or 1)
        dt = getattr(traj, "dt", None)
        if dt is None:
            dt = traj.meta.get("dt") if isinstance(traj.meta.get("dt"), (int, float)) else None
        self.dt = float(dt) if dt is not None and dt > 0 else None
        self._step_unit = self.dt if self.dt else 1.0  # data x units per env step
        self.rewards = traj.rewards
        self.cum = np.concatenate([[0.0], np.cumsum(traj.rewards)])
        self.ended = (
            "terminated" if traj.terminated[-1] else "truncated" if traj.truncated[-1] else ""
        )
        task = task_arrays(traj)
        self.trial_index = None
        if task["new_trial"] is not None:
            # trial number shown at frame k: trials started before step k (+1: the current)
            self.trial_index = np.concatenate([[1], 1 + np.cumsum(task["new_trial"])])
        self.performance = None
        perf = (getattr(traj, "task", None) or {}).get("performance")
        if perf is not None:
            self.performance = np.asarray(perf, np.float64).reshape(t)
        return task

    def _layout(
        self,
        scale: float,
        frame_hw: tuple[int, int] | None,
        crop: tuple[int, int, int, int] | None,
        policy: dict | None,
        right: bool,
        panel_width: int,
    ) -> _Sheet:
        """Sizes of the columns and the figure; the left column holds the env frame (or the
        task panel) over the policy bars, the right one the network."""
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        g = _Sheet(float(scale))
        px = g.px
        g.fs, g.fs_label = px(TEXT_PX) * 0.72, px(16) * 0.72  # points at dpi 100
        g.pad = pad = px(12)
        self.glyphs = _glyphs(px(18))
        g.title_px = px(TITLE_PX)  # the title's line, then the text line under it
        title_line = round(1.3 * g.title_px) + px(4)
        g.top = top = pad + title_line + self.glyphs.h + px(12)
        base_h = px(BASE_HEIGHT) + title_line  # the title's line adds to the content's room
        g.ylab_w = ylab_w = px(64)  # room left of an axes for tick labels and its y label
        g.xtick_h = xtick_h = px(44)  # room under an axes for tick labels and x label
        g.title_h = title_h = px(24)  # room above an axes for its title

        self.env_box: tuple[int, int, int, int] | None = None  # y, x, h, w (after zoom)
        self.zoom = 1
        self.crop = crop
        g.bars_h = bars_h = (px(150) if frame_hw is not None else px(100)) if policy else 0
        if frame_hw is not None:
            ch, cw = (crop[1] - crop[0], crop[3] - crop[2]) if crop else frame_hw
            max_w = px(640)
            room_h = max(base_h - top - bars_h - (xtick_h + title_h if policy else 0),
                         1)  # fmt: skip
            self.zoom = max(1, min(room_h // max(ch, 1), max_w // max(cw, 1)))
            g.fh, g.fw = ch * self.zoom, cw * self.zoom
            left_w = max(g.fw, px(360) if policy else 0)
            left_content_h = g.fh
        else:
            g.fh = g.fw = 0
            left_w = px(560)
            left_content_h = px(300)
        g.left_w = left_w
        left_h = top + left_content_h + (title_h + bars_h + xtick_h if policy else pad)
        height = max(left_h, base_h if (right or frame_hw is None) else left_h)
        g.x_right = x_right = left_w + pad + ylab_w
        g.right_w = right_w = px(panel_width) if right else 0
        cbar_w = px(90)  # room right of the matrices: E/I counts or a colour bar
        width = x_right + right_w + cbar_w if right else left_w + (pad if frame_hw else 0)
        if not right and frame_hw is None:
            width = left_w + pad + ylab_w + pad
        if self.layout == "16:9":  # exactly 16:9; the panels take the extra room
            if width * 9 >= height * 16:
                full_w = -(-width // 32) * 32
                full_h = full_w * 9 // 16
            else:
                full_h = -(-height // 18) * 18
                full_w = full_h * 16 // 9
            if right:
                g.right_w = right_w = right_w + full_w - width
            else:
                g.left_w = left_w = left_w + full_w - width
            width, height = full_w, full_h
        self.height, self.width = height + height % 2, width + width % 2
        g.height, g.width = self.height, self.width

        g.fig = Figure(figsize=(g.width / 100, g.height / 100), dpi=100)
        FigureCanvasAgg(g.fig)
        g.fig.patch.set_facecolor(_hex(BG_COLOR))

        # the time window in data units: env steps, or seconds when dt is known
        g.wr = wr = self.window * self.sub  # matrix rows in the window (neuron steps)
        g.row_unit = row_unit = self._step_unit / self.sub
        if self.page:
            self._xlim = (-0.5 * row_unit, (wr - 0.5) * row_unit)
        else:
            self._xlim = (-(wr - 0.5) * row_unit, 0.5 * row_unit)
        g.xlabel = "time (s)" if self.dt else "time (env steps)"
        self._time_axes: list[tuple[Any, bool]] = []
        return g

    def _axes(self, g: _Sheet, x: int, y_top: int, w: int, h: int) -> Any:
        """Axes at pixel box (x, y_top, w, h) of the figure, in the video's style."""
        ax = g.fig.add_axes((x / g.width, 1 - (y_top + h) / g.height, w / g.width, h / g.height))
        for sp in ax.spines.values():
            sp.set_linewidth(1.0)
            sp.set_color("#555555")
        ax.spines["top"].set_visible(True)
        ax.tick_params(labelsize=g.fs, length=g.px(3), pad=g.px(2))
        return ax

    def _time_axis(self, g: _Sheet, ax: Any, show: bool) -> None:
        """Make ``ax``'s x axis the time window (ticks and label only when ``show``)."""
        ax.set_xlim(*self._xlim)
        self._time_axes.append((ax, show))
        if not show:
            ax.set_xticks([])
            return
        ax.set_xlabel(g.xlabel, fontsize=g.fs, labelpad=g.px(1))
        self._set_ticks(ax, 0)

    def _title(self, traj: Any, g: _Sheet) -> None:
        """The static title (top left, large, bold); the dynamic text line under it."""
        meta = traj.meta
        algo = str(meta.get("algo") or "").upper()
        title = "  ·  ".join(
            str(x) for x in (traj.env, algo, backbone_label(meta.get("backbone"))) if x
        )
        if title:  # large and dark: readable on a projected slide
            g.fig.text(g.pad / g.width, 1 - g.pad / g.height, title,
                       fontsize=g.title_px * 0.72, color=_hex(TEXT_COLOR), va="top",
                       ha="left", fontweight="bold")  # fmt: skip
        self.text_row = g.pad + round(1.3 * g.title_px) + g.px(4)
        self.text_col = g.pad

    def _task_axes(
        self, traj: Any, task: dict[str, Any], g: _Sheet, policy: dict | None
    ) -> tuple[list[Any], list[tuple[Any, np.ndarray, list, bool]]]:
        """The task panel (envs without frames): observation channels, the chosen action
        against the ground truth, the reward; returns the axes and what each one traces."""
        from matplotlib.ticker import MaxNLocator

        px, fs, meta = g.px, g.fs, traj.meta
        task_axes: list[Any] = []
        task_spec: list[tuple[Any, np.ndarray, list, bool]] = []
        obs, f = task["obs"], task["obs"].shape[1]
        names = meta.get("obs_names")
        names = names if isinstance(names, list) and len(names) == f else None
        ax_x, ax_w = g.pad + g.ylab_w, g.left_w - g.ylab_w
        n_ax = 3
        gap = px(6)
        # each axes has a legend line above it; the last one its time ticks below
        used = g.top + n_ax * g.title_h + gap * (n_ax - 1) + g.xtick_h
        if policy:
            used += px(8) + g.title_h + g.bars_h + g.xtick_h
        each = (g.height - used) // n_ax
        y = g.top + g.title_h
        # observation channels (lines; a heatmap would hide values of few channels)
        ax = self._axes(g, ax_x, y, ax_w, each)
        chans = min(f, 6)
        vals = obs[:, :chans]
        ax.set_ylim(*_limits(vals))
        ax.yaxis.set_major_locator(MaxNLocator(3))
        self._time_axis(g, ax, False)
        ax.set_ylabel("observation", fontsize=fs)
        styles = pal.group_styles(chans)
        colors = [pal.rgb(c) for c, _ in styles]
        label = ", ".join((names[i] if names else f"ch {i}") for i in range(chans)) + (
            "" if f <= chans else f" (of {f})"
        )
        self._legend(g.fig, ax, "Observation", label.split(", "), colors, fs, g.height,
                     g.width, px)  # fmt: skip
        task_axes.append(ax)
        task_spec.append((ax, vals, colors, False))
        y += each + gap + g.title_h
        # chosen action vs ground truth
        ax = self._axes(g, ax_x, y, ax_w, each)
        av = [task["action"]] + ([task["gt"]] if task["gt"] is not None else [])
        ax.set_ylim(*_limits(*av))
        named = False
        if task["discrete"]:
            n_act = int(np.nanmax(np.concatenate(av))) + 1
            anames = meta.get("action_names")
            ticks = list(range(n_act))
            named = isinstance(anames, list) and len(anames) >= n_act
            if named:  # the names take the y label's room (the legend says "Action")
                ax.set_yticks(ticks, [str(anames[i]) for i in ticks])
            else:
                ax.set_yticks(ticks)
        self._time_axis(g, ax, False)
        if not (task["discrete"] and named):
            ax.set_ylabel("action", fontsize=fs)
        cols2 = [CHOSEN_COLOR] + ([GT_COLOR] if task["gt"] is not None else [])
        names2 = ["chosen"] + (["ground truth"] if task["gt"] is not None else [])
        self._legend(g.fig, ax, "Action", names2, cols2, fs, g.height, g.width, px)
        task_axes.append(ax)
        # ground truth first, the chosen action over it
        task_spec.append((ax, np.stack(av[::-1], 1), cols2[::-1], True))
        y += each + gap + g.title_h
        # reward
        ax = self._axes(g, ax_x, y, ax_w, each)
        ax.set_ylim(*_limits(task["reward"], include=(0.0,)))
        ax.yaxis.set_major_locator(MaxNLocator(3))
        ax.axhline(0, lw=0.8, color=pal.MUTED_COLOR)
        self._time_axis(g, ax, True)
        ax.set_ylabel("reward", fontsize=fs)
        self._legend(g.fig, ax, "Reward", [], [], fs, g.height, g.width, px)
        task_axes.append(ax)
        task_spec.append((ax, task["reward"][:, None], [GT_COLOR], True))
        if task["new_trial"] is not None:
            ax.annotate("| = trial start", (1.0, 1.0), xycoords="axes fraction",
                        xytext=(0, px(4)), textcoords="offset points", ha="right",
                        va="bottom", color=_hex(MARK_COLOR), fontsize=fs)  # fmt: skip
        return task_axes, task_spec

    def _policy_axes(
        self, traj: Any, policy: dict, g: _Sheet, frame_hw: tuple[int, int] | None
    ) -> Any:
        """The policy's bars under the env frame or the task panel."""
        px, fs, t = g.px, g.fs, self.t
        left_w = g.left_w
        bx = g.pad + g.ylab_w if frame_hw is None else max(g.pad + px(56), (left_w - px(300)) // 2)
        bw = (left_w - g.ylab_w) if frame_hw is None else min(px(300), left_w - bx - g.pad)
        by = g.height - g.xtick_h - g.bars_h
        bar_ax = self._axes(g, bx, by, bw, g.bars_h)
        vals = traj.policy[policy["key"]]
        k = vals.shape[1]
        bar_ax.set_xlim(-0.5, k - 0.5)
        std = traj.policy.get("std") if policy["kind"] == "box" else None
        taken = None
        if policy["kind"] == "box":
            acts = np.asarray(traj.actions, dtype=np.float64).reshape(t, -1)
            taken = acts if acts.shape[1] == k else None
        if policy["lim"] is not None:
            lim = policy["lim"]
        else:
            lo = None if std is None else vals - std
            hi = None if std is None else vals + std
            lim = _limits(vals, lo, hi, taken, include=(0.0,))
        bar_ax.set_ylim(*lim)
        bar_ax.set_yticks(_ticks_with(lim, None, 3))
        if lim[0] < 0 < lim[1]:
            bar_ax.axhline(0, lw=0.8, color=pal.MUTED_COLOR)
        names = traj.meta.get("action_names")
        step = max(1, int(np.ceil(k / 8)))
        ticks = list(range(0, k, step))
        if isinstance(names, list) and len(names) == k:
            bar_ax.set_xticks(ticks, [str(names[i]) for i in ticks])
        else:
            bar_ax.set_xticks(ticks, [str(i) for i in ticks])
        bar_ax.set_xlabel("action", fontsize=fs, labelpad=px(1))
        bar_ax.set_ylabel(policy["ylabel"], fontsize=fs, labelpad=px(2))
        what = "chosen action highlighted" if policy["kind"] == "bars" else "mean ± std, taken"
        bar_ax.set_title(f"Policy ({what})", fontsize=fs, loc="left", pad=px(4))
        self._bar_args = dict(vals=vals, std=std, taken=taken, kind=policy["kind"],
                              base=float(np.clip(0.0, *lim)))  # fmt: skip
        return bar_ax

    def _matrix_axes(
        self, traj: Any, mats: list, trace: dict | None, g: _Sheet
    ) -> tuple[list[tuple[Any, LayerActivity]], int]:
        """One raster (spiking) or heatmap (ANN) per layer in the network column; returns
        the axes with their layers and where the traces start."""
        px, fs, meta = g.px, g.fs, traj.meta
        min_trace_h = px(110) if trace else 0
        mat_top = g.top + g.title_h
        mat_bottom = g.height - (
            min_trace_h + g.title_h + g.xtick_h + px(8) if trace else g.xtick_h
        )
        gap = g.title_h + px(6)
        n = len(mats)
        mat_axes = []
        index = {layer.name: i for i, layer in enumerate(traj.activity)}
        y = mat_top
        if n:
            each = (mat_bottom - mat_top - gap * (n - 1)) // n
            for i, layer in enumerate(mats):
                size = layer.size
                h_ax = matrix_height(size, each - 2) + 2
                ax = self._axes(g, g.x_right, y, g.right_w, h_ax)
                self._time_axis(g, ax, i == n - 1 and not trace)
                ax.set_ylim(size, 0)
                ax.set_yticks([0, size], ["0", str(size)] if size else ["0", ""])
                ax.set_ylabel("neuron" if layer.kind == "spiking" else "unit", fontsize=fs,
                              labelpad=px(1))  # fmt: skip
                label = layer_label(layer, index[layer.name], backbone=meta.get("backbone"))
                if layer.kind == "ann":
                    label = label.replace(f"{size} units", f"{size} units, activation")
                ax.set_title(label, fontsize=g.fs_label, loc="left", pad=px(4))
                if layer.kind == "spiking":
                    counts = ei_counts(layer.sign)
                    if counts is not None:
                        self._ei_labels(g.fig, ax, counts, size, each, fs, px, g.height, g.width)
                else:
                    self._colorbar(g.fig, ax, matrix_of(layer), fs, px, g.height, g.width)
                mat_axes.append((ax, layer))
                y += h_ax + (gap if i < n - 1 else 0)
        # the traces take the room the matrices leave
        return mat_axes, (y + g.title_h + px(8) if n else mat_top)

    def _trace_axes(self, trace: dict, trace_top: int, g: _Sheet) -> Any:
        """Membrane (or unit) traces of a few units under the matrices."""
        px, fs = g.px, g.fs
        trace_ax = self._axes(g, g.x_right, trace_top, g.right_w, g.height - g.xtick_h - trace_top)
        self._time_axis(g, trace_ax, True)
        vals = trace["values"][:, trace["units"]]
        thr = trace["threshold"]
        lim = _limits(vals, include=() if thr is None else (thr,))
        trace_ax.set_ylim(*lim)
        trace_ax.set_yticks(_ticks_with(lim, thr, 4))
        trace_ax.yaxis.set_major_formatter("{x:g}")
        if thr is not None:
            trace_ax.axhline(thr, ls="--", lw=1.2, color=pal.MUTED_COLOR)
            trace_ax.annotate(f"threshold {thr:g}", (1.0, thr),
                              xycoords=("axes fraction", "data"), xytext=(px(6), 0),
                              textcoords="offset points", va="center", ha="left",
                              fontsize=fs, color=pal.MUTED_COLOR)  # fmt: skip
        unit_word = trace["unit_word"]
        colors = [TRACE_COLORS[j % len(TRACE_COLORS)] for j in range(vals.shape[1])]
        self._legend(g.fig, trace_ax, trace["label"],
                     [f"{unit_word} {int(u)}" for u in trace["units"]], colors, fs, g.height,
                     g.width, px, big=True)  # fmt: skip
        return trace_ax

    def _painters(
        self,
        traj: Any,
        task: dict[str, Any],
        g: _Sheet,
        mat_axes: list[tuple[Any, LayerActivity]],
        trace: dict | None,
        trace_ax: Any,
        task_axes: list[Any],
        task_spec: list[tuple[Any, np.ndarray, list, bool]],
        bar_ax: Any,
    ) -> None:
        """What paints each frame over the background: matrices, traces, trial marks,
        policy bars, and the palette of every colour they use."""
        height, page, s = g.height, self.page, g.s
        self.matrices: list[_Matrix] = []
        for ax, layer in mat_axes:
            rect = _rect(ax, height)
            arr = matrix_of(layer)
            if layer.kind == "spiking":
                codes, _ = raster_codes(arr, layer.sign, rect.h)
                palette = RASTER_PALETTE
            else:
                codes, _ = heatmap_codes(arr, rect.h)
                palette = heatmap_palette()
            self.matrices.append(_Matrix(codes, palette, rect, g.wr, height, g.row_unit, page=page))
        self.traces: _Traces | None = None
        if trace_ax is not None:
            rect = _rect(trace_ax, height)
            vals = trace["values"][:, trace["units"]]
            colors = [TRACE_COLORS[j % len(TRACE_COLORS)] for j in range(vals.shape[1])]
            self.traces = _Traces(vals, colors, rect, g.wr, height, g.row_unit, width=s, page=page)
        self.task_traces = [
            _Traces(
                v,
                c,
                _rect(ax, height),
                self.window,
                height,
                self._step_unit,
                steps=st,
                width=s,
                page=page,
            )  # fmt: skip
            for ax, v, c, st in task_spec
        ]
        self.marks = None
        if task_axes and task["new_trial"] is not None:
            rects = [_rect(ax, height) for ax in task_axes]
            # NeuroGym's new_trial is True on the last step of a trial: the line goes
            # between that step and the next one (the left edge of the next step's slot)
            starts = np.concatenate([[False], task["new_trial"][:-1]])
            self.marks = _Marks(starts, rects, self.window, height, self._step_unit, page=page,
                                width=g.px(2))  # fmt: skip
        self.bars: _Bars | None = None
        if bar_ax is not None:
            a = self._bar_args
            chosen = None
            if a["kind"] == "bars" and np.issubdtype(np.asarray(traj.actions).dtype, np.integer):
                chosen = np.asarray(traj.actions).reshape(self.t, -1)[:, 0]
            self.bars = _Bars(a["vals"], _rect(bar_ax, height), height, chosen=chosen,
                              std=a["std"], taken=a["taken"], base=a["base"])  # fmt: skip
        parts = [RASTER_PALETTE, np.array(TRACE_COLORS + (BAR_COLOR, CHOSEN_COLOR, TEXT_COLOR,
                                                          MARK_COLOR, GT_COLOR))]  # fmt: skip
        if any(m.palette.shape[0] > RASTER_PALETTE.shape[0] for m in self.matrices):
            parts.append(heatmap_palette())
        self.colors = np.concatenate(parts).astype(np.uint8)

    # ------------------------------------------------------------------ static helpers
    @staticmethod
    def _legend(fig: Any, ax: Any, title: str, names: list[str], colors: list, fs: float,
                height: int, width: int, px: Any, big: bool = False) -> None:  # fmt: skip
        """A one-line legend above ``ax``: its title, then coloured names."""
        from matplotlib.offsetbox import AnchoredOffsetbox, HPacker, TextArea

        parts = [TextArea(title, textprops=dict(fontsize=fs * (16 / 14 if big else 1),
                                                color="#1a1a1a"))]  # fmt: skip
        for name, c in zip(names, colors):
            parts.append(TextArea(f"— {name}", textprops=dict(fontsize=fs, color=_hex(c),
                                                               fontweight="bold")))  # fmt: skip
        box = HPacker(children=parts, align="baseline", pad=0, sep=px(10))
        anchored = AnchoredOffsetbox(loc="lower left", child=box, pad=0, borderpad=0,
                                     frameon=False, bbox_to_anchor=(0, 1.0),
                                     bbox_transform=ax.transAxes)  # fmt: skip
        anchored.set_clip_on(False)
        ax.add_artist(anchored)
        ax.figure.subplots_adjust()  # no-op; keeps the axes where they are
        del height, width

    @staticmethod
    def _ei_labels(fig: Any, ax: Any, counts: tuple[int, int], size: int, each: int, fs: float,
                   px: Any, height: int, width: int) -> None:  # fmt: skip
        """E/I neuron counts right of a raster, in the E and I colours, and the divider."""
        n_e, n_i = counts
        if 0 < n_e < size:
            ax.axhline(n_e, color=pal.MUTED_COLOR, lw=0.8)
        for text, mid, color in ((f"{n_e} E", n_e / 2, pal.E_COLOR),
                                 (f"{n_i} I", n_e + n_i / 2, pal.I_COLOR)):  # fmt: skip
            if not text.startswith("0 "):
                ax.annotate(text, (1.0, mid), xycoords=("axes fraction", "data"),
                            xytext=(px(6), 0), textcoords="offset points", va="center",
                            ha="left", fontsize=fs, color=color, fontweight="bold")  # fmt: skip
        del fig, each, height, width

    @staticmethod
    def _colorbar(fig: Any, ax: Any, values: np.ndarray, fs: float, px: Any, height: int,
                  width: int) -> None:  # fmt: skip
        """A colour bar right of a heatmap, its scale the heatmap's."""
        from matplotlib import colormaps
        from matplotlib.cm import ScalarMappable
        from matplotlib.colors import Normalize

        vmax = heatmap_vmax(np.asarray(values, dtype=np.float64))
        x0, y0, x1, y1 = ax.get_position().extents
        cax = fig.add_axes((x1 + px(8) / width, y0, px(14) / width, y1 - y0))
        sm = ScalarMappable(norm=Normalize(-vmax, vmax), cmap=colormaps["RdBu_r"])
        bar = fig.colorbar(sm, cax=cax)
        bar.set_ticks([-vmax, 0, vmax], labels=[f"{-vmax:.2g}", "0", f"{vmax:.2g}"])
        cax.tick_params(labelsize=fs, length=px(3), pad=px(2))
        bar.outline.set_linewidth(0.8)

    def _set_ticks(self, ax: Any, p: int) -> None:
        """Time ticks of page ``p`` (absolute) or of the scrolling window (relative, "now")."""
        from matplotlib.ticker import MaxNLocator

        lo, hi = self._xlim
        shift = p * self.window * self._step_unit
        if self.page:
            ticks = [v for v in MaxNLocator(5).tick_values(lo + shift, hi + shift)
                     if lo + shift <= v <= hi + shift]  # fmt: skip
            ax.set_xticks(ticks, [_fmt(round(v, 6)) for v in ticks])
        else:
            ticks = [v for v in MaxNLocator(4).tick_values(lo, 0) if lo <= v <= 0]
            ax.set_xticks(ticks, [("now" if v == 0 else _fmt(round(v, 6))) for v in ticks])

    def _show_page(self, p: int) -> None:
        """Redraw the background with the time axes of page ``p``."""
        if p == self._page_shown or self._fig is None:
            return
        shift = p * self.window * self._step_unit
        lo, hi = self._xlim
        for ax, show in self._time_axes:
            ax.set_xlim(lo + shift, hi + shift)
            if show:
                self._set_ticks(ax, p)
        self._fig.canvas.draw()
        self.background = np.asarray(self._fig.canvas.buffer_rgba())[..., :3].copy()
        self._page_shown = p

    # ------------------------------------------------------------------ per frame
    def text(self, k: int) -> str:
        """The dynamic text line of frame k."""
        reward = f"{self.rewards[k - 1]:+.3g}" if k > 0 else ""
        width = len(str(self.t))
        parts = [f"step {k:>{width}}/{self.t}"]
        if self.dt:
            parts.append(f"t {k * self.dt:.2f} s")
        if self.trial_index is not None:
            parts.append(f"trial {int(self.trial_index[min(k, self.t)])}")
        parts += [f"reward {reward:<6}", f"return {self.cum[k]:.4g}"]
        if k == self.t and self.ended:
            parts.append(self.ended)
        return "   ".join(parts)

    def paint(self, k: int, frame: np.ndarray | None) -> np.ndarray:
        """Frame ``k`` (0..T); returns an internal buffer that the next call overwrites."""
        out = self.buf
        end = min(k, self.t - 1)
        p = end // self.window if self.page else 0
        self._show_page(p)
        out[...] = self.background
        start, rstart = p * self.window, p * self.window * self.sub
        if frame is not None and self.env_box is not None:
            y, x, h, w = self.env_box
            if self.crop is not None:
                y0, y1, x0, x1 = self.crop
                frame = frame[y0:y1, x0:x1]
            if self.zoom > 1:
                frame = np.repeat(np.repeat(frame, self.zoom, axis=0), self.zoom, axis=1)
            out[y : y + h, x : x + w] = frame
        if self.marks is not None:
            self.marks.paint(end, out, start)
        for tr in self.task_traces:
            tr.paint(end, out, start)
        rend = end * self.sub + self.sub - 1  # last neuron step of env step `end`
        for m in self.matrices:
            m.paint(rend, out, rstart)
        if self.traces is not None:
            self.traces.paint(rend, out, rstart)
        if self.bars is not None:
            self.bars.paint(k, out)
        self.glyphs.draw(out, self.text_row, self.text_col, self.text(k))
        return out


def content_box(
    frames: Any, *, margin: int = 8, max_samples: int = 120
) -> tuple[int, int, int, int] | None:
    """``(y0, y1, x0, x1)`` around everything that is not background in any of ``frames``.

    The background is the most common colour on the border of the first frame; up to
    ``max_samples`` frames spread over the episode (the first and the last included) are
    looked at. Returns None when the content fills (nearly) the whole frame, so that
    nothing is cropped.
    """
    first = np.asarray(frames[0])
    h, w = first.shape[:2]
    border = np.concatenate([first[0], first[-1], first[:, 0], first[:, -1]]).astype(np.int32)
    keys = (border[:, 0] << 16) | (border[:, 1] << 8) | border[:, 2]
    vals, counts = np.unique(keys, return_counts=True)
    bg = int(vals[np.argmax(counts)])
    n = len(frames)
    idx = np.unique(np.linspace(0, n - 1, min(n, max_samples)).round().astype(int))
    mask = np.zeros((h, w), bool)
    bg_key = np.uint32(bg)
    for i in idx:  # 24-bit colour keys: one comparison per pixel
        f = np.asarray(frames[i]).astype(np.uint32)
        mask |= ((f[..., 0] << 16) | (f[..., 1] << 8) | f[..., 2]) != bg_key
    rows, cols = np.flatnonzero(mask.any(1)), np.flatnonzero(mask.any(0))
    if rows.size == 0:
        return None
    y0, y1 = max(int(rows[0]) - margin, 0), min(int(rows[-1]) + 1 + margin, h)
    x0, x1 = max(int(cols[0]) - margin, 0), min(int(cols[-1]) + 1 + margin, w)
    if (y1 - y0) * (x1 - x0) > 0.9 * h * w:
        return None
    return y0, y1, x0, x1
