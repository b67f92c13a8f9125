"""Benchmark snrl.render against imageio.mimsave on a CartPole episode.

Measures, in one run (2 shared CPU cores on the reference machine):

1. frames only, GIF and MP4: ``TrajectoryRenderer(traj, activity=False)`` vs
   ``imageio.mimsave`` of the same 501 frames (600x400) at 30 fps;
2. with the activity panel (128 LIF neurons, fake spikes/membranes, policy probs): the
   time of the whole 500-step video relative to the frames-only time;
3. peak memory while rendering a 5,000-step episode (frames re-simulated from the env, so
   the trajectory holds no frames), in a child process: a thread samples the RSS of the
   child and of its ffmpeg encoder from /proc every 20 ms; the peak of the sum is reported
   with the RSS before rendering (imports, torch included);
4. issue 14's GIF target: the default GIF (activity panel, fps 30) of the 500-step episode
   with stored frames, its size (target <= 2 MB) and the peak RSS of a child process that
   records the episode and writes it (the 501 stored 600x400 frames alone are 360 MB).

Usage::

    python benchmarks/bench_render.py            # full run (~3 min)
    python benchmarks/bench_render.py --quick    # 100 steps, 1,000-step memory run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import imageio
import numpy as np

from snrl.networks import Activity, LayerActivity
from snrl.render import TrajectoryRenderer
from snrl.trajectory import Trajectory


def balance(obs: np.ndarray) -> int:
    """A fixed PD-like controller that keeps CartPole up (and near the centre) for long."""
    x, x_dot, theta, theta_dot = obs
    return int(theta + 0.5 * theta_dot + 0.02 * x + 0.1 * x_dot > 0)


def cartpole_episode(steps: int, *, seed: int = 0, frames: bool = True, hidden: int = 128):
    """A ``steps``-step CartPole trajectory with fake activity for ``hidden`` LIF neurons."""
    rng = np.random.default_rng(seed)
    env = gym.make("CartPole-v1", render_mode="rgb_array", max_episode_steps=steps)
    obs, _ = env.reset(seed=seed)
    imgs = [env.render()] if frames else None
    observations, actions, rewards, terms, truncs = [], [], [], [], []
    for _ in range(steps):
        a = balance(obs)
        observations.append(obs)
        actions.append(a)
        obs, r, term, trunc, _ = env.step(a)
        rewards.append(r)
        terms.append(term)
        truncs.append(trunc)
        if frames:
            imgs.append(env.render())
        if term or trunc:
            break
    env.close()
    t = len(actions)
    if t != steps:
        raise RuntimeError(f"episode ended after {t} of {steps} steps")
    sign = [1] * (hidden - hidden // 5) + [-1] * (hidden // 5)
    v = np.cumsum(rng.normal(0.05, 0.3, (t, hidden)), axis=0) % 1.3
    p = 1 / (1 + np.exp(-rng.normal(0, 2, t)))
    return Trajectory(
        observations=np.array(observations),
        actions=np.array(actions),
        rewards=np.array(rewards),
        terminated=np.array(terms),
        truncated=np.array(truncs),
        env="CartPole-v1",
        seed=seed,
        frames=np.array(imgs) if frames else None,
        activity=Activity(
            [
                LayerActivity(
                    "lif0",
                    "spiking",
                    hidden,
                    spikes=(rng.random((t, hidden)) < 0.08).astype(np.float32),
                    v=v.astype(np.float32),
                    threshold=1.0,
                    sign=np.array(sign),
                ),
                LayerActivity(
                    "readout", "readout", 2, v=rng.normal(0, 1, (t, 2)).astype(np.float32)
                ),
            ]
        ),
        policy={"probs": np.stack([1 - p, p], axis=1)},
        meta={"algo": "ppo", "backbone": "lif (fake activity)"},
    )


def timed(fn, repeats: int = 1) -> tuple[float, float]:
    """Best wall time and best CPU time of ``repeats`` calls, in seconds.

    CPU time = user + system time of this process (all threads) and of its waited-for child
    processes (the ffmpeg encoders), from ``os.times()``. The machine is shared, so wall
    times are inflated by other jobs; CPU times much less so. The minimum over repeats is the
    least disturbed measurement.
    """
    best_wall = best_cpu = float("inf")
    for _ in range(repeats):
        c0 = os.times()
        t0 = time.perf_counter()
        fn()
        wall = time.perf_counter() - t0
        c1 = os.times()
        cpu = sum(c1[:4]) - sum(c0[:4])
        best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
    return best_wall, best_cpu


def ffmpeg_floor(frames: np.ndarray, fps: int) -> None:
    """Pipe the frames to ffmpeg and convert them to yuv420p without encoding anything: the
    cost every ffmpeg-based MP4 writer pays (a lower bound on any of them)."""
    import imageio_ffmpeg

    h, w = frames.shape[1:3]
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-loglevel", "error", "-f", "rawvideo"]
    cmd += ["-pix_fmt", "rgb24", "-s", f"{w}x{h}", "-r", str(fps), "-i", "-"]
    cmd += ["-pix_fmt", "yuv420p", "-f", "null", "-"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE)
    for f in frames:
        proc.stdin.write(f.tobytes())
    proc.stdin.close()
    proc.wait()


def _rss_kb(pid: int | str, field: str = "VmRSS") -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))
    except (OSError, StopIteration):
        return 0


def _children(pid: int) -> list[int]:
    """The ffmpeg child processes of ``pid``.

    Only processes that already run ffmpeg count: between fork and exec a child still shows
    the parent's (shared, copy-on-write) pages as its RSS, which would count them twice.
    """
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    out = []
    for kid in kids:
        try:
            if Path(f"/proc/{kid}/comm").read_text().startswith("ffmpeg"):
                out.append(kid)
        except OSError:
            pass
    return out


def child(steps: int, out: str, stored: bool = False) -> None:
    """Render a long episode with re-simulated frames; print peak memory as JSON.

    A thread samples, every 20 ms, the RSS of this process plus that of its ffmpeg child
    process from /proc; the peak of the sum is reported, together with this process's RSS
    before rendering (interpreter + imports, torch included) and VmHWM.
    """
    import os
    import threading

    pid = os.getpid()
    traj = cartpole_episode(steps, frames=stored)
    env = None if stored else gym.make("CartPole-v1", render_mode="rgb_array",
                                       max_episode_steps=steps)  # fmt: skip
    before_kb = _rss_kb(pid)
    peak = {"total": 0, "ffmpeg": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            kids = sum(_rss_kb(k) for k in _children(pid))
            peak["ffmpeg"] = max(peak["ffmpeg"], kids)
            peak["total"] = max(peak["total"], _rss_kb(pid) + kids)
            stop.wait(0.02)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    t0 = time.perf_counter()
    TrajectoryRenderer(traj, env).to_file(out, fps=30)
    dt = time.perf_counter() - t0
    stop.set()
    thread.join()
    if env is not None:
        env.close()
    print(
        json.dumps(
            {
                "before_mb": before_kb / 1024,
                "python_hwm_mb": _rss_kb(pid, "VmHWM") / 1024,
                "ffmpeg_mb": peak["ffmpeg"] / 1024,
                "total_mb": peak["total"] / 1024,
                "seconds": dt,
                "bytes": os.path.getsize(out),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short run for smoke tests")
    parser.add_argument("--repeats", type=int, default=3, help="best of N timings (default 3)")
    parser.add_argument("--child", nargs="+", metavar="STEPS OUT [stored]", help=argparse.SUPPRESS)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    if args.child:
        child(int(args.child[0]), args.child[1], stored="stored" in args.child[2:])
        return
    reps = 1 if args.quick else max(1, args.repeats)
    steps = 100 if args.quick else 500
    long_steps = 1000 if args.quick else 5000
    fps = 30
    traj = cartpole_episode(steps)
    frames = traj.frames
    n = frames.shape[0]
    res: dict[str, tuple[float, float, int]] = {}  # name -> (wall s, cpu s, bytes)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        # Warm up ffmpeg / matplotlib / the glyph cache so first-call costs are not counted.
        TrajectoryRenderer(cartpole_episode(5), activity=True).to_mp4(d / "warm.mp4")
        plain = TrajectoryRenderer(traj, activity=False)
        full = TrajectoryRenderer(traj, activity=True)
        jobs = {
            "gif mimsave": lambda: imageio.mimsave(
                d / "gif mimsave.gif", frames, duration=1000 / fps, loop=0
            ),
            "gif frames only": lambda: plain.to_gif(d / "gif frames only.gif", fps=fps),
            "gif + activity": lambda: full.to_gif(d / "gif + activity.gif", fps=fps),
            "mp4 mimsave": lambda: imageio.mimsave(d / "mp4 mimsave.mp4", frames, fps=fps),
            "mp4 frames only": lambda: plain.to_mp4(d / "mp4 frames only.mp4", fps=fps),
            "mp4 + activity": lambda: full.to_mp4(d / "mp4 + activity.mp4", fps=fps),
            "mp4 ffmpeg floor": lambda: ffmpeg_floor(frames, fps),
        }
        for name, fn in jobs.items():
            wall, cpu = timed(fn, reps)
            out = d / f"{name}.{name[:3]}"
            res[name] = (wall, cpu, out.stat().st_size if out.exists() else 0)
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(long_steps), str(d / "long.mp4")],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        mem = json.loads(proc.stdout.strip().splitlines()[-1])
        proc = subprocess.run(
            [sys.executable, __file__, "--child", str(steps), str(d / "default.gif"), "stored"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        gif = json.loads(proc.stdout.strip().splitlines()[-1])

    print(
        f"CartPole-v1, {steps} steps ({n} frames, 600x400), fps={fps}, activity = 128 LIF, "
        f"best of {reps}, load average before: {os.getloadavg()[0]:.1f}"
    )
    print("| video | wall s | frames/s (wall) | CPU s | frames/s (CPU) | file KB |")
    print("|---|---|---|---|---|---|")
    for name, (wall, cpu, size) in res.items():
        kb = f"{size / 1024:.0f}" if size else "-"
        print(f"| {name} | {wall:.2f} | {n / wall:.0f} | {cpu:.2f} | {n / cpu:.0f} | {kb} |")

    def ratio(a: str, b: str) -> str:
        return f"{res[a][0] / res[b][0]:.2f}x wall, {res[a][1] / res[b][1]:.2f}x CPU"

    print("\n| check | target | measured |")
    print("|---|---|---|")
    checks = [
        ("GIF frames only vs mimsave (speed-up)", ">= 4x", "gif mimsave", "gif frames only"),
        ("MP4 frames only vs mimsave (speed-up)", ">= 3x", "mp4 mimsave", "mp4 frames only"),
        ("MP4 ffmpeg floor vs mimsave (best possible)", "-", "mp4 mimsave", "mp4 ffmpeg floor"),
        ("GIF + activity time / frames-only time", "<= 3x", "gif + activity", "gif frames only"),
        ("MP4 + activity time / frames-only time", "<= 3x", "mp4 + activity", "mp4 frames only"),
    ]
    for label, target, a, b in checks:
        print(f"| {label} | {target} | {ratio(a, b)} |")
    print(
        f"| peak memory, {long_steps}-step MP4 + activity | < 500 MB | {mem['total_mb']:.0f} MB |"
    )
    print(f"| default GIF + activity, {steps} steps | <= 2 MB | {gif['bytes'] / 1e6:.2f} MB |")
    print(
        f"| peak memory, that GIF (stored frames) | - | {gif['total_mb']:.0f} MB "
        f"(before rendering {gif['before_mb']:.0f} MB) |"
    )
    print(
        f"\nPeak memory, {long_steps}-step MP4 with activity (frames re-simulated, "
        f"{mem['seconds']:.1f} s): peak RSS python + ffmpeg = {mem['total_mb']:.0f} MB "
        f"(python before rendering {mem['before_mb']:.0f} MB incl. torch import, python peak "
        f"{mem['python_hwm_mb']:.0f} MB, ffmpeg peak {mem['ffmpeg_mb']:.0f} MB)"
    )


if __name__ == "__main__":
    main()
