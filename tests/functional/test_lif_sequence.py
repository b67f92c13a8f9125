"""lif_sequence against hand-computed trajectories and autograd through the lif_step loop."""

from __future__ import annotations

from typing import NamedTuple

import pytest
import snntorch.surrogate as surrogate
import torch
from torch import Tensor

from snrl.functional.dale import make_sign_vector, signed_weights
from snrl.functional.lif_sequence import _LIFSequence, lif_sequence
from snrl.functional.neurons import RESETS
from snrl.functional.surrogate import SURROGATE_KINDS, Surrogate


class _ExactFastSigmoid(torch.autograd.Function):
    """Heaviside forward, fast-sigmoid backward, all in the input's dtype (float64-exact)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (10.0 * x.abs() + 1.0) ** 2


class _State(NamedTuple):
    v: Tensor
    z: Tensor


def _reference(u, w_rec, v, z, alpha, threshold, reset, spike_fn):
    """Autograd through the loop of the one step function (lif_step is golden-tested)."""
    state = _State(v, z)
    return lif_sequence(u, w_rec, state, alpha, threshold, reset, spike_fn, backward="autograd")


def _inputs(t, b, n, *, dtype=torch.float64, seed=0, rec=True):
    g = torch.Generator().manual_seed(seed)
    u = (torch.rand(t, b, n, generator=g, dtype=dtype) * 1.2).requires_grad_()
    w = (torch.randn(n, n, generator=g, dtype=dtype) * 0.4).requires_grad_() if rec else None
    v0 = (torch.rand(b, n, generator=g, dtype=dtype) * 1.5).requires_grad_()
    z0 = (torch.rand(b, n, generator=g, dtype=dtype) > 0.5).to(dtype).requires_grad_()
    alpha = (0.5 + 0.4 * torch.rand(n, generator=g, dtype=dtype)).requires_grad_()
    return u, w, v0, z0, alpha


@pytest.mark.parametrize(
    ("reset", "expected_v"),
    [("subtract", [0.6, 1.1, 0.45, 0.425]), ("zero", [0.6, 1.1, 0.9, 0.65])],
)
def test_golden_trajectory_by_hand(reset, expected_v):
    # alpha = 0.5, threshold = 1, u = [0.6, 0.8, 0.9, 0.2], start at rest:
    # v1 = 0.3 + 0.8 = 1.1 spikes; subtract: v2 = 0.55 + 0.9 - 1 = 0.45, v3 = 0.225 + 0.2
    # zero: v2 = 0 + 0.9, v3 = 0.45 + 0.2.
    u = torch.tensor([0.6, 0.8, 0.9, 0.2], dtype=torch.float64).view(4, 1, 1)
    state = _State(torch.zeros(1, 1, dtype=torch.float64), torch.zeros(1, 1, dtype=torch.float64))
    alpha = torch.tensor([0.5], dtype=torch.float64)
    z, v = lif_sequence(u, None, state, alpha, 1.0, reset, surrogate.fast_sigmoid(slope=25))
    torch.testing.assert_close(v.view(-1), torch.tensor(expected_v, dtype=torch.float64))
    torch.testing.assert_close(z.view(-1), torch.tensor([0.0, 1.0, 0.0, 0.0], dtype=torch.float64))


def test_recurrent_spike_feeds_next_step():
    # neuron 0 spikes at t=0 (v = 2), its weight 0.7 onto neuron 1 arrives at t=1.
    u = torch.tensor([[[2.0, 0.0]], [[0.0, 0.1]]])
    w = torch.tensor([[0.0, 0.7], [0.0, 0.0]])
    state = _State(torch.zeros(1, 2), torch.zeros(1, 2))
    z, v = lif_sequence(
        u, w, state, torch.tensor([0.9, 0.9]), 1.0, "subtract", surrogate.fast_sigmoid(slope=25)
    )
    torch.testing.assert_close(v[1, 0], torch.tensor([0.9 * 2.0 - 1.0, 0.8]))
    torch.testing.assert_close(z[:, 0], torch.tensor([[1.0, 0.0], [0.0, 0.0]]))


SNN_FAST_SIGMOID = surrogate.fast_sigmoid(slope=25)
#: Every closed-form surrogate kind, a snntorch closure and a custom autograd.Function (the
#: fused backward's two derivative paths), with their test ids; the ALIF tests use them too.
SPIKE_FNS = [Surrogate(kind) for kind in sorted(SURROGATE_KINDS)] + [
    SNN_FAST_SIGMOID,
    _ExactFastSigmoid.apply,
]
SPIKE_FN_IDS = [*sorted(SURROGATE_KINDS), "snntorch_fast_sigmoid", "custom_function"]


def _weights(kind, n, seed):
    """(leaf, build): build() gives the effective W_rec, a fresh graph each call: None, a
    free matrix, or a Dale matrix |W| * sign * mask."""
    if kind == "none":
        return None, lambda: None
    g = torch.Generator().manual_seed(seed)
    raw = (torch.randn(n, n, generator=g, dtype=torch.float64) * 0.4).requires_grad_()
    if kind == "free":
        return raw, lambda: raw
    sign = make_sign_vector(n, 0.4, g).double()
    mask = 1.0 - torch.eye(n, dtype=torch.float64)
    return raw, lambda: signed_weights(raw, sign, mask)


@pytest.mark.parametrize("spike_fn", SPIKE_FNS, ids=SPIKE_FN_IDS)
@pytest.mark.parametrize("rec", ["none", "free", "dale"])
@pytest.mark.parametrize("reset", RESETS)
def test_outputs_and_all_gradients_equal_the_step_loop_float64(reset, rec, spike_fn):
    # The fused path against autograd through lif_step, in float64: every output and every
    # gradient (input current, raw recurrent weights through the Dale construction, initial
    # state, decay), for both resets, with the closed-form surrogates and the autograd
    # fallback (a snntorch closure, a custom autograd.Function).
    u, _, v0, z0, alpha = _inputs(7, 3, 5, rec=False, seed=1)
    leaf, build = _weights(rec, 5, seed=11)
    leaves = [x for x in (u, leaf, v0, z0, alpha) if x is not None]
    g = torch.Generator().manual_seed(2)
    gz = torch.randn(7, 3, 5, generator=g, dtype=torch.float64)
    gv = torch.randn(7, 3, 5, generator=g, dtype=torch.float64)

    z_ref, v_ref = _reference(u, build(), v0, z0, alpha, 0.8, reset, spike_fn)
    grads_ref = torch.autograd.grad((z_ref * gz).sum() + (v_ref * gv).sum(), leaves)
    z, v = lif_sequence(u, build(), _State(v0, z0), alpha, 0.8, reset, spike_fn)
    grads = torch.autograd.grad((z * gz).sum() + (v * gv).sum(), leaves)

    assert 0 < z_ref.sum() < z_ref.numel()  # spikes and silences: reset terms are exercised
    # snntorch's closure emits float32 spikes, which rounds the oracle's gradient through z
    # to float32; with the others everything is float64 end to end.
    tol = 1e-6 if spike_fn is SNN_FAST_SIGMOID else 1e-10
    assert z.dtype == v.dtype == torch.float64
    torch.testing.assert_close(z, z_ref, rtol=0, atol=0)
    torch.testing.assert_close(v, v_ref, rtol=1e-12, atol=1e-12)
    for got, want in zip(grads, grads_ref, strict=True):
        assert want.abs().sum() > 0
        torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_only_some_inputs_require_grad():
    u, w, v0, z0, alpha = _inputs(5, 2, 4, seed=3)
    w = w.detach()
    v0, z0, alpha = v0.detach(), z0.detach(), alpha.detach()
    spike_fn = surrogate.fast_sigmoid(slope=25)
    z, v = lif_sequence(u, w, _State(v0, z0), alpha, 1.0, "subtract", spike_fn)
    (gu,) = torch.autograd.grad(v.sum() + z.sum(), [u])
    z_ref, v_ref = _reference(u, w, v0, z0, alpha, 1.0, "subtract", spike_fn)
    (gu_ref,) = torch.autograd.grad(v_ref.sum() + z_ref.sum(), [u])
    torch.testing.assert_close(gu, gu_ref)


def test_no_input_requires_grad_gives_plain_tensors():
    u, w, v0, z0, alpha = (x.detach() for x in _inputs(4, 2, 3, seed=4))
    z, v = lif_sequence(u, w, _State(v0, z0), alpha, 1.0, "zero", surrogate.atan())
    assert not z.requires_grad and not v.requires_grad
    z_ref, v_ref = _reference(u, w, v0, z0, alpha, 1.0, "zero", surrogate.atan())
    torch.testing.assert_close(v, v_ref)


def test_float32_matches_reference():
    u, w, v0, z0, alpha = _inputs(6, 4, 8, dtype=torch.float32, seed=5)
    spike_fn = surrogate.fast_sigmoid(slope=25)
    z, v = lif_sequence(u, w, _State(v0, z0), alpha, 1.0, "subtract", spike_fn)
    z_ref, v_ref = _reference(u, w, v0, z0, alpha, 1.0, "subtract", spike_fn)
    torch.testing.assert_close(v, v_ref)
    g = torch.autograd.grad(v.sum() + z.sum(), [u, w, alpha])
    g_ref = torch.autograd.grad(v_ref.sum() + z_ref.sum(), [u, w, alpha])
    for a, b in zip(g, g_ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"reset": "none"}, "unknown reset"),
        ({"v0": torch.zeros(3, 4)}, "state.v"),
        ({"w": torch.zeros(4, 5)}, "w_rec"),
        ({"alpha": torch.ones(5)}, "alpha"),
        ({"backward": "numeric"}, "unknown backward"),
        ({"u": torch.zeros(2, 4)}, "u must be"),
        ({"u": torch.zeros(2, 3, 2, 4)}, "state.v"),  # a group of 3 needs (3, 2, 4) states
    ],
)
def test_bad_input_raises_value_error(kwargs, match):
    u = kwargs.get("u", torch.zeros(2, 2, 4))
    state = _State(kwargs.get("v0", torch.zeros(2, 4)), torch.zeros(2, 4))
    with pytest.raises(ValueError, match=match):
        lif_sequence(
            u,
            kwargs.get("w"),
            state,
            kwargs.get("alpha", torch.ones(4)),
            1.0,
            kwargs.get("reset", "subtract"),
            surrogate.atan(),
            backward=kwargs.get("backward", "fused"),
        )


@pytest.mark.parametrize("rec", [True, False])
@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("resets", [False, True])
def test_gradcheck_with_smooth_spike_fn(reset, rec, resets):
    # With a smooth elementwise spike_fn used in the forward too (the private switch
    # heaviside=False), the whole map is differentiable, so finite differences check the
    # hand-written backward exactly, every input at once (alpha included; with resets inside
    # the sequence, the fresh membranes too, and the fresh spikes are nonzero here so that
    # the reset rows' recurrent and decay terms are exercised).
    u, w, v0, z0, alpha = _inputs(5, 2, 3, rec=rec, seed=6)
    starts = torch.tensor(
        [[False, True], [False, False], [True, False], [True, True], [False, True]]
    )
    fv = torch.rand(5, 2, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    fz = torch.full((5, 2, 3), 0.4, dtype=torch.float64)
    fv.requires_grad_(resets)

    def _smooth(x):
        return torch.sigmoid(3 * x)

    def run(u, w, v0, z0, alpha, fv):
        if not resets:
            return _LIFSequence.apply(
                u, w, v0, z0, alpha, 0.7, reset, _smooth, False, None, None, None
            )
        return _LIFSequence.apply(u, w, v0, z0, alpha, 0.7, reset, _smooth, False, starts, fv, fz)

    assert torch.autograd.gradcheck(run, (u, w, v0, z0, alpha, fv))


@pytest.mark.parametrize("rec", [True, False])
@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("which", ["z", "v_last", "both"])
def test_exact_float64_surrogate_matches_reference_tightly(reset, rec, which):
    u, w, v0, z0, alpha = _inputs(9, 4, 6, rec=rec, seed=7)
    leaves = [x for x in (u, w, v0, z0, alpha) if x is not None]

    def loss(z, v):
        weights = torch.linspace(-1.0, 2.0, z.numel(), dtype=z.dtype).view_as(z)
        if which == "z":
            return (z * weights).sum()
        if which == "v_last":
            return (v[-1] ** 2).sum()
        return (z * weights).sum() + (v * weights.flip(0)).sum()

    z_ref, v_ref = _reference(u, w, v0, z0, alpha, 0.9, reset, _ExactFastSigmoid.apply)
    want = torch.autograd.grad(loss(z_ref, v_ref), leaves)
    z, v = lif_sequence(u, w, _State(v0, z0), alpha, 0.9, reset, _ExactFastSigmoid.apply)
    got = torch.autograd.grad(loss(z, v), leaves)
    assert 0 < z_ref.sum() < z_ref.numel()
    torch.testing.assert_close(z, z_ref, rtol=0, atol=0)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_scalar_alpha_gets_scalar_gradient():
    u, w, v0, z0, _ = _inputs(5, 2, 3, seed=8)
    alpha = torch.tensor(0.8, dtype=torch.float64, requires_grad=True)
    z, v = lif_sequence(u, w, _State(v0, z0), alpha, 1.0, "zero", _ExactFastSigmoid.apply)
    (got,) = torch.autograd.grad(v.sum() + z.sum(), [alpha])
    z_ref, v_ref = _reference(u, w, v0, z0, alpha, 1.0, "zero", _ExactFastSigmoid.apply)
    (want,) = torch.autograd.grad(v_ref.sum() + z_ref.sum(), [alpha])
    assert got.shape == ()
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_empty_sequence():
    u = torch.zeros(0, 2, 3, requires_grad=True)
    w = torch.ones(3, 3, requires_grad=True)
    alpha = torch.full((3,), 0.9, requires_grad=True)
    state = _State(torch.ones(2, 3, requires_grad=True), torch.zeros(2, 3))
    z, v = lif_sequence(u, w, state, alpha, 1.0, "subtract", surrogate.atan())
    assert z.shape == v.shape == (0, 2, 3)
    grads = torch.autograd.grad(v.sum() + z.sum(), [u, w, alpha, state.v], allow_unused=True)
    assert all(g is None or not g.any() for g in grads)


def _starts(t, b, seed):
    g = torch.Generator().manual_seed(seed)
    starts = torch.rand(t, b, generator=g) < 0.3
    starts[0, 0] = True  # a reset of the initial state itself
    starts[t // 2] = True  # every row at once
    return starts


@pytest.mark.parametrize("rec", [True, False])
@pytest.mark.parametrize("reset", RESETS)
@pytest.mark.parametrize("fresh_shape", ["none", "per_neuron", "per_step"])
def test_resets_inside_the_sequence_match_autograd(reset, rec, fresh_shape):
    t, b, n = 11, 4, 6
    u, w, v0, z0, alpha = _inputs(t, b, n, seed=21, rec=rec)
    starts = _starts(t, b, 3)
    g = torch.Generator().manual_seed(5)
    fresh, leaves = None, [x for x in (u, w, v0, z0, alpha) if x is not None]
    if fresh_shape == "per_neuron":  # a learned initial membrane
        fv = (torch.rand(n, generator=g, dtype=torch.float64) * 1.5).requires_grad_()
        fresh, leaves = _State(fv, torch.zeros(())), [*leaves, fv]
    elif fresh_shape == "per_step":  # recorded random initial states (no gradient)
        fv = torch.randn(t, b, n, generator=g, dtype=torch.float64)
        fresh = _State(fv, torch.zeros(t, b, n, dtype=torch.float64))
    spike_fn = _ExactFastSigmoid.apply
    outs = []
    for backward in ("autograd", "fused"):
        z, v = lif_sequence(
            u,
            w,
            _State(v0, z0),
            alpha,
            0.9,
            reset,
            spike_fn,
            starts=starts,
            fresh=fresh,
            backward=backward,
        )
        gz, gv = torch.randn(2, t, b, n, generator=torch.Generator().manual_seed(8), dtype=v.dtype)
        outs.append((z, v, *torch.autograd.grad((z * gz + v * gv).sum(), leaves)))
    ref, fast = outs
    assert bool(ref[0].any()) and not bool(ref[0].all())  # some spikes, not all
    for a, c in zip(ref, fast, strict=True):
        torch.testing.assert_close(c, a, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("reset", RESETS)
def test_a_group_is_its_layers_side_by_side_and_matches_autograd(reset):
    # (T, G, B, N): layer g's outputs and gradients are a call on its own slice, and the
    # autograd reference runs the group too.
    t, b, n, groups = 7, 3, 5, 2
    gen = torch.Generator().manual_seed(11)
    f64 = torch.float64
    u = (torch.rand(t, groups, b, n, generator=gen, dtype=f64) * 1.2).requires_grad_()
    w = (torch.randn(groups, n, n, generator=gen, dtype=f64) * 0.4).requires_grad_()
    v0 = (torch.rand(groups, b, n, generator=gen, dtype=f64) * 1.5).requires_grad_()
    z0 = (torch.rand(groups, b, n, generator=gen, dtype=f64) < 0.3).to(f64)
    alpha = (0.7 + 0.2 * torch.rand(groups, n, generator=gen, dtype=f64)).requires_grad_()
    starts = _starts(t, b, 3)
    gz, gv = torch.randn(2, t, groups, b, n, generator=gen, dtype=f64)
    leaves = [u, w, v0, alpha]

    def run(backward, *args):
        z, v = lif_sequence(
            *args, 0.9, reset, _ExactFastSigmoid.apply, starts=starts, backward=backward
        )
        return z, v, *torch.autograd.grad((z * gz + v * gv).sum(), leaves)

    fused = run("fused", u, w, _State(v0, z0), alpha)
    for a, c in zip(run("autograd", u, w, _State(v0, z0), alpha), fused, strict=True):
        torch.testing.assert_close(c, a, rtol=1e-10, atol=1e-10)
    assert bool(fused[0].any()) and not bool(fused[0].all())
    for k in range(groups):
        gz_k, gv_k = gz[:, k], gv[:, k]
        z, v = lif_sequence(
            u[:, k],
            w[k],
            _State(v0[k], z0[k]),
            alpha[k],
            0.9,
            reset,
            _ExactFastSigmoid.apply,
            starts=starts,
        )
        one = (z, v, *torch.autograd.grad((z * gz_k + v * gv_k).sum(), leaves))
        torch.testing.assert_close(one[0], fused[0][:, k], rtol=0, atol=0)
        torch.testing.assert_close(one[1], fused[1][:, k], rtol=1e-12, atol=1e-12)
        for a, c in zip(one[2:], fused[2:], strict=True):  # this layer's share of each grad
            part = c[:, k] if c.shape[0] == t else c[k]
            whole = a[:, k] if a.shape[0] == t else a[k]
            torch.testing.assert_close(whole, part, rtol=1e-10, atol=1e-10)


def test_a_reset_cuts_the_gradient_to_the_steps_before():
    # Rows that restart at step 5 must not depend on u before step 5 or on the initial state.
    t, b, n = 9, 3, 4
    u, w, v0, z0, alpha = _inputs(t, b, n, seed=2)
    starts = torch.zeros(t, b, dtype=torch.bool)
    starts[5, 1] = True
    z, v = lif_sequence(
        u, w, _State(v0, z0), alpha, 1.0, "subtract", surrogate.atan(), starts=starts
    )
    du, dv0 = torch.autograd.grad(v[5:, 1].sum(), [u, v0], retain_graph=True)
    assert not du[:5, 1].any() and not dv0[1].any()
    assert du[5:, 1].abs().min() > 0
    # the other rows keep their history
    du, dv0 = torch.autograd.grad(v[5:, 0].sum(), [u, v0])
    assert du[:5, 0].abs().sum() > 0 and dv0[0].abs().sum() > 0
    # a reset to zeros: row 1 restarts from v = 0, z = 0, so v[5] is exactly u[5] there
    assert torch.equal(v[5, 1], u[5, 1])


@pytest.mark.parametrize("with_starts", [True, False])
def test_li_sequence_matches_the_li_step_loop(with_starts):
    from snrl.functional.lif_sequence import li_sequence
    from snrl.functional.neurons import LIState, li_step

    t, b, n = 10, 3, 5
    u, _, v0, _, alpha = _inputs(t, b, n, seed=4, rec=False)
    fv = torch.rand(n, dtype=torch.float64).requires_grad_()
    starts = _starts(t, b, 6) if with_starts else None
    g = torch.randn(t, b, n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    leaves = [u, v0, alpha, fv] if with_starts else [u, v0, alpha]
    s, vs = LIState(v0), []
    for k in range(t):
        if with_starts:
            s = LIState(torch.where(starts[k, :, None], fv.expand(b, n), s.v))
        _, s = li_step(u[k], s, alpha)
        vs.append(s.v)
    ref = torch.stack(vs)
    ref_grads = torch.autograd.grad((ref * g).sum(), leaves)
    v = li_sequence(u, v0, alpha, starts=starts, fresh=fv if with_starts else None)
    torch.testing.assert_close(v, ref, rtol=0, atol=0)
    for a, c in zip(ref_grads, torch.autograd.grad((v * g).sum(), leaves), strict=True):
        torch.testing.assert_close(c, a, rtol=1e-12, atol=1e-12)


def test_bad_starts_shape_is_refused():
    u, w, v0, z0, alpha = _inputs(4, 2, 3)
    with pytest.raises(ValueError, match="starts has shape"):
        lif_sequence(
            u,
            w,
            _State(v0, z0),
            alpha,
            1.0,
            "subtract",
            surrogate.atan(),
            starts=torch.ones(4, 3, dtype=torch.bool),
        )


@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_lif_layer_sequence_matches_its_own_step_loop(reset):
    # LIFLayer routes (T, B, F) inputs with grad on through lif_sequence, and single steps
    # through its autograd step function: both must give the same spikes and gradients.
    from snrl.layers import LIFLayer

    layer = LIFLayer(
        3,
        6,
        reset=reset,
        force_dale_law=True,
        learn_tau=True,
        seed=0,
        tau_m=5e-3,
        spike_grad=surrogate.fast_sigmoid(slope=25),
    )
    g = torch.Generator().manual_seed(11)
    x = torch.rand(10, 4, 3, generator=g) * 4.0
    state = layer.initial_state(4)
    params = [p for p in layer.parameters() if p.requires_grad]
    target = torch.randn(10, 4, 6, generator=g)

    z_seq, _ = layer(x, state)
    grads_seq = torch.autograd.grad((z_seq * target).sum(), params)
    s, outs = state, []
    for x_t in x:
        z_t, s = layer(x_t, s)
        outs.append(z_t)
    z_steps = torch.stack(outs)
    grads_steps = torch.autograd.grad((z_steps * target).sum(), params)

    assert 0 < z_seq.sum() < z_seq.numel()
    assert torch.equal(z_seq, z_steps)
    for a, b in zip(grads_seq, grads_steps, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
