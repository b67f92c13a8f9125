"""DQN's gradient by hand for an MLP Q-network: the same numbers as autograd."""

from __future__ import annotations

import copy

import pytest
import torch

from snrl.agents.dqn import DQN
from snrl.agents.dqn_math import td_loss, td_loss_grad
from snrl.networks.ann import MLP


def _grads(net: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad.clone() for p in net.parameters() if p.requires_grad]


@pytest.mark.parametrize("activation", ["relu", "tanh"])
@pytest.mark.parametrize("head", [3, None])
def test_mlp_backward_into_equals_autograd_in_float64(activation, head):
    torch.manual_seed(0)
    ref = MLP(5, [7, 6], head, activation=activation).double()
    net = copy.deepcopy(ref)
    x = torch.randn(9, 5, dtype=torch.float64)
    x[0] = 0.0  # a row whose first pre-activations are the biases alone
    g = torch.randn(9, ref.output_size, dtype=torch.float64)
    out, _ = ref(x)
    out.backward(g)
    saved = net.forward_saved(x)
    torch.testing.assert_close(saved[-1], out.detach(), rtol=1e-13, atol=1e-13)
    assert not saved[-1].requires_grad
    net.backward_into(saved, g)
    for a, b in zip(_grads(ref), _grads(net)):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-12)
    # as autograd does, a second backward adds to .grad
    net.backward_into(saved, g)
    for a, b in zip(_grads(ref), _grads(net)):
        torch.testing.assert_close(b, 2 * a, rtol=1e-12, atol=1e-12)
    # accumulate=False writes over whatever .grad held, NaN included
    for p in net.parameters():
        p.grad.fill_(float("nan"))
    net.backward_into(saved, g, accumulate=False)
    for a, b in zip(_grads(ref), _grads(net)):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-12)


def test_mlp_backward_into_skips_frozen_parameters_and_refuses_sequences():
    torch.manual_seed(1)
    ref = MLP(4, 8, 2, activation="relu").double()
    net = copy.deepcopy(ref)
    for m in (ref, net):
        m.hidden[0].weight.requires_grad_(False)
    x = torch.randn(6, 4, dtype=torch.float64)
    g = torch.randn(6, 2, dtype=torch.float64)
    ref(x)[0].backward(g)
    net.backward_into(net.forward_saved(x), g)
    assert net.hidden[0].weight.grad is None
    for a, b in zip(_grads(ref), _grads(net)):
        torch.testing.assert_close(b, a, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"\(B, F\)"):
        net.forward_saved(torch.zeros(3, 6, 4, dtype=torch.float64))


@pytest.mark.parametrize("kind", ["huber", "mse"])
@pytest.mark.parametrize("weighted", [False, True])
def test_td_loss_grad_is_the_gradient_of_td_loss(kind, weighted):
    g = torch.Generator().manual_seed(0)
    q = (torch.randn(32, generator=g, dtype=torch.float64) * 2).requires_grad_(True)
    y = torch.randn(32, generator=g, dtype=torch.float64) * 2
    w = torch.rand(32, generator=g, dtype=torch.float64) if weighted else None
    loss = td_loss(q, y, kind, weights=w)
    loss.backward()
    value, grad = td_loss_grad(q.detach(), y, kind, weights=w)
    torch.testing.assert_close(value, loss.detach(), rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(grad, q.grad, rtol=1e-14, atol=1e-14)
    if kind == "huber":  # both branches of the Huber loss were taken
        d = (q - y).abs()
        assert (d < 1).any() and (d > 1).any()


@pytest.mark.parametrize(
    "changes",
    [
        dict(activation="relu"),
        dict(activation="tanh", double=True, loss="mse"),
        dict(activation="relu", prioritized=True, n_layers=2),
        dict(activation="relu", freeze=True),
    ],
)
def test_dqn_steps_by_hand_as_by_autograd(changes):
    """Two copies of one DQN take the same gradient steps on the same batches, one by hand and
    one by autograd: the parameters, losses and TD errors agree. The hand path writes over the
    gradients (here NaN before each step); a layer frozen after the optimizer was made gets
    a zero gradient, as after autograd's zero_grad."""
    changes = dict(changes)
    freeze = changes.pop("freeze", False)
    kw = dict(
        backbone="mlp",
        hidden_size=32,
        n_envs=2,
        eval_interval=0,
        learning_starts=200,
        batch_size=16,
        seed=3,
        **changes,
    )
    algos = []
    for manual in (True, False):
        algo = DQN("CartPole-v1", **kw)
        algo.manual_grad = manual
        algo.learn(300, progress=False)  # the same seed: the same buffer and parameters
        if freeze:
            algo.agent.q_net.hidden[0].weight.requires_grad_(False)
        algos.append(algo)
    by_hand, by_autograd = algos
    assert by_hand._manual_grad() and not by_autograd._manual_grad()
    for p, q in zip(by_hand.agent.q_net.parameters(), by_autograd.agent.q_net.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-5)
    for _ in range(5):
        batch = by_hand.buffer.sample(16, step=by_hand.env_step)
        with torch.no_grad():  # one starting point per step: rounding does not add up
            for p, q in zip(by_autograd.agent.q_net.parameters(), by_hand.agent.q_net.parameters()):
                p.copy_(q)
        for p in by_hand.optimizer.params:  # what the last step left, and then some
            p.grad.fill_(float("nan"))
        loss_h, td_h, _, _ = by_hand._transition_grad(batch)
        loss_a, td_a, _, _ = by_autograd._transition_loss(batch)
        by_autograd.optimizer.zero_grad()
        loss_a.backward()
        torch.testing.assert_close(loss_h, loss_a.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(td_h, td_a, rtol=1e-5, atol=1e-5)
        for p, q in zip(by_hand.agent.q_net.parameters(), by_autograd.agent.q_net.parameters()):
            assert p.grad.abs().sum() > 0 or q.grad.abs().sum() == 0
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6)
        if freeze:
            assert by_hand.agent.q_net.hidden[0].weight.grad.abs().sum() == 0
        by_hand.optimizer.update()
        by_autograd.optimizer.update()
    for algo in algos:
        algo.close()


def test_dqn_takes_autograd_where_the_hand_gradient_does_not_apply():
    kw = dict(hidden_size=16, n_envs=2, eval_interval=0)
    assert DQN("CartPole-v1", backbone="mlp", **kw)._manual_grad()
    assert not DQN("CartPole-v1", backbone="mlp", dueling="avg", **kw)._manual_grad()
    assert not DQN("CartPole-v1", backbone="lif", **kw)._manual_grad()
    assert not DQN("CartPole-v1", backbone="gru", **kw)._manual_grad()


def test_pruned_or_parametrized_layers_keep_their_forward_and_take_autograd():
    """A pruning hook or a parametrization on a layer is honoured by the forward (the layer's
    own call), and such a network's gradient is left to autograd."""
    from torch.nn.utils import parametrize, prune

    class Negated(torch.nn.Module):
        def forward(self, w):
            return -w

    torch.manual_seed(2)
    net = MLP(4, [8, 8], 2, activation="relu")
    prune.l1_unstructured(net.hidden[1], "weight", amount=0.5)
    parametrize.register_parametrization(net.head, "weight", Negated())
    x = torch.randn(5, 4)

    def by_hand():
        (l0, l1), head = net.hidden, net.head
        w1 = l1.weight_orig * l1.weight_mask
        h = torch.relu(x @ l0.weight.T + l0.bias)
        h = torch.relu(h @ w1.T + l1.bias)
        return h @ (-head.parametrizations.weight.original).T + head.bias

    torch.testing.assert_close(net(x)[0], by_hand())
    with torch.no_grad():  # the pruning hook recomputes the weight on every call
        net.hidden[1].weight_orig.mul_(2.0)
    torch.testing.assert_close(net(x)[0], by_hand())
    assert not net.plain() and MLP(4, 8, 2).plain()
    with pytest.raises(ValueError, match="use autograd"):
        net.backward_into(net.forward_saved(x), torch.ones(5, 2))
    algo = DQN(
        "CartPole-v1",
        policy=net,
        backbone="mlp",  # the config's name for what policy= is
        replay="transition",
        n_envs=2,
        eval_interval=0,
        learning_starts=100,
        batch_size=16,
        seed=0,
    )
    assert not algo._manual_grad()
    mask = net.hidden[1].weight_mask.clone()
    before = net.hidden[1].weight_orig.detach().clone()
    algo.learn(300, progress=False)
    assert algo.n_grad_steps > 0
    assert not torch.equal(net.hidden[1].weight_orig, before)  # trained by autograd
    assert (net.hidden[1].weight[mask == 0] == 0).all()  # pruned weights stay at zero
    algo.close()
