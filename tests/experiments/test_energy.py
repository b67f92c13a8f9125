"""SOP / MAC counts against hand counts on tiny networks."""

from __future__ import annotations

import math

import pytest
import torch

from snrl.experiments.energy import count_ops, count_parameters
from snrl.networks.factory import build_backbone


def test_spiking_sops_match_a_hand_count_of_delivered_spikes():
    torch.manual_seed(0)
    net = build_backbone("lif", 3, 2, hidden_size=4, force_dale_law=True, seed=0)
    info = net.layer_info()
    # 4 neurons, no autapses: 3 recurrent synapses + 2 readout synapses each
    assert (info[0].size, info[0].fan_in, info[0].fan_out) == (4, 3, 5)
    x = torch.linspace(0.5, 3.0, 3 * 40).reshape(40, 1, 3)
    with torch.no_grad():
        z = net.run(x, net.initial_state(1)).activity["lif0"].spikes[:, 0]  # (T, N)
    assert z.sum() > 0
    # hand count: each spike of neuron i reaches every nonzero outgoing synapse of i
    rec = net.layers["lif0"].recurrent_weights.detach()
    ro = net.layers["readout"].forward_weights.detach()
    out_syn = (rec != 0).sum(1) + (ro != 0).sum(1)  # (N,)
    assert out_syn.tolist() == [5, 5, 5, 5]
    hand = float((z * out_syn).sum()) / z.shape[0]  # per network step
    rate = float(z.mean())
    ops = count_ops(info, {"lif0": rate})
    assert ops["sops_per_step"] == pytest.approx(hand)
    assert ops["macs_per_step"] == 3 * 4  # dense input current
    # rate 0.25 on 4 neurons with fan-out 5: 5 SOPs; two network steps per env step double it
    two = count_ops(info, {"lif0": 0.25}, substeps=2)
    assert two == {"sops_per_step": 10.0, "macs_per_step": 24.0}


def test_ann_macs_equal_the_weights_used_per_step():
    mlp = build_backbone("mlp", 3, 2, hidden_size=5, n_layers=2)
    ops = count_ops(mlp.layer_info())
    # 3*5 + 5*5 + 5*2 weights, each one multiply-accumulate
    assert ops["macs_per_step"] == 3 * 5 + 5 * 5 + 5 * 2 == 50
    weights = sum(m.weight.numel() for m in mlp.modules() if isinstance(m, torch.nn.Linear))
    assert ops["macs_per_step"] == weights
    assert math.isnan(ops["sops_per_step"])
    gru = build_backbone("gru", 3, 2, hidden_size=4)
    # 3 gates x (input 3 + recurrent 4) x 4 units + head 4 x 2
    assert count_ops(gru.layer_info())["macs_per_step"] == 3 * 4 * 7 + 8
    w = [p.numel() for n, p in gru.named_parameters() if "weight" in n]
    assert sum(w) == 3 * 4 * 7 + 8
    lstm = build_backbone("lstm", 3, 2, hidden_size=4)
    assert count_ops(lstm.layer_info())["macs_per_step"] == 4 * 4 * 7 + 8


def test_count_parameters():
    mlp = build_backbone("mlp", 3, 2, hidden_size=5, n_layers=1)
    assert count_parameters(mlp) == 3 * 5 + 5 + 5 * 2 + 2
