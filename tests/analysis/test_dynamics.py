"""Oracles for the dynamics analyses: planted subspaces, planted signals, shuffles."""

import numpy as np
import pytest

from snrl.analysis.dynamics import (
    TrialActivity,
    choice_axis_projection,
    cross_validated_accuracy,
    cv_pca,
    decode_over_time,
    lda_fit,
    lda_predict,
    participation_ratio,
    shrinkage_covariance,
    stratified_folds,
)
from snrl.errors import UserError


def _orthonormal(rng, n, k):
    q, _ = np.linalg.qr(rng.standard_normal((n, k)))
    return q.T  # (k, n)


def test_participation_ratio_of_even_k_dim_data_is_k():
    # samples spread exactly evenly on k orthonormal axes: covariance eigenvalues k equal
    rng = np.random.default_rng(0)
    k, n = 4, 30
    axes = _orthonormal(rng, n, k)
    # +-1 on each axis in every combination: identical variance per axis, no cross terms
    grid = np.array(np.meshgrid(*[[-1.0, 1.0]] * k)).reshape(k, -1).T
    x = grid @ axes + 5.0
    assert participation_ratio(x) == pytest.approx(k, rel=1e-10)
    # one dominant axis: the ratio falls towards 1
    assert participation_ratio(grid * [10.0, 0.1, 0.1, 0.1] @ axes) < 1.1


def test_cv_pca_recovers_planted_dimensionality_under_noise():
    rng = np.random.default_rng(1)
    k, n, s = 5, 60, 200
    signal = 3.0 * rng.standard_normal((s, k)) @ _orthonormal(rng, n, k)
    a = signal + rng.standard_normal((s, n))
    b = signal + rng.standard_normal((s, n))
    res = cv_pca(a, b, threshold=0.9)
    assert res["dimensionality"] == k
    # noise dimensions carry ~no repeatable variance; the plain PR of the noisy data is
    # inflated by the noise (the reason to cross-validate)
    assert np.abs(res["cv_variance"][k:]).max() < 0.1 * res["cv_variance"][k - 1]
    assert participation_ratio(a) > 2 * k
    assert k - 1 < res["participation_ratio"] <= k + 0.5
    # independent halves without shared signal: nothing repeats
    pure = cv_pca(rng.standard_normal((s, n)), rng.standard_normal((s, n)))
    assert pure["cv_variance"][:5].max() < 0.3


def test_shrinkage_covariance_matches_ledoit_wolf_formula_by_hand():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((8, 3)) * [1.0, 2.0, 0.5]
    x -= x.mean(0)
    n, p = x.shape
    cov = x.T @ x / n
    mu = np.trace(cov) / p
    d2 = np.sum((cov - mu * np.eye(p)) ** 2) / p
    b2 = sum(np.sum((np.outer(r, r) - cov) ** 2) for r in x) / p / n**2
    s = min(b2, d2) / d2
    sigma, shrink = shrinkage_covariance(x)
    assert shrink == pytest.approx(s)
    np.testing.assert_allclose(sigma, s * mu * np.eye(p) + (1 - s) * cov)
    eye, one = shrinkage_covariance(np.zeros((5, 3)))
    assert one == 1.0 and np.array_equal(eye, np.eye(3))


def test_lda_separates_gaussians_and_folds_are_stratified():
    rng = np.random.default_rng(3)
    y = np.repeat(["a", "b", "c"], 40)
    means = {"a": [0, 0], "b": [6, 0], "c": [0, 6]}
    x = np.array([means[c] for c in y]) + rng.standard_normal((120, 2))
    assert np.mean(lda_predict(lda_fit(x, y), x) == y) > 0.97
    folds = stratified_folds(y, 5, rng)
    for f in range(5):
        assert [np.sum((folds == f) & (y == c)) for c in "abc"] == [8, 8, 8]


def test_decoder_finds_planted_signal_and_shuffle_gives_chance():
    rng = np.random.default_rng(4)
    n, p = 200, 40
    y = np.repeat([0, 1], n // 2)
    x = rng.standard_normal((n, p))
    x[:, :3] += 1.2 * (2 * y[:, None] - 1)  # three informative neurons
    res = cross_validated_accuracy(x, y, k=5, n_shuffles=30, seed=0)
    assert res["accuracy"] > 0.9
    assert res["chance"] == 0.5 and res["k"] == 5 and res["n"] == n
    assert abs(res["null_mean"] - 0.5) < 0.06
    assert res["null_q95"] < 0.65
    assert res["p_value"] == pytest.approx(1 / 31)
    # no signal: accuracy at chance, not significant
    res0 = cross_validated_accuracy(rng.standard_normal((n, p)), y, k=5, n_shuffles=30)
    assert abs(res0["accuracy"] - 0.5) < 0.1 and res0["p_value"] > 0.05
    with pytest.raises(UserError, match="2 classes"):
        cross_validated_accuracy(x, np.zeros(n), k=5)


def test_decode_over_time_follows_when_the_signal_appears():
    rng = np.random.default_rng(5)
    trials, length, p = 120, 6, 20
    y = np.array(["L", "R"] * (trials // 2), dtype=object)
    x = rng.standard_normal((trials, length, p))
    sign = np.where(y == "R", 1.0, -1.0)
    x[:, 3:, :4] += 1.5 * sign[:, None, None]  # the choice appears at bin 3
    x[:10, 5] = np.nan  # trials that ended early: left out of the last bin
    res = decode_over_time(x, y, k=4, n_shuffles=5, seed=0)
    acc = np.array(res["accuracy"])
    assert acc[:3].max() < 0.7 and acc[3:].min() > 0.9
    assert res["n"][5] == trials - 10 and res["n"][0] == trials
    assert res["classes"] == ["L", "R"]


def test_choice_axis_projection_orders_groups_by_signal_strength():
    rng = np.random.default_rng(6)
    trials, length, p = 160, 5, 15
    coh = rng.choice([1.0, 3.0], trials)
    side = rng.choice([-1.0, 1.0], trials)
    choice = np.where(side > 0, "2", "1").astype(object)
    x = rng.standard_normal((trials, length, p)) * 0.5
    ramp = np.arange(length) / (length - 1)
    x[:, :, 0] += (side * coh)[:, None] * ramp[None, :]
    groups = np.array([f"{int(s)}x{int(c)}" for s, c in zip(side, coh)], dtype=object)
    res = choice_axis_projection(x, choice, groups, seed=0)
    m = res["mean"]
    assert res["axis_labels"] == ("1", "2")
    # strong right > weak right > 0 > weak left > strong left at the end, and grows in time
    last = [m[g][-1] for g in ("1x3", "1x1", "-1x1", "-1x3")]
    assert last == sorted(last, reverse=True) and last[1] > 0 > last[2]
    assert abs(m["1x3"][0]) < abs(m["1x3"][-1])
    assert res["n"]["1x3"] + res["n"]["1x1"] + res["n"]["-1x1"] + res["n"]["-1x3"] == trials


def test_trial_activity_cuts_at_trial_bounds_and_finds_variables():
    spikes = np.zeros((10, 2))
    spikes[:, 0] = 1.0  # neuron 0 always fires
    spikes[4, 1] = 1.0  # neuron 1 once, in the second trial's first step
    trials = [
        {
            "start_step": 0,
            "end_step": 3,
            "choice": 1,
            "gt": 1,
            "conditions": {"ground_truth": 0, "coh": 6.4},
        },
        {
            "start_step": 4,
            "end_step": 9,
            "choice": 2,
            "gt": 2,
            "conditions": {"ground_truth": 1, "coh": 0.0},
        },
    ]
    acc = TrialActivity(2, length=5, smooth=2)
    acc.add(spikes, trials)
    x = acc.tensor()
    assert x.shape == (2, 5, 2)
    assert np.isnan(x[0, 4]).all()  # the first trial ends at step 3: no neighbour's steps
    # causal boxcar of 2 steps that starts at the trial's own first step
    np.testing.assert_allclose(x[1, :3, 1], [1.0, 0.5, 0.0])
    np.testing.assert_allclose(x[1, :, 0], 1.0)
    # ground_truth splits the trials as gt does: left out
    assert acc.variables() == ["choice", "coh"] or acc.variables() == ["choice"]
    assert list(acc.labels("coh")) == ["6.4", "0"]
