"""Env steps per second of snrl.tasks against NeuroGym + gymnasium's SyncVectorEnv (issue 34).

For every task: ``--envs`` envs (1,024) of NeuroGym's env (``gymnasium.make(id)``, neurogym
2.3.1) in a ``SyncVectorEnv`` (SAME_STEP autoreset), and the same number of envs of
``snrl.tasks.make_vector_env(id)``, both stepped with the same uniformly random actions (drawn
before timing). Env steps per second = envs x steps / seconds of ``step`` calls (after a
warm-up of a few steps). One torch thread, as a training run on this 2-core machine uses.
The batched engine's time includes drawing its trials (the pool refills inside ``step``) and
building the infos snrl's trial tracker reads.

It prints one row per task (NeuroGym steps/s, snrl.tasks steps/s, ratio) and the geometric
mean of the ratios. With ``--device cuda`` the batched engine runs on the GPU (NeuroGym on
the CPU, as always), and ``--as-tensors`` keeps obs/rewards as torch tensors on the device.

Usage::

    python benchmarks/bench_tasks.py                          # all tasks, 1,024 envs
    python benchmarks/bench_tasks.py --tasks GoNogo-v0 --envs 64 --ng-steps 5 --steps 20
"""

from __future__ import annotations

import argparse
import math
import time
import warnings

import gymnasium as gym
import numpy as np
import torch

import snrl.tasks as tasks


def neurogym_rate(env_id: str, n: int, steps: int, seed: int = 0) -> float:
    """Env steps/s of NeuroGym's env in a SyncVectorEnv."""
    import neurogym  # noqa: F401  (registers the ids)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        envs = gym.vector.SyncVectorEnv(
            [lambda: gym.make(env_id) for _ in range(n)],
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )
        envs.reset(seed=seed)
        acts = np.random.default_rng(seed).integers(0, envs.single_action_space.n, (steps + 2, n))
        envs.step(acts[0])
        envs.step(acts[1])
        t0 = time.perf_counter()
        for k in range(steps):
            envs.step(acts[k + 2])
        seconds = time.perf_counter() - t0
    envs.close()
    return n * steps / seconds


def snrl_rate(
    env_id: str, n: int, steps: int, device: str = "cpu", as_tensors: bool = False, seed: int = 0
) -> float:
    """Env steps/s of the batched engine."""
    envs = tasks.make_vector_env(env_id, n, device=device, seed=seed, as_tensors=as_tensors)
    envs.reset()
    n_act = envs.single_action_space.n
    acts = np.random.default_rng(seed).integers(0, n_act, (steps + 5, n))
    if as_tensors:
        acts = torch.as_tensor(acts, device=device)
    for k in range(5):
        envs.step(acts[k])
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for k in range(steps):
        envs.step(acts[k + 5])
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    envs.close()
    return n * steps / seconds


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--tasks", nargs="+", default=[t for t, task in tasks.TASKS.items() if task.neurogym]
    )
    p.add_argument("--envs", type=int, default=1024)
    p.add_argument("--ng-steps", type=int, default=30, help="NeuroGym steps timed")
    p.add_argument("--steps", type=int, default=600, help="snrl.tasks steps timed")
    p.add_argument("--device", default="cpu")
    p.add_argument("--as-tensors", action="store_true")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    print(
        f"{'task':30s} {'NeuroGym+Sync':>14s} {'snrl.tasks':>12s} {'ratio':>7s}  ({args.envs} envs)"
    )
    for env_id in args.tasks:
        ng = neurogym_rate(env_id, args.envs, args.ng_steps)
        ours = snrl_rate(env_id, args.envs, args.steps, args.device, args.as_tensors)
        rows.append({"task": env_id, "neurogym": ng, "snrl": ours, "ratio": ours / ng})
        print(f"{env_id:30s} {ng:14,.0f} {ours:12,.0f} {ours / ng:6.1f}x", flush=True)
    geo = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    print(f"geometric mean ratio: {geo:.1f}x (device {args.device}, {args.threads} thread(s))")
    return rows


if __name__ == "__main__":
    main()
