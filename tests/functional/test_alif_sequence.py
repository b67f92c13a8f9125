"""alif_sequence against hand-computed trajectories, autograd through the alif_step loop and
finite differences; ALIFLayer's sequences against its own steps."""

from __future__ import annotations

from typing import NamedTuple

import pytest
import snntorch.surrogate as surrogate
import torch
from torch import Tensor

import snrl.layers.alif as alif_module
from snrl.errors import UserError
from snrl.functional import _native
from snrl.functional.alif_sequence import _ALIFSequence, alif_sequence
from snrl.functional.neurons import RESETS
from snrl.functional.surrogate import Surrogate
from snrl.layers import ALIFLayer
from tests.functional.test_lif_sequence import (
    SNN_FAST_SIGMOID,
    SPIKE_FN_IDS,
    SPIKE_FNS,
    _ExactFastSigmoid,
    _starts,
    _weights,
)

F64 = torch.float64


class _State(NamedTuple):
    v: Tensor
    z: Tensor
    a: Tensor


def _inputs(t, b, n, *, seed, rec=True):
    g = torch.Generator().manual_seed(seed)
    u = (torch.rand(t, b, n, generator=g, dtype=F64) * 1.6).requires_grad_()
    w = (torch.randn(n, n, generator=g, dtype=F64) * 0.4).requires_grad_() if rec else None
    v0 = (torch.rand(b, n, generator=g, dtype=F64) * 1.5).requires_grad_()
    z0 = (torch.rand(b, n, generator=g, dtype=F64) > 0.5).to(F64).requires_grad_()
    a0 = (torch.rand(b, n, generator=g, dtype=F64) * 0.6).requires_grad_()
    alpha = (0.5 + 0.4 * torch.rand(n, generator=g, dtype=F64)).requires_grad_()
    rho = (0.6 + 0.35 * torch.rand(n, generator=g, dtype=F64)).requires_grad_()
    return u, w, v0, z0, a0, alpha, rho


@pytest.mark.parametrize(
    ("reset", "v", "z", "a"),
    [
        ("subtract", [1.2, -0.1, 0.85, 1.425], [1, 0, 0, 1], [0.0, 0.5, 0.25, 0.125]),
        ("zero", [1.2, 0.8, 1.3, 1.0], [1, 0, 1, 0], [0.0, 0.5, 0.25, 0.625]),
    ],
)
def test_golden_trajectory_by_hand(reset, v, z, a):
    # alpha = rho = 0.5, threshold 1, beta 1, u = [1.2, 0.8, 0.9, 1.0], from rest.
    # t0: a = 0, thr 1, v = 1.2 spikes. t1: a = 0.5, thr 1.5; subtract: v = 0.6 + 0.8 - 1.5
    # = -0.1; zero: v = 0.8 (no spike either way). subtract: t2 a = 0.25, v = -0.05 + 0.9 =
    # 0.85 < 1.25; t3 a = 0.125, v = 0.425 + 1 = 1.425 > 1.125 spikes. zero: t2 v = 0.4 + 0.9
    # = 1.3 > 1.25 spikes; t3 a = 0.125 + 0.5 = 0.625, v = 0 + 1.0 < 1.625.
    u = torch.tensor([1.2, 0.8, 0.9, 1.0], dtype=F64).view(4, 1, 1).requires_grad_()
    zeros = torch.zeros(1, 1, dtype=F64)
    half = torch.tensor([0.5], dtype=F64)
    out = alif_sequence(
        u, None, _State(zeros, zeros, zeros), half, half, 1.0, 1.0, reset, Surrogate("atan")
    )
    for got, want in zip(out, (z, v, a), strict=True):
        torch.testing.assert_close(got.view(-1), torch.tensor(want, dtype=F64))


@pytest.mark.parametrize("spike_fn", SPIKE_FNS, ids=SPIKE_FN_IDS)
@pytest.mark.parametrize("rec", ["none", "free", "dale"])
@pytest.mark.parametrize("reset", RESETS)
def test_outputs_and_all_gradients_equal_the_step_loop_float64(reset, rec, spike_fn):
    # The fused path against autograd through alif_step in float64: all three outputs and
    # every gradient (input current, raw recurrent weights through the Dale construction,
    # the initial v, z and a, both decays), with gradients arriving at z, v and a.
    u, _, v0, z0, a0, alpha, rho = _inputs(9, 3, 5, rec=False, seed=1)
    leaf, build = _weights(rec, 5, seed=11)
    leaves = [x for x in (u, leaf, v0, z0, a0, alpha, rho) if x is not None]
    gz, gv, ga = torch.randn(3, 9, 3, 5, generator=torch.Generator().manual_seed(2), dtype=F64)
    runs = []
    for backward in ("autograd", "fused"):
        z, v, a = alif_sequence(
            u,
            build(),
            _State(v0, z0, a0),
            alpha,
            rho,
            0.8,
            1.7,
            reset,
            spike_fn,
            backward=backward,
        )
        grads = torch.autograd.grad((z * gz + v * gv + a * ga).sum(), leaves)
        runs.append((z, v, a, grads))
    (z_ref, v_ref, a_ref, want), (z, v, a, got) = runs
    assert 0 < z_ref.sum() < z_ref.numel()  # spikes and silences: reset terms are exercised
    assert bool((a_ref.diff(dim=0) > 0).any())  # the threshold adapts upward somewhere
    tol = 1e-6 if spike_fn is SNN_FAST_SIGMOID else 1e-10  # snntorch's float32 spikes
    torch.testing.assert_close(z, z_ref, rtol=0, atol=0)
    torch.testing.assert_close(v, v_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(a, a_ref, rtol=1e-12, atol=1e-12)
    for g_got, g_want in zip(got, want, strict=True):
        assert g_want.abs().sum() > 0
        torch.testing.assert_close(g_got, g_want, rtol=tol, atol=tol)


def _fresh(kind, t, b, n, dtype, seed):
    """(fresh state, its leaves): none; a learned initial membrane (N,) with one fresh state
    for every step; or recorded states per step (no gradient) with nonzero z and a."""
    g = torch.Generator().manual_seed(seed)
    if kind == "per_neuron":
        fv = (torch.rand(n, generator=g, dtype=dtype) * 1.5).requires_grad_()
        return _State(fv, torch.zeros(()), torch.zeros(())), [fv]
    if kind == "per_step":
        return _State(
            torch.randn(t, b, n, generator=g, dtype=dtype),
            (torch.rand(t, b, n, generator=g) > 0.5).to(dtype),
            torch.rand(t, b, n, generator=g, dtype=dtype),
        ), []
    return None, []


@pytest.mark.parametrize("rec", [True, False])
@pytest.mark.parametrize("reset", RESETS)
@pytest.mark.parametrize("fresh_shape", ["none", "per_neuron", "per_step"])
def test_resets_inside_the_sequence_match_autograd(reset, rec, fresh_shape):
    t, b, n = 12, 4, 6
    u, w, v0, z0, a0, alpha, rho = _inputs(t, b, n, seed=21, rec=rec)
    starts = _starts(t, b, 3)
    fresh, extra = _fresh(fresh_shape, t, b, n, F64, seed=5)
    leaves = [x for x in (u, w, v0, z0, a0, alpha, rho) if x is not None] + extra
    outs = []
    for backward in ("autograd", "fused"):
        z, v, a = alif_sequence(
            u,
            w,
            _State(v0, z0, a0),
            alpha,
            rho,
            0.9,
            1.2,
            reset,
            _ExactFastSigmoid.apply,
            starts=starts,
            fresh=fresh,
            backward=backward,
        )
        gz, gv, ga = torch.randn(3, t, b, n, generator=torch.Generator().manual_seed(8), dtype=F64)
        outs.append((z, v, a, *torch.autograd.grad((z * gz + v * gv + a * ga).sum(), leaves)))
    ref, fast = outs
    assert bool(ref[0].any()) and not bool(ref[0].all())
    for want, got in zip(ref, fast, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_a_reset_cuts_the_gradient_to_the_steps_before():
    # A row that starts an episode at step 3: nothing of steps >= 3 reaches steps 0-2 or the
    # initial state of that row; the other row's initial state does receive a gradient.
    u, w, v0, z0, a0, alpha, rho = _inputs(6, 2, 4, seed=4)
    starts = torch.zeros(6, 2, dtype=torch.bool)
    starts[3, 0] = True
    z, v, a = alif_sequence(
        u,
        w,
        _State(v0, z0, a0),
        alpha,
        rho,
        0.9,
        1.5,
        "subtract",
        Surrogate("atan"),
        starts=starts,
    )
    du, dv0, da0 = torch.autograd.grad(v[3:].sum() + z[3:].sum(), [u, v0, a0])
    assert not du[:3, 0].any() and not dv0[0].any() and not da0[0].any()
    assert du[:3, 1].abs().sum() > 0 and da0[1].abs().sum() > 0


@pytest.mark.parametrize("reset", RESETS)
@pytest.mark.parametrize("resets", [False, True])
def test_gradcheck_with_smooth_spike_fn(reset, resets):
    # A smooth spike_fn in the forward too (heaviside=False) makes the whole map
    # differentiable, so finite differences check the hand-written backward, every input
    # at once (the decays and the initial adaptation included; with resets inside the
    # sequence the fresh membranes too, the fresh spikes and adaptation nonzero).
    u, w, v0, z0, a0, alpha, rho = _inputs(5, 2, 3, seed=6)
    starts = torch.tensor(
        [[False, True], [False, False], [True, False], [True, True], [False, True]]
    )
    fv = torch.rand(5, 2, 3, dtype=F64, generator=torch.Generator().manual_seed(2))
    fv.requires_grad_(resets)
    fz, fa = torch.full((5, 2, 3), 0.4, dtype=F64), torch.full((5, 2, 3), 0.3, dtype=F64)

    def run(u, w, v0, z0, a0, alpha, rho, fv):
        extra = (starts, fv, fz, fa) if resets else (None, None, None, None)
        return _ALIFSequence.apply(
            u,
            w,
            v0,
            z0,
            a0,
            alpha,
            rho,
            0.7,
            0.9,
            reset,
            lambda x: torch.sigmoid(3 * x),
            False,
            *extra,
        )

    assert torch.autograd.gradcheck(run, (u, w, v0, z0, a0, alpha, rho, fv))


def test_scalar_decays_get_scalar_gradients():
    u, w, v0, z0, a0, _, _ = _inputs(5, 2, 3, seed=8)
    alpha = torch.tensor(0.8, dtype=F64, requires_grad=True)
    rho = torch.tensor(0.9, dtype=F64, requires_grad=True)
    grads = []
    for backward in ("autograd", "fused"):
        z, v, a = alif_sequence(
            u,
            w,
            _State(v0, z0, a0),
            alpha,
            rho,
            1.0,
            1.0,
            "zero",
            _ExactFastSigmoid.apply,
            backward=backward,
        )
        grads.append(torch.autograd.grad(v.sum() + z.sum() + a.sum(), [alpha, rho]))
    for want, got in zip(*grads, strict=True):
        assert got.shape == ()
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_empty_sequence_and_no_grad():
    u = torch.zeros(0, 2, 3, requires_grad=True)
    s = _State(torch.ones(2, 3, requires_grad=True), torch.zeros(2, 3), torch.zeros(2, 3))
    alpha, rho = torch.full((3,), 0.9), torch.full((3,), 0.95)
    z, v, a = alif_sequence(u, None, s, alpha, rho, 1.0, 1.0, "subtract", Surrogate("atan"))
    assert z.shape == v.shape == a.shape == (0, 2, 3)
    (dv0,) = torch.autograd.grad(v.sum() + z.sum(), [s.v])
    assert not dv0.any()
    with torch.no_grad():
        x = torch.rand(4, 2, 3) * 3
        z, v, a = alif_sequence(x, None, s, alpha, rho, 1.0, 1.0, "zero", Surrogate("atan"))
    assert not z.requires_grad and z.sum() > 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"reset": "hold"}, "unknown reset"),
        ({"backward": "magic"}, "unknown backward"),
        ({"beta": -0.5}, "beta must be a number >= 0"),
        ({"u": torch.zeros(3, 4)}, "u must be"),
        ({"rho": torch.full((5,), 0.9)}, "rho has shape"),
        ({"w_rec": torch.zeros(2, 2)}, "w_rec has shape"),
    ],
)
def test_bad_input_raises_user_error(kwargs, match):
    args = {
        "u": torch.zeros(3, 2, 4),
        "w_rec": None,
        "state": _State(*torch.zeros(3, 2, 4)),
        "alpha": torch.full((4,), 0.9),
        "rho": torch.full((4,), 0.9),
        "threshold": 1.0,
        "beta": 1.0,
        "reset": "subtract",
        "spike_fn": Surrogate("atan"),
    }
    backward = kwargs.pop("backward", "fused")
    args.update(kwargs)
    with pytest.raises(UserError, match=match):
        alif_sequence(**args, backward=backward)


@pytest.mark.parametrize("reset", RESETS)
def test_alif_layer_sequence_matches_its_own_step_loop(reset, monkeypatch):
    # ALIFLayer routes (T, B, F) inputs with grad on through alif_sequence (with episode
    # starts inside), and the same layer without it runs its autograd step loop: the same
    # spikes, adaptation traces and parameter gradients (learned time constants included).
    layer = ALIFLayer(
        3,
        6,
        reset=reset,
        force_dale_law=True,
        learn_tau=True,
        seed=0,
        dt=1e-3,
        tau_m=5e-3,
        tau_a=0.05,
        beta=2.0,
        spike_grad=surrogate.fast_sigmoid(slope=25),
    )
    g = torch.Generator().manual_seed(11)
    x = torch.rand(10, 4, 3, generator=g) * 4.0
    starts = torch.zeros(10, 4, dtype=torch.bool)
    starts[4, 1] = starts[7, 3] = True
    params = [p for p in layer.parameters() if p.requires_grad]
    target = torch.randn(10, 4, 6, generator=g)
    runs = []
    for fused in (True, False):
        monkeypatch.setattr(
            alif_module, "_alif_sequence", alif_module.alif_sequence if fused else None
        )
        res = layer.run(x, layer.initial_state(4), starts=starts)
        loss = (res.out * target).sum() + res.traces["a"].sum() + res.state.v.sum()
        runs.append((res.out, res.traces["a"], torch.autograd.grad(loss, params)))
    (z_seq, a_seq, grads_seq), (z_loop, a_loop, grads_loop) = runs
    assert 0 < z_seq.sum() < z_seq.numel()
    assert torch.equal(z_seq, z_loop)
    torch.testing.assert_close(a_seq, a_loop)
    assert any(p is layer.log_tau_a for p in params)
    for a, b in zip(grads_seq, grads_loop, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


needs_kernel = pytest.mark.skipif(
    _native.library() is None, reason=f"no compiled kernel here: {_native._STATE.get('failed')}"
)


def _float32_run(native, monkeypatch, reset, rec, fresh_kind, spike_fn, b, n):
    """Outputs and every gradient of a float32 alif_sequence, the compiled kernel on or off."""
    monkeypatch.setattr(_native, "enabled", lambda: native)
    t = 14
    u, w, v0, z0, a0, alpha, rho = (
        None if x is None else x.detach().float().requires_grad_()
        for x in _inputs(t, b, n, seed=31, rec=rec)
    )
    fresh, extra = _fresh(fresh_kind, t, b, n, torch.float32, seed=9)  # per_neuron: fstep 0
    leaves = [x for x in (u, w, v0, z0, a0, alpha, rho) if x is not None] + extra
    starts = None if fresh_kind == "none" else _starts(t, b, 13)
    z, v, a = alif_sequence(
        u,
        w,
        _State(v0, z0, a0),
        alpha,
        rho,
        0.9,
        1.4,
        reset,
        spike_fn,
        starts=starts,
        fresh=fresh,
    )
    gz, gv, ga = torch.randn(3, t, b, n, generator=torch.Generator().manual_seed(4))
    grads = torch.autograd.grad((z * gz + v * gv + a * ga).sum(), leaves)
    return z.detach(), v.detach(), a.detach(), grads


@needs_kernel
@pytest.mark.parametrize(
    ("b", "n", "spike_fn"),
    [
        (5, 24, Surrogate("fast_sigmoid")),  # N not in tiles of 16: the scalar paths
        (11, 128, Surrogate("atan")),  # whole tiles, rows in tiles and single rows
        (9, 48, Surrogate("sigmoid")),  # a derivative the kernel does not compute itself
    ],
    ids=["scalar", "tiles", "given_derivative"],
)
@pytest.mark.parametrize("rec", [True, False])
@pytest.mark.parametrize("reset", RESETS)
@pytest.mark.parametrize("fresh_kind", ["none", "per_neuron", "per_step"])
def test_the_compiled_kernel_equals_the_torch_loop(
    monkeypatch, reset, rec, fresh_kind, b, n, spike_fn
):
    # The C loop and walk against the torch ones in float32: spikes exactly, membranes and
    # adaptation to 1e-5, every gradient to float32 rounding over 14 steps (scale-relative).
    z_ref, v_ref, a_ref, want = _float32_run(
        False, monkeypatch, reset, rec, fresh_kind, spike_fn, b, n
    )
    z, v, a, got = _float32_run(True, monkeypatch, reset, rec, fresh_kind, spike_fn, b, n)
    assert 0.02 < float(z_ref.mean()) < 0.9
    torch.testing.assert_close(z, z_ref, rtol=0, atol=0)
    torch.testing.assert_close(v, v_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(a, a_ref, rtol=1e-5, atol=1e-6)
    for g_got, g_want in zip(got, want, strict=True):
        scale = float(g_want.abs().max())
        assert scale > 0
        torch.testing.assert_close(g_got, g_want, rtol=1e-3, atol=1e-4 * scale)


@needs_kernel
def test_the_layer_uses_the_kernel_and_the_environment_switches_it_off(monkeypatch):
    calls = []
    for name in ("alif_forward", "alif_backward"):
        real = getattr(_native, name)
        monkeypatch.setattr(_native, name, lambda *a, _r=real, _n=name: calls.append(_n) or _r(*a))
    layer = ALIFLayer(3, 16, seed=0, dt=1e-3, tau_m=5e-3, tau_a=0.05)
    x = torch.rand(6, 2, 3) * 4.0
    z, _ = layer(x, layer.initial_state(2))
    z.sum().backward()
    assert calls == ["alif_forward", "alif_backward"]
    monkeypatch.setenv("SNRL_NATIVE", "0")
    assert (
        _native.alif_forward(
            x,
            None,
            (torch.zeros(2, 3),) * 3,
            (torch.ones(3),) * 2,
            1.0,
            1.0,
            "subtract",
            None,
            (None,) * 3,
        )
        is None
    )
