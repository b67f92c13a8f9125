"""Two trainings of the task-scale default by two evaluation protocols (docs/neuro.md, "The task
profile's default on DelayMatchSample"): which of n_envs and the held-out trials explains a gap
between ``bench_time_profile.py`` and ``bench_neuro.py`` on one seed.

Trainings (``snrl.PPO(task, backbone="lif", seed=S, eval_interval=0, tuned=False, ...)``):

* ``16 envs``: nothing else given, the weights ``snrl train --env TASK --seed S`` trains
  (``bench_time_profile.py``'s ``lif:task``, ``bench_neuro.py``'s ``untuned``);
* ``8 envs``: ``n_envs=8, tau_m=1.0, readout_tau_m=1.0``, ``bench_neuro.py``'s ``lif``.

Each final model is scored deterministically by ``snrl eval --episodes 50 --seed 10000``'s
protocol (``algo.evaluate``: 50 envs, one episode each) and by ``bench_neuro.py``'s (one
8-env vector env seeded 10000, the first 1,000 trials). Prints one JSON line per training
and writes ``OUT/bench_default_split.json``.

Usage::

    python benchmarks/bench_default_split.py --task DelayMatchSample-v0 --seed 11 \\
        --steps 100000 --out runs/split
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_neuro  # noqa: E402  (benchmarks/ is not a package)

TRAININGS: dict[str, dict[str, Any]] = {
    "16 envs": {},
    "8 envs": {"n_envs": 8, "tau_m": 1.0, "readout_tau_m": 1.0},
}


def run_one(task: str, name: str, seed: int, steps: int) -> dict[str, Any]:
    """Train one of :data:`TRAININGS` and score its final model by both protocols."""
    import torch

    import snrl

    torch.set_num_threads(1)
    algo = snrl.PPO(
        task, backbone="lif", seed=seed, eval_interval=0, tuned=False, **TRAININGS[name]
    )
    t0 = time.perf_counter()
    algo.learn(steps, progress=False)
    train_s = time.perf_counter() - t0
    snrl_eval = algo.evaluate(n_episodes=50, seed=bench_neuro.EVAL_SEED)
    algo.agent.eval()
    bench = bench_neuro._evaluate(task, bench_neuro.snrl_policy(algo.agent), 1000, 8)
    algo.close()
    return {
        "task": task,
        "training": name,
        "seed": seed,
        "steps": steps,
        "config": {k: getattr(algo.config, k) for k in bench_neuro.CONFIG_KEYS},
        "train_s": train_s,
        "snrl_eval": {"accuracy": snrl_eval["accuracy"], "n_trials": snrl_eval["n_trials"]},
        "bench_neuro_eval": {"accuracy": bench["accuracy"], "n_trials": bench["n_trials"]},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="DelayMatchSample-v0")
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    results = []
    for name in TRAININGS:
        results.append(run_one(args.task, name, args.seed, args.steps))
        print(json.dumps(results[-1]), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_default_split.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
