"""PPO with a Dale LIF backbone on Pendulum-v1 (continuous actions), through the Python API.

Trains with the settings of ``benchmarks/configs/pendulum_lif.toml`` (the same values are in
``SETTINGS`` below; a test keeps the two equal), then evaluates the best checkpoint
(``OUT/checkpoints/best.pt``, chosen by the periodic deterministic evaluations) and the last
model on 20 deterministic episodes (seeds 123..142), and prints one JSON summary line.
``OUT`` also holds ``metrics.csv`` and ``learning_curve.png``.

    python examples/ppo_pendulum.py --out runs/ppo_pendulum            # 300k steps
    python examples/ppo_pendulum.py --quick --out /tmp/ppo_pendulum    # a smoke test

Pendulum's return per episode (200 steps) lies in [-16.3 * 200, 0]; a solved swing-up and
balance scores about -150 to -200, the benchmark target is >= -250.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from snrl.agents.ppo import PPO

SETTINGS = dict(
    env="Pendulum-v1",
    backbone="lif",
    substeps=2,
    hidden_size=128,
    force_dale_law=True,
    tau_m=0.01,
    readout_tau_m=0.005,
    n_envs=16,
    n_steps=128,
    n_minibatches=4,
    chunk_len=16,
    n_epochs=10,
    lr=1e-3,
    gamma=0.9,
    gae_lambda=0.95,
    clip_vloss=False,
    target_kl=0.02,
    log_std_init=-0.5,
    normalize_obs=True,
    eval_interval=10_000,
    total_steps=300_000,
)
"""PPOConfig fields for Pendulum-v1 (equal to benchmarks/configs/pendulum_lif.toml)."""

QUICK = dict(total_steps=4096, eval_interval=2048, eval_episodes=2)
"""Overrides of ``--quick``: two updates, an evaluation after each."""


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="runs/ppo_pendulum", help="run directory")
    p.add_argument("--steps", type=int, default=None, help="env steps (default 300k)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="4096 steps: a smoke test")
    args = p.parse_args(argv)

    overrides = {**SETTINGS, **(QUICK if args.quick else {}), "seed": args.seed}
    if args.steps is not None:
        overrides["total_steps"] = args.steps
    algo = PPO(run_dir=args.out, **overrides)
    history = algo.learn(progress=not args.quick)
    last = algo.evaluate(n_episodes=20, seed=123)
    algo.close()

    best_algo = PPO.load(Path(args.out) / "checkpoints" / "best.pt")
    best = best_algo.evaluate(n_episodes=20, seed=123)
    best_algo.close()

    evals = [
        (s, v)
        for s, v in zip(history["env_step"], history["eval_return_mean"])
        if not math.isnan(v)
    ]
    spike_rates = {k: history[k][-1] for k in history if k.startswith("spike_rate_") and history[k]}
    summary = {
        "env_steps": history["env_step"][-1],
        "best_return": best["mean_return"],
        "last_return": last["mean_return"],
        "periodic_evals": evals,
        "spike_rates": spike_rates,
        "config": {k: getattr(algo.config, k) for k in SETTINGS},
    }
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
