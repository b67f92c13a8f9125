"""GPU benchmark (issue 33): snrl on a CUDA device against the same machine's CPU and
against snntorch's RLeaky on the same device, in one run of under 8 minutes.

Rows (each a ratio against a baseline measured in the same run):

1. layers: forward + backward of snrl's ``LIFLayer`` (subtract reset, all-to-all, no
   autapses mask, fast-sigmoid surrogate of slope 25) over (T, B, N) = (100, 256, 512),
   (100, 1024, 1024), (500, 64, 2048), 64 input features, against snntorch ``RLeaky`` fed
   by an ``nn.Linear`` (snntorch's tutorial loop) on the same device. Target: <= 0.2x.
   Peak device memory of each (``torch.cuda.max_memory_allocated``).
2. PPO: env steps/s of a Dale-LIF PPO agent on CartPole-v1 (``n_steps=16``, the other
   settings snrl's defaults) at (envs, neurons) = (16, 128), (128, 1024), (256, 1024),
   (1024, 1024) on the device, against the same run on the CPU with every core as torch
   threads. Target at (256, 1024): >= 50x. Each row: one warm-up ``learn`` of one update,
   then one timed update (its evaluation is one episode of at most 10 steps).
3. DQN: env steps/s of the default Dale-LIF DQN (sequence replay) at 16 envs, 128 neurons,
   device against CPU.

Usage::

    python benchmarks/bench_gpu.py [--device cuda] [--quick] [--skip-cpu-above N] [--out F.json]

``--quick`` runs tiny shapes (the tests run it on the CPU to keep the script working);
``--skip-cpu-above N`` leaves out the CPU baseline of PPO rows with more than N envs
(over the time budget on a small CPU). The machine needs torch, numpy, gymnasium and
snntorch (on a machine without the last two, install them from wheels first).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Callable

import torch
from torch import nn

import snrl
from snrl.functional import Surrogate
from snrl.layers import LIFLayer

SLOPE = 25.0
F_IN = 64
TAU_M, DT, THRESHOLD = 20e-3, 1e-3, 1.0
LAYER_SHAPES = [(100, 256, 512), (100, 1024, 1024), (500, 64, 2048)]
PPO_ROWS = [(16, 128), (128, 1024), (256, 1024), (1024, 1024)]
QUICK_LAYER_SHAPES = [(10, 8, 32)]
QUICK_PPO_ROWS = [(4, 16)]


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_time(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    fn()  # warm-up (kernels, allocator)
    times = []
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]


def _peak_bytes(fn: Callable[[], object], device: torch.device) -> int | None:
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device))


def layer_row(t: int, b: int, n: int, device: torch.device, repeats: int) -> dict:
    """Forward + backward time and peak memory of LIFLayer and of RLeaky at one shape."""
    import snntorch as snn
    from snntorch import surrogate

    alpha = math.exp(-DT / TAU_M)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(t, b, F_IN, generator=g).to(device)
    layer = LIFLayer(
        F_IN,
        n,
        dt=DT,
        tau_m=TAU_M,
        threshold=THRESHOLD,
        spike_grad=Surrogate("fast_sigmoid", SLOPE),
    ).to(device)
    fc = nn.Linear(F_IN, n).to(device)
    lif = snn.RLeaky(
        beta=alpha,
        all_to_all=True,
        linear_features=n,
        threshold=THRESHOLD,
        reset_mechanism="subtract",
        spike_grad=surrogate.fast_sigmoid(slope=SLOPE),
    ).to(device)

    def ours() -> None:
        out, _ = layer(x, layer.initial_state(b, device=device))
        out.sum().backward()

    def rleaky() -> None:
        spk = torch.zeros(b, n, device=device)
        mem = torch.zeros(b, n, device=device)
        total = 0
        for x_t in x:
            spk, mem = lif(fc(x_t), spk, mem)
            total = total + spk.sum()
        total.backward()

    t_ours, t_ref = _median_time(ours, device, repeats), _median_time(rleaky, device, repeats)
    return {
        "shape": [t, b, n],
        "snrl_s": t_ours,
        "rleaky_s": t_ref,
        "ratio": t_ours / t_ref,
        "snrl_peak_bytes": _peak_bytes(ours, device),
        "rleaky_peak_bytes": _peak_bytes(rleaky, device),
    }


def steps_per_second(algo_cls, device: str, threads: int, **kw) -> float:
    """Env steps/s of one timed PPO update after a warm-up update (the same agent; its
    closing evaluation is one episode)."""
    algo = algo_cls(
        "CartPole-v1",
        device=device,
        threads=threads,
        seed=0,
        eval_interval=0,
        eval_episodes=1,
        **kw,
    )
    batch = kw["n_envs"] * kw["n_steps"]
    algo.learn(batch, progress=False)  # warm-up: one update
    t0 = time.perf_counter()
    algo.learn(2 * batch, progress=False)  # one timed update
    dt = time.perf_counter() - t0
    algo.close()
    return batch / dt


def ppo_rows(device: str, rows, skip_cpu_above: int, cpu_threads: int) -> list[dict]:
    out = []
    for n_envs, hidden in rows:
        kw = dict(n_envs=n_envs, hidden_size=hidden, n_steps=16)
        dev = steps_per_second(snrl.PPO, device, 0, **kw)
        cpu = None
        if n_envs <= skip_cpu_above:
            cpu = steps_per_second(snrl.PPO, "cpu", cpu_threads, **kw)
        out.append(
            {
                "n_envs": n_envs,
                "hidden_size": hidden,
                "device_steps_per_s": dev,
                "cpu_steps_per_s": cpu,
                "speedup": None if cpu is None else dev / cpu,
            }
        )
    return out


def dqn_row(device: str, cpu_threads: int, n_envs: int, hidden: int, quick: bool) -> dict:
    """Env steps/s of the default DQN (sequence replay for a LIF Q-network) once learning
    has started: a warm-up past ``learning_starts``, then a timed stretch."""
    starts, timed = (320, 256) if quick else (1_000, 64 * n_envs)

    def run(dev: str, threads: int) -> float:
        algo = snrl.DQN(
            "CartPole-v1", device=dev, threads=threads, seed=0, eval_interval=0,
            eval_episodes=1, n_envs=n_envs, hidden_size=hidden, learning_starts=starts,
            batch_size=8 if quick else 32,
        )  # fmt: skip
        algo.learn(2 * starts, progress=False)
        t0 = time.perf_counter()
        algo.learn(2 * starts + timed, progress=False)
        dt = time.perf_counter() - t0
        algo.close()
        return timed / dt

    dev, cpu = run(device, 0), run("cpu", cpu_threads)
    return {"n_envs": n_envs, "hidden_size": hidden, "replay": "sequence",
            "device_steps_per_s": dev, "cpu_steps_per_s": cpu, "speedup": dev / cpu}  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--quick", action="store_true", help="tiny shapes (a smoke run)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--skip-cpu-above", type=int, default=256)
    p.add_argument("--out", default=None, help="also write the result as JSON here")
    a = p.parse_args(argv)
    device = torch.device(a.device)
    cpu_threads = os.cpu_count() or 1
    shapes = QUICK_LAYER_SHAPES if a.quick else LAYER_SHAPES
    rows = QUICK_PPO_ROWS if a.quick else PPO_ROWS
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    result: dict = {"device": name, "torch": torch.__version__, "cpu_threads": cpu_threads}
    print(f"device {name}, torch {torch.__version__}, CPU baseline on {cpu_threads} threads")
    result["layers"] = [layer_row(t, b, n, device, a.repeats) for t, b, n in shapes]
    for r in result["layers"]:
        print(f"layer T,B,N={r['shape']}: {r['ratio']:.3f}x RLeaky (target <= 0.2x); "
              f"peak {r['snrl_peak_bytes']} vs {r['rleaky_peak_bytes']} bytes")  # fmt: skip
    result["ppo"] = ppo_rows(a.device, rows, a.skip_cpu_above, cpu_threads)
    for r in result["ppo"]:
        sp = "not measured" if r["speedup"] is None else f"{r['speedup']:.1f}x CPU"
        print(f"PPO {r['n_envs']} envs x {r['hidden_size']} neurons: "
              f"{r['device_steps_per_s']:.0f} env steps/s, {sp}")  # fmt: skip
    n_envs, hidden = (4, 16) if a.quick else (16, 128)
    result["dqn"] = dqn_row(a.device, cpu_threads, n_envs, hidden, a.quick)
    d = result["dqn"]
    print(f"DQN (sequence replay) {n_envs} envs x {hidden}: {d['device_steps_per_s']:.0f} "
          f"env steps/s, {d['speedup']:.2f}x CPU")  # fmt: skip
    if a.out:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
