"""Online e-prop (snrl.learning.eprop_online_gradients, the rule A2C uses), float64, LIF and
ALIF with Dale 80/20-style signs, both resets, episode starts inside the sequence:

1. from all-zero traces, the forward-filtered gradient ``sum_t L_t F_kappa(e)_t`` of one
   window equals the offline :func:`eprop_layer_gradients` with the same readout error fed
   back through the readout's later steps (:func:`filter_backward`);
2. the online identity: two consecutive windows, the traces carried from the first to the
   second, give the gradient (the sum) and the final traces of one window over both;
3. a local signal (on the spikes themselves) multiplies the unfiltered trace.
"""

from __future__ import annotations

import pytest
import torch

from snrl.functional.eprop import filter_backward
from snrl.layers import ALIFLayer, LIFLayer
from snrl.learning import eprop_layer_gradients, eprop_online_gradients

T, B, F, N, K = 16, 3, 4, 6, 2
CASES = [("lif", "subtract"), ("lif", "zero"), ("alif", "subtract"), ("alif", "zero")]
KAPPA = 0.8


def _layer(kind: str, reset: str):
    cls = LIFLayer if kind == "lif" else ALIFLayer
    extra = {"tau_a": 30e-3, "beta": 0.7} if kind == "alif" else {}
    layer = cls(
        F,
        N,
        dt=1e-3,
        tau_m=8e-3,
        threshold=0.6,
        reset=reset,
        force_dale_law=True,
        recurrent_sign=0.34,
        seed=0,
        **extra,
    ).double()
    with torch.no_grad():
        layer.weight_in.mul_(3.0)
        layer.bias.add_(0.1)
        layer.weight_rec.mul_(2.0)
    return layer


def _data(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(T, B, F, generator=g, dtype=torch.float64)
    err = torch.randn(T, B, K, generator=g, dtype=torch.float64)  # the readout's error dE/dy_t
    fb = torch.randn(N, K, generator=g, dtype=torch.float64)  # B
    starts = torch.zeros(T, B, dtype=torch.bool)
    starts[5, 0] = starts[11, 2] = starts[7, 1] = True
    return x, err, fb, starts


def _spikes_happen(layer, x, s0, starts):
    out = layer.run(x, s0, starts=starts).out
    assert 0.05 < float(out.detach().mean()) < 0.95  # the traces are exercised, not all zero


@pytest.mark.parametrize("kind,reset", CASES)
def test_one_window_from_zero_equals_offline(kind, reset):
    layer = _layer(kind, reset)
    x, err, fb, starts = _data()
    s0 = layer.initial_state(B)
    _spikes_happen(layer, x, s0, starts)
    (g_in, g_rec, g_b), el = eprop_online_gradients(
        layer, x, s0, err @ fb.T, None, kappa=KAPPA, starts=starts
    )
    back = filter_backward(err, KAPPA, starts) @ fb.T
    w_in, w_rec, w_b = eprop_layer_gradients(layer, x, s0, back, starts=starts)
    assert float(g_rec.abs().max()) > 0
    for got, want in ((g_in, w_in), (g_rec, w_rec), (g_b, w_b)):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    assert el.fe is not None and el.eps_v.shape == (B, F + N + 1, N)


@pytest.mark.parametrize("kind,reset", CASES)
@pytest.mark.parametrize("cut", [1, 6, 11])
def test_carried_traces_equal_one_window_over_both(kind, reset, cut):
    layer = _layer(kind, reset)
    x, err, fb, starts = _data(seed=2)
    signal = err @ fb.T
    s0 = layer.initial_state(B)
    whole, el_whole = eprop_online_gradients(layer, x, s0, signal, None, kappa=KAPPA, starts=starts)
    first, el = eprop_online_gradients(
        layer, x[:cut], s0, signal[:cut], None, kappa=KAPPA, starts=starts[:cut]
    )
    s_cut = layer.run(x[:cut], s0, starts=starts[:cut]).state  # the hidden state, carried too
    second, el2 = eprop_online_gradients(
        layer, x[cut:], s_cut, signal[cut:], el, kappa=KAPPA, starts=starts[cut:]
    )
    for a, b, w in zip(first, second, whole):
        torch.testing.assert_close(a + b, w, rtol=1e-10, atol=1e-12)
    for a, w in zip(el2, el_whole):
        if w is not None:
            torch.testing.assert_close(a, w, rtol=1e-10, atol=1e-12)
    # not carrying the traces (a fresh start at the cut) gives another gradient
    restarted, _ = eprop_online_gradients(
        layer, x[cut:], s_cut, signal[cut:], None, kappa=KAPPA, starts=starts[cut:]
    )
    assert not all(torch.allclose(a + b, w) for a, b, w in zip(first, restarted, whole))


def test_local_signal_uses_the_unfiltered_trace():
    layer = _layer("lif", "subtract")
    x, err, fb, starts = _data(seed=3)
    s0 = layer.initial_state(B)
    local = torch.randn(T, B, N, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    zero = torch.zeros(T, B, N, dtype=torch.float64)
    got, _ = eprop_online_gradients(
        layer, x, s0, zero, None, kappa=KAPPA, local_signal=local, starts=starts
    )
    want = eprop_layer_gradients(layer, x, s0, local, starts=starts)
    for a, w in zip(got, want):
        torch.testing.assert_close(a, w, rtol=1e-10, atol=1e-12)


def test_carried_traces_of_another_shape_are_refused():
    layer = _layer("lif", "subtract")
    x, err, fb, starts = _data()
    _, el = eprop_online_gradients(layer, x, layer.initial_state(B), err @ fb.T, None, kappa=KAPPA)
    from snrl.errors import UserError

    with pytest.raises(UserError, match="do not fit"):
        eprop_online_gradients(
            layer, x[:, :2], layer.initial_state(2), (err @ fb.T)[:, :2], el, kappa=KAPPA
        )
