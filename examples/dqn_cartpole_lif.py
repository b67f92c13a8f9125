"""Research script: DQN on CartPole-v1 with a Dale-constrained spiking Q-network.

The Q-values are the membrane of the LI readout of a recurrent LIF layer (half of its neurons
inhibitory, Dale's law hard). Training replays R2D2-style windows: each starts from the
recurrent state the actor had, refreshes it over a burn-in, and trains on the rest. After
training the script evaluates the best checkpoint, checks Dale's law on the trained weights,
prints the Q-values along one greedy episode and (not in quick mode) writes its video.

    python examples/dqn_cartpole_lif.py --out runs/dqn_example          # 100k steps
    python examples/dqn_cartpole_lif.py --quick --out /tmp/dqn_quick     # a smoke run
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

import snrl


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/dqn_cartpole_lif")
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="1.5k steps, no video: checks it runs")
    args = p.parse_args()
    steps = 1_500 if args.quick else args.steps

    out = Path(args.out)
    config = snrl.DQNConfig(
        env="CartPole-v1",
        backbone="lif",
        hidden_size=32 if args.quick else 128,
        force_dale_law=True,  # 80/20 E/I (the default), balanced at init
        replay="sequence",  # R2D2-style windows with stored states
        seq_len=20,
        burn_in=10,
        n_step=3,
        double=True,
        dueling="none",
        learning_starts=500 if args.quick else 1_000,
        eval_interval=min(5_000, steps),
        eval_episodes=5 if args.quick else 10,
        seed=args.seed,
    )
    algo = snrl.DQN(config=config, run_dir=out)
    algo.learn(steps, progress=not args.quick)
    algo.close()

    best = snrl.DQN.load(out / "checkpoints" / "best.pt")
    result = best.evaluate(n_episodes=20, seed=123)
    print(f"best checkpoint: {result['mean_return']:.1f} ± {result['std_return']:.1f}")

    layer = best.agent.q_net.spiking_layers[0]
    w = layer.recurrent_weights
    ok = bool(((w == 0) | (torch.sign(w) == layer.recurrent_sign[:, None])).all())
    print(f"Dale's law holds on every recurrent synapse after training: {ok}")

    traj = best.rollout(seed=0, record=not args.quick)
    q = traj.policy["q_values"]  # (T, A): the readout membrane at every step
    spikes = traj.activity["lif0"].spikes
    print(
        f"greedy episode: {len(q)} steps, Q(s, a) from {q.min():.1f} to {q.max():.1f}, "
        f"mean spike rate {np.mean(spikes):.3f}"
    )
    if not args.quick:
        path = snrl.TrajectoryRenderer(traj).to_file(out / "episode.mp4", fps=30)
        print(f"video: {path}")


if __name__ == "__main__":
    main()
