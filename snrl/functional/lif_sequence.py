"""A whole LIF sequence in one call, for the training path.

The dynamics are those of :func:`snrl.functional.neurons.lif_step`, the one definition of the
LIF model (equations in :mod:`snrl.functional.neurons`): the forward pass below calls it once
per step, with the current ``I_t = u_t + z_{t-1} W_rec`` (no recurrent term if W_rec is None).

Why a hand-written backward: an autograd loop records ~6 small ops per step and replays them
one by one. Here the forward runs the step function without a graph (spikes by the
comparison ``v > threshold``, which is the forward of every surrogate) and keeps only ``v``
and ``z``; the backward walks the sequence in reverse with one matmul and two fused
multiply-adds per step. It is the adjoint of ``lif_step``, derived by hand from its two
equations (``v_t = alpha v_{t-1} + I_t - threshold z_{t-1}`` or ``alpha v_{t-1} (1 - z_{t-1})
+ I_t``, and ``z_t = H(v_t - threshold)``), and tested equal to autograd through the
step-function loop (``lif_sequence(..., backward="autograd")``)::

    s_t   = spike_fn'(v_t - threshold)      (elementwise: the closed form of a Surrogate,
                                             else autograd, 8 steps a call)
    dz_t  = gz_t + dv_{t+1} W_rec^T - threshold dv_{t+1}                reset == "subtract"
    dz_t  = gz_t + dv_{t+1} W_rec^T - alpha v_t dv_{t+1}                reset == "zero"
    dv_t  = gv_t + s_t dz_t + alpha dv_{t+1}                            reset == "subtract"
    dv_t  = gv_t + s_t dz_t + alpha (1 - z_t) dv_{t+1}                  reset == "zero"

where ``gz``, ``gv`` are the gradients arriving at the outputs and ``dz``, ``dv`` the total
gradients of a spike and a membrane (``dv_T = 0``). Then ``du = dv``, ``dW_rec = sum_t
z_{t-1}^T dv_t`` (one matmul per 8 steps, while they are in cache), ``dalpha = sum_t v_{t-1}
dv_t`` (times ``1 - z_{t-1}`` for the zero reset), and the state gradients are the t = -1
terms of the same sums. For subtraction the reset is folded into the weights: ``dv W^T -
threshold dv = dv (W - threshold I)^T``.

Episode resets inside the sequence (``starts``): where row b starts an episode at step t its
state before step t is the fresh one (zeros, a learned membrane, or a recorded random draw)
instead of the state after step t - 1. The same sums hold with ``v_{t-1}``, ``z_{t-1}``
replaced by that fresh state, and the gradient arriving at a replaced state is not passed to
step t - 1: it goes to the fresh membrane (``d fresh_t = alpha dv_t``, times ``1 - z`` for
the zero reset). One call then covers a whole minibatch of env sequences with no cuts.

The products are public ``torch.mm`` on contiguous operands (no private torch ops).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor

from snrl.errors import UserError
from snrl.functional import _native
from snrl.functional.neurons import RESETS, LIFState, lif_step
from snrl.functional.surrogate import derivative_fn

_CHUNK = 8  # time steps per surrogate-derivative call in the backward pass


class LIFStateLike(Protocol):
    """Anything with a membrane ``v`` and last spikes ``z``, each (B, N)."""

    v: Tensor
    z: Tensor


BACKWARDS = ("fused", "autograd")
"""How :func:`lif_sequence` computes its gradient: the hand-written adjoint, or autograd."""


def lif_sequence(
    u: Tensor,
    w_rec: Tensor | None,
    state: LIFStateLike,
    alpha: Tensor,
    threshold: float,
    reset: str,
    spike_fn: Callable[[Tensor], Tensor],
    *,
    starts: Tensor | None = None,
    fresh: LIFStateLike | None = None,
    backward: str = "fused",
) -> tuple[Tensor, Tensor]:
    """Run LIF dynamics over a whole sequence (forward and hand-written backward).

    A (T, G, B, N) ``u`` runs G layers of the same size, threshold, reset and surrogate side by
    side (e.g. a policy's and a critic's) on the same episode starts: every step is one batched
    product and one set of elementwise ops for all of them. Then ``w_rec`` is (G, N, N), the
    state's fields (G, B, N), ``alpha`` (G, N) and ``fresh`` broadcastable to (T, G, B, N);
    layer g's outputs are exactly what a call with ``u[:, g]``, ``w_rec[g]``... gives (up to
    the rounding of the batched product).

    Args:
        u: (T, B, N) input current without the recurrent term (``x W_in + b``).
        w_rec: (N, N) effective recurrent weights, row i = presynaptic neuron i, or None.
        state: state at t = -1 with fields ``v`` and ``z``, each (B, N).
        alpha: (N,) (or a scalar tensor) membrane decay per step, ``exp(-dt / tau_m)``.
        threshold: firing threshold (same units as the membrane).
        reset: ``"subtract"`` or ``"zero"``.
        spike_fn: elementwise Heaviside forward / surrogate backward, applied to
            ``v - threshold``: a :class:`~snrl.functional.surrogate.Surrogate` (its
            derivative has a closed form) or any callable such as a ``snntorch.surrogate``
            one (derivative by autograd, slower). Its forward must be the step ``x > 0``, as
            in every surrogate: the spikes are computed directly as ``v > threshold`` and
            spike_fn is used only for its derivative.
        starts: optional bool (T, B): row b starts an episode at step t, so its state before
            step t is replaced by ``fresh`` (episode resets inside one call, no cuts). The
            gradient of a replaced state does not flow to the step before; it goes to
            ``fresh.v``.
        fresh: the replacement state where ``starts``: fields ``v`` and ``z`` broadcastable
            to (T, B, N) (e.g. (N,) for a learned initial membrane, (T, B, N) for recorded
            random ones). Default: zeros. ``fresh.z`` receives no gradient (spikes are not
            learned).
        backward: ``"fused"`` (the hand-written backward of the module docstring) or
            ``"autograd"``: a plain autograd loop over ``lif_step`` (spikes by spike_fn's own
            forward), the reference the fused path is tested against and the baseline of
            ``benchmarks/bench_layers.py``.

    Returns:
        (z, v): spikes and membranes, each (T, B, N), differentiable with respect to ``u``,
        ``w_rec``, ``state.v``, ``state.z``, ``alpha`` and ``fresh.v`` (once; no double
        backward with ``"fused"``).

    Raises:
        UserError: on an unknown reset or backward, or mismatched shapes.
    """
    alpha = torch.as_tensor(alpha, dtype=u.dtype, device=u.device)
    v0, z0 = state.v, state.z
    alpha = _check(u, w_rec, v0, z0, alpha, reset, backward)
    threshold = float(threshold)
    starts, fv, fz = _resets(u, starts, fresh)
    if backward == "autograd":  # the reference: autograd through the lif_step loop
        s = LIFState(v0, z0)
        zs, vs = [], []
        for t, u_t in enumerate(u.unbind(0)):
            if starts is not None and bool(starts[t].any()):
                m = starts[t].unsqueeze(-1)
                s = LIFState(torch.where(m, fv[t], s.v), torch.where(m, fz[t], s.z))
            current = u_t if w_rec is None else u_t + s.z @ w_rec
            z, s = lif_step(current, s, alpha, threshold, spike_fn, reset)
            zs.append(z)
            vs.append(s.v)
        if not zs:
            return u.new_zeros(u.shape), u.new_zeros(u.shape)
        return torch.stack(zs), torch.stack(vs)
    inputs = (u, w_rec, v0, z0, alpha, fv)
    if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in inputs):
        return _LIFSequence.apply(
            u, w_rec, v0, z0, alpha, threshold, reset, spike_fn, True, starts, fv, fz
        )
    with torch.no_grad():
        return _forward_loop(u, w_rec, v0, z0, alpha, threshold, reset, None, starts, fv, fz)


def _resets(
    u: Tensor, starts: Tensor | None, fresh: LIFStateLike | None, names: tuple = ("v", "z")
) -> tuple[Tensor | None, ...]:
    """Validated ``starts`` (bool (T, B)) and the fresh state's ``names`` fields (default
    ``v``, ``z``) expanded to (T, B, N); all but the membrane detached (no gradient)."""
    if starts is None:
        return (None,) * (len(names) + 1)
    starts = torch.as_tensor(starts, device=u.device).bool()
    t, b = u.shape[0], u.shape[-2]
    if tuple(starts.shape) != (t, b):
        raise UserError(
            f"starts has shape {tuple(starts.shape)} but u is {tuple(u.shape)} "
            f"(pass a bool ({t}, {b}) tensor)"
        )
    if not bool(starts.any()):
        return (None,) * (len(names) + 1)
    fields = []
    for name in names:
        f = None if fresh is None else getattr(fresh, name)
        f = u.new_zeros(()) if f is None else f.to(u.dtype)
        try:
            fields.append(f.expand(u.shape))
        except RuntimeError as e:
            raise UserError(
                f"fresh.{name} has shape {tuple(f.shape)}, not broadcastable to {tuple(u.shape)}"
                " (pass (N,), (B, N) or (T, B, N))"
            ) from e
    return starts, fields[0], *(f.detach() for f in fields[1:])


def _forward_loop(
    u: Tensor,
    w_rec: Tensor | None,
    v0: Tensor,
    z0: Tensor,
    alpha: Tensor,
    threshold: float,
    reset: str,
    spike_fn: Callable[[Tensor], Tensor] | None,
    starts: Tensor | None = None,
    fv: Tensor | None = None,
    fz: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The forward pass without a graph: ``lif_step`` per step; returns (T, B, N) (z, v).

    With ``spike_fn=None`` the spikes are the Heaviside step ``v > threshold`` (the forward of
    every surrogate, bit for bit, at a tenth of the cost of calling one per step). Where
    ``starts[t]``, the state before step t is replaced by ``(fv[t], fz[t])``.
    """
    if spike_fn is None:  # the compiled loop (same equations) where it applies
        done = _native.lif_forward(u, w_rec, v0, z0, alpha, threshold, reset, starts, fv, fz)
        if done is not None:
            return done
    u, alpha = u.detach(), alpha.detach()
    state = LIFState(v0.detach(), z0.detach())
    w = None if w_rec is None else w_rec.detach()
    marks = _start_steps(starts)
    # lif_step writes straight into the (T, B, N) outputs (the current is built in v_t's
    # slot by one addmm, faster here than oneDNN's product plus an add): collecting per-step
    # tensors and stacking them would hold both copies at once (+25 % peak memory in
    # training) and cost a third more time.
    vs = torch.empty_like(u, memory_format=torch.contiguous_format)
    zs = torch.empty_like(vs)
    for t in range(u.shape[0]):
        if marks and marks[t]:
            m = starts[t].unsqueeze(-1)
            state = LIFState(
                torch.where(m, fv[t].detach(), state.v), torch.where(m, fz[t], state.z)
            )
        slot = LIFState(vs[t], zs[t])
        if w is None:
            slot.v.copy_(u[t])
        elif w.dim() == 2:
            torch.addmm(u[t], state.z, w, out=slot.v)
        else:  # a group of layers (G, N, N): one batched product
            torch.baddbmm(u[t], state.z, w, out=slot.v)
        _, state = lif_step(slot.v, state, alpha, threshold, spike_fn, reset, out=slot)
    return zs, vs


def _start_steps(starts: Tensor | None) -> list[bool]:
    """Per step, whether some row starts an episode there (one host sync for all steps)."""
    if starts is None:
        return []
    return starts.any(1).tolist()


def _previous(x0: Tensor, xs: Tensor, starts: Tensor | None, fresh: Tensor | None) -> Tensor:
    """(T, B, N) the state each step starts from: ``x0``, then ``xs[:-1]``, replaced by
    ``fresh`` where ``starts``."""
    prev = torch.cat([x0.unsqueeze(0), xs], dim=0)[: xs.shape[0]]
    if starts is None:
        return prev
    return torch.where(_row_mask(starts, prev), fresh, prev)


def _row_mask(starts: Tensor, like: Tensor) -> Tensor:
    """bool (T, B) -> broadcastable against ``like`` (T, B, N) or (T, G, B, N)."""
    t, b = starts.shape
    return starts.reshape(t, *([1] * (like.dim() - 3)), b, 1)


def _outer_sum(z: Tensor, dv: Tensor) -> Tensor:
    """``sum_t z_t^T dv_t`` over (T, B, N) (-> (N, N)) or (T, G, B, N) (-> (G, N, N))."""
    n = dv.shape[-1]
    if dv.dim() == 3:
        return torch.mm(z.reshape(-1, n).t(), dv.reshape(-1, n))
    g = dv.shape[1]
    zg = z.transpose(0, 1).reshape(g, -1, n)
    return torch.bmm(zg.transpose(1, 2), dv.transpose(0, 1).reshape(g, -1, n))


def _mm(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` for (B, K) x (K, N), or batched for a group (G, B, K) x (G, K, N)."""
    return torch.mm(a, b) if b.dim() == 2 else torch.bmm(a, b)


class _LIFSequence(torch.autograd.Function):
    """Whole-sequence LIF with the hand-written backward of the module docstring."""

    @staticmethod
    def forward(
        ctx, u, w_rec, v0, z0, alpha, threshold, reset, spike_fn, heaviside, starts, fv, fz
    ):
        # heaviside=True: spikes by `v > threshold`, spike_fn only for its derivative (the
        # contract of lif_sequence); False: spike_fn's own forward (any smooth elementwise
        # function, which lets tests check this backward by finite differences).
        forward_fn = None if heaviside else spike_fn
        zs, vs = _forward_loop(
            u, w_rec, v0, z0, alpha, threshold, reset, forward_fn, starts, fv, fz
        )
        ctx.save_for_backward(w_rec, v0, z0, alpha, zs, vs, starts, fv, fz)
        ctx.threshold, ctx.reset, ctx.spike_fn = threshold, reset, spike_fn
        ctx.set_materialize_grads(False)
        return zs, vs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gz, gv):
        w, v0, z0, alpha, zs, vs, starts, fv, fz = ctx.saved_tensors
        need_u, need_w, need_v0, need_z0, need_alpha = ctx.needs_input_grad[:5]
        need_fresh = ctx.needs_input_grad[10]
        threshold, reset, spike_fn = ctx.threshold, ctx.reset, ctx.spike_fn
        steps = vs.shape[0]
        subtract = reset == "subtract"
        w_back_t = None  # dv_{t+1} -> dz_t is dv_{t+1} @ w_back_t (contiguous: torch.mm)
        if w is not None:
            w_back = w.detach().clone(memory_format=torch.contiguous_format)
            if subtract:  # dv W^T - threshold dv = dv (W - threshold I)^T
                w_back.diagonal(dim1=-2, dim2=-1).sub_(threshold)
            w_back_t = w_back.transpose(-2, -1).contiguous()
        walk = _native.Walk(gz, gv, w_back_t, vs, zs, alpha, threshold, reset, starts)
        native = _native.lif_backward(spike_fn, walk) if steps else None
        if native is not None:  # the compiled walk (same equations) where it applies
            dv, nxt = native
        else:
            dv, nxt = _backward_loop(walk, derivative_fn(spike_fn))
        first = nxt if nxt is not None else torch.zeros_like(v0)  # dv_0, masked
        du = dv if need_u else None
        dw = dv0 = dz0 = dalpha = dfresh = None
        zp = vp = None
        if need_w and w is not None:  # dW by the kernel (sparse z) where it applies
            dw = _native.lif_weight_grad(z0, zs, starts, fz, dv)
        dense_w = need_w and w is not None and dw is None
        if starts is not None and (dense_w or need_alpha or need_fresh):
            zp = _previous(z0.detach(), zs, starts, fz)  # the spikes each step starts from
        if dense_w:  # dW = sum_t z_{t-1}^T dv_t
            if zp is not None:  # one product over all steps
                dw = _outer_sum(zp, dv)
            else:  # z_{t-1} is zs[t-1] (no (T, B, N) copy: fresh pages cost more than a call)
                dw = _outer_sum(z0.detach().unsqueeze(0), first.unsqueeze(0))
                if steps > 1:
                    dw.add_(_outer_sum(zs[:-1], dv[1:]))
        if zp is None and (need_alpha or need_fresh):
            zp = _previous(z0.detach(), zs, starts, fz)
        if need_v0:
            dv0 = alpha * first if subtract else (alpha - alpha * z0) * first
        if need_z0:
            if subtract:
                dz0 = _mm(first, w_back_t) if w_back_t is not None else first * -threshold
            else:
                dz0 = -(alpha * v0 * first)
                if w_back_t is not None:
                    dz0.add_(_mm(first, w_back_t))
        if need_alpha:
            vp = _previous(v0.detach(), vs, starts, None if fv is None else fv.detach())
            prev = vp if subtract else vp - vp * zp
            dalpha_acc = prev * dv
            dalpha = dalpha_acc.sum_to_size(alpha.shape) if alpha.dim() else dalpha_acc.sum()
        if need_fresh:  # the t = -1 terms of the rows that start an episode
            decay = alpha if subtract else alpha - alpha * zp
            dfresh = torch.where(_row_mask(starts, dv), decay * dv, 0.0)
        return du, dw, dv0, dz0, dalpha, None, None, None, None, None, dfresh, None


def _backward_loop(
    walk: _native.Walk, derivative: Callable[[Tensor], Tensor]
) -> tuple[Tensor, Tensor | None]:
    """The reverse walk of :class:`_LIFSequence`'s backward in torch (the reference of the
    compiled one): ``(dv, dv_0 masked where step 0 starts an episode)``, the second None for
    an empty sequence."""
    gz, gv, w_back_t, vs, zs, alpha, threshold, reset, starts = walk
    subtract = reset == "subtract"
    steps = vs.shape[0]
    marks = _start_steps(starts)
    keep = None if starts is None else (~starts).to(vs.dtype).unsqueeze(-1)  # (T, B, 1)
    # Everything below works on (B, N) slices: large temporaries cost more than the
    # per-step dispatch (fresh pages), and dv is the only (T, B, N) buffer allocated.
    dv = torch.empty_like(vs)
    nxt = None  # dv_{t+1}, masked where step t+1 starts an episode
    s_chunk, chunk_start = None, steps
    for t in range(steps - 1, -1, -1):
        v_t, z_t, d = vs[t], zs[t], dv[t]
        if t < chunk_start:  # a new chunk of a few steps: s, and the local part of dv
            chunk_start, chunk_end = max(0, t + 1 - _CHUNK), t + 1
            s_chunk = derivative(vs[chunk_start:chunk_end] - threshold)
            local = dv[chunk_start:chunk_end]  # gv + s gz
            if gz is not None:
                torch.mul(s_chunk, gz[chunk_start:chunk_end], out=local)
            else:
                local.zero_()
            if gv is not None:
                local.add_(gv[chunk_start:chunk_end])
        if nxt is not None:
            # dv_t += s_t * (what step t + 1 sends back to z_t) + decay term.
            s_t = s_chunk[t - chunk_start]
            if w_back_t is not None:  # (subtract: the reset is folded into w_back)
                back = _mm(nxt, w_back_t)
                if not subtract:
                    back.addcmul_(alpha * v_t, nxt, value=-1.0)
                d.addcmul_(s_t, back)
            elif subtract:
                d.addcmul_(s_t, nxt, value=-threshold)
            else:
                d.addcmul_(s_t, (alpha * v_t).mul_(nxt), value=-1.0)
            d.addcmul_(alpha if subtract else alpha - alpha * z_t, nxt)
        nxt = d if not (marks and marks[t]) else d * keep[t]
    return dv, nxt


def li_sequence(
    u: Tensor,
    v0: Tensor,
    alpha: Tensor,
    *,
    starts: Tensor | None = None,
    fresh: Tensor | None = None,
) -> Tensor:
    """A leaky integrator ``v_t = alpha v_{t-1} + u_t`` over a whole sequence (no recurrence).

    The readout's dynamics (:func:`snrl.functional.neurons.li_step`) with the resets of
    :func:`lif_sequence`: where ``starts[t]`` the membrane before step t is ``fresh`` (default
    0; broadcastable to (T, B, N); it receives the gradient of the replaced membrane). The
    backward is the reverse scan ``dv_t = g_t + alpha keep_{t+1} dv_{t+1}``.

    Args:
        u: (T, B, N) input current.
        v0: (B, N) membrane at t = -1.
        alpha: (N,) or scalar decay.
        starts: optional bool (T, B) episode starts.
        fresh: optional replacement membrane.

    Returns:
        (T, B, N) membranes, differentiable with respect to ``u``, ``v0``, ``alpha``, ``fresh``.
    """
    alpha = torch.as_tensor(alpha, dtype=u.dtype, device=u.device)
    if u.dim() != 3 or tuple(v0.shape) != tuple(u.shape[1:]):
        raise UserError(
            f"li_sequence needs u (T, B, N) and v0 (B, N), got {tuple(u.shape)} and "
            f"{tuple(v0.shape)}"
        )
    starts, fv, _ = _resets(u, starts, None if fresh is None else LIFState(fresh, None))
    inputs = (u, v0, alpha, fv)
    if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in inputs):
        return _LISequence.apply(u, v0, alpha, starts, fv)
    with torch.no_grad():
        return _li_loop(u, v0, alpha, starts, fv)


def _li_loop(
    u: Tensor, v0: Tensor, alpha: Tensor, starts: Tensor | None, fv: Tensor | None
) -> Tensor:
    """The membranes of :func:`li_sequence`: the compiled loop where it applies (the same
    roundings), else one ``addcmul`` per step."""
    done = _native.li_forward(u, v0, alpha, starts, fv)
    if done is not None:
        return done
    u, alpha, v = u.detach(), alpha.detach(), v0.detach()
    marks = _start_steps(starts)
    vs = torch.empty_like(u, memory_format=torch.contiguous_format)
    for t in range(u.shape[0]):
        if marks and marks[t]:
            v = torch.where(starts[t].unsqueeze(-1), fv[t].detach(), v)
        v = torch.addcmul(u[t], alpha, v, out=vs[t])
    return vs


class _LISequence(torch.autograd.Function):
    """Whole-sequence leaky integrator with its reverse-scan backward."""

    @staticmethod
    def forward(ctx, u, v0, alpha, starts, fv):
        vs = _li_loop(u, v0, alpha, starts, fv)
        ctx.save_for_backward(v0, alpha, vs, starts, fv)
        return vs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        v0, alpha, vs, starts, fv = ctx.saved_tensors
        need_u, need_v0, need_alpha, _, need_fresh = ctx.needs_input_grad
        marks = _start_steps(starts)
        dv = _native.li_backward(g, alpha, starts)  # the compiled scan where it applies
        if dv is None:
            dv = g.clone(memory_format=torch.contiguous_format)
            for t in range(vs.shape[0] - 2, -1, -1):
                cut = marks and marks[t + 1]  # some row starts an episode at t + 1
                nxt = dv[t + 1] if not cut else dv[t + 1] * ~starts[t + 1, :, None]
                dv[t].addcmul_(alpha, nxt)
        first = dv[0] if not (marks and marks[0]) else dv[0] * ~starts[0, :, None]
        dv0 = alpha * first if need_v0 else None
        dalpha = dfresh = None
        if need_alpha:
            vp = _previous(v0.detach(), vs, starts, None if fv is None else fv.detach())
            acc = (vp * dv).sum((0, 1))
            dalpha = acc.sum_to_size(alpha.shape) if alpha.dim() else acc.sum()
        if need_fresh:
            dfresh = torch.where(starts.unsqueeze(-1), alpha * dv, 0.0)
        return dv if need_u else None, dv0, dalpha, None, dfresh


def check_names(reset: str, backward: str) -> None:
    """Raise UserError on an unknown ``reset`` or ``backward`` of a sequence function
    (:func:`lif_sequence`, :func:`~snrl.functional.alif_sequence.alif_sequence`)."""
    if reset not in RESETS:
        raise UserError(f"unknown reset {reset!r} (use one of {', '.join(RESETS)})")
    if backward not in BACKWARDS:
        raise UserError(f"unknown backward {backward!r} (use one of {', '.join(BACKWARDS)})")


def _check(
    u: Tensor,
    w_rec: Tensor | None,
    v0: Tensor,
    z0: Tensor,
    alpha: Tensor,
    reset: str,
    backward: str,
) -> Tensor:
    """Raise UserError on a bad argument of :func:`lif_sequence`; return ``alpha`` ready to
    broadcast against one step's (B, N), or (G, 1, N) for a group's (G, B, N)."""
    check_names(reset, backward)
    if u.dim() not in (3, 4):
        raise UserError(
            f"u must be (T, B, N), or (T, G, B, N) for a group of layers, got shape "
            f"{tuple(u.shape)} (pass a sequence)"
        )
    group, (b, n) = tuple(u.shape[1:-2]), u.shape[-2:]
    for name, t in (("state.v", v0), ("state.z", z0)):
        if tuple(t.shape) != (*group, b, n):
            raise UserError(
                f"{name} has shape {tuple(t.shape)} but u is {tuple(u.shape)} "
                f"(pass a state of shape {(*group, b, n)})"
            )
    if w_rec is not None and tuple(w_rec.shape) != (*group, n, n):
        raise UserError(f"w_rec has shape {tuple(w_rec.shape)} (expected {(*group, n, n)})")
    allowed = [(*group, n)] if group else [(n,), (1,), ()]
    if tuple(alpha.shape) not in allowed:
        raise UserError(f"alpha has shape {tuple(alpha.shape)} (expected {allowed[0]})")
    return alpha.unsqueeze(-2) if group else alpha
