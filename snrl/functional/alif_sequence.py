r"""A whole ALIF sequence in one call, for the training path.

The counterpart of :mod:`snrl.functional.lif_sequence` for the adaptive-threshold neuron: the
forward pass calls :func:`snrl.functional.neurons.alif_step` (the one definition of the
model) once per step without a graph, with the current ``I_t = u_t + z_{t-1} W_rec``, and
keeps ``v``, ``z`` and ``a``; the backward walks the sequence in reverse with one matmul and
a few elementwise ops per step, where autograd through the step loop records a dozen small
ops per step and replays them one by one. Both loops also exist compiled (``lif_kernel.c``,
through :mod:`snrl.functional._native`, float32 on the CPU; the torch loops here are their
reference and the fallback), and the weight gradient uses the LIF kernel's sparse sum:
together 6.6-6.9x faster than autograd for a layer's forward and backward at PPO's update shape
(``benchmarks/bench_alif_sequence.py``). It is the adjoint of ``alif_step``, derived by hand from
its equations (module docstring of :mod:`snrl.functional.neurons`) and tested equal to
autograd through the step loop (``alif_sequence(..., backward="autograd")``)::

    thr_t = threshold + beta a_t,    s_t = spike_fn'(v_t - thr_t)
    dz_t  = gz_t + dv_{t+1} W_rec^T - thr_{t+1} dv_{t+1} + (1 - rho) da_{t+1}   subtract
    dz_t  = gz_t + dv_{t+1} W_rec^T - alpha v_t dv_{t+1} + (1 - rho) da_{t+1}   zero
    dv_t  = gv_t + s_t dz_t + alpha dv_{t+1}                                     subtract
    dv_t  = gv_t + s_t dz_t + alpha (1 - z_t) dv_{t+1}                           zero
    da_t  = ga_t + rho da_{t+1} - beta s_t dz_t - beta z_{t-1} dv_t              subtract
    da_t  = ga_t + rho da_{t+1} - beta s_t dz_t                                  zero

with ``gz``, ``gv``, ``ga`` the gradients arriving at the outputs and ``dz``, ``dv``, ``da``
the total ones (zero after the last step). Then ``du = dv``, ``dW_rec = sum_t z_{t-1}^T
dv_t``, ``dalpha = sum_t v_{t-1} dv_t`` (times ``1 - z_{t-1}`` for the zero reset), ``drho =
sum_t (a_{t-1} - z_{t-1}) da_t``, and the state gradients are the t = -1 terms: ``dv_{-1} =
alpha dv_0`` (times ``1 - z_{-1}``), ``da_{-1} = rho da_0``, ``dz_{-1}`` as ``dz_t`` above.

Episode resets inside the sequence (``starts``) work as in :func:`lif_sequence`: the state
before step t of a row that starts there is the fresh one, the gradient of the replaced state
stops there and the fresh membrane receives ``alpha dv_t`` (times ``1 - z`` for the zero
reset); the fresh spikes and adaptation receive none (they are not learned: zeros, or
recorded). ``beta`` is a number (a layer's ``params.beta``), so it has no gradient.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor

from snrl.errors import UserError
from snrl.functional import _native
from snrl.functional.lif_sequence import (
    _CHUNK,
    _outer_sum,
    _previous,
    _resets,
    _row_mask,
    _start_steps,
    check_names,
)
from snrl.functional.neurons import ALIFState, alif_step
from snrl.functional.surrogate import derivative_fn


class ALIFStateLike(Protocol):
    """Anything with a membrane ``v``, last spikes ``z`` and adaptation ``a``, each (B, N)."""

    v: Tensor
    z: Tensor
    a: Tensor


def alif_sequence(
    u: Tensor,
    w_rec: Tensor | None,
    state: ALIFStateLike,
    alpha: Tensor,
    rho: Tensor,
    threshold: float,
    beta: float,
    reset: str,
    spike_fn: Callable[[Tensor], Tensor],
    *,
    starts: Tensor | None = None,
    fresh: ALIFStateLike | None = None,
    backward: str = "fused",
) -> tuple[Tensor, Tensor, Tensor]:
    """Run ALIF dynamics over a whole sequence (forward and hand-written backward).

    Args:
        u: (T, B, N) input current without the recurrent term (``x W_in + b``).
        w_rec: (N, N) effective recurrent weights, row i = presynaptic neuron i, or None.
        state: the state at t = -1, fields ``v``, ``z``, ``a``, each (B, N).
        alpha: (N,) (or a scalar tensor) membrane decay per step, ``exp(-dt / tau_m)``.
        rho: (N,) (or a scalar tensor) adaptation decay per step, ``exp(-dt / tau_a)``.
        threshold: baseline firing threshold (membrane units).
        beta: adaptation strength, a number >= 0.
        reset: ``"subtract"`` (of the adaptive threshold) or ``"zero"``.
        spike_fn: as in :func:`~snrl.functional.lif_sequence.lif_sequence`: used for its
            derivative only (the spikes are ``v > thr_t``, the forward of every surrogate).
        starts: optional bool (T, B): row b starts an episode at step t (its state before
            step t is ``fresh``).
        fresh: the replacement state where ``starts``, fields ``v``, ``z``, ``a``
            broadcastable to (T, B, N) (default zeros); only ``fresh.v`` gets a gradient.
        backward: ``"fused"`` (the module docstring's adjoint) or ``"autograd"`` (autograd
            through the ``alif_step`` loop: the reference, and the benchmarks' baseline).

    Returns:
        (z, v, a): spikes, membranes and adaptation, each (T, B, N), differentiable with
        respect to ``u``, ``w_rec``, ``state``'s fields, ``alpha``, ``rho`` and ``fresh.v``
        (once; no double backward with ``"fused"``).

    Raises:
        UserError: on an unknown reset or backward, a negative beta, or mismatched shapes.
    """
    alpha = torch.as_tensor(alpha, dtype=u.dtype, device=u.device)
    rho = torch.as_tensor(rho, dtype=u.dtype, device=u.device)
    v0, z0, a0 = state.v, state.z, state.a
    _check(u, w_rec, (v0, z0, a0), alpha, rho, reset, backward, beta)
    threshold, beta = float(threshold), float(beta)
    starts, fv, fz, fa = _resets(u, starts, fresh, ("v", "z", "a"))
    if backward == "autograd":  # the reference: autograd through the alif_step loop
        s = ALIFState(v0, z0, a0)
        zs, vs, as_ = [], [], []
        for t, u_t in enumerate(u.unbind(0)):
            if starts is not None and bool(starts[t].any()):
                m = starts[t].unsqueeze(-1)
                s = ALIFState(*(torch.where(m, f[t], x) for f, x in zip((fv, fz, fa), s)))
            current = u_t if w_rec is None else u_t + s.z @ w_rec
            z, s = alif_step(current, s, alpha, rho, threshold, beta, spike_fn, reset)
            zs.append(z)
            vs.append(s.v)
            as_.append(s.a)
        if not zs:
            return (u.new_zeros(u.shape),) * 3
        return torch.stack(zs), torch.stack(vs), torch.stack(as_)
    inputs = (u, w_rec, v0, z0, a0, alpha, rho, fv)
    if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in inputs):
        return _ALIFSequence.apply(
            u,
            w_rec,
            v0,
            z0,
            a0,
            alpha,
            rho,
            threshold,
            beta,
            reset,
            spike_fn,
            True,
            starts,
            fv,
            fz,
            fa,
        )
    with torch.no_grad():
        return _forward_loop(
            u,
            w_rec,
            (v0, z0, a0),
            alpha,
            rho,
            threshold,
            beta,
            reset,
            None,
            starts,
            (fv, fz, fa),
        )


def _forward_loop(
    u: Tensor,
    w_rec: Tensor | None,
    state0: tuple[Tensor, Tensor, Tensor],
    alpha: Tensor,
    rho: Tensor,
    threshold: float,
    beta: float,
    reset: str,
    spike_fn: Callable[[Tensor], Tensor] | None,
    starts: Tensor | None,
    fresh: tuple[Tensor | None, Tensor | None, Tensor | None],
) -> tuple[Tensor, Tensor, Tensor]:
    """The forward pass without a graph, ``alif_step`` per step writing into the (T, B, N)
    outputs; spikes by ``v > thr_t`` when ``spike_fn`` is None. Returns (z, v, a)."""
    if spike_fn is None:  # the compiled loop (same equations) where it applies
        done = _native.alif_forward(
            u, w_rec, state0, (alpha, rho), threshold, beta, reset, starts, fresh
        )
        if done is not None:
            return done
    u, alpha, rho = u.detach(), alpha.detach(), rho.detach()
    w = None if w_rec is None else w_rec.detach()
    state = ALIFState(*(x.detach() for x in state0))
    marks = _start_steps(starts)
    vs = torch.empty_like(u, memory_format=torch.contiguous_format)
    zs, as_ = torch.empty_like(vs), torch.empty_like(vs)
    for t in range(u.shape[0]):
        if marks and marks[t]:
            m = starts[t].unsqueeze(-1)
            state = ALIFState(*(torch.where(m, f[t].detach(), x) for f, x in zip(fresh, state)))
        slot = ALIFState(vs[t], zs[t], as_[t])
        if w is None:
            slot.v.copy_(u[t])
        else:
            torch.addmm(u[t], state.z, w, out=slot.v)
        _, state = alif_step(slot.v, state, alpha, rho, threshold, beta, spike_fn, reset, out=slot)
    return zs, vs, as_


class _ALIFSequence(torch.autograd.Function):
    """Whole-sequence ALIF with the hand-written backward of the module docstring."""

    @staticmethod
    def forward(
        ctx,
        u,
        w_rec,
        v0,
        z0,
        a0,
        alpha,
        rho,
        threshold,
        beta,
        reset,
        spike_fn,
        heaviside,
        starts,
        fv,
        fz,
        fa,
    ):
        # heaviside=False runs spike_fn's own forward (a smooth function in the tests, so
        # that finite differences check this backward).
        zs, vs, as_ = _forward_loop(
            u,
            w_rec,
            (v0, z0, a0),
            alpha,
            rho,
            threshold,
            beta,
            reset,
            None if heaviside else spike_fn,
            starts,
            (fv, fz, fa),
        )
        ctx.save_for_backward(w_rec, v0, z0, a0, alpha, rho, zs, vs, as_, starts, fv, fz, fa)
        ctx.consts = (threshold, beta, reset, spike_fn)
        ctx.set_materialize_grads(False)
        return zs, vs, as_

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gz, gv, ga):
        w, v0, z0, a0, alpha, rho, zs, vs, as_, starts, fv, fz, fa = ctx.saved_tensors
        need = ctx.needs_input_grad
        threshold, beta, reset, spike_fn = ctx.consts
        subtract = reset == "subtract"
        w_back_t = None  # dv_{t+1} -> dz_t; subtract: the baseline threshold folded in
        if w is not None:
            w_back = w.detach().clone(memory_format=torch.contiguous_format)
            if subtract:
                w_back.diagonal().sub_(threshold)
            w_back_t = w_back.t().contiguous()
        zp = _previous(z0.detach(), zs, starts, fz)  # the spikes each step starts from
        walk = _native.ALIFWalk(
            (gz, gv, ga),
            w_back_t,
            (vs, zs, as_, zp),
            (alpha, rho),
            threshold,
            beta,
            reset,
            starts,
        )
        done = _native.alif_backward(spike_fn, walk)  # the compiled walk where it applies
        dv, da, first_v, first_a = done or _backward_loop(walk, derivative_fn(spike_fn))
        du = dv if need[0] else None
        dw = None
        if need[1] and w is not None:  # by the LIF kernel's sparse sum where it applies
            dw = _native.lif_weight_grad(z0.detach(), zs, starts, fz, dv)
            dw = _outer_sum(zp, dv) if dw is None else dw
        dv0 = dz0 = da0 = dalpha = drho = dfresh = None
        if need[2]:
            dv0 = alpha * first_v if subtract else (alpha - alpha * z0) * first_v
        if need[3]:  # what step 0 sends back to z_{-1}, with thr_0 = threshold + beta a_0
            dz0 = (1.0 - rho) * first_a
            if w_back_t is not None:
                dz0.add_(first_v @ w_back_t)
            elif subtract:
                dz0.sub_(first_v, alpha=threshold)
            if subtract:
                dz0.addcmul_(as_[0], first_v, value=-beta)
            else:
                dz0.addcmul_(alpha * v0.detach(), first_v, value=-1.0)
        if need[4]:
            da0 = rho * first_a
        if need[5]:
            vp = _previous(v0.detach(), vs, starts, None if fv is None else fv.detach())
            dalpha = ((vp if subtract else vp - vp * zp) * dv).sum((0, 1))
            dalpha = dalpha.sum_to_size(alpha.shape) if alpha.dim() else dalpha.sum()
        if need[6]:
            ap = _previous(a0.detach(), as_, starts, fa)
            drho = ((ap - zp) * da).sum((0, 1))
            drho = drho.sum_to_size(rho.shape) if rho.dim() else drho.sum()
        if need[13]:  # the t = -1 terms of the rows that start an episode
            decay = alpha if subtract else alpha - alpha * zp
            dfresh = torch.where(_row_mask(starts, dv), decay * dv, 0.0)
        return (du, dw, dv0, dz0, da0, dalpha, drho) + (None,) * 6 + (dfresh, None, None)


def _backward_loop(
    walk: _native.ALIFWalk, derivative: Callable[[Tensor], Tensor]
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The reverse walk of :class:`_ALIFSequence`'s backward in torch (the reference of the
    compiled one): ``(dv, da, dv_0, da_0)``, the last two masked where step 0 starts an
    episode (what reaches the state at t = -1)."""
    (gz, gv, ga), w_back_t, (vs, zs, as_, zp), (alpha, rho) = walk[:4]
    threshold, beta, reset, starts = walk[4:]
    subtract = reset == "subtract"
    steps = vs.shape[0]
    marks = _start_steps(starts)
    keep = None if starts is None else (~starts).to(vs.dtype).unsqueeze(-1)  # (T, B, 1)
    dv, da = torch.zeros_like(vs), torch.zeros_like(vs)
    one_minus_rho = 1.0 - rho
    nxt_v = nxt_a = None  # dv_{t+1}, da_{t+1}, masked where step t+1 starts an episode
    s_chunk, chunk_start = None, steps
    for t in range(steps - 1, -1, -1):
        if t < chunk_start:  # the surrogate derivatives of a few steps at once
            chunk_start = max(0, t + 1 - _CHUNK)
            c = slice(chunk_start, t + 1)
            s_chunk = derivative(vs[c] - (as_[c] * beta + threshold))
        s_t = s_chunk[t - chunk_start]
        dz = torch.zeros_like(s_t) if gz is None else gz[t].clone()
        d_v, d_a = dv[t], da[t]
        if nxt_v is not None:
            if w_back_t is not None:
                dz.add_(nxt_v @ w_back_t)
            elif subtract:
                dz.sub_(nxt_v, alpha=threshold)
            if subtract:  # the adaptive part of thr_{t+1}
                dz.addcmul_(as_[t + 1], nxt_v, value=-beta)
            else:
                dz.addcmul_(alpha * vs[t], nxt_v, value=-1.0)
            dz.addcmul_(one_minus_rho, nxt_a)
            d_v.addcmul_(alpha if subtract else alpha - alpha * zs[t], nxt_v)
            d_a.addcmul_(rho, nxt_a)
        sdz = dz.mul_(s_t)
        d_v.add_(sdz)
        if gv is not None:
            d_v.add_(gv[t])
        d_a.sub_(sdz, alpha=beta)
        if subtract:
            d_a.addcmul_(zp[t], d_v, value=-beta)
        if ga is not None:
            d_a.add_(ga[t])
        if marks and marks[t]:
            nxt_v, nxt_a = d_v * keep[t], d_a * keep[t]
        else:
            nxt_v, nxt_a = d_v, d_a
    if nxt_v is None:  # an empty sequence
        nxt_v = nxt_a = vs.new_zeros(vs.shape[1:])
    return dv, da, nxt_v, nxt_a


def _check(
    u: Tensor,
    w_rec: Tensor | None,
    state: tuple[Tensor, Tensor, Tensor],
    alpha: Tensor,
    rho: Tensor,
    reset: str,
    backward: str,
    beta: float,
) -> None:
    """Raise UserError on a bad argument of :func:`alif_sequence`."""
    check_names(reset, backward)
    if isinstance(beta, Tensor) or float(beta) < 0:
        raise UserError(f"beta must be a number >= 0, got {beta!r}")
    if u.dim() != 3:
        raise UserError(f"u must be (T, B, N), got shape {tuple(u.shape)} (pass a sequence)")
    b, n = u.shape[1:]
    for name, x in zip(("state.v", "state.z", "state.a"), state):
        if tuple(x.shape) != (b, n):
            raise UserError(
                f"{name} has shape {tuple(x.shape)} but u is {tuple(u.shape)} "
                f"(pass a state of shape {(b, n)})"
            )
    if w_rec is not None and tuple(w_rec.shape) != (n, n):
        raise UserError(f"w_rec has shape {tuple(w_rec.shape)} (expected {(n, n)})")
    for name, x in (("alpha", alpha), ("rho", rho)):
        if tuple(x.shape) not in [(n,), (1,), ()]:
            raise UserError(f"{name} has shape {tuple(x.shape)} (expected {(n,)})")
