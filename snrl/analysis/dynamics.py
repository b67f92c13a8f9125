"""Population dynamics of trial tasks: time-resolved decoding of task variables and the
dimensionality of the activity (numpy only; scikit-learn is not a dependency).

Definitions:

- Trial activity: for each trial, the mean spikes per neuron in each env step of the trial
  (the ``substeps`` neuron steps of an env step averaged), smoothed by a causal boxcar of
  ``smooth`` env steps that never reaches before the trial's first step, aligned to the
  trial start; steps after the trial's end are NaN (never the next trial's).
- Decoder: linear discriminant analysis with a shrunk covariance (Ledoit & Wolf 2004,
  analytic shrinkage towards ``mu * I``, ``mu`` the mean variance), classes weighted by their
  frequency in the training folds: class ``c`` scores ``x S^-1 m_c - m_c S^-1 m_c / 2 +
  log p_c``.
- Cross-validated accuracy: stratified k-fold (each class split evenly over the folds, in a
  seeded random order); the accuracy is the fraction of correctly predicted held-out
  trials, its error bar the standard error across folds (std ddof 1 / sqrt(k)).
- Shuffle control: the same k-fold decoding with the labels permuted among the trials
  (``n_shuffles`` times); ``null_mean`` and ``null_q95`` summarize that null distribution,
  ``p_value = (1 + #null >= accuracy) / (1 + n_shuffles)``. ``chance`` is the frequency of
  the most common class.
- Participation ratio: ``(sum l_i)^2 / sum l_i^2`` over the eigenvalues of the covariance
  of the samples (N for isotropic data, k for data spread evenly on k dimensions).
- Cross-validated PCA (Stringer et al. 2019): the trials are split into two halves, the
  condition-averaged activity of each half is computed, the principal axes are fitted on
  half A, and the cross-validated variance of axis i is the covariance of the two halves'
  projections on it, ``mean_s (a_s . u_i)(b_s . u_i)`` (centred): noise, independent between
  the halves, averages out, so only variance that repeats across trials counts. The
  repeatable variance is the peak of the running sum of these (signed) values over the axes
  (past it the axes carry noise, whose signed values sum to about zero); the
  cross-validated dimensionality is the number of axes whose running sum reaches 90 % of it,
  and the cross-validated participation ratio is that of the positive values up to the
  peak.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from snrl.analysis.trials import condition_key, nan_mean_sem
from snrl.errors import UserError

__all__ = [
    "TrialActivity",
    "choice_axis_projection",
    "cv_pca",
    "cross_validated_accuracy",
    "decode_over_time",
    "lda_fit",
    "lda_predict",
    "participation_ratio",
    "shrinkage_covariance",
    "stratified_folds",
    "smooth_trial",
    "trial_dimensionality",
]


# ------------------------------------------------------------------ dimensionality
def participation_ratio(x: Any) -> float:
    """Participation ratio ``(sum l)^2 / sum l^2`` of the covariance eigenvalues of the
    (S, N) samples x; NaN when the samples do not vary."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 2:
        raise UserError(f"participation_ratio needs (samples >= 2, N), got shape {a.shape}")
    s = np.linalg.svd(a - a.mean(0), compute_uv=False)
    lam = s * s
    den = float(np.sum(lam * lam))
    return float(np.sum(lam) ** 2 / den) if den > 0 else float("nan")


def cv_pca(a: Any, b: Any, threshold: float = 0.9) -> dict[str, Any]:
    """Cross-validated PCA of two repeats of the same (S, N) samples (module docstring).

    Args:
        a, b: (S, N) the same samples (e.g. condition x time bins) from two disjoint halves
            of the trials.
        threshold: share of the summed positive cross-validated variance the dimensionality
            reaches.

    Returns:
        ``{"cv_variance": (k,) cross-validated variance per axis of half A,
        "cv_fraction": (k,) its share of the repeatable variance, "dimensionality": int or
        None (no repeatable variance), "participation_ratio"}`` (module docstring).
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2 or a.shape[0] < 2:
        raise UserError(
            f"cv_pca needs two (S >= 2, N) arrays of one shape, got {a.shape}, {b.shape}"
        )
    ac, bc = a - a.mean(0), b - b.mean(0)
    _, _, vt = np.linalg.svd(ac, full_matrices=False)
    pa, pb = ac @ vt.T, bc @ vt.T
    cv = (pa * pb).mean(0)
    cum = np.cumsum(cv)
    peak = int(np.argmax(cum))
    total = float(cum[peak])
    if total <= 0:
        return {
            "cv_variance": cv,
            "cv_fraction": np.zeros_like(cv),
            "dimensionality": None,
            "participation_ratio": float("nan"),
        }
    dim = int(np.searchsorted(cum, threshold * total - 1e-12 * abs(total)) + 1)
    pos = np.clip(cv[: peak + 1], 0.0, None)
    return {
        "cv_variance": cv,
        "cv_fraction": cv / total,
        "dimensionality": dim,
        "participation_ratio": float(pos.sum() ** 2 / np.sum(pos * pos)),
    }


# ------------------------------------------------------------------ decoder
def shrinkage_covariance(x: Any) -> tuple[np.ndarray, float]:
    """Ledoit-Wolf shrunk covariance of the centred (n, p) samples ``x`` (ddof 0).

    Returns:
        ``(sigma, shrinkage)``: ``sigma = s * mu * I + (1 - s) * S`` with ``S = x^T x / n``,
        ``mu = tr(S) / p`` and the analytic ``s`` in [0, 1]; a constant ``x`` gives ``I``.
    """
    x = np.asarray(x, dtype=np.float64)
    n, p = x.shape
    # the product in torch (on its thread count: one under _one_thread): numpy's threaded
    # BLAS spins on a loaded machine (measured: 5.4 ms of CPU per 400 x 128 product, 0.35 ms
    # on one thread)
    xt = torch.from_numpy(x)
    cov = (xt.T @ xt).numpy() / n
    mu = float(np.trace(cov)) / p
    if mu <= 0:
        return np.eye(p), 1.0
    delta = float(np.sum((cov - mu * np.eye(p)) ** 2)) / p
    sq = np.sum(x * x, axis=1)
    beta = (float(np.sum(sq * sq)) - n * float(np.sum(cov * cov))) / (n * n * p)
    s = 1.0 if delta <= 0 else min(max(beta, 0.0), delta) / delta
    return s * mu * np.eye(p) + (1.0 - s) * cov, s


def lda_fit(x: Any, y: Any) -> dict[str, np.ndarray]:
    """Shrinkage LDA on (n, p) samples and (n,) labels; the model as arrays."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y)
    classes = np.unique(y)
    means = np.stack([x[y == c].mean(0) for c in classes])
    centred = x - means[np.searchsorted(classes, y)]
    sigma, _ = shrinkage_covariance(centred)
    # a tiny ridge keeps silent neurons (zero variance in every class) harmless
    sigma += 1e-9 * (np.trace(sigma) / len(sigma) + 1.0) * np.eye(len(sigma))
    # Cholesky in torch (sigma is symmetric positive definite): numpy's threaded BLAS on
    # these small matrices spins on a loaded machine (measured: 34 ms per 128 x 128
    # factorization against 0.5 ms for torch on one thread, see _one_thread)
    chol = torch.linalg.cholesky(torch.from_numpy(sigma))
    coef = torch.cholesky_solve(torch.from_numpy(np.ascontiguousarray(means.T)), chol)
    coef = coef.numpy().T  # (C, p)
    prior = np.array([np.mean(y == c) for c in classes])
    intercept = -0.5 * np.sum(coef * means, axis=1) + np.log(prior)
    return {"classes": classes, "coef": coef, "intercept": intercept, "means": means}


def lda_predict(model: Mapping[str, np.ndarray], x: Any) -> np.ndarray:
    """Predicted labels of the (n, p) samples."""
    scores = np.asarray(x, dtype=np.float64) @ model["coef"].T + model["intercept"]
    return model["classes"][np.argmax(scores, axis=1)]


def stratified_folds(y: Any, k: int, rng: np.random.Generator) -> np.ndarray:
    """(n,) fold index of each sample: each class's samples in random order, dealt out to
    the k folds in turn (so every fold gets its share of every class)."""
    y = np.asarray(y)
    fold = np.empty(len(y), dtype=int)
    offset = 0
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        fold[idx] = (np.arange(idx.size) + offset) % k
        offset += idx.size
    return fold


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Torch on one thread for many small factorizations (faster than a thread pool that
    waits for its threads); the caller's thread count is restored."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


def _cv_accuracy(x: np.ndarray, y: np.ndarray, folds: np.ndarray, k: int) -> tuple[float, float]:
    correct = np.zeros(len(y), dtype=bool)
    per_fold = []
    for f in range(k):
        test = folds == f
        model = lda_fit(x[~test], y[~test])
        hit = lda_predict(model, x[test]) == y[test]
        correct[test] = hit
        per_fold.append(hit.mean())
    sem = float(np.std(per_fold, ddof=1) / np.sqrt(k)) if k > 1 else float("nan")
    return float(correct.mean()), sem


def cross_validated_accuracy(
    x: Any,
    y: Any,
    *,
    k: int = 5,
    n_shuffles: int = 0,
    seed: int = 0,
) -> dict[str, Any]:
    """k-fold cross-validated accuracy of the shrinkage-LDA decoder, with a label-shuffle
    control (module docstring).

    Args:
        x: (n, p) samples (trials x neurons).
        y: (n,) labels; every class needs at least 2 samples (k is lowered to the smallest
            class's count).
        k: folds.
        n_shuffles: label permutations for the null distribution (0: none).
        seed: seeds the folds and the permutations.

    Returns:
        ``{"accuracy", "sem", "k", "n", "chance", "null_mean", "null_q95", "p_value"}``
        (the null fields None without shuffles).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y)
    classes, counts = np.unique(y, return_counts=True)
    if x.ndim != 2 or len(x) != len(y) or classes.size < 2 or counts.min() < 2:
        raise UserError(
            f"decoding needs (n, p) samples and n labels of >= 2 classes with >= 2 samples "
            f"each, got x {x.shape}, classes {dict(zip(classes.tolist(), counts.tolist()))}"
        )
    k = int(min(k, counts.min()))
    rng = np.random.default_rng(seed)
    acc, sem = _cv_accuracy(x, y, stratified_folds(y, k, rng), k)
    out: dict[str, Any] = {
        "accuracy": acc,
        "sem": sem,
        "k": k,
        "n": int(len(y)),
        "chance": float(counts.max() / counts.sum()),
        "null_mean": None,
        "null_q95": None,
        "p_value": None,
    }
    if n_shuffles > 0:
        null = np.array(
            [
                _cv_accuracy(x, yp, stratified_folds(yp, k, rng), k)[0]
                for yp in (rng.permutation(y) for _ in range(int(n_shuffles)))
            ]
        )
        out["null_mean"] = float(null.mean())
        out["null_q95"] = float(np.quantile(null, 0.95))
        out["p_value"] = float((1 + np.sum(null >= acc)) / (1 + null.size))
    return out


# ------------------------------------------------------------------ trial activity
def smooth_trial(per_step: np.ndarray, width: int) -> np.ndarray:
    """(T, N) causal boxcar mean of ``width`` rows, not reaching before row 0."""
    x = np.asarray(per_step, dtype=np.float64)
    w = max(1, int(width))
    c = np.cumsum(np.vstack([np.zeros((1, x.shape[1])), x]), axis=0)
    idx = np.arange(1, x.shape[0] + 1)
    lo = np.maximum(idx - w, 0)
    return (c[idx] - c[lo]) / (idx - lo)[:, None]


class TrialActivity:
    """Per-trial activity of one layer aligned to the trial start (module docstring), for
    decoding and dimensionality; keeps the first ``max_trials`` trials (memory bound:
    ``max_trials x length x N`` float32).

    Args:
        size: N neurons.
        length: env steps kept from each trial's start.
        smooth: causal boxcar width in env steps (within the trial).
        max_trials: trials kept.
    """

    def __init__(self, size: int, *, length: int, smooth: int = 3, max_trials: int = 2000):
        self.size, self.length = int(size), int(length)
        self.smooth, self.max_trials = max(1, int(smooth)), int(max_trials)
        self.x: list[np.ndarray] = []
        self.trials: list[dict[str, Any]] = []
        self.dropped = 0

    def add(self, spikes: Any, trials: Sequence[Mapping[str, Any]], substeps: int = 1) -> None:
        """Fold in one episode's trials ((T * substeps, N) spikes)."""
        s = np.asarray(spikes, dtype=np.float64)
        sub = max(1, int(substeps))
        for trial in trials:
            if len(self.x) >= self.max_trials:
                self.dropped += 1
                continue
            a, b = int(trial["start_step"]), int(trial["end_step"]) + 1
            b = min(b, s.shape[0] // sub)
            if b <= a:
                continue
            per_step = s[a * sub : b * sub].reshape(b - a, sub, -1).mean(1)
            sm = smooth_trial(per_step, self.smooth)
            out = np.full((self.length, self.size), np.nan, dtype=np.float32)
            m = min(self.length, b - a)
            out[:m] = sm[:m]
            self.x.append(out)
            self.trials.append({k: trial.get(k) for k in ("choice", "gt", "correct", "conditions")})

    def tensor(self) -> np.ndarray:
        """(K, length, N) float64 activity; NaN after a trial's end."""
        if not self.x:
            return np.zeros((0, self.length, self.size))
        return np.stack(self.x).astype(np.float64)

    def labels(self, by: str) -> np.ndarray:
        """(K,) the trials' labels by ``by`` (:func:`snrl.analysis.trials.condition_key`),
        as strings, ``""`` where a trial lacks it."""
        return np.array([condition_key(t, by) or "" for t in self.trials], dtype=object)

    def variables(self, max_levels: int = 10) -> list[str]:
        """The task variables worth decoding: ``choice``, ``gt`` and every condition with
        2..``max_levels`` values, leaving out one that splits the trials exactly as an earlier
        one does (NeuroGym's ``ground_truth`` condition repeats ``gt``)."""
        keys = ["choice", "gt"]
        for t in self.trials:
            for c in t.get("conditions") or {}:
                if c not in keys:
                    keys.append(c)
        out: list[str] = []
        seen: list[np.ndarray] = []
        for key in keys:
            lab = self.labels(key)
            levels = sorted(set(lab) - {""})
            if not 2 <= len(levels) <= max_levels:
                continue
            _, part = np.unique(lab, return_inverse=True)
            if any(_same_partition(part, p) for p in seen):
                continue
            seen.append(part)
            out.append(key)
        return out


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two labelings group the samples identically (up to renaming)."""
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def decode_over_time(
    x: Any,
    labels: Any,
    *,
    k: int = 5,
    n_shuffles: int = 20,
    min_per_class: int = 5,
    seed: int = 0,
) -> dict[str, Any]:
    """Cross-validated decoding of ``labels`` from the activity at each time bin.

    Args:
        x: (K, L, N) trial activity (NaN where a trial does not cover the bin).
        labels: (K,) labels (``""``: the trial is left out).
        k, n_shuffles, seed: see :func:`cross_validated_accuracy` (the seed moves with the
            bin).
        min_per_class: a class with fewer trials (at a bin) is left out there; a bin with
            fewer than two classes left is not decoded (its entries None).

    Returns:
        ``{"accuracy", "sem", "chance", "null_mean", "null_q95", "p_value", "n"}``: lists
        over the L bins, and ``"classes"``: the labels decoded.
    """
    x = np.asarray(x, dtype=np.float64)
    lab = np.asarray(labels, dtype=object)
    keys = ("accuracy", "sem", "chance", "null_mean", "null_q95", "p_value", "n")
    out: dict[str, Any] = {key: [] for key in keys}
    used: set[str] = set()
    for t in range(x.shape[1]):
        ok = np.isfinite(x[:, t]).all(axis=1) & (lab != "")
        y = lab[ok]
        classes, counts = np.unique(y.astype(str), return_counts=True) if y.size else ([], [])
        keep = [c for c, n in zip(classes, counts) if n >= max(min_per_class, 2)]
        sel = np.isin(y.astype(str), keep)
        if len(keep) < 2:
            for key in keys:
                out[key].append(None)
            continue
        used.update(str(c) for c in keep)
        with _one_thread():
            res = cross_validated_accuracy(
                x[ok, t][sel], y.astype(str)[sel], k=k, n_shuffles=n_shuffles, seed=seed + t
            )
        for key in keys:
            out[key].append(res[key])
    out["classes"] = sorted(used, key=_numeric_first)
    return out


def _numeric_first(v: str) -> tuple[int, Any]:
    try:
        return (0, float(v))
    except ValueError:
        return (1, v)


def choice_axis_projection(
    x: Any, choice: Any, groups: Any, *, seed: int = 0
) -> dict[str, Any] | None:
    """Held-out projection of each trial on the choice axis, averaged per group over time.

    The axis is the shrinkage-LDA discriminant ``S^-1 (m_b - m_a)`` between the two most
    common choices, fitted on the samples of every time bin of one half of the trials
    (pooled) and applied to the other half (and the other way round), so no trial is
    projected on an axis fitted on it. The projection is scaled so that the fitting half's
    two class means lie at -1 and +1.

    Args:
        x: (K, L, N) trial activity.
        choice: (K,) choice labels (``""``: no label).
        groups: (K,) the group of each trial (e.g. ``"gt=1, coh=51.2"``).

    Returns:
        ``{"axis_labels": (a, b), "mean": {group: (L,)}, "sem": {group: (L,)},
        "n": {group: trials}}``, or None with fewer than two choices of 4+ trials.
    """
    x = np.asarray(x, dtype=np.float64)
    ch = np.asarray(choice, dtype=object).astype(str)
    grp = np.asarray(groups, dtype=object).astype(str)
    classes, counts = np.unique(ch[ch != ""], return_counts=True)
    top = classes[np.argsort(-counts, kind="stable")[:2]]
    if top.size < 2 or counts.min() < 4:
        return None
    a, b = sorted(top.tolist())
    rng = np.random.default_rng(seed)
    half = stratified_folds(ch, 2, rng)
    proj = np.full(x.shape[:2], np.nan)
    for h in (0, 1):
        fit = (half == h) & np.isin(ch, [a, b])
        xs = x[fit].reshape(-1, x.shape[2])
        ys = np.repeat(ch[fit], x.shape[1])
        ok = np.isfinite(xs).all(axis=1)
        xs, ys = xs[ok], ys[ok]
        if len(np.unique(ys)) < 2:
            return None
        model = lda_fit(xs, ys)
        w = model["coef"][1] - model["coef"][0]
        ma, mb = model["means"] @ w
        scale = (mb - ma) / 2 if mb != ma else 1.0
        other = half != h
        proj[other] = (np.nan_to_num(x[other]) @ w - (ma + mb) / 2) / scale
        proj[other] = np.where(np.isfinite(x[other]).all(axis=2), proj[other], np.nan)
    mean, sem, n = {}, {}, {}
    for g in sorted(set(grp.tolist()) - {""}):
        p = proj[grp == g]
        mean[g], sem[g] = nan_mean_sem(p)
        n[g] = int(len(p))
    return {"axis_labels": (a, b), "mean": mean, "sem": sem, "n": n}


def trial_dimensionality(x: Any, groups: Any, *, seed: int = 0) -> dict[str, Any] | None:
    """Dimensionality of trial activity: cross-validated PCA of the condition-averaged
    trajectories and participation ratios.

    The trials of each condition (``groups``; ``""`` left out, conditions with fewer than 2
    trials too) are split at random into two halves; each half's condition means over time
    are stacked (conditions x the time bins that every condition's trials cover in both
    halves) and compared by :func:`cv_pca`.

    Args:
        x: (K, L, N) trial activity (NaN where a trial does not cover a bin).
        groups: (K,) condition labels.
        seed: seeds the split.

    Returns:
        ``{"cv_dimensionality", "cv_participation_ratio", "cv_fraction" (first 20 axes),
        "participation_ratio" (of the condition means, all trials), "participation_ratio_trials"
        (of every single-trial time bin), "n_conditions", "n_bins"}``, or None when too little
        data (fewer than 2 samples).
    """
    x = np.asarray(x, dtype=np.float64)
    grp = np.asarray(groups, dtype=object).astype(str)
    rng = np.random.default_rng(seed)
    conds = [g for g in sorted(set(grp.tolist()) - {""}) if np.sum(grp == g) >= 2]
    if not conds:
        return None
    halves, full = [[], []], []
    for g in conds:
        idx = rng.permutation(np.flatnonzero(grp == g))
        for h in (0, 1):
            halves[h].append(nan_mean_sem(x[idx[h::2]])[0])
        full.append(nan_mean_sem(x[idx])[0])
    ok = np.logical_and.reduce([np.isfinite(m).all(axis=1) for m in halves[0] + halves[1]])
    if ok.sum() * len(conds) < 2:
        return None
    a = np.concatenate([m[ok] for m in halves[0]])
    b = np.concatenate([m[ok] for m in halves[1]])
    cv = cv_pca(a, b)
    rows = x.reshape(-1, x.shape[2])
    rows = rows[np.isfinite(rows).all(axis=1)]
    return {
        "cv_dimensionality": cv["dimensionality"],
        "cv_participation_ratio": cv["participation_ratio"],
        "cv_fraction": cv["cv_fraction"][:20],
        "participation_ratio": participation_ratio(np.concatenate([m[ok] for m in full])),
        "participation_ratio_trials": participation_ratio(rows) if len(rows) >= 2 else None,
        "n_conditions": len(conds),
        "n_bins": int(ok.sum()),
    }
