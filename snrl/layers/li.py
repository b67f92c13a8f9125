"""LILayer: a non-spiking leaky-integrator readout (``v_t = alpha v_{t-1} + I_t``)."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from snrl.functional.lif_sequence import li_sequence
from snrl.functional.neurons import LIState, li_step
from snrl.functional.surrogate import SpikeFn
from snrl.layers.base import Drive, LayerOutput, RecurrentLayer
from snrl.layers.params import LIParameters

# The fused sequence path (no recurrence); a module attribute so that tests can switch it off.
_li_sequence = li_sequence


class LILayer(RecurrentLayer):
    """Leaky integrators whose membrane is the output (a readout of spikes).

    The arguments of :class:`snrl.layers.LIFLayer` without the spike-related ones: its
    parameters are an :class:`~snrl.layers.params.LIParameters` (no ``threshold``,
    ``reset``, ``spike_grad``), and ``use_recurrent_connection`` defaults to False. With
    recurrence the feedback is the membrane: ``I_t = x_t W_in + v_{t-1} W_rec + b``.

    Shape:
        ``forward(x, state)``: x (B, F) or (T, B, F) -> membrane (B, N) or (T, B, N).
    """

    state_type = LIState
    params_type = LIParameters
    recurrent_default = False

    def _feedback(self, state: Any) -> Tensor:
        return state.v

    def _step(self, current: Tensor, state: Any, consts: tuple, spike_fn: SpikeFn | None) -> tuple:
        return li_step(current, state, consts[0])

    def _integrate(
        self, drive: Drive, state: Any, consts: tuple, spike_fn: SpikeFn | None
    ) -> LayerOutput:
        u, w_rec, starts, fresh = drive
        if _li_sequence is not None and u.dim() == 3 and w_rec is None:
            v = _li_sequence(
                u, state.v, consts[0], starts=starts, fresh=None if fresh is None else fresh.v
            )
            return LayerOutput(v, LIState(v[-1]), v)
        return super()._integrate(drive, state, consts, spike_fn)
