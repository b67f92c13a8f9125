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
step-function loop (:func:`lif_sequence_autograd`)::

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
threshold dv = dv (W - threshold I)^T``. On CPU float32 the backward's products use oneDNN's
kernel when it is present (1.7x MKL's on AMD Zen here); see ``docs/benchmarks.md`` for the
measurements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor

from snrl.errors import UserError
from snrl.functional.neurons import RESETS, LIFState, lif_step
from snrl.functional.surrogate import derivative_fn

_CHUNK = 8  # time steps per surrogate-derivative call in the backward pass


class LIFStateLike(Protocol):
    """Anything with a membrane ``v`` and last spikes ``z``, each (B, N)."""

    v: Tensor
    z: Tensor


def lif_sequence(
    u: Tensor,
    w_rec: Tensor | None,
    state: LIFStateLike,
    alpha: Tensor,
    threshold: float,
    reset: str,
    spike_fn: Callable[[Tensor], Tensor],
) -> tuple[Tensor, Tensor]:
    """Run LIF dynamics over a whole sequence (forward and hand-written backward).

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

    Returns:
        (z, v): spikes and membranes, each (T, B, N), differentiable with respect to ``u``,
        ``w_rec``, ``state.v``, ``state.z`` and ``alpha`` (once; no double backward).

    Raises:
        ValueError: on an unknown reset or mismatched shapes.
    """
    alpha = torch.as_tensor(alpha, dtype=u.dtype, device=u.device)
    v0, z0 = state.v, state.z
    _check(u, w_rec, v0, z0, alpha, reset)
    threshold = float(threshold)
    inputs = (u, w_rec, v0, z0, alpha)
    if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in inputs):
        return _LIFSequence.apply(u, w_rec, v0, z0, alpha, threshold, reset, spike_fn, True)
    with torch.no_grad():
        return _forward_loop(u, w_rec, v0, z0, alpha, threshold, reset, None)


def lif_sequence_autograd(
    u: Tensor,
    w_rec: Tensor | None,
    state: LIFStateLike,
    alpha: Tensor,
    threshold: float,
    reset: str,
    spike_fn: Callable[[Tensor], Tensor],
) -> tuple[Tensor, Tensor]:
    """Same as :func:`lif_sequence`, as a plain autograd loop over ``lif_step``.

    The reference the fused path is tested against and the baseline of
    ``benchmarks/bench_layers.py``.
    """
    alpha = torch.as_tensor(alpha, dtype=u.dtype, device=u.device)
    _check(u, w_rec, state.v, state.z, alpha, reset)
    s = LIFState(state.v, state.z)
    zs, vs = [], []
    for u_t in u.unbind(0):
        current = u_t if w_rec is None else u_t + s.z @ w_rec
        z, s = lif_step(current, s, alpha, threshold, spike_fn, reset)
        zs.append(z)
        vs.append(s.v)
    if not zs:
        return u.new_zeros(u.shape), u.new_zeros(u.shape)
    return torch.stack(zs), torch.stack(vs)


def _forward_loop(
    u: Tensor,
    w_rec: Tensor | None,
    v0: Tensor,
    z0: Tensor,
    alpha: Tensor,
    threshold: float,
    reset: str,
    spike_fn: Callable[[Tensor], Tensor] | None,
) -> tuple[Tensor, Tensor]:
    """The forward pass without a graph: ``lif_step`` per step; returns (T, B, N) (z, v).

    With ``spike_fn=None`` the spikes are the Heaviside step ``v > threshold`` (the forward of
    every surrogate, bit for bit, at a tenth of the cost of calling one per step).
    """
    u, alpha = u.detach(), alpha.detach()
    state = LIFState(v0.detach(), z0.detach())
    w = None if w_rec is None else w_rec.detach()
    # lif_step writes straight into the (T, B, N) outputs (the current is built in v_t's
    # slot by one addmm, faster here than oneDNN's product plus an add): collecting per-step
    # tensors and stacking them would hold both copies at once (+25 % peak memory in
    # training) and cost a third more time.
    vs = torch.empty_like(u, memory_format=torch.contiguous_format)
    zs = torch.empty_like(vs)
    for t in range(u.shape[0]):
        slot = LIFState(vs[t], zs[t])
        if w is None:
            slot.v.copy_(u[t])
        else:
            torch.addmm(u[t], state.z, w, out=slot.v)
        _, state = lif_step(slot.v, state, alpha, threshold, spike_fn, reset, out=slot)
    return zs, vs


def _onednn_matmul_works() -> bool:
    """Whether oneDNN's fp32 matmul op exists here and agrees with torch.mm (checked once).

    On CPUs where MKL's sgemm does not use the full vector width (e.g. AMD Zen), oneDNN's
    kernel is 1.7x faster on the per-step (B, N) x (N, N) products. Private torch op, hence
    the probe (contiguous and transposed inputs) and the torch.mm fallback.
    """
    try:
        op = torch.ops.mkldnn._linear_pointwise
        if not torch.backends.mkldnn.is_available():
            return False
        g = torch.Generator().manual_seed(0)
        a, b = torch.randn(6, 9, generator=g), torch.randn(4, 9, generator=g)
        at, bt = torch.randn(9, 6, generator=g).t(), torch.randn(9, 4, generator=g).t()
        return all(
            torch.allclose(op(x, y, None, "none", [], ""), x @ y.t(), rtol=1e-5, atol=1e-5)
            for x, y in ((a, b), (at, bt))
        )
    except (AttributeError, RuntimeError):
        return False


_ONEDNN: dict[str, bool] = {}  # "ok" -> result of the one-time probe (a capability, not state)


def _matmul_nt(a: Tensor, b: Tensor) -> Tensor:
    """``a @ b.T`` for 2-D tensors, by oneDNN's kernel for CPU float32 where it works."""
    if a.dtype == torch.float32 and b.dtype == torch.float32 and a.device.type == "cpu":
        ok = _ONEDNN.get("ok")
        if ok is None:
            ok = _ONEDNN["ok"] = _onednn_matmul_works()
        if ok:
            return torch.ops.mkldnn._linear_pointwise(a, b, None, "none", [], "")
    return torch.mm(a, b.t())


class _LIFSequence(torch.autograd.Function):
    """Whole-sequence LIF with the hand-written backward of the module docstring."""

    @staticmethod
    def forward(ctx, u, w_rec, v0, z0, alpha, threshold, reset, spike_fn, heaviside):
        # heaviside=True: spikes by `v > threshold`, spike_fn only for its derivative (the
        # contract of lif_sequence); False: spike_fn's own forward (any smooth elementwise
        # function, which lets tests check this backward by finite differences).
        forward_fn = None if heaviside else spike_fn
        zs, vs = _forward_loop(u, w_rec, v0, z0, alpha, threshold, reset, forward_fn)
        ctx.save_for_backward(w_rec, v0, z0, alpha, zs, vs)
        ctx.threshold, ctx.reset, ctx.spike_fn = threshold, reset, spike_fn
        ctx.set_materialize_grads(False)
        return zs, vs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, gz, gv):
        w, v0, z0, alpha, zs, vs = ctx.saved_tensors
        need_u, need_w, need_v0, need_z0, need_alpha = ctx.needs_input_grad[:5]
        threshold, reset, spike_fn = ctx.threshold, ctx.reset, ctx.spike_fn
        steps = vs.shape[0]
        subtract = reset == "subtract"
        derivative = derivative_fn(spike_fn)
        # Everything below works on (B, N) slices: large temporaries cost more than the
        # per-step dispatch (fresh pages), and dv is the only (T, B, N) buffer allocated.
        w_back = None  # dv_{t+1} -> dz_t is dv_{t+1} @ w_back.T
        if w is not None:
            w_back = w.detach().clone(memory_format=torch.contiguous_format)
            if subtract:  # dv W^T - threshold dv = dv (W - threshold I)^T
                w_back.diagonal().sub_(threshold)
        dv = torch.empty_like(vs)
        dalpha_acc = vs.new_zeros(vs.shape[-1]) if need_alpha else None
        nxt = None  # dv_{t+1}
        n = vs.shape[-1]
        dw = torch.zeros_like(w_back) if need_w and w_back is not None else None
        s_chunk, chunk_start, chunk_end = None, steps, steps
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
                if w_back is not None:  # (subtract: the reset is folded into w_back)
                    back = _matmul_nt(nxt, w_back)
                    if not subtract:
                        back.addcmul_(alpha * v_t, nxt, value=-1.0)
                    d.addcmul_(s_t, back)
                elif subtract:
                    d.addcmul_(s_t, nxt, value=-threshold)
                else:
                    d.addcmul_(s_t, (alpha * v_t).mul_(nxt), value=-1.0)
                d.addcmul_(alpha if subtract else alpha - alpha * z_t, nxt)
                if need_alpha:
                    prev = v_t if subtract else v_t - v_t * z_t
                    dalpha_acc.add_(torch.sum(prev * nxt, 0))
            nxt = d
            lo = max(chunk_start, 1)
            if dw is not None and t == chunk_start and chunk_end > lo:
                # dW += sum over the chunk of z_{t-1}^T dv_t, while dv is still in cache.
                z_prev = zs[lo - 1 : chunk_end - 1].reshape(-1, n)
                dw.add_(_matmul_nt(z_prev.t(), dv[lo:chunk_end].reshape(-1, n).t()))

        first = nxt if nxt is not None else torch.zeros_like(v0)
        du = dv if need_u else None
        dv0 = dz0 = dalpha = None
        if dw is not None:  # the t = 0 term, z_{-1} = state.z
            dw.add_(_matmul_nt(z0.t(), first.t()))
        if need_v0:
            dv0 = alpha * first if subtract else (alpha - alpha * z0) * first
        if need_z0:
            if subtract:
                if w_back is not None:
                    dz0 = _matmul_nt(first, w_back)
                else:
                    dz0 = first * -threshold
            else:
                dz0 = -(alpha * v0 * first)
                if w_back is not None:
                    dz0.add_(_matmul_nt(first, w_back))
        if need_alpha:
            prev = v0 if subtract else v0 - v0 * z0
            dalpha_acc.add_(torch.sum(prev * first, 0))
            dalpha = dalpha_acc.sum_to_size(alpha.shape) if alpha.dim() else dalpha_acc.sum()
        return du, dw, dv0, dz0, dalpha, None, None, None, None


def _check(
    u: Tensor, w_rec: Tensor | None, v0: Tensor, z0: Tensor, alpha: Tensor, reset: str
) -> None:
    if reset not in RESETS:
        raise UserError(f"unknown reset {reset!r} (use one of {', '.join(RESETS)})")
    if u.dim() != 3:
        raise UserError(f"u must be (T, B, N), got shape {tuple(u.shape)} (pass a sequence)")
    _, b, n = u.shape
    for name, t in (("state.v", v0), ("state.z", z0)):
        if tuple(t.shape) != (b, n):
            raise UserError(
                f"{name} has shape {tuple(t.shape)} but u is {tuple(u.shape)} "
                f"(pass a state of shape ({b}, {n}))"
            )
    if w_rec is not None and tuple(w_rec.shape) != (n, n):
        raise UserError(f"w_rec has shape {tuple(w_rec.shape)} (expected ({n}, {n}))")
    if tuple(alpha.shape) not in ((n,), (1,), ()):
        raise UserError(f"alpha has shape {tuple(alpha.shape)} (expected ({n},))")
