"""NeuroGym benchmark (issue 12): trial accuracy of snrl PPO (LIF, GRU, MLP backbones) against
sb3-contrib's RecurrentPPO (MlpLstmPolicy) on the same env-step budget.

For every task, seed and agent: train on ``--steps`` env steps with ``--n-envs`` envs (8), then
evaluate deterministically on the same number of held-out trials (``--eval-trials``) for every
agent, counted by snrl's :class:`~snrl.envs.trials.TrialTracker` on the same envs (snrl's
vector env with the task's default episode length, seeds ``10_000 + i``). Agents:

* ``lif``: ``snrl.PPO(task, backbone="lif", n_envs=8, tau_m=1.0, readout_tau_m=1.0)``, the
  other fields default (Dale 80/20, 128 neurons). The neuron ``dt`` is the task's (100 ms, one
  neuron step per env step, docs/neuro.md); 1 s keeps 0.9 of the membrane per step
  (``--lif-tau``; 0.1 s is measured too). Not the no-flag default: that trains 16 envs
  (``untuned`` / ``zoo`` below), twice the samples per update and half the updates;
* ``gru``: ``snrl.PPO(task, backbone="gru")``, the other fields default;
* ``mlp``: ``snrl.PPO(task, backbone="mlp")`` (no memory: a floor for the delay tasks);
* ``zoo`` / ``untuned``: ``snrl.PPO(task, backbone="lif")`` with no other keyword (``tuned``
  on / off): what ``snrl train --env TASK`` and ``snrl train --env TASK --no-tuned`` run, the
  env's tuned entry (snrl/zoo/ppo.toml) against the defaults, each with its own ``n_envs``
  (``--n-envs`` sizes only their evaluation). ``lif``, ``gru`` and ``mlp`` never take a tuned
  entry (``tuned=False``), so they stay the defaults named above;
* ``lstm``: ``sb3_contrib.RecurrentPPO("MlpLstmPolicy", ...)`` with rl-baselines3-zoo's
  settings for its memory task CartPoleNoVel-v1 (:data:`LSTM_KWARGS`: 8 envs, 100k steps,
  segments of 32 steps, one minibatch of 256, 20 epochs, gamma 0.98, GAE lambda 0.8, learning
  rate and clip range annealed linearly from 1e-3 and 0.2), on SB3 ``DummyVecEnv`` envs built
  by snrl (the same step limit and episode cut). ``--lstm-settings small-lr`` gives the
  settings of the first version of this script (segments of 128, 4 minibatches, 4 epochs,
  sb3-contrib's constant 3e-4, gamma 0.99, lambda 0.95), under which it stayed at chance.

Each snrl run's result records its resolved training settings (:data:`CONFIG_KEYS`:
``n_envs``, ``tau_m``, ``readout_tau_m``, neuron ``dt``, ``substeps``, the tuned entry).
It prints a table (mean ± std accuracy over seeds, train seconds) and, per task, the ratios
LIF / LSTM and LIF / GRU of the mean accuracies, and writes ``OUT/bench_neuro.json``.

Usage::

    python benchmarks/bench_neuro.py --tasks PerceptualDecisionMaking-v0 GoNogo-v0 \\
        DelayMatchSample-v0 --seeds 0 1 2 --steps 200000 --out runs/bench-neuro --jobs 2
    python benchmarks/bench_neuro.py --tasks GoNogo-v0 --seeds 0 --steps 2048 --out /tmp/b \\
        --only lif,lstm --eval-trials 50                                     # a smoke run
    python benchmarks/bench_neuro.py --only '' --also LOG1 LOG2 --out /tmp/t  # join logs only
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
TASKS = ("PerceptualDecisionMaking-v0", "GoNogo-v0", "DelayMatchSample-v0")
AGENTS = ("lif", "gru", "mlp", "lstm", "zoo", "untuned")
EVAL_SEED = 10_000


def _evaluate(task: str, act: Any, n_trials: int, n_envs: int) -> dict[str, Any]:
    """Deterministic trial accuracy of ``act`` on ``n_trials`` held-out trials.

    ``act(obs, episode_start) -> actions`` keeps its own recurrent state; ``episode_start`` is
    True for the envs whose episode starts at this observation.
    """
    from snrl.envs import make_vector_env
    from snrl.envs.trials import TrialTracker, summarize_trials

    envs = make_vector_env(task, n_envs, seed=EVAL_SEED)
    tracker = TrialTracker(n_envs)
    trials: list[dict[str, Any]] = []
    try:
        obs, info = envs.reset(seed=EVAL_SEED)
        tracker.reset(info)
        start = np.ones(n_envs, dtype=bool)
        steps = 0
        while len(trials) < n_trials:
            actions = act(obs, start)
            obs, _, term, trunc, info = envs.step(actions)
            trials += tracker.step(actions, info)
            start = np.logical_or(term, trunc)
            steps += 1
            if steps > 1000 * n_trials:  # an agent that never ends a trial cannot hang this
                break
    finally:
        envs.close()
    trials = trials[:n_trials]
    out = summarize_trials(trials)
    out.pop("accuracy_by_condition")
    return out


#: The resolved training settings each snrl run records (``result["config"]``), so that two
#: runs called "the default" can be checked to be one config (``lif`` trains 8 envs, the
#: no-flag default 16: docs/neuro.md, "Time profiles").
CONFIG_KEYS = ("backbone", "n_envs", "n_steps", "tau_m", "readout_tau_m", "dt", "substeps")
CONFIG_KEYS += ("tuned_from",)


def _agent_kwargs(agent: str, n_envs: int, lif_tau: float = 1.0) -> dict[str, Any]:
    """``snrl.PPO`` keywords of ``agent`` (beyond the task, seed and ``eval_interval=0``)."""
    if agent in ("zoo", "untuned"):  # `snrl train --env TASK [--no-tuned]`: nothing else given
        return {"backbone": "lif", "tuned": agent == "zoo"}
    taus = {"tau_m": lif_tau, "readout_tau_m": lif_tau} if agent == "lif" else {}
    return {"backbone": agent, "n_envs": n_envs, "tuned": False, **taus}


def _snrl_run(
    task: str, agent: str, seed: int, steps: int, n_envs: int, lif_tau: float = 1.0
) -> tuple[Any, Any, dict[str, Any]]:

    import snrl

    algo = snrl.PPO(task, seed=seed, eval_interval=0, **_agent_kwargs(agent, n_envs, lif_tau))
    config = {k: getattr(algo.config, k) for k in CONFIG_KEYS}
    t0 = time.perf_counter()
    algo.learn(steps, progress=False)
    train_s = time.perf_counter() - t0
    algo.close()
    algo.agent.eval()
    return snrl_policy(algo.agent), train_s, config


def snrl_policy(net: Any) -> Any:
    """``act(obs, episode_start) -> actions`` of a trained snrl agent: deterministic, with
    its own recurrent state, reset where an episode starts."""
    import torch

    state: dict[str, Any] = {}

    @torch.no_grad()
    def act(obs: np.ndarray, start: np.ndarray) -> np.ndarray:
        if "s" not in state:
            state["s"] = net.initial_state(obs.shape[0])
        elif start.any():
            state["s"] = net.reset_state(state["s"], torch.as_tensor(start))
        res = net.step(net.preprocess(obs), state["s"], deterministic=True)
        state["s"] = res.state
        return net.env_action(res.action)

    return act


#: RecurrentPPO settings: rl-baselines3-zoo's ``hyperparams/ppo_lstm.yml`` entry for
#: CartPoleNoVel-v1 (a memory task trained on 8 envs for 1e5 steps, the budget here); the
#: learning rate and clip range are annealed linearly to 0 (the zoo's ``lin_`` schedules).
#: snrl's PPO defaults are close to it (segments of 32, gamma 0.98, lambda 0.8, lr 1e-3
#: annealed, 10 epochs of one minibatch).
LSTM_SETTINGS: dict[str, dict[str, Any]] = {
    "zoo": {
        "n_steps": 32,
        "batch_size": 256,
        "n_epochs": 20,
        "gamma": 0.98,
        "gae_lambda": 0.8,
        "ent_coef": 0.0,
        "learning_rate": ("lin", 1e-3),
        "clip_range": ("lin", 0.2),
    },
    # the first version of this script: sb3-contrib's defaults (lr 3e-4, gamma 0.99, lambda
    # 0.95, clip 0.2) with 1024-step rollouts, 4 minibatches of 256 and 4 epochs
    "small-lr": {"n_steps": 128, "batch_size": 256, "n_epochs": 4},
}


def _lstm_kwargs(name: str) -> dict[str, Any]:
    """RecurrentPPO keyword arguments of the settings ``name`` (schedules made callables)."""
    out: dict[str, Any] = {}
    for key, value in LSTM_SETTINGS[name].items():
        if isinstance(value, tuple):  # ("lin", start): start * progress_remaining
            start = float(value[1])
            out[key] = lambda progress, start=start: start * progress
        else:
            out[key] = value
    return out


def _lstm_run(
    task: str, seed: int, steps: int, n_envs: int, settings: str = "zoo"
) -> tuple[Any, Any, list[dict[str, float]]]:
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import DummyVecEnv

    from snrl.envs import make_env
    from snrl.envs.neurogym import wrap_task

    def factory(i: int):
        def make():
            env = wrap_task(make_env(task))
            env.reset(seed=seed + i)
            return env

        return make

    class Curve(BaseCallback):
        """Training curve: per 10k env steps, the share of finished trials with NeuroGym
        ``performance`` > 0 (GoNogo reports 0 for a withheld no-go: a lower bound there)."""

        def __init__(self) -> None:
            super().__init__()
            self.points: list[dict[str, float]] = []
            self.window: list[float] = []

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if info.get("new_trial"):
                    self.window.append(float(info.get("performance", 0.0) > 0))
            if self.num_timesteps // 10_000 > len(self.points) and self.window:
                self.points.append(
                    {"steps": self.num_timesteps, "train_perf": float(np.mean(self.window))}
                )
                self.window = []
            return True

    vec = DummyVecEnv([factory(i) for i in range(n_envs)])
    vec.seed(seed)
    model = RecurrentPPO(
        "MlpLstmPolicy", vec, seed=seed, verbose=0, device="cpu", **_lstm_kwargs(settings)
    )
    curve = Curve()
    t0 = time.perf_counter()
    model.learn(steps, callback=curve)
    train_s = time.perf_counter() - t0
    vec.close()
    state: dict[str, Any] = {"s": None}

    def act(obs: np.ndarray, start: np.ndarray) -> np.ndarray:
        actions, state["s"] = model.predict(
            obs, state=state["s"], episode_start=start, deterministic=True
        )
        return np.asarray(actions)

    return act, train_s, curve.points


def run_one(
    task: str,
    agent: str,
    seed: int,
    steps: int,
    n_envs: int,
    eval_trials: int,
    lif_tau: float,
    lstm_settings: str = "zoo",
):
    """Train and evaluate one (task, agent, seed); returns its result dict."""
    import torch

    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=UserWarning)
    extra: dict[str, Any] = {}
    if agent == "lstm":
        act, train_s, curve = _lstm_run(task, seed, steps, n_envs, lstm_settings)
        extra = {"lstm_settings": lstm_settings, "train_curve": curve}
    else:
        act, train_s, config = _snrl_run(task, agent, seed, steps, n_envs, lif_tau)
        extra = {"config": config}
    ev = _evaluate(task, act, eval_trials, n_envs)
    return {
        "task": task,
        "agent": agent,
        "seed": seed,
        "steps": steps,
        "train_s": train_s,
        **ev,
        **extra,
    }


def _mean_std(values: list[float]) -> tuple[float, float]:
    vals = [v for v in values if isinstance(v, float) and math.isfinite(v)]
    if not vals:
        return math.nan, math.nan
    return statistics.fmean(vals), statistics.pstdev(vals) if len(vals) > 1 else 0.0


def summarize(results: list[dict[str, Any]], tasks: list[str], agents: list[str]) -> dict:
    """Mean/std accuracy and train time per (task, agent), and the LIF ratios per task."""
    table: dict[str, dict[str, Any]] = {}
    for task in tasks:
        table[task] = {}
        for agent in agents:
            rows = [r for r in results if r["task"] == task and r["agent"] == agent]
            acc = _mean_std([r["accuracy"] for r in rows])
            table[task][agent] = {
                "accuracy_mean": acc[0],
                "accuracy_std": acc[1],
                "train_s_mean": _mean_std([float(r["train_s"]) for r in rows])[0],
                "n_seeds": len(rows),
            }
        lif = table[task].get("lif", {}).get("accuracy_mean", math.nan)
        for other in ("lstm", "gru"):
            ref = table[task].get(other, {}).get("accuracy_mean", math.nan)
            table[task][f"lif_over_{other}"] = lif / ref if ref and math.isfinite(ref) else math.nan
        by_seed = {
            agent: {
                r["seed"]: r["accuracy"]
                for r in results
                if r["task"] == task and r["agent"] == agent
            }
            for agent in ("zoo", "untuned")
        }
        seeds = sorted(set(by_seed["zoo"]) & set(by_seed["untuned"]))
        if seeds:  # the tuned entry against the defaults, seed by seed
            table[task]["zoo_vs_untuned"] = {
                "seeds": seeds,
                "zoo": [by_seed["zoo"][s] for s in seeds],
                "untuned": [by_seed["untuned"][s] for s in seeds],
                "zoo_better": sum(by_seed["zoo"][s] > by_seed["untuned"][s] for s in seeds),
            }
    return table


def print_table(table: dict, agents: list[str]) -> None:
    head = "| task | " + " | ".join(f"{a} acc (train s)" for a in agents)
    print(head + " | LIF/LSTM | LIF/GRU |")
    print("|---" * (len(agents) + 3) + "|")
    for task, row in table.items():
        cells = [
            f"{row[a]['accuracy_mean']:.3f} ± {row[a]['accuracy_std']:.3f} "
            f"({row[a]['train_s_mean']:.0f})"
            for a in agents
        ]
        ratios = [f"{row[f'lif_over_{o}']:.3f}" for o in ("lstm", "gru")]
        print(f"| {task} | " + " | ".join(cells + ratios) + " |")
    for task, row in table.items():
        if "zoo_vs_untuned" in row:
            z = row["zoo_vs_untuned"]
            pairs = ", ".join(
                f"seed {s}: {a:.3f} vs {b:.3f}"
                for s, a, b in zip(z["seeds"], z["zoo"], z["untuned"])
            )
            print(
                f"{task}: tuned entry vs defaults, {pairs}: "
                f"better on {z['zoo_better']}/{len(z['seeds'])}"
            )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", default=list(TASKS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=200_000, help="env steps per run")
    p.add_argument("--n-envs", type=int, default=8)
    p.add_argument("--eval-trials", type=int, default=1000, help="held-out trials per run")
    p.add_argument("--only", default=",".join(AGENTS), help=f"agents, from {','.join(AGENTS)}")
    p.add_argument("--jobs", type=int, default=1, help="runs at the same time (processes)")
    p.add_argument("--lif-tau", type=float, default=1.0, help="LIF tau_m = readout_tau_m (s)")
    p.add_argument(
        "--lstm-settings",
        choices=sorted(LSTM_SETTINGS),
        default="zoo",
        help="RecurrentPPO hyperparameters (LSTM_SETTINGS; zoo: rl-baselines3-zoo's CartPoleNoVel)",
    )
    p.add_argument(
        "--also",
        nargs="*",
        default=[],
        help="result lines (JSON, one per run) printed by earlier runs of this script, e.g. "
        "the slow lstm runs done in another process: added to the table",
    )
    p.add_argument("--out", required=True, help="output directory (bench_neuro.json)")
    args = p.parse_args(argv)
    agents = [a.strip() for a in args.only.split(",") if a.strip()]
    bad = [a for a in agents if a not in AGENTS]
    if bad:
        p.error(f"--only {','.join(bad)}: unknown agent (choose from {','.join(AGENTS)})")
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    jobs = [
        (
            task,
            agent,
            seed,
            args.steps,
            args.n_envs,
            args.eval_trials,
            args.lif_tau,
            args.lstm_settings,
        )
        for task in args.tasks
        for seed in args.seeds
        for agent in agents
    ]
    results: list[dict[str, Any]] = []
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
            for res in pool.map(run_one, *zip(*jobs)):
                results.append(res)
                print(json.dumps(res), flush=True)
    else:
        for job in jobs:
            res = run_one(*job)
            results.append(res)
            print(json.dumps(res), flush=True)
    for path in args.also:
        for line in Path(path).read_text().splitlines():
            if line.startswith("{"):
                res = json.loads(line)
                if res.get("task") in args.tasks and res.get("agent") not in agents:
                    results.append(res)
    agents += sorted({r["agent"] for r in results} - set(agents))
    table = summarize(results, args.tasks, agents)
    print_table(table, agents)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from snrl.io import write_json_atomic

    write_json_atomic(
        out / "bench_neuro.json",
        {"args": vars(args), "results": results, "summary": table},
    )
    print(f"wrote {out / 'bench_neuro.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
