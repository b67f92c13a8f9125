"""PPO's one global gradient clip: how much of the norm is the critic's (issue 14).

PPO clips the gradient of the policy and the critic together (``max_grad_norm``, one global
norm, as SB3 does). This script trains a PPO agent as ``snrl train`` would (tuned entry
applied) and records, before each clip, the gradient norms of the policy and the critic and
the factor the clip multiplies both by. It prints the medians over the first 100 updates and
over the second half of the run, with raw and with scaled rewards (``normalize_reward``).

Usage::

    python benchmarks/bench_clip.py --env LunarLander-v3 --steps 100000
    python benchmarks/bench_clip.py --env CartPole-v1 --steps 20000 --modes raw

Results: docs/benchmarks.md#what-each-entry-rests-on (the LunarLander-v3 entry's normalize_reward).
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from torch import nn

import snrl
import snrl.agents.ppo as ppo_module


def _norm(module: nn.Module) -> float:
    grads = [p.grad.detach().flatten() for p in module.parameters() if p.grad is not None]
    return float(torch.cat(grads).norm()) if grads else 0.0


def measure(env: str, steps: int, seed: int, scaled: bool) -> list[str]:
    """Train with a spy on the clip; the lines of the table for this run."""
    records: list[tuple[float, float, float]] = []
    clip = nn.utils.clip_grad_norm_
    algo = snrl.PPO(env, seed=seed, normalize_reward=scaled, eval_interval=0)

    def spy(params, max_norm, *args, **kwargs):
        pol, cri = _norm(algo.agent.policy), _norm(algo.agent.critic)
        records.append((pol, cri, min(1.0, max_norm / (float(np.hypot(pol, cri)) + 1e-6))))
        return clip(params, max_norm, *args, **kwargs)

    ppo_module.nn.utils.clip_grad_norm_ = spy
    try:
        algo.learn(steps, progress=False)
    finally:
        ppo_module.nn.utils.clip_grad_norm_ = clip
        algo.close()
    r = np.array(records)
    name = "scaled rewards" if scaled else "raw rewards"
    lines = []
    for label, seg in (("first 100 updates", r[:100]), ("second half", r[len(r) // 2 :])):
        med = np.median(seg, axis=0)
        lines.append(f"| {name}, {label} | {med[0]:.3g} | {med[1]:.3g} | {med[2]:.3g} |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="LunarLander-v3")
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=120)
    p.add_argument("--modes", nargs="+", choices=["raw", "scaled"], default=["raw", "scaled"])
    args = p.parse_args()
    torch.set_num_threads(1)
    print(f"{args.env}, {args.steps:,} env steps, seed {args.seed}; medians over updates")
    print()
    print("| rewards, updates | policy gradient norm | critic gradient norm | clip factor |")
    print("|---|---|---|---|")
    for mode in args.modes:
        print("\n".join(measure(args.env, args.steps, args.seed, mode == "scaled")), flush=True)


if __name__ == "__main__":
    main()
