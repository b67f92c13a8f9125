"""DQN arithmetic against hand computations."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from snrl.agents.dqn_math import (
    double_dqn_target,
    dueling_aggregate,
    polyak_update,
    sequence_nstep_targets,
    td_loss,
)
from snrl.errors import UserError


def test_dueling_aggregations_by_hand():
    value = torch.tensor([[1.0], [-2.0]])
    adv = torch.tensor([[1.0, 2.0, 6.0], [0.0, -3.0, 0.0]])
    # avg: mean A = 3 and -1; max: max A = 6 and 0.
    torch.testing.assert_close(
        dueling_aggregate(value, adv, "avg"), torch.tensor([[-1.0, 0.0, 4.0], [-1.0, -4.0, -1.0]])
    )
    torch.testing.assert_close(
        dueling_aggregate(value, adv, "max"), torch.tensor([[-4.0, -3.0, 1.0], [-2.0, -5.0, -2.0]])
    )
    torch.testing.assert_close(
        dueling_aggregate(value, adv, "naive"), torch.tensor([[2.0, 3.0, 7.0], [-2.0, -5.0, -2.0]])
    )
    # Time-first (T, B, A) works the same, and gradients reach both streams.
    v = torch.zeros(4, 2, 1, requires_grad=True)
    a = torch.randn(4, 2, 3, generator=torch.Generator().manual_seed(0), requires_grad=True)
    dueling_aggregate(v, a, "avg").sum().backward()
    torch.testing.assert_close(v.grad, torch.full((4, 2, 1), 3.0))
    torch.testing.assert_close(a.grad, torch.zeros(4, 2, 3))  # mean subtraction cancels
    with pytest.raises(UserError, match="unknown dueling mode"):
        dueling_aggregate(value, adv, "sum")
    with pytest.raises(UserError, match="value has shape"):
        dueling_aggregate(adv, adv)


def test_double_dqn_target_by_hand():
    rewards = torch.tensor([1.0, 0.5, 2.0])
    discounts = torch.tensor([0.9, 0.81, 0.9])
    dones = torch.tensor([0.0, 0.0, 1.0])
    online = torch.tensor([[1.0, 5.0], [3.0, 2.0], [0.0, 9.0]])
    target = torch.tensor([[10.0, 4.0], [6.0, 8.0], [100.0, 100.0]])
    # double: online argmax = 1, 0, 1 -> target values 4, 6, (terminal)
    y = double_dqn_target(rewards, discounts, dones, online, target, double=True)
    torch.testing.assert_close(y, torch.tensor([1.0 + 0.9 * 4.0, 0.5 + 0.81 * 6.0, 2.0]))
    # plain: max of target = 10, 8
    y = double_dqn_target(rewards, discounts, dones, None, target, double=False)
    torch.testing.assert_close(y, torch.tensor([1.0 + 0.9 * 10.0, 0.5 + 0.81 * 8.0, 2.0]))
    # a scalar discount works too; no gradient flows into the target
    q = target.clone().requires_grad_(True)
    y = double_dqn_target(rewards, 0.5, dones, online, q)
    assert not y.requires_grad
    torch.testing.assert_close(y, torch.tensor([3.0, 3.5, 2.0]))
    with pytest.raises(UserError, match="q_next_online"):
        double_dqn_target(rewards, discounts, dones, None, target)


def test_td_loss_by_hand():
    q = torch.tensor([0.0, 0.0, 0.0, 0.0], requires_grad=True)
    target = torch.tensor([0.5, -2.0, 3.0, 0.0])
    # huber(delta=1): 0.5 x^2 for |x| <= 1 else |x| - 0.5 -> 0.125, 1.5, 2.5, 0
    assert td_loss(q, target, "huber").item() == pytest.approx((0.125 + 1.5 + 2.5) / 4)
    assert td_loss(q, target, "mse").item() == pytest.approx((0.25 + 4 + 9) / 4)
    w = torch.tensor([1.0, 0.5, 0.0, 2.0])
    assert td_loss(q, target, "huber", weights=w).item() == pytest.approx((0.125 + 0.75) / 4)
    m = torch.tensor([1.0, 1.0, 0.0, 0.0])
    assert td_loss(q, target, "mse", mask=m).item() == pytest.approx((0.25 + 4) / 2)
    td_loss(q, target).backward()
    torch.testing.assert_close(q.grad, torch.tensor([-0.5, 1.0, -1.0, 0.0]) / 4)
    with pytest.raises(UserError, match="unknown TD loss"):
        td_loss(q, target, "l1")
    with pytest.raises(UserError, match="gather"):
        td_loss(q, target[:2])


def test_polyak_update_soft_and_hard():
    online = nn.Linear(2, 2)
    target = nn.Linear(2, 2)
    online.register_buffer("sign", torch.tensor([1.0, -1.0]))
    target.register_buffer("sign", torch.tensor([0.0, 0.0]))
    with torch.no_grad():
        online.weight.fill_(1.0)
        online.bias.fill_(2.0)
        target.weight.fill_(0.0)
        target.bias.fill_(-2.0)
    polyak_update(target, online, 0.25)
    torch.testing.assert_close(target.weight, torch.full((2, 2), 0.25))
    torch.testing.assert_close(target.bias, torch.full((2,), -1.0))
    torch.testing.assert_close(target.sign, torch.tensor([1.0, -1.0]))
    polyak_update(target.parameters(), online.parameters(), 1.0)
    torch.testing.assert_close(target.weight, online.weight)
    torch.testing.assert_close(target.bias, online.bias)
    for bad in (0.0, 1.5):
        with pytest.raises(UserError, match="tau"):
            polyak_update(target, online, bad)
    with pytest.raises(UserError, match="parameters"):
        polyak_update(target, [online.weight], 0.5)


def test_sequence_nstep_targets_by_hand():
    """n = 3, gamma = 0.5; column 0 runs past the window end, column 1 terminates at t = 3."""
    rewards = torch.tensor([[1.0, 0.0], [2.0, 1.0], [3.0, 1.0], [4.0, 1.0], [5.0, 0.0]])
    dones = torch.tensor([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 0.0]])
    q_boot = torch.tensor([[10.0, 7.0], [20.0, 7.0], [30.0, 7.0], [40.0, 7.0], [50.0, 7.0]])
    y = sequence_nstep_targets(rewards, dones, mask, q_boot, 0.5, 3)
    expected = torch.tensor(
        [
            [1 + 1 + 0.75 + 0.125 * 30, 0.0],  # column 1: padding -> 0
            [2 + 1.5 + 1 + 0.125 * 40, 1 + 0.5 + 0.25],  # ends on the terminal step: no bootstrap
            [3 + 2 + 1.25 + 0.125 * 50, 1 + 0.5],
            [4 + 2.5 + 0.25 * 50, 1.0],  # column 0: cut at the window end, bootstrap at t = 4
            [5 + 0.5 * 50, 0.0],
        ]
    )
    torch.testing.assert_close(y, expected)
    # n = 1 is the one-step target everywhere valid
    y1 = sequence_nstep_targets(rewards, dones, mask, q_boot, 0.5, 1)
    torch.testing.assert_close(y1, (rewards + 0.5 * (1 - dones) * q_boot) * mask)
    with pytest.raises(UserError, match="n must be"):
        sequence_nstep_targets(rewards, dones, mask, q_boot, 0.5, 0)
    with pytest.raises(UserError, match=r"\(T, B\)"):
        sequence_nstep_targets(rewards, dones, mask[:2], q_boot, 0.5, 2)
