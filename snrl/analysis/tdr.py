"""Targeted dimensionality reduction, demixed variance and demixed PCA of trial activity
(numpy only).

Analyses of the trial activity :class:`snrl.analysis.dynamics.TrialActivity` records
(each trial's spikes per env step, causally smoothed, aligned to the trial start):

**Targeted dimensionality reduction (TDR)**, after Mante, Sussillo, Shenoy & Newsome 2013
(Nature 503:78, "Context-dependent computation by recurrent dynamics in prefrontal cortex",
Methods "Linear regression" and "Targeted dimensionality reduction"):

1. Each neuron's activity is z-scored: its mean and standard deviation over every trial and
   time bin are subtracted and divided out (a neuron that never varies is set to 0).
2. At each time bin ``t``, each neuron's z-scored activity across trials is regressed on the
   trials' task variables and a constant, ``r_i(t, k) = sum_v beta_{v,i}(t) F_v(k) +
   beta_{0,i}(t)`` (ordinary least squares over the trials that cover bin ``t``): one
   coefficient vector ``beta_v(t)`` (length N) per variable and bin.
3. Denoising: the coefficient vectors are projected onto the subspace of the first ``k``
   principal components of the condition-averaged z-scored activity (conditions: the
   distinct combinations of the variables' values; samples: conditions x the bins every
   condition covers), ``beta_v(t) <- D beta_v(t)``, ``D = sum_{a<=k} u_a u_a^T``.
   ``k = min(n_pcs, rank)``, ``n_pcs`` 12 by default (Mante et al. kept 12 PCs).
4. Each variable's axis is its denoised vector at the bin where its norm is largest,
   ``beta_v^max = beta_v(t_v^max)``.
5. The axes are orthogonalized by QR decomposition of ``[beta_1^max, beta_2^max, ...]`` in
   the order of the variables (choice, then stimulus, then context, as Mante et al. ordered
   choice before the sensory inputs and context): the first axis keeps its direction, each
   later one loses its component along the earlier ones. Signs: each axis points along its
   own ``beta^max`` (R's diagonal positive).
6. The condition-averaged z-scored trajectories are projected on the axes. The explained
   variance of an axis is the variance of the centred condition averages (every condition
   and common bin) along it, over their total variance.

**Demixed variance** (the marginalization step of demixed PCA, Kobak, Brendel,
Constantinidis, Feierstein, Kepecs, Mainen, Qi, Romo, Uchida & Machens 2016, eLife
5:e10989): the condition-averaged activity ``X[n, t, s, d]`` (neuron, time bin, stimulus
level, decision) on a full factorial table is split into the orthogonal parts
``X_t = <X>_sd - <X>``, ``X_s``, ``X_d``, ``X_ts``, ``X_td``, ``X_sd``, ``X_tsd``
(``<.>_a``: mean over the indices ``a``; each part is the mean over the other indices minus
every lower-order part), grouped as Kobak et al. do into **time** ``X_t``, **stimulus**
``X_s + X_ts``, **decision** ``X_d + X_td`` and **interaction** ``X_sd + X_tsd``. The share
of each group is its sum of squares over the total ``sum (X - <X>)^2``; the four shares sum
to 1. Only stimulus levels at which every decision has at least ``min_trials`` trials enter
the table (a trained agent rarely errs at strong stimuli, so those levels have no trials of
the wrong choice). The noise of the condition averages is not subtracted (Kobak et al.
estimate it from the trial-to-trial variability; not done here).

**Demixed PCA** (:func:`dpca`): per marginalization, the regularized reduced-rank
regression of Kobak et al. 2016 that finds an encoder and a decoder, with the ridge strength
fixed (``regularizer``), not chosen by cross-validation over trials as they do.
``snrl analyze`` reports the demixed variance (the marginalization) always and, with
``--dpca``, the components (:func:`dpca_analysis`: each component's time course per
condition, its explained variance and demixing; :func:`dpca_figure`).

Task variables (:func:`task_variables`) come from each trial's ``choice``, ``gt`` and
``conditions``: **choice** is -1 / +1 for the two most common choices among the ground-truth
values (the lower label -1; trials with another choice, such as staying in fixation, are left
out; without a ground truth, the two most common choices); **stimulus** is the ground truth's sign
(-1 for the lower of two ``gt`` values, +1 for the higher) times the coherence when the
trial has a numeric ``coh`` condition (PerceptualDecisionMaking: the signed coherence in %,
0 % for both ground truths), divided by its largest magnitude in the regression; **context**
is -1 / +1 for a two-valued ``context`` condition, when there is one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from snrl.analysis.dynamics import TrialActivity
from snrl.analysis.trials import condition_key, nan_mean_sem
from snrl.errors import UserError

__all__ = [
    "condition_table",
    "demixed_variance",
    "demixed_variance_trials",
    "dpca",
    "dpca_analysis",
    "dpca_figure",
    "marginalize",
    "targeted_dimensionality_reduction",
    "task_variables",
    "tdr_analysis",
    "tdr_figure",
    "zscore_activity",
]

#: the order in which the axes are orthogonalized (module docstring, step 5)
ORDER = ("choice", "stimulus", "context")


# ------------------------------------------------------------------ task variables
def _sorted_levels(values: Sequence[str]) -> list[str]:
    def key(v: str) -> tuple[int, Any]:
        try:
            return (0, float(v))
        except ValueError:
            return (1, v)

    return sorted(set(values) - {""}, key=key)


def _sign_of(labels: Sequence[str], keep: Sequence[str]) -> np.ndarray:
    """-1 / +1 for the lower / higher of the two ``keep`` labels, NaN otherwise."""
    lo, hi = _sorted_levels(keep)
    return np.array([-1.0 if v == lo else 1.0 if v == hi else np.nan for v in labels])


def task_variables(trials: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The trials' task variables for TDR (module docstring), in :data:`ORDER`.

    Returns:
        ``{"names": [...], "values": (K, P) float (NaN: the trial is left out), "raw": {name:
        (K,) the unscaled value (choice, context: the label, "" where left out)},
        "definitions": {name: text}, "groups": (K,) condition label of each trial, e.g.
        ``"choice=1, coh=-25.6"``}``.
    """
    k = len(trials)
    names, cols, raw, defs = [], [], {}, {}
    choice = [condition_key(t, "choice") or "" for t in trials]
    gt = [condition_key(t, "gt") or "" for t in trials]
    answers = set(gt) - {""}  # a choice no trial's ground truth asks for: no answer
    levels, counts = np.unique(
        [c for c in choice if c and (c in answers or not answers)], return_counts=True
    )
    if levels.size >= 2:
        top = levels[np.argsort(-counts, kind="stable")[:2]].tolist()
        c = _sign_of(choice, top)
        lo, hi = _sorted_levels(top)
        names.append("choice")
        cols.append(c)
        raw["choice"] = np.array([v if v in top else "" for v in choice], dtype=object)
        defs["choice"] = f"-1: choice {lo}, +1: choice {hi} (other trials left out)"
    gt_levels = _sorted_levels(gt)
    if len(gt_levels) == 2:
        sign = _sign_of(gt, gt_levels)
        coh = [(t.get("conditions") or {}).get("coh") for t in trials]
        if all(isinstance(v, (int, float)) for v in coh):
            value = sign * np.asarray(coh, dtype=np.float64)
            text = f"signed coherence (%): coh x (-1: gt={gt_levels[0]}, +1: gt={gt_levels[1]})"
        else:
            value, text = sign, f"-1: gt={gt_levels[0]}, +1: gt={gt_levels[1]}"
        scale = float(np.nanmax(np.abs(value))) or 1.0
        names.append("stimulus")
        cols.append(value / scale)
        raw["stimulus"] = value
        defs["stimulus"] = f"{text}, divided by {scale:g} in the regression"
    ctx = [condition_key(t, "context") or "" for t in trials]
    if len(_sorted_levels(ctx)) == 2:
        lo, hi = _sorted_levels(ctx)
        names.append("context")
        cols.append(_sign_of(ctx, [lo, hi]))
        raw["context"] = np.array(ctx, dtype=object)
        defs["context"] = f"-1: context={lo}, +1: context={hi}"
    values = np.stack(cols, axis=1) if cols else np.zeros((k, 0))
    labels = []
    for j in range(k):
        if not np.isfinite(values[j]).all():
            labels.append("")
            continue
        parts = []
        for name in ("context", "choice"):
            if name in raw:
                parts.append(f"{name}={raw[name][j]}")
        if "stimulus" in raw:
            key = "coh" if "coherence" in defs["stimulus"] else "stimulus"
            parts.append(f"{key}={float(raw['stimulus'][j]) + 0.0:g}")
        labels.append(", ".join(parts))
    return {
        "names": names,
        "values": values,
        "raw": raw,
        "definitions": defs,
        "groups": np.array(labels, dtype=object),
    }


# ------------------------------------------------------------------ TDR
def zscore_activity(x: Any) -> np.ndarray:
    """(K, L, N) activity z-scored per neuron over every finite trial and bin (step 1 of
    the module docstring; a neuron that never varies becomes 0, NaN stays NaN)."""
    x = np.asarray(x, dtype=np.float64)
    flat = x.reshape(-1, x.shape[-1])
    mu = np.nanmean(flat, axis=0) if np.isfinite(flat).any() else np.zeros(x.shape[-1])
    sd = np.nanstd(flat, axis=0)
    sd = np.where(np.isfinite(sd) & (sd > 0), sd, np.inf)
    return (x - mu) / sd


def _condition_means(
    z: np.ndarray, groups: np.ndarray, min_trials: int
) -> tuple[list[str], np.ndarray, dict[str, int], np.ndarray]:
    """Condition means (C, L, N) over the trials of each group (NaN where none covers a bin),
    the groups kept (>= ``min_trials`` trials), their trial counts, and the (L,) bins every
    kept condition covers."""
    labels = _group_sorted([g for g in set(groups.tolist()) if g])
    conds = [g for g in labels if np.sum(groups == g) >= min_trials]
    means, n = [], {}
    for g in conds:
        sel = z[groups == g]
        means.append(nan_mean_sem(sel)[0])
        n[g] = int(len(sel))
    xc = np.stack(means) if means else np.zeros((0,) + z.shape[1:])
    common = np.isfinite(xc).all(axis=(0, 2)) if means else np.zeros(z.shape[1], bool)
    return conds, xc, n, common


def _group_sorted(groups: Sequence[str]) -> list[str]:
    def key(g: str) -> tuple[Any, ...]:
        out = []
        for part in g.split(", "):
            v = part.split("=", 1)[-1]
            try:
                out.append((0, float(v), ""))
            except ValueError:
                out.append((1, 0.0, v))
        return tuple(out)

    return sorted(groups, key=key)


def _regression_over_time(z: np.ndarray, f: np.ndarray) -> np.ndarray:
    """(P, L, N) least-squares coefficients of each variable at each bin (NaN where fewer
    than P + 2 trials cover the bin or a variable does not vary among them)."""
    k, length, n = z.shape
    p = f.shape[1]
    beta = np.full((p, length, n), np.nan)
    for t in range(length):
        ok = np.isfinite(z[:, t]).all(axis=1)
        if ok.sum() < p + 2 or any(np.ptp(f[ok, j]) == 0 for j in range(p)):
            continue
        design = np.hstack([f[ok], np.ones((int(ok.sum()), 1))])
        coef, *_ = np.linalg.lstsq(design, z[ok, t], rcond=None)
        beta[:, t] = coef[:p]
    return beta


def targeted_dimensionality_reduction(
    x: Any,
    values: Any,
    names: Sequence[str],
    *,
    groups: Any = None,
    n_pcs: int = 12,
    min_trials: int = 2,
) -> dict[str, Any]:
    """Targeted dimensionality reduction (Mante et al. 2013; module docstring).

    Args:
        x: (K, L, N) trial activity (NaN where a trial does not cover a bin).
        values: (K, P) the trials' task variables (a row with NaN: the trial is left out).
        names: the P variables' names, in the order the axes are orthogonalized.
        groups: (K,) condition label of each trial (``""``: left out of the averages);
            None: the distinct rows of ``values``.
        n_pcs: principal components of the condition averages kept for denoising.
        min_trials: a condition with fewer trials is left out of the averages.

    Returns:
        ``{"names", "axes": (P, N) orthonormal rows, "t_max": (P,) bin of each axis's largest
        denoised coefficient norm, "beta_norm": (P, L) that norm over time, "explained_variance":
        (P,) share of the condition-averaged variance along each axis, "cos_raw": (P, P) cosines
        between the axes before orthogonalization, "n_pcs": k used, "pcs_variance": share of
        the condition-averaged variance in those k components, "projections": {condition:
        (L, P)}, "n": {condition: trials}, "n_trials": trials regressed, "bins": (L,) bool,
        bins every condition covers}``.

    Raises:
        UserError: fewer than P + 2 usable trials, a variable with a single value, or fewer
            than two conditions with ``min_trials`` trials.
    """
    x = np.asarray(x, dtype=np.float64)
    f = np.asarray(values, dtype=np.float64).reshape(len(x), -1)
    names = list(names)
    if x.ndim != 3 or f.shape[1] != len(names) or not names:
        raise UserError(
            f"TDR needs (K, L, N) activity and (K, P) variables with P names, got "
            f"{x.shape}, {f.shape}, {names}"
        )
    use = np.isfinite(f).all(axis=1)
    if use.sum() < len(names) + 2:
        raise UserError(
            f"TDR needs at least {len(names) + 2} trials with every variable "
            f"({', '.join(names)}), got {int(use.sum())} (analyze more episodes)"
        )
    flat = [n for j, n in enumerate(names) if np.unique(f[use, j]).size < 2]
    if flat:
        raise UserError(
            f"TDR needs two or more values of each variable; {', '.join(flat)} has a single "
            "condition (analyze more episodes or a task where it varies)"
        )
    z = zscore_activity(x)[use]
    f = f[use]
    if groups is None:
        grp = np.array([", ".join(f"{n}={v:g}" for n, v in zip(names, row)) for row in f])
    else:
        grp = np.asarray(groups, dtype=object)[use].astype(str)
    conds, xc, n, common = _condition_means(z, grp, min_trials)
    if len(conds) < 2 or not common.any():
        raise UserError(
            f"TDR needs two or more conditions with >= {min_trials} trials covering a common "
            f"time bin, got {len(conds)} (analyze more episodes)"
        )
    samples = xc[:, common].reshape(-1, x.shape[2])
    centred = samples - samples.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    rank = int(np.sum(s > s[0] * 1e-10)) if s.size and s[0] > 0 else 0
    k = max(1, min(int(n_pcs), rank))
    denoise = vt[:k].T @ vt[:k]
    beta = _regression_over_time(z, f) @ denoise  # (P, L, N)
    norm = np.linalg.norm(beta, axis=2)
    if not np.isfinite(norm).any(axis=1).all():
        raise UserError("TDR: no time bin has enough trials for the regression (more episodes)")
    t_max = np.array([int(np.nanargmax(row)) for row in norm])
    bmax = np.stack([beta[j, t] for j, t in enumerate(t_max)], axis=1)  # (N, P)
    q, r = np.linalg.qr(bmax)
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)
    unit = bmax / np.maximum(np.linalg.norm(bmax, axis=0), 1e-300)
    total = float(np.sum(centred**2))
    var = np.sum((centred @ q) ** 2, axis=0) / total if total > 0 else np.zeros(len(names))
    return {
        "names": names,
        "axes": q.T,
        "t_max": t_max,
        "beta_norm": norm,
        "explained_variance": var,
        "cos_raw": unit.T @ unit,
        "n_pcs": k,
        "pcs_variance": float(np.sum(s[:k] ** 2) / np.sum(s**2)) if total > 0 else 0.0,
        "projections": {g: xc[c] @ q for c, g in enumerate(conds)},
        "n": n,
        "n_trials": int(use.sum()),
        "bins": common,
    }


# ------------------------------------------------------------------ demixed variance
def marginalize(xc: Any) -> dict[str, np.ndarray]:
    """Kobak et al.'s (2016) marginalizations of (N, T, S, D) condition means (module
    docstring): ``{"time", "stimulus", "decision", "interaction"}``, each (N, T, S, D); they
    sum to ``xc`` minus its mean per neuron."""
    x = np.asarray(xc, dtype=np.float64)
    if x.ndim != 4:
        raise UserError(f"marginalize needs (N, T, S, D) condition means, got {x.shape}")
    x = x - x.mean(axis=(1, 2, 3), keepdims=True)

    def m(*axes: int) -> np.ndarray:
        return x.mean(axis=axes, keepdims=True) if axes else x

    t, s, d = m(2, 3), m(1, 3), m(1, 2)
    ts, td, sd = m(3) - t - s, m(2) - t - d, m(1) - s - d
    tsd = x - t - s - d - ts - td - sd
    shape = x.shape
    return {
        "time": np.broadcast_to(t, shape),
        "stimulus": np.broadcast_to(s + ts, shape),
        "decision": np.broadcast_to(d + td, shape),
        "interaction": np.broadcast_to(sd + tsd, shape),
    }


def demixed_variance(xc: Any) -> dict[str, float]:
    """Share of the (N, T, S, D) condition means' variance in each marginalization
    (:func:`marginalize`); the shares sum to 1 (all 0 for constant data)."""
    parts = marginalize(xc)
    ss = {k: float(np.sum(v * v)) for k, v in parts.items()}
    total = sum(ss.values())
    return {k: (v / total if total > 0 else 0.0) for k, v in ss.items()}


def condition_table(
    x: Any, stimulus: Any, decision: Any, *, min_trials: int = 3
) -> tuple[np.ndarray, dict[str, Any]]:
    """The (N, T, S, D) condition means of trial activity on a full stimulus x decision
    table, over the bins every cell covers.

    Args:
        x: (K, L, N) trial activity (NaN where a trial does not cover a bin).
        stimulus, decision: (K,) labels (``""`` or NaN: the trial is left out).
        min_trials: trials a cell needs; a stimulus level lacking one decision's trials is
            left out of the table.

    Returns:
        ``(xc, info)``: the table and ``{"stimulus_levels", "levels_left_out", "decisions",
        "n": (S, D) trials per cell, "bins": number of bins, "bin_index": the bins kept (the
        trial's env steps from its start, 0-based)}``.

    Raises:
        UserError: fewer than two stimulus levels or two decisions with a full table.
    """
    x = np.asarray(x, dtype=np.float64)
    st = np.array([_label(v) for v in stimulus], dtype=object)
    de = np.array([_label(v) for v in decision], dtype=object)
    decisions = _sorted_levels(de.tolist())
    all_levels = _sorted_levels(st.tolist())
    levels = [
        s for s in all_levels
        if all(np.sum((st == s) & (de == d)) >= min_trials for d in decisions)
    ]  # fmt: skip
    if len(decisions) < 2 or len(levels) < 2:
        raise UserError(
            f"demixed variance needs two or more stimulus levels at which each of two or more "
            f"decisions has >= {min_trials} trials; got decisions {decisions}, levels "
            f"{levels} (analyze more episodes)"
        )
    cells, n = [], np.zeros((len(levels), len(decisions)), dtype=int)
    for i, s in enumerate(levels):
        for j, d in enumerate(decisions):
            sel = x[(st == s) & (de == d)]
            n[i, j] = len(sel)
            cells.append(nan_mean_sem(sel)[0])
    stacked = np.stack(cells)  # (S*D, L, N); a bin no trial of a cell covers is NaN
    ok = np.isfinite(stacked).all(axis=(0, 2))
    if not ok.any():
        raise UserError("demixed variance: no time bin is covered by every cell")
    table = stacked[:, ok].reshape(len(levels), len(decisions), int(ok.sum()), -1)
    info = {
        "stimulus_levels": levels,
        "levels_left_out": [s for s in all_levels if s not in levels],
        "decisions": decisions,
        "n": n,
        "bins": int(ok.sum()),
        "bin_index": np.flatnonzero(ok).tolist(),
    }
    return table.transpose(3, 2, 0, 1), info


def demixed_variance_trials(
    x: Any, stimulus: Any, decision: Any, *, min_trials: int = 3
) -> dict[str, Any]:
    """Demixed variance of trial activity: :func:`demixed_variance` of the
    :func:`condition_table` (same arguments).

    Returns:
        ``{"shares": {time, stimulus, decision, interaction}}`` and the table's ``info``.
    """
    xc, info = condition_table(x, stimulus, decision, min_trials=min_trials)
    return {"shares": demixed_variance(xc), **info}


def _label(v: Any) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return ""
    if isinstance(v, (float, np.floating)):
        return f"{float(v) + 0.0:g}"
    return str(v)


def dpca(xc: Any, *, n_components: int = 3, regularizer: float = 1e-4) -> dict[str, Any]:
    """Demixed principal component analysis (Kobak et al. 2016; module docstring) of
    (N, T, S, D) condition means: per marginalization, a reduced-rank ridge regression from
    the data to that marginalization.

    With ``X`` the centred data (N x T*S*D) and ``X_p`` a marginalization
    (:func:`marginalize`), ``B = X_p X^T (X X^T + lam I)^-1`` with ``lam = regularizer *
    ||X||_F^2`` (Kobak et al. choose ``regularizer`` by cross-validation over trials; here it
    is fixed); the encoder ``F`` holds the ``q`` leading left singular vectors of ``[B X,
    sqrt(lam) B]`` (the ridge-augmented fit, as in their Methods) and the decoder is
    ``D = F^T B``. A component ``k`` projects data ``x`` to ``D_k x``.

    Args:
        xc: (N, T, S, D) condition means.
        n_components: components per marginalization (at most N).
        regularizer: ridge strength relative to ``||X||_F^2``.

    Returns:
        ``{marginalization: {"encoder": (N, q), "decoder": (q, N), "explained_variance": (q,)
        share of ``||X||^2`` each component reconstructs, ``1 - ||X - F_k D_k X||^2 / ||X||^2``,
        "demixing": {marginalization: (q,) share of the component's variance ``||D_k X||^2``
        that comes from each marginalization}}}``.
    """
    parts = marginalize(xc)
    n = parts["time"].shape[0]
    x = sum(parts.values()).reshape(n, -1)
    flat = {k: np.ascontiguousarray(v).reshape(n, -1) for k, v in parts.items()}
    total = float(np.sum(x * x))
    if total <= 0:
        raise UserError("dPCA needs condition means that vary (got constant data)")
    lam = float(regularizer) * total
    q = max(1, min(int(n_components), n))
    inv = np.linalg.inv(x @ x.T + lam * np.eye(n))
    out: dict[str, Any] = {}
    for name, xp in flat.items():
        b = xp @ x.T @ inv
        u, _, _ = np.linalg.svd(np.hstack([b @ x, np.sqrt(lam) * b]), full_matrices=False)
        enc = u[:, :q]
        dec = enc.T @ b
        z = dec @ x  # (q, samples)
        ev = np.array(
            [1.0 - np.sum((x - np.outer(enc[:, k], z[k])) ** 2) / total for k in range(q)]
        )
        zz = np.maximum(np.sum(z * z, axis=1), 1e-300)
        mix = {m: np.sum((dec @ v) ** 2, axis=1) / zz for m, v in flat.items()}
        out[name] = {"encoder": enc, "decoder": dec, "explained_variance": ev, "demixing": mix}
    return out


# ------------------------------------------------------------------ snrl analyze
def tdr_analysis(ta: TrialActivity, *, n_pcs: int = 12, min_trials: int = 3) -> dict[str, Any]:
    """TDR and demixed variance of a :class:`TrialActivity`, JSON-able, for ``snrl analyze``
    (what cannot be computed is ``{"skipped": reason}``).

    Args:
        ta: the trial activity (first spiking layer).
        n_pcs: principal components kept for denoising.
        min_trials: trials a condition (TDR) or a stimulus x decision cell (demixed
            variance) needs.

    Returns:
        ``{"variables": {name: definition}, "order", "n_pcs", "pcs_variance", "axes": {name:
        {"t_max_bin", "explained_variance", "vector"}}, "cos_raw", "projections": {condition:
        {name: (L,)}}, "n", "n_trials", "demixed_variance"}`` or ``{"skipped": reason}``.
    """
    var = task_variables(ta.trials)
    x = ta.tensor()
    try:
        res = targeted_dimensionality_reduction(
            x, var["values"], var["names"], groups=var["groups"], n_pcs=n_pcs,
            min_trials=min_trials,
        )  # fmt: skip
    except UserError as exc:
        return {"skipped": str(exc), "variables": var["definitions"]}
    out: dict[str, Any] = {
        "variables": var["definitions"],
        "order": res["names"],
        "n_pcs": res["n_pcs"],
        "pcs_variance": res["pcs_variance"],
        "n_trials": res["n_trials"],
        "axes": {
            name: {
                "t_max_bin": int(res["t_max"][j]),
                "explained_variance": float(res["explained_variance"][j]),
                "beta_norm": res["beta_norm"][j],
                "vector": res["axes"][j],
            }
            for j, name in enumerate(res["names"])
        },
        "cos_raw": res["cos_raw"],
        "projections": {
            g: {name: p[:, j] for j, name in enumerate(res["names"])}
            for g, p in res["projections"].items()
        },
        "n": res["n"],
    }
    if "choice" in var["raw"] and "stimulus" in var["raw"]:
        try:
            dv = demixed_variance_trials(
                zscore_activity(x), var["raw"]["stimulus"], var["raw"]["choice"],
                min_trials=min_trials,
            )  # fmt: skip
            out["demixed_variance"] = dv
        except UserError as exc:
            out["demixed_variance"] = {"skipped": str(exc)}
    else:
        out["demixed_variance"] = {"skipped": "needs a choice and a stimulus variable"}
    return out


def dpca_analysis(
    ta: TrialActivity, *, n_components: int = 3, regularizer: float = 1e-4, min_trials: int = 3
) -> dict[str, Any]:
    """Demixed PCA (:func:`dpca`) of a :class:`TrialActivity`'s z-scored condition means on
    the stimulus x choice table (:func:`condition_table` of :func:`task_variables`' raw
    ``stimulus`` and ``choice``), JSON-able, for ``snrl analyze --dpca`` (what cannot be
    computed is ``{"skipped": reason}``).

    Returns:
        ``{"n_components", "regularizer", "stimulus_levels", "decisions", "levels_left_out",
        "n", "bins", "bin_index", "marginalizations": {name: {"share": the
        marginalization's share of the variance (:func:`demixed_variance`),
        "explained_variance": (q,), "demixing": {name: (q,)}, "encoder": (N, q),
        "projections": (q, bins, S, D) the decoder's output ``D_k x`` of the centred
        condition means}}}``, in the order time, stimulus, decision, interaction.
    """
    var = task_variables(ta.trials)
    if "choice" not in var["raw"] or "stimulus" not in var["raw"]:
        return {"skipped": "needs a choice and a stimulus variable"}
    try:
        xc, info = condition_table(
            zscore_activity(ta.tensor()), var["raw"]["stimulus"], var["raw"]["choice"],
            min_trials=min_trials,
        )  # fmt: skip
        res = dpca(xc, n_components=n_components, regularizer=regularizer)
    except UserError as exc:
        return {"skipped": str(exc)}
    shares = demixed_variance(xc)
    n = xc.shape[0]
    centred = (xc - xc.mean(axis=(1, 2, 3), keepdims=True)).reshape(n, -1)
    margs = {}
    for name, r in res.items():
        z = (r["decoder"] @ centred).reshape(-1, *xc.shape[1:])
        margs[name] = {
            "share": shares[name],
            "explained_variance": r["explained_variance"].tolist(),
            "demixing": {m: v.tolist() for m, v in r["demixing"].items()},
            "encoder": r["encoder"].tolist(),
            "projections": z.tolist(),
        }
    return {
        "n_components": int(res["time"]["encoder"].shape[1]),
        "regularizer": float(regularizer),
        **{k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in info.items()},
        "marginalizations": margs,
    }


def dpca_figure(name: str, entry: Mapping[str, Any], bin_seconds: float | None = None) -> Any:
    """The dPCA components of :func:`dpca_analysis` over the trial, one row per
    marginalization and one panel per component (one line per stimulus x choice condition),
    and the variance each marginalization holds beside what its components explain.
    A bare matplotlib Figure.

    Args:
        name: the layer label (e.g. ``"policy: lif0"``).
        entry: :func:`dpca_analysis`'s result (not skipped).
        bin_seconds: seconds per bin (None: env steps).
    """
    from matplotlib.figure import Figure

    from snrl.palette import GROUP_COLORS

    step, unit = (bin_seconds, "s") if bin_seconds else (1.0, "env steps")
    margs = entry["marginalizations"]
    q = int(entry["n_components"])
    t = (np.asarray(entry["bin_index"], dtype=np.float64) + 1) * step
    levels, decisions = entry["stimulus_levels"], entry["decisions"]
    groups = [f"choice={d}, stimulus={s}" for d in decisions for s in levels]
    styles = _condition_styles(groups)
    fig = Figure(figsize=(3.0 * q + 3.4, 2.0 * len(margs) + 0.6), layout="constrained")
    grid = fig.add_gridspec(len(margs), q + 1)
    for r, (mname, m) in enumerate(margs.items()):
        z = np.asarray(m["projections"], dtype=np.float64)  # (q, T, S, D)
        for k in range(q):
            ax = fig.add_subplot(grid[r, k])
            for j, d in enumerate(decisions):
                for i, s in enumerate(levels):
                    g = f"choice={d}, stimulus={s}"
                    col, ls = styles[g]
                    label = f"{g} (n={entry['n'][i][j]})" if r == 0 and k == 0 else None
                    ax.plot(t, z[k, :, i, j], color=col, ls=ls, lw=1.0, label=label)
            ax.axhline(0, color="0.85", lw=0.5)
            ax.set_title(
                f"{mname} #{k + 1}: {100 * m['explained_variance'][k]:.1f} % of variance, "
                f"{100 * m['demixing'][mname][k]:.0f} % {mname}",
                fontsize=7,
            )
            if r == len(margs) - 1:
                ax.set_xlabel(f"time from trial start ({unit})", fontsize=8)
            if k == 0:
                ax.set_ylabel(f"{mname} component", fontsize=8)
            if r == 0 and k == 0:
                ax.legend(fontsize=5, frameon=False, ncol=2)
    ax = fig.add_subplot(grid[:, q])
    names = list(margs)
    y = np.arange(len(names))
    share = [100 * margs[m]["share"] for m in names]
    comp = [100 * sum(margs[m]["explained_variance"]) for m in names]
    colors = [GROUP_COLORS[j % len(GROUP_COLORS)] for j in range(len(names))]
    ax.barh(y + 0.2, share, height=0.4, color=colors, alpha=0.45)
    ax.barh(y - 0.2, comp, height=0.4, color=colors)
    for yi, a, b in zip(y, share, comp):
        ax.text(a, yi + 0.2, f" {a:.1f} %", va="center", fontsize=6)
        ax.text(b, yi - 0.2, f" {b:.1f} %", va="center", fontsize=6)
    ax.set_yticks(y, names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("share of condition-mean variance (%)", fontsize=8)
    ax.set_title(
        f"variance per marginalization:\nall of it (pale), its {q} components (dark)", fontsize=8
    )
    fig.suptitle(
        f"{name}: demixed PCA (Kobak et al. 2016; fixed ridge {entry['regularizer']:g}; "
        f"{len(levels)} stimulus levels x {len(decisions)} choices)",
        fontsize=9,
    )
    return fig


def _condition_styles(groups: Sequence[str]) -> dict[str, tuple[Any, Any]]:
    """Colour by the signed stimulus (the last ``key=value``): blues below 0, oranges above
    (the colour-blind safe pair), darker for stronger stimuli, near-black at 0; line style by
    the rest (choice, context)."""
    from matplotlib import colormaps

    from snrl.palette import LINESTYLES

    def split(g: str) -> tuple[str, float]:
        head, _, last = g.rpartition(", ")
        try:
            return head, float(last.split("=", 1)[-1])
        except ValueError:
            return g, 0.0

    vmax = max((abs(split(g)[1]) for g in groups), default=1.0) or 1.0
    heads = sorted({split(g)[0] for g in groups})

    def colour(v: float) -> Any:
        if v == 0:
            return "#1A1A1A"
        return colormaps["Blues" if v < 0 else "Oranges"](0.35 + 0.65 * abs(v) / vmax)

    return {
        g: (
            colour(split(g)[1]),
            LINESTYLES[heads.index(split(g)[0]) % len(LINESTYLES)],
        )
        for g in groups
    }


def tdr_figure(name: str, entry: Mapping[str, Any], bin_seconds: float | None = None) -> Any:
    """Condition-averaged trajectories on the TDR axes over the trial (one panel per axis,
    its time of largest coefficient norm marked), the choice-stimulus plane, and the demixed
    variance shares. A bare matplotlib Figure.

    Args:
        name: the layer label (e.g. ``"policy: lif0"``).
        entry: :func:`tdr_analysis`'s result (not skipped).
        bin_seconds: seconds per bin (None: env steps).
    """
    from matplotlib.figure import Figure

    from snrl.palette import GROUP_COLORS, MUTED_COLOR

    step, unit = (bin_seconds, "s") if bin_seconds else (1.0, "env steps")
    order = list(entry["order"])[:2]
    proj = entry["projections"]
    styles = _condition_styles(list(proj))
    fig = Figure(figsize=(11.0, 6.6), layout="constrained")
    grid = fig.add_gridspec(2, 2)
    for c, var in enumerate(order):
        ax = fig.add_subplot(grid[0, c])
        ax_info = entry["axes"][var]
        for g in _group_sorted(list(proj)):
            y = np.asarray(proj[g][var], dtype=np.float64)
            col, ls = styles[g]
            ax.plot((np.arange(y.size) + 1) * step, y, color=col, ls=ls, lw=1.2,
                    label=f"{g} (n={entry['n'][g]})")  # fmt: skip
        t_max = (ax_info["t_max_bin"] + 1) * step
        ax.axvline(t_max, color=MUTED_COLOR, lw=0.8, ls="--")
        ax.axhline(0, color="0.85", lw=0.5)
        ax.set_xlabel(f"time from trial start ({unit})", fontsize=8)
        ax.set_ylabel(f"{var} axis (z-scored units)", fontsize=8)
        ax.set_title(
            f"{var} axis: max |beta| at {t_max:g} {unit} (dashed); "
            f"{100 * ax_info['explained_variance']:.1f} % of the condition-mean variance",
            fontsize=8,
        )
        if c == 0:
            ax.legend(fontsize=5, frameon=False, ncol=2)
    ax = fig.add_subplot(grid[1, 0])
    if len(order) == 2:
        for g in _group_sorted(list(proj)):
            col, ls = styles[g]
            ax.plot(np.asarray(proj[g][order[1]], float), np.asarray(proj[g][order[0]], float),
                    color=col, ls=ls, lw=1.0)  # fmt: skip
        ax.set_xlabel(f"{order[1]} axis", fontsize=8)
        ax.set_ylabel(f"{order[0]} axis", fontsize=8)
        cos = float(np.asarray(entry["cos_raw"], float)[0, 1])
        ang = float(np.degrees(np.arccos(np.clip(abs(cos), 0, 1))))
        ax.set_title(
            f"trajectories in the {order[0]}-{order[1]} plane "
            f"(axes {ang:.0f} deg apart before orthogonalization)",
            fontsize=8,
        )
    ax = fig.add_subplot(grid[1, 1])
    dv = entry.get("demixed_variance") or {}
    if "shares" in dv:
        keys = list(dv["shares"])
        vals = [100 * dv["shares"][k] for k in keys]
        ax.bar(keys, vals, color=[GROUP_COLORS[j % len(GROUP_COLORS)] for j in range(len(keys))])
        for j, v in enumerate(vals):
            ax.text(j, v, f"{v:.1f} %", ha="center", va="bottom", fontsize=7)
        ax.set_ylabel("share of condition-mean variance (%)", fontsize=8)
        ax.set_title(
            f"demixed variance (Kobak et al. 2016 marginalization; not dPCA)\nstimulus levels "
            f"{', '.join(dv['stimulus_levels'])} x choices {', '.join(dv['decisions'])}",
            fontsize=8,
        )
    else:
        ax.set_axis_off()
        ax.text(0.5, 0.5, f"demixed variance skipped:\n{dv.get('skipped', '')}", ha="center",
                va="center", fontsize=7, wrap=True, transform=ax.transAxes)  # fmt: skip
    fig.suptitle(
        f"{name}: targeted dimensionality reduction (Mante et al. 2013; {entry['n_trials']} "
        f"trials, {entry['n_pcs']} PCs denoise, QR in the order {', '.join(entry['order'])})",
        fontsize=9,
    )
    return fig
