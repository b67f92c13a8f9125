r"""Spike functions: Heaviside forward, surrogate derivative backward.

A spike function maps ``x = v - threshold`` to spikes in {0, 1}. Its forward is the step
``H(x) = (x > 0)``; its backward replaces ``H'`` by a smooth surrogate. During training the
layers use a :class:`Surrogate` (the default) or any ``snntorch.surrogate`` callable; when
autograd is off (rollouts) they use :func:`heaviside`, the same forward without a graph.

:class:`Surrogate` names a surrogate by an explicit, public description (``kind`` and its
parameters), so its derivative has a closed form that the fused sequence path
(:mod:`snrl.functional.lif_sequence`) evaluates directly. The kinds are the surrogates
snntorch ships, with snntorch's parameter defaults; the derivatives ``s(x) = dz/dx`` are::

    fast_sigmoid      slope k = 25     s = 1 / (1 + k |x|)^2
    atan              slope a = 2      s = (a / 2) / (1 + (pi a x / 2)^2)
    sigmoid           slope k = 25     s = k sigma(k x) (1 - sigma(k x))
    triangular        slope t = 1      s = t for x < 0, -t for x >= 0   (snntorch's definition)
    straight_through  (none)           s = 1
    spike_rate_escape slope k = 25,    s = k exp(-beta |x - 1|)
                      beta = 1

(``slope`` is snntorch's ``alpha`` for ``atan`` and its ``threshold`` for ``triangular``.)
Any other callable still works: its derivative is then obtained by autograd.

Why the formulas are written here rather than taken from snntorch: snntorch keeps each
surrogate's parameter inside a closure, with no public way to read it back or to evaluate
the derivative alone, and the fused backward needs exactly that. The tests check every
closed form against autograd through snntorch's own surrogate.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from snrl.errors import UserError

SpikeFn = Callable[[Tensor], Tensor]

DEFAULT_SLOPE = 10.0
"""Slope ``k`` of the default fast-sigmoid surrogate, in 1/(membrane unit)."""

SURROGATE_KINDS: dict[str, dict[str, float]] = {
    "fast_sigmoid": {"slope": 25.0},
    "atan": {"slope": 2.0},
    "sigmoid": {"slope": 25.0},
    "triangular": {"slope": 1.0},
    "straight_through": {},
    "spike_rate_escape": {"slope": 25.0, "beta": 1.0},
}
"""Each kind with its parameters and their defaults (snntorch's)."""


@dataclass(frozen=True)
class Surrogate:
    """A surrogate spike function by name: Heaviside forward, closed-form derivative backward.

    Args:
        kind: one of :data:`SURROGATE_KINDS` (formulas in the module docstring).
        slope: the kind's scale parameter (None: snntorch's default for the kind).
        beta: the decay of ``spike_rate_escape`` (None: 1; must be None for other kinds).

    Calling it on ``x = v - threshold`` returns spikes ``(x > 0)`` in the dtype of ``x``,
    whose gradient is ``s(x) = self.derivative(x)`` times the incoming gradient.
    """

    kind: str = "fast_sigmoid"
    slope: float | None = None
    beta: float | None = None

    def __post_init__(self) -> None:
        params = SURROGATE_KINDS.get(self.kind)
        if params is None:
            raise UserError(
                f"unknown surrogate kind {self.kind!r} (use one of {', '.join(SURROGATE_KINDS)})"
            )
        for name in ("slope", "beta"):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, params.get(name))
                continue
            if name not in params:
                raise UserError(f"surrogate {self.kind!r} takes no {name} (leave {name}=None)")
            value = float(value)
            if not (value > 0 and math.isfinite(value)):
                raise UserError(f"surrogate {name}={value!r} is not positive (give a value > 0)")
            object.__setattr__(self, name, value)

    def __call__(self, x: Tensor) -> Tensor:
        return _SurrogateSpike.apply(x, self)

    def derivative(self, x: Tensor, *, inplace: bool = False) -> Tensor:
        """``s(x) = dz/dx`` elementwise, in the dtype of ``x``.

        Args:
            x: ``v - threshold``, any shape.
            inplace: overwrite ``x`` with the result where the formula allows (saves
                temporaries on long sequences; pass a tensor you own).
        """
        y = x if inplace else x.clone()
        k = self.slope
        if self.kind == "fast_sigmoid":
            return y.abs_().mul_(k).add_(1.0).pow_(-2)
        if self.kind == "atan":
            return y.mul_(math.pi / 2 * k).square_().add_(1.0).reciprocal_().mul_(k / 2)
        if self.kind == "sigmoid":
            y.mul_(k).sigmoid_()
            return y.sub_(y * y).mul_(k)
        if self.kind == "triangular":
            return torch.where(x >= 0, -k, k).to(x.dtype)
        if self.kind == "straight_through":
            return y.fill_(1.0)
        # spike_rate_escape
        return y.sub_(1.0).abs_().mul_(-self.beta).exp_().mul_(k)


class _SurrogateSpike(torch.autograd.Function):
    """Spikes ``(x > 0)`` forward, ``grad * surrogate.derivative(x)`` backward."""

    @staticmethod
    def forward(ctx, x: Tensor, surrogate: Surrogate) -> Tensor:  # noqa: ANN001
        ctx.save_for_backward(x)
        ctx.surrogate = surrogate
        return (x > 0).to(x.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # noqa: ANN001
        (x,) = ctx.saved_tensors
        return grad * ctx.surrogate.derivative(x), None


def default_spike_grad() -> Surrogate:
    """The default surrogate: fast sigmoid ``dz/dv = 1 / (1 + k |v - threshold|)^2``, k = 10.

    With the default threshold of 1.0 the derivative is 1 at threshold, 1/4 at 0.1 from it and
    about 1/121 for a neuron at rest (v = 0). snntorch's default slope of 25 gives 1/676 at rest,
    which starves silent neurons of gradient over long BPTT windows; a gentler slope keeps them
    learnable while the derivative summed along a sequence stays bounded (it is at most 1 per
    step).
    """
    return Surrogate("fast_sigmoid", DEFAULT_SLOPE)


def heaviside(x: Tensor) -> Tensor:
    """Spikes ``(x > 0)`` in the dtype of ``x``, without a surrogate graph (inference)."""
    return (x > 0).to(x.dtype)


def autograd_derivative(spike_fn: SpikeFn, x: Tensor) -> Tensor:
    """``d spike_fn(x) / dx`` elementwise by one autograd call (``spike_fn`` is elementwise).

    The fallback for a spike function that is not a :class:`Surrogate`. A function whose
    output carries no graph (a plain Heaviside) has derivative 0 everywhere.
    """
    with torch.enable_grad():
        x = x.detach().requires_grad_()
        y = spike_fn(x)
        if not y.requires_grad:
            return torch.zeros_like(x)
        (s,) = torch.autograd.grad(y, x, torch.ones_like(y))
    return s.to(x.dtype)


def derivative_fn(spike_fn: SpikeFn) -> Callable[[Tensor], Tensor]:
    """``x -> spike_fn'(x)`` elementwise; may overwrite ``x`` (pass a tensor you own).

    The closed form of a :class:`Surrogate`, else :func:`autograd_derivative`.
    """
    if isinstance(spike_fn, Surrogate):
        return functools.partial(spike_fn.derivative, inplace=True)
    return functools.partial(autograd_derivative, spike_fn)
