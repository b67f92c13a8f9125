"""Shared trunk against separate policy and critic networks (issue 37): learning.

snrl PPO on PerceptualDecisionMaking-v0 (NeuroGym, 100 ms task steps), Dale 80/20 LIF of
``--hidden`` neurons (default 128), the task's tuned settings, ``--steps`` env steps, seeds
``--seeds``, for each variant of ``--variants``:

* ``separate``: two networks (policy and critic), each with its own E/I assignment and state
  (snrl's default);
* ``shared``: one network (``shared_trunk=True``: one E/I assignment, one state, two
  leaky-integrator readouts), BPTT;
* ``shared-eprop``: the shared trunk trained by e-prop (symmetric feedback: the two readouts'
  learning signals add).

Each run is a fresh process (spawned, ``torch.set_num_threads(1)``; at most ``--jobs`` at
once). Reported
per run and as a table: the final deterministic evaluation (20 episodes, env seed 1000 +
seed): trial accuracy; the parameters of the agent; wall time; and the ratio of each variant's
mean accuracy to ``separate``'s, measured in the same invocation. The neuron time of the runs
(``dt``, ``tau_m``, ``readout_tau_m``, in seconds) is printed with the table.

Usage::

    python benchmarks/bench_shared_trunk.py [--steps 30000] [--seeds 1,2,3] [--jobs 2]
        [--variants separate,shared,shared-eprop] [--hidden 128]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

TASK = "PerceptualDecisionMaking-v0"
VARIANTS = {
    "separate": {"shared_trunk": False},
    "shared": {"shared_trunk": True},
    "shared-eprop": {"shared_trunk": True, "learning_rule": "eprop"},
}


def _learn_one(variant: str, seed: int, steps: int, hidden: int) -> dict:
    import torch

    import snrl

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    algo = snrl.PPO(
        TASK,
        backbone="lif",
        hidden_size=hidden,
        force_dale_law=True,
        seed=seed,
        **VARIANTS[variant],
    )
    algo.learn(steps, progress=False)
    wall = time.perf_counter() - t0
    res = algo.evaluate(n_episodes=20, seed=1000 + seed)
    cfg = algo.config
    out = {
        "variant": variant,
        "seed": seed,
        "accuracy": float(res["accuracy"]),
        "n_trials": res.get("n_trials"),
        "parameters": sum(p.numel() for p in algo.agent.parameters()),
        "wall_s": wall,
        "time": {"dt": cfg.dt, "tau_m": cfg.tau_m, "readout_tau_m": cfg.readout_tau_m},
        "substeps": cfg.substeps,
    }
    algo.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30_000)
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--variants", default="separate,shared")
    p.add_argument("--hidden", type=int, default=128)
    args = p.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r} (one of {', '.join(VARIANTS)})")
    jobs = [(v, s) for s in seeds for v in variants]

    os.environ["OMP_NUM_THREADS"] = "1"  # the workers' torch: one thread each
    ctx = multiprocessing.get_context("spawn")  # a fresh process per worker, as a subprocess
    rows = []
    with ProcessPoolExecutor(args.jobs, mp_context=ctx, max_tasks_per_child=1) as pool:
        futures = [pool.submit(_learn_one, v, s, args.steps, args.hidden) for v, s in jobs]
        for fut in futures:
            row = fut.result()
            print(json.dumps(row), flush=True)
            rows.append(row)
    if not rows:
        sys.exit("no run finished")
    means = {}
    print(f"\n{TASK}, Dale 80/20 LIF {args.hidden}, {args.steps} env steps, seeds {args.seeds}")
    print(
        "neuron time (s): "
        + json.dumps(rows[0]["time"])
        + f", substeps {rows[0]['substeps']} (one neuron step per 100 ms task step)"
    )
    print(
        "| variant | final trial accuracy, mean (per seed) | vs separate | parameters | wall (s) |"
    )
    print("|---|---|---|---|---|")
    runs = {
        v: sorted((r for r in rows if r["variant"] == v), key=lambda r: r["seed"]) for v in variants
    }
    for v, got in runs.items():
        if got:
            means[v] = sum(r["accuracy"] for r in got) / len(got)
    for v, got in runs.items():
        if not got:
            continue
        accs = [r["accuracy"] for r in got]
        ratio = means[v] / means["separate"] if means.get("separate") else float("nan")
        per = ", ".join(f"{a:.3f}" for a in accs)
        wall = sum(r["wall_s"] for r in got)
        print(
            f"| {v} | {means[v]:.3f} ({per}) | {ratio:.3f}x | {got[0]['parameters']} | {wall:.0f} |"
        )


if __name__ == "__main__":
    main()
