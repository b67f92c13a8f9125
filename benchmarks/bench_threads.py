"""Torch threads and training speed: steps/s of a short LIF PPO ``learn()`` on CartPole-v1
with 1 and 2 (or more) torch threads, for small and wide networks, and the Python API
against ``snrl train`` with their defaults (the thread policy: ``threads`` unset).

Every case is a fresh process. Steps/s is ``env_step / wall_time`` of the last metrics row
(training time, the final evaluation included; imports and construction excluded), the
same measure for the API and the CLI.

    python benchmarks/bench_threads.py                       # 2048 steps, hidden 128 and 512
    python benchmarks/bench_threads.py --steps 4096 --threads 1,2,4 --hidden 128,512,1024

What it printed is in docs/benchmarks.md ("Torch threads"); the policy it decided is
``snrl.agents.runtime.ONE_THREAD_MAX_HIDDEN``.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

API = """
import json, sys, torch, snrl
hidden, steps, threads = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
kw = {} if threads == "policy" else {"threads": int(threads)}
algo = snrl.PPO("CartPole-v1", hidden_size=hidden, seed=0, eval_interval=0, eval_episodes=2, **kw)
before = torch.get_num_threads()
h = algo.learn(steps, progress=False)
print(json.dumps({"steps": h["env_step"][-1], "wall": h["wall_time"][-1],
                  "threads_before": before, "threads_after": torch.get_num_threads()}))
"""


def run_api(hidden: int, steps: int, threads: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", API, str(hidden), str(steps), threads],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["threads_before"] == r["threads_after"], r  # learn() gives the count back
    return r["steps"] / r["wall"]


def run_cli(hidden: int, steps: int, threads: str) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "snrl.cli",
            "train",
            "--hidden",
            str(hidden),
            "--steps",
            str(steps),
            "--quiet",
            "--out",
            f"{tmp}/run",
            "--set",
            "eval_interval=0",
            "--set",
            "eval_episodes=2",
        ]
        if threads != "policy":
            cmd += ["--threads", threads]
        subprocess.run(
            cmd,
            capture_output=True,
            check=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        with open(f"{tmp}/run/metrics.csv", newline="") as f:
            last = list(csv.DictReader(f))[-1]
        return float(last["env_step"]) / float(last["wall_time"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=2048)
    p.add_argument("--hidden", default="128,512")
    p.add_argument("--threads", default="1,2", help="thread counts of the sweep ('' skips it)")
    p.add_argument("--no-api-cli", action="store_true", help="skip API vs CLI")
    args = p.parse_args()
    hiddens = [int(h) for h in args.hidden.split(",")]
    counts = [t for t in args.threads.split(",") if t]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"os.cpu_count()={os.cpu_count()}, load average {load}; {args.steps} env steps per case")
    print(f"{'case':<34}{'hidden':>7}{'steps/s':>10}")
    rows = []
    for h in hiddens:
        for t in counts:
            sps = run_api(h, args.steps, t)
            rows.append((f"API, threads={t}", h, sps))
            print(f"{rows[-1][0]:<34}{h:>7}{sps:>10.0f}", flush=True)
    if args.no_api_cli:
        return
    h = hiddens[0]
    for name, fn in (("API, threads unset (policy)", run_api), ("CLI, --threads unset", run_cli)):
        sps = fn(h, args.steps, "policy")
        print(f"{name:<34}{h:>7}{sps:>10.0f}", flush=True)


if __name__ == "__main__":
    main()
