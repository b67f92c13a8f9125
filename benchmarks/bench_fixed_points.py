"""Fixed and slow points of a trained run's policy (``snrl analyze --fixed-points``): the
docs figure ``docs/img/fixed_points_pdm.png``, the numbers of the worked example in
docs/analysis.md, and what the search costs.

The run is read, never written: the analysis runs in Python (:func:`snrl.analysis.analyze`
with ``fixed_points=True``) and its figure goes to ``--png``. Printed (one JSON object):

- ``cpu_s``: CPU seconds of the fixed-point search alone
  (:meth:`snrl.analysis.fixed_points.FixedPointAnalysis.result`; ``time.process_time``,
  torch and BLAS on one thread), and ``wall_s`` of the same call;
- per frozen input: the points (kind, speed ``q``, largest ``|lambda|``), the main point's
  position on PC1/PC2 of the visited membranes and its mean smoothed rate (Hz), and, for
  the stimulus inputs, where the spiking network actually is at the stimulus's last step
  (mean PC1/PC2 over the trials of that condition);
- ``beta_sweep``: point counts per kind at other escape widths.

Usage::

    python benchmarks/bench_fixed_points.py /work/runs/pdm100 --png docs/img/fixed_points_pdm.png
"""

from __future__ import annotations

import argparse
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # before numpy: one BLAS thread, as torch gets one

import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402


def _end_of_stimulus(episodes: list, name: str, period: str = "stimulus") -> dict:
    """Condition label -> (trials, N) membranes at the last step of ``period`` of each trial."""
    from snrl.analysis.fixed_points import _condition, _period_of

    out: dict[str, list] = {}
    for traj, _ in episodes:
        v = np.asarray(traj.activity[name].v, dtype=np.float64)
        for t in traj.trials:
            a, b = int(t["start_step"]), min(int(t["end_step"]) + 1, len(v))
            steps = [j for j in range(b - a) if _period_of(t, j, float(traj.dt)) == period]
            if steps:
                label = period + " " + ", ".join(f"{k}={x}" for k, x in _condition(t))
                out.setdefault(label, []).append(v[a + steps[-1]])
    return {k: np.stack(x) for k, x in out.items()}


def _feed(fpa, episodes: list, agent, name: str) -> None:
    import torch

    for traj, _ in episodes:
        with torch.no_grad():
            x = agent.preprocess(traj.observations).cpu().double().numpy()
        fpa.add(traj.activity[name], x, traj.trials, traj.dt)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a trained run directory (read only)")
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--beta", type=float, default=0.3)
    p.add_argument("--sweep", default="0.1,1.0", help="other escape widths, comma-separated")
    p.add_argument("--png", default=None, help="write the figure here (a 256-colour PNG)")
    args = p.parse_args(argv)

    import torch

    torch.set_num_threads(1)
    import snrl
    from snrl.analysis import analyze
    from snrl.analysis.figures import save_figure
    from snrl.analysis.fixed_points import FixedPointAnalysis
    from snrl.analysis.trials import pca

    algo = snrl.load(str(Path(args.run) / "checkpoints" / "best.pt"))
    episodes: list = []
    res = analyze(
        algo,
        episodes=args.episodes,
        seed=0,
        decode=False,
        compare_initial=False,
        fixed_points=True,
        fixed_points_beta=args.beta,
        on_episode=lambda k, traj: episodes.append((traj, k)),
    )
    fpa = res.fixed_points
    t0, c0 = time.perf_counter(), time.process_time()
    result = fpa.result()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    name, n = fpa.name, fpa.layer.recurrent_weights.shape[0]
    proj = pca(np.concatenate(fpa.states).astype(np.float64)[:, :n], 3)  # as the analysis's
    ends = _end_of_stimulus(episodes, name)
    dt = float(algo.config.dt)
    threshold = float(fpa.layer.params.threshold)
    rows = []
    for entry, pl in zip(result["inputs"], result["_plot"]["inputs"]):
        row = {k: entry[k] for k in ("label", "n_steps", "n_stable", "n_unstable", "n_slow")}
        row["n_not_converged"] = entry["n_not_converged"]
        row["points"] = [
            {k: pt[k] for k in ("kind", "speed", "max_abs_eigenvalue", "n_starts")}
            for pt in entry["points"]
        ]
        main_i = entry["main_point"]
        if main_i is not None:
            row["main_pc12"] = [round(float(c), 1) for c in pl["pcs"][main_i][:2]]
            v = pl["states"][main_i][:n]  # its smoothed rates, from the map's own sigmoid
            r = 1.0 / (1.0 + np.exp(-(v - threshold) / args.beta))
            row["main_rate_hz"] = round(float(r.mean() / dt), 3)
            row["main_n_above_half"] = int((r > 0.5).sum())
        if entry["label"] in ends:
            e = ends[entry["label"]]
            row["spiking_end_pc12"] = [
                round(float(c), 1) for c in ((e - proj["mean"]) @ proj["components"].T).mean(0)[:2]
            ]
            row["n_trials"] = len(e)
        rows.append(row)
    sweep = {}
    for beta in [float(b) for b in args.sweep.split(",") if b]:
        other = FixedPointAnalysis(fpa.layer, name=name, beta=beta)
        _feed(other, episodes, algo.agent, name)
        sweep[str(beta)] = {
            e["label"]: [e["n_stable"], e["n_unstable"], e["n_slow"], e["n_not_converged"]]
            for e in other.summary()["inputs"]
        }
    if args.png:
        sys.path.insert(0, str(Path(__file__).parent))
        from docs_png import palette_png

        with tempfile.TemporaryDirectory() as tmp:
            src = save_figure(fpa.figure(f"policy: {name}"), Path(tmp) / "fixed_points.png")
            palette_png(src, Path(args.png))
    out = {
        "run": args.run,
        "episodes": args.episodes,
        "beta": args.beta,
        "neurons": int(n),
        "n_visited_states": result["n_visited_states"],
        "pca_explained_variance_ratio": [
            round(x, 3) for x in result["pca_explained_variance_ratio"]
        ],
        "parameters": result["parameters"],
        "cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "inputs": rows,
        "beta_sweep [stable, unstable, slow, not converged]": sweep,
    }
    print(json.dumps(out, indent=1))
    algo.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
