"""run_with_resets: the one-call path (resets inside the fused kernels) equals cutting the
sequence at every episode start, outputs and gradients, for every spiking backbone."""

from __future__ import annotations

import pytest
import torch

from snrl.functional.state import map_state
from snrl.networks import sequence as sequence_module
from snrl.networks.spiking import SpikingBackbone


def _cut_reference(net, x, state, starts, fresh, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(sequence_module, "_one_call", lambda *_: False)
        return sequence_module.run_with_resets(net, x, state, starts, fresh)


def _grads(net, res, g):
    net.zero_grad()
    loss = (res.out * g).sum() + sum((a.v**2).sum() * 0.1 for a in res.activity)
    loss.backward()
    return {k: p.grad.clone() for k, p in net.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("backbone", ["lif", "alif", "spylif"])
@pytest.mark.parametrize("hh_init", ["zeros", "learned", "random"])
@pytest.mark.parametrize(("reset", "substeps"), [("subtract", 1), ("zero", 2)])
def test_one_call_equals_the_cut_sequence(backbone, hh_init, reset, substeps, monkeypatch):
    net = SpikingBackbone(
        3,
        [6, 5],
        2,
        backbone=backbone,
        force_dale_law=True,
        seed=1,
        hh_init=hh_init,
        hh_init_mu=0.3,
        reset=reset,
        substeps=substeps,
        learn_tau=True,
    ).double()
    T, B = 9, 4
    g = torch.Generator().manual_seed(0)
    x = torch.randn(T, B, 3, generator=g, dtype=torch.float64) * 3
    starts = torch.rand(T, B, generator=g) < 0.3
    starts[0] = True
    starts[4, 1] = True
    state = map_state(lambda t: t.double(), net.initial_state(B))
    fresh = None
    if hh_init == "random":  # the states recorded in a rollout, drawn at each start
        fresh = [
            map_state(lambda t: t.double(), net.initial_state(B)) if bool(s.any()) else None
            for s in starts
        ]
    out_g = torch.randn(T, B, 2, generator=g, dtype=torch.float64)
    ref = _cut_reference(net, x, state, starts, fresh, monkeypatch)
    ref_grads = _grads(net, ref, out_g)
    calls = []
    real = net.run
    monkeypatch.setattr(net, "run", lambda *a, **k: calls.append(1) or real(*a, **k))
    res = sequence_module.run_with_resets(net, x, state, starts, fresh)
    assert len(calls) == 1  # no cuts
    grads = _grads(net, res, out_g)
    assert torch.equal(res.out, ref.out)
    for a, b in zip(res.activity, ref.activity, strict=True):
        assert torch.equal(a.v, b.v)
    torch.testing.assert_close(res.state, ref.state, rtol=0, atol=0)
    assert set(grads) == set(ref_grads)
    if hh_init == "learned":
        assert any(k.endswith("h0") for k in grads)
    for k in ref_grads:
        torch.testing.assert_close(grads[k], ref_grads[k], rtol=1e-10, atol=1e-12, msg=k)


def test_given_init_still_needs_its_values():
    net = SpikingBackbone(2, 4, 1, hh_init="given", seed=0)
    x = torch.randn(5, 3, 2)
    starts = torch.zeros(5, 3, dtype=torch.bool)
    starts[2, 0] = True
    state = net.initial_state(3, h0=torch.zeros(4))
    with pytest.raises(ValueError, match="h0"):
        sequence_module.run_with_resets(net, x, state, starts)


@pytest.mark.parametrize("hh_init", ["zeros", "learned", "random"])
@pytest.mark.parametrize(("reset", "substeps", "n_layers"), [("subtract", 1, 1), ("zero", 2, 2)])
def test_policy_and_critic_side_by_side_equal_each_alone(
    hh_init, reset, substeps, n_layers, monkeypatch
):
    grouped = []
    real = sequence_module.run_together
    monkeypatch.setattr(
        sequence_module,
        "run_together",
        lambda *a, **k: grouped.append(real(*a, **k)) or grouped[-1],
    )
    nets = [
        SpikingBackbone(
            3,
            6,
            out,
            n_layers=n_layers,
            force_dale_law=True,
            seed=seed,
            hh_init=hh_init,
            hh_init_mu=0.2,
            reset=reset,
            substeps=substeps,
            learn_tau=True,
        ).double()
        for seed, out in ((1, 2), (2, 1))
    ]
    T, B = 8, 3
    g = torch.Generator().manual_seed(3)
    x = torch.randn(T, B, 3, generator=g, dtype=torch.float64) * 3
    starts = torch.rand(T, B, generator=g) < 0.3
    starts[5, 0] = True
    states = [map_state(lambda t: t.double(), n.initial_state(B)) for n in nets]
    fresh = [None, None]
    if hh_init == "random":
        fresh = [
            [map_state(lambda t: t.double(), n.initial_state(B)) for _ in range(T)] for n in nets
        ]
    grads = []
    runs = []
    for together in (False, True):
        if together:
            outs = sequence_module.run_many_with_resets(nets, x, states, starts, fresh)
        else:
            outs = [
                sequence_module.run_with_resets(n, x, s, starts, f)
                for n, s, f in zip(nets, states, fresh)
            ]
        for n in nets:
            n.zero_grad()
        loss = sum(
            (o.out * (i + 1)).sum() + sum((a.v**2).sum() for a in o.activity) * 0.1
            for i, o in enumerate(outs)
        )
        loss.backward()
        grads.append([{k: p.grad.clone() for k, p in n.named_parameters()} for n in nets])
        runs.append(outs)
    alone, together = runs
    assert len(grouped) == 1 and grouped[0] is not None  # the side-by-side path ran
    for a, b in zip(alone, together, strict=True):
        torch.testing.assert_close(b.out, a.out, rtol=1e-12, atol=1e-12)
        for la, lb in zip(a.activity, b.activity, strict=True):
            assert la.name == lb.name
            if la.spikes is not None:
                assert torch.equal(la.spikes, lb.spikes)
            torch.testing.assert_close(lb.v, la.v, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(b.state, a.state, rtol=1e-12, atol=1e-12)
    for ga, gb in zip(*grads, strict=True):
        assert set(ga) == set(gb)
        for k in ga:
            torch.testing.assert_close(gb[k], ga[k], rtol=1e-10, atol=1e-12, msg=k)


def test_backbones_of_other_shapes_run_one_after_the_other():
    from snrl.networks.spiking import run_together

    a = SpikingBackbone(3, 6, 2, seed=0)
    b = SpikingBackbone(3, 7, 1, seed=1)  # another width
    c = SpikingBackbone(3, 6, 1, seed=1, backbone="alif")
    x = torch.randn(4, 2, 3)
    for pair in ((a, b), (a, c)):
        assert run_together(pair, x, [n.initial_state(2) for n in pair]) is None
    outs = sequence_module.run_many_with_resets(
        [a, b], x, [a.initial_state(2), b.initial_state(2)], torch.zeros(4, 2, dtype=torch.bool)
    )
    assert outs[0].out.shape == (4, 2, 2) and outs[1].out.shape == (4, 2, 1)
