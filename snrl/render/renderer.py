"""Render a :class:`~snrl.Trajectory` to GIF or MP4, with the network beside the env.

```python
from snrl.render import TrajectoryRenderer
traj = algo.rollout(seed=0, record=True)
TrajectoryRenderer(traj).to_file("out/episode.mp4", fps=30)   # or .gif
fig, ax, anim = TrajectoryRenderer(traj).render()              # matplotlib animation
```

Frame convention: a trajectory of T steps gives a video of **T + 1 frames**. Video frame
``k`` shows env frame ``k`` (``frames[0]`` right after reset, ``frames[t + 1]`` after step
``t``); with ``activity=True`` the panel on the right shows the activity window ending at
step ``min(k, T - 1)`` (the network's response to the observation in frame ``k``), the
policy output of step ``k`` with the chosen action highlighted (none on the last frame), the
reward of the step that led to frame ``k`` and the return so far. See
:mod:`snrl.render._panel` for what each panel draws.

Speed and memory: frames are streamed one at a time from the trajectory (or from a
re-simulated env) through the composer to the encoder; nothing holds the whole video.
The panel's static parts are drawn by matplotlib once; per frame only numpy paints the
changing pixels.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from snrl.errors import UserError, positive_number
from snrl.io import atomic_open
from snrl.render._encode import (
    MAX_GIF_FPS,
    GifWriter,
    Mp4Writer,
    ThreadedWriter,
    build_palette,
    resolve_output,
)
from snrl.render._panel import LAYOUTS, VideoCanvas, content_box
from snrl.trajectory import Trajectory

__all__ = ["TrajectoryRenderer"]

DEFAULT_FPS = 30.0


class _FrameSource:
    """The T + 1 env frames of a trajectory: stored, or re-simulated by replaying actions."""

    def __init__(self, traj: Trajectory, env: Any, *, strict: bool) -> None:
        self.traj = traj
        self.strict = strict
        self.env = None
        self.task_only = traj.frames is None and env is None
        if traj.frames is not None or env is None:
            return  # stored frames, or no frames at all: the task panel takes their place
        if traj.seed is None:
            raise UserError(
                "cannot re-simulate frames: the trajectory has no seed (record it with "
                "rollout(seed=..., record=True), or store frames)"
            )
        if isinstance(env, str):
            self.env_name: str = env
        else:
            mode = getattr(env, "render_mode", None)
            if mode != "rgb_array":
                raise UserError(
                    f"env has render_mode={mode!r} (construct it with render_mode='rgb_array')"
                )
            self.env_name = traj.env
        self.env = env

    def _make_env(self) -> tuple[Any, bool]:
        if not isinstance(self.env, str):
            return self.env, False
        import gymnasium as gym

        try:
            return gym.make(self.env, render_mode="rgb_array"), True
        except gym.error.Error as exc:
            raise UserError(
                f"cannot make env {self.env!r}: {exc} (pass a registered gymnasium env id)"
            ) from exc

    def _check(self, t: int, obs: Any, warned: list[bool]) -> None:
        """Compare the replayed observation that the agent saw at step t with the record."""
        rec = self.traj.observations[t]
        got = np.asarray(obs)
        if got.shape == rec.shape and np.allclose(got, rec, rtol=1e-5, atol=1e-6, equal_nan=True):
            return
        if got.shape != rec.shape:
            diff = f"shape {got.shape} vs recorded {rec.shape}"
        else:
            diff = f"max |obs - recorded| = {np.max(np.abs(got - rec.astype(got.dtype))):.3g}"
        where = "after reset" if t == 0 else f"after step {t - 1}"
        msg = (
            f"replaying {self.env_name!r} with seed {self.traj.seed} diverged from the recording "
            f"{where}: {diff} (the env is not deterministic under replay, or the recorded "
            "observations were transformed; store frames when recording, or pass "
            "strict_replay=False to render the replayed frames anyway)"
        )
        if self.strict:
            raise UserError(msg)
        if not warned[0]:
            warnings.warn(msg, RuntimeWarning, stacklevel=4)
            warned[0] = True

    def __iter__(self) -> Iterator[np.ndarray | None]:
        if self.traj.frames is not None:
            yield from self.traj.frames
            return
        if self.task_only:
            yield from (None for _ in range(len(self.traj) + 1))
            return
        env, own = self._make_env()
        warned = [False]
        try:
            space = env.action_space
            discrete = hasattr(space, "n") and np.ndim(self.traj.actions[0]) == 0
            obs, _ = env.reset(seed=self.traj.seed)
            self._check(0, obs, warned)
            yield self._render(env)
            t_total = len(self.traj)
            for t in range(t_total):
                a = self.traj.actions[t]
                action = int(a) if discrete else np.asarray(a, dtype=space.dtype)
                obs, _, term, trunc, _ = env.step(action)
                if t + 1 < t_total:
                    if term or trunc:
                        raise UserError(
                            f"replaying {self.env_name!r} ended the episode at step {t} but the "
                            f"recording has {t_total} steps (pass an env with a longer time "
                            "limit, or store frames)"
                        )
                    self._check(t + 1, obs, warned)
                yield self._render(env)
        finally:
            if own:
                env.close()

    @staticmethod
    def _render(env: Any) -> np.ndarray:
        frame = env.render()
        if not isinstance(frame, np.ndarray) or frame.ndim != 3 or frame.shape[-1] != 3:
            raise UserError(
                "env.render() did not return an RGB array (construct it with "
                "render_mode='rgb_array')"
            )
        return frame.astype(np.uint8, copy=False)


class _Composer:
    """Turns env frame ``k`` (or None: no frames) into video frame ``k``."""

    def __init__(self, frame_hw: tuple[int, int] | None, canvas: VideoCanvas | None) -> None:
        self.frame_hw = frame_hw
        self.canvas = canvas
        if canvas is not None:
            self.w, self.h = canvas.width, canvas.height
        else:  # the env frames alone, padded to even sizes
            assert frame_hw is not None
            self.h, self.w = frame_hw[0] + frame_hw[0] % 2, frame_hw[1] + frame_hw[1] % 2
            self.buf = np.full((self.h, self.w, 3), 255, dtype=np.uint8)

    @property
    def size(self) -> tuple[int, int]:
        """(width, height) in pixels."""
        return self.w, self.h

    @property
    def colors(self) -> np.ndarray | None:
        """Colours the GIF palette must hold exactly."""
        return None if self.canvas is None else self.canvas.colors

    def compose(self, k: int, frame: np.ndarray | None) -> np.ndarray:
        """Video frame k; returns an internal buffer that the next call overwrites."""
        if frame is not None and frame.shape[:2] != self.frame_hw:
            raise UserError(
                f"env frame {k} has size {frame.shape[:2]} but frame 0 had {self.frame_hw} "
                "(all frames must have one size)"
            )
        if self.canvas is not None:
            return self.canvas.paint(k, frame)
        assert frame is not None
        self.buf[: frame.shape[0], : frame.shape[1]] = frame
        return self.buf


class TrajectoryRenderer:
    """Video of a trajectory: the env (or the task) on the left, the network on the right.

    Args:
        trajectory: the episode to draw (T >= 1 steps).
        env: used only when the trajectory has no frames: an env id or a gymnasium env
            made with ``render_mode="rgb_array"``. It is reset with the recorded seed and the
            recorded actions are replayed; each replayed observation is checked against the
            recorded one. Without frames and without ``env`` (envs that draw nothing, such
            as NeuroGym tasks), the **task panel** takes the env's place: observation
            channels, the chosen action against the ground truth, the reward and trial
            boundaries as scrolling traces, synchronized with the raster.
        activity: draw the network (raster/heatmap, traces) and the policy. ``False`` gives
            the env frames alone (or the task panel alone).
        fps: default frames per second for the output methods (30 when ``None``).
        window: env steps shown by the scrolling raster and traces.
        panel_width: width of the network column at ``scale=1``, pixels.
        scale: size of the whole video: 1 gives frames at least 540 pixels high with text of
            at least 14 pixels (legible projected at 1080p); 2 doubles every size.
        crop: show only the part of the env frames that has content (stored frames only);
            ``False`` shows them whole.
        timeline: ``"page"``: raster, traces and task panel show a fixed page of
            ``window`` steps with absolute time ticks, filled from the left, then the next
            page; a GIF then stores a few new pixel columns per frame (a 500-step CartPole
            GIF with activity stays under 2 MB). ``"scroll"``: the window slides with the
            current time, the newest step at the right edge, time ticks relative to now;
            every column changes per frame (fine for MP4, GIFs get large). ``None``
            (default): ``"scroll"`` for MP4, ``"page"`` for GIFs and single frames.
        layout: ``"16:9"``: frames of exactly 16:9 (they fill a slide or a 1080p screen);
            ``"compact"``: as large as the content needs (about 2.5:1 with the task panel).
            ``None`` (default): ``"16:9"`` for MP4, ``"compact"`` for GIFs and single
            frames. Applies when a panel is drawn (not to ``activity=False`` env frames).
        max_traces: units drawn as traces.
        max_layers: layers drawn as rasters/heatmaps.
        strict_replay: when re-simulating, raise (True) or warn once (False) if the
            replay diverges from the recorded observations.
        mp4_crf: x264 quality (0 lossless .. 51 worst; 23 is x264's default).
        mp4_preset: x264 speed preset.

    Raises:
        UserError: empty trajectory; a re-simulation env without a seed to replay with.
    """

    def __init__(
        self,
        trajectory: Trajectory,
        env: Any = None,
        *,
        activity: bool = True,
        fps: float | None = None,
        window: int = 100,
        panel_width: int = 640,
        scale: float = 1.0,
        crop: bool = True,
        timeline: str | None = None,
        layout: str | None = None,
        max_traces: int = 3,
        max_layers: int = 3,
        strict_replay: bool = True,
        mp4_crf: int = 23,
        mp4_preset: str = "veryfast",
    ) -> None:
        if not isinstance(trajectory, Trajectory):
            raise UserError(
                f"expected a snrl.Trajectory, got {type(trajectory).__name__} "
                "(record one with rollout(record=True) or Trajectory.load)"
            )
        if len(trajectory) == 0:
            raise UserError("cannot render an empty trajectory (T=0; record at least one step)")
        if window < 2:
            raise UserError(f"window={window} (show at least 2 steps)")
        if panel_width < 200:
            raise UserError(f"panel_width={panel_width} (use at least 200 pixels)")
        try:
            scale = float(scale)
        except (TypeError, ValueError):
            raise UserError(f"scale={scale!r} is not a number (give e.g. scale=1.5)") from None
        if not 0.5 <= scale <= 4:
            raise UserError(f"scale={scale:g} (give a size factor between 0.5 and 4)")
        self.trajectory = trajectory
        self.activity = bool(activity)
        self.fps = None if fps is None else self._check_fps(fps)
        self.window = int(window)
        self.panel_width = int(panel_width)
        self.scale = scale
        self.crop = bool(crop)
        if timeline not in (None, "page", "scroll"):
            raise UserError(f"timeline={timeline!r} (use 'page' or 'scroll')")
        self.timeline = timeline
        if layout not in (None, *LAYOUTS):
            raise UserError(f"layout={layout!r} (use {' or '.join(map(repr, LAYOUTS))})")
        self.layout = layout
        self.max_traces = int(max_traces)
        self.max_layers = int(max_layers)
        self.mp4_crf = int(mp4_crf)
        self.mp4_preset = mp4_preset
        self._source = _FrameSource(trajectory, env, strict=strict_replay)
        self._composer: _Composer | None = None
        self._composer_key: tuple[Any, ...] | None = None

    # ------------------------------------------------------------------ frames
    @property
    def n_frames(self) -> int:
        """Frames in the video: T + 1 (the reset frame, then one per step)."""
        return len(self.trajectory) + 1

    @staticmethod
    def _check_fps(fps: float) -> float:
        return positive_number("fps", fps, "frames per second", "30")

    def _modes(self, kind: str | None) -> tuple[str, str]:
        """The timeline and layout of an output ``kind`` ("mp4", "gif", None: frames)."""
        mp4 = kind == "mp4"
        timeline = self.timeline or ("scroll" if mp4 else "page")
        return timeline, self.layout or ("16:9" if mp4 else "compact")

    def _get_composer(self, frame_hw: tuple[int, int] | None, kind: str | None = None) -> _Composer:
        timeline, layout = self._modes(kind)
        key = (frame_hw, timeline, layout)
        if self._composer is None or self._composer_key != key:
            self._composer_key = key
            canvas = None
            if self.activity or frame_hw is None:
                stored = self.trajectory.frames
                crop = content_box(stored) if self.crop and stored is not None else None
                canvas = VideoCanvas(
                    self.trajectory,
                    frame_hw=frame_hw,
                    crop=crop,
                    activity=self.activity,
                    scale=self.scale,
                    window=self.window,
                    panel_width=self.panel_width,
                    max_traces=self.max_traces,
                    max_layers=self.max_layers,
                    timeline=timeline,
                    layout=layout,
                )
            self._composer = _Composer(frame_hw, canvas)
        return self._composer

    @staticmethod
    def _hw(frame: np.ndarray | None) -> tuple[int, int] | None:
        return None if frame is None else (int(frame.shape[0]), int(frame.shape[1]))

    def frames(self) -> Iterator[np.ndarray]:
        """Yield the T + 1 video frames, (H, W, 3) uint8 with even H and W.

        The same buffer is reused between frames: copy a frame if you keep it.
        """
        composer = None
        for k, frame in enumerate(self._source):
            if composer is None:
                composer = self._get_composer(self._hw(frame))
            yield composer.compose(k, frame)

    def frame(self, k: int) -> np.ndarray:
        """A copy of video frame ``k`` (0..T); negative k counts from the end."""
        n = self.n_frames
        if not -n <= k < n:
            raise UserError(f"frame {k} out of range (the video has {n} frames: 0..{n - 1})")
        k %= n
        stored = self.trajectory.frames
        if stored is not None:  # random access
            return self._get_composer(self._hw(stored[0])).compose(k, stored[k]).copy()
        if self._source.task_only:
            return self._get_composer(None).compose(k, None).copy()
        for i, img in enumerate(self.frames()):  # re-simulated: replay up to frame k
            if i == k:
                return img.copy()
        raise AssertionError("unreachable")  # pragma: no cover

    def save_frame(self, path: str | os.PathLike[str], k: int = 0) -> Path:
        """Write video frame ``k`` as a PNG (atomically); returns the path."""
        import imageio.v3 as iio

        p = Path(path)
        if p.suffix.lower() != ".png":
            raise UserError(f"still {os.fspath(path)!r} must end in .png (name it FILE.png)")
        img = self.frame(k)
        for above in (p.parent, *p.parent.parents):
            if above.exists():
                if not above.is_dir():
                    raise UserError(f"cannot write {p}: {above} is a file (choose another path)")
                break
        try:
            with atomic_open(p, "wb") as fh:
                iio.imwrite(fh, img, plugin="pillow", extension=".png", optimize=True)
        except OSError as exc:
            raise UserError(f"cannot write {p}: {exc} (choose a writable path)") from exc
        return p

    # ------------------------------------------------------------------ outputs
    def to_file(self, path: str | os.PathLike[str], fps: float | None = None) -> Path:
        """Write the video, choosing GIF or MP4 by the extension (``.gif`` / ``.mp4``).

        Args:
            path: output file; relative to the cwd; parent directories are created.
            fps: frames per second (default: the constructor's ``fps``, else 30).

        Returns:
            The path written.

        Raises:
            UserError: unknown extension, unwritable directory, bad fps, replay divergence.
        """
        return self._write(path, None, fps)

    def to_gif(self, path: str | os.PathLike[str], fps: float | None = None) -> Path:
        """Write a looping GIF; ``.gif`` is appended when ``path`` has no extension."""
        return self._write(path, "gif", fps)

    def to_mp4(self, path: str | os.PathLike[str], fps: float | None = None) -> Path:
        """Write an H.264/yuv420p MP4; ``.mp4`` is appended when ``path`` has no extension."""
        return self._write(path, "mp4", fps)

    def _write(self, path: str | os.PathLike[str], kind: str | None, fps: float | None) -> Path:
        fps_value = self._check_fps(fps) if fps is not None else (self.fps or DEFAULT_FPS)
        out, kind = resolve_output(path, kind, create=False)
        if kind == "gif" and fps_value > MAX_GIF_FPS:
            raise UserError(
                f"fps={fps_value:g} is too fast for a GIF (browsers play delays under 20 ms "
                f"slowly; use fps <= {MAX_GIF_FPS:g}, or write an .mp4)"
            )
        out, kind = resolve_output(path, kind)
        it = iter(self._source)
        first = next(it)
        composer = self._get_composer(self._hw(first), kind)
        if kind == "mp4":
            writer: Any = Mp4Writer(
                out, size=composer.size, fps=fps_value, crf=self.mp4_crf, preset=self.mp4_preset
            )
        else:
            writer = GifWriter(
                out, size=composer.size, fps=fps_value, palette=self._palette(composer, first)
            )
        writer = ThreadedWriter(writer)
        try:
            n = 0
            writer.write(composer.compose(0, first))
            n = 1
            for frame in it:
                writer.write(composer.compose(n, frame))
                n += 1
            if n != self.n_frames:  # pragma: no cover - guarded by Trajectory validation
                raise RuntimeError(f"wrote {n} frames, expected {self.n_frames}")
        except BaseException:
            writer.abort()
            raise
        writer.close()
        return out

    def _palette(self, composer: _Composer, first: np.ndarray, n_samples: int = 8) -> np.ndarray:
        """Global GIF palette from a few composed sample frames plus the panel colours."""
        t = len(self.trajectory)
        stored = self.trajectory.frames
        samples = []
        for k in np.unique(np.linspace(0, t, n_samples).round().astype(int)):
            frame = stored[k] if stored is not None else first
            samples.append(composer.compose(int(k), frame).copy())
        required = composer.colors
        return build_palette(samples, required=required)

    def render(self) -> tuple[Any, Any, Any]:
        """A matplotlib animation of the video (for notebooks / interactive use).

        Returns:
            ``(figure, axes, animation)``: a :class:`matplotlib.animation.FuncAnimation`
            with ``interval = 1000 / fps`` milliseconds and T + 1 frames. Frames are
            produced on demand (re-simulated ones are replayed sequentially).
        """
        import matplotlib.pyplot as plt
        from matplotlib.animation import FuncAnimation

        fps = self.fps or DEFAULT_FPS
        state: dict[str, Any] = {"k": -1, "it": None, "img": None}

        def get(k: int) -> np.ndarray:
            if self.trajectory.frames is not None or self._source.task_only:
                return self.frame(k)
            if state["it"] is None or k < state["k"]:
                state["it"], state["k"] = self.frames(), -1
            while state["k"] < k:
                state["img"] = next(state["it"])
                state["k"] += 1
            return state["img"]

        first = get(0).copy()
        h, w = first.shape[:2]
        fig = plt.figure(figsize=(w / 100, h / 100), dpi=100)
        ax = fig.add_axes((0, 0, 1, 1))
        ax.set_axis_off()
        image = ax.imshow(first, interpolation="nearest")

        def update(k: int) -> tuple[Any]:
            image.set_data(get(k))
            return (image,)

        anim = FuncAnimation(fig, update, frames=self.n_frames, interval=1000.0 / fps, blit=True)
        return fig, ax, anim
