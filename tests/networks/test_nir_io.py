"""NIR out of and into snrl.

Oracles: write -> ``nir.read`` (with its type inference) -> ``from_nir`` gives the same spikes
and outputs bit for bit; a small forward-Euler simulator of NIR's own equations, written
here from the NIR node definitions, runs the exported graph to snrl's spikes (the parameter
mapping is right, not only self-consistent); the time constants by hand.
"""

import math

import numpy as np
import pytest
import torch

from snrl.errors import UserError
from snrl.networks.nir_io import from_nir, parameter_table, to_nir
from snrl.networks.spiking import SpikingBackbone

nir = pytest.importorskip("nir")


def _input(t, b, f, seed=0, scale=3.0):
    return torch.rand(t, b, f, generator=torch.Generator().manual_seed(seed)) * scale


def _round_trip(bb, tmp_path):
    path = tmp_path / "net.nir"
    nir.write(path, to_nir(bb))
    return from_nir(nir.read(path))  # nir.read type-checks the graph (cycles included)


@pytest.mark.parametrize("kind", ["lif", "spylif"])
@pytest.mark.parametrize("reset", ["subtract", "zero"])
@torch.no_grad()
def test_write_read_from_nir_reproduces_spikes_exactly(kind, reset, tmp_path):
    bb = SpikingBackbone(6, [64, 32], 3, backbone=kind, force_dale_law=True, seed=1, reset=reset)
    back = _round_trip(bb, tmp_path)
    assert back.backbone == kind and back.layers[f"{kind}0"].reset == reset
    x = _input(500, 4, 6)
    a, b = bb.run(x, bb.initial_state(4)), back.run(x, back.initial_state(4))
    for la, lb in zip(a.activity, b.activity):
        if la.spikes is not None:
            assert torch.equal(la.spikes, lb.spikes), la.name
            assert 0 < float(la.spikes.mean()) < 1
    assert torch.equal(a.out, b.out)


@torch.no_grad()
def test_graph_layout_and_parameters_by_hand():
    bb = SpikingBackbone(3, 8, 2, seed=0, tau_m=20e-3, dt=1e-3, threshold=1.5)
    g = to_nir(bb)
    assert float(g.metadata["dt"]) == 1e-3
    # subtract reset (the default): LI + Threshold, the reset on the recurrent diagonal
    assert isinstance(g.nodes["lif0"], nir.LI) and isinstance(g.nodes["lif0_spikes"], nir.Threshold)
    assert ("lif0_spikes", "lif0_rec") in g.edges and ("lif0_rec", "lif0") in g.edges
    rec = g.nodes["lif0_rec"].weight
    assert np.all(np.diag(rec) == np.float32(-1.5))
    assert np.array_equal(
        rec - np.diag(np.diag(rec)), bb.layers["lif0"].recurrent_weights.T.numpy()
    )
    alpha = math.exp(-1e-3 / 20e-3)
    tau = 1e-3 / (1 - alpha)  # 0.0205 s: the Euler ODE's time constant, ~ tau_m + dt / 2
    assert g.nodes["lif0"].tau == pytest.approx(np.full(8, tau), rel=1e-6)
    assert abs(tau - (20e-3 + 0.5e-3)) < 1e-5
    assert g.nodes["lif0"].r == pytest.approx(np.full(8, tau / 1e-3), rel=1e-6)
    assert g.nodes["readout"].tau == pytest.approx(np.full(2, 1e-3 / (1 - alpha)), rel=1e-6)
    # snrl's (in, out) weights are NIR's (out, in)
    assert np.array_equal(g.nodes["lif0_in"].weight, bb.layers["lif0"].forward_weights.T.numpy())
    # zero reset: NIR's own LIF with v_reset 0
    z = to_nir(SpikingBackbone(3, 8, 2, seed=0, reset="zero"))
    assert isinstance(z.nodes["lif0"], nir.LIF) and np.all(z.nodes["lif0"].v_reset == 0)
    assert "| `alpha = exp(-dt / tau_m)` | `tau` | `dt / (1 - alpha)` |" in parameter_table()


def _euler_nir(g, x):
    """Forward-Euler simulation of a chain graph from NIR's equations alone (float64):
    LI/LIF: v += dt/tau (v_leak - v + r I); LIF: spike when v > v_threshold, then v = v_reset;
    Threshold: z = v > threshold; a cycle feeds the previous step's output. Returns the
    spikes of each spiking node and the output."""
    dt = float(g.metadata["dt"])
    nodes, edges = g.nodes, g.edges
    order = []
    cur = next(b for a, b in edges if a == "input")
    prev_out = {k: None for k in nodes}
    T, B = x.shape[:2]
    v = {}
    spikes = {}
    out = []
    for t in range(T):
        val = {"input": x[t]}
        cur = next(b for a, b in edges if a == "input")
        done = set()
        queue = [cur]
        while queue:
            name = queue.pop(0)
            node = nodes[name]
            if name in done:
                continue
            ins = [a for a, b in edges if b == name]
            total = 0
            for a in ins:
                if a in val:
                    total = total + val[a]
                elif prev_out[a] is not None:  # the recurrent edge: last step's value
                    total = total + prev_out[a]
            if isinstance(node, nir.Affine):
                y = total @ node.weight.T + node.bias
            elif isinstance(node, nir.Linear):
                y = total @ node.weight.T
            elif isinstance(node, (nir.LI, nir.LIF)):
                s = v.get(name, np.zeros((B, node.tau.shape[0])))
                s = s + dt / node.tau * (node.v_leak - s + node.r * total)
                if isinstance(node, nir.LIF):
                    z = (s > node.v_threshold).astype(float)
                    s = np.where(z > 0, node.v_reset, s)
                    y = z
                    spikes.setdefault(name, []).append(z)
                else:
                    y = s
                v[name] = s
            elif isinstance(node, nir.Threshold):
                y = (total > node.threshold).astype(float)
                spikes.setdefault(name, []).append(y)
            elif isinstance(node, nir.Output):
                out.append(total)
                y = total
            val[name] = y
            done.add(name)
            order.append(name)
            queue += [b for a, b in edges if a == name and b not in done and b not in queue]
        prev_out = {k: val.get(k) for k in nodes}
    return {k: np.stack(s) for k, s in spikes.items()}, np.stack(out)


@pytest.mark.parametrize("reset", ["subtract", "zero"])
@torch.no_grad()
def test_a_nir_simulator_runs_the_exported_graph_to_snrls_spikes(reset):
    bb = SpikingBackbone(4, 24, 2, seed=3, reset=reset, force_dale_law=True).double()
    g = to_nir(bb)
    x = _input(200, 2, 4, seed=7, scale=4.0).double()
    mine = bb.run(x, bb.initial_state(2))
    spikes, out = _euler_nir(g, x.numpy())
    name = "lif0_spikes" if reset == "subtract" else "lif0"
    theirs = spikes[name]
    assert 0 < theirs.mean() < 1
    assert np.array_equal(theirs, mine.activity["lif0"].spikes.numpy())
    assert np.allclose(out, mine.out.numpy(), atol=1e-9)


def test_what_nir_cannot_hold_is_refused():
    with pytest.raises(UserError, match="ALIF has no NIR primitive"):
        to_nir(SpikingBackbone(4, 8, 2, backbone="alif", seed=0))
    with pytest.raises(UserError, match="takes a SpikingBackbone"):
        to_nir(torch.nn.Linear(2, 2))
    g = nir.NIRGraph(
        nodes={
            "input": nir.Input(input_type=np.array([2])),
            "aff": nir.Affine(weight=np.ones((3, 2)), bias=np.zeros(3)),
            "if": nir.IF(r=np.ones(3), v_threshold=np.ones(3)),
            "output": nir.Output(output_type=np.array([3])),
        },
        edges=[("input", "aff"), ("aff", "if"), ("if", "output")],
        metadata={"dt": 1e-3},
    )
    with pytest.raises(UserError, match="node 'if' is a IF, which snrl cannot run"):
        from_nir(g)
    g.metadata = {}
    with pytest.raises(UserError, match="no metadata\\['dt'\\]"):
        from_nir(g)


@torch.no_grad()
def test_encoders_direct_is_the_first_affine_population_is_refused_with_the_reason():
    from snrl.networks.encoders import EncodedBackbone, PopulationEncoder
    from snrl.networks.factory import build_backbone

    direct = build_backbone("lif", 4, 2, hidden_size=16, encoder="direct", seed=0)
    g = to_nir(direct)  # the observation enters the first layer's Affine node as it is
    assert g.edges[0] == ("input", "lif0_in") and isinstance(g.nodes["lif0_in"], nir.Affine)
    wrapped = to_nir(EncodedBackbone(torch.nn.Identity(), direct))
    assert sorted(wrapped.nodes) == sorted(g.nodes)
    assert np.array_equal(wrapped.nodes["lif0_in"].weight, g.nodes["lif0_in"].weight)
    # the population encoder is affine, then a Gaussian: y = W x + b, exp(-y^2 / 2), with
    # W copying each feature k times over sigma and b = -centre / sigma (checked here), and
    # NIR has no node for exp(-y^2 / 2)
    enc = PopulationEncoder(3, k=5, span=2.0)
    w = torch.kron(torch.eye(3), torch.ones(5, 1)) / enc.sigma
    b = -enc.centres.repeat(3) / enc.sigma
    x = torch.randn(7, 3)
    assert torch.allclose(enc(x), torch.exp(-0.5 * (x @ w.T + b) ** 2), atol=1e-6)
    pop = build_backbone("lif", 4, 2, hidden_size=16, encoder="population", seed=0)
    with pytest.raises(UserError, match="population encoder is an affine map followed by a Gaus"):
        to_nir(pop)


@pytest.mark.parametrize("kind", ["lif", "spylif"])
@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("rec", [True, False], ids=["rec", "ff"])
@pytest.mark.parametrize("readout", [3, None], ids=["readout", "no-readout"])
@torch.no_grad()
def test_every_exported_layout_passes_nirs_type_inference(kind, reset, rec, readout, tmp_path):
    """nir.read type-checks each graph (the failure of snntorch issue #410: a cycle or a
    node whose input and output types do not match); read back, it runs to the same spikes."""
    bb = SpikingBackbone(
        5, [12, 7], readout, backbone=kind, reset=reset, use_recurrent_connection=rec, seed=2
    )
    path = tmp_path / "g.nir"
    nir.write(path, to_nir(bb))
    g = nir.read(path, type_check=True)
    g.infer_types()  # again, explicitly: every edge's types agree
    for a, b in g.edges:
        out_t, in_t = g.nodes[a].output_type, g.nodes[b].input_type
        assert [np.asarray(t).tolist() for t in out_t.values()] == [
            np.asarray(t).tolist() for t in in_t.values()
        ], (a, b)
    back = from_nir(g)
    x = _input(60, 2, 5, seed=4)
    a, b = bb.run(x, bb.initial_state(2)), back.run(x, back.initial_state(2))
    for la, lb in zip(a.activity, b.activity):
        if la.spikes is not None:
            assert torch.equal(la.spikes, lb.spikes), la.name
    assert torch.equal(a.out, b.out)


@torch.no_grad()
def test_a_layer_nested_as_a_sub_graph_and_a_recurrent_affine_are_read():
    """NIR lets a layer be a sub-graph node (Input -> LIF <-> Linear -> Output); a
    recurrent Affine's bias is a constant input each step."""
    bb = SpikingBackbone(4, 10, 2, seed=5, reset="zero")
    g = to_nir(bb)
    n = 10
    bias = np.linspace(-0.2, 0.3, n).astype(np.float32)
    rec = nir.Affine(weight=g.nodes["lif0_rec"].weight, bias=bias)
    sub = nir.NIRGraph(
        nodes={
            "input": nir.Input(input_type=np.array([n])),
            "lif": g.nodes["lif0"],
            "w_rec": rec,
            "output": nir.Output(output_type=np.array([n])),
        },
        edges=[("input", "lif"), ("lif", "w_rec"), ("w_rec", "lif"), ("lif", "output")],
    )
    keep = {k: v for k, v in g.nodes.items() if k not in ("lif0", "lif0_rec")}
    nested = nir.NIRGraph(
        nodes={**keep, "layer": sub},
        edges=[("input", "lif0_in"), ("lif0_in", "layer"), ("layer", "readout_in"),
               ("readout_in", "readout"), ("readout", "output")],
        metadata=dict(g.metadata),
    )  # fmt: skip
    back = from_nir(nested)
    assert torch.equal(back.layers["lif0"].bias, bb.layers["lif0"].bias + torch.as_tensor(bias))
    with torch.no_grad():
        bb.layers["lif0"].bias += torch.as_tensor(bias)  # what the graph computes
    x = _input(200, 2, 4, seed=6)
    a, b = bb.run(x, bb.initial_state(2)), back.run(x, back.initial_state(2))
    assert 0 < float(a.activity["lif0"].spikes.mean()) < 1
    assert torch.equal(a.activity["lif0"].spikes, b.activity["lif0"].spikes)
    assert torch.equal(a.out, b.out)


@pytest.mark.parametrize("kind", ["lif", "spylif"])
@pytest.mark.parametrize("reset", ["subtract", "zero"])
@torch.no_grad()
def test_a_graph_with_unit_r_is_read_with_its_scale_folded_into_the_weights(kind, reset):
    """to_nir(unit_r=True) writes r = 1 with the scale in the weights (as Norse writes its
    graphs); from_nir folds any input scale back into the weights, the same ODE."""
    bb = SpikingBackbone(5, [20, 8], 3, backbone=kind, reset=reset, seed=7).double()
    g = to_nir(bb, unit_r=True)
    assert np.all(g.nodes[f"{kind}0"].r == 1) and np.all(g.nodes["readout"].r == 1)
    if kind == "spylif":
        assert np.all(g.nodes["spylif0"].w_in == 1)
    ref = to_nir(bb)  # r = tau / dt (w_in = tau_syn / dt): the weights feeding the neurons
    node = ref.nodes[f"{kind}0"]
    scale = node.r * (node.w_in if kind == "spylif" else 1.0)
    for proj in (f"{kind}0_in", f"{kind}0_rec"):
        want = ref.nodes[proj].weight * scale[:, None]
        assert np.allclose(g.nodes[proj].weight, want, rtol=1e-6), proj
    back = from_nir(g).double()  # built in float32: its weights rounded to float32
    # the reset on the diagonal, scaled and folded back, leaves no autapse of ~1e-8
    assert not torch.diagonal(back.layers[f"{kind}0"].recurrent_weights).any()
    x = _input(200, 2, 5, seed=8).double()
    a, b = bb.run(x, bb.initial_state(2)), back.run(x, back.initial_state(2))
    for la, lb in zip(a.activity, b.activity):
        if la.spikes is not None:
            assert 0 < float(la.spikes.mean()) < 1
            assert torch.equal(la.spikes, lb.spikes), la.name
    assert torch.allclose(a.out, b.out, rtol=1e-5, atol=1e-5)
