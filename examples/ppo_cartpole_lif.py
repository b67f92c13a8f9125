"""Research script: PPO on CartPole-v1 with a hand-built Dale-constrained spiking policy.

The policy is a two-layer SpikingBackbone built here (80 + 40 LIF neurons, half of them
inhibitory, 10 ms membranes, an LI readout) and passed to PPO; the critic is built by name.
After training, the script evaluates the best checkpoint, checks Dale's law on the trained
weights and writes a video of one episode with the network's spikes.

    python examples/ppo_cartpole_lif.py --out runs/example            # ~100k steps
    python examples/ppo_cartpole_lif.py --quick --out /tmp/quick       # a smoke run
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import snrl
from snrl.networks.spiking import SpikingBackbone


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/ppo_cartpole_lif")
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="2k steps, no video: checks it runs")
    args = p.parse_args()
    steps = 2048 if args.quick else args.steps

    policy = SpikingBackbone(
        4,  # CartPole observation features
        [80, 40],
        2,  # logits for the two actions: the readout membrane
        backbone="lif",
        force_dale_law=True,  # 80/20 E/I (the default recurrent_sign=0.2), balanced at init
        tau_m=10e-3,
        readout_tau_m=10e-3,
        seed=args.seed,
    )
    out = Path(args.out)
    algo = snrl.PPO(
        "CartPole-v1",
        policy=policy,
        backbone="lif",  # the critic, built by name
        seed=args.seed,
        eval_interval=min(5_000, steps),
        run_dir=out,
    )
    algo.learn(steps, progress=not args.quick)
    algo.close()

    best = snrl.PPO.load(out / "checkpoints" / "best.pt", policy=policy_like(args.seed))
    result = best.evaluate(n_episodes=20, seed=123)
    print(f"best checkpoint: {result['mean_return']:.1f} ± {result['std_return']:.1f}")

    for name, layer in best.agent.policy.layers.items():
        if layer.recurrent_sign is None:
            continue
        w = layer.recurrent_weights
        signs = layer.recurrent_sign[:, None].expand_as(w)
        ok = bool(((w == 0) | (torch.sign(w) == signs)).all())
        print(f"{name}: Dale's law holds on every recurrent synapse after training: {ok}")

    if not args.quick:
        traj = best.rollout(seed=0, record=True)
        path = snrl.TrajectoryRenderer(traj).to_file(out / "episode.mp4", fps=30)
        print(f"video: {path}")


def policy_like(seed: int) -> SpikingBackbone:
    """A module of the same architecture for loading (weights come from the checkpoint)."""
    return SpikingBackbone(
        4,
        [80, 40],
        2,
        backbone="lif",
        force_dale_law=True,  # 80/20 E/I (the default recurrent_sign=0.2), balanced at init
        tau_m=10e-3,
        readout_tau_m=10e-3,
        seed=seed,
    )


if __name__ == "__main__":
    main()
