"""Neuron parameters: one frozen object per neuron model.

Each layer is built from one of these (``LIFLayer(4, 128, params=LIFParameters(tau_m=10e-3))``,
or the same values as keywords, ``LIFLayer(4, 128, tau_m=10e-3)``, from which the layer
builds the object). An agent's config builds it once, and the factory, the backbone and every
spiking layer receive that same object; the layer reads its values from it. Each model's
object adds only its own fields to the one below it::

    LIParameters       dt, tau_m, hh_init, hh_init_mu, hh_init_std, learn_tau
    LIFParameters      + threshold, reset, spike_grad, noise_std
    ALIFParameters     + tau_a, beta
    SpyLIFParameters   + tau_syn

What is not here is the wiring of one layer, given to the layer itself: its sizes, its
recurrence and autapse mask, Dale's law and its signs, and its seeds.

A time constant may be a float or a per-neuron ``(N,)`` tensor (kept as a float32 copy on
the CPU; its length is checked by the layer, which knows N).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor

from snrl.config import NEURON_DEFAULTS, check_values
from snrl.errors import UserError
from snrl.functional.neurons import RESETS
from snrl.functional.surrogate import SpikeFn, default_spike_grad

HH_INITS = ("zeros", "random", "inputs", "given", "learned")
"""The rules of ``hh_init`` (docs/layers.md, "Hidden-state initialization")."""


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)  # a frozen dataclass normalizing its own field


def _time_constant(obj: Any, name: str) -> None:
    """Check (and normalize) the time in seconds ``name``: a float > 0, or a tensor of them."""
    value = getattr(obj, name)
    if isinstance(value, Tensor):
        tau = value.detach().to("cpu", torch.float32).clone()
        if tau.dim() > 1:
            raise UserError(
                f"{name} has shape {tuple(tau.shape)}, expected a float or (N,) per neuron"
            )
        if not bool((tau > 0).all()) or not bool(torch.isfinite(tau).all()):
            raise UserError(
                f"{name} holds {tau.min().item():g} (time constants must be > 0 seconds)"
            )
        _set(obj, name, tau)
        return
    v = float(value)
    if not (v > 0.0 and math.isfinite(v)):
        raise UserError(f"{name}={value!r} is not positive (give a time in seconds > 0)")
    _set(obj, name, v)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return (
            isinstance(a, Tensor)
            and isinstance(b, Tensor)
            and a.shape == b.shape
            and torch.equal(a, b)
        )
    return bool(a == b)


def _hashable(value: Any) -> Any:
    return tuple(value.flatten().tolist()) if isinstance(value, Tensor) else value


@dataclass(frozen=True, kw_only=True, eq=False)
class LIParameters:
    """Parameters of leaky-integrator neurons (:class:`~snrl.layers.LILayer`), and the
    fields every other model's parameters start from.

    Raises:
        ValueError: (a :class:`~snrl.errors.UserError`) naming the bad value and the range
            allowed.
    """

    dt: float = NEURON_DEFAULTS["dt"]
    """Integration step, seconds (> 0)."""
    tau_m: float | Tensor = NEURON_DEFAULTS["tau_m"]
    """Membrane time constant, seconds (> 0): a float, or an (N,) tensor per neuron."""
    hh_init: str = NEURON_DEFAULTS["hh_init"]
    """Initial hidden state: zeros, random, inputs, given or learned."""
    hh_init_mu: float = 0.0
    """Mean of the random initial membrane (``hh_init="random"``) and start of the learned
    one (``"learned"``)."""
    hh_init_std: float = 1.0
    """Standard deviation of the random initial membrane (>= 0)."""
    learn_tau: bool = False
    """Make the time constants trainable (as ``log tau``, so they stay > 0)."""

    time_constants: ClassVar[tuple[str, ...]] = ("tau_m",)
    """The fields that are time constants (seconds; each becomes a ``log_<name>`` tensor of
    the layer)."""

    def __post_init__(self) -> None:
        check_values(self)
        for name in self.time_constants + ("dt",):
            _time_constant(self, name)
        if self.hh_init not in HH_INITS:
            raise UserError(f"unknown hh_init={self.hh_init!r} (use one of {', '.join(HH_INITS)})")
        if not float(self.hh_init_std) >= 0:
            raise UserError(f"hh_init_std={self.hh_init_std!r} is negative (give a std >= 0)")
        for name in ("hh_init_mu", "hh_init_std"):
            _set(self, name, float(getattr(self, name)))
        _set(self, "learn_tau", bool(self.learn_tau))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(
            _same(getattr(self, f.name), getattr(other, f.name)) for f in dataclasses.fields(self)
        )

    def __hash__(self) -> int:
        values = (_hashable(getattr(self, f.name)) for f in dataclasses.fields(self))
        return hash((type(self), *values))


@dataclass(frozen=True, kw_only=True, eq=False)
class LIFParameters(LIParameters):
    """Parameters of leaky integrate-and-fire neurons (:class:`~snrl.layers.LIFLayer`)."""

    threshold: float = NEURON_DEFAULTS["threshold"]
    """Spike threshold, membrane units (> 0)."""
    reset: str = NEURON_DEFAULTS["reset"]
    """After a spike: subtract (the threshold) or zero (the membrane)."""
    spike_grad: SpikeFn | None = None
    """Surrogate spike function of ``v - threshold``: a ``snrl.functional.Surrogate`` or any
    callable (e.g. a ``snntorch.surrogate`` one); none: ``default_spike_grad()``."""
    noise_std: float = NEURON_DEFAULTS["noise_std"]
    """Standard deviation of a Gaussian current added to every neuron at every neuron step
    (membrane units per step, >= 0; independent across neurons and steps, from the layer's
    own generator), in training mode only (``layer.train()``): trial-to-trial variability.
    0: off."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.reset not in RESETS:
            raise UserError(f"unknown reset={self.reset!r} (use one of {', '.join(RESETS)})")
        thr = float(self.threshold)
        if not (thr > 0 and math.isfinite(thr)):
            raise UserError(f"threshold={self.threshold!r} is not positive (give a threshold > 0)")
        _set(self, "threshold", thr)
        sigma = float(self.noise_std)
        if not (sigma >= 0 and math.isfinite(sigma)):
            raise UserError(f"noise_std={self.noise_std!r} is not >= 0 (give a current std >= 0)")
        _set(self, "noise_std", sigma)
        if self.spike_grad is None:
            _set(self, "spike_grad", default_spike_grad())
        elif not callable(self.spike_grad):
            raise UserError(
                f"spike_grad={self.spike_grad!r} is not callable (pass a "
                "snrl.functional.Surrogate, e.g. Surrogate('atan'), or a snntorch surrogate)"
            )


@dataclass(frozen=True, kw_only=True, eq=False)
class ALIFParameters(LIFParameters):
    """Parameters of adaptive-threshold LIF neurons (:class:`~snrl.layers.ALIFLayer`;
    LSNN, Bellec et al. 2018): ``threshold_t = threshold + beta * a_t``."""

    tau_a: float | Tensor = NEURON_DEFAULTS["tau_a"]
    """Adaptation time constant, seconds (> 0; float or (N,)): a few hundred steps at
    dt = 1 ms, so adaptation carries memory well beyond tau_m."""
    beta: float = NEURON_DEFAULTS["beta"]
    """Adaptation strength (>= 0): the threshold rises by ``beta`` times a low-passed spike
    train in [0, 1]."""

    time_constants: ClassVar[tuple[str, ...]] = ("tau_m", "tau_a")

    def __post_init__(self) -> None:
        super().__post_init__()
        b = float(self.beta)
        if not (b >= 0 and math.isfinite(b)):
            raise UserError(f"beta={self.beta!r} is negative (give an adaptation strength >= 0)")
        _set(self, "beta", b)


@dataclass(frozen=True, kw_only=True, eq=False)
class SpyLIFParameters(LIFParameters):
    """Parameters of LIF neurons with a synaptic current (:class:`~snrl.layers.SpyLIFLayer`,
    as in Zenke's SpyTorch)."""

    tau_syn: float | Tensor = NEURON_DEFAULTS["tau_syn"]
    """Synaptic time constant, seconds (> 0; float or (N,))."""

    time_constants: ClassVar[tuple[str, ...]] = ("tau_m", "tau_syn")
