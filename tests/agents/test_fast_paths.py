"""The rollout fast paths: distribution-free Categorical math and cached effective weights."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Categorical

from snrl.agents.agent import _categorical_log_prob_entropy
from snrl.layers import LIFLayer


def test_categorical_math_equals_torch_distributions():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(5, 7, 3, generator=g, dtype=torch.float64) * 4
    logits[0, 0, 1] = -torch.inf  # an impossible action: entropy must stay finite
    action = torch.randint(0, 3, (5, 7), generator=g)
    action[0, 0] = 0
    lp, ent = _categorical_log_prob_entropy(logits, action)
    d = Categorical(logits=logits)
    torch.testing.assert_close(lp, d.log_prob(action), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ent, d.entropy(), rtol=1e-12, atol=1e-12)
    assert torch.isfinite(ent).all()


@pytest.mark.parametrize("foreach", [False, True])
def test_cached_effective_weights_follow_every_parameter_change(foreach):
    layer = LIFLayer(3, 5, force_dale_law=True, seed=0)
    x = torch.randn(4, 3)
    s = layer.initial_state(4)

    def expected():
        with torch.enable_grad():
            w = layer.weight_rec.abs() * layer.recurrent_sign[:, None] * layer.rec_mask
        return w.detach()

    with torch.no_grad():
        w1 = layer._rec_weights()
        assert layer._rec_weights() is w1  # reused while nothing changes
        torch.testing.assert_close(w1, expected(), rtol=0, atol=0)
    # an optimizer step (in place) invalidates it
    opt = torch.optim.Adam(layer.parameters(), lr=0.1, foreach=foreach)
    layer.run(torch.randn(6, 4, 3), s).out.sum().backward()
    opt.step()
    with torch.no_grad():
        w2 = layer._rec_weights()
        assert not torch.equal(w1, w2)
        torch.testing.assert_close(w2, expected(), rtol=0, atol=0)
    # load_state_dict (in place) too
    other = LIFLayer(3, 5, force_dale_law=True, seed=1)
    layer.load_state_dict(other.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(layer._rec_weights(), other._rec_weights(), rtol=0, atol=0)
        torch.testing.assert_close(layer.forward_weights, other.forward_weights, rtol=0, atol=0)
    # a replaced parameter (a new tensor, whatever its version) too
    layer.weight_rec = torch.nn.Parameter(torch.ones(5, 5))
    with torch.no_grad():
        torch.testing.assert_close(layer._rec_weights(), expected(), rtol=0, atol=0)
    # with autograd on, the weights carry the graph (never the cached tensor)
    w = layer._rec_weights()
    assert w.requires_grad
    out_cached = layer.run(x, s)
    with torch.no_grad():
        out_nograd = layer.run(x, s)
    assert torch.equal(out_cached.out, out_nograd.out)
