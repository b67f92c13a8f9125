"""Exploration schedules and action selection."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from snrl.agents.exploration import (
    EpsGreedy,
    GaussianEpsGreedy,
    Greedy,
    PassThrough,
    make_exploration,
    truncated_normal,
)
from snrl.errors import UserError


def test_linear_schedule_values():
    ex = EpsGreedy(start=1.0, end=0.1, decay_steps=100)
    got = [ex.epsilon(s) for s in (0, 50, 100, 1000)]
    assert got == pytest.approx([1.0, 0.55, 0.1, 0.1])


def test_exponential_schedule_values():
    ex = EpsGreedy(start=1.0, end=0.01, decay_steps=100, schedule="exponential")
    # geometric: 1 * 0.01 ** (t / 100)
    got = [ex.epsilon(s) for s in (0, 50, 100, 500)]
    assert got == pytest.approx([1.0, 0.1, 0.01, 0.01])
    with pytest.raises(UserError, match="linear"):
        EpsGreedy(start=1.0, end=0.0, schedule="exponential")


def test_greedy_and_eps_greedy_select():
    q = torch.tensor([[0.0, 2.0, 1.0], [5.0, -1.0, 0.0]])
    np.testing.assert_array_equal(Greedy().select(q, 0), [1, 0])
    ex = EpsGreedy(start=0.0, end=0.0, decay_steps=1, seed=0)
    np.testing.assert_array_equal(ex.select(q.numpy(), 10), [1, 0])
    # epsilon = 1: uniform over the 3 actions for every row
    ex = EpsGreedy(start=1.0, end=1.0, decay_steps=1, seed=0)
    q_big = np.zeros((30_000, 3))
    q_big[:, 0] = 1.0
    freq = np.bincount(ex.select(q_big, 0), minlength=3) / len(q_big)
    np.testing.assert_allclose(freq, [1 / 3] * 3, atol=0.02)
    # epsilon = 0.3: the greedy action with probability 0.7 + 0.3 / 3 = 0.8
    ex = EpsGreedy(start=0.3, end=0.3, decay_steps=1, seed=1)
    assert np.mean(ex.select(q_big, 0) == 0) == pytest.approx(0.8, abs=0.015)
    with pytest.raises(UserError, match=r"\(B, A\)"):
        Greedy().select(np.zeros(3), 0)


def _truncated_mean(mu, sigma):
    """Mean of Normal(mu, sigma) truncated to [0, 1], from the closed form."""

    def pdf(x):
        return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)

    def cdf(x):
        return 0.5 * (1 + math.erf(x / math.sqrt(2)))

    a, b = -mu / sigma, (1 - mu) / sigma
    return mu + sigma * (pdf(a) - pdf(b)) / (cdf(b) - cdf(a))


@pytest.mark.parametrize("mu, sigma", [(0.1, 0.2), (0.5, 1.0), (0.95, 0.3)])
def test_truncated_normal_bounds_and_mean(mu, sigma):
    x = truncated_normal(np.random.default_rng(0), mu, sigma, 20_000)
    assert x.min() >= 0.0 and x.max() <= 1.0
    assert x.mean() == pytest.approx(_truncated_mean(mu, sigma), abs=0.01)


@pytest.mark.parametrize("mu, edge", [(3.0, 1.0), (-2.0, 0.0)])
def test_truncated_normal_far_tail_uses_the_inverse_cdf(mu, edge):
    # Almost no mass in [0, 1]: rejection fails, the inverse CDF must still land near the edge.
    x = truncated_normal(np.random.default_rng(0), mu, 0.1, 200)
    assert x.min() >= 0.0 and x.max() <= 1.0
    # The tail is ~exponential with rate |mu - edge| / sigma^2 (200 or 100 here).
    assert abs(x.mean() - edge) < 0.02


def test_gaussian_eps_greedy():
    ex = GaussianEpsGreedy(mean_start=0.8, mean_end=0.1, std=0.2, decay_steps=10, seed=0)
    assert [ex.epsilon(s) for s in (0, 5, 10, 99)] == pytest.approx([0.8, 0.45, 0.1, 0.1])
    eps = ex.sample_epsilon(10, 20_000)
    assert eps.min() >= 0.0 and eps.max() <= 1.0
    assert eps.mean() == pytest.approx(_truncated_mean(0.1, 0.2), abs=0.01)
    q = np.zeros((20_000, 4))
    q[:, 2] = 1.0
    greedy_frac = np.mean(ex.select(q, 10) == 2)  # 1 - E[eps] * 3 / 4
    assert greedy_frac == pytest.approx(1 - _truncated_mean(0.1, 0.2) * 0.75, abs=0.015)


def test_pass_through_and_factory():
    np.testing.assert_array_equal(PassThrough().select(torch.tensor([2, 0, 1]), 5), [2, 0, 1])
    ex = make_exploration("eps_greedy", start=0.5, end=0.5, decay_steps=3, seed=1)
    assert isinstance(ex, EpsGreedy) and ex.epsilon(0) == 0.5
    assert isinstance(make_exploration("gaussian_eps_greedy"), GaussianEpsGreedy)
    with pytest.raises(UserError, match="eps_greedy, gaussian_eps_greedy, greedy, pass_through"):
        make_exploration("boltzmann")
    with pytest.raises(UserError, match="keyword"):
        make_exploration("greedy", start=1.0)


def test_same_seed_same_actions():
    q = np.random.default_rng(0).normal(size=(64, 5))
    a = EpsGreedy(start=0.5, end=0.5, decay_steps=1, seed=7).select(q, 0)
    b = EpsGreedy(start=0.5, end=0.5, decay_steps=1, seed=7).select(q, 0)
    np.testing.assert_array_equal(a, b)
