"""snrl's exported NIR graphs run in other simulators: snntorch's ``import_from_nir`` and
Norse's ``from_nir`` (the test extras; each part is skipped where its package is missing);
and graphs written by snntorch's ``export_to_nir`` run in snrl (``from_nir``).

Oracle: the same input, fed to snrl's backbone and to the module the other simulator builds
from ``to_nir``'s graph, gives the same spikes at every step and the same membranes within
1e-6 of their range (float32 on both sides: the sums run in another order, so the last bits
differ; measured ~4e-7). The simulators' membranes are after the reset, snrl's before it:
snrl's are compared as ``v * (1 - z)``.

Where an importer cannot run a graph (a node it lacks, or a parameter it does not apply),
the case runs it anyway and is skipped with what it measured (the error, or the step where
the spikes part): docs/interop.md "NIR in other simulators" lists them. A case whose
importer is fixed upstream passes instead.
"""

from __future__ import annotations

import copy

import pytest
import torch

from snrl.networks.nir_io import to_nir
from snrl.networks.spiking import SpikingBackbone

nir = pytest.importorskip("nir")
T = 500


def _snrl(kind, *, dt, rec=True, reset="zero", readout=None):
    """A backbone, its input, its first layer's spikes and after-reset membranes
    ((T, B, N) each) and its output."""
    extra = {"tau_syn": 10 * dt} if kind == "spylif" else {}
    bb = SpikingBackbone(
        4, 16, readout, backbone=kind, seed=3, reset=reset, dt=dt, tau_m=20 * dt,
        force_dale_law=True, use_recurrent_connection=rec, **extra,
    )  # fmt: skip
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(T, 2, 4, generator=gen) * (0.3 if kind == "spylif" else 4.0)
    with torch.no_grad():
        res = bb.run(x, bb.initial_state(2))
    act = res.activity[0]
    assert 0.01 < float(act.spikes.mean()) < 0.9  # the test exercises spikes and resets
    return bb, x, act.spikes, act.v * (1 - act.spikes), res.out


def _snntorch(graph, x, name):
    """Run ``graph`` in snntorch: (spikes, membranes) of the neuron node ``name``."""
    import_nir = pytest.importorskip("snntorch.import_nir")  # needs nirtorch
    # import_from_nir rewrites the graph it is given (it folds recurrent cycles): a copy
    net = import_nir.import_from_nir(copy.deepcopy(graph))
    spikes, mems, state = [], [], None
    with torch.no_grad():
        for t in range(x.shape[0]):
            y, state = net(x[t]) if state is None else net(x[t], state)
            spikes.append(y)
            # the neuron (a recurrent layer: inside the sub-graph snntorch makes of its cycle)
            neuron = next(m for m in net.get_submodule(name).modules() if hasattr(m, "mem"))
            mems.append(neuron.mem.clone())
    return torch.stack(spikes), torch.stack(mems)


def _membrane_of(state):
    """The (first) LIF membrane in Norse's nested graph state."""
    from norse.torch.module.lif_box import LIFBoxFeedForwardState

    if isinstance(state, LIFBoxFeedForwardState):
        return state.v
    if isinstance(getattr(state, "state", None), dict):
        state = state.state
    items = state.values() if isinstance(state, dict) else state
    if isinstance(items, (tuple, list, type({}.values()))):
        for item in items:
            v = _membrane_of(item)
            if v is not None:
                return v
    return None


def _norse(graph, x, dt):
    """Run ``graph`` in Norse at ``dt``: (outputs, membranes of its first LIF)."""
    norse = pytest.importorskip("norse.torch")
    net = norse.from_nir(graph, dt=dt, ignore_warnings=True)
    outs, mems, state = [], [], None
    with torch.no_grad():
        for t in range(x.shape[0]):
            y, state = net(x[t], state)
            outs.append(y)
            mems.append(_membrane_of(state).clone())
    return torch.stack(outs), torch.stack(mems)


def _assert_agree(spikes, mems, z, v):
    assert torch.equal(spikes.to(z.dtype), z)
    err = float((mems - v).abs().max()) / float(v.abs().max())
    assert err <= 1e-6, err


@pytest.mark.parametrize("kind", ["lif", "spylif"])
def test_snntorch_runs_feedforward_layers_to_snrls_spikes_and_membranes(kind):
    # snntorch's importer integrates at dt = 1e-4 s (fixed in its import_nir.py): the graph
    # agrees at that dt, and its r (LIF) / w_in (CubaLIF) are then the scales it applies
    bb, x, z, v, _ = _snrl(kind, dt=1e-4, rec=False)
    spikes, mems = _snntorch(to_nir(bb), x, f"{kind}0")
    _assert_agree(spikes, mems, z, v)


@pytest.mark.parametrize("rec", [True, False], ids=["recurrent", "feedforward"])
def test_norse_runs_spylif_layers_to_snrls_spikes_and_membranes(rec):
    bb, x, z, v, _ = _snrl("spylif", dt=1e-3, rec=rec)  # Norse takes dt: the graph's own
    g = to_nir(bb)
    outs, mems = _norse(g, x, float(g.metadata["dt"]))
    _assert_agree(outs, mems, z, v)


@pytest.mark.parametrize("rec", [True, False], ids=["recurrent", "feedforward"])
def test_norse_runs_lif_layers_once_r_is_folded_into_the_weights(rec):
    """Norse's LIF import ignores r (below); the same graph written with r = 1, the scale in
    the weights (to_nir(unit_r=True): NIR's equations unchanged), runs in Norse to snrl's
    spikes."""
    bb, x, z, v, _ = _snrl("lif", dt=1e-3, rec=rec)
    outs, mems = _norse(to_nir(bb, unit_r=True), x, 1e-3)
    _assert_agree(outs, mems, z, v)


def _first_divergence(spikes, z):
    bad = (spikes.to(z.dtype) != z).flatten(1).any(1).nonzero()
    return None if bad.numel() == 0 else int(bad[0])


def _measured(who, what, why, run):
    """Run a case an importer is known not to reproduce (``why``, read in its source): skip
    with what it measured (its error, or the first step where the spikes differ); pass if
    it agrees (fixed upstream)."""
    try:
        step = run()
    except Exception as e:  # the importer's own error, reported as measured
        pytest.skip(f"{who} cannot run {what} ({why}): {type(e).__name__}: {str(e)[:160]}")
    if step is not None:
        where = f"spikes from step {step} of {T}" if isinstance(step, int) else step
        pytest.skip(f"{who} runs {what} to other results ({why}): measured, {where} differ")


SNN_LI = "its import_from_nir maps no LI node"
SNN_CYCLE = "its import_from_nir wires the cycle's input into the recurrent Linear"
SNN_DT = "its import_from_nir integrates at dt=1e-4 whatever the graph's dt"
NORSE_LI = "its from_nir maps no LI node"
#: (simulator, what, why (read in its importer's source), the snrl backbone's settings)
KNOWN = [
    ("snntorch", "a policy", SNN_LI, dict(kind="lif", dt=1e-4, reset="subtract", readout=2)),
    ("snntorch", "an LI readout", SNN_LI, dict(kind="lif", dt=1e-4, readout=2)),
    ("snntorch", "a recurrent cycle", SNN_CYCLE, dict(kind="lif", dt=1e-4, rec=True)),
    ("snntorch", "a recurrent CubaLIF cycle", SNN_CYCLE, dict(kind="spylif", dt=1e-4, rec=True)),
    ("snntorch", "a graph at dt=1e-3", SNN_DT, dict(kind="lif", dt=1e-3, rec=False)),
    ("snntorch", "a CubaLIF graph at dt=1e-3", SNN_DT, dict(kind="spylif", dt=1e-3, rec=False)),
    ("Norse", "LIF with r != 1", "its LIF import ignores r", dict(kind="lif", dt=1e-3, rec=False)),
    ("Norse", "a policy", NORSE_LI, dict(kind="spylif", dt=1e-3, reset="subtract", readout=2)),
    ("Norse", "an LI readout", NORSE_LI, dict(kind="spylif", dt=1e-3, readout=2)),
]  # fmt: skip


@pytest.mark.parametrize("who, what, why, settings", KNOWN, ids=[f"{k[0]}: {k[1]}" for k in KNOWN])
def test_what_the_importers_do_not_reproduce(who, what, why, settings):
    """Each case runs; it is skipped with what it measured, or passes if it agrees."""
    kind, dt = settings["kind"], settings["dt"]
    bb, x, z, v, out = _snrl(**settings)
    g = to_nir(bb)
    readout = settings.get("readout") is not None

    def run():
        if who == "snntorch":
            got, mems = _snntorch(g, x, "readout" if readout else f"{kind}0")
        else:
            got, mems = _norse(g, x, dt)
        if readout:
            return None if torch.allclose(got, out, rtol=1e-5, atol=1e-5) else "the outputs"
        step = _first_divergence(got, z)
        if step is None:
            _assert_agree(got, mems, z, v)
        return step

    _measured(who, what, why, run)


@pytest.mark.parametrize("recurrent", [True, False], ids=["RLeaky", "Leaky"])
def test_a_network_written_by_snntorch_runs_in_snrl_to_snntorchs_spikes(recurrent):
    """NIR in: snntorch's export_to_nir writes the graph, from_nir runs it (at snntorch's
    dt = 1e-4, its export's too). Zero reset without delay is what NIR's LIF does; per-neuron
    beta and threshold, as a scalar fails snntorch's own type inference (snntorch #410)."""
    import snntorch as snn
    from snntorch.utils import reset

    from snrl.networks.nir_io import from_nir

    export_nir = pytest.importorskip("snntorch.export_nir")
    torch.manual_seed(0)
    n = 16

    def lif(size, beta, cls=snn.Leaky, **kw):
        return cls(
            beta=torch.full((size,), beta), threshold=torch.ones(size), reset_mechanism="zero",
            reset_delay=False, init_hidden=True, **kw,
        )  # fmt: skip

    first = lif(n, 0.9, snn.RLeaky, linear_features=n) if recurrent else lif(n, 0.9)
    net = torch.nn.Sequential(
        torch.nn.Linear(4, n), first, torch.nn.Linear(n, 3), lif(3, 0.8, output=True)
    )
    with torch.no_grad():
        net[2].weight.mul_(4)  # so that the second layer spikes too
    graph = export_nir.export_to_nir(net, torch.rand(4))
    mine = from_nir(graph, dt=1e-4)
    x = torch.rand(T, 2, 4, generator=torch.Generator().manual_seed(1)) * 3
    reset(net)
    z1, v1, z2, v2 = [], [], [], []
    with torch.no_grad():
        for t in range(T):
            z1.append(net[1](net[0](x[t])))
            v1.append(net[1].mem.clone())
            z, v = net[3](net[2](z1[-1]))
            z2.append(z)
            v2.append(v)
        res = mine.run(x, mine.initial_state(2))
    for act, z, v in zip(res.activity, (z1, z2), (v1, v2)):
        z, v = torch.stack(z), torch.stack(v)
        assert 0.01 < float(z.mean()) < 0.9, act.name
        _assert_agree(z, v, act.spikes, act.v * (1 - act.spikes))


if __name__ == "__main__":  # the agreement table of docs/interop.md: python THIS_FILE
    for kind in ("lif", "spylif"):
        bb, x, z, v, _ = _snrl(kind, dt=1e-4, rec=False)
        spikes, mems = _snntorch(to_nir(bb), x, f"{kind}0")
        err = float((mems - v).abs().max()) / float(v.abs().max())
        print(f"snntorch {kind} feedforward dt=1e-4: spikes {torch.equal(spikes, z)}, {err:.2g}")
    for rec in (False, True):
        bb, x, z, v, _ = _snrl("spylif", dt=1e-3, rec=rec)
        spikes, mems = _norse(to_nir(bb), x, 1e-3)
        err = float((mems - v).abs().max()) / float(v.abs().max())
        print(f"Norse spylif recurrent={rec} dt=1e-3: spikes {torch.equal(spikes, z)}, {err:.2g}")
        bb, x, z, v, _ = _snrl("lif", dt=1e-3, rec=rec)
        spikes, mems = _norse(to_nir(bb, unit_r=True), x, 1e-3)
        err = float((mems - v).abs().max()) / float(v.abs().max())
        print(
            f"Norse lif unit_r recurrent={rec} dt=1e-3: spikes {torch.equal(spikes, z)}, {err:.2g}"
        )
