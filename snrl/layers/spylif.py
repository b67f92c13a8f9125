"""SpyLIFLayer: LIF neurons with a synaptic current state (equations in
snrl.functional.neurons)."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from snrl.functional.neurons import SpyLIFState, spylif_step
from snrl.functional.surrogate import SpikeFn
from snrl.layers.base import SpikingLayer, TimeConstant
from snrl.layers.params import SpyLIFParameters


class SpyLIFLayer(SpikingLayer):
    """A layer of LIF neurons whose input is low-pass filtered by a synaptic current.

    The arguments of :class:`snrl.layers.LIFLayer`; its parameters are a
    :class:`~snrl.layers.params.SpyLIFParameters`, which adds ``tau_syn`` (synaptic time
    constant, seconds, float or (N,); default 5 ms, as in SpyTorch).

    With ``hh_init="random"`` both the membrane and the synaptic current are random.
    """

    state_type = SpyLIFState
    params_type = SpyLIFParameters
    random_fields = ("v", "i")

    tau_syn = TimeConstant("(N,) synaptic time constant in seconds.")

    def _step(self, current: Tensor, state: Any, consts: tuple, spike_fn: SpikeFn | None) -> tuple:
        alpha, alpha_syn = consts
        p = self.params
        return spylif_step(current, state, alpha, alpha_syn, p.threshold, spike_fn, p.reset)
