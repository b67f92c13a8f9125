"""Neuron steps per env step (``substeps``) inside SpikingBackbone."""

from __future__ import annotations

import math

import pytest
import torch

from snrl.errors import UserError
from snrl.networks.ann import MLP
from snrl.networks.factory import build_backbone
from snrl.networks.spiking import SpikingBackbone


def _one_neuron(substeps: int) -> SpikingBackbone:
    """1 LIF neuron, no recurrence, weight 1, bias 0, alpha = exp(-dt / tau_m) = 1/2."""
    net = SpikingBackbone(
        1,
        1,
        None,
        substeps=substeps,
        seed=0,
        use_recurrent_connection=False,
        dt=1e-3,
        tau_m=1e-3 / math.log(2.0),
    )
    with torch.no_grad():
        net.layers["lif0"].weight_in.fill_(1.0)
        net.layers["lif0"].bias.zero_()
    return net


def test_golden_one_neuron_with_two_substeps() -> None:
    # Inputs 0.8, 0.3, each held for 2 neuron steps; v_t = v_{t-1}/2 + I_t - z_{t-1}:
    #   v1 = 0.8 (no spike), v2 = 0.4 + 0.8 = 1.2 (spike), v3 = 0.6 + 0.3 - 1 = -0.1,
    #   v4 = -0.05 + 0.3 = 0.25. The output at each env step is the spike of its last
    #   sub-step: (z2, z4) = (1, 0); the activity keeps all four neuron steps.
    net = _one_neuron(2)
    x = torch.tensor([0.8, 0.3]).reshape(2, 1, 1)
    with torch.no_grad():
        res = net.run(x, net.initial_state(1))
    assert res.out.flatten().tolist() == [1.0, 0.0]
    act = res.activity["lif0"]
    assert act.spikes.shape == (4, 1, 1)
    assert act.spikes.flatten().tolist() == [0.0, 1.0, 0.0, 0.0]
    torch.testing.assert_close(act.v.flatten(), torch.tensor([0.8, 1.2, -0.1, 0.25]))
    torch.testing.assert_close(res.state[0].v, torch.tensor([[0.25]]))
    # one env step at a time: the same numbers, (substeps, B, N) activity per call
    s = net.initial_state(1)
    with torch.no_grad():
        r1 = net.run(x[0], s)
        r2 = net.run(x[1], r1.state)
    assert r1.out.shape == (1, 1)
    assert [r1.out.item(), r2.out.item()] == [1.0, 0.0]
    assert r1.activity["lif0"].v.shape == (2, 1, 1)
    torch.testing.assert_close(r2.activity["lif0"].v.flatten(), torch.tensor([-0.1, 0.25]))


@pytest.mark.parametrize("backbone", ["lif", "alif", "spylif"])
def test_sequence_equals_loop_of_one_step_calls_with_three_substeps(backbone: str) -> None:
    # PPO trains on sequences, rollouts run one step at a time: they must agree exactly,
    # through two Dale layers, a readout and a reset of some rows in the middle
    net = SpikingBackbone(3, [10, 6], 2, backbone=backbone, substeps=3, force_dale_law=True, seed=4)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 4, 3, generator=g) * 2
    s0 = net.initial_state(4)
    with torch.no_grad():
        seq = net.run(x, s0)
        outs, spikes, s = [], [], s0
        for t in range(6):
            r = net.run(x[t], s)
            outs.append(r.out)
            spikes.append(r.activity[f"{backbone}0"].spikes)
            s = r.state
    assert torch.equal(seq.out, torch.stack(outs))
    assert torch.equal(seq.activity[0].spikes, torch.cat(spikes))
    assert seq.activity[0].spikes.shape == (18, 4, 10)
    assert seq.activity[0].spikes.sum() > 0
    for a, b in zip(seq.state, s):
        for fa, fb in zip(a, b):
            assert torch.equal(fa, fb)


def test_substeps_one_is_the_plain_backbone_and_three_differs() -> None:
    x = torch.randn(5, 2, 3, generator=torch.Generator().manual_seed(1)) * 3
    a = SpikingBackbone(3, 8, 2, seed=0)
    b = SpikingBackbone(3, 8, 2, seed=0, substeps=1)
    c = SpikingBackbone(3, 8, 2, seed=0, substeps=3)
    with torch.no_grad():
        ra, rb, rc = (n.run(x, n.initial_state(2)) for n in (a, b, c))
        # substeps=3 is substeps=1 on the input held 3 times, every 3rd output kept
        rh = a.run(x.repeat_interleave(3, dim=0), a.initial_state(2))
    assert torch.equal(ra.out, rb.out)
    assert ra.activity[0].spikes.shape == (5, 2, 8)
    assert torch.equal(rc.out, rh.out[2::3])
    assert torch.equal(rc.activity[0].v, rh.activity[0].v)
    assert c.substeps == 3 and a.substeps == 1


def test_gradients_flow_through_all_substeps() -> None:
    net = SpikingBackbone(3, 8, 2, seed=0, substeps=2)
    x = torch.randn(4, 2, 3, generator=torch.Generator().manual_seed(2))
    net.run(x, net.initial_state(2)).out.pow(2).sum().backward()
    assert net.layers["lif0"].weight_in.grad.abs().sum() > 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_bad_substeps_is_refused_naming_the_key(bad) -> None:
    with pytest.raises(UserError, match="substeps"):
        SpikingBackbone(3, 8, 2, substeps=bad, seed=0)


def test_build_backbone_substeps() -> None:
    net = build_backbone("lif", 3, 2, hidden_size=8, substeps=4, seed=0)
    assert isinstance(net, SpikingBackbone) and net.substeps == 4
    with pytest.raises(TypeError, match="sim_steps"):  # the keyword of snrl 0.1
        build_backbone("lif", 3, 2, hidden_size=8, sim_steps=4, seed=0)
    enc = build_backbone("lif", 3, 2, hidden_size=8, encoder="population", substeps=2, seed=0)
    assert enc.substeps == 2 and enc.backbone.substeps == 2
    # ANN backbones have no neuron time: substeps is ignored, as force_dale_law is
    assert isinstance(build_backbone("mlp", 3, 2, hidden_size=8, substeps=4), MLP)
