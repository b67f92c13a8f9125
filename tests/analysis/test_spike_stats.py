"""Spike-train statistics on hand-computed cases, and the streaming accumulator against the
pure functions."""

from __future__ import annotations

import numpy as np
import pytest

from snrl.analysis import (
    METRICS,
    SpikeStats,
    fano_factor,
    firing_rate,
    isi_cv,
    population_sparseness,
    spike_count_correlation,
    window_counts,
)
from snrl.errors import UserError


def test_regular_train_has_cv_zero_and_known_rate():
    s = np.zeros((100, 2))
    s[::10, 0] = 1  # every 10 steps: 10 spikes in 100 steps
    np.testing.assert_allclose(firing_rate(s, dt=1e-3), [100.0, 0.0])  # 0.1 / 1 ms
    np.testing.assert_allclose(firing_rate(s), [0.1, 0.0])
    cv = isi_cv(s)
    assert cv[0] == 0.0 and np.isnan(cv[1])


def test_hand_computed_cv():
    s = np.zeros((20, 1))
    s[[0, 2, 8], 0] = 1  # ISIs 2 and 6: mean 4, std 2 (ddof 0) -> CV 0.5
    assert isi_cv(s)[0] == pytest.approx(0.5)


def test_poisson_train_rate_and_cv_near_one():
    rng = np.random.default_rng(0)
    p = 0.02  # Bernoulli per 1 ms step ~ Poisson at 20 Hz; geometric ISIs: CV = sqrt(1 - p)
    s = (rng.random((200_000, 3)) < p).astype(np.float32)
    np.testing.assert_allclose(firing_rate(s, dt=1e-3), 20.0, rtol=0.03)
    np.testing.assert_allclose(isi_cv(s), np.sqrt(1 - p), rtol=0.03)
    c = window_counts(s, 100)
    np.testing.assert_allclose(fano_factor(c), 1 - p, rtol=0.08)  # binomial counts: 1 - p


def test_known_fano_factor():
    counts = np.array([[1.0, 2.0], [3.0, 2.0], [5.0, 2.0]])
    # column 0: mean 3, var (4 + 0 + 4)/3 = 8/3 -> 8/9; column 1: fixed count -> 0
    np.testing.assert_allclose(fano_factor(counts), [8 / 9, 0.0])
    assert np.isnan(fano_factor(np.zeros((3, 1))))[0]


def test_correlated_pairs_have_the_known_correlation():
    rng = np.random.default_rng(1)
    n = 20_000
    shared = rng.poisson(3.0, n)
    a = shared + rng.poisson(1.0, n)
    b = shared + rng.poisson(1.0, n)  # cov 3, var 4 each -> r = 0.75
    c = rng.poisson(4.0, n)  # independent
    r = spike_count_correlation(np.stack([a, b, c], 1))
    assert r[0, 1] == pytest.approx(0.75, abs=0.02)
    assert abs(r[0, 2]) < 0.03 and r[0, 0] == pytest.approx(1.0)


def test_population_sparseness_bounds():
    c = np.array([[1.0, 1.0, 1.0, 1.0], [4.0, 0.0, 0.0, 0.0], [0, 0, 0, 0], [2.0, 2.0, 0, 0]])
    ps = population_sparseness(c)
    # a = (mean)^2 / mean(c^2): 1 -> 0; 1/4 -> 1; nan; (1)^2/2 = 1/2 -> (1/2)/(3/4) = 2/3
    np.testing.assert_allclose(ps[[0, 1, 3]], [0.0, 1.0, 2 / 3])
    assert np.isnan(ps[2])


def _episodes(rng, n_eps=6, n=5):
    eps = []
    for k in range(n_eps):
        t = 200 + 37 * k
        p = np.linspace(0.01, 0.3, n)
        eps.append((rng.random((t, n)) < p).astype(np.float32))
    return eps


def test_accumulator_matches_the_pure_functions_over_episodes():
    rng = np.random.default_rng(2)
    eps = _episodes(rng)
    acc = SpikeStats(5, dt=1e-3, sign=[1, 1, 1, -1, -1], fano_window=50, corr_bin=10)
    for e in eps:
        acc.add(e)
    per = acc.neuron_stats()
    allspk = np.concatenate(eps)
    np.testing.assert_allclose(per["rate"], firing_rate(allspk, 1e-3))
    # ISIs within episodes only: the pooled ISIs of each episode
    isis = [[] for _ in range(5)]
    for e in eps:
        for j in range(5):
            isis[j] += list(np.diff(np.flatnonzero(e[:, j])))
    want_cv = [np.std(x) / np.mean(x) for x in isis]
    np.testing.assert_allclose(per["cv_isi"], want_cv)
    w = np.concatenate([window_counts(e, 50) for e in eps])
    np.testing.assert_allclose(per["fano"], fano_factor(w))
    b = np.concatenate([window_counts(e, 10) for e in eps])
    np.testing.assert_allclose(acc.correlation(), spike_count_correlation(b), atol=1e-12)
    summ = acc.summary()
    assert set(summ) == {"all", "E", "I"}
    assert summ["E"]["n_neurons"] == 3 and summ["I"]["n_neurons"] == 2
    assert summ["I"]["rate_mean"] == pytest.approx(per["rate"][3:].mean())
    r = spike_count_correlation(b)[:3, :3]
    assert summ["E"]["corr_mean"] == pytest.approx(r[np.triu_indices(3, 1)].mean())
    ps = population_sparseness(b)
    assert summ["all"]["sparseness_population"] == pytest.approx(np.nanmean(ps))
    assert set(summ["all"]) <= set(METRICS)


def test_silent_and_saturated_fractions():
    s = np.zeros((100, 4))
    s[:, 0] = 1  # saturated
    s[:95, 1] = 1  # 0.95 >= 0.9: saturated
    s[::2, 2] = 1  # 0.5
    acc = SpikeStats(4)
    acc.add(s)
    d = acc.summary()["all"]
    assert d["fraction_silent"] == 0.25 and d["fraction_saturated"] == 0.5


def test_bad_inputs_raise_user_errors():
    with pytest.raises(UserError, match="T, N"):
        firing_rate(np.zeros(5))
    with pytest.raises(UserError, match="at least 1"):
        SpikeStats(3, corr_bin=0)
    acc = SpikeStats(3)
    with pytest.raises(UserError, match="neurons"):
        acc.add(np.zeros((10, 4)))


def test_isi_cv_pooled_and_per_episode_against_elephant():
    """Episodes of different rates: pooling their intervals inflates the CV; the
    per-episode mean equals Elephant's cv of each episode's train, averaged."""
    import neo
    import quantities as pq
    from elephant.statistics import cv, isi

    rng = np.random.default_rng(0)
    dt = 1e-3
    acc = SpikeStats(3, dt=dt)
    trains: list[list] = [[], [], []]
    for p in (0.02, 0.2, 0.08):  # spike probability per step differs by episode
        s = (rng.random((400, 3)) < p).astype(float)
        s[:, 2] = 0
        s[[5, 50], 2] = 1  # one interval only: no CV in this episode
        acc.add(s)
        for j in range(3):
            t = np.flatnonzero(s[:, j]) * dt
            trains[j].append(neo.SpikeTrain(t * pq.s, t_stop=0.4 * pq.s))
    per = acc.neuron_stats()
    for j in range(2):
        per_ep = [cv(isi(st).rescale("s").magnitude) for st in trains[j]]
        pooled = cv(np.concatenate([isi(st).rescale("s").magnitude for st in trains[j]]))
        assert per["cv_isi_episodes"][j] == pytest.approx(np.mean(per_ep), rel=1e-12)
        assert per["cv_isi"][j] == pytest.approx(pooled, rel=1e-12)
        assert per["cv_isi"][j] > per["cv_isi_episodes"][j] + 0.05  # pooling inflates it
    # neuron 2: three intervals of 45 steps pooled (CV 0), never 2 in one episode
    assert per["cv_isi"][2] == 0.0 and np.isnan(per["cv_isi_episodes"][2])
    summ = acc.summary()["all"]
    assert summ["cv_isi_episodes_mean"] == pytest.approx(np.nanmean(per["cv_isi_episodes"]))
