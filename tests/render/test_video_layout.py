"""Issue 39 item 7 and issue 34 s.2: renders name NeuroGym's channels and actions, put
time in seconds, have a large title, visible trial starts, a sliding task window and a
16:9 layout."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from matplotlib.colors import to_rgb

from snrl.envs.trials import _index_names, space_names
from snrl.render import TrajectoryRenderer
from snrl.render._panel import MARK_COLOR
from tests.render.test_task_panel import task_trajectory


def _neurogym_env(name: str = "PerceptualDecisionMaking-v0"):
    ngym = pytest.importorskip("neurogym")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ngym.make(name, dt=100)


def test_index_names_expand_groups_and_refuse_gaps():
    assert _index_names({"fixation": 0, "stimulus": [1, 2]}, 3) == [
        "fixation",
        "stimulus 1",
        "stimulus 2",
    ]
    assert _index_names({"fixation": 0, "go": [1]}, 2) == ["fixation", "go"]
    assert _index_names({"fixation": 0, "stimulus": [1, 2]}, 4) is None  # channel 3 unnamed
    assert _index_names({"a": 0, "b": 0}, 1) is None  # named twice
    assert _index_names({"a": 5}, 2) is None
    assert _index_names(None, 2) is None


def test_space_names_of_neurogym_and_of_other_envs():
    import gymnasium as gym

    env = _neurogym_env()
    assert space_names(env) == {
        "obs_names": ["fixation", "stimulus 1", "stimulus 2"],
        "action_names": ["fixation", "choice 1", "choice 2"],
    }
    assert space_names(gym.make("CartPole-v1")) == {}


@pytest.fixture(scope="module")
def ngym_traj():
    """A 24-step rollout of a small untrained PPO agent on PerceptualDecisionMaking-v0."""
    pytest.importorskip("neurogym")
    import snrl

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        algo = snrl.PPO("PerceptualDecisionMaking-v0", backbone="lif", hidden_size=8, n_envs=1)
        return algo.rollout(seed=0, record=True, max_steps=24)


def test_neurogym_render_labels_channels_and_actions_by_name(ngym_traj):
    assert ngym_traj.meta["obs_names"] == ["fixation", "stimulus 1", "stimulus 2"]
    r = TrajectoryRenderer(ngym_traj, window=10)
    r.frame(3)
    texts = set(r._composer.canvas.texts)
    for name in ("— fixation", "— stimulus 1", "— stimulus 2", "choice 1", "choice 2"):
        assert name in texts, (name, sorted(texts))
    assert not any(t.startswith("— ch ") for t in texts)


def test_without_names_the_channels_keep_numbers():
    traj = task_trajectory(t=12)
    del traj.meta["obs_names"]
    r = TrajectoryRenderer(traj, window=12)
    r.frame(0)
    texts = set(r._composer.canvas.texts)
    assert {"— ch 0", "— ch 1", "— ch 2"} <= texts
    assert {"0", "1", "2"} <= texts  # action ticks: numbers


def _numbers(texts: list[str]) -> list[float]:
    out = []
    for t in texts:
        try:
            out.append(float(t.replace("−", "-")))
        except ValueError:
            pass
    return out


def test_time_axis_is_in_seconds_where_the_env_has_a_clock(ngym_traj):
    assert ngym_traj.dt == pytest.approx(0.1)  # NeuroGym's dt=100 ms
    r = TrajectoryRenderer(ngym_traj, window=10, activity=False)
    r.frame(0)
    canvas = r._composer.canvas
    assert "time (s)" in canvas.texts and "time (env steps)" not in canvas.texts
    ax = canvas._time_axes[-1][0]  # the axis with time ticks: the page's 10 steps = 1 s
    ticks = [float(v) for v in ax.get_xticks()]
    assert max(ticks) <= 0.95 + 1e-9 and max(ticks) >= 0.5
    assert "t 0.30 s" in canvas.text(3)


def test_time_axis_counts_env_steps_without_a_clock(spiking_traj):
    assert spiking_traj.dt is None
    r = TrajectoryRenderer(spiking_traj, window=40)
    r.frame(0)
    texts = r._composer.canvas.texts
    assert "time (env steps)" in texts and "time (s)" not in texts
    assert max(_numbers(texts)) >= 10  # step ticks, not fractions of a second


def test_title_is_large_dark_and_bold(ngym_traj):
    from matplotlib.text import Text

    r = TrajectoryRenderer(ngym_traj, window=10)
    r.frame(0)
    fig = r._composer.canvas._fig
    (title,) = [t for t in fig.texts if isinstance(t, Text) and "PPO" in t.get_text()]
    assert "PerceptualDecisionMaking-v0" in title.get_text()
    assert title.get_fontsize() * 100 / 72 >= 26  # pixels at dpi 100, scale 1
    assert title.get_fontweight() == "bold"
    rgb = np.array(to_rgb(title.get_color()))
    assert rgb.max() < 0.2  # near black


def test_trial_start_lines_are_dark_and_two_pixels_wide():
    from tests.render.test_task_panel import task_trajectory as toy

    r = TrajectoryRenderer(toy(), window=20)
    f = r.frame(15)
    canvas = r._composer.canvas
    assert sum(MARK_COLOR) / 3 < 128  # dark grey, not a faint one
    rect, cols = canvas.marks.rects[0], canvas.marks.cols[0]  # observation axes
    at10 = rect.c0 + int(np.flatnonzero(cols == 10)[0])
    for c in (at10, at10 + 1):  # two columns (at scale 1), solid down the axes
        col = (f[rect.r0 : rect.r1, c] == MARK_COLOR).all(-1)
        assert col.mean() > 0.8
    assert not (f[rect.r0 : rect.r1, at10 + 2] == MARK_COLOR).all(-1).any()


def _trace_columns(canvas, frame) -> np.ndarray:
    """Fraction of the observation axes' pixel columns that hold a trace pixel."""
    tr = canvas.task_traces[0]
    r = tr.rect
    region = frame[r.r0 : r.r1, r.c0 : r.c1]
    hit = np.zeros(region.shape[:2], bool)
    for c in tr.colors:
        hit |= (region == c).all(-1)
    return hit.any(0).mean()


def test_mp4_window_slides_with_time_instead_of_paging(tmp_path, ngym_traj):
    r = TrajectoryRenderer(ngym_traj, window=10)
    r.to_mp4(tmp_path / "v.mp4", fps=10)
    mp4 = r._composer.canvas
    assert not mp4.page  # the MP4's own canvas
    # frame 20 starts a new page: paging shows one step, sliding the last 10
    slid = _trace_columns(mp4, mp4.paint(20, None).copy())
    paged = TrajectoryRenderer(ngym_traj, window=10, timeline="page")
    pf = paged.frame(20)
    assert _trace_columns(paged._composer.canvas, pf) < 0.2
    assert slid > 0.8


@pytest.mark.parametrize(
    ("kind", "layout", "is_16_9"),
    [("mp4", None, True), ("gif", None, False), ("gif", "16:9", True), ("mp4", "compact", False)],
)
def test_layout_16_9_is_the_mp4_default(tmp_path, ngym_traj, kind, layout, is_16_9):
    import imageio.v3 as iio

    r = TrajectoryRenderer(ngym_traj, window=10, layout=layout)
    out = r.to_file(tmp_path / f"v.{kind}", fps=10)
    frame = iio.imread(out, index=3)
    h, w = frame.shape[:2]
    assert (w * 9 == h * 16) is is_16_9, (w, h)
    assert h >= 540
    if is_16_9:
        assert w % 32 == 0


def test_bad_layout_is_a_user_error(ngym_traj):
    from snrl.errors import UserError

    with pytest.raises(UserError, match="layout='4:3'"):
        TrajectoryRenderer(ngym_traj, layout="4:3")


def test_snrl_render_layout_flag(tmp_path, monkeypatch, ngym_traj):
    """`snrl render` writes a 16:9 MP4 by default and a compact one with --layout compact
    (the run is stood in for by an algo whose rollout is the recorded trajectory)."""
    import imageio.v3 as iio

    from snrl.cli import commands
    from snrl.cli.parser import build_parser

    class _Algo:
        def rollout(self, seed: int = 0, record: bool = True):
            return ngym_traj

    monkeypatch.setattr(commands, "_checkpoint_path", lambda run_dir, which: tmp_path)
    monkeypatch.setattr(commands, "load_algo", lambda *a, **k: _Algo())
    parser = build_parser()
    for flags, is_16_9 in (([], True), (["--layout", "compact"], False)):
        out = tmp_path / f"v{len(flags)}.mp4"
        args = parser.parse_args(["render", "run", "--out", str(out), "--fps", "10", *flags])
        assert args.func(args) == 0
        h, w = iio.imread(out, index=0).shape[:2]
        assert (w * 9 == h * 16) is is_16_9, (flags, w, h)
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["render", "run", "--out", "v.mp4", "--layout", "4:3"])
    assert exc.value.code == 2
