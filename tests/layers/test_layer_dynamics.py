"""Layer dynamics: golden trajectories, sequence == step loop, batch independence."""

from __future__ import annotations

import math

import pytest
import torch

from snrl.functional import Surrogate
from snrl.layers import ALIFLayer, LayerOutput, LIFLayer, LILayer, SpyLIFLayer

LAYERS = [LIFLayer, ALIFLayer, SpyLIFLayer, LILayer]


def _lif_oracle(x, w_in, w_rec, b, alphas, thr, reset):
    """Plain-Python LIF over lists (the hand computation): x[t][f] -> (z[t][n], v[t][n])."""
    n = len(b)
    v, z = [0.0] * n, [0.0] * n
    zs, vs = [], []
    for xt in x:
        cur = [
            sum(xt[f] * w_in[f][j] for f in range(len(xt)))
            + sum(z[i] * w_rec[i][j] for i in range(n))
            + b[j]
            for j in range(n)
        ]
        if reset == "subtract":
            v = [alphas[j] * v[j] + cur[j] - thr * z[j] for j in range(n)]
        else:
            v = [alphas[j] * v[j] * (1 - z[j]) + cur[j] for j in range(n)]
        z = [1.0 if v[j] > thr else 0.0 for j in range(n)]
        zs.append(z)
        vs.append(v)
    return zs, vs


@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_lif_layer_golden_with_recurrence_and_per_neuron_tau(reset: str) -> None:
    tau = torch.tensor([20e-3, 10e-3, 5e-3], dtype=torch.float64)
    layer = LIFLayer(2, 3, tau_m=tau, threshold=0.8, reset=reset, seed=0).double()
    w_in = [[0.4, 0.0, 0.1], [0.0, 0.5, -0.2]]
    w_raw = [[5.0, 0.3, 0.6], [0.0, 0.0, 0.4], [-0.5, 0.2, 0.0]]  # diagonal is masked out
    w_rec = [[0.0 if i == j else w_raw[i][j] for j in range(3)] for i in range(3)]
    b = [0.05, 0.0, 0.1]
    with torch.no_grad():
        layer.weight_in.copy_(torch.tensor(w_in))
        layer.weight_rec.copy_(torch.tensor(w_raw))
        layer.bias.copy_(torch.tensor(b))
    x = [[1.0, 0.5], [1.0, 1.0], [0.5, 1.5], [1.0, 1.0], [0.0, 2.0], [1.0, 0.0]] * 3
    alphas = [math.exp(-1e-3 / t) for t in tau.tolist()]
    zs, vs = _lif_oracle(x, w_in, w_rec, b, alphas, 0.8, reset)
    assert 0 < sum(map(sum, zs)) < len(x) * 3  # some spikes, not saturated
    xs = torch.tensor(x, dtype=torch.float64).unsqueeze(1)
    with torch.no_grad():
        res = layer.run(xs, layer.initial_state(1))
    assert res.out[:, 0].tolist() == zs
    assert torch.allclose(res.v[:, 0], torch.tensor(vs, dtype=torch.float64), atol=1e-12)
    assert torch.equal(res.state.v, res.v[-1]) and torch.equal(res.state.z, res.out[-1])


def test_alif_adaptation_slows_firing_under_constant_input() -> None:
    kw = dict(use_recurrent_connection=False, seed=0)
    lif, alif = LIFLayer(1, 1, **kw), ALIFLayer(1, 1, tau_a=100e-3, beta=1.8, **kw)
    x = torch.full((400, 1, 1), 0.3)
    with torch.no_grad():
        for layer in (lif, alif):
            layer.weight_in.fill_(1.0)
        z_lif = lif(x, lif.initial_state(1))[0]
        res = alif.run(x, alif.initial_state(1))
    # First spike at the same step (a = 0 until then); later ALIF fires less.
    assert z_lif[:4].sum() == res.out[:4].sum() == 1
    assert res.out[200:].sum() < 0.8 * z_lif[200:].sum()
    assert res.state.a.item() > 0.05
    # LIF alone: spike period 4 steps under 0.3 (v crosses 1 at the 4th step)
    assert z_lif[:, 0, 0].nonzero()[0].item() == 3


def test_spylif_filters_a_current_pulse() -> None:
    layer = SpyLIFLayer(1, 1, use_recurrent_connection=False, tau_syn=5e-3, seed=0)
    with torch.no_grad():
        layer.weight_in.fill_(1.0)
        x = torch.zeros(10, 1, 1)
        x[0] = 0.1
        res = layer.run(x, layer.initial_state(1))
    a, asyn = math.exp(-1 / 20), math.exp(-1 / 5)
    i = v = 0.0
    for t in range(10):
        i = asyn * i + (0.1 if t == 0 else 0.0)
        v = a * v + i
        assert res.v[t].item() == pytest.approx(v, rel=1e-5)
    assert res.state.i.item() == pytest.approx(0.1 * asyn**9, rel=1e-5)
    # filtered: the membrane keeps rising after the pulse (a plain LIF would decay at once)
    assert res.v[3].item() > res.v[0].item()


def test_li_layer_integrates_and_outputs_its_membrane() -> None:
    layer = LILayer(2, 1, tau_m=10e-3, seed=0)
    assert layer.weight_rec is None
    with torch.no_grad():
        layer.weight_in.copy_(torch.tensor([[1.0], [2.0]]))
        layer.bias.fill_(0.5)
        x = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]], [[0.0, 0.0]]])
        out, state = layer(x, layer.initial_state(1))
    a = math.exp(-0.1)
    v1 = 1.5
    v2 = a * v1 + 2.5
    v3 = a * v2 + 0.5
    assert out[:, 0, 0].tolist() == pytest.approx([v1, v2, v3], rel=1e-6)
    assert state.v.item() == pytest.approx(v3, rel=1e-6)


def _make(cls, reset="subtract", **kw):
    extra = {} if cls is LILayer else {"reset": reset}
    if cls is LILayer:
        kw.setdefault("use_recurrent_connection", True)
    layer = cls(3, 5, seed=1, **extra, **kw)
    with torch.no_grad():
        layer.bias.fill_(0.3)
    return layer


@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("cls", LAYERS)
def test_sequence_equals_step_loop_outputs_state_and_gradients(cls, reset: str) -> None:
    g = torch.Generator().manual_seed(2)
    layer = _make(cls, reset, force_dale_law=True)
    x = torch.randn(25, 4, 3, generator=g) * 2
    s0 = layer.initial_state(4)
    params = [p for p in layer.parameters()]

    res = layer.run(x, s0)
    loss = (res.out * torch.arange(5.0)).sum() + (res.v**2).sum() * 0.01 + res.state.v.sum()
    g_seq = torch.autograd.grad(loss, params)

    outs, vs, s = [], [], s0
    for t in range(x.shape[0]):
        r = layer.run(x[t], s)
        outs.append(r.out)
        vs.append(r.v)
        s = r.state
    out2, v2 = torch.stack(outs), torch.stack(vs)
    loss2 = (out2 * torch.arange(5.0)).sum() + (v2**2).sum() * 0.01 + s.v.sum()
    g_loop = torch.autograd.grad(loss2, params)

    assert res.out.mean() > 0.02 or cls is LILayer  # spikes happen
    assert torch.equal(res.out, out2)
    assert torch.allclose(res.v, v2, atol=1e-5)
    for a, b in zip(res.state, s):
        assert torch.allclose(a, b, atol=1e-5)
    for ga, gb in zip(g_seq, g_loop):
        assert torch.allclose(ga, gb, rtol=1e-4, atol=1e-4 * (1 + gb.abs().max().item()))
    assert any(ga.abs().sum() > 0 for ga in g_seq)


@pytest.mark.parametrize("cls", LAYERS)
def test_no_grad_path_equals_grad_path(cls) -> None:
    layer = _make(cls)
    x = torch.randn(15, 3, 3, generator=torch.Generator().manual_seed(5)) * 2
    s0 = layer.initial_state(3)
    with torch.no_grad():
        a = layer.run(x, s0)
    b = layer.run(x, s0)
    assert torch.equal(a.out, b.out)
    assert torch.allclose(a.v, b.v, atol=1e-5)


@pytest.mark.parametrize("cls", LAYERS)
def test_batch_rows_are_independent(cls) -> None:
    layer = _make(cls)
    x = torch.randn(12, 4, 3, generator=torch.Generator().manual_seed(7)) * 2
    with torch.no_grad():
        full = layer.run(x, layer.initial_state(4))
        for b in range(4):
            one = layer.run(x[:, b : b + 1], layer.initial_state(1))
            if cls is LILayer:  # the output is the membrane: a BLAS may round a product of
                # one row differently from the same row among four (MKL on some CPUs does)
                torch.testing.assert_close(one.out[:, 0], full.out[:, b], rtol=1e-6, atol=1e-6)
            else:  # spikes: exactly the same
                assert torch.equal(one.out[:, 0], full.out[:, b])
            assert torch.allclose(one.v[:, 0], full.v[:, b], atol=1e-5)


@pytest.mark.parametrize("cls", [LIFLayer, ALIFLayer, SpyLIFLayer])
def test_surrogate_gradients_reach_input_weights_finite_nonzero(cls) -> None:
    layer = _make(cls)
    x = torch.randn(20, 2, 3, generator=torch.Generator().manual_seed(0)) * 2
    out, _ = layer(x, layer.initial_state(2))
    out.sum().backward()
    for p in (layer.weight_in, layer.weight_rec, layer.bias):
        assert torch.isfinite(p.grad).all()
        assert p.grad.abs().sum() > 0


def test_custom_snntorch_surrogate_is_used() -> None:
    from snntorch import surrogate

    layer = LIFLayer(1, 1, use_recurrent_connection=False, spike_grad=surrogate.atan(), seed=0)
    with torch.no_grad():
        layer.weight_in.fill_(1.0)
    x = torch.tensor([[[0.5]]], requires_grad=True)
    z, _ = layer(x, layer.initial_state(1))
    (g,) = torch.autograd.grad(z.sum(), x)
    # snntorch atan surrogate (alpha=2): d/dx = 1 / (1 + (pi (v - thr))^2), at v - thr = -0.5
    assert g.item() == pytest.approx(1 / (1 + (math.pi * 0.5) ** 2), rel=1e-5)


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_lif_training_path_with_and_without_the_fused_sequence(monkeypatch, fused, reset) -> None:
    import snrl.layers.lif as lif_module

    calls = []
    real = lif_module._lif_sequence
    assert real is not None  # snrl.functional.lif_sequence exists in this checkout

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(lif_module, "_lif_sequence", spy if fused else None)
    layer = _make(LIFLayer, reset, force_dale_law=True)
    x = torch.randn(30, 3, 3, generator=torch.Generator().manual_seed(4)) * 2
    s0 = layer.initial_state(3)
    res = layer.run(x, s0)
    assert len(calls) == (1 if fused else 0)
    grads = torch.autograd.grad((res.out.sum() + res.v.pow(2).sum() * 0.01), [layer.weight_rec])
    monkeypatch.setattr(lif_module, "_lif_sequence", None)
    outs, vs, s = [], [], s0
    for t in range(30):
        r = layer.run(x[t], s)
        outs.append(r.out)
        vs.append(r.v)
        s = r.state
    ref = torch.autograd.grad(
        torch.stack(outs).sum() + torch.stack(vs).pow(2).sum() * 0.01, [layer.weight_rec]
    )
    assert torch.equal(res.out, torch.stack(outs))
    assert torch.allclose(grads[0], ref[0], rtol=1e-4, atol=1e-4 * (1 + ref[0].abs().max().item()))


@pytest.mark.parametrize("cls", LAYERS)
@pytest.mark.parametrize("shape", [(2, 3), (6, 2, 3)])
def test_layer_output_unpacks_like_the_recurrent_protocol(cls, shape) -> None:
    # out, state first (as `out, state = net(x, state)` and BackboneOutput), then membranes,
    # then the model's other state variables after each step
    assert LayerOutput._fields == ("out", "state", "v", "traces")
    layer = _make(cls)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(3)) * 2
    s0 = layer.initial_state(shape[-2])
    out, state, v, traces = layer.run(x, s0)
    for name, trace in traces.items():
        last = trace[-1] if len(shape) == 3 else trace
        assert trace.shape == out.shape and torch.equal(getattr(state, name), last)
    out2, state2 = layer(x, s0)
    assert torch.equal(out, out2) and type(state) is type(state2) is layer.state_type
    assert v.shape == out.shape and torch.equal(state.v, v[-1] if len(shape) == 3 else v)


@pytest.mark.parametrize("cls", [LIFLayer, ALIFLayer, SpyLIFLayer])
def test_surrogate_description_gives_its_closed_form_gradient(cls) -> None:
    # one input straight onto one neuron (no recurrence): dz/dx = s(v - thr) * w_in, and the
    # fused LIF path (a sequence with grad on) must give the same as a single step.
    layer = cls(1, 1, use_recurrent_connection=False, spike_grad=Surrogate("atan", 3.0), seed=0)
    with torch.no_grad():
        layer.weight_in.fill_(1.0)
    for shape in [(1, 1), (1, 1, 1)]:
        x = torch.full(shape, 0.5, requires_grad=True)
        z, _ = layer(x, layer.initial_state(1))
        (g,) = torch.autograd.grad(z.sum(), x)
        # atan, slope a = 3: s(x) = (a / 2) / (1 + (pi a x / 2)^2) at x = 0.5 - 1
        assert g.item() == pytest.approx(1.5 / (1 + (math.pi * 3 * -0.5 / 2) ** 2), rel=1e-6)
