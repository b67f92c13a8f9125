"""Task variance, its clusters, and the lesion of each cluster, on a multitask run: the
numbers and figures of docs/analysis.md ("Many tasks: task variance and cluster lesions").

For a run trained with ``snrl train --tasks A,B,...`` (RUN, read only: nothing is written
into it), this

1. evaluates ``--tv-episodes`` episodes (env seeds 0...; every task in the same share) and
   computes the task variance of each neuron and its clusters
   (:func:`snrl.analysis.taskvar.task_variance_analysis`, the same as ``snrl analyze``);
2. lesions (silences) each cluster in turn over ``--episodes`` episodes (env seeds 123...,
   as ``snrl perturb --lesion cluster --cluster K``) and, as a control, as many neurons drawn
   at random from the other clusters' active neurons with the same E/I counts (seed 0);
3. prints a table of per-task accuracy (unperturbed, and the change under each lesion),
   writes ``multitask_analysis.json``, ``task_variance.png`` and ``cluster_lesions.png`` into
   ``--out`` and, with ``--img-dir``, small PNG copies (``benchmarks/docs_png.py``).

Usage::

    python benchmarks/bench_multitask_analysis.py /tmp/mt_lif --out /tmp/mt_bench \\
        --img-dir docs/img --threads 1
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

import snrl
from snrl.analysis.figures import save_figure
from snrl.analysis.perturb import (
    Perturbation,
    PerturbationSpec,
    evaluate_perturbed,
    perturbation_report,
)
from snrl.analysis.taskvar import task_variance_analysis, task_variance_figure


def _random_control(entry: dict, cluster: dict, seed: int) -> list[int]:
    """As many neurons as ``cluster`` with its E/I counts, drawn from the other clusters'
    active neurons."""
    rng = np.random.default_rng(seed)
    labels = np.asarray(entry["labels"])
    sign = np.asarray(entry["sign"]) if entry.get("sign") is not None else None
    pool = np.flatnonzero((labels >= 0) & (labels != cluster["cluster"]))
    if sign is None:
        return sorted(int(i) for i in rng.choice(pool, cluster["size"], replace=False))
    out = []
    for s, n in ((1, cluster["n_E"]), (-1, cluster["n_I"])):
        cand = pool[sign[pool] == s]
        out += [int(i) for i in rng.choice(cand, min(n, cand.size), replace=False)]
    return sorted(out)


def lesion_figure(entry: dict, rows: list[dict], base: dict, n_trials: dict) -> object:
    """Clusters x tasks: the change of accuracy when the cluster is silenced (left) and when
    as many random neurons are (right)."""
    from matplotlib.figure import Figure

    tasks = entry["tasks"]
    short = [t.removesuffix("-v0").replace("DecisionMaking", "DM") for t in tasks]
    fig = Figure(figsize=(8.6, 0.45 * len(rows) + 1.9), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, key, title in (
        (axes[0], "effect", "cluster silenced"),
        (axes[1], "control", "as many random neurons silenced (same E/I)"),
    ):
        m = np.array([[r[key][t] for t in tasks] for r in rows], dtype=np.float64)
        im = ax.imshow(m, cmap="RdBu", vmin=-0.6, vmax=0.6, aspect="auto")
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                white = abs(m[i, j]) > 0.4  # readable on the dark cells
                ax.text(j, i, f"{m[i, j]:+.2f}", ha="center", va="center", fontsize=7,
                        color="w" if white else "k")  # fmt: skip
        ax.set_xticks(range(len(tasks)), short, rotation=20, ha="right", fontsize=7)
        ax.set_title(title, fontsize=8)
    labels = [
        f"{r['cluster']} ({r['size']}: {r['n_E']}E/{r['n_I']}I) "
        + "+".join(s for s, v in zip(short, r["mean_normalized"]) if v >= 0.5)
        for r in rows
    ]  # the tasks where the cluster's mean normalized variance is >= 0.5
    axes[0].set_yticks(range(len(rows)), labels, fontsize=7)
    axes[0].set_ylabel("task-variance cluster (size) and its tasks")
    fig.colorbar(im, ax=axes, label="accuracy change (perturbed - unperturbed)", shrink=0.8)
    acc = ", ".join(f"{s} {base[t]:.2f} (n={n_trials[t]})" for s, t in zip(short, tasks))
    fig.suptitle(f"Cluster lesions; unperturbed accuracy: {acc}", fontsize=8)
    return fig


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("run", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--checkpoint", default="best", choices=("best", "last"))
    p.add_argument("--tv-episodes", type=int, default=40)
    p.add_argument("--episodes", type=int, default=40)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--img-dir", type=Path, default=None)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    algo = snrl.load(args.run / "checkpoints" / f"{args.checkpoint}.pt")
    entry = task_variance_analysis(algo, episodes=args.tv_episodes, seed=0)
    tasks = entry["tasks"]
    print(f"task variance: {entry['n_active']} of {len(entry['labels'])} neurons active, "
          f"{entry['n_clusters']} clusters, trials per task {entry['n_trials']}")  # fmt: skip
    rows, base, n_base = [], None, None
    for c in entry["clusters"]:
        spec = PerturbationSpec(kind="lesion", cluster=c["cluster"])
        rep = perturbation_report(algo, spec, n_episodes=args.episodes, seed=123, clusters=entry)
        if base is None:
            base = rep["unperturbed"]["accuracy_by_task"]
            n_base = {t: 0 for t in tasks}
            # trials per task of the unperturbed evaluation
            res = evaluate_perturbed(algo, None, n_episodes=rep["episodes"], seed=123)
            for tr in res["trials"]:
                n_base[tr["conditions"]["task"]] += 1
        ctrl = Perturbation(silenced={entry["layer"]: _random_control(entry, c, seed=0)})
        cres = evaluate_perturbed(algo, ctrl, n_episodes=rep["episodes"], seed=123)
        rows.append(
            {
                **{k: c[k] for k in ("cluster", "size", "n_E", "n_I", "mean_normalized")},
                "accuracy": rep["perturbed"]["accuracy_by_task"],
                "effect": rep["effect"]["accuracy_by_task"],
                "control": {t: cres["accuracy_by_task"][t] - base[t] for t in tasks},
            }
        )
    algo.close()
    short = [t.removesuffix("-v0") for t in tasks]
    print("cluster (size E/I) | peak-normalized TV per task | accuracy change per task | "
          "random control")  # fmt: skip
    print("unperturbed accuracy: " + ", ".join(f"{s} {base[t]:.3f} (n={n_base[t]})"
                                               for s, t in zip(short, tasks)))  # fmt: skip
    for r in rows:
        tv = " ".join(f"{v:.2f}" for v in r["mean_normalized"])
        eff = " ".join(f"{r['effect'][t]:+.3f}" for t in tasks)
        ctl = " ".join(f"{r['control'][t]:+.3f}" for t in tasks)
        print(f"{r['cluster']} ({r['size']} {r['n_E']}/{r['n_I']}) | {tv} | {eff} | {ctl}")
    args.out.mkdir(parents=True, exist_ok=True)
    tv_png = save_figure(task_variance_figure(entry), args.out / "task_variance.png")
    les_png = save_figure(
        lesion_figure(entry, rows, base, n_base), args.out / "cluster_lesions.png"
    )
    record = {
        "run": str(args.run),
        "checkpoint": args.checkpoint,
        "tv_episodes": entry["episodes"],
        "lesion_episodes": args.episodes,
        "task_variance": entry,
        "unperturbed_accuracy": base,
        "unperturbed_trials": n_base,
        "lesions": rows,
        "seconds": time.perf_counter() - t0,
    }
    (args.out / "multitask_analysis.json").write_text(json.dumps(record, indent=1))
    print(f"wrote {args.out} in {record['seconds']:.0f} s")
    if args.img_dir is not None:
        sys.path.insert(0, str(Path(__file__).parent))
        from docs_png import palette_png

        for src, name in ((tv_png, "multitask_task_variance.png"),
                          (les_png, "multitask_cluster_lesions.png")):  # fmt: skip
            before, after = palette_png(src, args.img_dir / name)
            print(f"{args.img_dir / name}: {after} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
