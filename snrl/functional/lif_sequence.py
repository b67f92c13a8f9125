"""A whole LIF sequence in one call, for the training path.

The dynamics are those of the LIF step function (one equation, written here once more only
as the contract this module implements)::

    I_t = u_t + z_{t-1} W_rec                       (no recurrent term if W_rec is None)
    v_t = alpha * v_{t-1} + I_t - threshold * z_{t-1}          reset == "subtract"
    v_t = alpha * v_{t-1} * (1 - z_{t-1}) + I_t                reset == "zero"
    z_t = spike_fn(v_t - threshold)

Gradients flow through every term, the reset included (nothing is detached).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import torch
from torch import Tensor

from snrl.errors import UserError

RESETS = ("subtract", "zero")


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
    """Run LIF dynamics over a whole sequence.

    Args:
        u: (T, B, N) input current without the recurrent term (``x W_in + b``).
        w_rec: (N, N) effective recurrent weights, row i = presynaptic neuron i, or None.
        state: state at t = -1 with fields ``v`` and ``z``, each (B, N).
        alpha: (N,) membrane decay per step, ``exp(-dt / tau_m)``.
        threshold: firing threshold (same units as the membrane).
        reset: ``"subtract"`` or ``"zero"``.
        spike_fn: elementwise Heaviside forward / surrogate backward, applied to
            ``v - threshold`` (any snntorch.surrogate callable).

    Returns:
        (z, v): spikes and membranes, each (T, B, N).
    """
    _check(u, w_rec, state, alpha, reset)
    v, z = state.v, state.z
    zs, vs = [], []
    for t in range(u.shape[0]):
        current = u[t] if w_rec is None else u[t] + z @ w_rec
        if reset == "subtract":
            v = alpha * v + current - threshold * z
        else:
            v = alpha * v * (1.0 - z) + current
        z = spike_fn(v - threshold).to(v.dtype)
        zs.append(z)
        vs.append(v)
    return torch.stack(zs), torch.stack(vs)


def _check(u: Tensor, w_rec: Tensor | None, state: LIFStateLike, alpha: Tensor, reset: str) -> None:
    if reset not in RESETS:
        raise UserError(f"unknown reset {reset!r} (use one of {', '.join(RESETS)})")
    if u.dim() != 3:
        raise UserError(f"u must be (T, B, N), got shape {tuple(u.shape)} (pass a sequence)")
    _, b, n = u.shape
    for name, t in (("state.v", state.v), ("state.z", state.z)):
        if tuple(t.shape) != (b, n):
            raise UserError(
                f"{name} has shape {tuple(t.shape)} but u is {tuple(u.shape)} "
                f"(pass a state of shape ({b}, {n}))"
            )
    if w_rec is not None and tuple(w_rec.shape) != (n, n):
        raise UserError(f"w_rec has shape {tuple(w_rec.shape)} (expected ({n}, {n}))")
    if alpha.shape not in ((n,), ()):
        raise UserError(f"alpha has shape {tuple(alpha.shape)} (expected ({n},))")
