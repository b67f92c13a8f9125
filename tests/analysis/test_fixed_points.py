"""Oracles for the fixed-point finder: a linear map and a bistable 2-unit rate network."""

import numpy as np
import pytest
import torch
from scipy.optimize import brentq

from snrl.analysis.fixed_points import find_fixed_points, lif_rate_map
from snrl.errors import UserError
from snrl.layers import LIFLayer


def test_linear_map_fixed_point_and_eigenvalues():
    a = torch.tensor([[0.5, 0.2], [-0.1, 0.3]], dtype=torch.float64)
    b = torch.tensor([1.0, -2.0], dtype=torch.float64)
    res = find_fixed_points(lambda h: h @ a.T + b, np.random.default_rng(0).normal(size=(3, 2)))
    want = np.linalg.solve(np.eye(2) - a.numpy(), b.numpy())
    np.testing.assert_allclose(res["points"], np.tile(want, (3, 1)), atol=1e-7)
    ev = np.sort_complex(np.linalg.eigvals(a.numpy()))
    for row in res["eigenvalues"]:
        np.testing.assert_allclose(np.sort_complex(row), ev, atol=1e-10)
    assert res["stable"].all() and res["speed"].max() < 1e-14
    # an expanding map: same fixed point, unstable
    res2 = find_fixed_points(lambda h: 2.0 * h + 1.0, np.ones((1, 2)))
    np.testing.assert_allclose(res2["points"], [[-1.0, -1.0]], atol=1e-8)
    assert not res2["stable"][0]


def test_bistable_two_unit_rate_network():
    # h' = tanh(2 h) per unit: fixed points 0 (slope 2, unstable) and +-x* (x* = tanh 2x*)
    xs = brentq(lambda x: x - np.tanh(2 * x), 0.5, 1.0)
    starts = np.array([[0.7, 0.8], [-0.6, 0.9], [-1.2, -0.8], [0.02, 0.9]])
    res = find_fixed_points(lambda h: torch.tanh(2.0 * h), starts)
    np.testing.assert_allclose(res["points"][:3], [[xs, xs], [-xs, xs], [-xs, -xs]], atol=1e-7)
    assert res["stable"][:3].all()
    np.testing.assert_allclose(np.abs(res["eigenvalues"][0]), 2 * (1 - xs**2), atol=1e-7)
    # near the saddle: found with one unstable direction (eigenvalue 2)
    np.testing.assert_allclose(res["points"][3], [0.0, xs], atol=1e-6)
    assert not res["stable"][3]
    assert np.abs(res["eigenvalues"][3]).max() == pytest.approx(2.0, abs=1e-6)


def test_lif_rate_map_is_the_smoothed_lif_step():
    layer = LIFLayer(3, 4, dt=1e-3, tau_m=20e-3, force_dale_law=True, recurrent_sign=0.25)
    x = np.array([0.5, -1.0, 2.0])
    step = lif_rate_map(layer, x, beta=0.05)
    v = torch.tensor([[0.2, 1.5, -0.3, 1.0]], dtype=torch.float64)
    alpha = np.exp(-1e-3 / 20e-3)
    r = 1 / (1 + np.exp(-(v.numpy() - 1.0) / 0.05))
    w_in = layer.forward_weights.detach().double().numpy()
    w_rec = layer.recurrent_weights.detach().double().numpy()
    b = layer.bias.detach().double().numpy()
    want = alpha * v.numpy() + x @ w_in + b + r @ w_rec - r
    np.testing.assert_allclose(step(v).numpy(), want, rtol=1e-6)  # alpha is float32
    with pytest.raises(UserError, match="beta"):
        lif_rate_map(layer, x, beta=0)
