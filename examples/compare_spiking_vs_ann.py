"""Compare spiking and ANN PPO agents on CartPole-v1: LIF with and without Dale's law vs an MLP.

Every (backbone, Dale setting, seed) is an ordinary run directory under ``OUT/runs/``; the
comparison writes ``curves.png``, ``summary.md`` and ``report.md`` into ``OUT``. Run it again
with the same arguments to resume after an interruption: finished runs are skipped.

Usage::

    python examples/compare_spiking_vs_ann.py --out cmp-cartpole           # 5 seeds x 100k
    python examples/compare_spiking_vs_ann.py --out /tmp/cmp --quick        # seconds, a smoke test

The same from the command line::

    snrl compare --env CartPole-v1 --algo ppo --backbones lif,mlp \\
        --grid force_dale_law=true,false --seeds 5 --steps 100000 --out cmp-cartpole
"""

from __future__ import annotations

import argparse

import torch

from snrl.experiments import CompareSpec, compare

# --quick: 2 seeds of 2 PPO updates each with tiny networks (plumbing, not learning)
QUICK = dict(
    seeds=2,
    steps=256,
    eval_episodes=2,
    overrides=dict(
        hidden_size=8, n_envs=4, n_steps=32, n_epochs=1, eval_interval=0, eval_episodes=1
    ),
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="cmp-cartpole", help="comparison directory")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, default=100_000, help="env steps per run")
    p.add_argument("--workers", type=int, default=None, help="parallel runs (default: cores)")
    p.add_argument("--backend", choices=("local", "ray"), default="local")
    p.add_argument("--address", default=None, help="Ray cluster address (default: local Ray)")
    p.add_argument("--quick", action="store_true", help="a few seconds of plumbing")
    args = p.parse_args(argv)

    torch.set_num_threads(1)
    kw = dict(seeds=args.seeds, steps=args.steps, eval_episodes=20)
    if args.quick:
        kw.update(QUICK)
    spec = CompareSpec(
        env="CartPole-v1",
        out=args.out,
        algo="ppo",
        backbones=("lif", "mlp"),
        grid={"force_dale_law": (True, False)},  # spiking-only: the MLP is trained once
        workers=args.workers,
        backend=args.backend,
        address=args.address,
        **kw,
    )
    res = compare(spec)
    print()
    for row in res.summary:
        rates = ", ".join(f"{k} {v:.2f}" for k, v in row["spike_rates"].items()) or "-"
        energy = (
            f"{row['sops_per_step']:.0f} SOP + {row['macs_per_step']:.0f} MAC"
            if row["spike_rates"]
            else f"{row['macs_per_step']:.0f} MAC"
        )
        print(
            f"{row['group']:28s} eval {row['eval_mean']:6.1f} "
            f"[{row['eval_ci_low']:.1f}, {row['eval_ci_high']:.1f}]  spike rate {rates}  "
            f"{energy} per env step"
        )
    for t in res.pairwise:
        print(
            f"{t['group_a']} vs {t['group_b']}: Mann-Whitney U = {t['u']:g}, p = {t['p_value']:.3g}"
        )
    print(f"\nreport: {res.out / 'report.md'}")
    return 0 if all(r.get("status") == "done" for r in res.runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
