"""PPO training env steps/s on snrl.tasks with the tensor path on and off (issue 34, section 3).

With ``Algorithm.env_tensors`` on (set here; its default is on only off the CPU), a batched
env on the agent's device hands out torch tensors and PPO keeps observations, rewards and
terminations as tensors (its actions go back as tensors); off, it reads the engine's numpy
outputs like any vector env's. Both compute the same numbers (tests/agents/test_tensor_env.py),
so only the time differs.

Each run trains two PPO agents of the same seed, one per path, for ``--updates`` updates of
``--envs`` x ``--n-steps`` env steps, in alternating order (off-on, on-off, ...) so that a
drift of the machine's load hits both. Timed: the collection (``_collect_rollout``) and the
update (``_learn_from``) of every update, not construction or the final evaluation, in CPU
seconds of this process (``--clock cpu``, the default: on the shared 2-core machine the wall
time of one run swings by 2x with the other sessions' load) or wall seconds (``--clock
wall``; what a GPU run needs, as a GPU's time is not the process's CPU time). Printed per
run: training env steps/s (collection + update) of each path and their ratio (on / off), and
the collection's steps/s and ratio; then the median ratios. One torch thread.

Usage::

    python benchmarks/bench_tensor_path.py                  # 5 runs, 64 envs, LIF 64
    python benchmarks/bench_tensor_path.py --runs 1 --envs 8 --updates 2 --hidden 8
    python benchmarks/bench_tensor_path.py --device cuda --clock wall   # on a GPU
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch

import snrl


def timed_run(args: argparse.Namespace, tensors: bool) -> dict[str, float]:
    """Train one PPO agent on one path; env steps/s of training and of collection."""
    kw = dict(
        backbone=args.backbone,
        hidden_size=args.hidden,
        n_envs=args.envs,
        n_steps=args.n_steps,
        seed=args.seed,
        eval_interval=0,
        eval_episodes=1,
        threads=args.threads,
        device=args.device,
        env_kwargs={"device": args.device},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        algo = snrl.PPO(f"snrl.tasks:{args.task}", **kw)
    algo.env_tensors = tensors
    clock = {"collect": 0.0, "update": 0.0}
    collect, learn_from = algo._collect_rollout, algo._learn_from

    def sync() -> None:
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    now = time.process_time if args.clock == "cpu" else time.perf_counter

    def timed(part, fn):
        def wrapper(*a):
            sync()
            t0 = now()
            out = fn(*a)
            sync()
            clock[part] += now() - t0
            return out

        return wrapper

    algo._collect_rollout = timed("collect", collect)
    algo._learn_from = timed("update", learn_from)
    steps = args.updates * args.envs * args.n_steps
    algo.learn(steps, progress=False)
    assert algo._tensor_env == tensors, "the path asked for did not run"
    algo.close()
    return {
        "train": steps / (clock["collect"] + clock["update"]),
        "collect": steps / clock["collect"],
    }


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="PerceptualDecisionMaking-v0")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--envs", type=int, default=64)
    p.add_argument("--n-steps", type=int, default=32)
    p.add_argument("--updates", type=int, default=10)
    p.add_argument("--backbone", default="lif")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    args = p.parse_args(argv)
    if args.device != "cpu" and args.clock == "cpu":
        p.error("--device other than cpu needs --clock wall (a GPU's time is not CPU time)")
    print(
        f"PPO on snrl.tasks:{args.task}, {args.backbone} {args.hidden}, {args.envs} envs x "
        f"{args.n_steps} steps x {args.updates} updates, device {args.device}, "
        f"{args.threads} thread(s); env steps per {args.clock} second"
    )
    print(f"{'run':>4s} {'train off':>10s} {'train on':>10s} {'ratio':>6s}  "
          f"{'collect off':>11s} {'collect on':>10s} {'ratio':>6s}")  # fmt: skip
    rows = []
    for r in range(args.runs):
        order = (False, True) if r % 2 == 0 else (True, False)
        got = {tensors: timed_run(args, tensors) for tensors in order}
        row = {
            "train_off": got[False]["train"],
            "train_on": got[True]["train"],
            "collect_off": got[False]["collect"],
            "collect_on": got[True]["collect"],
        }
        row["train_ratio"] = row["train_on"] / row["train_off"]
        row["collect_ratio"] = row["collect_on"] / row["collect_off"]
        rows.append(row)
        print(
            f"{r + 1:4d} {row['train_off']:10,.0f} {row['train_on']:10,.0f} "
            f"{row['train_ratio']:5.3f}x  {row['collect_off']:11,.0f} {row['collect_on']:10,.0f} "
            f"{row['collect_ratio']:5.3f}x",
            flush=True,
        )
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(
        f"median ratio (on / off): training {med['train_ratio']:.3f}x, collection "
        f"{med['collect_ratio']:.3f}x (median env steps/s, off / on: training "
        f"{med['train_off']:,.0f} / {med['train_on']:,.0f}, collection "
        f"{med['collect_off']:,.0f} / {med['collect_on']:,.0f})"
    )
    return rows


if __name__ == "__main__":
    main()
