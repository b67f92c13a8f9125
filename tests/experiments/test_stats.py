"""Bootstrap CI, Mann-Whitney U, quantiles and steps-to-threshold against hand-computed values
and brute-force oracles (the enumerations the hand-written versions used before scipy)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from snrl.experiments.stats import (
    bootstrap_ci,
    bootstrap_ci_columns,
    mann_whitney_u,
    quantile,
    steps_to_threshold,
)


def _exact_bootstrap_ci(values, confidence=0.95):
    """Oracle: all n**n ordered resamples, percentile interval with linear interpolation."""
    x = np.asarray(values, dtype=np.float64)
    means = x[np.array(list(itertools.product(range(x.size), repeat=x.size)))].mean(axis=1)
    a = 1 - confidence
    return np.quantile(means, a / 2), np.quantile(means, 1 - a / 2)


def _exact_mw_p(x, y):
    """Oracle: two-sided exact p of U over all C(n1 + n2, n1) arrangements (no ties)."""
    pooled = np.concatenate([x, y])
    ranks = pooled.argsort().argsort() + 1.0
    n1 = len(x)
    u_obs = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    us = []
    for idx in itertools.combinations(range(pooled.size), n1):
        us.append(ranks[list(idx)].sum() - n1 * (n1 + 1) / 2)
    us = np.array(us)
    lower, upper = np.mean(us <= u_obs), np.mean(us >= u_obs)
    return u_obs, min(1.0, 2 * min(lower, upper))


def test_bootstrap_small_cases():
    # one value: every resample is that value (scipy itself needs two)
    assert bootstrap_ci([4.0]) == (4.0, 4.0)
    assert bootstrap_ci([3.0, 3.0, 3.0, 3.0]) == (3.0, 3.0)
    assert all(math.isnan(v) for v in bootstrap_ci([math.nan]))
    assert all(math.isnan(v) for v in bootstrap_ci([]))
    assert bootstrap_ci([1.0, math.nan, 1.0]) == (1.0, 1.0)  # NaNs dropped
    for values in ([0.0, 1.0], [1.0, 2.0, 6.0], [0.0, 1.0, 2.0, 3.0, 10.0], [5.0, 9.0, 1.0]):
        low, high = bootstrap_ci(values)
        assert min(values) <= low <= np.mean(values) <= high <= max(values)
        assert bootstrap_ci(values) == (low, high)  # seeded: the same interval every time


def test_bootstrap_agrees_with_the_exact_enumeration():
    # the previous implementation enumerated all n**n resamples up to 6 seeds
    for values in ([0.0, 1.0, 2.0, 3.0, 10.0], [200.0, 500.0, 450.0, 500.0, 310.0, 480.0]):
        exact = _exact_bootstrap_ci(values)
        spread = max(values) - min(values)
        assert bootstrap_ci(values) == pytest.approx(exact, abs=0.04 * spread)
    # many seeds: close to the normal-theory interval mean +- 1.96 sd / sqrt(n)
    x = np.arange(8.0)
    low, high = bootstrap_ci(x, seed=3)
    half = 1.96 * x.std() / math.sqrt(x.size)
    assert low == pytest.approx(x.mean() - half, abs=0.25)
    assert high == pytest.approx(x.mean() + half, abs=0.25)


def test_bootstrap_columns_match_one_column_at_a_time():
    rng = np.random.default_rng(0)
    block = rng.normal(size=(5, 4)) + np.arange(4.0)
    low, high = bootstrap_ci_columns(block)
    for j in range(4):
        assert low[j] < block[:, j].mean() < high[j]
        assert (low[j], high[j]) == pytest.approx(bootstrap_ci(block[:, j]), abs=0.1)
    low, high = bootstrap_ci_columns(block[:1])
    np.testing.assert_array_equal(low, block[0])
    np.testing.assert_array_equal(high, block[0])


def test_mann_whitney_exact_hand_values():
    # n1 = n2 = 2: the 6 arrangements give U = 0, 1, 2, 2, 3, 4.
    r = mann_whitney_u([1.0, 2.0], [3.0, 4.0])
    assert (r.u, r.method) == (0.0, "exact")
    assert r.p_value == pytest.approx(2 / 6)  # 2 * P(U <= 0)
    r = mann_whitney_u([1.0, 3.0], [2.0, 4.0])
    assert r.u == 1.0
    assert r.p_value == pytest.approx(2 * 2 / 6)  # 2 * P(U <= 1)
    # 5 vs 5, complete separation: 2 / C(10, 5) = 2 / 252, both directions
    assert mann_whitney_u(range(5), range(5, 10)).p_value == pytest.approx(2 / 252)
    r = mann_whitney_u(range(5, 10), range(5))
    assert r.u == 25.0 and r.p_value == pytest.approx(2 / 252)
    # identical distributions in the middle: p = 1
    assert mann_whitney_u([1.0, 4.0], [2.0, 3.0]).p_value == pytest.approx(1.0)


def test_mann_whitney_exact_matches_enumeration():
    rng = np.random.default_rng(1)
    for n1, n2 in ((3, 3), (4, 5), (5, 6), (2, 7)):
        x, y = rng.normal(size=n1), rng.normal(size=n2) + 0.8
        u, p = _exact_mw_p(x, y)
        r = mann_whitney_u(x, y)
        assert r.method == "exact"
        assert r.u == u
        assert r.p_value == pytest.approx(p, rel=1e-12)


def test_mann_whitney_ties_normal_approximation():
    # pooled 1,1,1,2,2,2: average ranks 2 and 5; R1 = 2 + 2 + 5 = 9, U = 9 - 6 = 3.
    # sigma^2 = 9/12 * (7 - 2 * (27 - 3) / 30) = 4.05; z = (|3 - 4.5| - 0.5) / sqrt(4.05)
    r = mann_whitney_u([1.0, 1.0, 2.0], [1.0, 2.0, 2.0])
    assert (r.u, r.method) == (3.0, "normal")
    z = 1.0 / math.sqrt(4.05)
    assert z == pytest.approx(0.496904, abs=1e-6)
    assert r.p_value == pytest.approx(0.619257, abs=1e-6)  # 2 (1 - Phi(0.4969)), by table
    # docs/compare.md's CartPole case, ties at the 500 cap: 211 and 447 rank 1 and 2, the
    # eight 500s share rank 6.5; R1 = 5 * 6.5 = 32.5, U = 32.5 - 15 = 17.5;
    # sigma^2 = 25/12 * (11 - (8^3 - 8) / 90) = 11.25, z = (5 - 0.5) / sqrt(11.25) = 1.3416,
    # p = 2 (1 - Phi(1.3416)) = 0.1797
    r = mann_whitney_u([500.0] * 5, [500.0, 500.0, 500.0, 211.0, 447.0])
    assert (r.u, r.method) == (17.5, "normal")
    assert r.p_value == pytest.approx(0.1797, abs=1e-4)
    # all tied: no evidence either way
    assert mann_whitney_u([2.0, 2.0], [2.0, 2.0]).p_value == 1.0
    assert math.isnan(mann_whitney_u([], [1.0]).p_value)


def test_quantile_with_inf_and_steps_to_threshold():
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.25) == pytest.approx(1.75)
    assert quantile([1.0, 2.0, math.inf], 0.5) == 2.0
    assert quantile([1.0, 2.0, math.inf], 0.75) == math.inf
    assert quantile([5.0], 0.9) == 5.0
    steps = [100, 200, 300, 400]
    assert steps_to_threshold(steps, [math.nan, 10.0, 50.0, 20.0], 50.0) == 300.0
    assert steps_to_threshold(steps, [1.0, 2.0, 3.0, 4.0], 50.0) == math.inf
    assert math.isnan(steps_to_threshold(steps, [1.0] * 4, math.nan))
