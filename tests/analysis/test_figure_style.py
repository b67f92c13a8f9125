"""Figures for a paper or a talk (snrl.analysis.style), trial and period markers on the raster
and current figures, and a palette that survives a projector and colour-vision deficiencies."""

from __future__ import annotations

import itertools
import math

import matplotlib.colors as mcolors
import numpy as np
import pytest
from matplotlib.text import Text
from PIL import Image

from snrl import palette as pal
from snrl.analysis.figures import ei_currents_figure, raster_figure, trial_markers
from snrl.analysis.style import FIGURE_STYLES, apply_style, write_figure
from snrl.errors import UserError

# ------------------------------------------------------------------ a synthetic trial task
# Two trials of 10 env steps (task dt 0.1 s), 2 neuron steps per env step (neuron dt 0.05 s).
# Trial 0 starts at trial time t0 = 0.1 s (NeuroGym's reset takes one step), trial 1 at 0.
# Step k of a trial acts at t0 + 0.1 k and is in a period when start <= t < end:
#   trial 0: fixation [0, 0.3) -> k 0-1, stimulus [0.3, 0.8) -> k 2-6, decision -> k 7-9
#   trial 1: fixation [0, 0.2) -> k 0-1, stimulus [0.2, 0.7) -> k 2-6, decision -> k 7-9
# so in neuron rows (x 2): (0, 4) (4, 14) (14, 20) and (20, 24) (24, 34) (34, 40).
ENV_DT, SUBSTEPS, DT = 0.1, 2, 0.05
TRIALS = [
    {"start_step": 0, "end_step": 9, "t0": 0.1,
     "periods": {"fixation": [0.0, 0.3], "stimulus": [0.3, 0.8], "decision": [0.8, 1.1]}},
    {"start_step": 10, "end_step": 19, "t0": 0.0,
     "periods": {"fixation": [0.0, 0.2], "stimulus": [0.2, 0.7], "decision": [0.7, 1.0]}},
]  # fmt: skip
ROWS = {
    "fixation": [(0, 4), (20, 24)],
    "stimulus": [(4, 14), (24, 34)],
    "decision": [(14, 20), (34, 40)],
}


def _layers(t: int = 40, n: int = 10, seed: int = 0):
    rng = np.random.default_rng(seed)
    sign = np.array([1.0] * 8 + [-1.0] * 2)
    return [{"name": "policy: lif0", "spikes": rng.random((t, n)) < 0.2, "sign": sign}]


def _currents(t: int = 40, n: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    return {k: rng.normal(size=(t, n)) for k in ("exc", "inh", "ext")}


def _markers_of(ax):
    starts = sorted(line.get_xdata()[0] for line in ax.lines if line.get_gid() == "trial_start")
    bands: dict[str, list[tuple[float, float]]] = {}
    for p in ax.patches:
        gid = p.get_gid() or ""
        if gid.startswith("period:"):
            bands.setdefault(gid[7:], []).append((p.get_x(), p.get_x() + p.get_width()))
    return starts, {k: [x for pair in sorted(v) for x in pair] for k, v in bands.items()}


def _expected_x(rows):
    """Band edges (flat: x0, x1, x0, x1 ...): row r's left edge is at (r - 0.5) dt."""
    return [(r - 0.5) * DT for pair in rows for r in pair]


def test_trial_markers_in_neuron_rows():
    m = trial_markers(TRIALS, SUBSTEPS, ENV_DT)
    assert m["starts"] == [0, 20]
    got: dict[str, list] = {}
    for name, a, b in m["periods"]:
        got.setdefault(name, []).append((a, b))
    assert got == ROWS
    assert m["names"] == ["fixation", "stimulus", "decision"]
    assert trial_markers(None) is None and trial_markers([]) is None
    # without the task's dt only the starts are known
    no_dt = trial_markers(TRIALS, SUBSTEPS, None)
    assert no_dt["starts"] == [0, 20] and no_dt["periods"] == []


def test_a_period_without_steps_keeps_its_colour_and_order():
    # trial 0 starts at t0 = 0.3 s: its fixation [0, 0.3) has no step; the legend and the
    # colours still follow the task's order (fixation first)
    first = dict(TRIALS[0], t0=0.3, end_step=7)
    m = trial_markers([first], 1, ENV_DT)
    assert [p[0] for p in m["periods"]] == ["stimulus", "decision"]
    assert m["names"] == ["fixation", "stimulus", "decision"]
    fig = raster_figure(_layers(), DT, markers=m)
    colors = pal.period_colors(["fixation", "stimulus", "decision"])
    band = next(p for p in fig.axes[0].patches if p.get_gid() == "period:stimulus")
    assert mcolors.to_hex(band.get_facecolor()).upper() == colors["stimulus"]


@pytest.mark.parametrize("kind", ["raster", "currents"])
def test_markers_sit_at_the_period_boundaries(kind):
    m = trial_markers(TRIALS, SUBSTEPS, ENV_DT)
    if kind == "raster":
        fig = raster_figure(_layers(), DT, markers=m)
        axes = fig.axes[:1]
    else:
        fig = ei_currents_figure("policy: lif0", _currents(), [(0, "E"), (3, "I")], DT, markers=m)
        axes = fig.axes
    for ax in axes:
        starts, bands = _markers_of(ax)
        assert starts == pytest.approx([-0.5 * DT, 19.5 * DT])
        assert set(bands) == set(ROWS)
        for name, rows in ROWS.items():
            assert bands[name] == pytest.approx(_expected_x(rows))
    labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert labels == ["trial start", "fixation period", "stimulus period", "decision period"]


def test_markers_are_cut_at_the_steps_shown():
    # rows 0-21 shown: both starts (rows 0 and 20), trial 1's fixation cut at row 22, its
    # stimulus and decision (from row 24) left out
    m = trial_markers(TRIALS, SUBSTEPS, ENV_DT)
    fig = raster_figure(_layers(), DT, max_steps=22, markers=m)
    starts, bands = _markers_of(fig.axes[0])
    assert starts == pytest.approx([-0.5 * DT, 19.5 * DT])
    assert bands["fixation"] == pytest.approx(_expected_x([(0, 4), (20, 22)]))
    assert bands["stimulus"] == pytest.approx(_expected_x([(4, 14)]))
    assert bands["decision"] == pytest.approx(_expected_x([(14, 20)]))


def test_no_markers_without_trials():
    for fig in (
        raster_figure(_layers(), DT),
        ei_currents_figure("policy: lif0", _currents(), [(0, "E")], DT),
    ):
        for ax in fig.axes:
            assert _markers_of(ax) == ([], {})
        assert not fig.legends


# ------------------------------------------------------------------------------ styles
def _all_texts(fig):
    return [t for t in fig.findobj(Text) if t.get_text() and t.get_visible()]


def test_paper_writes_a_300_dpi_png_with_pdf_and_svg(tmp_path):
    fig = raster_figure(_layers(), DT, markers=trial_markers(TRIALS, SUBSTEPS, ENV_DT))
    written = write_figure(fig, tmp_path / "raster.png", style="paper")
    assert [p.name for p in written] == ["raster.png", "raster.pdf", "raster.svg"]
    with Image.open(written[0]) as im:
        assert im.info["dpi"] == pytest.approx((300, 300), abs=0.05)
        # drawn 8 in wide -> the two-column width, 183 mm at 300 dpi
        assert im.size[0] == round(183 / 25.4 * 300)
    assert written[1].read_bytes().startswith(b"%PDF")
    svg = written[2].read_text(encoding="utf-8")
    assert "<svg" in svg and "<text" in svg  # text kept as text (editable in a paper)
    sizes = [t.get_fontsize() for t in _all_texts(fig)]
    assert min(sizes) >= 7 and max(sizes) <= 9


def test_the_same_figure_gives_the_same_bytes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        write_figure(raster_figure(_layers(), DT), d / "raster.png", style="paper")
    for name in ("raster.png", "raster.pdf", "raster.svg"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_paper_puts_a_small_figure_in_one_column():
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.5, 4))
    fig.subplots().plot([0, 1], [0, 1])
    apply_style(fig, "paper")
    w, h = fig.get_size_inches()
    assert w == pytest.approx(89 / 25.4) and h == pytest.approx(4 * w / 4.5)
    # drawn without a layout engine: laid out again, so the relettered labels fit
    assert type(fig.get_layout_engine()).__name__ == "ConstrainedLayoutEngine"


def test_talk_has_slide_fonts_thick_lines_and_a_16_9_slide(tmp_path):
    fig = ei_currents_figure(
        "policy: lif0", _currents(), [(0, "E"), (3, "I")], DT,
        markers=trial_markers(TRIALS, SUBSTEPS, ENV_DT),
    )  # fmt: skip
    lw_before = [line.get_linewidth() for line in fig.axes[0].get_lines()]
    written = write_figure(fig, tmp_path / "ei_currents.png", style="talk")
    assert [p.name for p in written] == ["ei_currents.png", "ei_currents.svg"]
    with Image.open(written[0]) as im:
        assert im.size == (1920, 1080)
    for ax in fig.axes:
        assert ax.xaxis.label.get_fontsize() >= 18 or not ax.xaxis.label.get_text()
        assert ax.yaxis.label.get_fontsize() >= 18
        assert ax.title.get_fontsize() >= 18 or not ax.title.get_text()
        assert min(t.get_fontsize() for t in ax.get_yticklabels()) >= 16
    assert min(t.get_fontsize() for t in fig.axes[-1].get_xticklabels()) >= 16
    assert min(t.get_fontsize() for t in _all_texts(fig)) >= 16
    lw_after = [line.get_linewidth() for line in fig.axes[0].get_lines()]
    assert lw_after == pytest.approx([2 * w for w in lw_before])
    # titles too wide for the slide are broken into lines that fit
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    assert fig.axes[0].title.get_window_extent(r).width <= 1.06 * fig.axes[0].bbox.width


def test_without_a_style_nothing_changes(tmp_path):
    fig = raster_figure(_layers(), DT)
    size = tuple(fig.get_size_inches())
    written = write_figure(fig, tmp_path / "raster.png")
    assert [p.name for p in written] == ["raster.png"]
    with Image.open(written[0]) as im:
        assert im.info["dpi"] == pytest.approx((150, 150), abs=0.05)  # save_figure's
    assert tuple(fig.get_size_inches()) == size


def test_styles_apply_once_and_names_are_checked(tmp_path):
    fig = raster_figure(_layers(), DT)
    apply_style(fig, "talk")
    lw = [c.get_linewidths()[0] for c in fig.axes[0].collections]
    apply_style(fig, "talk")  # again: nothing changes
    assert [c.get_linewidths()[0] for c in fig.axes[0].collections] == lw
    with pytest.raises(ValueError, match="talk"):
        apply_style(fig, "paper")
    with pytest.raises(UserError, match="paper or talk"):
        apply_style(raster_figure(_layers(), DT), "poster")
    with pytest.raises(UserError, match=".png"):
        write_figure(raster_figure(_layers(), DT), tmp_path / "raster.jpg", style="paper")


def test_style_table_is_the_cli_choice_list():
    from snrl.cli.parser import FIGURE_STYLES as CLI_STYLES

    assert tuple(FIGURE_STYLES) == CLI_STYLES


# ------------------------------------------------------------------------------ palette
def test_contrast_ratio_and_luminance_oracles():
    assert pal.contrast_ratio("#000000") == pytest.approx(21.0)
    assert pal.contrast_ratio("#FFFFFF") == pytest.approx(1.0)
    # WCAG's lightest grey with 4.5:1 on white
    assert pal.contrast_ratio("#767676") == pytest.approx(4.54, abs=0.01)
    assert pal.relative_luminance("#FF0000") == pytest.approx(0.2126)


def test_every_figure_colour_keeps_3_to_1_on_white():
    bad = {c: round(pal.contrast_ratio(c), 2) for c in pal.FIGURE_COLORS}
    assert all(v >= 3.0 for v in bad.values()), bad
    for c in pal.GROUP_COLORS:  # every group colour is a figure colour
        assert c in pal.FIGURE_COLORS
    # and the data of the raster and current figures keeps 3:1 on the period bands
    bands = pal.period_colors([f"p{k}" for k in range(len(pal.PERIOD_BASES))])
    for band in bands.values():
        for c in (pal.E_COLOR, pal.I_COLOR, pal.SPIKE_COLOR, pal.MUTED_COLOR, "#000000"):
            assert pal.contrast_ratio(c, band) >= 3.0, (c, band)


def _delta_e(a: str, b: str, kind: str) -> float:
    la, lb = pal.cielab(pal.simulate_cvd(a, kind)), pal.cielab(pal.simulate_cvd(b, kind))
    return math.dist(la, lb)


def test_cvd_simulation_oracles():
    # rows of each matrix sum to 1: greys stay grey; a dichromat confuses red and green
    for kind in pal.CVD_MATRICES:
        for c in ("#000000", "#777777", "#FFFFFF"):
            assert pal.simulate_cvd(c, kind) == pytest.approx(
                pal.simulate_cvd(c, "normal"), abs=1e-5
            )
    # a brick red and an olive that differ plainly (Delta E 70) look alike to protanopes
    # and deuteranopes, not to tritanopes
    assert _delta_e("#C84000", "#6E7A00", "normal") > 60
    assert _delta_e("#C84000", "#6E7A00", "protanopia") < 15
    assert _delta_e("#C84000", "#6E7A00", "deuteranopia") < 15
    assert _delta_e("#C84000", "#6E7A00", "tritanopia") > 60
    with pytest.raises(ValueError, match="protanopia"):
        pal.simulate_cvd("#000000", "achromatopsia")


@pytest.mark.parametrize("kind", ["normal", "protanopia", "deuteranopia", "tritanopia"])
def test_e_and_i_and_the_groups_stay_apart_under_colour_vision_deficiencies(kind):
    # CIE76 Delta E: over 20 is clearly different
    assert _delta_e(pal.E_COLOR, pal.I_COLOR, kind) > 40
    for a, b in itertools.combinations(pal.GROUP_COLORS, 2):
        assert _delta_e(a, b, kind) > 15, (a, b, kind)
