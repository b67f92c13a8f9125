"""The activity panel drawn beside each video frame, composed from numpy pieces.

Matplotlib draws the static parts once (axes, ticks, labels, threshold line, legends) into
a background image. Per frame, the panel copies that background and paints only the parts
that change, straight into pixel rectangles located from the axes' transforms:

- a scrolling matrix per layer over the last ``window`` steps, newest at the right edge:
  a spike raster for spiking layers (excitatory red, inhibitory blue, neurons grouped E
  then I; black when the layer has no sign) or a heatmap of hidden activations for ANN
  layers (blue-white-red, symmetric around 0);
- traces of a few units (membrane potential of the spiking neurons whose firing rate is
  closest to one spike every other step, with the threshold as a dashed line; hidden
  activations of the most variable ANN units);
- the policy output at this step: bars for ``probs``/``q_values`` (the chosen action
  highlighted), mean with a ±std whisker and the taken action as a tick for Box actions;
- a text line: step counter, last reward, return so far (fixed-width glyphs pre-rendered
  once).

Frame ``k`` (0..T) of a trajectory of T steps shows the activity window ending at step
``min(k, T - 1)``, the policy output of step ``k`` (none on the last frame, k = T), the
reward received on the step that led to frame ``k`` and the return accumulated so far.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from snrl.networks.activity import LayerActivity

E_COLOR = (205, 40, 40)
I_COLOR = (40, 90, 215)
SPIKE_COLOR = (20, 20, 20)
PRE_COLOR = (236, 236, 236)
BG_COLOR = (255, 255, 255)
BAR_COLOR = (120, 150, 190)
CHOSEN_COLOR = (235, 125, 20)
TRACE_COLORS = ((31, 119, 180), (44, 160, 44), (148, 103, 189), (140, 86, 75))
TEXT_COLOR = (20, 20, 20)

MIN_PANEL_HEIGHT = 360


def _hex(c: tuple[int, int, int]) -> str:
    return "#{:02x}{:02x}{:02x}".format(*c)


class Glyphs:
    """Fixed-width text rendered once per character, then composed by copying tiles."""

    def __init__(self, *, fontsize: float = 8.0, color: tuple[int, int, int] = TEXT_COLOR):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        chars = [chr(c) for c in range(32, 127)]
        em = fontsize * 100 / 72
        self.w = int(np.ceil(0.602 * em))
        self.h = int(np.ceil(1.25 * em))
        fig = Figure(figsize=(self.w * len(chars) / 100, self.h / 100), dpi=100)
        FigureCanvasAgg(fig)
        fig.patch.set_facecolor(_hex(BG_COLOR))
        base = 0.27 * em / self.h
        for i, ch in enumerate(chars):
            fig.text(
                i / len(chars),
                base,
                ch,
                fontfamily="DejaVu Sans Mono",
                fontsize=fontsize,
                color=_hex(color),
                va="baseline",
                ha="left",
            )
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
def _glyphs() -> Glyphs:
    """The panel's glyph set, built once per process (its tiles are never modified)."""
    return Glyphs()


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
    x0, y0, x1, y1 = ax.get_window_extent().extents
    return Rect(
        r0=int(np.floor(height - y1)) + 1,
        r1=int(np.ceil(height - y0)) - 1,
        c0=int(np.floor(x0)) + 1,
        c1=int(np.ceil(x1)) - 1,
        ax=ax,
    )


def _slots(rect: Rect, window: int, height: int) -> np.ndarray:
    """(w,) window slot (0 = oldest, window-1 = newest) shown by each pixel column."""
    x = rect.data_x(height)  # data x: -(window - 1) .. 0
    return np.clip(np.rint(x + window - 1), 0, window - 1).astype(np.int64)


class _Matrix:
    """A scrolling (units x window) image: raster codes or heatmap levels -> palette."""

    def __init__(self, codes: np.ndarray, palette: np.ndarray, rect: Rect, window: int, h: int):
        # codes: (rows_of_pixels, T) uint8 already reduced to the rect's height.
        pre = palette.shape[0] - 1
        pad = np.full((codes.shape[0], window - 1), pre, dtype=np.uint8)
        self.padded = np.ascontiguousarray(np.concatenate([pad, codes], axis=1))
        self.palette = palette
        self.rect = rect
        self.cols = _slots(rect, window, h)

    def paint(self, end: int, out: np.ndarray) -> None:
        r = self.rect
        out[r.r0 : r.r1, r.c0 : r.c1] = np.take(self.palette, self.padded[:, end + self.cols], 0)


def _pixel_groups(n: int, h: int) -> np.ndarray:
    """Start index (into n units) of the units shown by each of h pixel rows (top first)."""
    return np.floor(np.arange(h) * n / h).astype(np.int64)


def raster_codes(spikes: np.ndarray, sign: list[int] | None, h: int) -> tuple[np.ndarray, Any]:
    """Reduce (T, N) spikes to (h, T) palette codes; returns codes and display order.

    Codes: 0 background, 1 excitatory spike, 2 inhibitory spike, 3 spike (no sign),
    4 before the episode. A pixel row covering several neurons shows a spike if any does.
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
    if n == 0:
        return np.zeros((h, z.shape[0]), np.uint8), order
    if n <= h:
        rows = np.minimum(np.floor(np.arange(h) * n / h).astype(int), n - 1)
        return codes[rows], order
    starts = np.unique(_pixel_groups(n, h))
    reduced = np.maximum.reduceat(codes, starts, axis=0)
    rows = np.searchsorted(starts, _pixel_groups(n, h), side="right") - 1
    return reduced[rows], order


RASTER_PALETTE = np.array([BG_COLOR, E_COLOR, I_COLOR, SPIKE_COLOR, PRE_COLOR], dtype=np.uint8)


def heatmap_palette() -> np.ndarray:
    """(256, 3): 255 levels of a blue-white-red map, then the before-episode grey."""
    from matplotlib import colormaps

    lv = colormaps["RdBu_r"](np.linspace(0, 1, 255))[:, :3]
    return np.concatenate([np.round(lv * 255), [PRE_COLOR]]).astype(np.uint8)


def heatmap_codes(h_values: np.ndarray, h: int) -> tuple[np.ndarray, float]:
    """Reduce (T, N) activations to (h, T) levels 0..254 (symmetric scale); returns vmax."""
    x = np.asarray(h_values, dtype=np.float64)
    n = x.shape[1]
    vmax = float(np.percentile(np.abs(x), 99)) if x.size else 1.0
    vmax = vmax if vmax > 0 else 1.0
    if n <= h:
        rows = np.minimum(np.floor(np.arange(h) * n / h).astype(int), n - 1)
        xr = x.T[rows]
    else:
        starts = np.unique(_pixel_groups(n, h))
        sums = np.add.reduceat(x.T, starts, axis=0)
        counts = np.diff(np.append(starts, n))[:, None]
        rows = np.searchsorted(starts, _pixel_groups(n, h), side="right") - 1
        xr = (sums / counts)[rows]
    levels = np.rint((np.clip(xr / vmax, -1, 1) + 1) * 127).astype(np.uint8)
    return levels, vmax


class _Traces:
    """Lines of a few units over the window, one colour each."""

    def __init__(
        self,
        values: np.ndarray,
        colors: list[tuple[int, int, int]],
        rect: Rect,
        window: int,
        h: int,
    ):
        t = values.shape[0]
        rows = rect.row_of(values, h)  # (T, m) float pixel rows
        pad = np.full((window - 1, values.shape[1]), np.nan)
        self.rows = np.concatenate([pad, rows], axis=0)  # (T + W - 1, m)
        x = rect.data_x(h) + window - 1  # fractional slot per pixel column
        x = np.clip(x, 0, window - 1)
        self.i0 = np.minimum(np.floor(x).astype(np.int64), window - 2 if window > 1 else 0)
        self.frac = x - self.i0 if window > 1 else np.zeros_like(x)
        self.rect = rect
        self.colors = [np.array(c, np.uint8) for c in colors]
        self.rr = np.arange(rect.r0, rect.r1, dtype=np.float64)[:, None]
        self.t = t

    def paint(self, end: int, out: np.ndarray) -> None:
        r = self.rect
        region = out[r.r0 : r.r1, r.c0 : r.c1]
        i0 = end + self.i0
        for j, color in enumerate(self.colors):
            a = self.rows[i0, j]
            b = self.rows[np.minimum(i0 + 1, self.rows.shape[0] - 1), j]
            y = a * (1 - self.frac) + b * self.frac
            y_prev = np.concatenate([y[:1], y[:-1]])
            lo = np.fmin(y, y_prev) - 0.75
            hi = np.fmax(y, y_prev) + 0.75
            ok = ~(np.isnan(y) | np.isnan(y_prev))
            mask = (self.rr >= lo) & (self.rr <= hi) & ok
            region[mask] = color


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
                region[max(y - 1, 0) : min(y + 1, hgt), a:b] = CHOSEN_COLOR


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
    """Which units to draw as traces, and the threshold line (if any)."""
    for layer in mats:
        if layer.kind == "spiking" and layer.v is not None:
            # Neurons that spike on about half of the steps show threshold crossings best;
            # silent or always-on neurons come last.
            rate = (layer.spikes > 0).mean(axis=0)
            units = np.argsort(-(rate * (1 - rate)), kind="stable")[:m]
            label = f"{layer.name}.v"
            return dict(values=layer.v, units=units, threshold=layer.threshold, label=label)
    for layer in mats:
        if layer.kind == "ann":
            h = layer.get("h")
            units = np.argsort(-h.var(axis=0), kind="stable")[:m]
            return dict(values=h, units=units, threshold=None, label=f"{layer.name}.h")
    for layer in traj.activity:
        if layer.v is not None:
            units = np.arange(min(m, layer.v.shape[1]))
            return dict(values=layer.v, units=units, threshold=None, label=f"{layer.name}.v")
    return None


def _policy_source(traj: Any) -> dict[str, Any] | None:
    """Which policy output to draw, and how."""
    pol = traj.policy
    if "probs" in pol:
        return dict(kind="bars", key="probs", ylabel="P(a)", lim=(0.0, 1.0))
    if "q_values" in pol:
        return dict(kind="bars", key="q_values", ylabel="Q(a)", lim=None)
    if "mean" in pol:
        return dict(kind="box", key="mean", ylabel="action", lim=None)
    if pol:
        key = next(iter(pol))
        return dict(kind="bars", key=key, ylabel=key, lim=None)
    return None


def _fit(avail: int, window: int) -> int:
    """Largest width <= avail that is a whole number of pixels per step (if one fits).

    With whole pixels per step, the scrolling raster and traces move by exactly that many
    pixels per frame: a pure translation, which H.264 motion compensation encodes cheaply.
    """
    return (avail // window) * window if avail >= window else avail


def _limits(*arrays: np.ndarray, include: tuple[float, ...] = ()) -> tuple[float, float]:
    vals = [np.asarray(a, dtype=np.float64).ravel() for a in arrays if a is not None]
    vals.append(np.asarray(include, dtype=np.float64))
    v = np.concatenate(vals)
    v = v[np.isfinite(v)]
    lo, hi = (float(v.min()), float(v.max())) if v.size else (0.0, 1.0)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    pad = 0.08 * (hi - lo)
    return lo - pad, hi + pad


class ActivityPanel:
    """The right-hand panel of the video for one trajectory.

    Args:
        traj: a :class:`snrl.render.Trajectory` with T >= 1.
        height: panel height in pixels.
        width: panel width in pixels.
        window: steps shown by the scrolling raster / traces.
        max_traces: units drawn as traces.
        max_layers: layers drawn as matrices.
    """

    def __init__(
        self,
        traj: Any,
        *,
        height: int,
        width: int,
        window: int = 100,
        max_traces: int = 3,
        max_layers: int = 3,
    ) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator

        self.height, self.width, self.window = height, width, window
        self.t = len(traj)
        self.rewards = traj.rewards
        self.cum = np.concatenate([[0.0], np.cumsum(traj.rewards)])
        self.ended = (
            "terminated" if traj.terminated[-1] else "truncated" if traj.truncated[-1] else ""
        )
        mats = matrix_layers(traj, max_layers)
        trace = _trace_source(traj, mats, max_traces)
        policy = _policy_source(traj)
        self.glyphs = _glyphs()

        fig = Figure(figsize=(width / 100, height / 100), dpi=100)
        FigureCanvasAgg(fig)
        fig.patch.set_facecolor(_hex(BG_COLOR))
        left, right, top = 58, 10, 46
        tick_h = 20
        bottom_h = max(60, round(0.2 * height)) if (trace or policy) else 0
        legend_h = 16 if trace else 0

        def axes(x: float, y_top: float, w: float, h: float) -> Any:
            ax = fig.add_axes((x / width, 1 - (y_top + h) / height, w / width, h / height))
            for s in ax.spines.values():
                s.set_linewidth(0.8)
                s.set_color("#555555")
            ax.tick_params(labelsize=7, length=2, pad=1)
            return ax

        xlim = (-(window - 1) - 0.5, 0.5)
        xticks = ([-(window - 1), -(window // 2), 0], [f"-{window - 1}", f"-{window // 2}", "now"])
        # Title line (static) and the dynamic text line below it.
        meta = traj.meta
        title = "  ".join(
            str(x) for x in (traj.env, meta.get("algo"), meta.get("backbone")) if x
        )
        if title:
            fig.text(8 / width, 1 - 4 / height, title, fontsize=8, color="#444444", va="top")
        self.text_row = 22

        # Matrices fill the space between the text strip and the bottom row.
        mat_bottom = height - (bottom_h + tick_h + legend_h + 8 if bottom_h else tick_h)
        gap = 6
        n = len(mats)
        self.matrices: list[_Matrix] = []
        mat_axes = []
        if n:
            each = (mat_bottom - top - gap * (n - 1)) / n
            for i, layer in enumerate(mats):
                ax = axes(left, top + i * (each + gap), _fit(width - left - right, window), each)
                ax.set_xlim(*xlim)
                size = layer.size
                ax.set_ylim(size, 0)
                if layer.kind == "spiking":
                    sign = layer.sign
                    if sign is not None:
                        n_e = int(np.sum(np.asarray(sign) > 0))
                        ax.set_yticks([n_e / 2, (n_e + size) / 2] if n_e < size else [n_e / 2])
                        labels = ax.set_yticklabels(["E", "I"][: len(ax.get_yticks())])
                        for lab, c in zip(labels, (E_COLOR, I_COLOR)):
                            lab.set_color(_hex(c))
                            lab.set_fontweight("bold")
                    else:
                        ax.yaxis.set_major_locator(MaxNLocator(3, integer=True))
                    ax.set_ylabel(f"{layer.name}\nspikes", fontsize=7, labelpad=2)
                else:
                    ax.yaxis.set_major_locator(MaxNLocator(3, integer=True))
                    ax.set_ylabel(f"{layer.name}\nh", fontsize=7, labelpad=2)
                last = i == n - 1 and not bottom_h
                if last:
                    ax.set_xticks(*xticks)
                else:
                    ax.set_xticks([])
                mat_axes.append((ax, layer))

        self.traces: _Traces | None = None
        self.bars: _Bars | None = None
        trace_ax = bar_ax = None
        if bottom_h:
            y_top = height - tick_h - bottom_h
            full = width - left - right
            if trace and policy:
                tw = _fit(round(0.62 * full), window)
                bx = left + tw + 44
                bw = width - right - bx
            else:
                tw, bx, bw = _fit(full, window), left, full
            if trace:
                trace_ax = axes(left, y_top, tw, bottom_h)
                trace_ax.set_xlim(*xlim)
                trace_ax.set_xticks(*xticks)
                vals = trace["values"][:, trace["units"]]
                inc = () if trace["threshold"] is None else (trace["threshold"],)
                trace_ax.set_ylim(*_limits(vals, include=inc))
                trace_ax.yaxis.set_major_locator(MaxNLocator(3))
                if trace["threshold"] is not None:
                    trace_ax.axhline(trace["threshold"], ls="--", lw=0.8, color="#888888")
                name = trace["label"]
                fig.text(left / width, 1 - (y_top - 3) / height, name, fontsize=7, va="bottom")
                x = left + 7 * (len(name) + 2)
                for j, u in enumerate(trace["units"]):
                    color = _hex(TRACE_COLORS[j % len(TRACE_COLORS)])
                    fig.text(
                        x / width, 1 - (y_top - 3) / height, f"#{u}", fontsize=7,
                        color=color, va="bottom",
                    )  # fmt: skip
                    x += 7 * (len(str(u)) + 2)
            if policy:
                bar_ax = axes(bx, y_top, bw, bottom_h)
                vals = traj.policy[policy["key"]]
                k = vals.shape[1]
                bar_ax.set_xlim(-0.5, k - 0.5)
                std = traj.policy.get("std") if policy["kind"] == "box" else None
                taken = None
                if policy["kind"] == "box":
                    acts = np.asarray(traj.actions, dtype=np.float64).reshape(self.t, -1)
                    taken = acts if acts.shape[1] == k else None
                if policy["lim"] is not None:
                    lim = policy["lim"]
                else:
                    lo = None if std is None else vals - std
                    hi = None if std is None else vals + std
                    lim = _limits(vals, lo, hi, taken, include=(0.0,))
                bar_ax.set_ylim(*lim)
                bar_ax.yaxis.set_major_locator(MaxNLocator(3))
                if lim[0] < 0 < lim[1]:
                    bar_ax.axhline(0, lw=0.6, color="#888888")
                names = meta.get("action_names")
                step = max(1, int(np.ceil(k / 10)))
                ticks = list(range(0, k, step))
                if isinstance(names, list) and len(names) == k:
                    bar_ax.set_xticks(ticks, [str(names[i]) for i in ticks])
                else:
                    bar_ax.set_xticks(ticks, [str(i) for i in ticks])
                bar_ax.set_ylabel(policy["ylabel"], fontsize=7, labelpad=2)
                self._bar_args = dict(vals=vals, std=std, taken=taken, kind=policy["kind"],
                                      base=float(np.clip(0.0, *lim)))  # fmt: skip

        fig.canvas.draw()
        self.background = np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()

        for ax, layer in mat_axes:
            rect = _rect(ax, height)
            arr = matrix_of(layer)
            if layer.kind == "spiking":
                codes, _ = raster_codes(arr, layer.sign, rect.h)
                pal = RASTER_PALETTE
            else:
                codes, _ = heatmap_codes(arr, rect.h)
                pal = heatmap_palette()
            self.matrices.append(_Matrix(codes, pal, rect, window, height))
        if trace_ax is not None:
            rect = _rect(trace_ax, height)
            vals = trace["values"][:, trace["units"]]
            colors = [TRACE_COLORS[j % len(TRACE_COLORS)] for j in range(vals.shape[1])]
            self.traces = _Traces(vals, colors, rect, window, height)
        if bar_ax is not None:
            a = self._bar_args
            chosen = None
            if a["kind"] == "bars" and np.issubdtype(np.asarray(traj.actions).dtype, np.integer):
                chosen = np.asarray(traj.actions).reshape(self.t, -1)[:, 0]
            self.bars = _Bars(a["vals"], _rect(bar_ax, height), height, chosen=chosen,
                              std=a["std"], taken=a["taken"], base=a["base"])  # fmt: skip
        parts = [RASTER_PALETTE, np.array(TRACE_COLORS + (BAR_COLOR, CHOSEN_COLOR, TEXT_COLOR))]
        if any(m.palette.shape[0] > RASTER_PALETTE.shape[0] for m in self.matrices):
            parts.append(heatmap_palette())
        self.colors = np.concatenate(parts).astype(np.uint8)
        fig.clear()

    def text(self, k: int) -> str:
        """The dynamic text line of frame k."""
        reward = f"{self.rewards[k - 1]:+7.3f}" if k > 0 else " " * 7
        end = f"  {self.ended}" if k == self.t and self.ended else ""
        width = len(str(self.t))
        return f"step {k:>{width}}/{self.t}  reward {reward}  return {self.cum[k]:8.2f}{end}"

    def draw(self, k: int, out: np.ndarray) -> None:
        """Paint frame ``k`` (0..T) of the panel into ``out`` (height, width, 3)."""
        out[...] = self.background
        end = min(k, self.t - 1)
        for m in self.matrices:
            m.paint(end, out)
        if self.traces is not None:
            self.traces.paint(end, out)
        if self.bars is not None:
            self.bars.paint(k, out)
        self.glyphs.draw(out, self.text_row, 8, self.text(k))
