"""Spike functions: Heaviside forward, surrogate derivative backward.

A spike function maps ``v - threshold`` to spikes in {0, 1}. During training the layers use a
surrogate-gradient function (any ``snntorch.surrogate`` callable, e.g.
``snntorch.surrogate.fast_sigmoid(slope=25)``); when autograd is off (rollouts) they use
:func:`heaviside`, which gives the same forward values without building a graph.
"""

from __future__ import annotations

from collections.abc import Callable

from snntorch import surrogate
from torch import Tensor

SpikeFn = Callable[[Tensor], Tensor]

DEFAULT_SLOPE = 10.0
"""Slope ``k`` of the default fast-sigmoid surrogate, in 1/(membrane unit)."""


def default_spike_grad() -> SpikeFn:
    """The default surrogate: fast sigmoid ``dz/dv = 1 / (1 + k |v - threshold|)^2``, k = 10.

    With the default threshold of 1.0 the derivative is 1 at threshold, 1/4 at 0.1 from it and
    about 1/121 for a neuron at rest (v = 0). snntorch's default slope of 25 gives 1/676 at rest,
    which starves silent neurons of gradient over long BPTT windows; a gentler slope keeps them
    learnable while the derivative summed along a sequence stays bounded (it is at most 1 per
    step).
    """
    return surrogate.fast_sigmoid(slope=DEFAULT_SLOPE)


def heaviside(x: Tensor) -> Tensor:
    """Spikes ``(x > 0)`` in the dtype of ``x``, without a surrogate graph (inference)."""
    return (x > 0).to(x.dtype)
