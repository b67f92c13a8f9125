"""SpyLIFLayer: LIF neurons with a synaptic current state (equations in
snrl.functional.neurons)."""

from __future__ import annotations

from typing import Any

from torch import Tensor

from snrl.config import NEURON_DEFAULTS
from snrl.functional.neurons import SpyLIFState, spylif_step
from snrl.functional.surrogate import SpikeFn
from snrl.layers.base import SpikingLayer


class SpyLIFLayer(SpikingLayer):
    """A layer of LIF neurons whose input is low-pass filtered by a synaptic current.

    Takes every argument of :class:`snrl.layers.LIFLayer` plus:

    Args:
        tau_syn: synaptic time constant in seconds (float or (N,)); default 5 ms (SpyTorch).

    With ``hh_init="random"`` both the membrane and the synaptic current are random.
    """

    state_type = SpyLIFState
    random_fields = ("v", "i")

    def __init__(
        self,
        input_size: int,
        output_size: int,
        *,
        use_recurrent_connection: bool = True,
        use_rec_eye_mask: bool = True,
        dt: float = NEURON_DEFAULTS["dt"],
        tau_m: float | Tensor = NEURON_DEFAULTS["tau_m"],
        tau_syn: float | Tensor = NEURON_DEFAULTS["tau_syn"],
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
        self._add_tau("tau_syn", tau_syn)

    @property
    def tau_syn(self) -> Tensor:
        """(N,) synaptic time constant in seconds."""
        return self.log_tau_syn.exp()

    def _constants(self) -> tuple:
        return (self._decay("tau_m"), self._decay("tau_syn"))

    def _step(self, current: Tensor, state: Any, consts: tuple, spike_fn: SpikeFn | None) -> tuple:
        alpha, alpha_syn = consts
        return spylif_step(current, state, alpha, alpha_syn, self.threshold, spike_fn, self.reset)
