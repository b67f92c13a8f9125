"""Figure styles for a paper or a talk: one table (:data:`FIGURE_STYLES`), applied to any
finished matplotlib ``Figure`` by :func:`apply_style` and written by :func:`write_figure`.

A figure is drawn once, at the size and fonts of ``snrl analyze``'s default output; a style
then re-letters it by the *role* of each text (figure title, axis and panel labels, tick
labels, legends, other text), rescales its lines, resizes it and saves it with the style's
matplotlib rc settings (:func:`style_rc`) and resolution. No figure function changes, so
every analysis figure (and any figure a user builds) takes either style:

- ``paper``: journal fonts (title 9 pt, labels 8 pt, ticks, legends and notes 7 pt) at a
  journal column width (89 mm for a figure drawn at 5 in or narrower, 183 mm for a wider
  one, the height scaled with it up to 240 mm); a 300 dpi PNG with a PDF and an SVG of the
  same figure next to it (text kept as text: TrueType in the PDF, ``<text>`` in the SVG).
- ``talk``: the slide fonts of ``learning_curve.png`` (:data:`snrl.training.plots.FONT`:
  title 22 pt, labels 20 pt, ticks 17 pt; legends and notes 18 pt), lines twice as thick, on
  a 16:9 slide of 13.33 x 7.5 in (a PNG of 1920 x 1080 px at 144 dpi) with an SVG next to
  it. Titles too wide for their panel are wrapped.

Without a style (``style=None``) nothing changes: the PNG of :func:`save_figure`.
"""

from __future__ import annotations

import contextlib
import io
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snrl.errors import UserError
from snrl.io import atomic_write_bytes
from snrl.training.plots import FONT

__all__ = ["FIGURE_STYLES", "STYLE_NAMES", "FigureStyle", "apply_style", "style_rc", "write_figure"]

MM = 1 / 25.4  # inches per millimetre


@dataclass(frozen=True)
class FigureStyle:
    """One figure style (see the module docstring)."""

    name: str
    #: font size (points) per text role: title, label, tick, legend, text
    fonts: Mapping[str, float]
    #: (one column, two columns) widths in inches: a figure drawn 5 in wide or narrower
    #: takes one column, a wider one two (None: ``size``)
    widths: tuple[float, float] | None
    #: a fixed size (inches) instead of ``widths``
    size: tuple[float, float] | None
    #: the tallest figure (inches)
    max_height: float
    #: factor on line widths and marker sizes
    line_scale: float
    #: PNG resolution
    dpi: int
    #: files written next to the PNG (suffixes)
    vector_formats: tuple[str, ...]
    #: at most this many intervals between ticks on automatic axes (None: as drawn)
    max_ticks: int | None = None
    #: matplotlib rc settings in force while saving
    rc: Mapping[str, Any] = field(default_factory=dict)


# text kept as text (TrueType in PDF, <text> in SVG); fixed SVG ids: the same bytes each time
_TEXT_AS_TEXT = {
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.fonttype": "none",
    "svg.hashsalt": "snrl",
}

FIGURE_STYLES: dict[str, FigureStyle] = {
    "paper": FigureStyle(
        name="paper",
        fonts={"title": 9, "label": 8, "tick": 7, "legend": 7, "text": 7},
        widths=(89 * MM, 183 * MM),
        size=None,
        max_height=240 * MM,
        line_scale=1.0,
        dpi=300,
        vector_formats=(".pdf", ".svg"),
        rc={**_TEXT_AS_TEXT, "font.size": 7},
    ),
    "talk": FigureStyle(
        name="talk",
        fonts={
            "title": FONT["title"],
            "label": FONT["label"],
            "tick": FONT["tick"],
            "legend": 18,
            "text": 18,
        },
        widths=None,
        size=(40 / 3, 7.5),
        max_height=7.5,
        line_scale=2.0,
        dpi=144,
        vector_formats=(".svg",),
        max_ticks=4,
        rc={**_TEXT_AS_TEXT, "font.size": 18},
    ),
}
#: The style names (``--style`` choices).
STYLE_NAMES = tuple(FIGURE_STYLES)


def _get(style: str | FigureStyle) -> FigureStyle:
    if isinstance(style, FigureStyle):
        return style
    if style not in FIGURE_STYLES:
        raise UserError(f"style {style!r} is not known (use {' or '.join(STYLE_NAMES)})")
    return FIGURE_STYLES[style]


@contextlib.contextmanager
def style_rc(style: str | FigureStyle) -> Iterator[None]:
    """A matplotlib ``rc_context`` with the style's settings (text kept as text in PDF and
    SVG, the default font size); matplotlib's global settings are restored on exit."""
    import matplotlib

    with matplotlib.rc_context(dict(_get(style).rc)):
        yield


def _size(fig: Any, st: FigureStyle) -> tuple[float, float]:
    if st.size is not None:
        return st.size
    w, h = (float(v) for v in fig.get_size_inches())
    one, two = st.widths or (w, w)
    new_w = one if w <= 5.0 else two  # drawn small: one column; else the page's width
    return new_w, min(h * new_w / w, st.max_height)


def _texts(fig: Any) -> Iterator[tuple[str, Any]]:
    """Every text of ``fig`` with its role."""
    for attr, role in (("_suptitle", "title"), ("_supxlabel", "label"), ("_supylabel", "label")):
        t = getattr(fig, attr, None)
        if t is not None:
            yield role, t
    for t in fig.texts:
        yield "text", t
    for leg in fig.legends:
        for t in leg.get_texts():
            yield "legend", t
    for ax in fig.axes:
        for t in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)):
            if t is not None:
                yield "label", t
        yield "label", ax.xaxis.label
        yield "label", ax.yaxis.label
        yield "tick", ax.xaxis.get_offset_text()
        yield "tick", ax.yaxis.get_offset_text()
        for t in ax.texts:
            yield "text", t
        leg = ax.get_legend()
        if leg is not None:
            for t in leg.get_texts():
                yield "legend", t


def _scale_lines(fig: Any, k: float) -> None:
    from matplotlib.collections import LineCollection

    for ax in fig.axes:
        lines = list(ax.get_lines())
        leg = ax.get_legend()
        if leg is not None:
            lines += list(leg.get_lines())
        for line in lines:
            line.set_linewidth(line.get_linewidth() * k)
            line.set_markersize(line.get_markersize() * k**0.5)
        for patch in ax.patches:
            if not patch.get_fill():  # outlines (step histograms), not filled bars or bands
                patch.set_linewidth(patch.get_linewidth() * k)
        for coll in ax.collections:
            if isinstance(coll, LineCollection):  # raster ticks, error bars
                coll.set_linewidths([w * k for w in coll.get_linewidths()])
        for spine in ax.spines.values():
            spine.set_linewidth(spine.get_linewidth() * k)
        ax.tick_params(width=0.8 * k, length=3.5 * k**0.5)
    for leg in fig.legends:
        for line in leg.get_lines():
            line.set_linewidth(line.get_linewidth() * k)


def _thin_ticks(fig: Any, n: int) -> None:
    """At most ``n`` tick intervals on the axes whose ticks matplotlib places itself."""
    from matplotlib.ticker import MaxNLocator

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            loc = axis.get_major_locator()
            if isinstance(loc, MaxNLocator):  # AutoLocator too; fixed ticks stay
                loc.set_params(nbins=n)


def _wrap(text: Any, limit_px: float, renderer: Any, vertical: bool = False) -> None:
    """Re-break ``text`` so that its length (its height when ``vertical``: a y label) fits
    ``limit_px`` (words stay whole)."""
    if not text.get_text() or not text.get_visible():
        return
    box = text.get_window_extent(renderer)
    length = box.height if vertical else box.width
    if length <= limit_px:
        return
    lines = text.get_text().split("\n")
    chars = max(12, int(max(len(s) for s in lines) * limit_px / length))
    for _ in range(6):  # proportional fonts: narrow the lines until they fit
        text.set_text("\n".join(textwrap.fill(s, chars) for s in lines))
        box = text.get_window_extent(renderer)
        if (box.height if vertical else box.width) <= limit_px or chars <= 12:
            return
        chars = max(12, int(chars * 0.9))


def _fit_texts(fig: Any) -> None:
    """Break the figure's title, panel titles and axis labels that run past their figure or
    panel (after a style made them larger)."""
    renderer = fig.canvas.get_renderer()
    fig.draw_without_rendering()  # lay the figure out at its new size first
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None:
        _wrap(suptitle, 0.96 * fig.bbox.width, renderer)
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        _wrap(ax.title, 1.05 * box.width, renderer)
        _wrap(ax.xaxis.label, 1.1 * box.width, renderer)
        _wrap(ax.yaxis.label, 1.1 * box.height, renderer, vertical=True)


def apply_style(fig: Any, style: str | FigureStyle) -> Any:
    """Re-letter, re-line and resize a finished figure in place for ``style`` (``"paper"``
    or ``"talk"``, :data:`FIGURE_STYLES`); returns it. Applying the same style again changes
    nothing; another style after one is refused (ValueError), since line widths would be
    scaled twice.

    Raises:
        UserError: an unknown style name.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    st = _get(style)
    done = getattr(fig, "_snrl_style", None)
    if done == st.name:
        return fig
    if done is not None:
        raise ValueError(f"the figure is in style {done!r} already (draw it again for {st.name!r})")
    fig.set_size_inches(*_size(fig, st))
    if fig.get_layout_engine() is None:  # larger text at a new size: lay it out again
        fig.set_layout_engine("constrained")
    for role, text in _texts(fig):
        text.set_fontsize(st.fonts[role])
    for ax in fig.axes:
        ax.tick_params(labelsize=st.fonts["tick"])
    if st.line_scale != 1.0:
        _scale_lines(fig, st.line_scale)
    if st.max_ticks is not None:
        _thin_ticks(fig, st.max_ticks)
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    for _ in range(2):  # breaking lines changes the layout: fit again once
        _fit_texts(fig)
    fig._snrl_style = st.name
    return fig


def write_figure(
    fig: Any, path: str | Path, *, style: str | FigureStyle | None = None
) -> list[Path]:
    """Write ``fig`` to the PNG ``path`` (atomically); with a ``style``, first
    :func:`apply_style`, then the PNG at the style's resolution and its vector files next
    to it (``paper``: ``.pdf`` and ``.svg``; ``talk``: ``.svg``), with the style's rc
    settings.

    Returns:
        The paths written, the PNG first.

    Raises:
        UserError: ``path`` does not end in ``.png``, or an unknown style.
    """
    from snrl.analysis.figures import save_figure

    path = Path(path)
    if path.suffix.lower() != ".png":
        raise UserError(f"figure path {path} must end in .png (rename it)")
    if style is None:
        return [save_figure(fig, path)]
    st = _get(style)
    apply_style(fig, st)
    written = []
    with style_rc(st):
        for suffix in (".png", *st.vector_formats):
            out = path.with_suffix(suffix)
            fmt = suffix.lstrip(".")
            # no creation dates: the same figure gives the same bytes
            meta = {"svg": {"Date": None}, "pdf": {"CreationDate": None}}.get(fmt)
            buf = io.BytesIO()
            fig.savefig(buf, format=fmt, dpi=st.dpi, metadata=meta)
            atomic_write_bytes(out, buf.getvalue())
            written.append(out)
    return written


def write_png(fig: Any, path: Path, *, style: str | None, dpi: int) -> Path:
    """``fig`` as the PNG ``path`` (checked ``.png`` by the caller), atomically: with a
    ``style`` by :func:`write_figure` (its vector files next to it), else as drawn at ``dpi``
    (the behaviour and psychometric figures of ``snrl eval``).

    Returns:
        ``path``.
    """
    if style is not None:
        return write_figure(fig, path, style=style)[0]
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    atomic_write_bytes(path, buf.getvalue())
    return path
