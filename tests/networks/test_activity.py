"""Activity: one structure from every backbone; access by index and name; joins; old names."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from snrl.networks import Activity, LayerActivity
from snrl.networks.ann import GRU, LSTM, MLP
from snrl.networks.encoders import EncodedBackbone, PopulationEncoder
from snrl.networks.factory import build_backbone
from snrl.networks.sequence import run_with_resets
from snrl.networks.spiking import SpikingBackbone


def _x(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * 2


def _two_layers() -> Activity:
    return Activity(
        [
            LayerActivity(
                "lif0", "spiking", 3, spikes=np.array([[1.0, 0, 0], [1, 1, 0]]),
                v=np.zeros((2, 3)), threshold=1.0, sign=np.array([1, 1, -1]),
            ),
            LayerActivity("readout", "readout", 1, v=np.array([[0.5], [0.25]])),
        ]
    )  # fmt: skip


def test_access_by_index_and_name_and_iteration() -> None:
    act = _two_layers()
    assert len(act) == 2 and act.names == ["lif0", "readout"]
    assert act[0] is act["lif0"] and act[-1] is act["readout"]
    assert [a.name for a in act] == ["lif0", "readout"]
    assert "lif0" in act and "lif1" not in act
    assert [a.name for a in act.spiking()] == ["lif0"]
    with pytest.raises(KeyError, match="lif1.*lif0"):
        act["lif1"]
    assert "lif0(spiking, 3: spikes, v)" in repr(act)


def test_spike_rates_by_hand() -> None:
    # lif0: 3 spikes in 2 steps x 3 neurons = 0.5 spikes per neuron per step
    assert _two_layers().spike_rates() == {"lif0": 0.5}
    assert (
        Activity([LayerActivity("mlp0", "ann", 2, extra={"h": np.ones((2, 2))})]).spike_rates()
        == {}
    )


def test_flat_names_and_from_flat_round_trip() -> None:
    act = _two_layers()
    flat = act.flat()
    assert list(flat) == ["lif0.spikes", "lif0.v", "readout.v"]
    back = Activity.from_flat(flat, act.info())
    assert back.info() == act.info()
    assert back.info()[0] == {
        "name": "lif0", "kind": "spiking", "size": 3, "threshold": 1.0, "sign": [1, 1, -1]
    }  # fmt: skip
    for key, arr in back.flat().items():
        np.testing.assert_array_equal(arr, flat[key])
    with pytest.raises(ValueError, match="'<layer>.<field>'"):
        Activity.from_flat({"spikes": np.zeros((2, 2))})


def test_invalid_layers_are_refused() -> None:
    with pytest.raises(ValueError, match="kind"):
        LayerActivity("x", "conv", 2)
    with pytest.raises(ValueError, match="name"):
        LayerActivity("a.b", "ann", 2)
    with pytest.raises(ValueError, match="extra field 'v'"):
        LayerActivity("x", "ann", 2, extra={"v": np.zeros((1, 2))})
    with pytest.raises(ValueError, match="repeat"):
        Activity([LayerActivity("x", "ann", 2), LayerActivity("x", "readout", 1)])


def test_concat_joins_time_and_map_and_to_numpy() -> None:
    net = SpikingBackbone(3, [5], 2, seed=0)
    x = _x(6, 2, 3)
    state = net.initial_state(2)
    whole = net.run(x, state)
    first = net.run(x[:4], state)
    second = net.run(x[4:], first.state)
    joined = Activity.concat([first.activity, second.activity])
    for a, b in zip(joined, whole.activity):
        assert a.name == b.name and a.sign is b.sign
        for field in b.fields:
            assert torch.equal(a.get(field), b.get(field)), (a.name, field)
    last = whole.activity.map(lambda t: t[-1])
    assert last[0].spikes.shape == (2, 5) and torch.equal(last["readout"].v, whole.out[-1])
    np_act = whole.activity.to_numpy()
    assert isinstance(np_act[0].v, np.ndarray) and np_act[0].v.shape == (6, 2, 5)
    with pytest.raises(ValueError, match="cannot join"):
        Activity.concat([whole.activity, Activity()])


def test_run_with_resets_returns_the_joined_activity() -> None:
    net = SpikingBackbone(3, [4], 2, seed=1)
    x = _x(5, 2, 3)
    starts = torch.zeros(5, 2, dtype=torch.bool)
    starts[3, 1] = True
    res = run_with_resets(net, x, net.initial_state(2), starts)
    assert res.activity.names == ["lif0", "readout"]
    assert res.activity[0].spikes.shape == (5, 2, 4)
    assert torch.equal(res.activity["readout"].v, res.out)


@pytest.mark.parametrize("name", ["mlp", "gru", "lstm"])
def test_ann_backbones_report_h(name: str) -> None:
    net = build_backbone(name, 3, 2, hidden_size=6, n_layers=2 if name == "mlp" else None)
    state = net.initial_state(4)
    res = net.run(_x(7, 4, 3), state)
    names = ["mlp0", "mlp1"] if name == "mlp" else [f"{name}0"]
    assert res.activity.names == names
    for layer in res.activity:
        assert (layer.kind, layer.size, layer.spikes, layer.v) == ("ann", 6, None, None)
        assert list(layer.fields) == ["h"] and layer.get("h").shape == (7, 4, 6)
    if name == "mlp":  # the hidden activation is tanh of the layer's affine map
        h0 = torch.tanh(net.hidden[0](_x(7, 4, 3)))
        assert torch.allclose(res.activity[0].get("h"), h0)


def test_encoded_backbone_is_its_backbone_on_the_encoded_input() -> None:
    """Neuron steps are the backbone's own substeps: the wrapper only encodes."""
    inner = SpikingBackbone(3 * 4, [5], 2, substeps=3, seed=0)
    net = EncodedBackbone(PopulationEncoder(3, k=4), inner)
    x = _x(2, 3)
    res = net.run(x, net.initial_state(2))
    full = inner.run(net.encoder(x), inner.initial_state(2))
    assert net.substeps == 3 and res.activity.names == ["lif0", "readout"]
    assert torch.equal(res.activity[0].spikes, full.activity[0].spikes)
    assert torch.equal(res.out, full.out)
    with pytest.raises(TypeError, match="sim_steps"):  # the wrapper's keyword of snrl 0.1
        EncodedBackbone(PopulationEncoder(3, k=4), inner, sim_steps=3)


def test_mlp_and_gru_take_one_width_name() -> None:
    a = MLP(3, 4, 2, n_layers=2)
    assert a.hidden_size == [4, 4] and [m.out_features for m in a.hidden] == [4, 4]
    assert MLP(3, [5, 2], None).output_size == 2
    with pytest.raises(TypeError, match="hidden_sizes"):  # the keyword of snrl 0.1
        MLP(3, hidden_sizes=[5, 2], output_size=1)
    with pytest.raises(ValueError, match="n_layers=3"):
        MLP(3, [5, 2], 1, n_layers=3)
    assert GRU(3, 4).hidden_size == LSTM(3, 4, 1).hidden_size == 4
    with pytest.raises(ValueError, match="one recurrent layer"):
        GRU(3, [4, 4], 1)
    with pytest.raises(ValueError, match="one int"):
        build_backbone("lstm", 3, 1, hidden_size=[4, 4])


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_mlp_activation_by_hand(activation: str) -> None:
    torch.manual_seed(0)
    net = build_backbone("mlp", 3, 2, hidden_size=[5, 4], activation=activation)
    x = _x(6, 3)
    f = torch.tanh if activation == "tanh" else (lambda t: t.clamp_min(0))
    h = x
    for layer in net.hidden:
        h = f(h @ layer.weight.T + layer.bias)
    out, state = net(x)
    assert state == () and torch.allclose(out, h @ net.head.weight.T + net.head.bias, atol=1e-6)
    assert torch.allclose(net.run(x).activity["mlp1"].extra["h"], h, atol=1e-6)
    if activation == "relu":  # ReLU zeroes some units of a random input; tanh none
        assert (net.run(x).activity["mlp0"].extra["h"] == 0).any()
    with pytest.raises(ValueError, match="unknown activation 'gelu'"):
        build_backbone("mlp", 3, 2, activation="gelu")
    with pytest.raises(ValueError, match="unknown activation 'gelu'"):
        MLP(3, 4, 2, activation="gelu")


def test_build_backbone_takes_per_layer_widths() -> None:
    net = build_backbone("alif", 3, 2, hidden_size=[7, 5], seed=0)
    assert isinstance(net, SpikingBackbone) and net.backbone == "alif"
    assert net.hidden_size == [7, 5] and list(net.layers) == ["alif0", "alif1", "readout"]
    assert build_backbone("lif", 3, 2, hidden_size=4, n_layers=3, seed=0).hidden_size == [4] * 3
    with pytest.raises(ValueError, match="n_layers=1"):
        build_backbone("lif", 3, 2, hidden_size=[4, 4], n_layers=1)


def test_rate_penalty_by_hand() -> None:
    # lif0 neurons fire on 2/2, 1/2 and 0/2 steps: rates 1, 0.5, 0; range [0.1, 0.4]:
    # ((1 - 0.4)^2 + (0.5 - 0.4)^2 + (0.1 - 0)^2) / 3 = 0.38 / 3; [0, 1] leaves all alone
    assert float(_two_layers().rate_penalty(0.1, 0.4)) == pytest.approx(0.38 / 3)
    assert float(_two_layers().rate_penalty(0.0, 1.0)) == 0.0
    only_ann = Activity([LayerActivity("mlp0", "ann", 2, extra={"h": np.ones((2, 2))})])
    assert float(only_ann.rate_penalty(0.0, 0.1)) == 0.0


def test_rate_penalty_gradient_brings_rates_to_target() -> None:
    # a layer driven hard fires on most steps; minimizing the penalty alone through the
    # surrogate gradient must bring its mean rate close to the target
    torch.manual_seed(0)
    net = SpikingBackbone(4, [32], 2, force_dale_law=True)
    x = _x(20, 8, 4).abs() * 3
    opt = torch.optim.Adam(net.parameters(), lr=2e-2)

    def rate() -> float:
        with torch.no_grad():
            return net.run(x, net.initial_state(8)).activity.spike_rates()["lif0"]

    before = rate()
    for _ in range(60):
        res = net.run(x, net.initial_state(8))
        loss = res.activity.rate_penalty(0.0, 0.05)
        opt.zero_grad()
        loss.backward()
        opt.step()
    after = rate()
    assert before > 0.3
    assert abs(after - 0.05) < 0.5 * abs(before - 0.05)
