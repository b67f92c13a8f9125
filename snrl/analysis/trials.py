"""Trial-aligned analyses (PSTHs, selectivity, PCA trajectories) and tuning curves.

Trials come from a trajectory's ``trials`` list (NeuroGym tasks, see
:mod:`snrl.envs.trials`): dicts with ``start_step``, ``end_step`` (env steps of the
trajectory), ``choice``, ``gt``, ``conditions`` and, when the agent chose, ``decision_time``
(seconds of task time, counted from ``t0`` at the trial's first step). With ``substeps``
neuron steps per env step, env step k covers neuron rows ``k*substeps .. (k+1)*substeps-1``.

Definitions:

- PSTH: mean spikes per neuron in each neuron step of a window ``[-pre, post)`` around an
  event: the trial start, or the decision, the env step
  ``start_step + round((decision_time - t0) / dt)`` (``dt``: the task's seconds per env
  step), else (no choice) the first step of the task's ``decision`` period, else the
  trial's last step ``end_step`` (:meth:`PSTHAccumulator.event_step`; which rule placed
  how many trials is kept in ``alignment``); averaged over the trials of one condition;
  divided by ``dt`` for Hz. The window never crosses a trial boundary: steps of the
  neighbouring trials are masked, so each time bin averages the trials that cover it
  (NaN where none does), with its standard error across those trials.
- Selectivity of a neuron between two groups of trials A and B (e.g. choice 1 vs 0): with
  r the neuron's mean spikes per step over a trial, ``index = (mean r_A - mean r_B) /
  (mean r_A + mean r_B)`` in [-1, 1] (NaN when silent in both) and ``d' = (mean r_A -
  mean r_B) / sqrt((var r_A + var r_B) / 2)`` (ddof 0).
- PCA: principal axes of a (samples, N) matrix by SVD of the centred matrix (numpy; no
  scikit-learn dependency).
- Tuning curve: mean spikes per step of each neuron in the steps where observation
  dimension d falls in each bin of equal width (see :class:`TuningAccumulator`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from snrl.errors import UserError

__all__ = [
    "PSTHAccumulator",
    "TuningAccumulator",
    "condition_key",
    "nan_mean_sem",
    "period_steps",
    "pca",
    "selectivity",
    "trial_time_step",
]


def pca(x: Any, n_components: int = 3) -> dict[str, np.ndarray]:
    """Principal component analysis by SVD of the centred data.

    Args:
        x: (S, N) samples x features.
        n_components: components to keep (at most min(S, N)).

    Returns:
        ``{"components": (k, N) unit axes (rows), "explained_variance_ratio": (k,),
        "mean": (N,), "scores": (S, k) projections}``. Each axis's sign is fixed so that its
        largest-magnitude entry is positive (reproducible signs).
    """
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] < 2:
        raise UserError(f"pca needs a (samples >= 2, features) array, got shape {a.shape}")
    mean = a.mean(axis=0)
    c = a - mean
    _, s, vt = np.linalg.svd(c, full_matrices=False)
    k = min(int(n_components), vt.shape[0])
    comps = vt[:k]
    flip = np.sign(comps[np.arange(k), np.abs(comps).argmax(axis=1)])
    comps = comps * flip[:, None]
    var = s * s
    total = var.sum()
    ratio = var[:k] / total if total > 0 else np.zeros(k)
    return {
        "components": comps,
        "explained_variance_ratio": ratio,
        "mean": mean,
        "scores": c @ comps.T,
    }


def selectivity(rates_a: Any, rates_b: Any) -> dict[str, np.ndarray]:
    """Selectivity of each neuron between two groups of trials.

    Args:
        rates_a: (n_A, N) per-trial mean spikes per step (or Hz) in group A.
        rates_b: (n_B, N) the same for group B.

    Returns:
        ``{"index": (N,), "dprime": (N,)}`` (definitions in the module docstring); NaN where
        undefined (silent in both groups; zero variance in both).
    """
    a = np.asarray(rates_a, dtype=np.float64)
    b = np.asarray(rates_b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or not len(a) or not len(b):
        raise UserError(
            f"selectivity needs two (trials, N) arrays with N equal and trials > 0, got "
            f"{a.shape} and {b.shape}"
        )
    ma, mb = a.mean(0), b.mean(0)
    pooled = np.sqrt((a.var(0) + b.var(0)) / 2.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        index = np.where(ma + mb > 0, (ma - mb) / (ma + mb), np.nan)
        dprime = np.where(pooled > 0, (ma - mb) / pooled, np.nan)
    return {"index": index, "dprime": dprime}


def trial_time_step(t: float, t0: float, env_dt: float) -> int:
    """The first step (counted from the trial's first step, which acts at trial time
    ``t0``) that acts at trial time ``t`` or later: step k acts at ``t0 + k * env_dt``
    (seconds)."""
    return int(np.ceil((float(t) - float(t0)) / float(env_dt) - 1e-9))


def period_steps(trial: Mapping[str, Any], env_dt: float | None) -> dict[str, tuple[int, int]]:
    """The env steps of each period of a trial, ``name -> (first, stop)`` (the steps
    ``first .. stop - 1`` of the trajectory, within the trial's own steps): a step is in a
    period when it acts at a trial time ``start <= t < end`` (NeuroGym's ``in_period``).
    Periods the agent never saw (outside the trial's steps) are left out; ``{}`` without
    the task's ``env_dt`` or the trial's ``t0`` and ``periods``."""
    periods, t0 = trial.get("periods") or {}, trial.get("t0")
    if not env_dt or t0 is None:
        return {}
    start, stop = int(trial["start_step"]), int(trial["end_step"]) + 1
    out = {}
    for name, (a, b) in periods.items():
        lo = min(max(start + trial_time_step(a, t0, env_dt), start), stop)
        hi = min(max(start + trial_time_step(b, t0, env_dt), start), stop)
        if hi > lo:
            out[str(name)] = (lo, hi)
    return out


def nan_mean_sem(x: Any) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard error of the mean over axis 0, ignoring NaN.

    For each position of the remaining axes, with the ``n`` finite values ``x_i`` along axis
    0: ``mean = sum x_i / n`` and ``sem = sqrt(var / n)`` with the sample variance (ddof 1).
    The mean is NaN where ``n < 1``, the SEM where ``n < 2``. The trial-aligned analyses use
    it across trials (a trial is NaN in the time bins it does not cover).

    Args:
        x: (K, ...) values, K trials first.

    Returns:
        ``(mean, sem)``, each shaped ``x.shape[1:]`` (0-d arrays for a 1-d ``x``).
    """
    p = np.asarray(x)
    if not np.issubdtype(p.dtype, np.floating):
        p = p.astype(np.float64)
    ok = np.isfinite(p)
    cnt = ok.sum(0)
    v = np.where(ok, p, 0.0)
    mean = np.where(cnt > 0, v.sum(0) / np.maximum(cnt, 1), np.nan)
    dev = np.where(ok, p - mean, 0.0)
    var = (dev * dev).sum(0) / np.maximum(cnt - 1, 1)
    return mean, np.where(cnt >= 2, np.sqrt(var / np.maximum(cnt, 1)), np.nan)


def condition_key(trial: Mapping[str, Any], by: str) -> str | None:
    """The group label of a trial: ``by`` is ``"choice"``, ``"gt"`` or a key of its
    ``conditions`` (e.g. ``"coh"``); None when the trial lacks it."""
    if by in ("choice", "gt", "correct"):
        v = trial.get(by)
    else:
        v = (trial.get("conditions") or {}).get(by)
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return str(v)


class PSTHAccumulator:
    """Trial-aligned mean spikes per condition, accumulated episode by episode.

    Each trial contributes only its own neuron steps: the window ``[-pre, post)`` around its
    event is cut at the trial's first and last step, and the steps of the neighbouring
    trials (the previous trial before a trial start, the next trial's fixation and stimulus
    after a decision) are masked, not averaged in. A time bin of the PSTH is therefore the
    mean over the trials that cover it (:meth:`counts`), NaN where none does.

    Args:
        size: N neurons.
        pre, post: window ``[-pre, post)`` around the event, in neuron steps.
        event: ``"start"`` or ``"decision"``.
        by: what groups the trials (see :func:`condition_key`).
    """

    def __init__(self, size: int, *, pre: int, post: int, event: str = "start", by: str = "gt"):
        if event not in ("start", "decision"):
            raise UserError(f"event={event!r} (use 'start' or 'decision')")
        self.size, self.pre, self.post, self.event, self.by = (
            int(size),
            int(pre),
            int(post),
            event,
            by,
        )
        self.sums: dict[str, np.ndarray] = {}
        self.sq_sums: dict[str, np.ndarray] = {}
        self.bin_counts: dict[str, np.ndarray] = {}
        self.trial_rates: dict[str, list[np.ndarray]] = {}
        #: how many trials were aligned by each rule (see :meth:`event_step`)
        self.alignment: dict[str, int] = {}

    def event_step(self, trial: Mapping[str, Any], env_dt: float | None) -> tuple[int, str]:
        """The env step of the trial's event and the rule that placed it.

        ``"trial start"``: ``start_step``. For the decision, in this order: ``"choice"``, the
        step of ``decision_time``; ``"decision period onset"``, the first step of the task's
        ``decision`` period (``periods["decision"][0]``, seconds of trial time) when the
        trial has no choice (the agent never left fixation, or the task names no fixation
        action, e.g. PerceptualDecisionMakingDelayResponse); ``"trial end"``, the trial's
        last step when neither is known (or the task's ``dt`` is unknown).
        """
        start, end = int(trial["start_step"]), int(trial["end_step"])
        if self.event == "start":
            return start, "trial start"
        td, t0 = trial.get("decision_time"), trial.get("t0")
        if env_dt and td is not None and t0 is not None and np.isfinite(td):
            k = int(round((float(td) - float(t0)) / env_dt))
            return min(start + max(k, 0), end), "choice"
        dec = (trial.get("periods") or {}).get("decision")
        if env_dt and dec is not None and t0 is not None:
            k = trial_time_step(dec[0], t0, env_dt)
            return min(start + max(k, 0), end), "decision period onset"
        return end, "trial end"

    def add(
        self,
        spikes: Any,
        trials: Sequence[Mapping[str, Any]],
        substeps: int = 1,
        env_dt: float | None = None,
    ) -> None:
        """Fold in the trials of one episode ((T * substeps, N) spikes; ``env_dt``: the
        task's seconds per env step, to place decisions)."""
        s = np.asarray(spikes, dtype=np.float64)
        length = self.pre + self.post
        for trial in trials:
            key = condition_key(trial, self.by)
            if key is None:
                continue
            step, rule = self.event_step(trial, env_dt)
            self.alignment[rule] = self.alignment.get(rule, 0) + 1
            w0 = step * substeps - self.pre
            a = int(trial["start_step"]) * substeps
            b = min((int(trial["end_step"]) + 1) * substeps, s.shape[0])
            lo, hi = max(w0, a, 0), min(w0 + length, b)
            if key not in self.sums:
                self.sums[key] = np.zeros((length, self.size))
                self.sq_sums[key] = np.zeros((length, self.size))
                self.bin_counts[key] = np.zeros(length)
            if hi > lo:
                seg = s[lo:hi]
                self.sums[key][lo - w0 : hi - w0] += seg
                self.sq_sums[key][lo - w0 : hi - w0] += seg * seg
                self.bin_counts[key][lo - w0 : hi - w0] += 1
            if b > a:
                self.trial_rates.setdefault(key, []).append(s[a:b].mean(0))

    def psth(self) -> dict[str, np.ndarray]:
        """Condition -> (pre + post, N) mean spikes per step over the trials covering each
        time bin (NaN where no trial covers it)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return {k: self.sums[k] / self.bin_counts[k][:, None] for k in sorted(self.sums)}

    def sem(self) -> dict[str, np.ndarray]:
        """Condition -> (pre + post, N) standard error of the mean across trials,
        ``sqrt(var / n)`` with the sample variance (ddof 1) of the n trials covering the bin;
        NaN where fewer than 2 trials cover it."""
        out = {}
        for k in sorted(self.sums):
            n = self.bin_counts[k][:, None]
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = self.sums[k] / n
                var = np.maximum(self.sq_sums[k] - n * mean * mean, 0.0) / (n - 1)
                out[k] = np.where(n >= 2, np.sqrt(var / n), np.nan)
        return out

    def counts(self) -> dict[str, np.ndarray]:
        """Condition -> (pre + post,) number of trials covering each time bin."""
        return {k: self.bin_counts[k].copy() for k in sorted(self.sums)}

    def n_trials(self) -> dict[str, int]:
        """Condition -> number of trials folded in."""
        return {k: len(v) for k, v in sorted(self.trial_rates.items())}

    def rates(self) -> dict[str, np.ndarray]:
        """Condition -> (trials, N) mean spikes per step over each trial."""
        return {k: np.stack(v) for k, v in sorted(self.trial_rates.items())}


class TuningAccumulator:
    """Mean spikes per step of each neuron by observation bin, per observation dimension.

    Bins have a fixed width per dimension, (99th - 1st percentile) / ``n_bins`` of the first
    episode, and start at its 1st percentile; later episodes add bins on either side as their
    values need them (streaming, no second pass), up to ``10 * n_bins`` bins beyond the first
    range on each side (further values join the outermost bin). Bins visited on fewer than
    ``min_count`` steps are left out of :meth:`curves`.
    """

    def __init__(self, size: int, n_bins: int = 10, min_count: int = 5):
        self.size, self.n_bins, self.min_count = int(size), int(n_bins), int(min_count)
        self.origin: np.ndarray | None = None
        self.width: np.ndarray | None = None
        self.bins: list[dict[int, list[Any]]] = []  # per dimension: index -> [sum (N,), n]

    def add(self, spikes: Any, observations: Any, substeps: int = 1) -> None:
        """Fold in one episode: (T * substeps, N) spikes, (T, ...) observations."""
        s = np.asarray(spikes, dtype=np.float64)
        obs = np.asarray(observations, dtype=np.float64).reshape(len(observations), -1)
        if substeps > 1:
            obs = np.repeat(obs, substeps, axis=0)
        obs = obs[: s.shape[0]]
        s = s[: obs.shape[0]]
        d = obs.shape[1]
        if self.origin is None:
            lo, hi = np.percentile(obs, [1, 99], axis=0)
            self.origin = lo
            self.width = np.where(hi > lo, (hi - lo) / self.n_bins, 1.0)
            self.bins = [{} for _ in range(d)]
        for j in range(d):
            k = np.floor((obs[:, j] - self.origin[j]) / self.width[j])
            k = np.clip(np.nan_to_num(k), -10 * self.n_bins, 11 * self.n_bins - 1).astype(int)
            uniq, inv = np.unique(k, return_inverse=True)
            onehot = np.zeros((uniq.size, inv.size))
            onehot[inv, np.arange(inv.size)] = 1.0
            sums = onehot @ s
            counts = onehot.sum(axis=1)
            for b, key in enumerate(uniq.tolist()):
                acc = self.bins[j].setdefault(key, [np.zeros(self.size), 0.0])
                acc[0] += sums[b]
                acc[1] += counts[b]

    def curves(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Per dimension: (B,) bin centres and (B, N) mean spikes per step, for the bins
        visited on at least ``min_count`` steps, in increasing order."""
        centres, curves = [], []
        for j, bins in enumerate(self.bins):
            keys = sorted(k for k, (_, n) in bins.items() if n >= self.min_count)
            centres.append(
                self.origin[j] + (np.asarray(keys, dtype=np.float64) + 0.5) * self.width[j]
            )
            curves.append(
                np.stack([bins[k][0] / bins[k][1] for k in keys])
                if keys
                else np.zeros((0, self.size))
            )
        return centres, curves
