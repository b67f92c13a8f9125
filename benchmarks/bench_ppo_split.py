"""Where a default Dale-LIF PPO run's time goes, and how it compares with another checkout.

Times ``snrl.PPO("CartPole-v1", backbone="lif", seed=S).learn(STEPS)`` with the defaults
(periodic evaluations included) on one torch thread, split into collection (``_collect``),
update (``_update``) and evaluation (``evaluate``). With ``--against DIR`` (a checkout of
another commit, e.g. ``git worktree add /tmp/old HEAD~1``) each round runs both trees, one
after the other in fresh processes and in alternating order, and prints this tree's time
over the other's per part: a baseline measured in the same run. A change that keeps the
arithmetic the same also gives the same final return in both columns.

    python benchmarks/bench_ppo_split.py --rounds 3 --against /tmp/old
    python benchmarks/bench_ppo_split.py --rounds 2 --set n_epochs=20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
PARTS = ("_collect", "_update", "evaluate")

_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import snrl
from snrl.agents import ppo
spent = dict.fromkeys({parts!r}, 0.0)
def timed(name):
    real = getattr(ppo.PPO, name)
    def run(*a, **k):
        t = time.perf_counter()
        try:
            return real(*a, **k)
        finally:
            spent[name] += time.perf_counter() - t
    setattr(ppo.PPO, name, run)
for name in spent:
    timed(name)
from snrl.config import load_config
base = {{"env": "CartPole-v1", "backbone": "lif", "seed": int(sys.argv[3])}}
cfg = load_config(ppo.PPOConfig, sets=json.loads(sys.argv[4]), base=base)
algo = snrl.PPO(config=cfg)
t = time.perf_counter()
algo.learn(int(sys.argv[2]), progress=False)
wall = time.perf_counter() - t
ret = algo.evaluate(20)["mean_return"]
print(json.dumps({{"wall": wall, **spent, "return": ret, "file": snrl.__file__}}))
"""


def _run(tree: Path, steps: int, seed: int, sets: list[str]) -> dict:
    """One run in a fresh process importing snrl from ``tree``; ``sets``: ``--set`` items,
    converted by the config's own types (snrl.config.load_config)."""
    code = _CHILD.format(parts=PARTS)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-c", code, str(tree), str(steps), str(seed), json.dumps(sets)]
    out = subprocess.run(args, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{tree}: the run failed:\n{out.stderr.strip()[-2000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    if not Path(res["file"]).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"{tree}: imported snrl from {res['file']} (not a checkout of snrl?)")
    return res


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--against", type=Path, help="another checkout of snrl: the baseline")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args()
    trees = {"this": HERE}
    if args.against is not None:
        if not (args.against / "snrl" / "__init__.py").is_file():
            p.error(f"--against {args.against}: not an snrl checkout (no snrl/__init__.py)")
        trees["baseline"] = args.against
    rows: dict[str, list[dict]] = {name: [] for name in trees}
    for r in range(args.rounds):
        order = list(trees) if r % 2 == 0 else list(trees)[::-1]
        for name in order:
            res = _run(trees[name], args.steps, args.seed, args.set)
            rows[name].append(res)
            parts = ", ".join(f"{k.strip('_')} {res[k]:.2f} s" for k in PARTS)
            print(f"round {r} {name}: wall {res['wall']:.2f} s ({parts}), return {res['return']}")
    print()
    print("| part | " + " | ".join(f"{n}, s (median)" for n in trees) + " |" + (
        " this / baseline, per round |" if "baseline" in trees else ""
    ))
    print("|---|" + "---|" * len(trees) + ("---|" if "baseline" in trees else ""))
    for key in ("wall", *PARTS):
        cells = [f"{statistics.median(x[key] for x in rows[n]):.2f}" for n in trees]
        line = f"| {key.strip('_')} | " + " | ".join(cells) + " |"
        if "baseline" in trees:
            ratios = [a[key] / b[key] for a, b in zip(rows["this"], rows["baseline"])]
            line += " " + ", ".join(f"{x:.2f}x" for x in ratios) + " |"
        print(line)


if __name__ == "__main__":
    main()
