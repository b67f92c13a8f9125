"""Statistics for multi-seed comparisons; the tests and the bootstrap are scipy's.

* :func:`bootstrap_ci`: percentile bootstrap confidence interval of the mean over seeds
  (``scipy.stats.bootstrap``, 10,000 resamples from a seeded generator).
* :func:`mann_whitney_u`: two-sided Mann-Whitney U test (``scipy.stats.mannwhitneyu``):
  exact p-value when there are no ties and ``n1 * n2 <= 400``; otherwise the normal
  approximation with the tie-corrected variance and a 0.5 continuity correction.
* :func:`quantile`: linear-interpolation quantile (numpy's default, "type 7") that keeps
  ``inf`` (a run that never reached a threshold) meaningful. Written here because
  ``np.quantile`` returns NaN whenever its interpolation touches an ``inf``.
* :func:`steps_to_threshold`: first env step at which a learning curve reaches a value.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

__all__ = [
    "MannWhitney",
    "bootstrap_ci",
    "bootstrap_ci_columns",
    "mann_whitney_u",
    "quantile",
    "steps_to_threshold",
]


def quantile(values, q: float) -> float:
    """Linear-interpolation quantile (numpy's default method) that allows ``+inf`` values.

    Between two order statistics ``a <= b`` at fraction ``f`` the result is ``a + f (b - a)``,
    except that it is ``a`` when ``f == 0`` and ``inf`` when ``b`` is ``inf`` and ``f > 0``.

    Args:
        values: 1-D numbers (``inf`` allowed, no NaN).
        q: quantile in [0, 1].

    Returns:
        The quantile, or NaN for an empty input.
    """
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if x.size == 0:
        return math.nan
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q={q} (must be in [0, 1])")
    pos = q * (x.size - 1)
    lo = int(math.floor(pos))
    frac = pos - lo
    if frac == 0.0 or lo + 1 >= x.size:
        return float(x[lo])
    a, b = float(x[lo]), float(x[lo + 1])
    if math.isinf(b):
        return b
    return a + frac * (b - a)


def bootstrap_ci(
    values, *, confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean (``scipy.stats.bootstrap``).

    ``n_boot`` resamples drawn from ``np.random.default_rng(seed)``, so the interval is a
    deterministic function of the data and the seed. One value gives ``(x, x)``: every
    resample of one value is that value (scipy needs two).

    Args:
        values: (n,) finite numbers (NaNs are dropped).
        confidence: e.g. 0.95.
        n_boot: resamples.
        seed: seed of the resampling generator.

    Returns:
        ``(low, high)``; ``(nan, nan)`` when no finite value is given.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    low, high = bootstrap_ci_columns(x[np.isfinite(x)][:, None], confidence, n_boot, seed)
    return float(low[0]), float(high[0])


def bootstrap_ci_columns(
    values: np.ndarray, confidence: float = 0.95, n_boot: int = 10_000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`bootstrap_ci` of each column of ``values`` in one ``scipy.stats.bootstrap``
    call (a learning curve's band at every env step at once).

    Args:
        values: (n, m) finite numbers: n seeds, m columns.
        confidence, n_boot, seed: as in :func:`bootstrap_ci`.

    Returns:
        ``(low, high)``, each (m,); NaN when ``n == 0``.
    """
    from scipy import stats

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence} (must be in (0, 1))")
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"values of shape {x.shape} (pass an (n, m) array)")
    if x.shape[0] == 0:
        return np.full(x.shape[1], np.nan), np.full(x.shape[1], np.nan)
    if x.shape[0] == 1 or bool(np.all(x == x[:1])):
        return x[0].copy(), x[0].copy()
    res = stats.bootstrap(
        (x,),
        np.mean,
        n_resamples=n_boot,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        axis=0,
        random_state=np.random.default_rng(seed),
    )
    ci = res.confidence_interval
    return np.asarray(ci.low, dtype=np.float64), np.asarray(ci.high, dtype=np.float64)


class MannWhitney(NamedTuple):
    """Result of :func:`mann_whitney_u`."""

    u: float
    """U statistic of the first sample: pairs (x_i, y_j) with x_i > y_j, ties counting 1/2."""
    p_value: float
    """Two-sided p-value."""
    method: str
    """``"exact"`` or ``"normal"``."""


def mann_whitney_u(x, y, *, exact_max: int = 400) -> MannWhitney:
    """Two-sided Mann-Whitney U test of ``x`` against ``y`` (``scipy.stats.mannwhitneyu``).

    ``U = R1 - n1 (n1 + 1) / 2`` with ``R1`` the rank sum of ``x`` in the pooled sample
    (average ranks for ties). Exact p-value (the null distribution of U over all
    ``C(n1 + n2, n1)`` arrangements) when there are no ties and ``n1 * n2 <= exact_max``;
    otherwise the normal approximation with the tie-corrected variance and a 0.5
    continuity correction (scipy's exact method makes no tie correction, so it is not used
    with ties).

    Args:
        x: (n1,) first sample (NaNs dropped).
        y: (n2,) second sample (NaNs dropped).
        exact_max: largest ``n1 * n2`` for the exact distribution.

    Returns:
        :class:`MannWhitney`; ``p_value`` is NaN when a sample is empty.
    """
    from scipy import stats

    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if a.size == 0 or b.size == 0:
        return MannWhitney(math.nan, math.nan, "none")
    pooled = np.concatenate([a, b])
    ties = np.unique(pooled).size != pooled.size
    exact = not ties and a.size * b.size <= exact_max
    res = stats.mannwhitneyu(
        a,
        b,
        alternative="two-sided",
        method="exact" if exact else "asymptotic",
        use_continuity=True,
    )
    return MannWhitney(float(res.statistic), float(res.pvalue), "exact" if exact else "normal")


def steps_to_threshold(env_steps, returns, threshold: float) -> float:
    """The first env step at which ``returns >= threshold`` (``inf`` if never; NaN entries
    never count).

    Args:
        env_steps: (R,) env step of each metrics row.
        returns: (R,) the learning-curve value of each row (e.g. ``episode_return_mean``).
        threshold: the target return.
    """
    s = np.asarray(env_steps, dtype=np.float64)
    r = np.asarray(returns, dtype=np.float64)
    if threshold is None or not math.isfinite(threshold):
        return math.nan
    hit = np.flatnonzero(np.nan_to_num(r, nan=-np.inf) >= threshold)
    return float(s[hit[0]]) if hit.size else math.inf
