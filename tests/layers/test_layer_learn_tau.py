"""Trainable time constants stay positive."""

from __future__ import annotations

import math

import pytest
import torch

from snrl.layers import ALIFLayer, LIFLayer, LILayer, SpyLIFLayer


@pytest.mark.parametrize(
    ("cls", "names"),
    [
        (LIFLayer, ["tau_m"]),
        (ALIFLayer, ["tau_m", "tau_a"]),
        (SpyLIFLayer, ["tau_m", "tau_syn"]),
        (LILayer, ["tau_m"]),
    ],
)
def test_learned_tau_stays_positive_when_pushed_negative(cls, names) -> None:
    layer = cls(2, 4, learn_tau=True, seed=0)
    params = dict(layer.named_parameters())
    for n in names:
        assert f"log_{n}" in params
    opt = torch.optim.SGD(layer.parameters(), lr=5.0)
    x = torch.randn(5, 3, 2, generator=torch.Generator().manual_seed(0))
    for _ in range(50):
        out, _ = layer(x, layer.initial_state(3))
        loss = sum(getattr(layer, n).sum() * 10 for n in names) + out.mean() * 0
        opt.zero_grad()
        loss.backward()
        opt.step()
    for n in names:
        tau = getattr(layer, n)
        assert (tau > 0).all() and tau.max() < 1e-3  # pushed far down, still positive
    with torch.no_grad():
        out, state = layer(x, layer.initial_state(3))
    assert torch.isfinite(state.v).all()


def test_learned_tau_gets_gradient_from_the_dynamics() -> None:
    layer = LIFLayer(2, 4, learn_tau=True, seed=0)
    x = torch.randn(20, 3, 2, generator=torch.Generator().manual_seed(0)) * 3
    res = layer.run(x, layer.initial_state(3))
    res.v.sum().backward()
    assert layer.log_tau_m.grad.abs().sum() > 0


def test_fixed_tau_is_a_buffer_with_the_given_value() -> None:
    layer = ALIFLayer(2, 3, tau_m=torch.tensor([0.01, 0.02, 0.03]), tau_a=0.5)
    assert "log_tau_m" not in dict(layer.named_parameters())
    assert torch.allclose(layer.tau_m, torch.tensor([0.01, 0.02, 0.03]))
    assert torch.allclose(layer.tau_a, torch.full((3,), 0.5))
    assert layer.decay("tau_a")[0].item() == pytest.approx(math.exp(-1e-3 / 0.5), rel=1e-6)


def test_fixed_tau_decay_follows_load_state_dict() -> None:
    a = LIFLayer(1, 1, use_recurrent_connection=False, tau_m=0.02, seed=0)
    b = LIFLayer(1, 1, use_recurrent_connection=False, tau_m=0.005, seed=0)
    x = torch.ones(3, 1, 1)
    with torch.no_grad():
        a(x, a.initial_state(1))  # fills any memo of the decay
        a.load_state_dict(b.state_dict())
        va = a.run(x, a.initial_state(1)).v
        vb = b.run(x, b.initial_state(1)).v
    assert torch.equal(va, vb)
