"""Benchmark of ``snrl.analysis``: what the streaming analysis costs next to recording.

Two measurements, in one process (``torch.set_num_threads(1)``):

1. **Real rollouts.** A PPO agent with a 256-neuron Dale LIF policy (untrained: its
   activity is as dense as a trained one's, and the cost does not depend on the weights) on
   ``Pendulum-v1`` (every episode is 200 steps). ``--real-episodes`` episodes are recorded
   with ``algo.rollout(record=False)`` ("recording alone"), then the same trajectories are
   folded into a :class:`snrl.analysis.NetworkAnalysis` with the input currents ("analysis").
   Reported: both wall times and their ratio (target: the analysis adds <= 50 %).
2. **Scale case.** ``--episodes`` synthetic episodes of 256 neurons x ``--steps`` steps
   (Bernoulli spikes at 20 Hz with dt = 1 ms, random Dale weights, 4 observation
   dimensions), generated one at a time and folded into the same accumulator, so the whole
   (episodes, steps, neurons) tensor (1,000 x 500 x 256 = 128 M entries, 1 GB as float64)
   never exists. Reported: analysis wall time (generation excluded), per episode, peak
   traced memory (``tracemalloc``) and the process's peak RSS.

Usage::

    python benchmarks/bench_analysis.py                          # 1,000 x 256 x 500; 10 real
    python benchmarks/bench_analysis.py --episodes 200 --real-episodes 5
"""

from __future__ import annotations

import argparse
import os

# one BLAS thread, as torch gets one: on a shared 2-core machine extra BLAS threads only
# contend (set before numpy is imported; a benchmark script may, a library never does)
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import platform  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402


def _real(n_episodes: int, hidden: int) -> dict:
    import torch

    import snrl
    from snrl.analysis import NetworkAnalysis, layer_weights

    algo = snrl.PPO("Pendulum-v1", backbone="lif", hidden_size=hidden, seed=0)
    agent = algo.agent
    algo.rollout(seed=999, record=False, max_steps=5)  # warm-up (env creation, imports)
    t0 = time.perf_counter()
    trajs = [algo.rollout(seed=k, record=False) for k in range(n_episodes)]
    record_s = time.perf_counter() - t0
    steps = sum(len(t) for t in trajs)
    t0 = time.perf_counter()
    res = NetworkAnalysis(
        trajs[0].layers, dt=float(algo.config.dt), weights=layer_weights(agent.actor)
    )
    for traj in trajs:
        with torch.no_grad():
            x = agent.preprocess(traj.observations).double().numpy()
        res.add(traj, inputs=x)
    summary = res.summary()
    analysis_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    figs = res.figures()
    for fig in figs.values():  # draw them as writing would, without files
        fig.canvas.draw() if hasattr(fig.canvas, "draw") else None
    figures_s = time.perf_counter() - t0
    algo.close()
    rate = summary["layers"]["lif0"]["populations"]["all"]["rate_mean"]["value"]
    return {
        "episodes": n_episodes,
        "env_steps": steps,
        "record_s": record_s,
        "analysis_s": analysis_s,
        "figures_s": figures_s,
        "ratio": analysis_s / record_s,
        "rate_hz": rate,
    }


def _synthetic(n_episodes: int, n: int, steps: int) -> dict:
    from snrl.analysis import NetworkAnalysis
    from snrl.networks import Activity, LayerActivity
    from snrl.trajectory import Trajectory

    rng = np.random.default_rng(0)
    sign = np.where(np.arange(n) < int(0.8 * n), 1, -1)
    w = np.abs(rng.normal(0, 1 / np.sqrt(n), (n, n))) * sign[:, None]
    np.fill_diagonal(w, 0.0)

    class W:  # the effective weights, as snrl.analysis.layer_weights gives them
        w_in = rng.normal(0, 0.5, (4, n))
        w_rec = w
        bias = np.zeros(n)
        dt = 1e-3

    layers = [
        {"name": "lif0", "kind": "spiking", "size": n, "threshold": 1.0, "sign": sign.tolist()}
    ]
    res = NetworkAnalysis(layers, dt=1e-3, weights={"lif0": W})
    gen_s = 0.0
    tracemalloc.start()
    t_all = time.perf_counter()
    for _ in range(n_episodes):
        g0 = time.perf_counter()
        spikes = (rng.random((steps, n)) < 0.02).astype(np.float32)
        obs = rng.normal(size=(steps, 4))
        traj = Trajectory(
            observations=obs,
            actions=np.zeros(steps, np.int64),
            rewards=np.zeros(steps),
            terminated=np.zeros(steps, bool),
            truncated=np.zeros(steps, bool),
            activity=Activity([LayerActivity("lif0", "spiking", n, spikes=spikes, sign=sign)]),
        )
        gen_s += time.perf_counter() - g0
        res.add(traj, inputs=obs)
    summary = res.summary()
    total = time.perf_counter() - t_all
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    analysis_s = total - gen_s
    return {
        "episodes": n_episodes,
        "neurons": n,
        "steps": steps,
        "analysis_s": analysis_s,
        "generation_s": gen_s,
        "per_episode_ms": 1e3 * analysis_s / n_episodes,
        "peak_traced_mb": peak / 2**20,
        "full_tensor_mb": n_episodes * steps * n * 8 / 2**20,
        "rate_hz": summary["layers"]["lif0"]["populations"]["all"]["rate_mean"]["value"],
        "cv": summary["layers"]["lif0"]["populations"]["all"]["cv_isi_mean"]["value"],
    }


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=1000, help="synthetic episodes")
    p.add_argument("--neurons", type=int, default=256)
    p.add_argument("--steps", type=int, default=500, help="steps per synthetic episode")
    p.add_argument("--real-episodes", type=int, default=10, help="recorded episodes")
    args = p.parse_args()
    import torch

    torch.set_num_threads(1)
    print(
        f"machine: {platform.processor() or platform.machine()}, python "
        f"{platform.python_version()}, torch threads 1"
    )
    real = _real(args.real_episodes, args.neurons)
    print(
        f"real rollouts: {real['episodes']} Pendulum episodes ({real['env_steps']} steps), "
        f"{args.neurons} LIF neurons, {real['rate_hz']:.1f} Hz mean rate\n"
        f"  recording alone      {real['record_s']:8.2f} s  "
        f"({1e3 * real['record_s'] / real['env_steps']:.2f} ms/step)\n"
        f"  analysis (+currents) {real['analysis_s']:8.2f} s  "
        f"({1e3 * real['analysis_s'] / real['env_steps']:.3f} ms/step)\n"
        f"  ratio analysis/recording {100 * real['ratio']:.1f} % (target <= 50 %)\n"
        f"  figures (drawn once) {real['figures_s']:8.2f} s"
    )
    syn = _synthetic(args.episodes, args.neurons, args.steps)
    print(
        f"scale case: {syn['episodes']} episodes x {syn['neurons']} neurons x {syn['steps']} "
        f"steps (synthetic, {syn['rate_hz']:.1f} Hz, CV {syn['cv']:.3f})\n"
        f"  analysis             {syn['analysis_s']:8.2f} s  ({syn['per_episode_ms']:.2f} "
        f"ms/episode; generating the spikes: {syn['generation_s']:.2f} s, excluded)\n"
        f"  peak traced memory   {syn['peak_traced_mb']:8.1f} MB  (the whole tensor as "
        f"float64 would be {syn['full_tensor_mb']:.0f} MB)\n"
        f"  peak RSS of the process {_rss_mb():.0f} MB"
    )
    rec_per_ep = real["record_s"] / real["env_steps"] * args.steps
    print(
        f"  recording {args.episodes} episodes of {args.steps} steps would take about "
        f"{rec_per_ep * args.episodes:.0f} s at the measured rate; the analysis adds "
        f"{100 * syn['analysis_s'] / (rec_per_ep * args.episodes):.1f} %"
    )


if __name__ == "__main__":
    main()
