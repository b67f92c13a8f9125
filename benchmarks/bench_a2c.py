"""A2C's online e-prop (issue 35): peak memory against the episode's length.

One A2C run over exactly one episode per env of a toy task whose episodes last ``L`` env steps
(``L`` = 100 and 1000; 4 envs; a Dale 80/20 LIF layer of 128 neurons in the policy and in the
critic), two ways of giving the network credit over the whole episode:

* ``eprop``: online e-prop, windows of ``n_steps = 8`` (one update per window), the
  eligibility traces carried from window to window through the episode;
* ``bptt``: BPTT with one window over the whole episode (``n_steps = L``), the only way BPTT
  reaches back to the episode's start.

Each measurement is a fresh subprocess (``torch.set_num_threads(1)``, glibc's
``MALLOC_MMAP_THRESHOLD_`` low so that freed buffers go back to the system); the number is the
peak resident set during ``learn`` minus the resident set just before it (``ru_maxrss`` and
``/proc/self/statm``). Learning is not measured here (see ``bench_eprop.py learning --algo
a2c``).

Usage::

    python benchmarks/bench_a2c.py memory
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym
import numpy as np
from bench_eprop import _peak, _rss_now, child

N_ENVS, HIDDEN, WINDOW = 4, 128, 8
LENGTHS = (100, 1000)


class LongEnv(gym.Env):
    """Episodes of exactly ``length`` steps; 8 noisy inputs; reward 1 when the action is the
    sign of the first input."""

    observation_space = gym.spaces.Box(-3.0, 3.0, (8,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int):
        self.length = length
        self.t = 0
        self.x = np.zeros(8, dtype=np.float32)

    def _obs(self) -> np.ndarray:
        self.x = self.np_random.normal(size=8).astype(np.float32).clip(-3, 3)
        return self.x

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        reward = float(int(action) == int(self.x[0] > 0))
        self.t += 1
        return self._obs(), reward, self.t >= self.length, False, {}


def _memory_one(method: str, length: int) -> dict:
    """One run over one episode per env; the peak resident memory above the level before."""
    import torch

    import snrl

    torch.set_num_threads(1)
    n_steps = WINDOW if method == "eprop" else length
    algo = snrl.A2C(
        lambda: LongEnv(length),
        learning_rule="eprop" if method == "eprop" else "bptt",
        hidden_size=HIDDEN,
        n_envs=N_ENVS,
        n_steps=n_steps,
        eval_interval=0,
        seed=0,
    )
    before = _rss_now()
    algo.learn(N_ENVS * length, progress=False)
    return {
        "method": method,
        "L": length,
        "mib": (_peak() - before) / 2**20,
        "updates": algo.n_updates,
    }


def memory(args: argparse.Namespace) -> None:
    rows = {}
    for length in LENGTHS:  # interleaved: each length, both methods
        for method in ("bptt", "eprop"):
            row = child("bench_a2c", f"_memory_one({method!r}, {length})")
            if row is None:
                continue
            rows[(method, length)] = row
            print(json.dumps(row), flush=True)
    a, b = LENGTHS
    print(f"\n| method | L = {a} (MiB) | L = {b} (MiB) | ratio |")
    print("|---|---|---|---|")
    names = {
        "bptt": "BPTT, one window over the episode",
        "eprop": f"online e-prop, windows of {WINDOW}",
    }
    for method, name in names.items():
        if (method, a) in rows and (method, b) in rows:
            m1, m2 = rows[(method, a)]["mib"], rows[(method, b)]["mib"]
            print(f"| {name} | {m1:.1f} | {m2:.1f} | {m2 / max(m1, 1e-9):.2f}x |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("memory")
    args = p.parse_args()
    {"memory": memory}[args.cmd](args)


if __name__ == "__main__":
    main()
