"""ALIFLayer: LIF neurons with an adaptive threshold (LSNN, Bellec et al. 2018).

Equations in :mod:`snrl.functional.neurons`.
"""

from __future__ import annotations

import math
from typing import Any

from torch import Tensor

from snrl.config import NEURON_DEFAULTS
from snrl.errors import UserError
from snrl.functional.neurons import ALIFState, alif_step
from snrl.functional.surrogate import SpikeFn
from snrl.layers.base import SpikingLayer


class ALIFLayer(SpikingLayer):
    """A layer of adaptive-threshold LIF neurons.

    Takes every argument of :class:`snrl.layers.LIFLayer` plus:

    Args:
        tau_a: adaptation time constant in seconds (float or (N,)); default 200 ms, a few
            hundred network steps at dt = 1 ms, so adaptation carries memory well beyond tau_m.
        beta: adaptation strength (>= 0): ``threshold_t = threshold + beta * a_t`` with
            ``a`` a low-passed spike train in [0, 1]; default 1.8 (Bellec et al. 2018).

    The reset (``"subtract"``) subtracts the adaptive threshold ``thr_t``. With
    ``hh_init="random"`` only the membrane is random; ``a`` starts at 0 like the spikes.
    """

    state_type = ALIFState

    def __init__(
        self,
        input_size: int,
        output_size: int,
        *,
        use_recurrent_connection: bool = True,
        use_rec_eye_mask: bool = True,
        dt: float = NEURON_DEFAULTS["dt"],
        tau_m: float | Tensor = NEURON_DEFAULTS["tau_m"],
        tau_a: float | Tensor = NEURON_DEFAULTS["tau_a"],
        beta: float = NEURON_DEFAULTS["beta"],
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
        b = float(beta)
        if not (b >= 0 and math.isfinite(b)):
            raise UserError(f"beta={beta!r} is negative (give an adaptation strength >= 0)")
        self.beta = b
        self._add_tau("tau_a", tau_a)

    @property
    def tau_a(self) -> Tensor:
        """(N,) adaptation time constant in seconds."""
        return self.log_tau_a.exp()

    def _constants(self) -> tuple:
        return (self._decay("tau_m"), self._decay("tau_a"))

    def _step(self, current: Tensor, state: Any, consts: tuple, spike_fn: SpikeFn | None) -> tuple:
        alpha, rho = consts
        return alif_step(
            current, state, alpha, rho, self.threshold, self.beta, spike_fn, self.reset
        )
