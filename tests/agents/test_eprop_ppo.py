"""PPO with learning_rule="eprop": the seam (snrl.learning) wired into the update.

The e-prop oracles themselves are in tests/functional/test_eprop.py; here: the forward is
unchanged, the readouts and heads get BPTT's exact gradients, the spiking layer gets
sum_t L_t e_t with L_t the error broadcast by its readout (through the readout's weights, or a
fixed random matrix), episode starts inside a sequence included, and what e-prop does not
support is refused with a clear message.
"""

from __future__ import annotations

import pytest
import torch

import snrl
from snrl.errors import UserError
from snrl.functional.eprop import filter_backward
from snrl.learning import EProp, eprop_layer_gradients
from snrl.learning.rules import apply_layer_gradients
from snrl.networks.ann import MLP

TINY = dict(hidden_size=12, n_envs=2, n_steps=48, n_minibatches=1, seed=3, eval_interval=0)


def _batch(algo):
    algo._start_envs()
    buf, _ = algo._collect()
    mb = buf.minibatch(torch.arange(algo.config.n_envs), 0, algo.config.n_steps)
    assert bool(mb.starts[1:].any())  # episodes end inside the sequence (CartPole)
    return mb


def _grads(algo, mb):
    algo.optimizer.zero_grad()
    loss, _, _ = algo.minibatch_loss(mb)
    algo.learning_rule.backward(loss)
    return float(loss), {n: p.grad.clone() for n, p in algo.agent.named_parameters()}


@pytest.mark.parametrize("backbone", ["lif", "alif"])
@pytest.mark.parametrize("feedback", ["symmetric", "random"])
def test_eprop_update_gradients(backbone, feedback):
    algo = snrl.PPO(
        "CartPole-v1", backbone=backbone, learning_rule="eprop", eprop_feedback=feedback, **TINY
    )
    rule = algo.learning_rule
    assert isinstance(rule, EProp) and rule.feedback == feedback
    mb = _batch(algo)
    algo.optimizer.zero_grad()
    loss_e, _, _ = algo.minibatch_loss(mb)
    rec = {r["name"]: r for r in rule._records}
    assert set(rec) == {"policy", "critic"}
    g_out = rec["policy"]["grad_out"]
    rule.backward(loss_e)
    g_e = {n: p.grad.clone() for n, p in algo.agent.named_parameters()}

    # BPTT on the same minibatch: the same forward, the same readout and head gradients
    algo.learning_rule = snrl.learning.BPTT()
    algo.optimizer.zero_grad()
    loss_b, _, _ = algo.minibatch_loss(mb)
    local = [p for n, p in algo.agent.named_parameters() if f".{backbone}0." not in n]
    loss_b.backward(inputs=local)
    assert float(loss_e.detach()) == pytest.approx(float(loss_b.detach()), rel=1e-5)
    for n, p in algo.agent.named_parameters():
        if f".{backbone}0." not in n:
            assert torch.allclose(g_e[n], p.grad, rtol=1e-4, atol=1e-7), n

    # the policy's spiking layer: sum_t L_t e_t, L_t the readout's error (captured at its
    # output) fed back through its leak and B
    net = algo.agent.policy
    layer, readout = net.spiking_layers[0], net.readout
    starts = mb.starts.clone()
    starts[0] = False
    kappa = readout.decay("tau_m")
    back = filter_backward(g_out[0], kappa, starts)
    if feedback == "symmetric":  # == autograd through snrl's own LI readout
        z = rec["policy"]["z"].detach().requires_grad_(True)
        y = readout.run(z, mb.states[0].policy[1], starts=starts).out
        (y * g_out[0]).sum().backward()
        assert torch.allclose(back @ readout.forward_weights.detach().T, z.grad, atol=1e-6)
    signal = back @ rule.feedback_matrix("policy", net).T
    if algo.config.rate_reg > 0:  # the rate penalty's own, local signal
        signal = signal + rec["policy"]["z"].grad
    for p in layer.parameters():
        p.grad = None
    grads = eprop_layer_gradients(layer, mb.obs, mb.states[0].policy[0], signal, starts=starts)
    apply_layer_gradients(layer, *grads)
    for n, p in layer.named_parameters():
        if p.grad is not None:
            want = g_e[f"policy.layers.{backbone}0.{n}"]
            assert torch.allclose(want, p.grad, rtol=1e-5, atol=1e-8), n
    assert float(g_e[f"policy.layers.{backbone}0.weight_rec"].abs().max()) > 0


def test_random_feedback_is_fixed_and_not_the_readout():
    algo = snrl.PPO("CartPole-v1", learning_rule="eprop", eprop_feedback="random", **TINY)
    net = algo.agent.policy
    b1 = algo.learning_rule.feedback_matrix("policy", net)
    with torch.no_grad():
        net.readout.weight_in.add_(1.0)
    assert torch.equal(algo.learning_rule.feedback_matrix("policy", net), b1)
    assert not torch.allclose(b1, net.readout.forward_weights)
    again = EProp("random", seed=TINY["seed"]).feedback_matrix("policy", net)
    assert torch.equal(again, b1)  # a resumed run rebuilds the same matrix


def test_eprop_ppo_learns_and_keeps_dale():
    algo = snrl.PPO("CartPole-v1", learning_rule="eprop", **TINY)
    layer = algo.agent.policy.spiking_layers[0]
    w0 = layer.recurrent_weights.detach().clone()
    algo.learn(192)
    w = layer.recurrent_weights.detach()
    assert not torch.equal(w, w0)
    assert bool((w * layer.recurrent_sign[:, None] >= 0).all())


@pytest.mark.parametrize(
    "keys,match",
    [
        (dict(backbone="mlp"), "backbone='mlp'"),
        (dict(backbone="gru"), "backbone='gru'"),
        (dict(backbone="spylif"), "backbone='spylif'"),
        (dict(n_layers=2), "n_layers=2"),
        (dict(substeps=2), "substeps=2"),
        (dict(hh_init="learned"), "hh_init='learned'"),
    ],
)
def test_eprop_refuses_what_it_does_not_support(keys, match):
    with pytest.raises(UserError, match=match):
        snrl.PPO("CartPole-v1", learning_rule="eprop", **{**TINY, **keys})


def test_eprop_refused_for_dqn_and_custom_backbones():
    with pytest.raises(UserError, match="not implemented for DQN"):
        snrl.DQN("CartPole-v1", learning_rule="eprop", hidden_size=8, n_envs=1)
    with pytest.raises(UserError, match="e-prop trains spiking backbones"):
        snrl.PPO(
            "CartPole-v1",
            learning_rule="eprop",
            policy=MLP(4, 8, 2),
            critic=MLP(4, 8, 1),
            **TINY,
        )
    with pytest.raises(UserError, match="eprop_feedback"):
        snrl.PPO("CartPole-v1", learning_rule="eprop", eprop_feedback="mirror", **TINY)
