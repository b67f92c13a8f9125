r"""e-prop (Bellec et al. 2020, Nat. Commun. 11:3625): eligibility traces for snrl's LIF and
ALIF dynamics, carried forward one step at a time.

e-prop writes the gradient of a loss ``E`` with respect to a weight ``W_ji`` (presynaptic
``i``, postsynaptic ``j``) as ``dE/dW_ji = sum_t L_j^t e_ji^t``: a learning signal ``L_j^t``
(how the loss depends on the spike ``z_j^t``) times an eligibility trace ``e_ji^t`` (how the
spike depends on the weight through the neuron's own state, all other spikes held fixed).
With the exact learning signal (the total ``dE/dz_j^t``, through every later step) the sum is
BPTT's gradient; e-prop keeps only the part of ``L`` a readout broadcasts at step ``t``.

The traces follow snrl's discretization (:mod:`snrl.functional.neurons`), in which the
input current ``I_t = x_t W_in + z_{t-1} W_rec + b`` enters the membrane unscaled::

    LIF    v_t = alpha v_{t-1} + I_t - threshold z_{t-1}          z_t = H(v_t - threshold)
    ALIF   a_t = rho a_{t-1} + (1 - rho) z_{t-1},   thr_t = threshold + beta a_t
           v_t = alpha v_{t-1} + I_t - thr_t z_{t-1}              z_t = H(v_t - thr_t)

Every use of a spike as a spike (the recurrent current, the readout, the ``z_{t-1}`` of the
reset) is what the learning signal accounts for: those spikes are held fixed in the traces
(the paper's stop-gradient on the recurrent spikes and the reset). The neuron's own
adaptation ``a`` is hidden state, so the spikes feeding it are not held fixed (the paper's
ALIF traces). With ``pre_t`` the presynaptic input of step ``t`` (``x_t`` for input weights,
``z_{t-1}`` for recurrent ones, 1 for the bias) and ``psi_t = H'(v_t - thr_t)`` the
surrogate pseudo-derivative::

    eps^a_t = rho_j eps^a_{t-1} + (1 - rho_j) e_{t-1}                         (ALIF only)
    eps^v_t = alpha_j k_t eps^v_{t-1} + pre_t - r_t
    e_t     = psi_t (eps^v_t - beta eps^a_t)

with ``k_t = 1`` for reset="subtract" and ``1 - z_{t-1,j}`` for reset="zero", and
``r_t = beta z_{t-1,j} eps^a_t`` for an ALIF layer with reset="subtract" (snrl subtracts the
adaptive threshold ``thr_t``, which depends on the weights through ``a``; the paper's model
subtracts a fixed threshold, where this term is 0), else 0. Optionally
(``reset_factor``) the reset's spike counts as the neuron's own state too, which adds
``-c_t e_{t-1}`` to ``eps^v_t`` (``c_t`` its factor in the reset).

``eps^v`` is the presynaptic trace filtered with the membrane decay (``zbar_i^{t-1}`` of the
paper when ``pre = z``); ``eps^a`` unrolls to the paper's
``eps^a_{t+1} = psi_t eps^v_t + (rho - psi_t beta) eps^a_t`` with snrl's ``(1 - rho)``
input scaling of ``a``. A readout leaky integrator with decay ``kappa`` turns the per-step
error into the learning signal of all earlier steps; forward in time that is the filtered
trace ``F_kappa(e)_t = kappa F_kappa(e)_{t-1} + e_t``, and ``sum_t L_t F_kappa(e)_t`` is the
gradient (``L_t`` the readout's error at ``t`` fed back through ``B``).

Everything here is carried step by step: memory is (B, I, N) per trace whatever the sequence
length. Traces live in the weights' orientation: index ``[b, i, j]``, row ``i`` presynaptic.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from snrl.errors import UserError


class EligibilityState(NamedTuple):
    """The eligibility vectors of one layer, each (B, I, N) (``I`` presynaptic inputs)."""

    eps_v: Tensor
    """Presynaptic input filtered with the membrane decay (``eps^v``)."""
    eps_a: Tensor | None
    """The adaptation eligibility vector ``eps^a`` (ALIF), None for LIF."""
    e: Tensor
    """The eligibility trace ``e`` of the last step."""
    fe: Tensor | None
    """``F_kappa(e)``, the trace filtered with the readout's decay; None when not kept."""


def initial_eligibility(
    batch: int,
    n_pre: int,
    n_post: int,
    *,
    adaptive: bool,
    filtered: bool,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> EligibilityState:
    """All-zero eligibility vectors (a state that does not depend on the weights).

    Args:
        batch: rows ``B``.
        n_pre: presynaptic inputs ``I`` (e.g. input features + neurons + 1 for the bias).
        n_post: neurons ``N``.
        adaptive: keep ``eps^a`` (ALIF).
        filtered: keep ``F_kappa(e)``.
        device: torch device.
        dtype: torch dtype.
    """

    def zeros() -> Tensor:
        return torch.zeros(batch, n_pre, n_post, device=device, dtype=dtype)

    return EligibilityState(
        zeros(), zeros() if adaptive else None, zeros(), zeros() if filtered else None
    )


def eligibility_step(
    state: EligibilityState,
    pre: Tensor,
    psi: Tensor,
    alpha: Tensor,
    *,
    rho: Tensor | None = None,
    beta: float | Tensor = 0.0,
    z_prev: Tensor | None = None,
    reset: str = "subtract",
    reset_factor: Tensor | None = None,
    kappa: Tensor | float | None = None,
) -> EligibilityState:
    """One step of the eligibility vectors (equations in the module docstring).

    Args:
        state: the vectors after step t-1.
        pre: (B, I) presynaptic input of step t.
        psi: (B, N) pseudo-derivative ``H'(v_t - thr_t)`` of step t.
        alpha: (N,) membrane decay.
        rho: (N,) adaptation decay (ALIF; the state must hold ``eps_a``).
        beta: adaptation strength (ALIF).
        z_prev: (B, N) the layer's spikes ``z_{t-1}`` (the state before step t); needed for
            reset="zero" and for an ALIF layer.
        reset: the layer's reset rule, ``"subtract"`` or ``"zero"``.
        reset_factor: None (the paper's rule: the spike in the reset term is held fixed), or
            (B, N) the factor ``c_t`` of ``z_{t-1}`` in the reset, to count the reset as the
            neuron's own state: ``eps^v_t -= c_t e_{t-1}`` (``c_t = thr_t`` for "subtract",
            ``alpha v_{t-1}`` for "zero"). Then a layer without recurrence gets BPTT's exact
            gradient from its readout's signal alone.
        kappa: the readout's decay, scalar or (N,)-broadcastable; needed when the state keeps
            ``fe``.

    Returns:
        The vectors after step t; ``e`` is ``e_t``.
    """
    adaptive = state.eps_a is not None
    if (reset == "zero" or adaptive) and z_prev is None:
        raise UserError("this eligibility step needs z_prev (the spikes before the step)")
    decay = alpha if reset == "subtract" else alpha * (1.0 - z_prev)[:, None, :]
    eps_v = torch.addcmul(pre[:, :, None].expand_as(state.eps_v), decay, state.eps_v)
    if reset_factor is not None:
        eps_v = eps_v - reset_factor[:, None, :] * state.e
    if adaptive:
        if rho is None:
            raise UserError("an ALIF eligibility step needs rho (the adaptation decay)")
        eps_a = rho * state.eps_a + (1.0 - rho) * state.e
        if reset == "subtract":  # the reset subtracts thr_t = threshold + beta a_t
            eps_v = eps_v - beta * z_prev[:, None, :] * eps_a
        e = psi[:, None, :] * (eps_v - beta * eps_a)
    else:
        eps_a = None
        e = psi[:, None, :] * eps_v
    fe = None
    if state.fe is not None:
        if kappa is None:
            raise UserError("a filtered eligibility state needs kappa (the readout's decay)")
        fe = kappa * state.fe + e
    return EligibilityState(eps_v, eps_a, e, fe)


def reset_rows(state: EligibilityState, rows: Tensor) -> EligibilityState:
    """Zero the vectors of the rows where ``rows`` (bool (B,)) is True: an episode start
    replaces those rows' neuron state by one that does not depend on the weights."""
    keep = (~rows).to(state.eps_v.dtype)[:, None, None]
    return EligibilityState(*(None if t is None else t * keep for t in state))


def accumulate(grad: Tensor, signal: Tensor, trace: Tensor) -> Tensor:
    """``grad += sum_b signal[b, j] * trace[b, i, j]`` (in place; returns ``grad``).

    Args:
        grad: (I, N) the gradient so far.
        signal: (B, N) the learning signal ``L_t``.
        trace: (B, I, N) ``e_t`` (or ``F_kappa(e)_t``).
    """
    return grad.add_((trace * signal[:, None, :]).sum(0))


def filter_backward(signal: Tensor, kappa: Tensor | float, starts: Tensor | None = None) -> Tensor:
    """``G_t = signal_t + kappa G_{t+1}``: the error of each step fed back through a leaky
    integrator's later steps (reverse time), cut where a row starts an episode.

    Args:
        signal: (T, B, K) per-step error at the integrator's output.
        kappa: its decay (scalar or (K,)).
        starts: optional bool (T, B): row b's integrator restarts before step t, so steps
            from t on send nothing back to steps before t.
    """
    out = torch.empty_like(signal)
    acc = torch.zeros_like(signal[0])
    for t in range(signal.shape[0] - 1, -1, -1):
        acc = signal[t] + kappa * acc
        out[t] = acc
        if starts is not None and t > 0:
            acc = acc * (~starts[t]).to(acc.dtype)[:, None]
    return out
