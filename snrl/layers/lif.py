"""LIFLayer: recurrent leaky integrate-and-fire neurons (equations in snrl.functional.neurons)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from snrl.config import NEURON_DEFAULTS
from snrl.functional.lif_sequence import lif_sequence
from snrl.functional.neurons import LIFState, lif_step
from snrl.functional.surrogate import SpikeFn
from snrl.layers.base import LayerOutput, SpikingLayer

# The fused training path (a hand-written backward of lif_step); a module attribute so that
# tests can switch it off and compare with the plain step loop.
_lif_sequence = lif_sequence


class LIFLayer(SpikingLayer):
    """A layer of LIF neurons with optional recurrence and Dale's law.

    Args:
        input_size: F, features per input step.
        output_size: N, number of neurons.
        use_recurrent_connection: add ``z_{t-1} W_rec`` to the input current.
        use_rec_eye_mask: no autapses (zero diagonal of ``W_rec``, no gradient on it).
        dt: integration step in seconds.
        tau_m: membrane time constant in seconds, a float or an (N,) tensor.
        threshold: spike threshold (membrane units).
        reset: ``"subtract"`` (subtract ``threshold`` after a spike) or ``"zero"``.
        spike_grad: surrogate spike function applied to ``v - threshold``: a
            :class:`snrl.functional.surrogate.Surrogate` (closed-form derivative, fastest) or
            any callable such as a ``snntorch.surrogate`` one (derivative by autograd);
            default :func:`snrl.functional.surrogate.default_spike_grad`.
        force_dale_law: sign-constrain the recurrent weights by ``recurrent_sign``.
        forward_sign: None (free input weights) or a ±1 (input_size,) tensor: input row i has
            the sign ``forward_sign[i]``.
        recurrent_sign: fraction of inhibitory neurons (float) or a ±1 (N,) tensor (used only
            with ``force_dale_law``).
        hh_init: ``"zeros"``, ``"random"``, ``"inputs"``, ``"given"`` or ``"learned"``.
        hh_init_mu: mean of the random init (and the start value of the learned init).
        hh_init_std: std of the random init.
        hh_init_seed: seed of the layer's own generator for ``"random"`` (None: from the
            global torch RNG).
        learn_tau: make the time constants trainable (parametrized as log tau, so tau > 0).
        seed: seed of the layer's generator for weight init and the choice of inhibitory
            neurons (None: drawn from the global torch RNG).

    Shape:
        ``forward(x, state)``: x (B, F) or (T, B, F) -> spikes (B, N) or (T, B, N).
    """

    state_type = LIFState

    def __init__(
        self,
        input_size: int,
        output_size: int,
        *,
        use_recurrent_connection: bool = True,
        use_rec_eye_mask: bool = True,
        dt: float = NEURON_DEFAULTS["dt"],
        tau_m: float | Tensor = NEURON_DEFAULTS["tau_m"],
        threshold: float = NEURON_DEFAULTS["threshold"],
        reset: str = NEURON_DEFAULTS["reset"],
        spike_grad: SpikeFn | None = None,
        force_dale_law: bool = NEURON_DEFAULTS["force_dale_law"],
        forward_sign: Tensor | None = None,
        recurrent_sign: float | Tensor = NEURON_DEFAULTS["recurrent_sign"],
        hh_init: str = NEURON_DEFAULTS["hh_init"],
        hh_init_mu: float = 0.0,
        hh_init_std: float = 1.0,
        hh_init_seed: int | None = None,
        learn_tau: bool = False,
        seed: int | None = None,
    ) -> None:
        super().__init__(
            input_size,
            output_size,
            threshold=threshold,
            reset=reset,
            spike_grad=spike_grad,
            use_recurrent_connection=use_recurrent_connection,
            use_rec_eye_mask=use_rec_eye_mask,
            dt=dt,
            tau_m=tau_m,
            force_dale_law=force_dale_law,
            forward_sign=forward_sign,
            recurrent_sign=recurrent_sign,
            hh_init=hh_init,
            hh_init_mu=hh_init_mu,
            hh_init_std=hh_init_std,
            hh_init_seed=hh_init_seed,
            learn_tau=learn_tau,
            seed=seed,
        )

    def _constants(self) -> tuple:
        return (self._decay("tau_m"),)

    def _step(self, current: Tensor, state: Any, consts: tuple, spike_fn: SpikeFn | None) -> tuple:
        return lif_step(current, state, consts[0], self.threshold, spike_fn, self.reset)

    def _integrate(
        self,
        u: Tensor,
        w_rec: Tensor | None,
        state: Any,
        consts: tuple,
        spike_fn: SpikeFn | None,
        starts: Tensor | None = None,
        fresh: Any = None,
    ) -> LayerOutput:
        if u.dim() == 2 and starts is None:  # one step (rollouts): no per-step lists
            if w_rec is None:
                cur = u
            elif spike_fn is None and not torch.is_grad_enabled():
                cur = u.addmm_(state.z, w_rec)  # u is this call's own projection (run)
            else:
                cur = torch.addmm(u, state.z, w_rec)
            z, new = lif_step(cur, state, consts[0], self.threshold, spike_fn, self.reset)
            return LayerOutput(z, new, new.v)
        if _lif_sequence is not None and u.dim() == 3 and torch.is_grad_enabled():
            z, v = _lif_sequence(
                u,
                w_rec,
                state,
                consts[0],
                self.threshold,
                self.reset,
                spike_fn,
                starts=starts,
                fresh=fresh,
            )
            return LayerOutput(z, LIFState(v[-1], z[-1]), v)
        return super()._integrate(u, w_rec, state, consts, spike_fn, starts, fresh)
