"""Benchmark of ``snrl compare`` backends: process-pool speed-up and Ray overhead.

The same comparison (``--runs`` short PPO runs: a LIF backbone, one seed each) is run

1. on the local backend with ``--workers 1``,
2. on the local backend with ``--workers 2``,
3. on the Ray backend with 2 workers, on a local Ray instance started by ``compare``
   (start-up included), and
4. on the Ray backend on an already running local Ray instance (start-up excluded),

each into a fresh directory, in one process, one after the other. Before and after, a probe
measures how many cores 1 and 2 busy-looping processes actually get (other jobs on a shared
machine cap any speed-up at that ratio). Reported: wall time of each
``compare`` call, speed-up of 2 workers over 1, Ray overhead relative to the local backend with
the same number of workers, the load average before and after (other users of the machine
disturb the measurement), and the per-run results (identical across backends).

Usage::

    python benchmarks/bench_compare.py                 # 8 runs x 4096 env steps
    python benchmarks/bench_compare.py --runs 8 --steps 4096 --no-ray
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _burn(seconds: float, q) -> None:
    t, c = time.time(), time.process_time()
    while time.time() - t < seconds:
        pass
    q.put(time.process_time() - c)


def cpu_capacity(seconds: float = 3.0) -> tuple[float, float]:
    """Cores' worth of CPU time that 1 and 2 busy-looping processes obtain right now: on a
    quiet 2-core machine about (1.0, 2.0); other jobs on the machine lower both."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    out = []
    for n in (1, 2):
        q = ctx.Queue()
        procs = [ctx.Process(target=_burn, args=(seconds, q)) for _ in range(n)]
        for proc in procs:
            proc.start()
        cpu = sum(q.get() for _ in procs)
        for proc in procs:
            proc.join()
        out.append(cpu / seconds)
    return out[0], out[1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=8, help="runs (seeds) per comparison")
    p.add_argument("--steps", type=int, default=4096, help="env steps per run")
    p.add_argument("--backbone", default="lif")
    p.add_argument("--hidden", type=int, default=32)
    p.add_argument("--no-ray", action="store_true", help="skip the Ray backend")
    p.add_argument("--out", default=None, help="keep the comparisons here (default: a tmp dir)")
    args = p.parse_args(argv)

    import torch

    from snrl.experiments import CompareSpec, compare

    torch.set_num_threads(1)
    overrides = dict(
        hidden_size=args.hidden,
        n_envs=8,
        n_steps=32,
        eval_interval=0,
        eval_episodes=5,
        checkpoint_interval=4,
    )
    kw = dict(
        env="CartPole-v1",
        backbones=(args.backbone,),
        seeds=args.runs,
        steps=args.steps,
        overrides=overrides,
        eval_episodes=5,
    )
    base = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_compare_"))
    cases: list[tuple[str, dict]] = [
        ("local, --workers 1", dict(workers=1)),
        ("local, --workers 2", dict(workers=2)),
    ]
    have_ray = False
    if not args.no_ray:
        try:
            import ray

            have_ray = True
            cases.append(("ray, 2 workers (local instance, start-up included)", dict(workers=2)))
            cases.append(("ray, 2 workers (running instance)", dict(workers=2)))
        except ImportError:
            print("ray not installed: skipping the Ray backend (pip install 'snrl[ray]')")
    print(
        f"bench_compare: {args.runs} runs x {args.steps} env steps, PPO {args.backbone} "
        f"hidden {args.hidden}, CartPole-v1; {os.cpu_count()} CPUs, {platform.processor()}"
    )
    print(f"load average before: {_load()}")
    one_p, two_p = cpu_capacity()
    print(f"CPU capacity now: 1 busy process gets {one_p:.2f} cores, 2 get {two_p:.2f} cores")
    walls: dict[str, float] = {}
    results: dict[str, list] = {}
    for i, (label, extra) in enumerate(cases):
        backend = "ray" if label.startswith("ray") else "local"
        if backend == "ray" and "running" in label:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        t0 = time.perf_counter()
        spec = CompareSpec(out=base / f"case{i}", backend=backend, **kw, **extra)
        res = compare(spec, verbose=False)
        walls[label] = time.perf_counter() - t0
        if backend == "ray" and "running" in label:
            ray.shutdown()
        results[label] = [r.get("eval_returns") for r in res.runs]
        train = sum(float(r.get("wall_time_s") or 0) for r in res.runs)
        cpu = sum(float(r.get("cpu_seconds") or 0) for r in res.runs)
        n_done = sum(r.get("status") == "done" for r in res.runs)
        print(
            f"  {label:55s} wall {walls[label]:7.1f} s   ({n_done}/{len(res.runs)} done, "
            f"per-run training wall {train:.0f} s, CPU {cpu:.0f} s in all)   load {_load()}"
        )
    one, two = walls["local, --workers 1"], walls["local, --workers 2"]
    print(f"speed-up of --workers 2 over --workers 1: {one / two:.2f}x")
    if have_ray:
        for label in cases[2:]:
            w = walls[label[0]]
            print(f"Ray overhead vs local --workers 2 [{label[0]}]: {100 * (w / two - 1):+.1f}%")
    same = all(v == results["local, --workers 1"] for v in results.values())
    print(f"per-run evaluation returns identical across all cases: {same}")
    one_p, two_p = cpu_capacity()
    print(f"CPU capacity after: 1 busy process gets {one_p:.2f} cores, 2 get {two_p:.2f} cores")
    print(f"load average after: {_load()}")
    print(f"comparisons in {base}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
