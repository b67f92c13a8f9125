"""e-prop's oracles, in float64, for LIF and ALIF layers with Dale's law:

1. with the full learning signal (the true dE/dz_t from autograd, every later path) the
   factorized gradient sum_t L_t e_t equals BPTT's;
2. the hand-coded traces equal autograd run with the spikes held fixed in the recurrent
   current and the reset (the "e-prop = truncated BPTT" identity), also with a leaky readout
   (F_kappa filtering, forward and backward);
3. without recurrence, e-prop from the readout's signal equals BPTT for the input weights;
4. Dale's signs stay exact after many e-prop updates.
"""

from __future__ import annotations

import pytest
import torch

from snrl.functional.eprop import (
    eligibility_step,
    filter_backward,
    initial_eligibility,
    reset_rows,
)
from snrl.layers import ALIFLayer, LIFLayer
from snrl.learning import eprop_layer_gradients
from snrl.learning.rules import apply_layer_gradients

T, B, F, N, K = 14, 3, 4, 6, 2
CASES = [
    ("lif", "subtract"),
    ("lif", "zero"),
    ("alif", "subtract"),
    ("alif", "zero"),
]


def _layer(kind: str, reset: str, recurrent: bool = True, seed: int = 0, tau_m=8e-3):
    cls = LIFLayer if kind == "lif" else ALIFLayer
    extra = {"tau_a": 30e-3, "beta": 0.7} if kind == "alif" else {}
    layer = cls(
        F,
        N,
        dt=1e-3,
        tau_m=tau_m,
        threshold=0.6,
        reset=reset,
        force_dale_law=True,
        recurrent_sign=0.34,
        use_recurrent_connection=recurrent,
        seed=seed,
        **extra,
    ).double()
    with torch.no_grad():
        layer.weight_in.mul_(3.0)
        layer.bias.add_(0.1)
        if layer.weight_rec is not None:
            layer.weight_rec.mul_(2.0)
    return layer


def _inputs(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(T, B, F, generator=g, dtype=torch.float64)
    return x


def _state(layer, seed: int = 2):
    g = torch.Generator().manual_seed(seed)
    s = layer.initial_state(B)
    fields = {f: getattr(s, f) for f in s._fields}
    fields["v"] = 0.5 * torch.rand(B, N, generator=g, dtype=torch.float64)
    fields["z"] = (torch.rand(B, N, generator=g) > 0.5).double()
    if "a" in fields:
        fields["a"] = 0.3 * torch.rand(B, N, generator=g, dtype=torch.float64)
    return type(s)(**fields)


def _reference(layer, w_in, w_rec, bias, x, s0, mode: str, reset_public: bool = True):
    """snrl's LIF/ALIF dynamics written out, with the spikes split into their uses.

    mode "clone": the public uses (recurrent current, readout, and the reset when
    ``reset_public``) read a clone of z_t whose .grad is the total dE/dz_t; "detach": they
    read z_t held fixed. The neuron's adaptation always reads z_t itself (its own state).
    Returns (spikes as the readout sees them, the clones).
    """
    adaptive = isinstance(layer, ALIFLayer)
    alpha = layer.decay("tau_m")
    rho = layer.decay("tau_a") if adaptive else None
    beta = layer.beta if adaptive else 0.0
    thr0, fn = layer.threshold, layer.spike_grad
    v, z_own, a = s0.v, s0.z, (s0.a if adaptive else None)
    z_pub = z_own.clone()
    outs, clones = [], []
    for t in range(x.shape[0]):
        z_reset = z_pub if reset_public else z_own
        cur = x[t] @ w_in + bias + z_pub @ w_rec
        if adaptive:
            a = rho * a + (1 - rho) * z_own
            thr = thr0 + beta * a
        else:
            thr = thr0
        if layer.reset == "subtract":
            v = alpha * v + cur - thr * z_reset
        else:
            v = alpha * v * (1 - z_reset) + cur
        z_own = fn(v - thr).double()
        if mode == "clone":
            z_pub = z_own.clone()
            z_pub.retain_grad()
            clones.append(z_pub)
        else:
            z_pub = z_own.detach()
        outs.append(z_pub if mode == "clone" else z_own)
    return torch.stack(outs), clones


def _effective(layer):
    w_in = layer.forward_weights.detach().clone().requires_grad_(True)
    w_rec = layer.recurrent_weights.detach().clone().requires_grad_(True)
    bias = layer.bias.detach().clone().requires_grad_(True)
    return w_in, w_rec, bias


def _readout_loss(z, w_out, kappa, target):
    """A leaky-integrator readout y_t = kappa y_{t-1} + z_t W_out and a squared error."""
    y = torch.zeros(z.shape[1], w_out.shape[1], dtype=z.dtype)
    loss = 0.0
    for t in range(z.shape[0]):
        y = kappa * y + z[t] @ w_out
        loss = loss + 0.5 * ((y - target[t]) ** 2).sum()
    return loss


def _readout(seed: int = 3):
    g = torch.Generator().manual_seed(seed)
    w_out = torch.randn(N, K, generator=g, dtype=torch.float64)
    target = torch.randn(T, B, K, generator=g, dtype=torch.float64)
    return w_out, target, 0.7


@pytest.mark.parametrize("kind,reset", CASES)
def test_reference_reproduces_the_layer(kind, reset):
    layer = _layer(kind, reset)
    x, s0 = _inputs(), _state(layer)
    with torch.no_grad():
        res = layer.run(x, s0)
    z, _ = _reference(layer, *_effective(layer), x, s0, "detach")
    assert torch.equal(z.detach(), res.out)
    assert 0.05 < float(res.out.mean()) < 0.8  # the test exercises spikes and silences


@pytest.mark.parametrize("kind,reset", CASES)
@pytest.mark.parametrize("through_reset", [False, True])
def test_full_learning_signal_gives_bptt(kind, reset, through_reset):
    """Oracle 1: sum_t (dE/dz_t) e_t == BPTT through snrl's own layer (raw Dale params)."""
    layer = _layer(kind, reset)
    x, s0 = _inputs(), _state(layer)
    w_out, target, kappa = _readout()
    res = layer.run(x, s0)  # BPTT through snrl's layer, Dale parametrization included
    loss = _readout_loss(res.out, w_out, kappa, target)
    params = [layer.weight_in, layer.weight_rec, layer.bias]
    bptt = torch.autograd.grad(loss, params)
    # the true learning signal: total dE/dz_t of the public spikes, all later paths
    z, clones = _reference(
        layer, *_effective(layer), x, s0, "clone", reset_public=not through_reset
    )
    _readout_loss(z, w_out, kappa, target).backward()
    signal = torch.stack([c.grad for c in clones])
    for p in params:
        p.grad = None
    grads = eprop_layer_gradients(layer, x, s0, signal, through_reset=through_reset)
    apply_layer_gradients(layer, *grads)
    for p, g in zip(params, bptt):
        assert torch.allclose(p.grad, g, rtol=0, atol=1e-12 * max(1.0, float(g.abs().max())))
    assert float(bptt[1].abs().max()) > 1e-3  # a nontrivial gradient


@pytest.mark.parametrize("kind,reset", CASES)
@pytest.mark.parametrize("per_neuron_tau", [False, True])
def test_traces_equal_truncated_autograd(kind, reset, per_neuron_tau):
    """Oracle 2: hand-coded e-prop == autograd with the spikes fixed in the recurrent current
    and the reset, for an arbitrary per-step learning signal (one membrane decay, where a
    LIF layer's traces factorize, and one per neuron, where they do not)."""
    tau = torch.linspace(5e-3, 12e-3, N) if per_neuron_tau else 8e-3
    layer = _layer(kind, reset, tau_m=tau)
    x, s0 = _inputs(), _state(layer)
    g = torch.Generator().manual_seed(5)
    signal = torch.randn(T, B, N, generator=g, dtype=torch.float64)
    w_in, w_rec, bias = _effective(layer)
    z, _ = _reference(layer, w_in, w_rec, bias, x, s0, "detach")
    want = torch.autograd.grad((z * signal).sum(), [w_in, w_rec, bias])
    got = eprop_layer_gradients(layer, x, s0, signal)
    for a, b in zip(got, want):
        assert torch.allclose(a, b, rtol=0, atol=1e-12)
    assert float(want[1].abs().max()) > 1e-3


@pytest.mark.parametrize("kind,reset", CASES)
def test_readout_filter_forward_equals_backward(kind, reset):
    """Oracle 2 with a leaky readout: the online sum_t L_t F_kappa(e)_t (L_t the readout's
    error at t through W_out) == filter_backward's signal times e_t == autograd with the
    recurrent and reset spikes fixed."""
    layer = _layer(kind, reset)
    x, s0 = _inputs(), _state(layer)
    w_out, target, kappa = _readout()
    w_in, w_rec, bias = _effective(layer)
    z, _ = _reference(layer, w_in, w_rec, bias, x, s0, "detach")
    zz = z.detach()
    loss = _readout_loss(z, w_out, kappa, target)
    want = torch.autograd.grad(loss, [w_in, w_rec, bias])
    # per-step readout error dE/dy_t
    y, err = torch.zeros(B, K, dtype=torch.float64), []
    for t in range(T):
        y = kappa * y + zz[t] @ w_out
        err.append(y - target[t])
    err = torch.stack(err)
    back = filter_backward(err, kappa) @ w_out.T
    got = eprop_layer_gradients(layer, x, s0, back)
    # online: F_kappa-filtered traces times the error of the same step
    adaptive = isinstance(layer, ALIFLayer)
    with torch.no_grad():
        res = layer.run(x, s0)
    thr = layer.threshold + (layer.beta * res.traces["a"] if adaptive else 0.0)
    psi = layer.spike_grad.derivative(res.v - thr)
    el = initial_eligibility(B, F + N + 1, N, adaptive=adaptive, filtered=True, dtype=x.dtype)
    online = torch.zeros(F + N + 1, N, dtype=x.dtype)
    z_prev = s0.z
    for t in range(T):
        pre = torch.cat([x[t], z_prev, torch.ones(B, 1, dtype=x.dtype)], 1)
        el = eligibility_step(
            el,
            pre,
            psi[t],
            layer.decay("tau_m"),
            rho=layer.decay("tau_a") if adaptive else None,
            beta=layer.beta if adaptive else 0.0,
            z_prev=z_prev,
            reset=reset,
            kappa=kappa,
        )
        online += (el.fe * (err[t] @ w_out.T)[:, None, :]).sum(0)
        z_prev = res.out[t]
    for a, w, o in zip(got, want, (online[:F], online[F : F + N], online[-1])):
        assert torch.allclose(a, w, rtol=0, atol=1e-11)
        assert torch.allclose(o, w, rtol=0, atol=1e-11)


@pytest.mark.parametrize("kind,reset", CASES)
def test_no_recurrence_eprop_is_bptt_for_input_weights(kind, reset):
    """Oracle 3: without recurrent weights, the readout's learning signal (fed back through
    its leak) with the reset counted in the traces gives BPTT's input-weight gradient."""
    layer = _layer(kind, reset, recurrent=False)
    x, s0 = _inputs(), _state(layer)
    w_out, target, kappa = _readout()
    res = layer.run(x, s0)
    loss = _readout_loss(res.out, w_out, kappa, target)
    bptt = torch.autograd.grad(loss, [layer.weight_in, layer.bias])
    zz = res.out.detach()
    y, err = torch.zeros(B, K, dtype=torch.float64), []
    for t in range(T):
        y = kappa * y + zz[t] @ w_out
        err.append(y - target[t])
    signal = filter_backward(torch.stack(err), kappa) @ w_out.T
    g_in, g_rec, g_b = eprop_layer_gradients(layer, x, s0, signal, through_reset=True)
    assert g_rec is None
    assert torch.allclose(g_in, bptt[0], rtol=0, atol=1e-11)
    assert torch.allclose(g_b, bptt[1], rtol=0, atol=1e-11)


def test_episode_starts_cut_the_traces():
    """Rows that start an episode mid-sequence: e-prop over the whole sequence equals the
    sum of e-prop over the two pieces (the second from the reset state)."""
    layer = _layer("alif", "subtract")
    x, s0 = _inputs(), _state(layer)
    g = torch.Generator().manual_seed(9)
    signal = torch.randn(T, B, N, generator=g, dtype=torch.float64)
    starts = torch.zeros(T, B, dtype=torch.bool)
    starts[6] = True
    whole = eprop_layer_gradients(layer, x, s0, signal, starts=starts)
    with torch.no_grad():
        mid = layer.run(x[:6], s0).state
    first = eprop_layer_gradients(layer, x[:6], s0, signal[:6])
    fresh = type(mid)(*(torch.zeros_like(f) for f in mid))
    second = eprop_layer_gradients(layer, x[6:], fresh, signal[6:])
    for w, a, b in zip(whole, first, second):
        assert torch.allclose(w, a + b, rtol=0, atol=1e-12)


def test_reset_rows_zeroes_only_those_rows():
    el = initial_eligibility(2, 3, 4, adaptive=True, filtered=True, dtype=torch.float64)
    el = type(el)(*(t + 1.0 for t in el))
    out = reset_rows(el, torch.tensor([True, False]))
    for t in out:
        assert float(t[0].abs().sum()) == 0.0 and bool((t[1] == 1.0).all())


@pytest.mark.parametrize("kind", ["lif", "alif"])
def test_dale_signs_exact_after_many_eprop_updates(kind):
    """Oracle 4: 200 Adam steps on e-prop gradients (with weight decay) leave every nonzero
    recurrent entry with its row's sign and the diagonal zero."""
    layer = _layer(kind, "subtract")
    opt = torch.optim.AdamW(layer.parameters(), lr=0.05, weight_decay=0.1)
    x, s0 = _inputs(), _state(layer)
    g = torch.Generator().manual_seed(11)
    for _ in range(200):
        signal = torch.randn(T, B, N, generator=g, dtype=torch.float64)
        opt.zero_grad()
        apply_layer_gradients(layer, *eprop_layer_gradients(layer, x, s0, signal))
        opt.step()
    w = layer.recurrent_weights.detach()
    sign = layer.recurrent_sign.double()
    assert bool((w * sign[:, None] >= 0).all())
    assert bool((torch.diagonal(w) == 0).all())
    assert int((w != 0).sum()) > N * (N - 1) // 2  # the weights did not all collapse to 0
