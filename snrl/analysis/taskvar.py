"""Task variance of each neuron of a network trained on several tasks, and the clusters of
neurons it defines (Yang et al., 2019, Nature Neuroscience 22:297, Fig. 2).

Definitions (what :func:`task_variance_analysis` computes, on the first spiking layer of the
policy):

* **Activity**: a neuron's spikes per neuron step, averaged over the ``substeps`` neuron
  steps of each env step, then smoothed by a causal boxcar of ``smooth`` env steps that does
  not reach before the trial's start (as :class:`snrl.analysis.dynamics.TrialActivity`).
  Unit: spikes per neuron step.
* **Task variance** ``TV[i, k]`` of neuron ``i`` in task ``k``: the trials of task ``k`` are
  aligned at their start; at each step ``t`` from the start the variance across the trials
  that last that long (population variance, ``ddof=0``, as Yang et al.) of the neuron's
  activity; then the mean over the steps ``t`` that at least ``min_trials`` trials reach.
  Yang et al. take the variance across the stimulus conditions of one fixed trial
  structure; here the trials of a task are the conditions (NeuroGym draws them, and their
  lengths vary), so trial-to-trial variability of a deterministic policy is the variability
  the task's stimuli cause. Unit: (spikes per neuron step)^2.
* **Normalized task variance**: ``TV[i, :] / max_k TV[i, k]`` (1 in the neuron's most
  variable task).
* **Active neurons**: those whose summed task variance ``sum_k TV[i, k]`` is at least
  ``min_variance`` (Yang et al. use 1e-3 for their rate units); only they are clustered.
* **Clusters**: agglomerative clustering (Ward linkage, Euclidean distance, scipy) of the
  active neurons' normalized task-variance vectors, cut at the number of clusters ``k`` in
  ``2 .. max_clusters`` with the largest mean silhouette score (Yang et al. use k-means with
  the silhouette score; Ward's tree is deterministic and nested). The silhouette of neuron
  ``i`` is ``(b - a) / max(a, b)``, ``a``: its mean distance to the other members of its
  cluster, ``b``: the smallest mean distance to the members of another cluster (0 for a
  neuron alone in its cluster). Clusters are numbered by the task of their largest mean
  normalized variance (rule-channel order), then by size; inactive neurons get ``-1``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from snrl.analysis.dynamics import smooth_trial
from snrl.analysis.perturb import evaluate_perturbed, is_multitask
from snrl.errors import UserError

__all__ = [
    "TaskActivityRecorder",
    "cluster_task_variance",
    "silhouette_score",
    "task_variance",
    "task_variance_analysis",
    "task_variance_figure",
]

_DEFINITION = __doc__.split("\n\n", 2)[2].strip()


def task_variance(
    activity: Mapping[str, Sequence[np.ndarray]], *, min_trials: int = 2
) -> np.ndarray:
    """Task variance of each neuron in each task (module docstring).

    Args:
        activity: task -> its trials' activity, each (T_trial, N), aligned at the trial's
            start (lengths may differ).
        min_trials: the steps from the start that fewer trials reach are left out.

    Returns:
        (N, K) float64, tasks in the order of ``activity``; NaN for a task none of whose
        steps ``min_trials`` trials reach.
    """
    cols = []
    n = None
    for task, trials in activity.items():
        trials = [np.asarray(x, dtype=np.float64) for x in trials]
        if not trials:
            raise UserError(f"task {task} has no trials (record more episodes)")
        if n is None:
            n = trials[0].shape[1]
        length = max(x.shape[0] for x in trials)
        stack = np.full((len(trials), length, n), np.nan)
        for j, x in enumerate(trials):
            stack[j, : x.shape[0]] = x
        count = np.isfinite(stack[:, :, 0]).sum(0)
        keep = count >= int(min_trials)
        if not keep.any():
            cols.append(np.full(n, np.nan))
            continue
        var = np.nanvar(stack[:, keep], axis=0)  # (T_kept, N) across trials, ddof 0
        cols.append(var.mean(0))
    return np.stack(cols, axis=1)


def silhouette_score(x: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette of the rows of ``x`` (M, D) under ``labels`` (M,), Euclidean distance
    (module docstring; a neuron alone in its cluster scores 0)."""
    from scipy.spatial.distance import pdist, squareform

    d = squareform(pdist(np.asarray(x, dtype=np.float64)))
    lab = np.asarray(labels)
    uniq = np.unique(lab)
    if uniq.size < 2:
        raise ValueError("the silhouette needs at least two clusters")
    mean_to = np.stack([d[:, lab == c].mean(1) for c in uniq], axis=1)  # (M, C)
    sizes = np.array([(lab == c).sum() for c in uniq])
    own = np.searchsorted(uniq, lab)
    rows = np.arange(lab.size)
    n_own = sizes[own]
    a = np.where(n_own > 1, mean_to[rows, own] * n_own / np.maximum(n_own - 1, 1), 0.0)
    other = mean_to.copy()
    other[rows, own] = np.inf
    b = other.min(1)
    s = np.where(n_own > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-300), 0.0)
    return float(s.mean())


def cluster_task_variance(
    tv: np.ndarray, *, min_variance: float = 1e-3, max_clusters: int = 12
) -> dict[str, Any]:
    """Normalize, select the active neurons and cluster them (module docstring).

    Args:
        tv: (N, K) task variance (:func:`task_variance`).
        min_variance: active when the summed task variance reaches it.
        max_clusters: the largest number of clusters tried.

    Returns:
        ``{"normalized": (N, K) (NaN for inactive neurons), "active": bool (N,), "labels":
        int (N,) (-1: inactive), "n_clusters", "silhouette": {k: score}, "order": neuron
        indices sorted by cluster then by their peak task}``.
    """
    from scipy.cluster.hierarchy import fcluster, linkage

    tv = np.asarray(tv, dtype=np.float64)
    total = np.nansum(tv, axis=1)
    peak = np.nanmax(np.where(np.isfinite(tv), tv, -np.inf), axis=1)
    active = (total >= float(min_variance)) & (peak > 0)
    normalized = np.full(tv.shape, np.nan)
    normalized[active] = np.nan_to_num(tv[active]) / peak[active, None]
    labels = np.full(tv.shape[0], -1, dtype=np.int64)
    scores: dict[int, float] = {}
    x = normalized[active]
    m = x.shape[0]
    if m >= 3:
        tree = linkage(x, method="ward")
        best, best_labels = None, None
        for k in range(2, min(int(max_clusters), m - 1) + 1):
            lab = fcluster(tree, k, criterion="maxclust")
            if np.unique(lab).size < 2:
                continue
            scores[k] = silhouette_score(x, lab)
            if best is None or scores[k] > scores[best] + 1e-12:
                best, best_labels = k, lab
        if best_labels is not None:
            labels[active] = _renumber(x, best_labels)
    elif m >= 1:
        labels[active] = 0
    n_clusters = int(labels.max() + 1)
    peak_task = np.where(active, np.nanargmax(np.nan_to_num(normalized, nan=-1.0), axis=1), 0)
    order = np.lexsort((np.arange(labels.size), peak_task, np.where(active, labels, 10**9)))
    return {
        "normalized": normalized,
        "active": active,
        "labels": labels,
        "n_clusters": n_clusters,
        "silhouette": scores,
        "order": order,
    }


def _renumber(x: np.ndarray, lab: np.ndarray) -> np.ndarray:
    """Cluster ids 0.. ordered by the task of the cluster's largest mean normalized
    variance, then by size (largest first)."""
    ids = np.unique(lab)
    key = []
    for c in ids:
        mean = x[lab == c].mean(0)
        key.append((int(np.argmax(mean)), -int((lab == c).sum()), -float(mean.max())))
    order = sorted(range(ids.size), key=lambda j: key[j])
    new = {int(ids[j]): r for r, j in enumerate(order)}
    return np.array([new[int(c)] for c in lab], dtype=np.int64)


class TaskActivityRecorder:
    """A hook of :func:`snrl.agents.evaluation.evaluate_agent` that keeps the spikes of one
    spiking layer at every env step of every env ((B, N) per step, the substeps averaged).
    """

    def __init__(self, layer: str) -> None:
        self.layer = layer
        self.rows: list[np.ndarray] = []

    def start(self, envs: Any, tracker: Any) -> None:  # noqa: D102
        self.rows = []

    def step(self, envs: Any, live: np.ndarray) -> None:  # noqa: D102
        pass

    def after_step(self, res: Any, live: np.ndarray) -> None:
        """Keep this step's spikes of the layer (called after the agent's step)."""
        for layer in res.activity.spiking():
            if layer.name == self.layer:
                z = layer.spikes.detach().float().cpu().numpy()
                self.rows.append(z.mean(0) if z.ndim == 3 else z)

    def by_task(
        self, trials: Sequence[Mapping[str, Any]], smooth: int
    ) -> dict[str, list[np.ndarray]]:
        """Task -> the trials' smoothed activity (T_trial, N), aligned at their start."""
        z = np.stack(self.rows)  # (T, B, N)
        out: dict[str, list[np.ndarray]] = {}
        for t in trials:
            task = (t.get("conditions") or {}).get("task")
            a, b = int(t["start_step"]), min(int(t["end_step"]) + 1, z.shape[0])
            if task is None or b <= a:
                continue
            out.setdefault(str(task), []).append(smooth_trial(z[a:b, int(t["env"])], smooth))
        return out


def task_variance_analysis(
    algo: Any,
    *,
    episodes: int = 20,
    seed: int = 0,
    smooth: int = 3,
    min_trials: int = 2,
    min_variance: float = 1e-3,
    max_clusters: int = 12,
) -> dict[str, Any]:
    """Record a multitask run's policy on every task, and its task variance and clusters.

    The evaluation runs ``episodes`` episodes rounded up to a multiple of the task count,
    sharing the tasks as the run trained (env ``i`` runs task ``i % K``, or each trial's task
    drawn: :func:`snrl.tasks.multitask.trained_schedule`), seeded as
    :func:`snrl.analysis.perturb.evaluate_perturbed`, deterministic actions; the first
    spiking layer of the policy is analysed.

    Returns:
        A JSON-able dict: ``tasks``, ``layer``, ``n_trials`` per task, ``accuracy_by_task``,
        ``variance`` (N x K), ``normalized`` (N x K, None for inactive neurons), ``active``,
        ``labels``, ``order``, ``n_clusters``, ``silhouette``, ``clusters`` (per cluster:
        size, E/I counts, mean normalized variance per task), ``sign``, ``parameters``,
        ``definition``.

    Raises:
        UserError: the run is not a multitask run, or has no spiking layer.
    """
    from snrl.tasks.multitask import parse_task_ids

    if not is_multitask(algo):
        raise UserError(
            f"task variance needs a run trained on several tasks (snrl train --tasks A,B,...); "
            f"this run's env is {algo.config.env}"
        )
    tasks = list(parse_task_ids(algo.config.env))
    agent = algo.agent
    names = list(getattr(agent.actor, "spiking_names", None) or [])
    if not names:
        raise UserError("the policy has no spiking layer (task variance needs lif, alif or spylif)")
    layer = names[0]
    k = len(tasks)
    n_env = -(-max(int(episodes), 1) // k) * k
    rec = TaskActivityRecorder(layer)
    res = evaluate_perturbed(algo, None, n_episodes=n_env, seed=int(seed), record=rec)
    acts = rec.by_task(res.get("trials") or [], smooth)
    missing = [t for t in tasks if t not in acts]
    if missing:
        raise UserError(f"no completed trial of {', '.join(missing)} (give more --episodes)")
    acts = {t: acts[t] for t in tasks}
    tv = task_variance(acts, min_trials=min_trials)
    cl = cluster_task_variance(tv, min_variance=min_variance, max_clusters=max_clusters)
    sign = agent.actor.layers[layer].recurrent_sign
    sign_np = None if sign is None else sign.detach().cpu().numpy()
    clusters = []
    for c in range(cl["n_clusters"]):
        members = np.flatnonzero(cl["labels"] == c)
        entry = {
            "cluster": c,
            "size": int(members.size),
            "neurons": [int(i) for i in members],
            "mean_normalized": [float(v) for v in cl["normalized"][members].mean(0)],
        }
        if sign_np is not None:
            entry["n_E"] = int((sign_np[members] > 0).sum())
            entry["n_I"] = int((sign_np[members] < 0).sum())
        clusters.append(entry)

    def num(v: float) -> float | None:
        return float(v) if np.isfinite(v) else None

    return {
        "tasks": tasks,
        "layer": layer,
        "episodes": n_env,
        "seed": int(seed),
        "n_trials": {t: len(acts[t]) for t in tasks},
        "accuracy_by_task": res.get("accuracy_by_task"),
        "variance": [[num(v) for v in row] for row in tv],
        "normalized": [
            [num(v) for v in row] if a else None for row, a in zip(cl["normalized"], cl["active"])
        ],
        "active": [bool(a) for a in cl["active"]],
        "n_active": int(cl["active"].sum()),
        "labels": [int(v) for v in cl["labels"]],
        "order": [int(v) for v in cl["order"]],
        "n_clusters": cl["n_clusters"],
        "silhouette": {str(kk): float(v) for kk, v in cl["silhouette"].items()},
        "clusters": clusters,
        "sign": None if sign_np is None else [int(v) for v in sign_np],
        "unit": "(spikes per neuron step)^2",
        "parameters": {
            "smooth": int(smooth),
            "min_trials": int(min_trials),
            "min_variance": float(min_variance),
            "max_clusters": int(max_clusters),
            "linkage": "ward",
        },
        "definition": _DEFINITION,
    }


def task_variance_figure(entry: Mapping[str, Any], title: str = "policy") -> Any:
    """Neurons x tasks heat map of the normalized task variance (active neurons, sorted by
    cluster; cluster bands and E/I marked), beside the silhouette score per k. A bare
    matplotlib Figure."""
    from matplotlib.colors import to_rgb
    from matplotlib.figure import Figure

    from snrl.palette import E_COLOR, HIGHLIGHT_COLOR, I_COLOR

    tasks = [t.removesuffix("-v0") for t in entry["tasks"]]
    labels = np.asarray(entry["labels"])
    order = [i for i in entry["order"] if labels[i] >= 0]
    norm = np.array([entry["normalized"][i] for i in order], dtype=np.float64).reshape(
        len(order), len(tasks)
    )
    fig = Figure(figsize=(7.0, 4.8), layout="constrained")
    gs = fig.add_gridspec(1, 3, width_ratios=[0.25, 3, 2.2])
    ax_ei, ax, ax_s = (fig.add_subplot(gs[0, j]) for j in range(3))
    if order:
        im = ax.imshow(norm, aspect="auto", cmap="Greys", vmin=0, vmax=1, interpolation="none")
        fig.colorbar(im, ax=ax, label="normalized task variance", shrink=0.8)
        lab = labels[order]
        edges = np.flatnonzero(np.diff(lab)) + 0.5
        for e in edges:
            ax.axhline(e, color=HIGHLIGHT_COLOR, lw=0.8)
        starts = np.concatenate([[0], np.flatnonzero(np.diff(lab)) + 1])
        for s in starts:
            n_c = int((lab == lab[s]).sum())
            ax.text(
                len(tasks) - 0.45, s + n_c / 2 - 0.5, f"{lab[s]} ({n_c})", va="center",
                fontsize=7, color=HIGHLIGHT_COLOR,
            )  # fmt: skip
        sign = entry.get("sign")
        if sign is not None:
            col = [to_rgb(E_COLOR if sign[i] > 0 else I_COLOR) for i in order]
            ax_ei.imshow(np.array(col)[:, None], aspect="auto")
        ax_ei.set_title("E/I", fontsize=7)
    ax_ei.set_xticks([])
    ax_ei.set_yticks([])
    ax.set_xticks(range(len(tasks)), tasks, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(f"active neurons ({len(order)} of {labels.size}), by cluster")
    ax.set_yticks([])
    ax.set_title(f"{title}: {entry['layer']}, cluster (size) at right", fontsize=8)
    sil = entry.get("silhouette") or {}
    if sil:
        ks = sorted(int(k) for k in sil)
        ax_s.plot(ks, [sil[str(k)] for k in ks], "o-", color="k", ms=3)
        ax_s.axvline(entry["n_clusters"], color=HIGHLIGHT_COLOR, lw=0.8, ls="--")
    ax_s.set_xlabel("number of clusters k")
    ax_s.set_ylabel("mean silhouette (Ward)")
    ax_s.set_title(f"chosen k = {entry['n_clusters']}", fontsize=8)
    n_tr = ", ".join(f"{t.removesuffix('-v0')} {n}" for t, n in entry["n_trials"].items())
    fig.suptitle(f"Task variance (Yang et al. 2019); trials: {n_tr}", fontsize=8)
    return fig
