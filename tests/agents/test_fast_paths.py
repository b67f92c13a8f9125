"""The rollout fast paths: distribution-free Categorical math and cached effective weights."""

from __future__ import annotations

import pytest
import torch
from torch.distributions import Categorical

from snrl.agents.agent import _categorical_log_prob_entropy
from snrl.layers import LIFLayer
from snrl.layers.base import cached_weights


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
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=g)
    s = layer.initial_state(4)

    def expected():
        with torch.enable_grad():
            w = layer.weight_rec.abs() * layer.recurrent_sign[:, None] * layer.rec_mask
        return w.detach()

    with torch.no_grad():
        assert layer._rec_weights() is not layer._rec_weights()  # outside a block: no memo
    with cached_weights(), torch.no_grad():
        w1 = layer._rec_weights()
        assert layer._rec_weights() is w1  # reused while nothing changes
        torch.testing.assert_close(w1, expected(), rtol=0, atol=0)
    assert not layer._weight_memo  # dropped on leaving the block
    with cached_weights(), torch.no_grad():
        w1 = layer._rec_weights()
        # an optimizer step inside the block (not done by the algorithms) bumps the versions
        opt = torch.optim.Adam(layer.parameters(), lr=0.1, foreach=foreach)
        with torch.enable_grad():
            # strong input, so that the layer spikes and W_rec gets a gradient (without
            # spikes dW_rec is 0 and Adam would leave it as it was)
            out = layer.run(torch.randn(6, 4, 3, generator=g) * 5, s)
            assert out.out.sum() > 0
            out.out.sum().backward()
        assert layer.weight_rec.grad.abs().sum() > 0
        opt.step()
        w2 = layer._rec_weights()
        assert not torch.equal(w1, w2)
        torch.testing.assert_close(w2, expected(), rtol=0, atol=0)
        # load_state_dict (in place) too
        other = LIFLayer(3, 5, force_dale_law=True, seed=1)
        layer.load_state_dict(other.state_dict())
        torch.testing.assert_close(layer._rec_weights(), other._rec_weights(), rtol=0, atol=0)
        torch.testing.assert_close(layer.forward_weights, other.forward_weights, rtol=0, atol=0)
        # a replaced parameter (a new tensor, whatever its version) too
        layer.weight_rec = torch.nn.Parameter(torch.ones(5, 5))
        torch.testing.assert_close(layer._rec_weights(), expected(), rtol=0, atol=0)
    # with autograd on, the weights carry the graph (never the cached tensor)
    w = layer._rec_weights()
    assert w.requires_grad
    out_cached = layer.run(x, s)
    with torch.no_grad():
        out_nograd = layer.run(x, s)
    assert torch.equal(out_cached.out, out_nograd.out)


@pytest.mark.parametrize("name", ["LIFLayer", "ALIFLayer", "SpyLIFLayer", "LILayer"])
def test_a_cached_rollout_step_follows_every_change(name):
    """Inside a block a no-grad step takes its weights and decays from one memo: it equals the
    uncached step after in-place writes, a replaced parameter, a new dt and a new tau."""
    import snrl.layers as layers

    cls = getattr(layers, name)
    kw = {} if name == "LILayer" else {"force_dale_law": True}
    layer = cls(3, 6, seed=0, **kw)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, generator=g) * 4
    s = layer.initial_state(4)
    s = type(s)(*(torch.rand(t.shape, generator=g) for t in s))

    def reference():  # autograd on: never the memo, also inside a block
        with torch.enable_grad():
            res = layer.run(x, s)
        return type(res)(
            res.out.detach(), type(res.state)(*(t.detach() for t in res.state)), res.v.detach()
        )

    def check():
        ref = reference()  # outside the block: nothing cached
        with cached_weights(), torch.no_grad():
            got = layer.run(x, s)
            assert layer._weight_memo  # the step used the memo
            for a, b in zip((got.out, got.v, *got.state), (ref.out, ref.v, *ref.state)):
                torch.testing.assert_close(a, b, rtol=0, atol=0)

    check()
    with cached_weights(), torch.no_grad():
        first = layer.run(x, s).out
        layer.weight_in.mul_(-1.5)  # in place, inside the block
        layer.bias.add_(0.3)
        changed = layer.run(x, s).out
        torch.testing.assert_close(changed, reference().out, rtol=0, atol=0)
        assert not torch.equal(first, changed)
        layer.weight_in = torch.nn.Parameter(torch.ones(3, 6))  # a replaced parameter
        torch.testing.assert_close(layer.run(x, s).out, reference().out, rtol=0, atol=0)
        layer.dt = layer.dt * 3  # a new time step: new decays
        torch.testing.assert_close(layer.run(x, s).v, reference().v, rtol=0, atol=0)
        other = cls(3, 6, seed=1, tau_m=0.05, **kw)  # load_state_dict: new weights and tau
        layer.load_state_dict(other.state_dict())
        torch.testing.assert_close(layer.run(x, s).v, reference().v, rtol=0, atol=0)
    check()


def test_a_copy_does_not_inherit_the_weight_memo():
    import copy

    layer = LIFLayer(3, 5, force_dale_law=True, seed=0)
    with cached_weights(), torch.no_grad():
        layer.weight_rec.mul_(2.0)  # version 1: a copy's load_state_dict also reaches 1
        layer._rec_weights()
        twin = copy.deepcopy(layer)
        other = LIFLayer(3, 5, force_dale_law=True, seed=1)
        twin.load_state_dict(other.state_dict())
        torch.testing.assert_close(twin._rec_weights(), other._rec_weights(), rtol=0, atol=0)
        double = copy.deepcopy(layer).double()  # .to() swaps the data of the same Parameter
        assert double._rec_weights().dtype == torch.float64


def test_fused_adam_steps_between_rollouts_are_seen():
    # torch's fused Adam writes the parameters without bumping their versions: the memo must
    # not outlive the block it was made in.
    layer = LIFLayer(3, 5, force_dale_law=True, seed=0)
    opt = torch.optim.Adam(layer.parameters(), lr=0.1, fused=True)
    g = torch.Generator().manual_seed(0)
    for _ in range(2):
        with cached_weights(), torch.no_grad():
            before = layer._rec_weights().clone()
        # strong input, so that the layer spikes and W_rec gets a gradient (without spikes
        # dW_rec is 0 and Adam leaves it as it was: the check below would be void)
        x = torch.randn(6, 4, 3, generator=g) * 5
        layer.run(x, layer.initial_state(4)).out.sum().backward()
        assert layer.weight_rec.grad.abs().sum() > 0
        opt.step()
        with cached_weights(), torch.no_grad():
            after = layer._rec_weights()
            ref = layer.weight_rec.abs() * layer.recurrent_sign[:, None] * layer.rec_mask
            torch.testing.assert_close(after, ref, rtol=0, atol=0)
            assert not torch.equal(before, after)


@pytest.mark.parametrize("deterministic", [False, True])
def test_nan_logits_raise_value_error_like_categorical(deterministic):
    import gymnasium as gym

    from snrl.agents.agent import ActorCriticAgent
    from snrl.networks.spiking import SpikingBackbone

    agent = ActorCriticAgent(
        gym.spaces.Box(-1, 1, (3,)),
        gym.spaces.Discrete(2),
        policy=SpikingBackbone(3, 8, 2, seed=0),
        critic=SpikingBackbone(3, 8, 1, seed=1),
    )
    with torch.no_grad():
        agent.policy.readout.bias.fill_(float("nan"))
    with pytest.raises(ValueError, match="logits"):
        agent.step(torch.zeros(2, 3), agent.initial_state(2), deterministic=deterministic)


def test_step_for_evaluation_skips_the_critic_and_acts_the_same():
    """Evaluation's ``train=False``: the same actions and policy state over a few steps, no
    value or log-probability, the critic's state passed through untouched, and the critic
    never called."""
    import gymnasium as gym

    from snrl.agents.agent import ActorCriticAgent
    from snrl.networks.spiking import SpikingBackbone

    agent = ActorCriticAgent(
        gym.spaces.Box(-1, 1, (3,)),
        gym.spaces.Discrete(2),
        policy=SpikingBackbone(3, 16, 2, seed=0),
        critic=SpikingBackbone(3, 16, 1, seed=1),
    )
    calls = []
    agent.critic.register_forward_hook(lambda *_: calls.append(1))
    xs = torch.randn(5, 4, 3, generator=torch.Generator().manual_seed(2)) * 3
    full = fast = agent.initial_state(4)
    for x in xs:
        a = agent.step(x, full, deterministic=True)
        n_before = len(calls)
        b = agent.step(x, fast, deterministic=True, train=False)
        assert len(calls) == n_before  # no critic call
        assert b.value is None and a.value is not None
        assert b.log_prob is None and a.log_prob is not None
        torch.testing.assert_close(a.action, b.action, rtol=0, atol=0)
        torch.testing.assert_close(a.outputs, b.outputs, rtol=0, atol=0)
        for sa, sb in zip(a.state.policy, b.state.policy, strict=True):
            torch.testing.assert_close(sa, sb, rtol=0, atol=0)
        for s0, sb in zip(fast.critic, b.state.critic, strict=True):
            assert s0 is sb
        full, fast = a.state, b.state


@pytest.mark.parametrize("algo_name", ["PPO", "DQN"])
def test_evaluate_and_rollout_compute_the_signed_weights_once(algo_name, monkeypatch):
    import snrl
    import snrl.layers.base as layer_base

    calls = []
    real = layer_base.signed_weights
    monkeypatch.setattr(layer_base, "signed_weights", lambda *a: calls.append(1) or real(*a))
    algo = getattr(snrl, algo_name)("CartPole-v1", backbone="lif", seed=0, n_envs=1)
    calls.clear()  # the balanced init's
    try:
        res = algo.evaluate(n_episodes=2, seed=5)
        # many steps; the actor's one Dale layer has signed input and recurrent weights
        assert res["mean_length"] > 5
        assert 1 <= len(calls) <= 2
        calls.clear()
        traj = algo.rollout(seed=5, record=False)
        assert len(traj.rewards) > 5 and 1 <= len(calls) <= 2
    finally:
        algo.close()
