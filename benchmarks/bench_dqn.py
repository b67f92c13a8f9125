"""DQN benchmark (issue 5): snrl DQN (Dale LIF, MLP) against Stable-Baselines3, one CPU thread.

Tasks, each measured in one run on one machine:

* ``cartpole``: CartPole-v1.

  - ``lif``: snrl DQN with the defaults (Dale LIF, 128 neurons, sequence replay with stored
    states and burn-in), 100k env steps, 5 seeds. Target: deterministic evaluation of the
    best checkpoint >= 475 on at least 4 of 5 seeds.
  - ``mlp``: snrl DQN with the rl-zoo CartPole-v1 DQN settings on single transitions
    (``backbone=mlp, n_layers=2, hidden_size=256, activation=relu`` (SB3's DQN network),
    ``lr=2.3e-3, batch 64, buffer 100k,
    learning_starts 1000, gamma 0.99, target_update_interval 10, train_freq 256,
    gradient_steps 128, epsilon 1 -> 0.04 over 16% of the run``, one env, 1-step targets,
    plain (not double) DQN, no observation normalization), 50k env steps.
  - ``sb3``: Stable-Baselines3 DQN with the same rl-zoo settings (``MlpPolicy``,
    ``net_arch=[256, 256]``), 50k env steps.

  ``mlp`` and ``sb3`` train without periodic evaluation, so env steps/s is the training
  throughput of the two libraries under the same settings (target: mlp >= 1.5x sb3); their
  last model is evaluated at the end.
* ``acrobot``: Acrobot-v1, snrl DQN with a Dale LIF backbone and the ``ACROBOT`` settings
  (two gradient steps per training phase, lr 1e-3, 64 windows, learning_starts 2000, target
  every 500 env steps), 100k env steps, 3 seeds. Target: best checkpoint >= -100.

Every run is a fresh subprocess (``torch.set_num_threads(1)``, ``OMP_NUM_THREADS=1``); at
most ``--jobs`` run at the same time. Each run reports wall and CPU time of training, env
steps/s (wall and CPU), the deterministic evaluation (20 episodes, seeds 123..142) of the best
checkpoint (snrl runs with periodic evaluation) and of the last model. Per-run results go to
``OUT/<task>/<variant>/seed<k>/result.json`` as they finish, the table to stdout and
``OUT/table.md`` (``--table`` rebuilds it from the results present).

``--speed`` (issue 11): wall time only, CartPole-v1, ``--steps`` (default 100k) env steps per
run, one run at a time, the three cartpole variants alternated over ``--repeats`` rounds (all
at the same step count): Dale-LIF DQN wall (snrl defaults, with its periodic evaluations) vs
SB3 DQN's (target <= 1.0x), and snrl MLP DQN env steps/s vs SB3 DQN's (target >= 1.5x; the
ReLU network of SB3's, and ``mlp_tanh``: the same with snrl's default tanh), each ratio taken
within a round, the median over rounds reported.

``--parts``: where the MLP rows' time goes, per operation, in one process, the operations
interleaved in each of ``--repeats`` rounds (medians): one gradient step of snrl's MLP DQN
(rl-zoo settings, ReLU; its gradient by hand, and the same step by autograd with
``DQN.manual_grad = False``) against one of SB3's (``model.train``) and against a minimal step
in plain torch with the same math (sample, target net's max, Huber loss, autograd's backward,
clip, fused Adam), and one acting step (act, env step, store) of each library.

Usage::

    python benchmarks/bench_dqn.py --speed --repeats 3  # issue 11's speed table
    python benchmarks/bench_dqn.py --parts              # per-operation times of the MLP rows
    python benchmarks/bench_dqn.py                      # the full table
    python benchmarks/bench_dqn.py --quick              # a smoke test of every path
    python benchmarks/bench_dqn.py --only cartpole/lif --seeds 2 --steps 50000 \\
        --set lr=5e-4                                   # tuning
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
EVAL_EPISODES, EVAL_SEED = 20, 123

RL_ZOO = {
    "lr": 2.3e-3,
    "batch_size": 64,
    "buffer_size": 100_000,
    "learning_starts": 1_000,
    "gamma": 0.99,
    "target_update_interval": 10,
    "train_freq": 256,
    "gradient_steps": 128,
    "exploration_fraction": 0.16,
    "exploration_final_eps": 0.04,
    "net_arch": [256, 256],
}

SAME_NAMES = (
    "batch_size",
    "buffer_size",
    "learning_starts",
    "gamma",
    "target_update_interval",
    "train_freq",
    "gradient_steps",
)
"""The rl-zoo keys that snrl's DQNConfig and SB3's DQN both name as rl-zoo does."""

RUNS: list[dict[str, Any]] = [
    {"task": "cartpole", "variant": "lif", "kind": "snrl", "env_id": "CartPole-v1",
     "steps": 100_000, "seeds": 5, "threshold": 475.0, "overrides": {}},
    {"task": "cartpole", "variant": "mlp", "kind": "snrl", "env_id": "CartPole-v1",
     "steps": 50_000, "seeds": 3, "threshold": 475.0, "overrides": "rl_zoo"},
    {"task": "cartpole", "variant": "sb3", "kind": "sb3", "env_id": "CartPole-v1",
     "steps": 50_000, "seeds": 3, "threshold": 475.0, "overrides": {}},
    {"task": "acrobot", "variant": "lif", "kind": "snrl", "env_id": "Acrobot-v1",
     "steps": 100_000, "seeds": 3, "threshold": -100.0, "overrides": "acrobot"},
]  # fmt: skip


ACROBOT = {
    "gradient_steps": 2,
    "lr": 1e-3,
    "batch_size": 64,
    "learning_starts": 2_000,
    "target_update_interval": 500,
}
"""Acrobot-v1 settings on top of the snrl defaults (tuned in one 3-seed run, see
docs/benchmarks.md)."""


def rl_zoo_snrl(steps: int) -> dict[str, Any]:
    """The rl-zoo settings as snrl DQNConfig fields (plain DQN on single transitions)."""
    z = RL_ZOO
    return {
        "backbone": "mlp",
        "activation": "relu",  # SB3's DQN MlpPolicy (its PPO's is tanh, snrl's default)
        "n_layers": 2,
        "hidden_size": z["net_arch"][0],
        "lr": z["lr"],
        **{k: z[k] for k in SAME_NAMES},
        "eps_start": 1.0,
        "eps_end": z["exploration_final_eps"],
        "eps_decay_steps": int(z["exploration_fraction"] * steps),
        "n_envs": 1,
        "n_step": 1,
        "double": False,
        "normalize_obs": False,
        "eval_interval": 0,
        "log_interval": 5_000,
    }


# ---------------------------------------------------------------------------- one run
def sb3_dqn(env_id: str, seed: int, **changes: Any):
    """SB3's DQN with the rl-zoo settings (``changes`` override them)."""
    from stable_baselines3 import DQN as SB3DQN

    z = RL_ZOO
    kwargs = {
        "learning_rate": z["lr"],
        **{k: z[k] for k in SAME_NAMES},
        "exploration_fraction": z["exploration_fraction"],
        "exploration_final_eps": z["exploration_final_eps"],
        "policy_kwargs": {"net_arch": z["net_arch"]},
        **changes,
    }
    return SB3DQN("MlpPolicy", env_id, seed=seed, device="cpu", verbose=0, **kwargs)


def _eval_sb3(model, env_id: str) -> dict[str, Any]:
    import gymnasium as gym
    import numpy as np

    returns = []
    for i in range(EVAL_EPISODES):
        env = gym.make(env_id)
        obs, _ = env.reset(seed=EVAL_SEED + i)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, r, term, trunc, _ = env.step(action)
            total += float(r)
            done = term or trunc
        env.close()
        returns.append(total)
    return {"mean_return": float(np.mean(returns)), "std_return": float(np.std(returns))}


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Train one run in this process and return its result row."""
    import torch

    torch.set_num_threads(1)
    run_dir = Path(spec["run_dir"])
    run_dir.mkdir(parents=True, exist_ok=True)  # marks the run as started
    steps, seed = spec["steps"], spec["seed"]
    res: dict[str, Any] = {k: spec[k] for k in ("task", "variant", "seed", "steps", "env_id")}
    if spec["kind"] == "sb3":
        model = sb3_dqn(spec["env_id"], seed)
        w0, c0 = time.perf_counter(), time.process_time()
        model.learn(total_timesteps=steps)
        res["wall_s"], res["cpu_s"] = time.perf_counter() - w0, time.process_time() - c0
        res["last"] = _eval_sb3(model, spec["env_id"])
        res["best"] = None
    else:
        import snrl

        # snrl's own run directory: the benchmark's folder also holds its log and result
        # (a --speed rerun replaces its own earlier timing run: the manifest's files only)
        algo = snrl.DQN(
            spec["env_id"],
            seed=seed,
            run_dir=run_dir / "run",
            overwrite=spec.get("overwrite", False),
            **spec["overrides"],
        )
        res["config"] = dataclass_dict(algo.config)
        w0, c0 = time.perf_counter(), time.process_time()
        hist = algo.learn(steps, progress=False)
        res["wall_s"], res["cpu_s"] = time.perf_counter() - w0, time.process_time() - c0
        algo.close()
        res["last"] = pick(algo.evaluate(n_episodes=EVAL_EPISODES, seed=EVAL_SEED))
        evals = [
            (s, r)
            for s, r in zip(hist["env_step"], hist["eval_return_mean"])
            if r == r  # not NaN
        ]
        res["evals"] = evals
        res["first_step_at_threshold"] = next((s for s, r in evals if r >= spec["threshold"]), None)
        best_path = run_dir / "run" / "checkpoints" / "best.pt"
        if algo.config.eval_interval and best_path.exists():
            best = snrl.DQN.load(best_path)
            res["best"] = pick(best.evaluate(n_episodes=EVAL_EPISODES, seed=EVAL_SEED))
        else:
            res["best"] = None
    res["steps_per_s"] = steps / res["wall_s"]
    res["steps_per_cpu_s"] = steps / res["cpu_s"]
    return res


def pick(ev: dict[str, Any]) -> dict[str, float]:
    return {"mean_return": ev["mean_return"], "std_return": ev["std_return"]}


def dataclass_dict(cfg: Any) -> dict[str, Any]:
    import dataclasses

    return dataclasses.asdict(cfg)


# ---------------------------------------------------------------------------- the table
def build_table(out: Path) -> str:
    rows = []
    for path in sorted(out.glob("*/*/seed*/result.json")):
        rows.append(json.loads(path.read_text()))
    lines = [
        "| task | variant | seed | env steps | wall s | CPU s | steps/s | steps/CPU-s "
        "| best ckpt (20 ep) | last model (20 ep) | first eval >= threshold |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in sorted(rows, key=lambda r: (r["task"], r["variant"], r["seed"])):
        best = r.get("best")
        lines.append(
            f"| {r['task']} | {r['variant']} | {r['seed']} | {r['steps']} | {r['wall_s']:.0f} "
            f"| {r['cpu_s']:.0f} | {r['steps_per_s']:.0f} | {r['steps_per_cpu_s']:.0f} "
            f"| {fmt(best)} | {fmt(r['last'])} | {r.get('first_step_at_threshold', '-')} |"
        )
    lines.append("")
    lines += summary(rows)
    return "\n".join(lines)


def fmt(ev: dict[str, float] | None) -> str:
    return "-" if ev is None else f"{ev['mean_return']:.1f} ± {ev['std_return']:.1f}"


def summary(rows: list[dict[str, Any]]) -> list[str]:
    def sel(task: str, variant: str) -> list[dict[str, Any]]:
        return [r for r in rows if r["task"] == task and r["variant"] == variant]

    out = []
    lif = sel("cartpole", "lif")
    if lif:
        ok = sum(r["best"] is not None and r["best"]["mean_return"] >= 475 for r in lif)
        either = sum(
            max(r["last"]["mean_return"], (r["best"] or r["last"])["mean_return"]) >= 475
            for r in lif
        )
        out.append(
            f"- CartPole-v1 Dale LIF DQN, best checkpoint >= 475: {ok}/{len(lif)} seeds; best "
            f"or last model >= 475: {either}/{len(lif)} (target: >= 4 of 5 seeds, 100k steps)"
        )
    acro = sel("acrobot", "lif")
    if acro:
        ok = sum(r["best"] is not None and r["best"]["mean_return"] >= -100 for r in acro)
        best = ", ".join(f"{(r['best'] or r['last'])['mean_return']:.1f}" for r in acro)
        out.append(
            f"- Acrobot-v1 Dale LIF DQN, best checkpoint >= -100: {ok}/{len(acro)} seeds "
            f"(best-checkpoint returns {best}; target: 3 of 3)"
        )
    mlp, sb3 = sel("cartpole", "mlp"), sel("cartpole", "sb3")
    if mlp and sb3:
        m = statistics.median(r["steps_per_s"] for r in mlp)
        s = statistics.median(r["steps_per_s"] for r in sb3)
        mc = statistics.median(r["steps_per_cpu_s"] for r in mlp)
        sc = statistics.median(r["steps_per_cpu_s"] for r in sb3)
        out.append(
            f"- median env steps/s: snrl mlp {m:.0f}, SB3 {s:.0f} -> {m / s:.2f}x "
            f"(per CPU-second: {mc:.0f} vs {sc:.0f} -> {mc / sc:.2f}x; target >= 1.5x)"
        )
        out.append(
            "- last model (20 episodes), median over seeds: snrl mlp "
            f"{statistics.median(r['last']['mean_return'] for r in mlp):.1f}, SB3 "
            f"{statistics.median(r['last']['mean_return'] for r in sb3):.1f}"
        )
    return out


# ---------------------------------------------------------------------------- driver
def specs(args: argparse.Namespace) -> list[dict[str, Any]]:
    sets = dict(s.split("=", 1) for s in args.set)
    out = []
    for run in RUNS:
        name = f"{run['task']}/{run['variant']}"
        if args.only and name not in args.only.split(","):
            continue
        steps = 3_000 if args.quick else (args.steps or run["steps"])
        n_seeds = 1 if args.quick else (args.seeds or run["seeds"])
        for seed in range(n_seeds):
            run_dir = Path(args.out) / run["task"] / run["variant"] / f"seed{seed}"
            if args.skip_started and run_dir.exists():
                continue
            named = run["overrides"]  # a dict, or the name of a settings preset
            if isinstance(named, dict):
                overrides = dict(named)
            else:
                overrides = {"rl_zoo": rl_zoo_snrl(steps), "acrobot": dict(ACROBOT)}[named]
            overrides.update(_parse_sets(sets))
            if args.quick:
                overrides.update(
                    learning_starts=500, batch_size=8, eval_interval=1_000, eval_episodes=2
                )
                if run["variant"] == "lif":
                    overrides.update(hidden_size=32)
            out.append(
                {
                    **run,
                    "steps": steps,
                    "seed": seed,
                    "overrides": overrides if run["kind"] == "snrl" else {},
                    "run_dir": str(run_dir),
                }
            )
    # interleave: seed 0 of every run first, so that partial results cover every variant
    return sorted(out, key=lambda s: s["seed"])


def _parse_sets(sets: dict[str, str]) -> dict[str, Any]:
    parsed = {}
    for k, v in sets.items():
        try:
            parsed[k] = json.loads(v)
        except json.JSONDecodeError:
            parsed[k] = v
    return parsed


def _load() -> str:
    try:
        return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load unknown"


def speed(args: argparse.Namespace) -> str:
    """Issue 11's table: the cartpole variants one at a time, alternated, ratios per round."""
    steps = args.steps or 100_000
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    runs = {r["variant"]: r for r in RUNS if r["task"] == "cartpole"}
    runs["mlp_tanh"] = {**runs["mlp"], "variant": "mlp_tanh"}
    names = ["lif", "mlp", "mlp_tanh", "sb3"]
    rounds, loads = [], [_load()]
    for k in range(args.repeats):
        got = {}
        for name in names if k % 2 == 0 else names[::-1]:
            run = runs[name]
            overrides = rl_zoo_snrl(steps) if run["overrides"] == "rl_zoo" else {}
            if name == "mlp_tanh":
                overrides["activation"] = "tanh"
            spec = {
                **run,
                "steps": steps,
                "seed": k,
                "overrides": overrides,
                "run_dir": str(Path(args.out) / "speed" / f"round{k}" / name),
                "overwrite": True,  # --speed times again on every call
            }
            path = Path(spec["run_dir"]) / "result.json"
            if path.exists():
                path.unlink()
            cmd = [sys.executable, __file__, "--worker", json.dumps(spec)]
            print(f"round {k}: {name}", flush=True)
            if subprocess.run(cmd, env=env).returncode != 0 or not path.exists():
                raise SystemExit(f"run {name} of round {k} failed (see its output above)")
            got[name] = json.loads(path.read_text())
        rounds.append(got)
        loads.append(_load())
    lines = [
        f"CartPole-v1, {steps:,} env steps per run, {args.repeats} rounds, one run at a time, "
        f"{os.cpu_count()} CPUs, one torch thread",
        f"machine load (1, 5, 15 min) before and after each round: {' | '.join(loads)}",
        "",
        "| what | per round | median | target |",
        "|---|---|---|---|",
    ]
    for name in names:
        walls = [r[name]["wall_s"] for r in rounds]
        lines.append(
            f"| {name} wall, s | {', '.join(f'{w:.1f}' for w in walls)} | "
            f"{statistics.median(walls):.1f} | |"
        )
    rows = [
        ("Dale-LIF DQN wall / SB3 DQN wall", "lif", "wall_s", "<= 1.0x", False),
        ("same, CPU time", "lif", "cpu_s", "", False),
        ("MLP DQN env steps/s / SB3 DQN's", "mlp", "wall_s", ">= 1.5x", True),
        ("same, per CPU second", "mlp", "cpu_s", "", True),
        (
            "MLP DQN with tanh (snrl's default) env steps/s / SB3 DQN's",
            "mlp_tanh",
            "wall_s",
            "",
            True,
        ),
    ]
    for label, name, key, target, inverse in rows:
        xs = [r[name][key] / r["sb3"][key] for r in rounds]
        xs = [1 / x for x in xs] if inverse else xs  # same steps: speed = 1 / time
        lines.append(
            f"| {label} | {', '.join(f'{x:.2f}x' for x in xs)} | "
            f"{statistics.median(xs):.2f}x | {target} |"
        )
    return "\n".join(lines)


def _minimal_step(seed: int):
    """A gradient step of plain DQN in bare torch on random CartPole-like transitions: the
    same network (4-256-256-2, ReLU), batch 64, Huber loss, clip at 10, fused Adam."""
    import copy

    import numpy as np
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.manual_seed(seed)
    net = nn.Sequential(
        nn.Linear(4, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 2)
    )
    tgt = copy.deepcopy(net).requires_grad_(False)
    opt = torch.optim.Adam(net.parameters(), lr=RL_ZOO["lr"], fused=True)
    rng = np.random.default_rng(seed)
    n = 50_000
    obs, nxt = rng.normal(size=(2, n, 4)).astype(np.float32)
    act, rew, done = rng.integers(0, 2, n), np.ones(n, np.float32), np.zeros(n, np.float32)

    def step() -> None:
        i = rng.integers(0, n, 64)
        with torch.no_grad():
            q_next = tgt(torch.from_numpy(nxt[i])).max(-1).values
            not_done = 1 - torch.from_numpy(done[i])
            y = torch.from_numpy(rew[i]) + RL_ZOO["gamma"] * not_done * q_next
        q = net(torch.from_numpy(obs[i])).gather(1, torch.from_numpy(act[i])[:, None])
        loss = F.smooth_l1_loss(q.squeeze(1), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 10.0)  # SB3's max_grad_norm
        opt.step()

    return step


def parts(args: argparse.Namespace) -> str:
    """Per-operation times of the MLP rows (see the module docstring)."""
    import torch

    import snrl
    from snrl.agents.dqn import _Stats

    torch.set_num_threads(1)
    z = RL_ZOO
    algo = snrl.DQN("CartPole-v1", seed=0, **rl_zoo_snrl(50_000))
    algo.learn(3_000, progress=False)  # fills the buffer past learning_starts
    stats = _Stats()
    sb3 = sb3_dqn("CartPole-v1", 0, gradient_steps=0)  # learn() only acts; train() is timed
    sb3.learn(3_000)
    minimal = _minimal_step(0)
    n_grad, n_act = 1_000, 3_000

    def snrl_grad() -> None:
        for _ in range(n_grad):
            algo._gradient_step(stats)

    def snrl_autograd() -> None:
        algo.manual_grad = False
        try:
            snrl_grad()
        finally:
            algo.manual_grad = True

    def sb3_grad() -> None:
        sb3.train(gradient_steps=n_grad, batch_size=z["batch_size"])

    def minimal_grad() -> None:
        for _ in range(n_grad):
            minimal()

    def snrl_act() -> None:
        for _ in range(n_act):
            algo._act_and_store(stats)

    def sb3_act() -> None:
        sb3.learn(n_act, reset_num_timesteps=False)

    timed = {
        "gradient step: snrl": (snrl_grad, n_grad),
        "gradient step: snrl by autograd": (snrl_autograd, n_grad),
        "gradient step: SB3": (sb3_grad, n_grad),
        "gradient step: minimal torch": (minimal_grad, n_grad),
        "acting step: snrl": (snrl_act, n_act),
        "acting step: SB3": (sb3_act, n_act),
    }
    for fn, _ in timed.values():
        fn()  # warm-up
    times: dict[str, list[float]] = {k: [] for k in timed}
    for _ in range(args.repeats):
        for name, (fn, n) in timed.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) / n * 1e6)
    med = {k: statistics.median(v) for k, v in times.items()}
    lines = [
        f"CartPole-v1, rl-zoo DQN settings, {args.repeats} rounds (medians), one torch "
        f"thread; machine load before: {_load()}",
        "",
        "| operation | us, per round | median us | SB3's / this |",
        "|---|---|---|---|",
    ]
    for name, v in times.items():
        base = med["gradient step: SB3" if name.startswith("gradient") else "acting step: SB3"]
        lines.append(
            f"| {name} | {', '.join(f'{x:.0f}' for x in v)} | {med[name]:.0f} | "
            f"{base / med[name]:.2f}x |"
        )
    algo.close()
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/bench_dqn")
    p.add_argument("--jobs", type=int, default=2, help="runs at the same time")
    p.add_argument("--only", default="", help="comma-separated task/variant, e.g. cartpole/lif")
    p.add_argument("--seeds", type=int, default=0, help="seeds per variant (default: per task)")
    p.add_argument("--steps", type=int, default=0, help="env steps (default: per task)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=JSON", help="snrl field")
    p.add_argument("--quick", action="store_true", help="3k steps, 1 seed: a smoke test")
    p.add_argument("--skip-started", action="store_true", help="skip runs whose directory exists")
    p.add_argument("--table", action="store_true", help="only rebuild the table from results")
    p.add_argument("--speed", action="store_true", help="issue 11's wall-time table only")
    p.add_argument("--parts", action="store_true", help="per-operation times of the MLP rows")
    p.add_argument("--repeats", type=int, default=3, help="--speed: rounds (default 3)")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.parts:
        print(parts(args))
        return
    if args.speed:
        text = speed(args)
        (Path(args.out) / "speed").mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "speed" / "table.md").write_text(text + "\n")
        print("\n" + text)
        return
    if args.worker:
        spec = json.loads(args.worker)
        res = worker(spec)
        path = Path(spec["run_dir"]) / "result.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(res, indent=1))
        os.replace(tmp, path)
        return
    out = Path(args.out)
    if not args.table:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
        pending, running = specs(args), []
        while pending or running:
            while pending and len(running) < args.jobs:
                spec = pending.pop(0)
                cmd = [sys.executable, __file__, "--worker", json.dumps(spec)]
                print(f"start {spec['task']}/{spec['variant']} seed {spec['seed']}", flush=True)
                running.append((spec, subprocess.Popen(cmd, env=env)))
            time.sleep(2)
            for item in list(running):
                spec, proc = item
                if proc.poll() is not None:
                    running.remove(item)
                    state = "done" if proc.returncode == 0 else f"FAILED ({proc.returncode})"
                    print(f"{state} {spec['task']}/{spec['variant']} seed {spec['seed']}")
    table = build_table(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
