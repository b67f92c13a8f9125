"""Time profiles (issue 34): the "task" profile (one 100 ms neuron step per NeuroGym step, 1 s
membranes: rate units) against the "biological" one (10 ms neuron steps, 20 ms membranes, a
readout of one task step, ALIF adaptation of 1.5 s and strength 20) on the same tasks, seed
and budget.

Every run goes through the ``snrl`` command as a user would run it, one at a time::

    snrl train --algo ppo --env TASK --backbone B --hidden 128 --dale --steps N --seed S \\
        --set time_profile=P --out OUT/TASK-B-P
    snrl eval OUT/TASK-B-P --episodes E --seed 10000 --checkpoint last     # held-out trials
    snrl analyze OUT/TASK-B-P --episodes A --checkpoint last --no-decode --no-initial

and the final model is measured: trial accuracy over ``E`` held-out episodes (20 trials
each, env seeds from 10000, as ``snrl eval`` counts them; also with fixation held, Yang et
al.'s criterion, and the fraction of trials with a fixation break), the training wall time,
and from
``analysis/summary.json`` the policy's firing rate (Hz), ISI CV and Fano factor of its E and
I neurons. ``gru`` runs (no neuron time; the profile does not apply) give the 0.95x target.
It prints a Markdown table and writes ``OUT/bench_time_profile.json``.

Usage::

    python benchmarks/bench_time_profile.py --tasks PerceptualDecisionMaking-v0 \\
        DelayMatchSample-v0 --runs lif:biological alif:biological lif:task gru:task \\
        --seed 11 --steps 100000 --out runs/time-profile
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

EVAL_SEED = 10_000
SPIKING = ("lif", "alif", "spylif")


def _snrl(*args: str) -> str:
    """Run ``python -m snrl.cli ARGS`` and return its stdout (raises on a non-zero exit)."""
    cmd = [sys.executable, "-m", "snrl.cli", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def _firing(run: Path) -> dict[str, Any]:
    """Rate (Hz), ISI CV and Fano factor of the policy's first layer, per population."""
    summary = json.loads((run / "analysis" / "summary.json").read_text(encoding="utf-8"))
    layer = next(iter(summary["layers"].values()))
    out: dict[str, Any] = {"dt": summary["dt"], "parameters": summary.get("parameters")}
    for pop in ("E", "I"):
        stats = layer["populations"][pop]
        out[pop] = {k: stats[k]["value"] for k in ("rate_mean", "cv_isi_mean", "fano_mean")}
    return out


def run_one(task: str, backbone: str, profile: str, args: argparse.Namespace) -> dict[str, Any]:
    """Train, evaluate and (spiking) analyse one run; returns its result dict."""
    run = Path(args.out) / f"{task}-{backbone}-{profile}"
    train = ["train", "--algo", "ppo", "--env", task, "--backbone", backbone, "--hidden"]
    train += [str(args.hidden), "--dale", "--steps", str(args.steps), "--seed", str(args.seed)]
    train += ["--set", f"time_profile={profile}", "--out", str(run), "--force"]
    for kv in args.set:
        train += ["--set", kv]
    t0 = time.perf_counter()
    _snrl(*train)
    train_s = time.perf_counter() - t0
    ev = json.loads(
        _snrl(
            "eval",
            str(run),
            "--episodes",
            str(args.episodes),
            "--seed",
            str(EVAL_SEED),
            "--checkpoint",
            "last",
        )
        .strip()
        .splitlines()[-1]
    )
    config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    config = config.get("config", config)
    result = {
        "task": task,
        "backbone": backbone,
        "time_profile": profile,
        "seed": args.seed,
        "steps": args.steps,
        "train_s": train_s,
        "accuracy": ev.get("accuracy"),
        "accuracy_fixation_held": ev.get("accuracy_fixation_held"),
        "fixation_breaks": ev.get("fixation_breaks"),
        "n_trials": ev.get("n_trials"),
        "time": {
            k: config.get(k) for k in ("dt", "substeps", "tau_m", "readout_tau_m", "tau_a", "beta")
        },
        "sets": list(args.set),
    }
    if backbone in SPIKING:
        _snrl(
            "analyze",
            str(run),
            "--episodes",
            str(args.analyze_episodes),
            "--checkpoint",
            "last",
            "--no-decode",
            "--no-initial",
        )
        result["firing"] = _firing(run)
    return result


def _row(r: dict[str, Any]) -> str:
    t = r["time"]
    profile = r["time_profile"] + "".join(f", {kv}" for kv in r.get("sets", []))
    cells = [r["task"].removesuffix("-v0"), r["backbone"], profile]
    if r["backbone"] in SPIKING:
        cells.append(f"{t['dt'] * 1e3:g} ms x {t['substeps']}, tau_m {t['tau_m'] * 1e3:g} ms")
    else:
        cells.append("-")
    held, breaks = r.get("accuracy_fixation_held"), r.get("fixation_breaks")
    cells += [
        f"{r['accuracy']:.3f}",
        "-" if held is None else f"{held:.3f} ({'-' if breaks is None else f'{breaks:.2f}'})",
        f"{r['train_s'] / 60:.1f}",
    ]
    f = r.get("firing")
    for pop in ("E", "I"):
        s = f[pop] if f else None
        cells.append(
            f"{s['rate_mean']:.1f} / {s['cv_isi_mean']:.2f} / {s['fano_mean']:.2f}" if s else "-"
        )
    return "| " + " | ".join(cells) + " |"


def print_table(results: list[dict[str, Any]]) -> None:
    print(
        "| task | backbone | time_profile | neuron time | accuracy | fixation held (breaks) "
        "| train min | E: Hz / ISI CV / Fano | I: Hz / ISI CV / Fano |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(_row(r))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", default=["PerceptualDecisionMaking-v0"])
    p.add_argument(
        "--runs",
        nargs="+",
        default=["lif:biological", "lif:task"],
        help="BACKBONE:PROFILE pairs (gru ignores the profile)",
    )
    p.add_argument("--seed", type=int, default=11)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--episodes", type=int, default=50, help="held-out episodes (20 trials each)")
    p.add_argument("--analyze-episodes", type=int, default=10)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config key for every run, as snrl train's --set (repeatable)",
    )
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "bench_time_profile.json"
    results = json.loads(path.read_text(encoding="utf-8")) if path.exists() else []
    for task in args.tasks:
        for pair in args.runs:
            backbone, profile = pair.split(":")
            r = run_one(task, backbone, profile, args)
            results = [
                x
                for x in results
                if x["task"] != task or (x["backbone"], x["time_profile"]) != (backbone, profile)
            ] + [r]
            path.write_text(json.dumps(results, indent=1), encoding="utf-8")
            print(_row(r), flush=True)
    print_table(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
