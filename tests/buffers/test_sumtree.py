"""SumTree invariants, prefix search against a cumulative-sum oracle, sampling frequencies."""

from __future__ import annotations

import numpy as np
import pytest

from snrl.buffers.sumtree import SumTree
from snrl.errors import UserError


@pytest.mark.parametrize("capacity", [1, 5, 8, 37])
def test_total_and_min_match_leaves_after_random_updates(capacity):
    rng = np.random.default_rng(0)
    tree = SumTree(capacity)
    leaves = np.zeros(capacity)
    ever_set = np.zeros(capacity, dtype=bool)
    for _ in range(300):
        k = int(rng.integers(1, 2 * capacity + 1))
        idx = rng.integers(0, capacity, size=k)  # repeats on purpose
        pri = rng.random(k) * 10
        tree.update(idx, pri)
        for i, p in zip(idx, pri):  # the last write of a repeated index wins
            leaves[i] = p
        ever_set[idx] = True
        assert tree.total == pytest.approx(leaves.sum(), rel=1e-12, abs=1e-12)
        assert tree.min == pytest.approx(leaves[ever_set].min())
    np.testing.assert_array_equal(tree.priorities, leaves)
    np.testing.assert_array_equal(tree[np.arange(capacity)], leaves)


def test_find_matches_cumsum_oracle():
    rng = np.random.default_rng(1)
    tree = SumTree(13)
    pri = rng.random(13) + 0.01
    pri[[2, 7]] = 0.0  # zero-priority leaves must never be found
    tree.update(np.arange(13), pri)
    s = rng.random(5000) * pri.sum()
    expected = np.searchsorted(np.cumsum(pri), s, side="right")
    found = tree.find(s)
    np.testing.assert_array_equal(found, expected)
    assert not np.isin(found, [2, 7]).any()


def test_find_at_the_edges_returns_a_nonzero_leaf():
    tree = SumTree(6)  # padded to 8 leaves: 6 and 7 are padding with priority 0
    tree.update(np.arange(5), np.array([1.0, 2.0, 3.0, 4.0, 5.0]))  # leaf 5 never set
    found = tree.find(np.array([0.0, tree.total, tree.total * (1 + 1e-9), -1.0, 14.999999]))
    np.testing.assert_array_equal(found, [0, 4, 4, 0, 4])


def test_sampling_frequencies_are_proportional_to_priority():
    rng = np.random.default_rng(2)
    pri = np.array([1.0, 0.0, 3.0, 6.0, 0.5, 9.5])
    tree = SumTree(len(pri))
    tree.update(np.arange(len(pri)), pri)
    n = 20_000
    found = tree.find(rng.random(n) * tree.total)
    freq = np.bincount(found, minlength=len(pri)) / n
    expected = pri / pri.sum()
    # 4 standard errors of a binomial proportion at n = 20k is < 0.015 for every leaf here.
    np.testing.assert_allclose(freq, expected, atol=0.015)
    assert freq[1] == 0.0


def test_errors():
    with pytest.raises(UserError, match="capacity"):
        SumTree(0)
    tree = SumTree(4)
    with pytest.raises(UserError, match="empty"):
        tree.find(np.array([0.1]))
    with pytest.raises(UserError, match="out of range"):
        tree.update(np.array([4]), np.array([1.0]))
    with pytest.raises(UserError, match="NaN"):
        tree.update(np.array([0]), np.array([np.nan]))
    with pytest.raises(UserError, match=">= 0"):
        tree.update(np.array([0]), np.array([-1.0]))
