"""e-prop against BPTT (issue 35): peak memory against the sequence length, and learning.

* ``memory``: one gradient of a Dale 80/20 LIF (or ALIF) layer of 128 neurons under a leaky
  readout, batch 16, 20 inputs, a squared-error loss at every step, for T = 100 and 1000:
  BPTT (autograd through snrl's layer) and online e-prop (``snrl.functional.eprop``: the
  traces carried step by step, inputs and targets drawn step by step). Each measurement is a
  fresh subprocess (``torch.set_num_threads(1)``, glibc's ``MALLOC_MMAP_THRESHOLD_`` low so
  that large buffers go back to the system when freed); the number is the peak resident set
  during the gradient minus the resident set just before it (``ru_maxrss`` and
  ``/proc/self/statm``).
* ``learning``: snrl PPO (Dale LIF, the tuned settings of each task) with
  ``learning_rule=bptt``, ``eprop`` + ``eprop_feedback=symmetric`` and ``eprop`` + ``random``
  (``--rules``) on PerceptualDecisionMaking-v0, GoNogo-v0 and CartPole-v1 (``--tasks``; also
  DelayMatchSample-v0, and snrl.tasks' EvidenceAccumulation-v0 with its settings of
  :data:`SETTINGS`; with ``--backbone alif`` its ALIF neurons adapt with tau_a = 2 s),
  ``--steps`` env steps, seeds
  ``--seeds``; each run a subprocess (at most ``--jobs`` at once). Reported: the final
  deterministic evaluation (20 episodes, seed 1000 + seed): trial accuracy on the NeuroGym
  tasks, mean return on CartPole; and wall time. On the trial tasks also the env steps and
  the training trials to pycog's criterion (:func:`trials_to_criterion`: the first periodic
  evaluation, every ``--eval-interval`` env steps, with trial accuracy >= 0.85), read from the
  run's metrics columns.

Usage::

    python benchmarks/bench_eprop.py memory [--neuron lif|alif]
    python benchmarks/bench_eprop.py learning [--steps 30000] [--seeds 1,2,3] [--jobs 2]
        [--backbone lif|alif] [--tasks ID,ID] [--rules bptt,symmetric,random]
        [--eval-interval 2000]
    python benchmarks/bench_eprop.py learning --tasks EvidenceAccumulation-v0 --backbone alif \
        --rules bptt,symmetric --steps 30000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {
    **os.environ,
    "PYTHONPATH": str(ROOT),
    "OMP_NUM_THREADS": "1",
    "MALLOC_MMAP_THRESHOLD_": "65536",
}
B, F, N, K = 16, 20, 128, 2


def _rss_now() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _peak() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def child(module: str, call: str, check: bool = False) -> dict | None:
    """Run ``module.call`` (a benchmarks/ module, a call printing nothing else) in a fresh
    Python process with :data:`ENV` and return the JSON of its result; on failure print the
    child's stderr and return None (or raise, with ``check``)."""
    code = (
        f"import json,sys; sys.path.insert(0, 'benchmarks'); import {module} as b; "
        f"print(json.dumps(b.{call}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=ENV, cwd=ROOT, capture_output=True, text=True
    )
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        if check:
            out.check_returncode()
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def _memory_one(method: str, t_len: int, neuron: str) -> dict:
    """One gradient; returns the peak resident memory above the level before it."""
    import torch

    from snrl.layers import ALIFLayer, LIFLayer

    torch.set_num_threads(1)
    cls = LIFLayer if neuron == "lif" else ALIFLayer
    layer = cls(F, N, force_dale_law=True, tau_m=20e-3, seed=0)
    gen = torch.Generator().manual_seed(0)
    w_out = torch.randn(N, K, generator=gen) / N**0.5
    kappa = 0.9
    # warm up both paths on a short sequence (allocator pools, lazy inits)
    for _ in range(2):
        _grad(method, layer, w_out, kappa, 8, gen)
    base = _rss_now()
    start_peak = _peak()
    t0 = time.perf_counter()
    _grad(method, layer, w_out, kappa, t_len, gen)
    wall = time.perf_counter() - t0
    peak = _peak()
    extra = max(peak - base, 0) if peak > start_peak else 0
    return {"method": method, "T": t_len, "extra_bytes": extra, "wall_s": wall}


def _grad(method, layer, w_out, kappa, t_len, gen) -> None:
    """One gradient of the readout loss over ``t_len`` steps, by BPTT or online e-prop."""
    import torch

    from snrl.functional.eprop import accumulate, eligibility_step, initial_eligibility
    from snrl.functional.surrogate import derivative_fn

    adaptive = type(layer).__name__ == "ALIFLayer"
    if method == "bptt":
        x = torch.rand(t_len, B, F, generator=gen)
        target = torch.randn(t_len, B, K, generator=gen)
        layer.zero_grad()
        z = layer.run(x, layer.initial_state(B)).out
        y = torch.zeros(B, K)
        loss = 0.0
        for t in range(t_len):
            y = kappa * y + z[t] @ w_out
            loss = loss + 0.5 * ((y - target[t]) ** 2).sum()
        loss.backward()
        return
    # online e-prop: inputs, targets, traces and readout carried one step at a time
    with torch.no_grad():
        state = layer.initial_state(B)
        alpha = layer.decay("tau_m")
        rho = layer.decay("tau_a") if adaptive else None
        beta = layer.beta if adaptive else 0.0
        dpsi = derivative_fn(layer.spike_grad)
        el = initial_eligibility(B, F + N + 1, N, adaptive=adaptive, filtered=True)
        grad = torch.zeros(F + N + 1, N)
        ones = torch.ones(B, 1)
        y = torch.zeros(B, K)
        for _t in range(t_len):
            x = torch.rand(B, F, generator=gen)
            target = torch.randn(B, K, generator=gen)
            z_prev = state.z
            res = layer.run(x, state)
            state = res.state
            thr = layer.threshold + (beta * res.traces["a"] if adaptive else 0.0)
            psi = dpsi((res.v - thr).clone())
            pre = torch.cat([x, z_prev, ones], 1)
            el = eligibility_step(
                el,
                pre,
                psi,
                alpha,
                rho=rho,
                beta=beta,
                z_prev=z_prev,
                reset=layer.reset,
                kappa=kappa,
            )
            y = kappa * y + res.out @ w_out
            accumulate(grad, (y - target) @ w_out.T, el.fe)


def memory(args: argparse.Namespace) -> None:
    rows = []
    for method in ("bptt", "eprop"):
        for t_len in (100, 1000):
            call = f"_memory_one({method!r}, {t_len}, {args.neuron!r})"
            rows.append(child("bench_eprop", call, check=True))
    print(f"| method | T | peak memory above baseline (MiB) | wall (s) |  ({args.neuron})")
    print("|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['T']} | {r['extra_bytes'] / 2**20:.1f} | {r['wall_s']:.2f} |")
    for method in ("bptt", "eprop"):
        a, b = (r["extra_bytes"] for r in rows if r["method"] == method)
        print(f"{method}: T 100 -> 1000: x{b / max(a, 1):.2f}")


TASKS = {
    "PerceptualDecisionMaking-v0": "accuracy",
    "GoNogo-v0": "accuracy",
    "DelayMatchSample-v0": "accuracy",
    "CartPole-v1": "mean_return",
    "EvidenceAccumulation-v0": "accuracy",
}
#: Tasks of snrl.tasks that NeuroGym lacks: their env ids, and the settings every rule gets.
#: EvidenceAccumulation-v0 (45 steps of 50 ms a trial, the first of an episode 44): rollouts
#: of 90 steps put every trial's cues and decision in one sequence (a segment starts at a
#: trial's second step, its first silent one); ALIF neurons adapt with tau_a = 2 s (Bellec
#: et al. 2020's value), enough to carry the cues (0.05-1.05 s) over the 1.05 s delay.
OWN_TASKS = {"EvidenceAccumulation-v0": "snrl.tasks:EvidenceAccumulation-v0"}
SETTINGS = {"EvidenceAccumulation-v0": {"n_envs": 8, "n_steps": 90}}
TAU_A = {"EvidenceAccumulation-v0": 2.0}
RULES = {
    "bptt": {"learning_rule": "bptt"},
    "symmetric": {"learning_rule": "eprop", "eprop_feedback": "symmetric"},
    "random": {"learning_rule": "eprop", "eprop_feedback": "random"},
}


#: pycog's stopping criterion on its perceptual-decision tasks (85 % correct on validation
#: trials; Song, Yang & Wang 2016, PLoS Comput. Biol. 12:e1004792)
CRITERION = 0.85


def trials_to_criterion(
    metrics: Mapping[str, Sequence[float]],
    *,
    criterion: float = CRITERION,
    source: str = "eval",
    window: int = 200,
) -> dict[str, int] | None:
    """When a run first reached ``criterion`` trial accuracy, from its metrics columns.

    Args:
        metrics: A run's metrics columns (``snrl.training.metrics.read_metrics`` of its
            ``metrics.csv``, or the history ``learn`` returns): ``env_step``, ``trials``
            (training trials completed in the row's update), ``trial_accuracy`` (their
            fraction correct, actions sampled) and ``eval_trial_accuracy`` (the periodic
            deterministic evaluation; NaN in rows without one).
        criterion: The trial accuracy to reach.
        source: ``"eval"``: the first row whose periodic evaluation has accuracy >=
            ``criterion`` (pycog's rule: training stops when held-out trials pass it);
            ``"train"``: the first row at which the last ``window`` or more training trials
            (the fewest whole rows that hold ``window``) have accuracy >= ``criterion``.
        window: Training trials per window (``source="train"``).

    Returns:
        ``{"env_step": env steps at that row, "trials": training trials completed up to and
        including it, "updates": rows (updates) up to and including it}``, or None when the
        criterion is never reached (or the run logs no trial columns).
    """
    import numpy as np

    if source not in ("eval", "train"):
        raise ValueError(f"source={source!r} (use 'eval' or 'train')")
    if "trials" not in metrics:
        return None
    steps = np.asarray(metrics["env_step"], dtype=np.float64)
    n = np.nan_to_num(np.asarray(metrics["trials"], dtype=np.float64))
    if source == "eval":
        acc = np.asarray(metrics.get("eval_trial_accuracy", [np.nan] * len(n)), dtype=np.float64)
        hit = np.flatnonzero(np.nan_to_num(acc, nan=-1.0) >= criterion)
    else:
        frac = np.asarray(metrics["trial_accuracy"], dtype=np.float64)
        correct = np.where(np.isnan(frac), 0.0, frac * n)
        n = np.where(np.isnan(frac), 0.0, n)  # a row without scored trials adds none
        total = np.concatenate([[0.0], np.cumsum(n)])
        right = np.concatenate([[0.0], np.cumsum(correct)])
        end = total[1:]
        start = np.searchsorted(total, end - window, side="right") - 1  # fewest rows >= window
        ok = (end >= window) & (start >= 0)
        start = np.clip(start, 0, None)
        count = end - total[start]
        acc = np.where(ok, (right[1:] - right[start]) / np.maximum(count, 1.0), -1.0)
        hit = np.flatnonzero(ok & (acc >= criterion - 1e-12))
    if hit.size == 0:
        return None
    r = int(hit[0])
    trials = np.nan_to_num(np.asarray(metrics["trials"], dtype=np.float64))
    return {"env_step": int(steps[r]), "trials": int(trials[: r + 1].sum()), "updates": r + 1}


def _alif_nets(task: str, seed: int, tau_a: float) -> dict:
    """Policy and critic of a Dale 80/20 ALIF layer of 128 neurons whose adaptation time
    constant is ``tau_a`` seconds (the agents' config has no key for it), with the task-scale
    membranes the agents give the task (``TASK_SCALE_STEPS`` task steps)."""
    import snrl.tasks
    from snrl.agents.config import TASK_SCALE_STEPS
    from snrl.layers import ALIFParameters
    from snrl.networks.factory import build_backbone

    spec = snrl.tasks.make_spec(task)
    dt = spec.dt / 1000.0
    tau = TASK_SCALE_STEPS * dt
    params = ALIFParameters(tau_m=tau, tau_a=tau_a, dt=dt)

    def net(out: int, s: int):
        return build_backbone(
            "alif", spec.n_obs, out, params=params, force_dale_law=True, readout_tau_m=tau, seed=s
        )

    return {"policy": net(spec.n_act, seed), "critic": net(1, seed + 1)}


def _learn_one(
    env: str,
    rule: str,
    seed: int,
    steps: int,
    backbone: str,
    eval_interval: int = 2000,
    algo: str = "ppo",
) -> dict:
    import torch

    import snrl

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    kwargs = {**SETTINGS.get(env, {}), **RULES[rule]}
    if backbone == "alif" and env in TAU_A:
        kwargs.update(_alif_nets(env, seed, TAU_A[env]))
    else:
        kwargs["backbone"] = backbone
    cls = {"ppo": snrl.PPO, "a2c": snrl.A2C}[algo]
    model = cls(OWN_TASKS.get(env, env), seed=seed, eval_interval=eval_interval, **kwargs)
    history = model.learn(steps, progress=False)
    wall = time.perf_counter() - t0
    res = model.evaluate(n_episodes=20, seed=1000 + seed)
    return {
        "algo": algo,
        "env": env,
        "rule": rule,
        "seed": seed,
        "score": float(res[TASKS[env]]),
        "n_trials": res.get("n_trials"),
        "wall_s": wall,
        "updates": model.n_updates,
        "criterion": trials_to_criterion(history),
        "criterion_train": trials_to_criterion(history, source="train"),
        "eval_curve": [
            (int(s), round(float(a), 4))
            for s, a in zip(history["env_step"], history.get("eval_trial_accuracy", []))
            if a == a  # the rows with a periodic evaluation (NaN elsewhere)
        ],
    }


def _criterion_cell(hit: dict | None) -> str:
    """One run's cell of the criterion table: env steps (training trials), or not reached."""
    return "not reached" if hit is None else f"{hit['env_step']:,} ({hit['trials']:,})"


def learning(args: argparse.Namespace) -> None:
    seeds = [int(s) for s in args.seeds.split(",")]
    tasks = {t: TASKS[t] for t in args.tasks.split(",")}
    rules = args.rules.split(",")
    jobs = [(e, r, s) for e in tasks for s in seeds for r in rules]

    def run(job):
        e, r, s = job
        call = (
            f"{e!r}, {r!r}, {s}, {args.steps}, {args.backbone!r}, {args.eval_interval}, "
            f"{args.algo!r}"
        )
        row = child("bench_eprop", f"_learn_one({call})")
        if row is None:
            return None
        print(json.dumps(row), flush=True)
        return row

    with ThreadPoolExecutor(args.jobs) as pool:
        rows = [r for r in pool.map(run, jobs) if r is not None]

    def runs(env, rule):
        got = [r for r in rows if r["env"] == env and r["rule"] == rule]
        return sorted(got, key=lambda r: r["seed"])

    head = f"({args.algo.upper()}, {args.backbone}, {args.steps} steps)"
    print(f"\n| task | metric | {' | '.join(rules)} |  {head}")
    print("|---|---|" + "---|" * len(rules))
    for env, metric in tasks.items():
        cells = []
        for rule in rules:
            vals = [r["score"] for r in runs(env, rule)]
            mean = sum(vals) / len(vals) if vals else float("nan")
            cells.append(f"{mean:.3g} ({', '.join(f'{v:.3g}' for v in vals)})")
        print(f"| {env} | {metric} | {' | '.join(cells)} |")
    print(
        f"\nenv steps (training trials) to {CRITERION:.0%} trial accuracy, per seed: first "
        f"periodic evaluation (every {args.eval_interval} steps) / last >= 200 training trials"
    )
    print(f"| task | {' | '.join(rules)} |")
    print("|---|" + "---|" * len(rules))
    for env, metric in tasks.items():
        if metric != "accuracy":
            continue
        cells = [
            "; ".join(
                f"{_criterion_cell(r['criterion'])} / {_criterion_cell(r['criterion_train'])}"
                for r in runs(env, rule)
            )
            for rule in rules
        ]
        print(f"| {env} | {' | '.join(cells)} |")
    walls = {rule: sum(r["wall_s"] for r in rows if r["rule"] == rule) for rule in rules}
    print("total wall (s): " + ", ".join(f"{k} {v:.0f}" for k, v in walls.items()))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("memory")
    m.add_argument("--neuron", choices=("lif", "alif"), default="lif")
    lr = sub.add_parser("learning")
    lr.add_argument("--steps", type=int, default=30_000)
    lr.add_argument("--seeds", default="1,2,3")
    lr.add_argument("--jobs", type=int, default=2)
    lr.add_argument(
        "--tasks",
        default="PerceptualDecisionMaking-v0,GoNogo-v0,CartPole-v1",
        help=f"comma-separated env ids among {', '.join(TASKS)}",
    )
    lr.add_argument("--backbone", choices=("lif", "alif"), default="lif")
    lr.add_argument(
        "--algo",
        choices=("ppo", "a2c"),
        default="ppo",
        help="ppo (e-prop traces recomputed per minibatch) or a2c (online e-prop: traces "
        "carried across n-step windows)",
    )
    lr.add_argument("--rules", default=",".join(RULES), help=f"among {', '.join(RULES)}")
    lr.add_argument(
        "--eval-interval", type=int, default=2000, help="env steps between periodic evaluations"
    )
    args = p.parse_args()
    memory(args) if args.cmd == "memory" else learning(args)


if __name__ == "__main__":
    main()
