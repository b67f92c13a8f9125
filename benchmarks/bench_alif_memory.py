"""Where does an ALIF network keep the sample of DelayMatchSample during the delay? Decode
the sample identity at each step of the trial from the adaptation variable ``a``, the
membrane ``v`` and the smoothed spikes of the policy's ALIF layer (docs/analysis.md).

The run is read, never written. Trials are aligned at their start (only trials with
``t0 = 0``: the first trial of an episode starts one step late, NeuroGym's reset step); each
trial's ``--steps`` steps from its start are kept; spikes are smoothed by the causal boxcar of
``snrl analyze`` (:func:`snrl.analysis.dynamics.smooth_trial`, ``--smooth`` steps). Decoding:
:func:`snrl.analysis.dynamics.decode_over_time` (shrinkage LDA, 5-fold cross-validation,
``--shuffles`` label shuffles for the null). Printed: one JSON object with, per variable,
the accuracy at each step and its mean over the delay period, the shuffle 95 % quantile, and
the run's trial accuracy over the same trials.

Usage::

    python benchmarks/bench_alif_memory.py runs/dms_alif --episodes 40
"""

from __future__ import annotations

import argparse
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy: one BLAS thread, as torch gets one

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402


def collect(algo, episodes: int, steps: int, smooth: int, variable: str) -> dict:
    """Per trial (t0 = 0, at least ``steps`` steps): the (steps, N) traces and the label."""
    import torch

    from snrl.analysis.dynamics import smooth_trial
    from snrl.analysis.trials import condition_key

    name = algo.agent.actor.spiking_names[0]
    out: dict = {"a": [], "v": [], "spikes": [], "label": [], "correct": [], "periods": None}
    for seed in range(episodes):
        with torch.no_grad():
            traj = algo.rollout(seed=seed, record=False)
        act = traj.activity[name]
        a, v, z = (np.asarray(x, dtype=np.float64) for x in (act.extra["a"], act.v, act.spikes))
        for t in traj.trials:
            s = int(t["start_step"])
            if float(t["t0"]) != 0.0 or int(t["end_step"]) + 1 - s < steps:
                continue
            out["a"].append(a[s : s + steps])
            out["v"].append(v[s : s + steps])
            out["spikes"].append(smooth_trial(z[s : s + steps], smooth))
            out["label"].append(condition_key(t, variable) or "")
            out["correct"].append(bool(t["correct"]))
            out["periods"] = out["periods"] or t["periods"]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a trained ALIF run on DelayMatchSample-v0 (read only)")
    p.add_argument("--episodes", type=int, default=40)
    p.add_argument("--steps", type=int, default=23, help="steps from each trial's start")
    p.add_argument("--smooth", type=int, default=3, help="boxcar of the spikes (steps)")
    p.add_argument("--shuffles", type=int, default=20)
    p.add_argument("--variable", default="sample_theta", help="the trial condition decoded")
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    import snrl
    from snrl.analysis.dynamics import decode_over_time

    algo = snrl.load(str(Path(args.run) / "checkpoints" / "best.pt"))
    data = collect(algo, args.episodes, args.steps, args.smooth, args.variable)
    dt = float(algo.config.dt)
    lo, hi = data["periods"]["delay"]
    delay = [j for j in range(args.steps) if lo - 1e-9 <= j * dt < hi - 1e-9]
    labels = np.array(data["label"], dtype=object)
    res = {
        "run": args.run,
        "trials": len(labels),
        "trial_accuracy": float(np.mean(data["correct"])),
        "classes": {str(c): int((labels == c).sum()) for c in np.unique(labels.astype(str))},
        "periods_s": data["periods"],
        "delay_steps": delay,
        "config": {k: algo.config.__dict__.get(k) for k in ("dt", "tau_m", "readout_tau_m")},
        "tau_a": float(np.mean(np.asarray(algo.agent.actor.layers["alif0"].tau_a.detach()))),
        "beta": float(algo.agent.actor.layers["alif0"].beta),
    }
    for key in ("a", "v", "spikes"):
        d = decode_over_time(np.stack(data[key]), labels, k=5, n_shuffles=args.shuffles)
        acc = [None if x is None else round(x, 3) for x in d["accuracy"]]
        q95 = [None if x is None else round(x, 3) for x in d["null_q95"]]
        res[key] = {
            "accuracy": acc,
            "null_q95": q95,
            "delay_mean": round(float(np.mean([acc[j] for j in delay if acc[j] is not None])), 3),
            "delay_end": acc[delay[-1]],
            "chance": d["chance"][delay[-1]],
        }
    print(json.dumps(res, indent=1))
    algo.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
