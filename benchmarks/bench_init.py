"""Dale vs no Dale at init: spectral radius, input moments and CartPole firing rates.

For recurrent LIF layers of N = 128 and 512 neurons (several seeds, the same seed with and
without Dale), it prints the spectral radius of the recurrent matrix without Dale, with
Dale (snrl's init: rows and columns balanced, then scaled to the radius without Dale), and
with the older row-only balance (``|W| * balance_scale``, expected input 0 but the second
moment kept), the largest |column sum| (a neuron's recurrent input when all presynaptic
neurons fire alike) and each neuron's input variance relative to the unconstrained matrix.
Then it builds the default PPO CartPole agent (LIF 128, 80/20 Dale) and the same agent
without Dale, untrained, and prints the policy's firing rate on deterministic rollouts
(``evaluate``: spikes per neuron per neuron step), target 0.02-0.3 at init.

Usage::

    python benchmarks/bench_init.py [--seeds 3] [--episodes 8]
"""

from __future__ import annotations

import argparse

import torch

import snrl
from snrl.functional.dale import balance_scale, signed_weights, spectral_radius
from snrl.layers import LIFLayer


def input_variance(w: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean over neurons j of sum_i Var(W_ij), each row centred on its mean."""
    mu = (w * mask).sum(1, keepdim=True) / mask.sum(1, keepdim=True)
    return float((((w - mu) * mask) ** 2).sum(0).mean())


def matrices(n: int, seeds: int) -> None:
    mask = 1 - torch.eye(n)
    print(f"N = {n}")
    print("  seed  radius free  radius Dale  radius row-only  max|col sum| Dale  var Dale/free")
    for s in range(seeds):
        free = LIFLayer(2, n, seed=s).recurrent_weights.detach()
        layer = LIFLayer(2, n, seed=s, force_dale_law=True)
        dale = layer.recurrent_weights.detach()
        sign = layer.recurrent_sign
        row_only = signed_weights(free.abs() * balance_scale(sign)[:, None], sign, mask)
        print(
            f"  {s:4d}  {spectral_radius(free):11.3f}  {spectral_radius(dale):11.3f}  "
            f"{spectral_radius(row_only):15.3f}  {float(dale.sum(0).abs().max()):17.2e}  "
            f"{input_variance(dale, mask) / input_variance(free, mask):13.3f}"
        )


def rates(seeds: int, episodes: int) -> None:
    print("default PPO CartPole agent (LIF 128), untrained: policy spikes / neuron / step")
    for dale in (True, False):
        vals = []
        for s in range(seeds):
            algo = snrl.PPO("CartPole-v1", force_dale_law=dale, n_envs=1, seed=s)
            res = algo.evaluate(n_episodes=episodes, seed=100 + s)
            vals.append(res["spike_rates"]["lif0"])
            algo.close()
        shown = " ".join(f"{v:.3f}" for v in vals)
        print(f"  force_dale_law={dale!s:5}  per seed: {shown}  mean {sum(vals) / len(vals):.3f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--episodes", type=int, default=8)
    args = p.parse_args()
    torch.set_num_threads(1)
    for n in (128, 512):
        matrices(n, args.seeds)
    rates(args.seeds, args.episodes)


if __name__ == "__main__":
    main()
