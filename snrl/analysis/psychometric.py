"""The psychometric curve of a two-choice decision task: P(choice = right) against signed
coherence, and its logistic fit.

From a trial log (:class:`snrl.envs.trials.TrialTracker`'s dicts with ``choice``, ``gt`` and
the trial's ``conditions``): the two choice actions are the two ground-truth actions the
trials have; "right" is the larger (NeuroGym's PerceptualDecisionMaking: action 2, ground
truth 1). The signed coherence of a trial is ``+coh`` when its ground truth is right and
``-coh`` otherwise (so 0 % pools both). Trials without a response (``choice`` neither action)
are counted per point (``n_no_response``) and left out of P(right).

The fit is the two-parameter logistic without lapses (Wichmann & Hill, 2001, "The
psychometric function: I. Fitting, sampling, and goodness of fit", with the lapse rates at 0)::

    P(right | x) = 1 / (1 + exp(-slope * (x - bias)))

``slope`` per unit of coherence (NeuroGym's ``coh`` is in %), ``bias`` the coherence at which
P = 0.5 (in the same unit). Maximum likelihood of the binomial counts (scipy.optimize,
logit ``a x + b``, then ``slope = a``, ``bias = -b / a``); standard errors from the inverse of
the exact Hessian (Fisher information) and the delta method.

With lapses (:func:`fit_logistic_lapse`), the four-parameter form of Wichmann & Hill (2001)::

    P(right | x) = guess + (1 - guess - lapse) / (1 + exp(-slope * (x - bias)))

``guess`` is P(right) at strong evidence for left (the lower asymptote), ``lapse`` is
P(left) at strong evidence for right (1 - the upper asymptote): the two lapse rates of a
two-choice task. Maximum likelihood with bounds (scipy's L-BFGS-B; ``0 <= guess, lapse <=
max_lapse``), started from the lapse-free fit and a few other points, the best kept.

Each point has a binomial confidence interval of P(right) (:func:`binomial_ci`: Wilson's
score interval by default, or Clopper-Pearson's exact one; scipy.stats.binomtest).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import optimize, stats

from snrl.errors import UserError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "binomial_ci",
    "fit_logistic",
    "fit_logistic_lapse",
    "has_psychometric",
    "logistic",
    "logistic_lapse",
    "plot_psychometric",
    "psychometric_curve",
    "save_psychometric",
]


def logistic(x: Any, slope: float, bias: float) -> np.ndarray:
    """``1 / (1 + exp(-slope * (x - bias)))``, elementwise (overflow-free)."""
    z = slope * (np.asarray(x, dtype=np.float64) - bias)
    return np.exp(-np.logaddexp(0.0, -z))


def logistic_lapse(x: Any, slope: float, bias: float, guess: float, lapse: float) -> np.ndarray:
    """``guess + (1 - guess - lapse) * logistic(x, slope, bias)``, elementwise."""
    return guess + (1.0 - guess - lapse) * logistic(x, slope, bias)


def binomial_ci(k: int, n: int, level: float = 0.95, method: str = "wilson") -> tuple[float, float]:
    """The confidence interval of a binomial proportion ``k / n``.

    Args:
        k: Successes.
        n: Trials (``0 <= k <= n``); ``n == 0`` gives ``(nan, nan)``.
        level: Confidence level in (0, 1).
        method: ``"wilson"`` (Wilson's score interval) or ``"exact"`` (Clopper-Pearson).

    Returns:
        ``(low, high)``, each in [0, 1].

    Raises:
        UserError: A count, level or method out of range.
    """
    if method not in ("wilson", "exact"):
        raise UserError(f"binomial interval method must be 'wilson' or 'exact', got {method!r}")
    if not 0 < level < 1:
        raise UserError(f"confidence level must be in (0, 1), got {level!r}")
    k, n = int(k), int(n)
    if n < 0 or not 0 <= k <= max(n, 0):
        raise UserError(f"binomial counts need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return math.nan, math.nan
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=level, method=method)
    return float(ci.low), float(ci.high)


def _counts(
    x: Any, n_right: Any, n: Any, min_points: int, what: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The checked counts of a fit, points without trials dropped (float64 arrays)."""
    x = np.asarray(x, dtype=np.float64)
    k = np.asarray(n_right, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if not (x.shape == k.shape == n.shape) or np.any(k < 0) or np.any(k > n):
        raise UserError("psychometric counts must have one n_right <= n per point (fix them)")
    use = n > 0
    x, k, n = x[use], k[use], n[use]
    if np.unique(x).size < min_points:
        words = {2: "two", 4: "four"}.get(min_points, str(min_points))
        raise UserError(f"{what} needs trials at {words} or more coherences (evaluate more trials)")
    return x, k, n


def fit_logistic(x: Any, n_right: Any, n: Any) -> dict[str, float | bool]:
    """Maximum-likelihood fit of :func:`logistic` to binomial counts.

    Args:
        x: (K,) stimulus values (signed coherence).
        n_right: (K,) "right" choices at each value.
        n: (K,) trials at each value (>= n_right).

    Returns:
        ``{"slope", "bias", "slope_se", "bias_se", "log_likelihood", "converged"}``; the
        standard errors are NaN where the information matrix is singular (e.g. perfectly
        separated choices, where the slope diverges and ``converged`` may be False).

    Raises:
        UserError: Fewer than two distinct ``x`` with trials, or counts that do not fit.
    """
    x, k, n = _counts(x, n_right, n, 2, "a psychometric fit")
    scale = float(np.max(np.abs(x))) or 1.0  # fit on x / scale: well-conditioned
    u = x / scale

    def nll(theta: np.ndarray) -> float:
        z = theta[0] * u + theta[1]
        # -log L = sum n log(1 + e^z) - k z  (binomial, constants dropped)
        return float(np.sum(n * np.logaddexp(0.0, z) - k * z))

    def grad(theta: np.ndarray) -> np.ndarray:
        z = theta[0] * u + theta[1]
        r = n * np.exp(-np.logaddexp(0.0, -z)) - k
        return np.array([np.sum(r * u), np.sum(r)])

    res = optimize.minimize(nll, np.zeros(2), jac=grad, method="BFGS")
    a_u, b = (float(v) for v in res.x)
    a = a_u / scale
    p = np.exp(-np.logaddexp(0.0, -(a * x + b)))
    w = n * p * (1 - p)
    info = np.array([[np.sum(w * x * x), np.sum(w * x)], [np.sum(w * x), np.sum(w)]])
    slope_se = bias_se = math.nan
    bias = -b / a if a != 0 else math.nan
    try:
        cov = np.linalg.inv(info)
        if np.all(np.isfinite(cov)) and cov[0, 0] >= 0 and cov[1, 1] >= 0:
            slope_se = float(math.sqrt(cov[0, 0]))
            if a != 0:
                g = np.array([b / a**2, -1.0 / a])  # d(-b/a)/d(a, b)
                bias_se = float(math.sqrt(max(g @ cov @ g, 0.0)))
    except np.linalg.LinAlgError:
        pass
    z = a * x + b
    loglik = float(np.sum(k * z - n * np.logaddexp(0.0, z)))  # log-likelihood, no binomials
    return {
        "slope": a,
        "bias": float(bias),
        "slope_se": slope_se,
        "bias_se": bias_se,
        "log_likelihood": loglik,
        "converged": bool(res.success),
    }


def fit_logistic_lapse(
    x: Any, n_right: Any, n: Any, *, max_lapse: float = 0.25
) -> dict[str, float | bool]:
    """Maximum-likelihood fit of :func:`logistic_lapse` to binomial counts (module docstring).

    Args:
        x: (K,) stimulus values (signed coherence).
        n_right: (K,) "right" choices at each value.
        n: (K,) trials at each value (>= n_right).
        max_lapse: Upper bound of ``guess`` and of ``lapse`` (in (0, 0.5]).

    Returns:
        ``{"slope", "bias", "guess", "lapse", "log_likelihood", "converged"}`` (no standard
        errors: at a bound they are not defined by the Hessian).

    Raises:
        UserError: Fewer than four distinct ``x`` with trials (four parameters), counts that
            do not fit, or ``max_lapse`` out of range.
    """
    if not 0 < max_lapse <= 0.5:
        raise UserError(f"max_lapse must be in (0, 0.5], got {max_lapse!r}")
    x, k, n = _counts(x, n_right, n, 4, "a psychometric fit with lapse rates")
    scale = float(np.max(np.abs(x))) or 1.0
    u = x / scale
    eps = 1e-12

    def nll_grad(theta: np.ndarray) -> tuple[float, np.ndarray]:
        a, b, g, lam = theta
        s = np.exp(-np.logaddexp(0.0, -(a * u + b)))
        p = np.clip(g + (1.0 - g - lam) * s, eps, 1.0 - eps)
        nll = -float(np.sum(k * np.log(p) + (n - k) * np.log1p(-p)))
        dp = -(k / p - (n - k) / (1.0 - p))  # d nll / d p
        ds = (1.0 - g - lam) * s * (1.0 - s)
        grad = np.array(
            [np.sum(dp * ds * u), np.sum(dp * ds), np.sum(dp * (1.0 - s)), np.sum(dp * -s)]
        )
        return nll, grad

    base = fit_logistic(x, k, n)
    a0 = base["slope"] * scale if np.isfinite(base["slope"]) else 1.0
    b0 = -base["bias"] * base["slope"] if np.isfinite(base["bias"]) else 0.0
    bounds = [(None, None), (None, None), (0.0, max_lapse), (0.0, max_lapse)]
    best = None
    for start in ([a0, b0, 0.01, 0.01], [a0, b0, 0.1, 0.1], [2 * a0, b0, 0.05, 0.05]):
        start = np.clip(np.asarray(start, dtype=np.float64), -50, 50)
        start[2:] = np.minimum(start[2:], max_lapse / 2)
        res = optimize.minimize(nll_grad, start, jac=True, method="L-BFGS-B", bounds=bounds)
        if best is None or res.fun < best.fun:
            best = res
    a_u, b, g, lam = (float(v) for v in best.x)
    a = a_u / scale
    return {
        "slope": a,
        "bias": -b / a if a != 0 else math.nan,
        "guess": g,
        "lapse": lam,
        "log_likelihood": -float(best.fun),
        "converged": bool(best.success),
    }


def _choices(trials: Sequence[Mapping[str, Any]]) -> list[Any]:
    gts = {t.get("gt") for t in trials if isinstance(t.get("gt"), (int, float))}
    return sorted(gts)


def has_psychometric(trials: Sequence[Mapping[str, Any]], condition: str = "coh") -> bool:
    """Whether a trial log has what :func:`psychometric_curve` needs: two ground-truth
    actions, a numeric ``condition`` and two or more of its signed values."""
    if len(_choices(trials)) != 2:
        return False
    values = set()
    right = _choices(trials)[1]
    for t in trials:
        c = (t.get("conditions") or {}).get(condition)
        if isinstance(c, (int, float)) and not isinstance(c, bool):
            values.add(c if t.get("gt") == right else -c)
    return len(values) >= 2


def psychometric_curve(
    trials: Sequence[Mapping[str, Any]], condition: str = "coh"
) -> dict[str, Any]:
    """P(choice = right) per signed coherence, with its logistic fit.

    Args:
        trials: A trial log of a two-choice task whose conditions hold ``condition``.
        condition: The stimulus-strength condition (NeuroGym's ``"coh"``, in %).

    Returns:
        ``{"condition", "right_action", "left_action", "points": [{"coherence", "n",
        "n_right", "n_no_response", "p_right", "ci_low", "ci_high", "p_fit"}, ...] (sorted
        by coherence), "fit": fit_logistic(...), "fit_lapse": fit_logistic_lapse(...)}``;
        ``ci_low``/``ci_high`` are the 95 % Wilson interval of ``p_right`` (NaN without
        answered trials); ``fit_lapse`` is None with fewer than four coherences.

    Raises:
        UserError: The log is not of a two-choice task with that condition at two or more
            signed values.
    """
    if not has_psychometric(trials, condition):
        raise UserError(
            f"the trials are not of a two-choice task with a numeric {condition!r} condition at "
            "two or more values (a psychometric curve needs e.g. PerceptualDecisionMaking-v0)"
        )
    left, right = _choices(trials)
    counts: dict[float, list[int]] = {}  # coherence -> [n responded, n right, n no response]
    for t in trials:
        c = (t.get("conditions") or {}).get(condition)
        numeric = isinstance(c, (int, float)) and not isinstance(c, bool)
        if not numeric or t.get("gt") not in (left, right):
            continue
        x = float(c) if t["gt"] == right else -float(c)
        x = 0.0 if x == 0 else x
        row = counts.setdefault(x, [0, 0, 0])
        if t.get("choice") == right:
            row[0] += 1
            row[1] += 1
        elif t.get("choice") == left:
            row[0] += 1
        else:
            row[2] += 1
    xs = sorted(counts)
    n = np.array([counts[x][0] for x in xs])
    k = np.array([counts[x][1] for x in xs])
    fit = fit_logistic(xs, k, n)
    p_fit = logistic(xs, fit["slope"], fit["bias"])
    fit_lapse = fit_logistic_lapse(xs, k, n) if np.count_nonzero(n) >= 4 else None
    points = []
    for x, pf in zip(xs, p_fit):
        lo, hi = binomial_ci(counts[x][1], counts[x][0])
        points.append(
            {
                "coherence": x,
                "n": int(counts[x][0]),
                "n_right": int(counts[x][1]),
                "n_no_response": int(counts[x][2]),
                "p_right": counts[x][1] / counts[x][0] if counts[x][0] else math.nan,
                "ci_low": lo,
                "ci_high": hi,
                "p_fit": float(pf),
            }
        )
    return {
        "condition": condition,
        "right_action": right,
        "left_action": left,
        "points": points,
        "fit": fit,
        "fit_lapse": fit_lapse,
    }


def plot_psychometric(curve: Mapping[str, Any], *, title: str | None = None) -> Figure:
    """The figure of a :func:`psychometric_curve` result: the points (size by trials) with
    their 95 % binomial intervals, the fitted logistic and, where fitted, the logistic with
    lapse rates (dashed). A bare ``matplotlib.figure.Figure`` (no pyplot, no backend change)."""
    from matplotlib.figure import Figure

    pts = curve["points"]
    x = np.array([p["coherence"] for p in pts])
    y = np.array([p["p_right"] for p in pts])
    n = np.array([p["n"] for p in pts])
    fit = curve["fit"]
    fig = Figure(figsize=(4.5, 3.6), layout="constrained")
    ax = fig.add_subplot()
    span = float(np.max(np.abs(x))) or 1.0
    grid = np.linspace(-span * 1.05, span * 1.05, 201)
    if np.isfinite(fit["slope"]) and np.isfinite(fit["bias"]):
        ax.plot(
            grid,
            logistic(grid, fit["slope"], fit["bias"]),
            color="C0",
            label=f"logistic fit: slope {fit['slope']:.3g}/%, bias {fit['bias']:.3g} %",
        )
    lapse = curve.get("fit_lapse")
    if lapse and np.isfinite(lapse["slope"]) and np.isfinite(lapse["bias"]):
        ax.plot(
            grid,
            logistic_lapse(grid, lapse["slope"], lapse["bias"], lapse["guess"], lapse["lapse"]),
            color="C1",
            ls="--",
            label=f"with lapses: guess {lapse['guess']:.2f}, lapse {lapse['lapse']:.2f}",
        )
    lo = np.array([p.get("ci_low", math.nan) for p in pts], dtype=np.float64)
    hi = np.array([p.get("ci_high", math.nan) for p in pts], dtype=np.float64)
    if np.any(np.isfinite(lo)):
        err = np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)])
        ax.errorbar(x, y, yerr=err, fmt="none", ecolor="0.4", lw=0.8, zorder=2)
    ax.scatter(
        x, y, s=12 + 60 * n / max(int(n.max()), 1), color="k", zorder=3, label="agent (95 % CI)"
    )
    ax.axhline(0.5, color="0.8", lw=0.8, zorder=0)
    ax.axvline(0.0, color="0.8", lw=0.8, zorder=0)
    ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(f"signed {curve.get('condition', 'coh')} (%; + = right is correct)")
    ax.set_ylabel("P(choice = right)")
    ax.legend(loc="upper left", fontsize=7, frameon=False)
    if title:
        ax.set_title(title, fontsize=9)
    return fig


def save_psychometric(
    curve: Mapping[str, Any],
    path: str | os.PathLike,
    *,
    title: str | None = None,
    style: str | None = None,
) -> Path:
    """Write :func:`plot_psychometric` as a PNG, atomically; with a ``style`` (``"paper"``,
    ``"talk"``: :mod:`snrl.analysis.style`) in that style, with its SVG (and PDF) next to it.

    Raises:
        UserError: ``path`` does not end in ``.png``.
    """
    path = Path(path)
    if path.suffix.lower() != ".png":
        raise UserError(f"psychometric figure path {path} must end in .png (rename it)")
    from snrl.analysis.style import write_png

    return write_png(plot_psychometric(curve, title=title), path, style=style, dpi=120)
