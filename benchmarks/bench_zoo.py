"""Tuned settings (issue 14): train every snrl/zoo entry as ``snrl train --env ID --seed K``
would (defaults < tuned settings), Dale LIF, 3 seeds, and check the learning targets.

Rows (algorithm, env, target on the best checkpoint, rl-baselines3-zoo's budget for the same
env: ``n_timesteps`` in hyperparams/ppo.yml and dqn.yml):

=====  ========================  ========  ============  =================================
algo   env                       target    rl-zoo steps  our budget
=====  ========================  ========  ============  =================================
ppo    CartPole-v1               500       100k          the defaults (no entry): 100k
ppo    Acrobot-v1                >= -100   1M            each entry's ``total_steps``
ppo    MountainCar-v0            >= -120   1M
ppo    Pendulum-v1               >= -250   100k
ppo    LunarLander-v3            >= 200    1M (v2)
ppo    MountainCarContinuous-v0  >= 90     20k
dqn    CartPole-v1               >= 475    50k
dqn    Acrobot-v1                >= -100   100k
=====  ========================  ========  ============  =================================

A row passes when the best checkpoint of every seed reaches the target (20 deterministic
episodes, seeds 123..142, the protocol of bench_ppo.py / bench_dqn.py, whose run machinery
and workers this script uses). Seeds 0, 1, 2 by default: tuning probes use seeds >= 100.
NeuroGym entries (trial accuracy, no return target) are not rows here: bench_neuro.py
``--only zoo,untuned`` checks each against the defaults on seeds 0-2.

Usage::

    python benchmarks/bench_zoo.py                         # every row, 3 seeds, 2 at a time
    python benchmarks/bench_zoo.py --only ppo-pendulum,dqn-acrobot
    python benchmarks/bench_zoo.py --quick                 # smoke test: 1 seed, 4k steps
    python benchmarks/bench_zoo.py --table                 # tabulate the finished runs
    python benchmarks/bench_zoo.py --table --partial       # ... and PPO runs still going
    python benchmarks/bench_zoo.py --reuse                 # skip runs already done (same config)

Per-run results: ``OUT/<algo>-<env>/lif/seed<k>/result.json``; the table: stdout and
``OUT/table.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_dqn  # noqa: E402
import bench_ppo  # noqa: E402

EVAL_EPISODES, EVAL_SEED = bench_ppo.EVAL_EPISODES, bench_ppo.EVAL_SEED
#: rl-baselines3-zoo, commits 208b6fd (hyperparams/ppo.yml) and ce95481 (hyperparams/dqn.yml)
RL_ZOO_SOURCE = "rl-baselines3-zoo hyperparams/ppo.yml @208b6fd, hyperparams/dqn.yml @ce95481"


@dataclass(frozen=True)
class Row:
    algo: str
    env: str
    threshold: float
    rl_zoo_steps: int | None
    rl_zoo_note: str = ""

    @property
    def task(self) -> str:
        return f"{self.algo}-{self.env.split('-v')[0].lower()}"


ROWS = [
    Row("ppo", "CartPole-v1", 500.0, 100_000),
    Row("ppo", "Acrobot-v1", -100.0, 1_000_000),
    Row("ppo", "MountainCar-v0", -120.0, 1_000_000),
    Row("ppo", "Pendulum-v1", -250.0, 100_000, "gSDE"),
    Row("ppo", "LunarLander-v3", 200.0, 1_000_000, "for LunarLander-v2"),
    Row("ppo", "MountainCarContinuous-v0", 90.0, 20_000, "gSDE, log_std_init -3.29"),
    Row("dqn", "CartPole-v1", 475.0, 50_000),
    Row("dqn", "Acrobot-v1", -100.0, 100_000),
]
QUICK_STEPS = 4096
#: what a reused result.json must agree on with today's resolution (the record may differ)
NOT_COMPARED = ("tuned", "tuned_from", "dt")


def resolved(row: Row, seed: int, steps: int | None, sets: list[str]) -> tuple[dict, Any]:
    """The config dict ``snrl train --algo A --env E --seed K [--steps N] [--set ...]`` makes,
    and the tuned entry (None: the defaults)."""
    from snrl.agents import ALGOS
    from snrl.config import config_to_dict
    from snrl.zoo import resolve

    base: dict[str, Any] = {"env": row.env, "seed": seed}
    if steps is not None:
        base["total_steps"] = steps
    cfg, entry = resolve(ALGOS[row.algo].Config, row.algo, base=base, sets=sets)
    return config_to_dict(cfg), entry


# ---- worker side (one run per process, through bench_ppo's / bench_dqn's workers) ---------
def worker(spec: dict[str, Any]) -> None:
    import torch

    torch.set_num_threads(1)
    run_dir = Path(spec["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)
    overrides = {k: v for k, v in spec["config"].items() if k not in ("env", "seed")}
    common = {k: spec[k] for k in ("task", "variant", "seed", "steps", "threshold", "run_dir")}
    if spec["algo"] == "ppo":
        res = bench_ppo._run_snrl(
            {**common, "env_id": spec["env"], "overrides": overrides, "toml": None, "sets": []}
        )
    else:
        res = bench_dqn.worker(
            {**common, "env_id": spec["env"], "kind": "snrl", "overrides": overrides}
        )
        res.update(
            env_steps=spec["steps"],
            best_return=res["best"]["mean_return"] if res.get("best") else math.nan,
            last_return=res["last"]["mean_return"],
            steps_to_threshold=res.get("first_step_at_threshold"),
            eval_curve=res.pop("evals", []),
        )
    res.update({k: spec[k] for k in ("task", "variant", "seed", "steps", "algo", "env")})
    out = run_dir / "result.json"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(res, indent=1, default=str))
    os.replace(tmp, out)


# ---- driver side ---------------------------------------------------------------------------
def jobs(args: argparse.Namespace) -> list[dict[str, Any]]:
    only = set(args.only.split(",")) if args.only else None
    specs = []
    for seed in args.seeds:
        for row in ROWS:
            if only and row.task not in only:
                continue
            steps = QUICK_STEPS if args.quick else args.steps
            sets = [*args.set, *(["eval_interval=2048"] if args.quick else [])]
            config, _ = resolved(row, seed, steps, sets)
            specs.append(
                {
                    "task": row.task,
                    "variant": "lif",
                    "algo": row.algo,
                    "env": row.env,
                    "seed": seed,
                    "steps": config["total_steps"],
                    "threshold": row.threshold,
                    "config": config,
                    "reuse_config": {k: v for k, v in config.items() if k not in NOT_COMPARED},
                    "run_dir": str(Path(args.out) / row.task / "lif" / f"seed{seed}"),
                }
            )
    return specs


def _fmt(xs: list[Any], fmt: str = "{:.1f}") -> str:
    return " / ".join(
        "never" if x is None else ("-" if isinstance(x, float) and math.isnan(x) else fmt.format(x))
        for x in xs
    )


def _k(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k"


def table(results: list[dict[str, Any]], seeds: list[int]) -> str:
    lines = [
        f"Best checkpoint and last model: {EVAL_EPISODES} deterministic episodes, seeds "
        f"{EVAL_SEED}..{EVAL_SEED + EVAL_EPISODES - 1}; verification seeds "
        f"{', '.join(map(str, seeds))}; rl-zoo budgets: {RL_ZOO_SOURCE}.",
        "",
        "| algo | env | tuned entry | target (best, every seed) | env steps (ours) "
        "| rl-zoo steps | best, per seed | last, per seed | first periodic eval >= target "
        "| CPU s (median) | wall s (median) | result |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    for row in ROWS:
        rs = sorted(
            (r for r in results if r.get("task") == row.task and r["seed"] in seeds),
            key=lambda r: r["seed"],
        )
        _, entry = resolved(row, 0, None, [])
        entry_txt = "yes" if entry is not None else "none (defaults)"
        if not rs:
            lines.append(
                f"| {row.algo} | {row.env} | {entry_txt} | >= {row.threshold:g} | - "
                f"| {_k(row.rl_zoo_steps)} | - | - | - | - | - | not run |"
            )
            continue
        best = [r["best_return"] for r in rs]
        n_ok = sum(b >= row.threshold for b in best if not math.isnan(b))
        ok = n_ok == len(seeds) and len(rs) == len(seeds)
        if len(rs) < len(seeds):  # the seeds not run say nothing either way
            verdict = f"INCOMPLETE: {n_ok}/{len(rs)} run seeds reach it ({len(seeds)} asked)"
        else:
            verdict = f"{'PASS' if ok else 'MISS'} {n_ok}/{len(seeds)}"
        verdicts.append(f"{verdict}: {row.algo} {row.env}")
        cpu = [r["cpu_s"] for r in rs if not math.isnan(r.get("cpu_s", math.nan))]
        wall = [r["wall_s"] for r in rs]
        steps = [f"{r['env_steps']}{' (unfinished)' if r.get('partial') else ''}" for r in rs]
        steps = sorted(set(steps)) if len(set(steps)) == 1 else steps
        zoo_note = f" ({row.rl_zoo_note})" if row.rl_zoo_note else ""
        lines.append(
            f"| {row.algo} | {row.env} | {entry_txt} | >= {row.threshold:g} "
            f"| {' / '.join(steps)} | {_k(row.rl_zoo_steps)}{zoo_note} "
            f"| {_fmt(best)} | {_fmt([r['last_return'] for r in rs])} "
            f"| {_fmt([r['steps_to_threshold'] for r in rs], '{}')} "
            f"| {bench_ppo._median(cpu):.0f} | {bench_ppo._median(wall):.0f} | {verdict} |"
        )
    return "\n".join([*lines, "", *verdicts])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="", help="comma-separated tasks, e.g. ppo-pendulum")
    p.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2], help="default 0 1 2")
    p.add_argument("--steps", type=int, default=None, help="env steps (default: the entry's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--quick", action="store_true", help="1 seed, 4k steps: a smoke test")
    p.add_argument("--jobs", type=int, default=2, help="runs at the same time (default 2)")
    p.add_argument("--out", default="runs/bench_zoo", help="directory of the runs")
    p.add_argument("--reuse", action="store_true", help="skip runs with a result (same config)")
    p.add_argument("--table", action="store_true", help="run nothing: tabulate the results")
    p.add_argument(
        "--partial",
        action="store_true",
        help="with --table: PPO runs not finished yet count with their checkpoints so far",
    )
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker is not None:
        worker(json.loads(args.worker))
        return
    if args.quick:
        args.seeds = args.seeds[:1]
    specs = jobs(args)
    t0 = time.perf_counter()
    if not args.table:
        bench_ppo._run_all(specs, args.jobs, args.reuse, script=__file__)
        print(f"\ntotal wall {time.perf_counter() - t0:.0f} s, {os.cpu_count()} CPUs")
    results = []
    for s in specs:  # the finished runs of this resolution (a reused one may predate bench_zoo)
        path = Path(s["run_dir"]) / "result.json"
        if path.exists():
            r = json.loads(path.read_text())
            if r.get("steps") == s["steps"]:
                results.append({**r, **{k: s[k] for k in ("task", "algo", "env", "seed")}})
        elif args.partial and s["algo"] == "ppo":  # best.pt and last.pt so far, evaluated
            r = bench_ppo.partial_result({**s, "kind": "snrl"})
            if r is not None:
                results.append({**r, **{k: s[k] for k in ("task", "algo", "env", "seed")}})
    text = table(results, args.seeds)
    print("\n" + text)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "table.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
