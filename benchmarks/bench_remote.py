"""Remote-env benchmark (issue 15): what the HTTP wire costs, over loopback, for CartPole-v1
with 8 envs.

Two measurements, each repeated ``--repeats`` times with the variants interleaved (so they
share the machine's load alike); medians are reported:

* ``env``: env steps/s of an 8-env vector env stepped with random actions, nothing else:
  in-process (``make_vector_env("CartPole-v1", 8)``), remote with one request per vector
  step for all 8 sessions (``RemoteVectorEnv``, what ``--env http://...`` uses) and remote
  with one request per session (8 requests per vector step);
* ``train``: env steps/s of ``snrl.PPO`` with its defaults (Dale LIF, 128 hidden, 8 envs x
  32 steps) for ``--steps`` env steps (evaluation only at the end), in-process and remote.

The server is ``snrl serve-env CartPole-v1`` in its own process, as a user runs it; the
client side runs with one torch thread. Target: remote training >= 0.5x in-process training
env steps/s (the wire must not dominate training).

Usage::

    python benchmarks/bench_remote.py                 # the table (a few minutes)
    python benchmarks/bench_remote.py --quick         # a smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import snrl  # noqa: E402
from snrl.envs import make_vector_env  # noqa: E402


def start_server(token: str) -> tuple[subprocess.Popen, str]:
    """``snrl serve-env CartPole-v1`` on a free loopback port; returns it and its URL."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SNRL_ENV_TOKEN": token, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "snrl.cli", "serve-env", "CartPole-v1", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    m = re.search(r"at (http://\S+) ", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"serve-env did not start: {line!r}")
    return proc, m.group(1)


def env_steps_per_s(env: str, n_envs: int, vector_steps: int, batched: bool = True) -> float:
    envs = make_vector_env(env, n_envs, seed=0)
    if not batched:
        envs._remotes = None  # one request per session
    rng = np.random.default_rng(0)
    envs.reset()
    t0 = time.perf_counter()
    for _ in range(vector_steps):
        envs.step(rng.integers(0, 2, n_envs))
    dt = time.perf_counter() - t0
    envs.close()
    return n_envs * vector_steps / dt


def train_steps_per_s(env: str, steps: int) -> float:
    algo = snrl.PPO(env, seed=0, eval_interval=0, eval_episodes=2)
    t0 = time.perf_counter()
    algo.learn(total_steps=steps, progress=False)
    dt = time.perf_counter() - t0
    algo.close()
    return algo.env_step / dt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--vector-steps", type=int, default=1000, help="per env measurement")
    p.add_argument("--steps", type=int, default=20480, help="env steps per training run")
    p.add_argument("--quick", action="store_true", help="1 repeat, 100 vector steps, 2048 steps")
    p.add_argument("--out", default=None, help="write the results as JSON here")
    a = p.parse_args(argv)
    if a.quick:
        a.repeats, a.vector_steps, a.steps = 1, 100, 2048
    torch.set_num_threads(1)
    token = secrets.token_urlsafe(32)
    os.environ["SNRL_ENV_TOKEN"] = token
    server, url = start_server(token)
    res: dict[str, list[float]] = {
        k: [] for k in ("env_local", "env_remote_batched", "env_remote_sessions")
    }
    res.update({"train_local": [], "train_remote": []})
    try:
        for r in range(a.repeats):
            res["env_local"].append(env_steps_per_s("CartPole-v1", 8, a.vector_steps))
            res["env_remote_batched"].append(env_steps_per_s(url, 8, a.vector_steps))
            res["env_remote_sessions"].append(env_steps_per_s(url, 8, a.vector_steps, False))
            res["train_local"].append(train_steps_per_s("CartPole-v1", a.steps))
            res["train_remote"].append(train_steps_per_s(url, a.steps))
            print(
                f"repeat {r + 1}/{a.repeats}: "
                + ", ".join(f"{k} {v[-1]:.0f}" for k, v in res.items()),
                flush=True,
            )
    finally:
        server.terminate()
        server.wait(timeout=30)
    med = {k: statistics.median(v) for k, v in res.items()}
    print("\n| measurement | env steps/s (median) | runs |\n|---|---|---|")
    for k, v in res.items():
        print(f"| {k} | {med[k]:.0f} | {', '.join(f'{x:.0f}' for x in v)} |")
    ratio = med["train_remote"] / med["train_local"]
    batch_gain = med["env_remote_batched"] / med["env_remote_sessions"]
    print(f"\nremote / in-process env steps/s: {med['env_remote_batched'] / med['env_local']:.3f}")
    print(f"batched (1 request / vector step) / 8 sessions (8 requests): {batch_gain:.2f}x")
    verdict = "PASS" if ratio >= 0.5 else "MISS"
    print(f"{verdict}: remote / in-process PPO training env steps/s = {ratio:.2f} (target >= 0.5)")
    if a.out:
        Path(a.out).write_text(json.dumps({"runs": res, "median": med, "ratio": ratio}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
