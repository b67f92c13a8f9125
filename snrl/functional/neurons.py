r"""Neuron models: one state type and one pure step function per model.

Every model receives the synaptic input current of step ``t``,

    I_t = x_t W_in + r_{t-1} W_rec + b  (+ sigma eps_t),

computed by its layer (``r`` is the recurrent signal: the spikes ``z`` of a spiking layer, the
membrane ``v`` of a leaky integrator; ``sigma eps_t``, ``eps_t ~ N(0, 1)`` independent per
neuron and step, is the optional current noise of a spiking layer in training mode,
``noise_std = sigma``). Decay factors are ``alpha = exp(-dt / tau_m)``,
``alpha_syn = exp(-dt / tau_syn)`` and ``rho = exp(-dt / tau_a)``; ``H`` is the Heaviside
step (forward) with a surrogate derivative (backward). All states are (B, N).

LIF (leaky integrate-and-fire)::

    v_t = alpha v_{t-1} + I_t - threshold z_{t-1}          (reset="subtract")
    v_t = alpha v_{t-1} (1 - z_{t-1}) + I_t                 (reset="zero")
    z_t = H(v_t - threshold)

ALIF (adaptive threshold, LSNN of Bellec et al. 2018)::

    a_t   = rho a_{t-1} + (1 - rho) z_{t-1}
    thr_t = threshold + beta a_t
    v_t   = alpha v_{t-1} + I_t - thr_t z_{t-1}             (reset="subtract")
    v_t   = alpha v_{t-1} (1 - z_{t-1}) + I_t               (reset="zero")
    z_t   = H(v_t - thr_t)

SpyLIF (LIF with a synaptic current, as in Zenke's SpyTorch)::

    i_t = alpha_syn i_{t-1} + I_t
    v_t = alpha v_{t-1} + i_t - threshold z_{t-1}           (reset="subtract")
    v_t = alpha v_{t-1} (1 - z_{t-1}) + i_t                 (reset="zero")
    z_t = H(v_t - threshold)

LI (non-spiking leaky integrator; its membrane is its output)::

    v_t = alpha v_{t-1} + I_t

Gradients flow through the reset terms as well (nothing is detached).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from snrl.functional.surrogate import SpikeFn

RESETS = ("subtract", "zero")
"""The reset rules of the spiking models (equations above)."""


class LIFState(NamedTuple):
    """State of a LIF layer."""

    v: Tensor
    """(B, N) membrane potential."""
    z: Tensor
    """(B, N) spikes of the last step (0/1)."""


class ALIFState(NamedTuple):
    """State of an ALIF layer."""

    v: Tensor
    """(B, N) membrane potential."""
    z: Tensor
    """(B, N) spikes of the last step (0/1)."""
    a: Tensor
    """(B, N) adaptation variable (a low-passed spike train)."""


class SpyLIFState(NamedTuple):
    """State of a SpyLIF layer."""

    v: Tensor
    """(B, N) membrane potential."""
    z: Tensor
    """(B, N) spikes of the last step (0/1)."""
    i: Tensor
    """(B, N) synaptic current."""


class LIState(NamedTuple):
    """State of a leaky-integrator (readout) layer."""

    v: Tensor
    """(B, N) membrane potential (the layer's output)."""


# States round-trip through torch.save / torch.load(weights_only=True).
torch.serialization.add_safe_globals([LIFState, ALIFState, SpyLIFState, LIState])


def _integrate(
    drive: Tensor,
    v: Tensor,
    z: Tensor,
    alpha: Tensor,
    reset_by: Tensor | float,
    reset: str,
    out: Tensor | None = None,
) -> Tensor:
    """``alpha v_{t-1} + drive`` with the reset of the neurons that spiked at t-1.

    ``out`` (no-graph use only) receives the result; it may be ``drive`` itself.
    """
    if reset == "subtract":
        if isinstance(reset_by, Tensor):
            return torch.addcmul(drive, alpha, v, out=out).sub_(reset_by * z)
        return torch.addcmul(drive, alpha, v, out=out).sub_(z, alpha=reset_by)
    return torch.addcmul(drive, alpha * v, 1.0 - z, out=out)


def _spike(
    v: Tensor, threshold: Tensor | float, spike_fn: SpikeFn | None, out: Tensor | None = None
) -> Tensor:
    """``H(v - threshold)``: a plain comparison when ``spike_fn`` is None (no graph)."""
    if spike_fn is None:  # (a comparison written straight into a float tensor: one op)
        return torch.gt(v, threshold, out=torch.empty_like(v) if out is None else out)
    z = spike_fn(v - threshold).to(v.dtype)  # snntorch's surrogates emit float32
    return z if out is None else out.copy_(z)


def lif_step(
    current: Tensor,
    state: LIFState,
    alpha: Tensor,
    threshold: float,
    spike_fn: SpikeFn | None,
    reset: str = "subtract",
    *,
    out: LIFState | None = None,
) -> tuple[Tensor, LIFState]:
    """One LIF step (equations in the module docstring).

    Args:
        current: (B, N) input current ``I_t``.
        state: the state at t-1.
        alpha: (N,) membrane decay ``exp(-dt / tau_m)``.
        threshold: spike threshold.
        spike_fn: maps ``v - threshold`` to spikes with a surrogate gradient; None for a
            plain comparison ``v > threshold`` (inference, no graph).
        reset: ``"subtract"`` or ``"zero"``.
        out: (B, N) buffers that receive ``v_t`` and ``z_t`` (without autograd only; ``out.v``
            may be ``current`` itself). The fused sequence path writes its (T, B, N) outputs
            this way, step by step.

    Returns:
        ``(z_t, LIFState(v_t, z_t))``.
    """
    v = _integrate(
        current, state.v, state.z, alpha, threshold, reset, None if out is None else out.v
    )
    z = _spike(v, threshold, spike_fn, None if out is None else out.z)
    return z, LIFState(v, z)


def alif_step(
    current: Tensor,
    state: ALIFState,
    alpha: Tensor,
    rho: Tensor,
    threshold: float,
    beta: Tensor | float,
    spike_fn: SpikeFn | None,
    reset: str = "subtract",
    *,
    out: ALIFState | None = None,
) -> tuple[Tensor, ALIFState]:
    """One ALIF step (equations in the module docstring).

    The arguments of :func:`lif_step`, where ``threshold`` is the baseline threshold,
    ``spike_fn`` maps ``v - thr_t`` to spikes, the ``"subtract"`` reset subtracts the
    adaptive threshold ``thr_t`` and ``out`` has a third buffer, ``out.a``; and:

    Args:
        rho: (N,) adaptation decay ``exp(-dt / tau_a)``.
        beta: adaptation strength (threshold increase per unit of ``a``).

    Returns:
        ``(z_t, ALIFState(v_t, z_t, a_t))``.
    """
    if out is None:
        a = rho * state.a + (1.0 - rho) * state.z
    else:  # the same two products and sum, written into out.a
        a = torch.mul(rho, state.a, out=out.a).add_((1.0 - rho) * state.z)
    thr = threshold + beta * a
    v = _integrate(current, state.v, state.z, alpha, thr, reset, None if out is None else out.v)
    z = _spike(v, thr, spike_fn, None if out is None else out.z)
    return z, ALIFState(v, z, a)


def spylif_step(
    current: Tensor,
    state: SpyLIFState,
    alpha: Tensor,
    alpha_syn: Tensor,
    threshold: float,
    spike_fn: SpikeFn | None,
    reset: str = "subtract",
) -> tuple[Tensor, SpyLIFState]:
    """One SpyLIF step (equations in the module docstring): the arguments of :func:`lif_step`
    (without ``out``), and ``alpha_syn``, the (N,) synaptic decay ``exp(-dt / tau_syn)``.

    Returns:
        ``(z_t, SpyLIFState(v_t, z_t, i_t))``.
    """
    i = torch.addcmul(current, alpha_syn, state.i)
    v = _integrate(i, state.v, state.z, alpha, threshold, reset)
    z = _spike(v, threshold, spike_fn)
    return z, SpyLIFState(v, z, i)


def li_step(current: Tensor, state: LIState, alpha: Tensor) -> tuple[Tensor, LIState]:
    """One leaky-integrator step ``v_t = alpha v_{t-1} + I_t``.

    Args:
        current: (B, N) input current ``I_t``.
        state: the state at t-1.
        alpha: (N,) membrane decay ``exp(-dt / tau_m)``.

    Returns:
        ``(v_t, LIState(v_t))``.
    """
    v = torch.addcmul(current, alpha, state.v)
    return v, LIState(v)
