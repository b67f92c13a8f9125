"""snrl.plot: one palette everywhere, human labels, rasters/traces/histograms on any array."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import snrl.palette as pal
from snrl.errors import UserError
from snrl.networks import Activity, LayerActivity
from snrl.plot import (
    activity_figure,
    group_label,
    layer_label,
    neuron_rates,
    raster,
    raster_order,
    rate_histogram,
    save_figure,
    traces,
)
from snrl.plot._util import new_figure


def _spikes(t: int = 50, n: int = 10, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).random((t, n)) < 0.2).astype(np.float32)


def _pixels(fig) -> np.ndarray:
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3]


# ---------------------------------------------------------------- palette
def test_group_styles_are_distinct_for_many_groups():
    for n in (1, 7, 12, 30):
        styles = pal.group_styles(n)
        assert len(styles) == n
        assert len({(c, str(ls)) for c, ls in styles}) == n  # no two groups look alike
    assert len({c for c, _ in pal.group_styles(7)}) == 7  # colours first, then line styles
    assert pal.group_styles(8)[7][1] != "-"
    with pytest.raises(ValueError):
        pal.group_styles(-1)


def test_e_and_i_colours_are_the_same_in_plots_and_videos():
    from snrl.render import _panel

    assert _panel.E_COLOR == pal.rgb(pal.E_COLOR) == (213, 94, 0)  # Okabe-Ito vermillion
    assert _panel.I_COLOR == pal.rgb(pal.I_COLOR) == (0, 114, 178)  # Okabe-Ito blue
    assert pal.E_COLOR != pal.I_COLOR


# ---------------------------------------------------------------- labels
def test_layer_labels_are_human_readable():
    sign = np.array([1] * 102 + [-1] * 26)
    lif = LayerActivity("lif0", "spiking", 128, sign=sign)
    assert layer_label(lif, 0) == "Layer 1: LIF, 128 neurons (102 E / 26 I)"
    assert layer_label({"name": "alif1", "kind": "spiking", "size": 64, "sign": None}, 1) == (
        "Layer 2: ALIF, 64 neurons"
    )
    assert layer_label(LayerActivity("gru0", "ann", 32), 0) == "Layer 1: GRU, 32 units"
    assert layer_label(LayerActivity("readout", "readout", 2), 2) == "Readout: LI, 2 neurons"
    assert group_label("lif force_dale_law=True hidden_size=64") == "LIF, Dale, 64 neurons"
    assert group_label("mlp force_dale_law=False lr=0.001") == "MLP, no Dale, lr=0.001"


# ---------------------------------------------------------------- raster
def test_raster_order_groups_e_then_i_and_sorts_by_rate():
    z = np.zeros((10, 4))
    z[:, 0] = 1  # E, always on
    z[:5, 2] = 1  # E, half
    z[:2, 3] = 1  # I
    sign = [1, -1, 1, -1]
    np.testing.assert_array_equal(raster_order(z, sign, "ei"), [0, 2, 1, 3])
    np.testing.assert_array_equal(raster_order(z, sign, "rate"), [0, 2, 3, 1])
    np.testing.assert_array_equal(raster_order(z, sign, "none"), [0, 1, 2, 3])
    np.testing.assert_array_equal(raster_order(z, None, [3, 2, 1, 0]), [3, 2, 1, 0])
    with pytest.raises(UserError, match="permutation"):
        raster_order(z, sign, [0, 0, 1, 2])
    with pytest.raises(UserError, match="sort="):
        raster_order(z, sign, "size")


def test_raster_draws_e_and_i_in_the_palette_on_a_seconds_axis():
    z = _spikes(200, 20)
    sign = np.array([1] * 16 + [-1] * 4)
    fig = new_figure(4, 3)
    ax = fig.add_subplot()
    order = raster(ax, torch.as_tensor(z), sign=sign, dt=1e-3)  # a tensor works too
    assert sorted(order.tolist()) == list(range(20))
    assert ax.get_xlabel() == "time (s)" and ax.get_xlim()[1] == pytest.approx(0.1995)
    assert ax.get_ylabel() == "neuron (20)"
    texts = [t.get_text() for t in ax.texts]
    assert "16 E" in texts and "4 I" in texts
    img = _pixels(fig).reshape(-1, 3)
    colours = {tuple(c) for c in img[::7]}
    assert pal.rgb(pal.E_COLOR) in colours and pal.rgb(pal.I_COLOR) in colours
    fig2 = new_figure(4, 3)
    ax2 = fig2.add_subplot()
    raster(ax2, z[:, None, :], dt=None)  # (T, B, N), no sign: steps, one colour
    assert ax2.get_xlabel() == "step"
    assert pal.rgb(pal.E_COLOR) not in {tuple(c) for c in _pixels(fig2).reshape(-1, 3)[::7]}


def test_bad_arrays_and_dt_are_user_errors():
    fig = new_figure(3, 2)
    ax = fig.add_subplot()
    with pytest.raises(UserError, match="time-first"):
        raster(ax, np.zeros(5))
    with pytest.raises(UserError, match="dt="):
        raster(ax, np.zeros((5, 2)), dt=-1)
    with pytest.raises(UserError, match="one ±1 per neuron"):
        raster(ax, np.zeros((5, 2)), sign=[1, 1, -1])


# ---------------------------------------------------------------- traces, histograms
def test_traces_label_the_threshold_and_the_neurons():
    v = np.cumsum(np.random.default_rng(0).normal(0, 0.1, (100, 5)), axis=0)
    fig = new_figure(4, 3)
    ax = fig.add_subplot()
    lines = traces(ax, v, units=[4, 1], threshold=1.0, dt=0.002)
    assert [ln.get_label() for ln in lines] == ["neuron 4", "neuron 1"]
    np.testing.assert_allclose(lines[0].get_xdata()[:3], [0, 0.002, 0.004])
    assert any("threshold" in t.get_text() and "1" in t.get_text() for t in ax.texts)
    assert lines[0].get_color().lower() != lines[1].get_color().lower()
    with pytest.raises(UserError, match="out of range"):
        traces(ax, v, units=[5])


def test_rate_histogram_in_hz_when_dt_is_known():
    z = np.zeros((1000, 3))
    z[::10, 0] = 1  # 1 spike / 10 steps = 100 Hz at dt = 1 ms
    z[::4, 2] = 1
    np.testing.assert_allclose(neuron_rates(z, 1e-3), [100.0, 0.0, 250.0])
    np.testing.assert_allclose(neuron_rates(z), [0.1, 0.0, 0.25])
    fig = new_figure(4, 3)
    ax = fig.add_subplot()
    groups = rate_histogram(ax, z, sign=[1, 1, -1], dt=1e-3)
    np.testing.assert_allclose(groups["E"], [100.0, 0.0])
    np.testing.assert_allclose(groups["I"], [250.0])
    assert ax.get_xlabel() == "rate (Hz)"


# ---------------------------------------------------------------- whole figure
def test_activity_figure_of_a_bare_network(tmp_path):
    """Issue 14 finding 4: a raster/trace figure of a network's run, no Trajectory needed."""
    from snrl.networks.spiking import SpikingBackbone

    torch.manual_seed(0)
    net = SpikingBackbone(3, [20], 2, backbone="lif", force_dale_law=True, seed=0)
    x = 2 * torch.rand(60, 1, 3, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        res = net.run(x, net.initial_state(1))
    import matplotlib

    backend = matplotlib.get_backend()
    fig = activity_figure(res.activity, dt=1e-3, path=tmp_path / "a.png")
    assert matplotlib.get_backend() == backend  # no global state changed
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert "Layer 1: LIF, 20 neurons (16 E / 4 I)" in titles
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(UserError, match="no spiking layer"):
        activity_figure(Activity([LayerActivity("mlp0", "ann", 3)]))
    with pytest.raises(UserError, match=r"\.png, \.pdf or \.svg"):
        save_figure(fig, tmp_path / "a.gif")


def test_learning_curve_colours_are_the_palette_s():
    """snrl.training sits below snrl.plot, so it spells the colours out; they must agree."""
    from snrl.training.plots import CURVES

    assert [c for _, _, c in CURVES] == list(pal.GROUP_COLORS[:2])


# ---------------------------------------------------------------- issue 39 item 8
def test_raster_stacked_above_traces_share_the_time_axis():
    """Row k of the raster and sample k of the traces sit at the same x, same limits."""
    fig = new_figure(6, 4)
    top, bottom = fig.subplots(2, 1)
    z = _spikes(t=40, n=6)
    v = np.random.default_rng(1).random((40, 6))
    raster(top, z, dt=0.002, t0=0.1)
    traces(bottom, v, threshold=1.0, dt=0.002, t0=0.1)
    # 40 rows of 2 ms from t0 = 0.1 s: rows span 0.1 - 1 ms .. 0.1 + 39.5 * 2 ms
    assert top.get_xlim() == pytest.approx((0.099, 0.179))
    assert bottom.get_xlim() == pytest.approx(top.get_xlim())
    fig.canvas.draw()
    assert top.get_position().x0 == pytest.approx(bottom.get_position().x0)
    assert top.get_position().x1 == pytest.approx(bottom.get_position().x1)


@pytest.mark.parametrize("v_scale", [0.5, 3.0])  # threshold near the top / the bottom
def test_threshold_label_stays_inside_the_axes(v_scale):
    fig = new_figure(5, 1.6)
    ax = fig.add_subplot()
    v = v_scale * np.random.default_rng(2).random((30, 3))
    traces(ax, v, threshold=1.0)
    fig.tight_layout()
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (label,) = [t for t in ax.texts if t.get_text().startswith("threshold")]
    assert label.get_text() == "threshold 1"  # one line, no wrap
    box, frame = label.get_window_extent(renderer), ax.get_window_extent(renderer)
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1
    assert frame.y0 <= box.y0 and box.y1 <= frame.y1


def test_activity_figure_of_a_bare_layer_output():
    """activity_figure(layer.run(...)) used to fail with 'Tensor' has no attribute 'kind'."""
    from snrl.layers import LIFLayer, LILayer

    lif = LIFLayer(3, 20, force_dale_law=True, seed=0)
    x = 3 * torch.rand(50, 1, 3, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        res = lif.run(x, lif.initial_state(1))
    assert res.out.sum() > 0  # the drive makes it spike
    fig = activity_figure(res)  # no layer: spikes and membranes, no E/I, no threshold
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert "Layer 1: spiking, 20 neurons" in titles
    fig = activity_figure(res, layer=lif, dt=1e-3)
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert "Layer 1: LIF, 20 neurons (16 E / 4 I)" in titles
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert f"threshold {lif.threshold:g}" in texts
    li = LILayer(3, 4)
    with torch.no_grad():
        out = li.run(x, li.initial_state(1))
    with pytest.raises(UserError, match="no spikes"):
        activity_figure(out)
    with pytest.raises(UserError, match="no spikes"):
        activity_figure(out, layer=li)
