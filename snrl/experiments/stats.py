"""Statistics for multi-seed comparisons, in plain numpy/math (no scipy).

* :func:`bootstrap_ci`: percentile bootstrap confidence interval of the mean over seeds.
  With few seeds (``n**n <= exact_limit``) the bootstrap distribution is enumerated exactly
  (all ``n**n`` ordered resamples, each with probability ``n**-n``), so the interval is a
  deterministic function of the data; otherwise ``n_boot`` resamples are drawn from a seeded
  ``np.random.Generator``.
* :func:`mann_whitney_u`: two-sided Mann-Whitney U test. Exact p-value (the null
  distribution of U counted by dynamic programming over rank arrangements) when there are
  no ties and ``n1 * n2 <= 400``; otherwise the normal approximation with the tie-corrected
  variance and a 0.5 continuity correction.
* :func:`quantile`: linear-interpolation quantile (numpy's default, "type 7") that keeps
  ``inf`` (a run that never reached a threshold) meaningful.
* :func:`steps_to_threshold`: first env step at which a learning curve reaches a value.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

__all__ = [
    "MannWhitney",
    "bootstrap_ci",
    "bootstrap_means",
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


def bootstrap_means(
    values, *, n_boot: int = 10_000, seed: int = 0, exact_limit: int = 50_000
) -> np.ndarray:
    """The bootstrap distribution of the mean of ``values``.

    Args:
        values: (n,) finite numbers, one per seed.
        n_boot: resamples when the exact enumeration is too large.
        seed: seed of the ``np.random.Generator`` for the Monte Carlo case.
        exact_limit: enumerate all ``n**n`` ordered resamples when ``n**n`` is at most this.

    Returns:
        (M,) resample means (``M = n**n`` exact, else ``n_boot``).
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    n = x.size
    if n == 0:
        raise ValueError("bootstrap of an empty sample (need at least one value)")
    if n**n <= exact_limit:
        idx = np.array(list(itertools.product(range(n), repeat=n)), dtype=np.int64)
    else:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, n, size=(n_boot, n))
    return x[idx].mean(axis=1)


def bootstrap_ci(
    values,
    *,
    confidence: float = 0.95,
    n_boot: int = 10_000,
    seed: int = 0,
    exact_limit: int = 50_000,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the mean.

    The interval is ``(quantile(m, a/2), quantile(m, 1 - a/2))`` of the bootstrap means ``m``
    (:func:`bootstrap_means`) with ``a = 1 - confidence`` and linear interpolation.

    Args:
        values: (n,) finite numbers (NaNs are dropped).
        confidence: e.g. 0.95.
        n_boot, seed, exact_limit: see :func:`bootstrap_means`.

    Returns:
        ``(low, high)``; ``(nan, nan)`` when no finite value is given.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence={confidence} (must be in (0, 1))")
    x = np.asarray(values, dtype=np.float64).ravel()
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan, math.nan
    m = bootstrap_means(x, n_boot=n_boot, seed=seed, exact_limit=exact_limit)
    a = 1.0 - confidence
    return quantile(m, a / 2), quantile(m, 1 - a / 2)


class MannWhitney(NamedTuple):
    """Result of :func:`mann_whitney_u`."""

    u: float
    """U statistic of the first sample: pairs (x_i, y_j) with x_i > y_j, ties counting 1/2."""
    p_value: float
    """Two-sided p-value."""
    method: str
    """``"exact"`` or ``"normal"``."""


def _rank(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties getting their average rank."""
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(values.size, dtype=np.float64)
    sorted_v = values[order]
    i = 0
    while i < values.size:
        j = i
        while j + 1 < values.size and sorted_v[j + 1] == sorted_v[i]:
            j += 1
        ranks[order[i : j + 1]] = 0.5 * (i + j) + 1.0
        i = j + 1
    return ranks


def _u_null_counts(n1: int, n2: int) -> np.ndarray:
    """Number of arrangements of n1 x's and n2 y's for each U = 0..n1*n2 (no ties).

    Recurrence on the largest element: it is an x (adding n2 to U) or a y (adding 0):
    ``c(n1, n2, u) = c(n1 - 1, n2, u - n2) + c(n1, n2 - 1, u)``.
    """
    table: dict[tuple[int, int], np.ndarray] = {}
    for a in range(n1 + 1):
        for b in range(n2 + 1):
            if a == 0 or b == 0:
                c = np.zeros(a * b + 1)
                c[0] = 1.0
            else:
                c = np.zeros(a * b + 1)
                prev_x = table[(a - 1, b)]
                c[b : b + prev_x.size] += prev_x
                prev_y = table[(a, b - 1)]
                c[: prev_y.size] += prev_y
            table[(a, b)] = c
    return table[(n1, n2)]


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def mann_whitney_u(x, y, *, exact_max: int = 400) -> MannWhitney:
    """Two-sided Mann-Whitney U test of ``x`` against ``y``.

    ``U = R1 - n1 (n1 + 1) / 2`` with ``R1`` the rank sum of ``x`` in the pooled sample
    (average ranks for ties). Exact: ``p = min(1, 2 min(P(U' <= U), P(U' >= U)))`` under the
    null distribution of all ``C(n1 + n2, n1)`` equally likely arrangements. Normal:
    ``z = (|U - n1 n2 / 2| - 0.5) / sigma`` with
    ``sigma^2 = n1 n2 / 12 ((n + 1) - sum(t^3 - t) / (n (n - 1)))`` over tie groups of size t,
    ``p = 2 (1 - Phi(z))``.

    Args:
        x: (n1,) first sample (NaNs dropped).
        y: (n2,) second sample (NaNs dropped).
        exact_max: largest ``n1 * n2`` for the exact distribution (when there are no ties).

    Returns:
        :class:`MannWhitney`; ``p_value`` is NaN when a sample is empty.
    """
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    n1, n2 = a.size, b.size
    if n1 == 0 or n2 == 0:
        return MannWhitney(math.nan, math.nan, "none")
    pooled = np.concatenate([a, b])
    ranks = _rank(pooled)
    u = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2)
    ties = np.unique(pooled).size != pooled.size
    if not ties and n1 * n2 <= exact_max:
        counts = _u_null_counts(n1, n2)
        total = counts.sum()
        k = int(round(u))
        lower = counts[: k + 1].sum() / total
        upper = counts[k:].sum() / total
        return MannWhitney(u, float(min(1.0, 2.0 * min(lower, upper))), "exact")
    n = n1 + n2
    _, t = np.unique(pooled, return_counts=True)
    var = n1 * n2 / 12.0 * ((n + 1) - float((t**3 - t).sum()) / (n * (n - 1)))
    if var <= 0:
        return MannWhitney(u, 1.0, "normal")
    z = max(0.0, abs(u - n1 * n2 / 2.0) - 0.5) / math.sqrt(var)
    return MannWhitney(u, float(min(1.0, 2.0 * _normal_sf(z))), "normal")


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
