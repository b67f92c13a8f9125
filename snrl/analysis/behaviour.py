"""Behaviour readouts of trial-structured tasks, computed from a trial log
(:class:`snrl.envs.trials.TrialTracker`'s records: ``choice``, ``gt``, ``correct``,
``decision_time``, ``conditions``, ``periods``), the way the task's paper reports behaviour.

* :func:`error_counts`: correct, wrong-choice and unanswered trials (any task).
* :func:`context_accuracy`: accuracy by context, by congruency and by both
  (ContextDecisionMaking, Mante et al., 2013). A trial is *congruent* when both modalities
  point to the same choice: NeuroGym's ``other_choice`` (the irrelevant modality's side)
  equals ``ground_truth`` (the relevant one's).
* :func:`comparison_accuracy`: accuracy per (f1, f2) pair, the f1 x f2 matrix, and the Weber
  curve, accuracy against ``|f1 - f2| / f1`` (DelayComparison, Romo et al., 1999; NeuroGym's
  ``v1``, ``v2`` in Hz).
* :func:`interval_production`: produced against sample interval, the regression slope and the
  scalar variability (ReadySetGo, Jazayeri & Shadlen, 2010/2015). The sample interval
  ``t_s`` is the length of the trial's ``measure`` period (ready to set, s); the produced
  interval ``t_p`` is the time from the onset of ``set`` to the go response, as NeuroGym's
  reward measures it (``t - end_t["measure"]``). Unanswered trials are counted, not used.
  Scalar variability: the coefficient of variation ``sd(t_p) / mean(t_p)`` per sample
  interval is constant, i.e. ``sd`` grows linearly with the mean.
* :func:`accuracy_by_delay`: accuracy against the length of the ``delay`` period, for tasks
  whose delay varies from trial to trial.
* :func:`chronometric_curve`: reaction time against coherence, correct and error trials
  apart (reaction-time tasks: the ``decision`` period opens before the ``stimulus`` period
  ends, e.g. PerceptualDecisionMaking with ``reaction_time=True``, Roitman & Shadlen, 2002).
  The reaction time is the trial log's ``reaction_time``: from the stimulus onset to the
  choice, s (the figure shows ms).

:func:`behaviour_readouts` picks the ones that apply to a log (by the conditions and periods
its trials have, not by the task's name), as ``snrl eval`` reports them. Every proportion has
its 95 % Wilson interval (:func:`snrl.analysis.psychometric.binomial_ci`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from snrl.analysis.psychometric import binomial_ci
from snrl.analysis.trials import nan_mean_sem
from snrl.errors import UserError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "accuracy_by_delay",
    "accuracy_table",
    "behaviour_readouts",
    "chronometric_curve",
    "comparison_accuracy",
    "context_accuracy",
    "error_counts",
    "has_reaction_time",
    "interval_production",
    "plot_behaviour",
    "save_behaviour",
]

Trials = Sequence[Mapping[str, Any]]


def _cond(trial: Mapping[str, Any], key: str) -> Any:
    v = (trial.get("conditions") or {}).get(key)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _scored(trials: Trials) -> list[Mapping[str, Any]]:
    return [t for t in trials if t.get("correct") is not None]


def _cell(flags: Sequence[bool]) -> dict[str, Any]:
    """``{"n", "n_correct", "accuracy", "ci_low", "ci_high"}`` of a group of trials."""
    n, k = len(flags), int(sum(bool(f) for f in flags))
    lo, hi = binomial_ci(k, n)
    return {
        "n": n,
        "n_correct": k,
        "accuracy": k / n if n else math.nan,
        "ci_low": lo,
        "ci_high": hi,
    }


def accuracy_table(trials: Trials, key: Callable[[Mapping[str, Any]], Hashable | None]) -> list:
    """Accuracy of the scored trials grouped by ``key(trial)`` (None: left out).

    Returns:
        ``[{"key": value, "n", "n_correct", "accuracy", "ci_low", "ci_high"}, ...]`` sorted by
        value.
    """
    groups: dict[Hashable, list[bool]] = {}
    for t in _scored(trials):
        v = key(t)
        if v is not None:
            groups.setdefault(v, []).append(bool(t["correct"]))
    return [{"key": v, **_cell(groups[v])} for v in sorted(groups)]


def error_counts(trials: Trials) -> dict[str, int]:
    """``{"n_trials", "n_correct", "n_error", "n_wrong_choice", "n_no_response",
    "n_unscored"}``: an error is a scored trial that is not correct; it is unanswered
    (``n_no_response``) when the agent made no choice in the response period
    (``decision_time`` None), a wrong choice otherwise."""
    scored = _scored(trials)
    errors = [t for t in scored if not t["correct"]]
    silent = sum(1 for t in errors if t.get("decision_time") is None)
    return {
        "n_trials": len(trials),
        "n_correct": len(scored) - len(errors),
        "n_error": len(errors),
        "n_wrong_choice": len(errors) - silent,
        "n_no_response": silent,
        "n_unscored": len(trials) - len(scored),
    }


# ---- ContextDecisionMaking -------------------------------------------------------------------
def has_context(trials: Trials) -> bool:
    """Whether the trials have ``context``, ``ground_truth`` and ``other_choice``."""
    keys = ("context", "ground_truth", "other_choice")
    return bool(trials) and all(all(_cond(t, k) is not None for k in keys) for t in trials)


def context_accuracy(trials: Trials) -> dict[str, Any]:
    """Accuracy by context, by congruency, and by both (module docstring).

    Returns:
        ``{"by_context": [...], "by_congruency": [...], "by_context_congruency": [...]}``,
        rows of :func:`accuracy_table` (``key``: the context, ``"congruent"`` /
        ``"incongruent"``, ``[context, "congruent"|"incongruent"]``), and ``"by_coherence"``:
        accuracy per coherence of the relevant modality (``coh_1`` in context 0, ``coh_2``
        in context 1) where the trials have them.

    Raises:
        UserError: The trials lack ``context``, ``ground_truth`` or ``other_choice``.
    """
    if not has_context(trials):
        raise UserError(
            "the trials have no context / ground_truth / other_choice conditions (accuracy by "
            "context and congruency needs e.g. ContextDecisionMaking-v0)"
        )

    def congruency(t: Mapping[str, Any]) -> str:
        same = _cond(t, "other_choice") == _cond(t, "ground_truth")
        return "congruent" if same else "incongruent"

    def relevant_coh(t: Mapping[str, Any]) -> Any:
        return _cond(t, "coh_2" if _cond(t, "context") == 1 else "coh_1")

    out = {
        "by_context": accuracy_table(trials, lambda t: _cond(t, "context")),
        "by_congruency": accuracy_table(trials, congruency),
        "by_context_congruency": [
            {**row, "key": list(row["key"])}
            for row in accuracy_table(trials, lambda t: (_cond(t, "context"), congruency(t)))
        ],
    }
    if all(relevant_coh(t) is not None for t in trials):
        out["by_coherence"] = accuracy_table(trials, relevant_coh)
    return out


# ---- DelayComparison -------------------------------------------------------------------------
def has_comparison(trials: Trials) -> bool:
    """Whether the trials have two numeric stimuli ``v1`` and ``v2``."""
    return bool(trials) and all(_cond(t, "v1") is not None and _cond(t, "v2") is not None
                                for t in trials)  # fmt: skip


def comparison_accuracy(trials: Trials) -> dict[str, Any]:
    """Accuracy per (f1, f2) pair and the Weber curve of a comparison task.

    Returns:
        ``{"f1": [...], "f2": [...], "matrix": [[accuracy or NaN] * len(f2)] * len(f1),
        "n": [[trials]...], "pairs": [{"f1", "f2", "n", "n_correct", "accuracy", "ci_low",
        "ci_high"}, ...], "weber": [{"key": |f1 - f2| / f1, ...}, ...]}``; ``matrix[i][j]``
        is the accuracy on the trials with ``f1[i]``, ``f2[j]`` (NaN where there are none).

    Raises:
        UserError: The trials lack ``v1`` / ``v2``, or have ``v1 == 0``.
    """
    if not has_comparison(trials):
        raise UserError(
            "the trials have no v1 / v2 conditions (the f1 x f2 matrix needs e.g. "
            "DelayComparison-v0)"
        )
    if any(_cond(t, "v1") == 0 for t in trials):
        raise UserError("a trial has f1 = v1 = 0: the Weber fraction |f1 - f2| / f1 is undefined")
    rows = accuracy_table(trials, lambda t: (float(_cond(t, "v1")), float(_cond(t, "v2"))))
    f1 = sorted({r["key"][0] for r in rows})
    f2 = sorted({r["key"][1] for r in rows})
    matrix = [[math.nan] * len(f2) for _ in f1]
    counts = [[0] * len(f2) for _ in f1]
    pairs = []
    for r in rows:
        a, b = r.pop("key")
        matrix[f1.index(a)][f2.index(b)] = r["accuracy"]
        counts[f1.index(a)][f2.index(b)] = r["n"]
        pairs.append({"f1": a, "f2": b, **r})

    def weber(t: Mapping[str, Any]) -> float:
        v1, v2 = float(_cond(t, "v1")), float(_cond(t, "v2"))
        return round(abs(v1 - v2) / abs(v1), 9)

    return {
        "f1": f1,
        "f2": f2,
        "matrix": matrix,
        "n": counts,
        "pairs": pairs,
        "weber": accuracy_table(trials, weber),
    }


# ---- ReadySetGo ------------------------------------------------------------------------------
def has_production(trials: Trials) -> bool:
    """Whether the trials have ``measure``, ``set`` and ``production`` periods."""
    need = ("measure", "set", "production")
    return bool(trials) and all(all(p in (t.get("periods") or {}) for p in need) for t in trials)


def interval_production(trials: Trials) -> dict[str, Any]:
    """Produced against sample interval (module docstring). Times in seconds.

    Returns:
        ``{"n_trials", "n_produced", "n_no_response", "fit": {"slope", "intercept",
        "slope_se", "intercept_se", "r"} (ordinary least squares of t_p on t_s over the
        answered trials; None with fewer than two distinct t_s), "points": [{"sample",
        "n", "mean", "sd", "cv", "target"}, ...] (per sample interval; ``sd`` with ddof 1,
        NaN for one trial; ``target`` the mean rewarded interval, the task's ``production``
        condition in ms / 1000, where given), "cv_mean": the trial-weighted mean CV over
        the points with two or more trials, "sd_vs_mean": {"slope", "intercept"} of sd
        against mean over those points (scalar variability: a slope > 0, an intercept near
        0)}``.

    Raises:
        UserError: The trials lack the ``measure`` / ``set`` / ``production`` periods.
    """
    if not has_production(trials):
        raise UserError(
            "the trials have no measure / set / production periods (produced against sample "
            "interval needs e.g. ReadySetGo-v0)"
        )
    samples: list[float] = []
    produced: list[float] = []
    targets: dict[float, list[float]] = {}
    silent = 0
    for t in trials:
        start, end = t["periods"]["measure"]
        ts = round(float(end) - float(start), 6)
        td = t.get("decision_time")
        if td is None:
            silent += 1
            continue
        samples.append(ts)
        produced.append(float(td) - float(end))
        target = _cond(t, "production")
        if target is not None:
            targets.setdefault(ts, []).append(float(target) / 1000.0)
    s = np.asarray(samples)
    p = np.asarray(produced)
    fit = None
    if np.unique(s).size >= 2:
        lr = stats.linregress(s, p)
        fit = {
            "slope": float(lr.slope),
            "intercept": float(lr.intercept),
            "slope_se": float(lr.stderr),
            "intercept_se": float(lr.intercept_stderr),
            "r": float(lr.rvalue),
        }
    points = []
    for ts in sorted(set(samples)):
        x = p[s == ts]
        sd = float(np.std(x, ddof=1)) if x.size > 1 else math.nan
        mean = float(np.mean(x))
        tg = targets.get(ts)
        points.append(
            {
                "sample": ts,
                "n": int(x.size),
                "mean": mean,
                "sd": sd,
                "cv": sd / mean if x.size > 1 and mean != 0 else math.nan,
                "target": float(np.mean(tg)) if tg else None,
            }
        )
    many = [q for q in points if q["n"] > 1 and math.isfinite(q["cv"])]
    cv_mean = (
        float(np.average([q["cv"] for q in many], weights=[q["n"] for q in many]))
        if many
        else math.nan
    )
    sd_vs_mean = None
    if len({q["mean"] for q in many}) >= 2:
        lr = stats.linregress([q["mean"] for q in many], [q["sd"] for q in many])
        sd_vs_mean = {"slope": float(lr.slope), "intercept": float(lr.intercept)}
    return {
        "n_trials": len(trials),
        "n_produced": int(p.size),
        "n_no_response": silent,
        "fit": fit,
        "points": points,
        "cv_mean": cv_mean,
        "sd_vs_mean": sd_vs_mean,
    }


# ---- variable delays -------------------------------------------------------------------------
def _delay(t: Mapping[str, Any], period: str) -> float | None:
    span = (t.get("periods") or {}).get(period)
    return None if span is None else round(float(span[1]) - float(span[0]), 6)


def has_variable_delay(trials: Trials, period: str = "delay") -> bool:
    """Whether the scored trials' ``period`` takes two or more lengths."""
    lengths = {_delay(t, period) for t in _scored(trials)}
    lengths.discard(None)
    return len(lengths) >= 2


def accuracy_by_delay(trials: Trials, period: str = "delay", max_bins: int = 8) -> list:
    """Accuracy against the length of the trials' ``period`` (s).

    With at most ``max_bins`` distinct lengths, one row per length; with more, ``max_bins``
    bins cut at the ``k / max_bins`` quantiles of the trials' lengths: a bin holds the lengths
    above the previous cut up to and including its own (a length never splits across bins;
    bins that hold no length are dropped, so there may be fewer).

    Returns:
        ``[{"delay_low", "delay_high", "delay_mean", "n", "n_correct", "accuracy",
        "ci_low", "ci_high"}, ...]`` (s), shortest first; a row covers ``delay_low <= d <=
        delay_high``.

    Raises:
        UserError: ``max_bins`` < 1, or the trials' ``period`` does not vary.
    """
    if isinstance(max_bins, bool) or not isinstance(max_bins, int) or max_bins < 1:
        raise UserError(f"max_bins must be an integer >= 1, got {max_bins!r}")
    if not has_variable_delay(trials, period):
        raise UserError(
            f"the trials' {period!r} period does not vary in length (accuracy against delay "
            "needs a task with a variable delay, e.g. ContextDecisionMaking-v0)"
        )
    rows = [
        (d, bool(t["correct"])) for t in _scored(trials) if (d := _delay(t, period)) is not None
    ]
    lengths = np.array(sorted({d for d, _ in rows}))
    if lengths.size <= max_bins:
        edges = [(d, d) for d in lengths]
    else:
        all_d = np.array([d for d, _ in rows])
        cuts = np.quantile(all_d, np.linspace(0, 1, max_bins + 1)[1:-1])
        labels = np.searchsorted(cuts, lengths, side="left")
        edges = [
            (float(lengths[labels == b].min()), float(lengths[labels == b].max()))
            for b in np.unique(labels)
        ]
    out = []
    for lo, hi in edges:
        group = [(d, c) for d, c in rows if lo <= d <= hi]
        out.append(
            {
                "delay_low": float(lo),
                "delay_high": float(hi),
                "delay_mean": float(np.mean([d for d, _ in group])),
                **_cell([c for _, c in group]),
            }
        )
    return out


# ---- reaction-time tasks ---------------------------------------------------------------------
def _answers_during_stimulus(t: Mapping[str, Any]) -> bool:
    periods = t.get("periods") or {}
    stim, dec = periods.get("stimulus"), periods.get("decision")
    return stim is not None and dec is not None and float(dec[0]) < float(stim[1])


def has_reaction_time(trials: Trials, condition: str = "coh") -> bool:
    """Whether the trials let the agent answer during the stimulus (their ``decision`` period
    opens before their ``stimulus`` period ends) and have a numeric ``condition``."""
    return bool(trials) and all(
        _answers_during_stimulus(t) and _cond(t, condition) is not None for t in trials
    )


def _rt_points(groups: Mapping[float, list[float]]) -> list[dict[str, Any]]:
    out = []
    for key in sorted(groups):
        rt = np.asarray(groups[key], dtype=np.float64)
        mean, sem = nan_mean_sem(rt)
        out.append(
            {
                "key": key,
                "n": int(rt.size),
                "mean": float(mean),
                "sem": float(sem),
                "median": float(np.median(rt)),
                "sd": float(np.std(rt, ddof=1)) if rt.size > 1 else math.nan,
            }
        )
    return out


def chronometric_curve(trials: Trials, condition: str = "coh") -> dict[str, Any]:
    """Reaction time against ``condition`` (the motion coherence, %), correct and error trials
    apart (module docstring).

    A trial enters when it is scored and has a ``reaction_time`` (an answer in the decision
    period); unanswered trials are counted in ``n_no_response``. Per value of the condition:
    ``mean`` and its standard error ``sem`` (``sqrt(var / n)``, ddof 1; NaN for one trial),
    ``median``, ``sd`` (ddof 1), ``n``. ``trend``: Spearman's rank correlation of reaction
    time with the condition over the correct trials (a chronometric function falls: rho < 0)
    and its two-sided p-value; None with fewer than two values of the condition or one
    reaction time throughout.

    Returns:
        ``{"condition", "unit": "s", "n_trials", "n_timed", "n_no_response", "correct":
        [{"key", "n", "mean", "sem", "median", "sd"}, ...], "error": [...], "trend":
        {"rho", "p_value", "n"} or None}``, rows sorted by the condition's value.

    Raises:
        UserError: The trials do not allow answers during the stimulus, or lack
            ``condition``.
    """
    if not has_reaction_time(trials, condition):
        raise UserError(
            f"the trials have no reaction-time structure with a {condition!r} condition (a "
            "chronometric curve needs a decision period that opens during the stimulus, e.g. "
            "snrl.tasks:PerceptualDecisionMaking-v0 with --env-kwargs '{\"reaction_time\": true}')"
        )
    groups: dict[bool, dict[float, list[float]]] = {True: {}, False: {}}
    silent = 0
    for t in _scored(trials):
        rt = t.get("reaction_time")
        if rt is None or not math.isfinite(float(rt)):
            silent += 1
            continue
        groups[bool(t["correct"])].setdefault(float(_cond(t, condition)), []).append(float(rt))
    trend = None
    right = groups[True]
    y = [v for k in right for v in right[k]]
    if len(right) >= 2 and np.ptp(y) > 0:
        x = [k for k in right for _ in right[k]]
        res = stats.spearmanr(x, y)
        trend = {"rho": float(res.statistic), "p_value": float(res.pvalue), "n": len(y)}
    return {
        "condition": condition,
        "unit": "s",
        "n_trials": len(trials),
        "n_timed": sum(len(v) for g in groups.values() for v in g.values()),
        "n_no_response": silent,
        "correct": _rt_points(groups[True]),
        "error": _rt_points(groups[False]),
        "trend": trend,
    }


# ---- what applies ----------------------------------------------------------------------------
def behaviour_readouts(trials: Trials) -> dict[str, Any]:
    """The readouts that apply to a trial log, as ``snrl eval`` reports them.

    Returns:
        ``{"errors": error_counts(...)}`` always, and where the trials have what they need:
        ``"context"`` (:func:`context_accuracy`), ``"comparison"``
        (:func:`comparison_accuracy`), ``"production"`` (:func:`interval_production`),
        ``"accuracy_by_delay"`` (:func:`accuracy_by_delay`), ``"chronometric"``
        (:func:`chronometric_curve`). (The psychometric curve of coherence tasks is
        :func:`snrl.analysis.psychometric.psychometric_curve`.)
    """
    out: dict[str, Any] = {"errors": error_counts(trials)}
    if has_context(trials):
        out["context"] = context_accuracy(trials)
    if has_comparison(trials) and all(_cond(t, "v1") != 0 for t in trials):
        out["comparison"] = comparison_accuracy(trials)
    if has_production(trials):
        out["production"] = interval_production(trials)
    if has_variable_delay(trials):
        out["accuracy_by_delay"] = accuracy_by_delay(trials)
    if has_reaction_time(trials):
        out["chronometric"] = chronometric_curve(trials)
    return out


def _bars(ax: Any, rows: Sequence[Mapping[str, Any]], labels: Sequence[str], title: str) -> None:
    y = np.array([r["accuracy"] for r in rows], dtype=np.float64)
    lo = np.array([r["ci_low"] for r in rows], dtype=np.float64)
    hi = np.array([r["ci_high"] for r in rows], dtype=np.float64)
    x = np.arange(len(rows))
    ax.bar(x, y, color="0.7", edgecolor="k", lw=0.6)
    ax.errorbar(x, y, yerr=[np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)], fmt="none",
                ecolor="k", lw=0.8)  # fmt: skip
    for xi, r in zip(x, rows):
        ax.text(xi, 0.02, f"n={r['n']}", ha="center", va="bottom", fontsize=6, rotation=90)
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.axhline(0.5, color="0.5", ls=":", lw=0.8)
    ax.set_ylabel("accuracy (95 % CI)", fontsize=8)
    ax.set_title(title, fontsize=8)


def _curve(ax: Any, rows: Sequence[Mapping[str, Any]], x: Sequence[float], xlabel: str) -> None:
    y = np.array([r["accuracy"] for r in rows], dtype=np.float64)
    lo = np.array([r["ci_low"] for r in rows], dtype=np.float64)
    hi = np.array([r["ci_high"] for r in rows], dtype=np.float64)
    ax.errorbar(x, y, yerr=[np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)], fmt="o-",
                color="k", ms=3, lw=0.8)  # fmt: skip
    ax.set_ylim(0, 1.05)
    ax.axhline(0.5, color="0.5", ls=":", lw=0.8)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_ylabel("accuracy (95 % CI)", fontsize=8)


def _chronometric(ax: Any, chrono: Mapping[str, Any]) -> None:
    """Mean reaction time (ms, ± SEM) against the condition, correct (filled) and error
    (open, dashed) trials, ``n`` beside each point."""
    from snrl.palette import HIGHLIGHT_COLOR, SPIKE_COLOR

    top = 0.0
    for kind, color, marker, ls in (("correct", SPIKE_COLOR, "o", "-"),
                                    ("error", HIGHLIGHT_COLOR, "o", "--")):  # fmt: skip
        rows = chrono[kind]
        if not rows:
            continue
        x = np.array([r["key"] for r in rows], dtype=np.float64)
        y = np.array([r["mean"] for r in rows], dtype=np.float64) * 1000.0
        e = np.nan_to_num(np.array([r["sem"] for r in rows], dtype=np.float64)) * 1000.0
        top = max(top, float(np.nanmax(y + e)))
        ax.errorbar(x, y, yerr=e, fmt=marker, ls=ls, color=color, ms=3, lw=0.8, capsize=2,
                    mfc=color if kind == "correct" else "white", label=kind)  # fmt: skip
        for xi, yi, r in zip(x, y, rows):
            ax.annotate(f"{r['n']}", (xi, yi), textcoords="offset points",
                        xytext=(3, 3) if kind == "correct" else (3, -9),
                        fontsize=6, color=color)  # fmt: skip
    ax.set_xlabel(f"{chrono['condition']} (%)" if chrono["condition"] == "coh"
                  else chrono["condition"], fontsize=8)  # fmt: skip
    ax.set_ylabel("reaction time (ms, mean \u00b1 SEM)", fontsize=8)
    ax.set_ylim(0, 1.25 * top if top > 0 else None)  # from 0; room for the n labels
    ax.set_title("chronometric curve (n per point)", fontsize=8)
    ax.legend(fontsize=6, frameon=False)


def plot_behaviour(readouts: Mapping[str, Any], *, title: str | None = None) -> Figure | None:
    """The figure of a :func:`behaviour_readouts` result: one panel per readout (context and
    congruency bars; the f1 x f2 matrix and the Weber curve; produced against sample interval
    with the fit and the identity line, and CV per sample interval; accuracy against delay;
    reaction time against coherence). None when no readout beyond the error counts applies.
    A bare Figure (no pyplot)."""
    from matplotlib.figure import Figure

    panels: list[Callable[[Any], None]] = []
    ctx = readouts.get("context")
    if ctx:
        rows = ctx["by_context_congruency"]
        labels = [f"ctx {k[0]}\n{'cong' if k[1] == 'congruent' else 'incong'}"
                  for k in (r["key"] for r in rows)]  # fmt: skip
        panels.append(lambda ax: _bars(ax, rows, labels, "context x congruency"))
    cmp_ = readouts.get("comparison")
    if cmp_:

        def matrix(ax: Any) -> None:
            m = np.array(cmp_["matrix"], dtype=np.float64)
            im = ax.imshow(m, origin="lower", cmap="cividis", vmin=0, vmax=1, aspect="auto")
            ax.set_xticks(range(len(cmp_["f2"])), [f"{v:g}" for v in cmp_["f2"]], fontsize=6)
            ax.set_yticks(range(len(cmp_["f1"])), [f"{v:g}" for v in cmp_["f1"]], fontsize=6)
            for i in range(m.shape[0]):
                for j in range(m.shape[1]):
                    if np.isfinite(m[i, j]):
                        ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=6,
                                color="w" if m[i, j] < 0.6 else "k")  # fmt: skip
            ax.set_xlabel("f2 (Hz)", fontsize=8)
            ax.set_ylabel("f1 (Hz)", fontsize=8)
            ax.set_title("accuracy per (f1, f2)", fontsize=8)
            ax.figure.colorbar(im, ax=ax, shrink=0.8)

        panels.append(matrix)
        panels.append(lambda ax: _curve(ax, cmp_["weber"], [r["key"] for r in cmp_["weber"]],
                                        "|f1 - f2| / f1"))  # fmt: skip
    prod = readouts.get("production")
    if prod and prod["points"]:

        def production(ax: Any) -> None:
            pts = prod["points"]
            s = np.array([q["sample"] for q in pts])
            m = np.array([q["mean"] for q in pts])
            sd = np.nan_to_num(np.array([q["sd"] for q in pts], dtype=np.float64))
            ax.errorbar(s, m, yerr=sd, fmt="o", color="k", ms=3, lw=0.8, label="mean \u00b1 sd")
            ax.plot(s, s, color="0.6", ls=":", lw=0.8, label="t_p = t_s")
            fit = prod["fit"]
            if fit:
                ax.plot(s, fit["intercept"] + fit["slope"] * s, color="C0", lw=1,
                        label=f"slope {fit['slope']:.2f}")  # fmt: skip
            ax.set_xlabel("sample interval t_s (s)", fontsize=8)
            ax.set_ylabel("produced interval t_p (s)", fontsize=8)
            ax.legend(fontsize=6, frameon=False)

        def cv(ax: Any) -> None:
            pts = [q for q in prod["points"] if math.isfinite(q["cv"])]
            ax.plot([q["sample"] for q in pts], [q["cv"] for q in pts], "o-", color="k", ms=3)
            ax.set_ylim(bottom=0)
            ax.set_xlabel("sample interval t_s (s)", fontsize=8)
            ax.set_ylabel("CV of t_p", fontsize=8)
            ax.set_title(f"scalar variability: mean CV {prod['cv_mean']:.2f}", fontsize=8)

        panels += [production, cv]
    delay = readouts.get("accuracy_by_delay")
    if delay:
        panels.append(lambda ax: _curve(ax, delay, [r["delay_mean"] for r in delay],
                                        "delay (s; bin mean)"))  # fmt: skip
    chrono = readouts.get("chronometric")
    if chrono and (chrono["correct"] or chrono["error"]):
        panels.append(lambda ax: _chronometric(ax, chrono))
    if not panels:
        return None
    fig = Figure(figsize=(max(3.0 * len(panels), 5.0), 2.8), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, draw in zip(axes, panels):
        draw(ax)
        ax.tick_params(labelsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    return fig


def save_behaviour(
    readouts: Mapping[str, Any],
    path: str | os.PathLike,
    *,
    title: str | None = None,
    style: str | None = None,
) -> Path | None:
    """Write :func:`plot_behaviour` as a PNG, atomically; None (nothing written) when no
    readout applies. With a ``style`` (``"paper"``, ``"talk"``: :mod:`snrl.analysis.style`)
    in that style, with its SVG (and PDF) next to it.

    Raises:
        UserError: ``path`` does not end in ``.png``.
    """
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise UserError(f"behaviour figure path {path} must end in .png (rename it)")
    fig = plot_behaviour(readouts, title=title)
    if fig is None:
        return None
    from snrl.analysis.style import write_png

    return write_png(fig, path, style=style, dpi=100)
