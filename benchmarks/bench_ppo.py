"""PPO benchmark (issue 3): snrl PPO (Dale LIF, MLP) against Stable-Baselines3, one CPU thread.

Tasks, each measured in one run on one machine:

* ``cartpole``: CartPole-v1, 100k env steps, 5 seeds, three variants

  - ``lif``: snrl PPO with the defaults (Dale LIF, 128 hidden, 8 envs x 32 steps, 10 epochs);
  - ``mlp``: snrl PPO with SB3-like settings (``backbone=mlp, n_layers=2, hidden_size=64,
    n_epochs=20, target_kl=None``, the other fields default, i.e. 8 x 32 steps in one
    minibatch of 256);
  - ``sb3``: Stable-Baselines3 PPO with the rl-zoo CartPole-v1 settings (MlpPolicy, 8 envs,
    n_steps 32, batch 256, gae_lambda 0.8, gamma 0.98, n_epochs 20, ent_coef 0, lr and clip
    range linearly annealed from 1e-3 and 0.2), an ``EvalCallback`` every 5k env steps
    (10 deterministic episodes) saving its best model.

  Targets: LIF best checkpoint >= 475 on 5/5 seeds; LIF last model >= 475 on >= 4/5; LIF
  median wall time <= 1.5x SB3's; MLP median env steps/s >= 1.5x SB3's, with the same sample
  efficiency (median env steps to the first periodic evaluation >= 475 at most 1.2x SB3's).

* ``pendulum``: Pendulum-v1, LIF, 300k env steps, 3 seeds, settings from
  ``benchmarks/configs/pendulum_lif.toml``. Target: best-checkpoint return >= -250 on every
  seed.
* ``lunarlander``: LunarLander-v3, LIF, 1M env steps, 1 seed, settings from
  ``benchmarks/configs/lunarlander_lif.toml``. Target: best-checkpoint return >= 200.

Every run is a fresh subprocess (``torch.set_num_threads(1)``, ``OMP_NUM_THREADS=1``); at most
``--jobs`` run at the same time, variants interleaved seed by seed so that they share the
machine's load alike. Each run reports its wall time and CPU time of training (including the
periodic evaluations, whose time is also reported separately), env steps/s, the deterministic
evaluation (20 episodes, seeds 123..142) of the best checkpoint (snrl:
``run_dir/checkpoints/best.pt``; SB3: the EvalCallback's ``best_model.zip``) and of the last
model, and the env steps to the first periodic evaluation (10 episodes) >= the task's
threshold. Per-run results go to ``OUT/<task>/<variant>/seed<k>/result.json`` and the table
to stdout and ``OUT/<task>/table.md``.

* ``--speed`` (issue 11): wall time only, one run at a time, the variants alternated over
  ``--repeats`` rounds, on CartPole-v1: ``lif`` is snrl PPO with the ``snrl train`` defaults
  (Dale LIF, a run directory, its periodic evaluations every 5k steps), timed whole and without
  its evaluations; ``sb3`` is SB3 PPO MlpPolicy with the rl-zoo settings above and no
  evaluations; ``rppo`` is sb3-contrib RecurrentPPO (MlpLstmPolicy) with the same settings,
  run for ``--rppo-steps`` only (it is slow: ~7 min per 100k on a quiet machine) and compared
  per env step. The table gives the median over rounds of each ratio measured within a round.

* ``--against DIR``: every snrl variant also runs from the snrl checkout ``DIR`` (e.g. ``git
  worktree add /tmp/old <commit>``; its workers import ``snrl`` from there), on the same seeds
  with the same ``--set`` items, right after the same run of this tree, as ``<variant>@baseline``.
  An ``info`` line per variant compares the two: the medians of the env steps to the first
  periodic evaluation >= the threshold, the probability that a run of this tree gets there
  later than one of the baseline (0.5: no difference) with the two-sided Mann-Whitney U test,
  and the best and last models at the threshold. A change that only reorders float sums sends
  every seed down another trajectory, so "learning did not get worse" is a statement about
  many seeds, not about one.

Usage::

    python benchmarks/bench_ppo.py --speed --repeats 3        # issue 11's speed table
    python benchmarks/bench_ppo.py --task cartpole            # the full table
    python benchmarks/bench_ppo.py --task all --quick         # a smoke test of every path
    python benchmarks/bench_ppo.py --task pendulum --seeds 1 --steps 150000 \\
        --set lr=5e-4 --out runs/tune_pendulum                # tuning
    python benchmarks/bench_ppo.py --task cartpole --variants lif --seeds 20 \\
        --against /tmp/old --out runs/learn_ab                # learning, this tree vs another
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "benchmarks" / "configs"
EVAL_EPISODES, EVAL_SEED = 20, 123
AGAINST = "@baseline"  # suffix of the variants run from the checkout given by --against

TASKS: dict[str, dict[str, Any]] = {
    "cartpole": {
        "env_id": "CartPole-v1",
        "steps": 100_000,
        "seeds": 5,
        "threshold": 475.0,
        "variants": {
            "lif": {"kind": "snrl", "overrides": {}},
            "mlp": {
                "kind": "snrl",
                "overrides": {
                    "backbone": "mlp",
                    "n_layers": 2,
                    "hidden_size": 64,
                    "n_epochs": 20,
                    "target_kl": None,  # SB3 / rl-zoo: no early stop on KL
                },
            },
            "sb3": {"kind": "sb3"},
        },
    },
    "pendulum": {
        "env_id": "Pendulum-v1",
        "steps": 300_000,
        "seeds": 3,
        "threshold": -250.0,
        "variants": {"lif": {"kind": "snrl", "toml": "pendulum_lif.toml", "overrides": {}}},
    },
    "lunarlander": {
        "env_id": "LunarLander-v3",
        "steps": 1_000_000,
        "seeds": 1,
        "threshold": 200.0,
        "variants": {"lif": {"kind": "snrl", "toml": "lunarlander_lif.toml", "overrides": {}}},
    },
}
QUICK_STEPS = {"cartpole": 4096, "pendulum": 4096, "lunarlander": 4096}

# rl-zoo (rl-baselines3-zoo, hyperparams/ppo.yml) CartPole-v1 settings
SB3_CARTPOLE = dict(
    n_envs=8,
    n_steps=32,
    batch_size=256,
    gae_lambda=0.8,
    gamma=0.98,
    n_epochs=20,
    ent_coef=0.0,
    lr=1e-3,
    clip_range=0.2,
)


# ---- worker side (one run per process) -----------------------------------------------------
def _first_reaching(steps: list[int], values: list[float], threshold: float) -> int | None:
    for s, v in zip(steps, values):
        if v >= threshold:
            return int(s)
    return None


def _snrl_run_dir(spec: dict[str, Any]) -> Path:
    """snrl's run directory inside the benchmark's per-run folder (which also holds the
    worker log and result.json: snrl writes only into its own or empty directories)."""
    return Path(spec["run_dir"]) / "run"


def _time_evaluations(algo: Any) -> list[float]:
    """Wrap ``algo.evaluate`` so that its calls (the periodic evaluations inside ``learn()``)
    add their wall and CPU seconds to the returned ``[wall, cpu]`` list."""
    spent = [0.0, 0.0]
    evaluate = algo.evaluate

    def timed_evaluate(*args: Any, **kwargs: Any) -> dict:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return evaluate(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0
            spent[1] += time.process_time() - c0

    algo.evaluate = timed_evaluate
    return spent


def _run_snrl(spec: dict[str, Any]) -> dict[str, Any]:
    import dataclasses

    from snrl.agents.ppo import PPO, PPOConfig
    from snrl.config import config_to_dict, load_config

    run_dir = _snrl_run_dir(spec)
    base = {**spec["overrides"], "env": spec["env_id"], "seed": spec["seed"]}
    base["total_steps"] = spec["steps"]
    if spec.get("eval_interval") is not None:
        base["eval_interval"] = spec["eval_interval"]
    cfg = load_config(PPOConfig, toml_path=spec.get("toml"), sets=spec.get("sets", ()), base=base)
    # the seed, steps and env of the run win over the TOML file
    cfg = dataclasses.replace(cfg, env=spec["env_id"], seed=spec["seed"])
    algo = PPO(config=cfg, run_dir=run_dir)
    eval_time = _time_evaluations(algo)  # wall, CPU of the periodic evaluations in learn()
    c0, t0 = time.process_time(), time.perf_counter()
    hist = algo.learn(spec["steps"], progress=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    del algo.evaluate  # the final evaluations below are not timed: the method again
    steps = algo.env_step
    curve = [
        (int(s), float(v))
        for s, v in zip(hist["env_step"], hist["eval_return_mean"])
        if not math.isnan(v)
    ]
    last = algo.evaluate(n_episodes=EVAL_EPISODES, seed=EVAL_SEED)["mean_return"]
    algo.close()
    best_algo = PPO.load(run_dir / "checkpoints" / "best.pt")
    best = best_algo.evaluate(n_episodes=EVAL_EPISODES, seed=EVAL_SEED)["mean_return"]
    best_algo.close()
    return {
        "config": config_to_dict(cfg),
        "env_steps": steps,
        "wall_s": wall,
        "cpu_s": cpu,
        "eval_s": eval_time[0],
        "eval_cpu_s": eval_time[1],
        "best_return": best,
        "last_return": last,
        "eval_curve": curve,
        "steps_to_threshold": _first_reaching(
            [s for s, _ in curve], [v for _, v in curve], spec["threshold"]
        ),
    }


def _sb3_evaluate(model: Any, env_id: str, n_episodes: int, seed: int) -> float:
    """Mean return of ``n_episodes`` deterministic episodes, env ``i`` reset with ``seed + i``
    (the protocol of ``snrl.agents.evaluation.evaluate_agent``)."""
    import gymnasium as gym
    import numpy as np

    envs = [gym.make(env_id) for _ in range(n_episodes)]
    obs = np.stack([e.reset(seed=seed + i)[0] for i, e in enumerate(envs)])
    returns = np.zeros(n_episodes)
    active = np.ones(n_episodes, dtype=bool)
    while active.any():
        idx = np.flatnonzero(active)
        actions, _ = model.predict(obs[idx], deterministic=True)
        for j, i in enumerate(idx):
            o, r, term, trunc, _ = envs[i].step(actions[j])
            returns[i] += r
            obs[i] = o
            if term or trunc:
                active[i] = False
    for e in envs:
        e.close()
    return float(returns.mean())


def _run_sb3(spec: dict[str, Any]) -> dict[str, Any]:
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import EvalCallback
    from stable_baselines3.common.env_util import make_vec_env

    run_dir = Path(spec["run_dir"])
    hp, seed, env_id = SB3_CARTPOLE, spec["seed"], spec["env_id"]
    eval_interval = spec.get("eval_interval") or 5_000

    def linear(v0: float):
        return lambda progress_remaining: progress_remaining * v0

    env = make_vec_env(env_id, n_envs=hp["n_envs"], seed=seed)
    model = SB3PPO(
        "MlpPolicy",
        env,
        n_steps=hp["n_steps"],
        batch_size=hp["batch_size"],
        gae_lambda=hp["gae_lambda"],
        gamma=hp["gamma"],
        n_epochs=hp["n_epochs"],
        ent_coef=hp["ent_coef"],
        learning_rate=linear(hp["lr"]),
        clip_range=linear(hp["clip_range"]),
        seed=seed,
        device="cpu",
        verbose=0,
    )
    eval_time = [0.0, 0.0]  # wall, CPU

    class TimedEval(EvalCallback):
        def _on_step(self) -> bool:
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return super()._on_step()
            finally:
                eval_time[0] += time.perf_counter() - t0
                eval_time[1] += time.process_time() - c0

    callback = TimedEval(
        make_vec_env(env_id, n_envs=1, seed=seed + 10_000),
        n_eval_episodes=10,
        eval_freq=max(1, eval_interval // hp["n_envs"]),
        best_model_save_path=str(run_dir),
        log_path=str(run_dir),  # without it EvalCallback keeps no evaluation history
        deterministic=True,
        verbose=0,
    )
    c0, t0 = time.process_time(), time.perf_counter()
    model.learn(total_timesteps=spec["steps"], callback=callback)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    curve = [
        (int(s), float(sum(r) / len(r)))
        for s, r in zip(callback.evaluations_timesteps, callback.evaluations_results)
    ]
    last = _sb3_evaluate(model, env_id, EVAL_EPISODES, EVAL_SEED)
    best_path = run_dir / "best_model.zip"
    best = (
        _sb3_evaluate(SB3PPO.load(best_path, device="cpu"), env_id, EVAL_EPISODES, EVAL_SEED)
        if best_path.exists()
        else last
    )
    env.close()
    return {
        "config": {**hp, "policy": "MlpPolicy", "lr_schedule": "linear", "clip_schedule": "linear"},
        "env_steps": int(model.num_timesteps),
        "wall_s": wall,
        "cpu_s": cpu,
        "eval_s": eval_time[0],
        "eval_cpu_s": eval_time[1],
        "best_return": best,
        "last_return": last,
        "eval_curve": curve,
        "steps_to_threshold": _first_reaching(
            [s for s, _ in curve], [v for _, v in curve], spec["threshold"]
        ),
    }


def _run_speed(spec: dict[str, Any]) -> dict[str, Any]:
    """One timed training run of the ``--speed`` table (no final evaluations)."""
    seed, env_id, steps = spec["seed"], spec["env_id"], spec["steps"]
    if spec["variant"] == "lif":
        from snrl.agents.ppo import PPO

        # the `snrl train` defaults; a rerun of --speed times again, replacing the files its
        # earlier timing run wrote there (only those: the run's manifest lists them)
        algo = PPO(env_id, seed=seed, run_dir=_snrl_run_dir(spec), overwrite=True)
        eval_s = _time_evaluations(algo)  # wall, CPU
        t0, c0 = time.perf_counter(), time.process_time()
        algo.learn(steps, progress=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        done = algo.env_step
        algo.close()
        return {
            "wall_s": wall,
            "cpu_s": cpu,
            "eval_s": eval_s[0],
            "eval_cpu_s": eval_s[1],
            "env_steps": done,
        }
    from stable_baselines3.common.env_util import make_vec_env

    if spec["variant"] == "rppo":
        from sb3_contrib import RecurrentPPO as Algo

        policy = "MlpLstmPolicy"
    else:
        from stable_baselines3 import PPO as Algo

        policy = "MlpPolicy"
    hp = SB3_CARTPOLE
    env = make_vec_env(env_id, n_envs=hp["n_envs"], seed=seed)
    model = Algo(
        policy,
        env,
        n_steps=hp["n_steps"],
        batch_size=hp["batch_size"],
        gae_lambda=hp["gae_lambda"],
        gamma=hp["gamma"],
        n_epochs=hp["n_epochs"],
        ent_coef=hp["ent_coef"],
        learning_rate=lambda p: p * hp["lr"],
        clip_range=lambda p: p * hp["clip_range"],
        seed=seed,
        device="cpu",
        verbose=0,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=steps)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    env.close()
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "eval_s": 0.0,
        "eval_cpu_s": 0.0,
        "env_steps": int(model.num_timesteps),
    }


def worker(spec: dict[str, Any]) -> None:
    import torch

    torch.set_num_threads(1)
    if spec.get("tree"):  # --against: each arm must import snrl from its own checkout
        import snrl

        if not Path(snrl.__file__).resolve().is_relative_to(Path(spec["tree"]).resolve()):
            raise SystemExit(f"imported snrl from {snrl.__file__}, not from {spec['tree']}")
    Path(spec["run_dir"]).mkdir(parents=True, exist_ok=True)
    if spec["kind"] == "speed":
        res = _run_speed(spec)
    else:
        res = _run_sb3(spec) if spec["kind"] == "sb3" else _run_snrl(spec)
    # "tree": the checkout an --against run imported snrl from (absent otherwise)
    res.update({k: spec[k] for k in ("task", "variant", "seed", "steps", "tree") if k in spec})
    out = Path(spec["run_dir"]) / "result.json"
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(res, indent=1))
    os.replace(tmp, out)


# ---- driver side ---------------------------------------------------------------------------
def _jobs(args: argparse.Namespace, task: str) -> list[dict[str, Any]]:
    t = TASKS[task]
    steps = args.steps or (QUICK_STEPS[task] if args.quick else t["steps"])
    n_seeds = args.seeds or (1 if args.quick else t["seeds"])
    variants = [v for v in t["variants"] if not args.variants or v in args.variants]
    jobs = []
    for seed in range(args.seed_start, args.seed_start + n_seeds):
        for name in variants:
            v = t["variants"][name]
            toml = args.config or (str(CONFIGS / v["toml"]) if "toml" in v else None)
            jobs.append(
                {
                    "task": task,
                    "variant": name,
                    "kind": v["kind"],
                    "env_id": t["env_id"],
                    "seed": seed,
                    "steps": steps,
                    "threshold": t["threshold"],
                    "overrides": v.get("overrides", {}),
                    "toml": toml,
                    "sets": list(args.set) if v["kind"] == "snrl" else [],
                    "eval_interval": 2048 if args.quick else None,
                    "run_dir": str(Path(args.out) / task / name / f"seed{seed}"),
                }
            )
            if args.against is not None and v["kind"] == "snrl":
                # the same run from the other checkout, right after this one (same load)
                base = f"{name}{AGAINST}"
                jobs[-1]["tree"] = str(ROOT)
                jobs.append(
                    {
                        **jobs[-1],
                        "variant": base,
                        "tree": str(args.against),
                        "run_dir": str(Path(args.out) / task / base / f"seed{seed}"),
                    }
                )
    return jobs


def partial_result(spec: dict[str, Any]) -> dict[str, Any] | None:
    """A row for an snrl run that has not finished (still running or stopped): its
    ``metrics.csv`` (env steps reached, wall time, periodic evaluations) and the final
    evaluations of ``checkpoints/best.pt`` and ``checkpoints/last.pt`` (written every
    ``checkpoint_interval`` updates). CPU times are unknown (NaN). None without checkpoints,
    and for a run of another checkout (``--against``): this process would evaluate its
    checkpoints with this tree's code."""
    import csv

    import torch

    from snrl.agents.ppo import PPO

    run_dir = _snrl_run_dir(spec)
    ckpt = run_dir / "checkpoints"
    if spec["kind"] != "snrl" or spec.get("tree", str(ROOT)) != str(ROOT):
        return None
    if not (ckpt / "best.pt").exists():
        return None
    torch.set_num_threads(1)
    with open(run_dir / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    curve = [
        (int(r["env_step"]), float(r["eval_return_mean"]))
        for r in rows
        if r["eval_return_mean"] not in ("", "nan")
    ]
    evals = {}
    for name in ("best", "last"):
        algo = PPO.load(ckpt / f"{name}.pt")
        evals[name] = algo.evaluate(n_episodes=EVAL_EPISODES, seed=EVAL_SEED)["mean_return"]
        algo.close()
    return {
        **{k: spec[k] for k in ("task", "variant", "seed", "steps")},
        "partial": True,
        "env_steps": int(rows[-1]["env_step"]),
        "wall_s": float(rows[-1]["wall_time"]),
        "cpu_s": math.nan,
        "eval_s": math.nan,
        "eval_cpu_s": math.nan,
        "best_return": evals["best"],
        "last_return": evals["last"],
        "eval_curve": curve,
        "steps_to_threshold": _first_reaching(
            [s for s, _ in curve], [v for _, v in curve], spec["threshold"]
        ),
    }


def _run_all(
    jobs: list[dict[str, Any]], n_parallel: int, reuse: bool, script: str = __file__
) -> list[dict[str, Any]]:
    """Run the jobs as subprocesses (``script --worker SPEC``), at most ``n_parallel`` at
    once, in order. With ``reuse``, a run whose ``result.json`` has the spec's steps (and,
    where the spec has ``reuse_config``, that config) is not run again."""
    pending, running, results = list(jobs), [], []
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    while pending or running:
        while pending and len(running) < n_parallel:
            spec = pending.pop(0)
            out = Path(spec["run_dir"]) / "result.json"
            if reuse and out.exists():
                old = json.loads(out.read_text())
                same = old.get("steps") == spec["steps"]
                if same and "reuse_config" in spec:  # the run must have had these settings
                    same = all(old["config"].get(k) == v for k, v in spec["reuse_config"].items())
                if same:
                    print(f"reusing {out}", flush=True)
                    results.append(old)
                    continue
            if out.exists():
                out.unlink()
            Path(spec["run_dir"]).mkdir(parents=True, exist_ok=True)
            log = open(Path(spec["run_dir"]) / "worker.log", "w")
            cmd = [sys.executable, script, "--worker", json.dumps(spec)]
            run_env = env
            if spec.get("tree"):  # import snrl from that checkout (--against)
                path = os.pathsep.join(x for x in (spec["tree"], env.get("PYTHONPATH")) if x)
                run_env = {**env, "PYTHONPATH": path}
            proc = subprocess.Popen(cmd, env=run_env, stdout=log, stderr=subprocess.STDOUT)
            print(f"started {spec['task']}/{spec['variant']}/seed{spec['seed']}", flush=True)
            running.append((proc, spec, log))
        time.sleep(0.5)
        for item in list(running):
            proc, spec, log = item
            if proc.poll() is None:
                continue
            running.remove(item)
            log.close()
            out = Path(spec["run_dir"]) / "result.json"
            if proc.returncode != 0 or not out.exists():
                print(
                    f"FAILED {spec['task']}/{spec['variant']}/seed{spec['seed']} "
                    f"(see {spec['run_dir']}/worker.log)",
                    flush=True,
                )
                continue
            r = json.loads(out.read_text())
            results.append(r)
            scores = (
                f", best {r['best_return']:.1f}, last {r['last_return']:.1f}, "
                f"to-threshold {r['steps_to_threshold']}"
                if "best_return" in r
                else f", evaluations {r['eval_s']:.1f} s"
            )
            print(
                f"done {r['task']}/{r['variant']}/seed{r['seed']}: wall {r['wall_s']:.1f} s"
                + scores,
                flush=True,
            )
    return results


def _median(xs: list[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.median(xs) if xs else float("nan")


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _per_seed(xs: list[Any], fmt: str = "{:.1f}") -> str:
    return " / ".join("never" if x is None else fmt.format(x) for x in xs)


def compare_reach(this: list[int | None], base: list[int | None]) -> dict[str, float]:
    """Compare two arms' env steps to the threshold (one entry per seed, ``None`` for a seed
    that never got there, counted as +inf): both medians, ``later`` = the probability that a
    run of ``this`` gets there later than a run of ``base`` (ties count half: 0.5 is no
    difference; Mann-Whitney's U over ``len(this) * len(base)``), and the two-sided
    Mann-Whitney U test's p-value."""
    from scipy.stats import mannwhitneyu

    a = [math.inf if x is None else float(x) for x in this]
    b = [math.inf if x is None else float(x) for x in base]
    later = sum((x > y) + 0.5 * (x == y) for x in a for y in b) / (len(a) * len(b))
    return {
        "median": statistics.median(a),
        "median_base": statistics.median(b),
        "later": later,
        "p_value": float(mannwhitneyu(a, b, alternative="two-sided").pvalue),
    }


def _against_lines(by: dict[str, list[dict[str, Any]]], thr: float) -> list[str]:
    """One line per variant that also ran from the ``--against`` checkout: learning of this
    tree against that one, seed for seed the same runs."""
    lines = []
    for name, rs in by.items():
        base = by.get(f"{name}{AGAINST}")
        if name.endswith(AGAINST) or not base:
            continue
        c = compare_reach(
            [r["steps_to_threshold"] for r in rs], [r["steps_to_threshold"] for r in base]
        )
        n, m = len(rs), len(base)

        def count(runs: list[dict[str, Any]], key: str) -> int:
            return sum(r[key] >= thr for r in runs)

        lines.append(
            f"info: {name} (this tree) against {name}{AGAINST} ({base[0].get('tree', '?')}), "
            f"{n} and {m} seeds: env steps to first periodic eval >= {thr:g}, median "
            f"{c['median']:.0f} vs {c['median_base']:.0f}; P(a run of this tree gets there "
            f"later) = {c['later']:.2f} (0.5: no difference), Mann-Whitney U two-sided p = "
            f"{c['p_value']:.2f}; best >= {thr:g} on {count(rs, 'best_return')}/{n} vs "
            f"{count(base, 'best_return')}/{m}; last >= {thr:g} on "
            f"{count(rs, 'last_return')}/{n} vs {count(base, 'last_return')}/{m}"
        )
    return lines


def table(task: str, results: list[dict[str, Any]]) -> str:
    """The markdown table and the target lines of one task.

    Times per variant are medians over the seeds' finished runs. "w/o eval" subtracts the
    periodic evaluations made during training (snrl: ``eval_episodes`` episodes in one vector
    env; SB3: the EvalCallback's episodes one at a time), which cost the libraries differently.
    """
    thr = TASKS[task]["threshold"]
    by: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(results, key=lambda r: (r["variant"], r["seed"])):
        by.setdefault(r["variant"], []).append(r)
    lines = [
        f"{task}: {TASKS[task]['env_id']}; final evaluations: {EVAL_EPISODES} deterministic "
        f"episodes, seeds {EVAL_SEED}..{EVAL_SEED + EVAL_EPISODES - 1}; threshold {thr:g}",
        "",
        "| variant | seeds | env steps | wall s | wall s w/o eval | CPU s | CPU s w/o eval "
        "| env steps/s (wall) | env steps/s (wall w/o eval) | best, per seed | last, per seed "
        f"| env steps to first periodic eval >= {thr:g} |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    summary: dict[str, dict[str, Any]] = {}
    for name, rs in by.items():
        steps = [r["env_steps"] for r in rs]
        done = [r for r in rs if not r.get("partial")]  # times of finished runs only
        wall = [r["wall_s"] for r in done]
        wall_tr = [r["wall_s"] - r["eval_s"] for r in done]
        cpu = [r["cpu_s"] for r in done]
        cpu_tr = [r["cpu_s"] - r.get("eval_cpu_s", math.nan) for r in done]
        done_steps = [r["env_steps"] for r in done]
        reach = [r["steps_to_threshold"] for r in rs]
        m = summary[name] = {
            "wall": _median(wall),
            "wall_tr": _median(wall_tr),
            "cpu": _median(cpu),
            "cpu_tr": _median(cpu_tr),
            "sps": _median([n / w for n, w in zip(done_steps, wall)]),
            "sps_tr": _median([n / w for n, w in zip(done_steps, wall_tr)]),
            # a seed that never got there counts as +inf (so the median may still be finite)
            "reach_median": _median([math.inf if x is None else x for x in reach]),
            "best": [r["best_return"] for r in rs],
            "last": [r["last_return"] for r in rs],
        }
        n_partial = sum(bool(r.get("partial")) for r in rs)
        label = f"{name} ({n_partial} unfinished)" if n_partial else name
        steps_txt = str(steps[0]) if len(set(steps)) == 1 else _per_seed(steps, "{}")
        lines.append(
            f"| {label} | {len(rs)} | {steps_txt} | {m['wall']:.1f} | "
            f"{m['wall_tr']:.1f} | {m['cpu']:.1f} | {m['cpu_tr']:.1f} | {m['sps']:.0f} | "
            f"{m['sps_tr']:.0f} | {_per_seed(m['best'])} | {_per_seed(m['last'])} | "
            f"{_per_seed(reach, '{}')} |"
        )
    lines.append("")
    lines += _against_lines(by, thr)
    lif, mlp, sb3 = summary.get("lif"), summary.get("mlp"), summary.get("sb3")
    if lif:
        n, nb = len(lif["best"]), sum(b >= thr for b in lif["best"])
        lines.append(
            f"{_verdict(nb >= n)}: lif best checkpoint >= {thr:g} on {nb}/{n} seeds "
            f"(target {n}/{n})"
        )
        if task == "cartpole":
            nl = sum(x >= thr for x in lif["last"])
            need = n - 1 if n > 1 else 1
            lines.append(
                f"{_verdict(nl >= need)}: lif last model >= {thr:g} on {nl}/{n} seeds "
                f"(target >= {need}/{n})"
            )
    if lif and sb3:
        for key, what in (("wall", "wall"), ("wall_tr", "wall w/o periodic eval")):
            ratio = lif[key] / sb3[key]
            lines.append(
                f"{_verdict(ratio <= 1.5)}: lif / sb3 {what} (medians) = {ratio:.2f} "
                "(target <= 1.5)"
            )
        lines.append(
            f"info: lif / sb3 CPU time w/o periodic eval (medians) = "
            f"{lif['cpu_tr'] / sb3['cpu_tr']:.2f} (less sensitive to other load than wall)"
        )
    if mlp and sb3:
        for key, what in (("sps", "wall"), ("sps_tr", "wall w/o periodic eval")):
            ratio = mlp[key] / sb3[key]
            lines.append(
                f"{_verdict(ratio >= 1.5)}: mlp / sb3 env steps/s, {what} (medians) = "
                f"{ratio:.2f} (target >= 1.5)"
            )
        lines.append(
            f"info: sb3 / mlp CPU time w/o periodic eval (medians) = "
            f"{sb3['cpu_tr'] / mlp['cpu_tr']:.2f} (the CPU-time speed ratio)"
        )
        a, b = mlp["reach_median"], sb3["reach_median"]
        eff = a / b if math.isfinite(b) else math.nan  # nan: a MISS
        lines.append(
            f"{_verdict(eff <= 1.2)}: mlp / sb3 median env steps to first periodic eval >= "
            f"{thr:g} = {a:.0f} / {b:.0f} = {eff:.2f} (target <= 1.2: the same sample "
            "efficiency; a seed that never got there counts as inf)"
        )
    return "\n".join(lines)


def _load() -> str:
    try:
        return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load unknown"


def speed(args: argparse.Namespace) -> str:
    """The ``--speed`` table: wall times alternated over rounds, ratios within each round."""
    steps = args.steps or 100_000
    rppo_steps = min(args.rppo_steps, steps)
    variants = [v for v in ("lif", "sb3", "rppo") if not args.variants or v in args.variants]
    rounds: list[dict[str, dict[str, Any]]] = []
    loads = [_load()]
    for r in range(args.repeats):
        order = variants if r % 2 == 0 else variants[::-1]
        jobs = [
            {
                "task": "speed",
                "variant": v,
                "kind": "speed",
                "env_id": "CartPole-v1",
                "seed": r,
                "steps": rppo_steps if v == "rppo" else steps,
                "run_dir": str(Path(args.out) / "speed" / f"round{r}" / v),
            }
            for v in order
        ]
        got = _run_all(jobs, 1, reuse=False)  # one at a time
        rounds.append({x["variant"]: x for x in got})
        loads.append(_load())

    def per_step(x: dict[str, Any], what: str = "wall_s") -> float:
        t = {
            "wall_s": x["wall_s"],
            "no_eval": x["wall_s"] - x["eval_s"],
            "cpu_s": x["cpu_s"],
            "cpu_no_eval": x["cpu_s"] - x["eval_cpu_s"],
        }[what]
        return t / x["env_steps"]

    lines = [
        f"CartPole-v1, {steps:,} env steps (rppo: {rppo_steps:,}, compared per env step), "
        f"{args.repeats} rounds, one run at a time, {os.cpu_count()} CPUs, one torch thread",
        f"machine load (1, 5, 15 min) before and after each round: {' | '.join(loads)}",
        "",
        "| what | per round | median | target |",
        "|---|---|---|---|",
    ]
    for v in variants:
        cpus = [rd[v]["cpu_s"] for rd in rounds if v in rd]
        lines.append(
            f"| {v} CPU, s | {', '.join(f'{c:.1f}' for c in cpus)} | {_median(cpus):.1f} | |"
        )
        walls = [rd[v]["wall_s"] for rd in rounds if v in rd]
        extra = ""
        if v == "lif":
            evals = [rd[v]["eval_s"] for rd in rounds if v in rd]
            extra = f" (of which evaluations {', '.join(f'{e:.1f}' for e in evals)} s)"
        lines.append(
            f"| {v} wall, s{extra} | {', '.join(f'{w:.1f}' for w in walls)} | "
            f"{_median(walls):.1f} | |"
        )
    ratios = []
    if "lif" in variants and "sb3" in variants:
        ratios += [
            (
                "lif (with its evaluations) / sb3 PPO MlpPolicy (no evaluations)",
                "wall_s",
                "sb3",
                "<= 1.0 (stretch 0.5)",
            ),
            ("same, CPU time", "cpu_s", "sb3", ""),
            ("lif without its evaluations / sb3 PPO MlpPolicy", "no_eval", "sb3", ""),
            ("same, CPU time", "cpu_no_eval", "sb3", ""),
        ]
    if "lif" in variants and "rppo" in variants:
        ratios += [
            (
                "lif (with its evaluations) / RecurrentPPO MlpLstmPolicy, per env step",
                "wall_s",
                "rppo",
                "<= 0.1",
            ),
            ("same, CPU time", "cpu_s", "rppo", ""),
        ]
    for label, what, base, target in ratios:
        base_what = "cpu_s" if what.startswith("cpu") else "wall_s"
        rs = [
            per_step(rd["lif"], what) / per_step(rd[base], base_what)
            for rd in rounds
            if "lif" in rd and base in rd
        ]
        lines.append(
            f"| {label} | {', '.join(f'{x:.2f}x' for x in rs)} | {_median(rs):.2f}x | {target} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=[*TASKS, "all"], default="cartpole")
    p.add_argument("--seeds", type=int, default=None, help="seeds per variant (from --seed-start)")
    p.add_argument(
        "--seed-start",
        type=int,
        default=0,
        help="first seed (tune on seeds >= 100, verify on 0..4)",
    )
    p.add_argument("--steps", type=int, default=None, help="env steps per run")
    p.add_argument("--quick", action="store_true", help="1 seed, ~4k steps: a smoke test")
    p.add_argument("--variants", nargs="*", default=None, help="subset, e.g. lif sb3")
    p.add_argument("--config", default=None, help="TOML for the snrl variants (tuning)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--jobs", type=int, default=2, help="runs at the same time (default 2)")
    p.add_argument("--out", default="runs/bench_ppo", help="directory of the runs")
    p.add_argument("--reuse", action="store_true", help="reuse finished runs' result.json")
    p.add_argument(
        "--partial",
        action="store_true",
        help="run nothing: tabulate finished runs and evaluate the checkpoints of unfinished ones",
    )
    p.add_argument(
        "--against",
        type=Path,
        default=None,
        metavar="DIR",
        help="also run every snrl variant from the snrl checkout DIR (e.g. a git worktree of "
        "an older commit) on the same seeds and --set items, and compare learning",
    )
    p.add_argument("--speed", action="store_true", help="issue 11's wall-time table only")
    p.add_argument("--repeats", type=int, default=3, help="--speed: rounds (default 3)")
    p.add_argument(
        "--rppo-steps",
        type=int,
        default=20_000,
        help="--speed: env steps of the RecurrentPPO runs (default 20000; compared per step)",
    )
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker is not None:
        worker(json.loads(args.worker))
        return
    if args.against is not None:
        if args.speed:
            p.error("--against compares learning; for speed use benchmarks/bench_ppo_split.py")
        if not (args.against / "snrl" / "__init__.py").is_file():
            p.error(f"--against {args.against}: not an snrl checkout (no snrl/__init__.py)")
        args.against = args.against.resolve()
    if args.speed:
        text = speed(args)
        print("\n" + text)
        (Path(args.out) / "speed").mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "speed" / "table.md").write_text(text + "\n")
        return
    tasks = list(TASKS) if args.task == "all" else [args.task]
    jobs = [j for t in tasks for j in _jobs(args, t)]
    t0 = time.perf_counter()
    if args.partial:
        results = []
        for spec in jobs:
            out = Path(spec["run_dir"]) / "result.json"
            r = json.loads(out.read_text()) if out.exists() else partial_result(spec)
            if r is not None:
                results.append(r)
    else:
        results = _run_all(jobs, args.jobs, args.reuse)
    print(
        f"\ntotal wall {time.perf_counter() - t0:.0f} s, {os.cpu_count()} CPUs, --jobs {args.jobs}"
    )
    for task in tasks:
        rs = [r for r in results if r["task"] == task]
        if not rs:
            continue
        text = table(task, rs)
        print("\n" + text)
        (Path(args.out) / task).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / task / "table.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
