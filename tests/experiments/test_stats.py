"""Bootstrap CI, Mann-Whitney U, quantiles and steps-to-threshold against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from snrl.experiments.stats import (
    bootstrap_ci,
    bootstrap_means,
    mann_whitney_u,
    quantile,
    steps_to_threshold,
)


def test_exact_bootstrap_of_two_values():
    # resamples of [0, 1]: (0,0) (0,1) (1,0) (1,1) -> sorted means 0, .5, .5, 1.
    # 2.5%: position 0.025 * 3 = 0.075 -> 0 + 0.075 * 0.5 = 0.0375
    # 97.5%: position 2.925 -> 0.5 + 0.925 * 0.5 = 0.9625
    assert sorted(bootstrap_means([0.0, 1.0]).tolist()) == [0.0, 0.5, 0.5, 1.0]
    low, high = bootstrap_ci([0.0, 1.0])
    assert low == pytest.approx(0.0375)
    assert high == pytest.approx(0.9625)


def test_exact_bootstrap_of_three_values():
    # 27 resamples of [1, 2, 6]; the two smallest means are 1 (1,1,1) and 4/3 (one 2),
    # the two largest 14/3 (two 6s and a 2: 3 orderings, ranks 24-26) and 6 (6,6,6).
    # 2.5%: position 0.65 -> 1 + 0.65 / 3; 97.5%: position 25.35 -> 14/3 + 0.35 * 4/3.
    low, high = bootstrap_ci([1.0, 2.0, 6.0])
    assert low == pytest.approx(1 + 0.65 / 3)
    assert high == pytest.approx(14 / 3 + 0.35 * 4 / 3)


def test_bootstrap_constant_nan_and_monte_carlo():
    assert bootstrap_ci([3.0, 3.0, 3.0, 3.0]) == (3.0, 3.0)
    assert all(math.isnan(v) for v in bootstrap_ci([math.nan]))
    assert bootstrap_ci([1.0, math.nan, 1.0]) == (1.0, 1.0)  # NaNs dropped
    x = np.arange(8.0)  # 8**8 resamples: Monte Carlo, seeded and reproducible
    a = bootstrap_ci(x, seed=3)
    assert a == bootstrap_ci(x, seed=3)
    assert a[0] < x.mean() < a[1]
    # the Monte Carlo interval is close to the normal-theory one: mean +- 1.96 sd / sqrt(n)
    half = 1.96 * x.std() / math.sqrt(x.size)
    assert a[0] == pytest.approx(x.mean() - half, abs=0.25)
    assert a[1] == pytest.approx(x.mean() + half, abs=0.25)
    # exact vs Monte Carlo on the same data agree
    y = [0.0, 1.0, 2.0, 3.0, 10.0]
    exact = bootstrap_ci(y)
    mc = bootstrap_ci(y, exact_limit=0, n_boot=40_000, seed=1)
    assert mc == pytest.approx(exact, abs=0.15)


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


def test_mann_whitney_ties_normal_approximation():
    # pooled 1,1,1,2,2,2: average ranks 2 and 5; R1 = 2 + 2 + 5 = 9, U = 9 - 6 = 3.
    # sigma^2 = 9/12 * (7 - 2 * (27 - 3) / 30) = 4.05; z = (|3 - 4.5| - 0.5) / sqrt(4.05)
    r = mann_whitney_u([1.0, 1.0, 2.0], [1.0, 2.0, 2.0])
    assert (r.u, r.method) == (3.0, "normal")
    z = 1.0 / math.sqrt(4.05)
    assert z == pytest.approx(0.496904, abs=1e-6)
    assert r.p_value == pytest.approx(0.619257, abs=1e-6)  # 2 (1 - Phi(0.4969)), by table
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
