"""TrajectoryRenderer: frame count and sync, file formats, paths, re-simulation, errors."""

from __future__ import annotations

import os
import stat
import subprocess
import warnings

import gymnasium as gym
import imageio.v2 as imageio_v2
import imageio.v3 as iio
import imageio_ffmpeg
import numpy as np
import pytest
from PIL import Image

from snrl.networks import Activity, LayerActivity
from snrl.render import TrajectoryRenderer
from snrl.render._encode import gif_delays_cs
from snrl.render._panel import E_COLOR, I_COLOR, PRE_COLOR, raster_codes
from snrl.trajectory import Trajectory


def _ffmpeg_info(path) -> str:
    """The stream line ffmpeg prints for a file (an ffprobe-like read)."""
    proc = subprocess.run(
        [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-i", str(path)],
        capture_output=True,
        text=True,
    )
    return next(line for line in proc.stderr.splitlines() if "Video:" in line)


def _no_temp_files(directory) -> bool:
    return not [p for p in directory.rglob("*") if ".tmp" in p.name]


def _env_part(r: TrajectoryRenderer, video_frame: np.ndarray) -> np.ndarray:
    """The env frame as the video shows it (cropped to its content, enlarged by `zoom`)."""
    canvas = r._composer.canvas
    y, x, h, w = canvas.env_box
    return video_frame[y : y + h, x : x + w]


def _shown(r: TrajectoryRenderer, env_frame: np.ndarray) -> np.ndarray:
    canvas = r._composer.canvas
    if canvas.crop is not None:
        y0, y1, x0, x1 = canvas.crop
        env_frame = env_frame[y0:y1, x0:x1]
    return np.repeat(np.repeat(env_frame, canvas.zoom, 0), canvas.zoom, 1)


# ---------------------------------------------------------------- frames and sync
def test_frames_are_t_plus_one_and_env_frame_is_on_the_left(spiking_traj):
    r = TrajectoryRenderer(spiking_traj)
    frames = [f.copy() for f in r.frames()]
    t = len(spiking_traj)
    assert r.n_frames == t + 1 == len(frames)
    canvas = r._composer.canvas
    y, x, h, w = canvas.env_box
    for k in (0, t // 2, t):
        np.testing.assert_array_equal(_env_part(r, frames[k]), _shown(r, spiking_traj.frames[k]))
    assert frames[0].shape[0] % 2 == 0 and frames[0].shape[1] % 2 == 0
    assert frames[0].shape[1] > x + w + 300  # the network column is to the right
    # the env frame is cropped to its content: CartPole's blank sky and ground are gone
    y0, y1, x0, x1 = canvas.crop
    assert y1 - y0 < spiking_traj.frames.shape[1] * 0.6
    blank = np.all(spiking_traj.frames == 255, axis=(0, 3))  # (H, W) white in every frame
    assert blank[:y0].all() and blank[y1:].all()  # only blank rows were cut


def test_crop_false_shows_the_whole_env_frame(spiking_traj):
    r = TrajectoryRenderer(spiking_traj, crop=False)
    f = r.frame(3)
    np.testing.assert_array_equal(_env_part(r, f), _shown(r, spiking_traj.frames[3]))
    assert r._composer.canvas.crop is None
    assert _env_part(r, f).shape[:2] == spiking_traj.frames.shape[1:3]


def test_without_activity_the_video_is_the_env_frames(spiking_traj):
    r = TrajectoryRenderer(spiking_traj, activity=False)
    for k, f in enumerate(r.frames()):
        np.testing.assert_array_equal(f, spiking_traj.frames[k])


def test_raster_newest_column_shows_the_spikes_of_step_k(spiking_traj):
    """Oracle: in frame k the rightmost raster slot is step k's spikes, E red / I blue."""
    r = TrajectoryRenderer(spiking_traj, window=10, timeline="scroll")
    panel_x = 0  # rects are in video-frame pixels
    frames = [f.copy() for f in r.frames()]
    r.frame(0)  # builds the panel (already built by frames())
    m = r._composer.canvas.matrices[0]
    rect = m.rect
    spikes = spiking_traj.activity["lif0"].spikes > 0
    sign = np.array(spiking_traj.layers[0]["sign"])
    order = np.concatenate([np.flatnonzero(sign > 0), np.flatnonzero(sign < 0)])
    n = spikes.shape[1]
    col = panel_x + rect.c1 - 1  # rightmost interior column = newest step
    assert rect.h % n == 0  # every neuron gets the same whole number of pixel rows
    rows = rect.r0 + ((np.arange(n) + 0.5) * rect.h / n).astype(int)  # centre row per neuron
    for k in (0, 3, len(spiking_traj) - 1):
        got = frames[k][rows, col]
        for i, neuron in enumerate(order):
            if spikes[k, neuron]:
                want = E_COLOR if sign[neuron] > 0 else I_COLOR
            else:
                want = (255, 255, 255)
            assert tuple(got[i]) == want, (k, neuron)
    # Before the episode (frame 0) the oldest slots are the "no data yet" grey.
    assert tuple(frames[0][rows[0], panel_x + rect.c0]) == PRE_COLOR


def test_raster_codes_pool_neurons_with_max():
    spikes = np.zeros((2, 4))
    spikes[0, 1] = 1  # excitatory neuron 1 spikes at t=0
    spikes[1, 3] = 1  # inhibitory neuron 3 spikes at t=1
    codes, order = raster_codes(spikes, [1, 1, 1, -1], h=2)
    # Two pixel rows: neurons {0, 1} and {2, 3}.
    np.testing.assert_array_equal(order, [0, 1, 2, 3])
    np.testing.assert_array_equal(codes, [[1, 0], [0, 2]])
    codes, _ = raster_codes(spikes, None, h=8)  # fewer neurons than rows: repeat rows
    assert codes.shape == (8, 2) and codes[2:4, 0].tolist() == [3, 3]


def test_spiking_and_ann_have_the_same_layout(spiking_traj, ann_traj):
    fs = TrajectoryRenderer(spiking_traj).frame(5)
    fa = TrajectoryRenderer(ann_traj).frame(5)
    assert fs.shape == fa.shape
    panel_x = spiking_traj.frames.shape[2]
    spk_colors = {tuple(c) for c in fs[:, panel_x:].reshape(-1, 3)}
    ann_colors = {tuple(c) for c in fa[:, panel_x:].reshape(-1, 3)}
    assert E_COLOR in spk_colors and I_COLOR in spk_colors
    assert E_COLOR not in ann_colors  # a heatmap, not a raster
    assert len(ann_colors) > len(spk_colors)  # many heatmap levels


def test_box_policy_and_layers_without_threshold_or_sign_render():
    rng = np.random.default_rng(0)
    t = 6
    traj = Trajectory(
        observations=rng.normal(size=(t, 3)),
        actions=rng.normal(size=(t, 1)),
        rewards=rng.normal(size=t),
        terminated=np.zeros(t, bool),
        truncated=np.eye(t, dtype=bool)[-1],
        env="Pendulum-v1",
        frames=rng.integers(0, 255, (t + 1, 64, 64, 3), dtype=np.uint8),
        activity=Activity(
            [
                LayerActivity("gru0", "ann", 8, extra={"h": rng.normal(size=(t, 8))}),
                LayerActivity("x", "spiking", 5, spikes=rng.random((t, 5)) < 0.5),
            ]
        ),
        policy={"mean": rng.normal(size=(t, 1)), "std": np.full((t, 1), 0.3)},
    )
    frames = [f.copy() for f in TrajectoryRenderer(traj).frames()]
    assert len(frames) == t + 1
    assert frames[0].shape[0] >= 360  # small env frames get a readable panel height


# ---------------------------------------------------------------- files
def test_mp4_is_h264_yuv420p_with_fps_size_and_frame_count(tmp_path, spiking_traj):
    # MP4's defaults, given explicitly so that frame() draws what the MP4 holds
    r = TrajectoryRenderer(spiking_traj, layout="16:9", timeline="scroll")
    out = r.to_mp4(tmp_path / "ep.mp4", fps=12)
    info = _ffmpeg_info(out)
    assert "h264" in info and "yuv420p" in info
    nframes, secs = imageio_ffmpeg.count_frames_and_secs(str(out))
    assert nframes == r.n_frames
    reader = imageio_v2.get_reader(out)
    meta = reader.get_meta_data()
    first = reader.get_data(0)
    reader.close()
    assert meta["fps"] == 12
    expected = r.frame(0)
    assert meta["size"] == (expected.shape[1], expected.shape[0])
    assert np.abs(first.astype(int) - expected.astype(int)).mean() < 6  # lossy, not scaled
    assert _no_temp_files(tmp_path)


def test_gif_loops_forever_with_exact_fps_and_frame_count(tmp_path, ann_traj):
    r = TrajectoryRenderer(ann_traj, fps=20)
    out = r.to_gif(tmp_path / "ep.gif")
    frames = iio.imread(out, index=None)
    assert frames.shape[0] == r.n_frames
    expected = r.frame(7)
    assert frames.shape[1:3] == expected.shape[:2]
    # The env part's flat colours are reproduced exactly (anti-aliased edges within palette
    # error); the whole frame stays close.
    y, x, h, w = r._composer.canvas.env_box
    env_got, env_want = frames[7][y : y + h, x : x + w, :3], expected[y : y + h, x : x + w]
    assert (env_got == env_want).all(-1).mean() > 0.97  # edges: the heatmap needs colours
    assert np.abs(frames[7][..., :3].astype(int) - expected.astype(int)).mean() < 2
    with Image.open(out) as im:
        assert im.info["loop"] == 0
        durations = []
        for k in range(im.n_frames):
            im.seek(k)
            durations.append(im.info["duration"])
    assert durations == [50] * r.n_frames


def test_gif_delays_average_to_the_requested_fps():
    np.testing.assert_array_equal(gif_delays_cs(6, 30), [3, 4, 3, 3, 4, 3])
    assert gif_delays_cs(300, 30).sum() == 1000  # 300 frames at 30 fps = 10 s
    assert set(gif_delays_cs(10, 25)) == {4}


def test_to_file_picks_the_format_by_extension(tmp_path, spiking_traj):
    r = TrajectoryRenderer(spiking_traj, activity=False)
    gif = r.to_file(tmp_path / "a.GIF", fps=10)
    mp4 = r.to_file(tmp_path / "b.mp4", fps=10)
    assert gif.name == "a.GIF" and gif.read_bytes()[:6] == b"GIF89a"
    assert b"ftyp" in mp4.read_bytes()[:16]
    # Files get the mode open() would give (umask applied), not the temp file's 0o600.
    umask = os.umask(0)
    os.umask(umask)
    for out in (gif, mp4, spiking_traj.save(tmp_path / "t.npz")):
        assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


# ---------------------------------------------------------------- paths
def test_relative_bare_and_nested_paths(tmp_path, monkeypatch, spiking_traj):
    monkeypatch.chdir(tmp_path)
    r = TrajectoryRenderer(spiking_traj, activity=False)
    assert r.to_gif("bare.gif") == tmp_path.joinpath("bare.gif").relative_to(tmp_path)
    assert (tmp_path / "bare.gif").is_file()
    r.to_mp4("deep/er/nest/x.mp4")
    assert (tmp_path / "deep/er/nest/x.mp4").is_file()
    out = r.to_gif("out/traj")  # no extension: .gif is added, nothing else changes
    assert str(out) == "out/traj.gif" and (tmp_path / "out/traj.gif").is_file()
    out = r.to_mp4("out/traj")
    assert str(out) == "out/traj.mp4"
    assert _no_temp_files(tmp_path)


@pytest.mark.parametrize(
    ("method", "name"),
    [("to_file", "x.avi"), ("to_file", "noext"), ("to_gif", "x.mp4"), ("to_mp4", "x.avi")],
)
def test_bad_extensions_raise_listing_formats(tmp_path, spiking_traj, method, name):
    r = TrajectoryRenderer(spiking_traj, activity=False)
    with pytest.raises(ValueError, match=r"\.gif, \.mp4"):
        getattr(r, method)(tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_unwritable_directory_under_a_regular_file(tmp_path, spiking_traj):
    blocker = tmp_path / "plain_file"
    blocker.write_text("keep me")
    r = TrajectoryRenderer(spiking_traj, activity=False)
    with pytest.raises(ValueError, match="not a directory"):
        r.to_mp4(blocker / "sub" / "x.mp4")
    assert blocker.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain_file"]


def test_bad_fps(tmp_path, spiking_traj):
    r = TrajectoryRenderer(spiking_traj, activity=False)
    with pytest.raises(ValueError, match="GIF"):
        r.to_gif(tmp_path / "new_dir" / "x.gif", fps=60)  # refused before any mkdir
    with pytest.raises(ValueError, match="positive"):
        r.to_mp4(tmp_path / "x.mp4", fps=0)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- bad trajectories
def test_empty_trajectory_is_a_clear_error():
    empty = Trajectory(
        observations=np.zeros((0, 4)),
        actions=np.zeros(0, int),
        rewards=np.zeros(0),
        terminated=np.zeros(0, bool),
        truncated=np.zeros(0, bool),
        env="CartPole-v1",
    )
    with pytest.raises(ValueError, match="empty"):
        TrajectoryRenderer(empty)


def test_no_frames_and_no_env_draws_the_task_instead(spiking_traj):
    """Issue 12: a trajectory without frames (and no env to replay) gets the task panel."""
    r = TrajectoryRenderer(spiking_traj.replace(frames=None))
    f = r.frame(5)
    canvas = r._composer.canvas
    assert canvas.env_box is None and len(canvas.task_traces) == 3
    assert f.shape[0] >= 540 and f.shape[0] % 2 == 0 and f.shape[1] % 2 == 0


def test_env_must_render_rgb_arrays(spiking_traj):
    env = gym.make("CartPole-v1")
    with pytest.raises(ValueError, match="rgb_array"):
        TrajectoryRenderer(spiking_traj.replace(frames=None), env)
    env.close()


# ---------------------------------------------------------------- re-simulation
def test_resimulation_reproduces_recorded_frames(spiking_traj):
    bare = spiking_traj.replace(frames=None)
    by_id = TrajectoryRenderer(bare, "CartPole-v1", activity=False)
    for k, f in enumerate(by_id.frames()):
        np.testing.assert_array_equal(f, spiking_traj.frames[k])
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    by_env = TrajectoryRenderer(bare, env)
    with_frames = TrajectoryRenderer(spiking_traj, crop=False)  # replayed frames are not cropped
    np.testing.assert_array_equal(by_env.frame(-1), with_frames.frame(-1))
    env.close()


def test_replay_divergence_raises_and_leaves_no_file(tmp_path, spiking_traj):
    obs = spiking_traj.observations.copy()
    obs[5, 0] += 0.25
    bad = spiking_traj.replace(frames=None, observations=obs)
    r = TrajectoryRenderer(bad, "CartPole-v1")
    with pytest.raises(ValueError, match="diverged from the recording after step 4"):
        r.to_mp4(tmp_path / "x.mp4")
    assert list(tmp_path.iterdir()) == []
    lenient = TrajectoryRenderer(bad, "CartPole-v1", strict_replay=False, activity=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        n = sum(1 for _ in lenient.frames())
    assert n == len(bad) + 1
    assert len([w for w in caught if "diverged" in str(w.message)]) == 1


def test_replay_needs_a_seed(spiking_traj):
    with pytest.raises(ValueError, match="no seed"):
        TrajectoryRenderer(spiking_traj.replace(frames=None, seed=None), "CartPole-v1")


def test_unknown_env_id(spiking_traj):
    r = TrajectoryRenderer(spiking_traj.replace(frames=None), "NoSuchEnv-v0")
    with pytest.raises(ValueError, match="NoSuchEnv"):
        r.frame(0)


# ---------------------------------------------------------------- interactive
def test_render_returns_figure_axes_animation(spiking_traj):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax, anim = TrajectoryRenderer(spiking_traj, fps=25).render()
    try:
        assert anim.event_source.interval == 40  # milliseconds, = 1000 / fps
        (image,) = anim._func(3)
        np.testing.assert_array_equal(image.get_array(), TrajectoryRenderer(spiking_traj).frame(3))
    finally:
        anim.event_source.stop()
        plt.close(fig)


def test_save_frame_png(tmp_path, spiking_traj):
    r = TrajectoryRenderer(spiking_traj)
    out = r.save_frame(tmp_path / "stills" / "f.png", 3)
    with Image.open(out) as im:
        np.testing.assert_array_equal(np.asarray(im.convert("RGB")), r.frame(3))
    with pytest.raises(ValueError, match=r"\.png"):
        r.save_frame(tmp_path / "f.jpg", 3)
    with pytest.raises(ValueError, match="out of range"):
        r.frame(len(spiking_traj) + 1)


def test_loaded_trajectory_renders_like_the_original(tmp_path, spiking_traj):
    loaded = Trajectory.load(spiking_traj.save(tmp_path / "ep.npz"))
    np.testing.assert_array_equal(
        TrajectoryRenderer(loaded).frame(4), TrajectoryRenderer(spiking_traj).frame(4)
    )


def test_render_animation_replays_resimulated_frames(spiking_traj):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bare = spiking_traj.replace(frames=None)
    fig, ax, anim = TrajectoryRenderer(bare, "CartPole-v1", activity=False).render()
    try:
        for k in (2, 5, 5, 1):  # forwards, same frame again, then backwards (replays)
            (image,) = anim._func(k)
            np.testing.assert_array_equal(image.get_array(), spiking_traj.frames[k])
    finally:
        anim.event_source.stop()
        plt.close(fig)


def test_gif_failure_leaves_no_file_and_palette_is_distinct(tmp_path, spiking_traj):
    from snrl.render._encode import build_palette

    obs = spiking_traj.observations.copy()
    obs[5, 0] += 0.25
    bad = spiking_traj.replace(frames=None, observations=obs)
    with pytest.raises(ValueError, match="diverged"):
        TrajectoryRenderer(bad, "CartPole-v1").to_gif(tmp_path / "x.gif")
    assert list(tmp_path.iterdir()) == []
    # Few colours: the palette keeps them first, in order, and pads with distinct ones
    # (Pillow re-maps every frame when palette entries repeat).
    img = np.zeros((4, 4, 3), np.uint8)
    img[:2] = (10, 20, 30)
    pal = build_palette([img], required=np.array([[200, 0, 0]], np.uint8))
    assert pal[:3].tolist() == [[200, 0, 0], [0, 0, 0], [10, 20, 30]]
    assert len({tuple(c) for c in pal}) == 256


# ---------------------------------------------------------------- size, legibility, GIF size
def test_scale_sizes_everything_and_text_is_legible(spiking_traj):
    from snrl.render._panel import TEXT_PX

    r1 = TrajectoryRenderer(spiking_traj)
    f1 = r1.frame(3)
    r2 = TrajectoryRenderer(spiking_traj, scale=2)
    f2 = r2.frame(3)
    assert f1.shape[0] >= 540 and f2.shape[0] >= 1080
    assert abs(f2.shape[1] - 2 * f1.shape[1]) <= 4
    assert TEXT_PX >= 14 and r1._composer.canvas.glyphs.h >= 14
    assert r2._composer.canvas.glyphs.h >= 2 * r1._composer.canvas.glyphs.h - 1
    with pytest.raises(ValueError, match="scale"):
        TrajectoryRenderer(spiking_traj, scale=10)
    with pytest.raises(ValueError, match="timeline"):
        TrajectoryRenderer(spiking_traj, timeline="wipe")


def test_heatmap_has_a_colour_bar(ann_traj):
    r = TrajectoryRenderer(ann_traj)
    r.frame(0)
    canvas = r._composer.canvas
    m = canvas.matrices[0]
    bar = canvas.background[m.rect.r0 + 2 : m.rect.r1 - 2, m.rect.c1 + 12 : m.rect.c1 + 20]
    assert len({tuple(c) for c in bar.reshape(-1, 3)}) > 20  # a gradient right of the heatmap


def test_paged_gif_is_much_smaller_than_a_scrolling_one(tmp_path):
    """Issue 14: pages change a few columns per frame, a scrolling raster all of them."""
    rng = np.random.default_rng(4)
    t, n = 60, 64
    traj = Trajectory(
        observations=rng.normal(size=(t, 2)),
        actions=rng.integers(0, 2, t),
        rewards=np.ones(t),
        terminated=np.zeros(t, bool),
        truncated=np.eye(t, dtype=bool)[-1],
        activity=Activity(
            [
                LayerActivity(
                    "lif0",
                    "spiking",
                    n,
                    spikes=rng.random((t, n)) < 0.1,
                    v=rng.normal(0.5, 0.3, (t, n)),
                    threshold=1.0,
                )
            ]
        ),  # fmt: skip
    )
    page = TrajectoryRenderer(traj, window=40).to_gif(tmp_path / "page.gif")
    scroll = TrajectoryRenderer(traj, window=40, timeline="scroll").to_gif(tmp_path / "s.gif")
    assert page.stat().st_size < 0.5 * scroll.stat().st_size
    frames = iio.imread(page, index=None)
    assert frames.shape[0] == len(traj) + 1
