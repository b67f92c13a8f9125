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

Projectors wash colours out, so every colour that draws data on a white figure
(:data:`FIGURE_COLORS`) keeps a luminance contrast of at least 3:1 against white, the
WCAG 2.1 threshold for graphical objects (success criterion 1.4.11;
:func:`contrast_ratio`). Okabe–Ito's orange (2.2:1) and sky blue (2.3:1) fail it, so the
group colours replace them with Paul Tol's "muted" wine and indigo (Tol 2021, "Colour
schemes", SRON/EPS/TN/09-002; 8.7:1 and 12.2:1). :func:`simulate_cvd` shows a colour as
seen with protanopia, deuteranopia or tritanopia (the severity-1 matrices of Machado,
Oliveira and Fernandes 2009, IEEE TVCG 15:1291, applied in linear RGB; their model is
least accurate for tritanopia, where Brettel, Viénot and Mollon 1997 is the usual
reference), so a test can check that E and I, and the group colours, stay apart under each.

Every constant is a matplotlib hex string; :func:`rgb` gives the ``(r, g, b)`` bytes the
video renderer paints with. This module imports nothing from snrl or matplotlib.
"""

from __future__ import annotations

__all__ = [
    "BG_COLOR",
    "CHOSEN_COLOR",
    "E_COLOR",
    "FIGURE_COLORS",
    "GROUP_COLORS",
    "HIGHLIGHT_COLOR",
    "I_COLOR",
    "LINESTYLES",
    "MUTED_COLOR",
    "OKABE_ITO",
    "SPIKE_COLOR",
    "TEXT_COLOR",
    "TOL_MUTED",
    "cielab",
    "contrast_ratio",
    "group_styles",
    "period_colors",
    "relative_luminance",
    "rgb",
    "simulate_cvd",
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

#: Two dark colours of Paul Tol's "muted" scheme, in the groups in place of Okabe–Ito's
#: orange and sky blue (too pale on white).
TOL_MUTED = {"wine": "#882255", "indigo": "#332288"}

E_COLOR = OKABE_ITO["vermillion"]
"""Excitatory neurons, everywhere (rasters, histograms, labels, legends)."""
I_COLOR = OKABE_ITO["blue"]
"""Inhibitory neurons, everywhere."""
SPIKE_COLOR = "#1A1A1A"
"""Spikes of a layer without Dale signs."""
CHOSEN_COLOR = OKABE_ITO["orange"]
"""The action the agent took (filled policy bars of the video renderer); also reward marks
of a task panel. Not a figure colour: 2.2:1 on white (see :data:`FIGURE_COLORS`)."""
HIGHLIGHT_COLOR = TOL_MUTED["wine"]
"""Marks drawn over data in figures (cluster boundaries, a chosen k)."""
MUTED_COLOR = "#767676"
"""Reference lines (threshold, zero), trial boundaries, unchosen bars."""
TEXT_COLOR = "#1A1A1A"
BG_COLOR = "#FFFFFF"

#: Colours for groups, in order: distinct from each other (also under the common colour
#: vision deficiencies), E and I come last so that a figure with few groups does not
#: suggest an E/I meaning. Okabe–Ito's yellow, orange and sky blue are left out (too pale
#: on white: under 3:1); Tol's wine and indigo take the places of the last two, and black
#: is the last resort.
GROUP_COLORS = (
    OKABE_ITO["bluish_green"],
    OKABE_ITO["reddish_purple"],
    TOL_MUTED["wine"],
    TOL_MUTED["indigo"],
    OKABE_ITO["blue"],
    OKABE_ITO["vermillion"],
    OKABE_ITO["black"],
)
#: Every colour the analysis and plot figures draw data with on white (lines, markers,
#: spikes, text): each keeps a contrast of at least 3:1 against :data:`BG_COLOR`.
FIGURE_COLORS = (E_COLOR, I_COLOR, SPIKE_COLOR, MUTED_COLOR, HIGHLIGHT_COLOR, *GROUP_COLORS)
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


#: Background tints of trial periods (fixation, stimulus, delay, decision ...), in the order
#: the periods first appear: pale Okabe–Ito colours that are not E or I, mixed with white
#: (:data:`PERIOD_TINT` of the colour) so that every :data:`FIGURE_COLORS` line keeps 3:1 on
#: them.
PERIOD_BASES = (
    OKABE_ITO["sky_blue"],
    OKABE_ITO["orange"],
    OKABE_ITO["bluish_green"],
    OKABE_ITO["reddish_purple"],
    OKABE_ITO["yellow"],
    MUTED_COLOR,
)
PERIOD_TINT = 0.12


def period_colors(names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """A light background colour per trial period name, in the order given (names repeat
    the colours after ``len(PERIOD_BASES)``)."""
    out: dict[str, str] = {}
    for name in names:
        if name not in out:
            base = rgb(PERIOD_BASES[len(out) % len(PERIOD_BASES)])
            mix = [round(PERIOD_TINT * c + (1 - PERIOD_TINT) * 255) for c in base]
            out[name] = "#{:02X}{:02X}{:02X}".format(*mix)
    return out


def _linear(color: str) -> tuple[float, float, float]:
    """sRGB ``"#RRGGBB"`` -> linear-light RGB in [0, 1] (the sRGB transfer function, IEC
    61966-2-1, as WCAG 2.1 writes it)."""
    out = []
    for c in rgb(color):
        c = c / 255.0
        out.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
    return out[0], out[1], out[2]


def _luminance(lin: tuple[float, float, float]) -> float:
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def relative_luminance(color: str) -> float:
    """WCAG 2.1's relative luminance of ``"#RRGGBB"``: 0 for black, 1 for white."""
    return _luminance(_linear(color))


def contrast_ratio(color: str, background: str = BG_COLOR) -> float:
    """WCAG 2.1's contrast ratio ``(L1 + 0.05) / (L2 + 0.05)`` (L1 the lighter), from 1
    (none) to 21 (black on white). Graphical objects need 3, body text 4.5."""
    a, b = relative_luminance(color), relative_luminance(background)
    return (max(a, b) + 0.05) / (min(a, b) + 0.05)


#: Machado, Oliveira and Fernandes (2009), table of severity 1 (dichromacy): linear-RGB
#: matrices that simulate protanopia, deuteranopia and tritanopia (rows sum to 1, so greys
#: stay grey).
CVD_MATRICES = {
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
    "tritanopia": (
        (1.255528, -0.076749, -0.178779),
        (-0.078411, 0.930809, 0.147602),
        (0.004733, 0.691367, 0.303900),
    ),
}


def simulate_cvd(color: str, kind: str) -> tuple[float, float, float]:
    """``color`` as seen with a colour vision deficiency (``"protanopia"``,
    ``"deuteranopia"``, ``"tritanopia"``; ``"normal"``: unchanged), as linear RGB clipped to
    [0, 1] (feed it to :func:`cielab`)."""
    lin = _linear(color)
    if kind == "normal":
        return lin
    if kind not in CVD_MATRICES:
        raise ValueError(f"kind={kind!r} (use normal or one of {', '.join(CVD_MATRICES)})")
    m = CVD_MATRICES[kind]
    out = [min(1.0, max(0.0, sum(m[r][k] * lin[k] for k in range(3)))) for r in range(3)]
    return out[0], out[1], out[2]


def cielab(lin: tuple[float, float, float]) -> tuple[float, float, float]:
    """Linear sRGB -> CIE L*a*b* (D65 white). The Euclidean distance of two colours in it is
    CIE76 Delta E: about 2.3 is just noticeable, over 20 clearly different."""
    m = ((0.4124, 0.3576, 0.1805), (0.2126, 0.7152, 0.0722), (0.0193, 0.1192, 0.9505))
    white = (0.95047, 1.0, 1.08883)
    xyz = [sum(m[r][k] * lin[k] for k in range(3)) / white[r] for r in range(3)]
    d = 6.0 / 29.0
    f = [t ** (1.0 / 3.0) if t > d**3 else t / (3 * d * d) + 4.0 / 29.0 for t in xyz]
    return 116.0 * f[1] - 16.0, 500.0 * (f[0] - f[1]), 200.0 * (f[1] - f[2])
