"""ALIFLayer: LIF neurons with an adaptive threshold (LSNN, Bellec et al. 2018).

Equations in :mod:`snrl.functional.neurons`.
"""

from __future__ import annotations

from typing import Any

from torch import Tensor

from snrl.functional.alif_sequence import alif_sequence
from snrl.functional.neurons import ALIFState, alif_step
from snrl.functional.surrogate import SpikeFn
from snrl.layers.base import Drive, LayerOutput, SpikingLayer, TimeConstant, _FromParams
from snrl.layers.params import ALIFParameters

# The fused training path (a hand-written backward of alif_step); a module attribute so that
# tests and benchmarks can switch it off and compare with the plain step loop.
_alif_sequence = alif_sequence


class ALIFLayer(SpikingLayer):
    """A layer of adaptive-threshold LIF neurons.

    The arguments of :class:`snrl.layers.LIFLayer`; its parameters are an
    :class:`~snrl.layers.params.ALIFParameters`, which adds ``tau_a`` (adaptation time
    constant, seconds; default 200 ms) and ``beta`` (adaptation strength, >= 0; default 1.8,
    Bellec et al. 2018): ``threshold_t = threshold + beta * a_t`` with ``a`` a low-passed
    spike train in [0, 1].

    The reset (``"subtract"``) subtracts the adaptive threshold ``thr_t``. With
    ``hh_init="random"`` only the membrane is random; ``a`` starts at 0 like the spikes.
    """

    state_type = ALIFState
    params_type = ALIFParameters
    params: ALIFParameters

    beta = _FromParams("Adaptation strength (``params.beta``).")

    tau_a = TimeConstant("(N,) adaptation time constant in seconds.")

    def _step(self, current: Tensor, state: Any, consts: tuple, spike_fn: SpikeFn | None) -> tuple:
        alpha, rho = consts
        p = self.params
        return alif_step(current, state, alpha, rho, p.threshold, p.beta, spike_fn, p.reset)

    def _integrate(
        self, drive: Drive, state: Any, consts: tuple, spike_fn: SpikeFn | None
    ) -> LayerOutput:
        u, w_rec, starts, fresh = drive
        if _alif_sequence is not None and u.dim() == 3:  # with a graph or without
            p = self.params
            z, v, a = _alif_sequence(
                u,
                w_rec,
                state,
                *consts,
                p.threshold,
                p.beta,
                p.reset,
                spike_fn,
                starts=starts,
                fresh=fresh,
            )
            return LayerOutput(z, ALIFState(v[-1], z[-1], a[-1]), v, {"a": a})
        return super()._integrate(drive, state, consts, spike_fn)
