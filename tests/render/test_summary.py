"""plot_episode: the static summary figure and its helpers."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from snrl.render import plot_episode
from snrl.render._panel import E_COLOR, I_COLOR
from snrl.render.summary import _moving_average, _raster_image
from snrl.trajectory import Trajectory


def test_moving_average_by_hand():
    x = np.array([0.0, 3.0, 0.0, 3.0])
    # window 3, shrunk at the edges: [(0+3)/2, (0+3+0)/3, (3+0+3)/3, (0+3)/2]
    np.testing.assert_allclose(_moving_average(x, 3), [1.5, 1.0, 2.0, 1.5])
    np.testing.assert_allclose(_moving_average(x, 1), x)


def test_raster_image_colours_and_order():
    spikes = np.array([[1, 0, 1], [0, 1, 0]], dtype=float)  # (T=2, N=3)
    img, n_e = _raster_image(spikes, [-1, 1, 1])  # neuron 0 inhibitory -> drawn last
    assert n_e == 2 and img.shape == (3, 2, 3)
    # rows: neuron 1 (E), neuron 2 (E), neuron 0 (I)
    assert tuple(img[0, 1]) == E_COLOR and tuple(img[0, 0]) == (255, 255, 255)
    assert tuple(img[1, 0]) == E_COLOR
    assert tuple(img[2, 0]) == I_COLOR and tuple(img[2, 1]) == (255, 255, 255)


def test_plot_episode_png_and_pdf(tmp_path, spiking_traj, ann_traj):
    out = plot_episode(spiking_traj, tmp_path / "figs" / "ep.png", dpi=60)
    with Image.open(out) as im:
        assert im.format == "PNG" and im.size[0] > 300
        pixels = np.asarray(im.convert("RGB")).reshape(-1, 3)
    colors = {tuple(c) for c in pixels}
    assert E_COLOR in colors and I_COLOR in colors  # the raster is drawn in E/I colours
    pdf = plot_episode(ann_traj, tmp_path / "ep.pdf")
    assert pdf.read_bytes()[:4] == b"%PDF"
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["ep.pdf", "ep.png"]


def test_plot_episode_bad_inputs(tmp_path, spiking_traj):
    with pytest.raises(ValueError, match="png"):
        plot_episode(spiking_traj, tmp_path / "ep.avi")
    blocker = tmp_path / "f"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        plot_episode(spiking_traj, blocker / "ep.png")
    empty = Trajectory(
        observations=np.zeros((0, 4)),
        actions=np.zeros(0),
        rewards=np.zeros(0),
        terminated=np.zeros(0),
        truncated=np.zeros(0),
    )
    with pytest.raises(ValueError, match="empty"):
        plot_episode(empty, tmp_path / "e.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]
