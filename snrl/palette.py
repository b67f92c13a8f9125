"""One palette for every snrl figure and video: colour-blind safe, E and I fixed.

Colours are Okabe & Ito's eight-colour set ("Color Universal Design", Okabe and Ito 2008,
https://jfly.uni-koeln.de/color/; also Wong, Nature Methods 8:441, 2011), which stays
distinguishable under the common forms of colour blindness:

- excitatory neurons: vermillion ``E_COLOR`` (``#D55E00``);
- inhibitory neurons: blue ``I_COLOR`` (``#0072B2``);
- neurons of a layer without Dale signs: near-black ``SPIKE_COLOR``.

Groups (compared backbones, traces of several units, layers) take :func:`group_styles`:
the other Okabe–Ito colours first, then the same colours again with another line style,
so any number of groups gets distinct ``(colour, linestyle)`` pairs.

Every constant is a matplotlib hex string; :func:`rgb` gives the ``(r, g, b)`` bytes the
video renderer paints with. This module imports nothing from snrl or matplotlib.
"""

from __future__ import annotations

__all__ = [
    "BG_COLOR",
    "CHOSEN_COLOR",
    "E_COLOR",
    "GROUP_COLORS",
    "I_COLOR",
    "LINESTYLES",
    "MUTED_COLOR",
    "OKABE_ITO",
    "SPIKE_COLOR",
    "TEXT_COLOR",
    "group_styles",
    "rgb",
]

#: Okabe–Ito, by name.
OKABE_ITO = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky_blue": "#56B4E9",
    "bluish_green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7",
}

E_COLOR = OKABE_ITO["vermillion"]
"""Excitatory neurons, everywhere (rasters, histograms, labels, legends)."""
I_COLOR = OKABE_ITO["blue"]
"""Inhibitory neurons, everywhere."""
SPIKE_COLOR = "#1A1A1A"
"""Spikes of a layer without Dale signs."""
CHOSEN_COLOR = OKABE_ITO["orange"]
"""The action the agent took (policy bars); also reward marks of a task panel."""
MUTED_COLOR = "#8C8C8C"
"""Reference lines (threshold, zero), trial boundaries, unchosen bars."""
TEXT_COLOR = "#1A1A1A"
BG_COLOR = "#FFFFFF"

#: Colours for groups, in order: distinct from each other, E and I come last so that a
#: figure with few groups does not suggest an E/I meaning. Yellow is left out (too pale
#: on white) and black is the last resort.
GROUP_COLORS = (
    OKABE_ITO["bluish_green"],
    OKABE_ITO["reddish_purple"],
    OKABE_ITO["orange"],
    OKABE_ITO["sky_blue"],
    OKABE_ITO["blue"],
    OKABE_ITO["vermillion"],
    OKABE_ITO["black"],
)
#: Line styles cycled once the colours run out (matplotlib names / dash tuples).
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))


def group_styles(n: int) -> list[tuple[str, str | tuple]]:
    """``n`` distinct ``(colour, linestyle)`` pairs for ``n`` groups (lines of a plot).

    The first ``len(GROUP_COLORS)`` groups get solid lines of distinct colours; later groups
    reuse the colours with the next line style. Pairs repeat only beyond
    ``len(GROUP_COLORS) * len(LINESTYLES)`` (42) groups.

    Raises:
        ValueError: ``n`` is negative.
    """
    if n < 0:
        raise ValueError(f"n={n} groups (give a count >= 0)")
    k = len(GROUP_COLORS)
    return [(GROUP_COLORS[i % k], LINESTYLES[(i // k) % len(LINESTYLES)]) for i in range(n)]


def rgb(color: str) -> tuple[int, int, int]:
    """``"#D55E00"`` -> ``(213, 94, 0)``."""
    c = color.lstrip("#")
    if len(c) != 6:
        raise ValueError(f"colour {color!r} is not '#RRGGBB'")
    return int(c[0:2], 16), int(c[2:4], 16), int(c[4:6], 16)
