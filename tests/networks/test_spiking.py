"""SpikingBackbone: protocol, Dale sign wiring, layer_info, seeds and resets."""

from __future__ import annotations

import io

import pytest
import torch

from snrl.layers import ALIFState, LIFState, LIState, SpyLIFState
from snrl.networks import Activity
from snrl.networks.protocol import BackboneOutput, LayerInfo
from snrl.networks.spiking import SpikingBackbone


def _x(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * 2


@pytest.mark.parametrize(
    ("backbone", "state_type"), [("lif", LIFState), ("alif", ALIFState), ("spylif", SpyLIFState)]
)
def test_run_shapes_activity_layers_and_forward_equals_run(backbone: str, state_type) -> None:
    net = SpikingBackbone(4, [16, 8], 3, backbone=backbone, threshold=0.7, seed=0)
    assert list(net.layers) == [f"{backbone}0", f"{backbone}1", "readout"]
    state = net.initial_state(5)
    assert [type(s) for s in state] == [state_type, state_type, LIState]
    for x, lead in ((_x(5, 4), (5,)), (_x(7, 5, 4), (7, 5))):
        res = net.run(x, state)
        assert isinstance(res, BackboneOutput)
        assert res.out.shape == (*lead, 3)
        act = res.activity
        assert isinstance(act, Activity)
        assert act.names == [f"{backbone}0", f"{backbone}1", "readout"]
        assert [a.name for a in act.spiking()] == [f"{backbone}0", f"{backbone}1"]
        assert [(a.kind, a.size, a.threshold) for a in act] == [
            ("spiking", 16, 0.7),
            ("spiking", 8, 0.7),
            ("readout", 3, None),
        ]
        own = [f for f in state_type._fields if f not in ("v", "z")]  # ALIF a, SpyLIF i
        spiking = ["spikes", "v", *own]
        assert [list(a.fields) for a in act] == [spiking, spiking, ["v"]]
        assert act[0] is act[f"{backbone}0"]
        assert act[0].spikes.shape == act[0].v.shape == (*lead, 16)
        assert act[f"{backbone}1"].v.shape == (*lead, 8)
        assert set(act[1].spikes.unique().tolist()) <= {0.0, 1.0}
        assert torch.equal(act["readout"].v, res.out)
        assert torch.equal(
            act[1].spikes, net.layers[f"{backbone}1"].run(act[0].spikes, state[1]).out
        )
        out, st = net(x, state)
        assert torch.equal(out, res.out)
        assert all(torch.equal(a[0], b[0]) for a, b in zip(st, res.state))


def test_sequence_equals_step_loop_through_the_stack() -> None:
    net = SpikingBackbone(3, [12, 6], 2, seed=1)
    x = _x(20, 4, 3)
    s0 = net.initial_state(4)
    res = net.run(x, s0)
    res.out.pow(2).sum().backward()
    g_seq = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    outs, s = [], s0
    for t in range(20):
        o, s = net(x[t], s)
        outs.append(o)
    out2 = torch.stack(outs)
    out2.pow(2).sum().backward()
    assert torch.allclose(res.out, out2, atol=1e-5)
    assert res.activity["lif0"].spikes.sum() > 0
    for a, p in zip(g_seq, net.parameters()):
        assert torch.allclose(a, p.grad, rtol=1e-4, atol=1e-4 * (1 + a.abs().max().item()))


def test_dale_signs_are_wired_downstream() -> None:
    net = SpikingBackbone(4, [10, 8, 6], 3, force_dale_law=True, recurrent_sign=0.3, seed=2)
    l0, l1, l2, ro = (net.layers[k] for k in ("lif0", "lif1", "lif2", "readout"))
    assert l0.forward_sign is None
    assert torch.equal(l1.forward_sign, l0.recurrent_sign)
    assert torch.equal(l2.forward_sign, l1.recurrent_sign)
    assert torch.equal(ro.forward_sign, l2.recurrent_sign)
    for layer in (l0, l1, l2):
        assert int((layer.recurrent_sign == -1).sum()) == round(0.3 * layer.output_size)
    # every outgoing synapse of a neuron, recurrent or downstream, shares its sign
    for up, down in ((l0, l1), (l1, l2), (l2, ro)):
        s = up.recurrent_sign[:, None]
        assert (up.recurrent_weights * s >= 0).all()
        assert (down.forward_weights * s >= 0).all()


def test_without_dale_there_are_no_signs() -> None:
    net = SpikingBackbone(4, [5, 5], 2, seed=0)
    assert all(layer.forward_sign is None for layer in net.layers.values())
    assert all(info.sign is None for info in net.layer_info())


def test_layer_info_numbers() -> None:
    net = SpikingBackbone(4, [10, 6], 3, force_dale_law=True, seed=0, threshold=0.5)
    info = net.layer_info()
    assert all(isinstance(i, LayerInfo) for i in info)
    got = [(i.name, i.kind, i.size, i.fan_in, i.fan_out, i.threshold) for i in info]
    assert got == [
        ("lif0", "spiking", 10, 4, 9 + 6, 0.5),
        ("lif1", "spiking", 6, 10, 5 + 3, 0.5),
        ("readout", "readout", 3, 6, 0, None),
    ]
    assert torch.equal(info[0].sign, net.layers["lif0"].recurrent_sign)
    assert info[2].sign is None


def test_layer_info_fan_out_without_mask_without_recurrence_and_without_readout() -> None:
    a = SpikingBackbone(4, [10], 3, use_rec_eye_mask=False, seed=0).layer_info()
    assert a[0].fan_out == 10 + 3
    b = SpikingBackbone(4, [10, 7], None, use_recurrent_connection=False, seed=0).layer_info()
    assert [i.fan_out for i in b] == [7, 0]
    assert [i.name for i in b] == ["lif0", "lif1"]


def test_activity_signs_are_the_layers_dale_signs() -> None:
    net = SpikingBackbone(4, [10, 6], 3, force_dale_law=True, seed=0)
    act = net.run(_x(2, 4), net.initial_state(2)).activity
    for a, info in zip(act, net.layer_info()):
        assert (a.name, a.kind, a.size, a.threshold) == (
            info.name, info.kind, info.size, info.threshold
        )  # fmt: skip
        assert (a.sign is None) == (info.sign is None)
        if a.sign is not None:
            assert torch.equal(a.sign, info.sign)
    assert act[0].sign is not None and act["readout"].sign is None


def test_int_hidden_size_with_n_layers_equals_the_list() -> None:
    a = SpikingBackbone(4, 6, 2, n_layers=3, seed=5)
    b = SpikingBackbone(4, [6, 6, 6], 2, seed=5)
    assert a.hidden_size == b.hidden_size == [6, 6, 6] and a.n_layers == 3
    for (k, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(p, q), k


def test_the_keywords_of_snrl_0_1_are_gone() -> None:
    """neuron= and hidden_sizes= were never published: refused, not aliases."""
    with pytest.raises(TypeError, match="neuron"):
        SpikingBackbone(4, [6, 5], 2, neuron="alif", seed=1)
    with pytest.raises(ValueError, match="needs hidden_size"):
        SpikingBackbone(4, hidden_sizes=[6, 5], output_size=2, seed=1)


def test_readout_and_spiking_layers_accessors() -> None:
    net = SpikingBackbone(4, [8, 5], 2, seed=0)
    assert net.readout is net.layers["readout"]
    assert net.spiking_layers == [net.layers["lif0"], net.layers["lif1"]]
    assert SpikingBackbone(4, 8, None, seed=0).readout is None


def test_output_none_returns_last_spikes() -> None:
    net = SpikingBackbone(4, 8, None, seed=0)
    assert net.output_size == 8
    res = net.run(_x(6, 2, 4), net.initial_state(2))
    assert torch.equal(res.out, res.activity["lif0"].spikes)
    assert "readout" not in res.activity and res.activity.names == ["lif0"]


def test_seed_makes_construction_repeat_and_layers_differ() -> None:
    a = SpikingBackbone(4, [8, 8], 2, force_dale_law=True, seed=3)
    b = SpikingBackbone(4, [8, 8], 2, force_dale_law=True, seed=3)
    c = SpikingBackbone(4, [8, 8], 2, force_dale_law=True, seed=4)
    for (k, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(p, q), k
    assert not torch.equal(a.layers["lif0"].weight_rec, c.layers["lif0"].weight_rec)
    assert not torch.equal(a.layers["lif0"].weight_rec, a.layers["lif1"].weight_rec)


def test_seed_none_follows_global_rng() -> None:
    torch.manual_seed(0)
    a = SpikingBackbone(4, [8], 2)
    torch.manual_seed(0)
    b = SpikingBackbone(4, [8], 2)
    assert torch.equal(a.layers["lif0"].weight_rec, b.layers["lif0"].weight_rec)


def test_reset_state_only_done_rows_in_every_layer() -> None:
    net = SpikingBackbone(4, [8, 6], 2, backbone="alif", hh_init="random", seed=0)
    state = net.initial_state(3)
    with torch.no_grad():
        _, state = net(_x(10, 3, 4), state)
    done = torch.tensor([True, False, False])
    new = net.reset_state(state, done)
    for old_s, new_s in zip(state, new):
        for o, n in zip(old_s, new_s):
            assert torch.equal(n[1:], o[1:])
    assert torch.equal(new[0].z[0], torch.zeros(8))
    assert torch.equal(new[2].v[0], torch.zeros(2))  # readout uses zeros


def test_hh_init_given_and_inputs_through_the_backbone() -> None:
    net = SpikingBackbone(3, [3, 3], 2, hh_init="given", seed=0)
    h = {"lif0": torch.ones(3), "lif1": torch.full((3,), 2.0)}
    s = net.initial_state(2, h0=h)
    assert torch.equal(s[0].v, torch.ones(2, 3)) and torch.equal(s[1].v, torch.full((2, 3), 2.0))
    s2 = net.initial_state(2, h0=[torch.ones(3), torch.full((3,), 2.0)])
    assert torch.equal(s2[1].v, s[1].v)
    with pytest.raises(ValueError, match="unknown layers"):
        net.initial_state(2, h0={"lif9": torch.ones(3)})
    net = SpikingBackbone(3, [3, 3], 2, hh_init="inputs", seed=0)
    obs = torch.arange(6.0).reshape(2, 3)
    s = net.initial_state(2, inputs=obs)
    assert torch.equal(s[0].v, obs) and torch.equal(s[1].v, torch.zeros(2, 3))


def test_learned_init_gets_gradient_through_the_backbone() -> None:
    net = SpikingBackbone(3, [6], 2, hh_init="learned", hh_init_mu=0.5, seed=0)
    out, _ = net(_x(5, 2, 3), net.initial_state(2))
    out.sum().backward()
    assert net.layers["lif0"].h0.grad.abs().sum() > 0


def test_backbone_state_round_trips_through_torch_save() -> None:
    net = SpikingBackbone(3, [4], 2, backbone="spylif", seed=0)
    _, state = net(_x(5, 2, 3), net.initial_state(2))
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True)
    assert [type(s) for s in loaded] == [SpyLIFState, LIState]
    out_a, _ = net(_x(1, 2, 3, seed=1)[0], state)
    out_b, _ = net(_x(1, 2, 3, seed=1)[0], loaded)
    assert torch.equal(out_a, out_b)


def test_layer_kwargs_reach_the_spiking_layers_and_dt_the_readout() -> None:
    net = SpikingBackbone(3, [4], 2, tau_m=0.05, dt=2e-3, threshold=0.7, readout_tau_m=0.01)
    lif, ro = net.layers["lif0"], net.layers["readout"]
    assert torch.allclose(lif.tau_m, torch.full((4,), 0.05)) and lif.threshold == 0.7
    assert lif.dt == ro.dt == 2e-3
    assert torch.allclose(ro.tau_m, torch.full((2,), 0.01))


@pytest.mark.parametrize(
    ("args", "kw", "match"),
    [
        ((3, [4], 2), {"backbone": "izhikevich"}, "izhikevich"),
        ((3, [], 2), {}, "hidden_size"),
        ((3, None, 2), {}, "hidden_size"),
        ((3, [4, 4], 2), {"n_layers": 3}, "n_layers=3"),
        ((3, 0, 2), {}, ">= 1"),
        ((3, [4], 2), {"forward_sign": torch.ones(3)}, "forward_sign"),
        ((3, [4, 4], 2), {"recurrent_sign": [0.2]}, "1 entries for 2"),
    ],
)
def test_construction_errors(args, kw, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SpikingBackbone(*args, **kw)


def test_state_errors_name_the_problem() -> None:
    net = SpikingBackbone(3, [4, 4], 2, seed=0)
    with pytest.raises(ValueError, match="2 parts.*3 layers"):
        net(torch.zeros(2, 3), net.initial_state(2)[:2])
    with pytest.raises(ValueError, match=r"\(2, 4\).*\(5, 3\)"):
        net(torch.zeros(5, 3), net.initial_state(2))
