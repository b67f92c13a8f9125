"""LIFLayer: recurrent leaky integrate-and-fire neurons (equations in snrl.functional.neurons)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from snrl.functional.lif_sequence import lif_sequence
from snrl.functional.neurons import LIFState, lif_step
from snrl.functional.surrogate import SpikeFn
from snrl.layers.base import Drive, LayerOutput, SpikingLayer
from snrl.layers.params import LIFParameters

# The fused training path (a hand-written backward of lif_step); a module attribute so that
# tests can switch it off and compare with the plain step loop.
_lif_sequence = lif_sequence


class LIFLayer(SpikingLayer):
    """A layer of LIF neurons with optional recurrence and Dale's law.

    ``LIFLayer(input_size, output_size, *, params=None, <wiring>, <neuron keywords>)``: the
    wiring arguments are those of :class:`~snrl.layers.base.RecurrentLayer`; the neuron
    parameters, a :class:`~snrl.layers.params.LIFParameters` (``dt``, ``tau_m``,
    ``threshold``, ``reset``, ``spike_grad``, ``hh_init``, ``hh_init_mu``, ``hh_init_std``,
    ``learn_tau``), are given as ``params=`` or as those keywords.

    Shape:
        ``forward(x, state)``: x (B, F) or (T, B, F) -> spikes (B, N) or (T, B, N).
    """

    state_type = LIFState
    params_type = LIFParameters

    def _step(self, current: Tensor, state: Any, consts: tuple, spike_fn: SpikeFn | None) -> tuple:
        p = self.params
        return lif_step(current, state, consts[0], p.threshold, spike_fn, p.reset)

    def _integrate(
        self, drive: Drive, state: Any, consts: tuple, spike_fn: SpikeFn | None
    ) -> LayerOutput:
        u, w_rec, starts, fresh = drive
        if u.dim() == 2 and starts is None:  # one step (rollouts): no per-step lists
            if w_rec is None:
                cur = u
            elif spike_fn is None and not torch.is_grad_enabled():
                cur = u.addmm_(state.z, w_rec)  # u is this call's own projection (run)
            else:
                cur = torch.addmm(u, state.z, w_rec)
            p = self.params
            z, new = lif_step(cur, state, consts[0], p.threshold, spike_fn, p.reset)
            return LayerOutput(z, new, new.v)
        if _lif_sequence is not None and u.dim() == 3:  # with a graph or without
            z, v = _lif_sequence(
                u,
                w_rec,
                state,
                consts[0],
                self.params.threshold,
                self.params.reset,
                spike_fn,
                starts=starts,
                fresh=fresh,
            )
            return LayerOutput(z, LIFState(v[-1], z[-1]), v)
        return super()._integrate(drive, state, consts, spike_fn)
