"""Curriculum benchmark (issue 15): a delayed-response task whose long-delay version PPO does
not learn from scratch in the budget, against a short-to-long curriculum of the same budget.

Task: NeuroGym ``PerceptualDecisionMakingDelayResponse-v0`` (the stimulus says left or
right; after a delay without it, the agent must report it), ``dt`` 100 ms, episodes of 100
env steps, stimulus 500 ms, decision 500 ms, and ``stim_scale`` (see ``TASK``). The long
delay is ``--delay`` ms (default 8 s).

* ``scratch``: PPO (the defaults: Dale LIF, 128 neurons; ``n_steps`` = ``--n-steps``, 128,
  so that one PPO segment holds a whole 8 s trial) on the long delay for ``--steps``.
* ``curriculum``: the same PPO and budget, lessons of growing delay (``--lessons``, ms; the
  last is the long delay); each lesson is promoted when the mean eval return of its last 2
  evaluations (correct trials per 100-step episode) is >= ``--accuracy`` times the trials
  that fit in an episode of that delay, or after an equal share of the budget, whichever
  comes first.

Both are scored on the long delay: trial accuracy (correct / finished trials) and correct
trials per episode of the last model (deterministic, 20 episodes of 100 steps, seeds
123..142), counted from NeuroGym's step infos (``new_trial``, ``performance``).

Usage::

    python benchmarks/bench_curriculum.py --out bench-curriculum      # docs/benchmarks.md
    python benchmarks/bench_curriculum.py --only scratch --seeds 1 --steps 20000   # probe

Each run is a subprocess with one torch thread; results go to
``OUT/<variant>/seed<k>/result.json`` and the table to stdout and ``OUT/table.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's snrl, as in the child runs
ENV = "neurogym:PerceptualDecisionMakingDelayResponse-v0"
TASK: dict[str, Any] = {
    "max_episode_steps": 100,
    "stim_scale": 4.0,
    "timing": {"fixation": 0, "stimulus": 500, "decision": 500},
}
EVAL_EPISODES, EVAL_SEED = 20, 123


def _timing(delay: int) -> dict[str, Any]:
    return {"timing": {"delay": int(delay)}}


def _threshold(delay: int, accuracy: float) -> float:
    """``accuracy`` x the trials of one 100-step episode (dt 100 ms: stimulus 5 steps,
    the delay, one step to answer)."""
    return round(accuracy * 100 / (5 + delay / 100 + 1), 2)


def trial_scores(algo: Any, env_kwargs: dict[str, Any], episodes: int, seed: int) -> dict:
    """Deterministic episodes on ``env_kwargs``: finished trials, correct ones, accuracy."""
    import numpy as np
    import torch

    from snrl.envs import make_env

    agent = algo.agent
    agent.eval()
    trials = correct = 0
    per_episode = []
    with torch.no_grad():
        for i in range(episodes):
            env = make_env(ENV, **env_kwargs)
            obs, _ = env.reset(seed=seed + i)
            state = agent.initial_state(1)
            ep_correct = 0
            while True:
                res = agent.step(agent.preprocess(np.asarray(obs)[None]), state, deterministic=True)
                obs, _, term, trunc, info = env.step(agent.env_action(res.action)[0])
                state = res.state
                if info.get("new_trial"):
                    trials += 1
                    ok = int(info.get("performance", 0))
                    correct += ok
                    ep_correct += ok
                if term or trunc:
                    break
            env.close()
            per_episode.append(ep_correct)
    agent.train()
    return {
        "trials": trials,
        "correct": correct,
        "trial_accuracy": correct / trials if trials else float("nan"),
        "correct_per_episode": float(np.mean(per_episode)),
    }


def run_one(variant: str, seed: int, args: argparse.Namespace, out: Path) -> dict:
    import torch

    import snrl
    from snrl.agents.curriculum import merge_env_kwargs

    torch.set_num_threads(1)
    long_kwargs = merge_env_kwargs(TASK, _timing(args.delay))
    common = dict(
        seed=seed, eval_interval=args.eval_interval, eval_episodes=8, n_steps=args.n_steps
    )
    for item in args.set:
        k, _, v = item.partition("=")
        common[k] = json.loads(v)
    if variant == "scratch":
        algo = snrl.PPO(ENV, env_kwargs=long_kwargs, run_dir=out, overwrite=True, **common)
    else:
        delays = [int(d) for d in args.lessons.split(",")]
        share = args.lesson_steps or args.steps // len(delays)
        lessons = [
            {
                "name": f"delay {d} ms",
                "env_kwargs": _timing(d),
                "metric": "eval_return_mean",
                "threshold": _threshold(d, args.accuracy),
                "window": 2,
                "max_steps": share,
            }
            for d in delays[:-1]
        ] + [{"name": f"delay {delays[-1]} ms", "env_kwargs": _timing(delays[-1])}]
        algo = snrl.PPO(
            ENV,
            env_kwargs=TASK,
            curriculum=snrl.Curriculum(lessons),
            run_dir=out,
            overwrite=True,
            **common,
        )
    t0, c0 = time.perf_counter(), time.process_time()
    hist = algo.learn(args.steps, progress=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    score = trial_scores(algo, long_kwargs, EVAL_EPISODES, EVAL_SEED)
    res = {
        "variant": variant,
        "seed": seed,
        "steps": args.steps,
        "wall_s": wall,
        "cpu_s": cpu,
        "promotions": [] if algo.progress is None else algo.progress.promotions,
        "final_lesson": algo.lesson,
        "last_eval_return": hist["eval_return_mean"][-1],
        **score,
    }
    algo.close()
    return res


def rescore(res: dict, out: Path, args: argparse.Namespace) -> dict:
    """``res`` with the scores of its run's last model on ``args.episodes`` episodes."""
    import torch

    import snrl
    from snrl.agents.curriculum import merge_env_kwargs

    torch.set_num_threads(1)
    run = out / res["variant"] / f"seed{res['seed']}" / "run"
    algo = snrl.load(run / "checkpoints" / "last.pt", env=ENV)
    long_kwargs = merge_env_kwargs(TASK, _timing(args.delay))
    return {**res, **trial_scores(algo, long_kwargs, args.episodes, EVAL_SEED)}


def table(results: list[dict], args: argparse.Namespace) -> str:
    lines = [
        f"delay {args.delay} ms, {args.steps} env steps, n_steps {args.n_steps}, lessons "
        f"{args.lessons} ms "
        f"(promoted at {args.accuracy:.0%} of the trials per episode, or after "
        f"{args.lesson_steps or args.steps // len(args.lessons.split(','))} steps); "
        "scored on the long delay, "
        f"last model, {args.episodes} episodes",
        "",
        "| variant | seed | trial accuracy | correct trials / episode | trials | promotions "
        "(env step) | CPU s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: (r["variant"], r["seed"])):
        lines.append(
            f"| {r['variant']} | {r['seed']} | {r['trial_accuracy']:.3f} | "
            f"{r['correct_per_episode']:.2f} | {r['trials']} | "
            f"{', '.join(map(str, r['promotions'])) or '-'} | {r['cpu_s']:.0f} |"
        )
    for v in sorted({r["variant"] for r in results}):
        acc = [r["trial_accuracy"] for r in results if r["variant"] == v]
        cpe = [r["correct_per_episode"] for r in results if r["variant"] == v]
        lines.append(
            f"| **{v}** (mean of {len(acc)}) | | {statistics.mean(acc):.3f} | "
            f"{statistics.mean(cpe):.2f} | | | |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="bench-curriculum")
    p.add_argument("--steps", type=int, default=60_000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--table", action="store_true", help="only rebuild the table from OUT")
    p.add_argument(
        "--episodes",
        type=int,
        default=EVAL_EPISODES,
        help="with --table: score the last models again on this many episodes",
    )
    p.add_argument("--delay", type=int, default=8000, help="the long delay, ms")
    p.add_argument("--lessons", default="0,2000,4000,6000,8000", help="lesson delays, ms")
    p.add_argument("--n-steps", type=int, default=128, help="PPO n_steps (the BPTT window)")
    p.add_argument("--accuracy", type=float, default=0.7, help="promotion level, see above")
    p.add_argument("--eval-interval", type=int, default=2500)
    p.add_argument(
        "--lesson-steps",
        type=int,
        default=20_000,
        help="max_steps of a lesson (0: an equal share of --steps)",
    )
    p.add_argument("--only", choices=("scratch", "curriculum"), default=None)
    p.add_argument("--set", action="append", default=[], help="PPO option key=JSON")
    p.add_argument("--child", nargs=2, metavar=("VARIANT", "SEED"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.child:
        variant, seed = args.child[0], int(args.child[1])
        run = out / variant / f"seed{seed}"
        res = run_one(variant, seed, args, run / "run")
        (run / "result.json").write_text(json.dumps(res, indent=1))
        return 0
    results = []
    variants = [args.only] if args.only else ["scratch", "curriculum"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    if args.table:
        results = [json.loads(f.read_text()) for f in sorted(out.glob("*/seed*/result.json"))]
        variants = []
        if args.episodes != EVAL_EPISODES:  # score the last models again, on more episodes
            results = [rescore(r, out, args) for r in results]
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for variant in variants:
            cmd = [sys.executable, __file__, *(argv or sys.argv[1:]), "--child", variant, str(seed)]
            subprocess.run(cmd, check=True, env=env)
            res = json.loads((out / variant / f"seed{seed}" / "result.json").read_text())
            results.append(res)
            print(json.dumps(res), flush=True)
    text = table(results, args)
    (out / "table.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
