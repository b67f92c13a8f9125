"""Dale's law: sign vectors and sign-constrained (effective) weights.

A sign vector holds one ±1 entry per presynaptic neuron: +1 excitatory, -1 inhibitory. The
effective weight matrix of a layer is built from an unconstrained raw matrix by construction,

    W_eff = |W_raw| * sign[:, None] * mask,

so row i (the outgoing synapses of neuron i) carries the sign ``sign[i]`` whatever values
the raw matrix takes (after optimizer steps, weight decay or ``load_state_dict``).

Balanced init: with a fraction ``f`` of inhibitory rows, drawing ``|W|`` alike for every row
makes the mean synapse ``(1 - 2f) E|W|``, net excitatory for the biological f = 0.2. Layers
therefore scale the magnitudes of excitatory rows by ``a`` and of inhibitory rows by ``b``
(:func:`balance_scale`), chosen so that

    (1 - f) a = f b                  each neuron's expected recurrent input is zero,
    (1 - f) a^2 + f b^2 = 1          the second moment of a synapse is unchanged,

that is ``a = sqrt(f / (1 - f))`` and ``b = sqrt((1 - f) / f)`` (f = 0.2: a = 1/2, b = 2;
f = 0.5: a = b = 1). The second condition keeps each neuron's input variance, and so the
bulk of the spectrum, equal to the unconstrained matrix's.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from snrl.errors import UserError


def make_sign_vector(n: int, inhibitory_ratio: float, generator: torch.Generator) -> Tensor:
    """A ±1 vector of length ``n`` with ``round(inhibitory_ratio * n)`` entries -1.

    Args:
        n: number of neurons.
        inhibitory_ratio: fraction of inhibitory neurons, in [0, 1].
        generator: CPU generator choosing which neurons are inhibitory.

    Returns:
        float32 (n,) tensor of ±1.
    """
    r = float(inhibitory_ratio)
    if not 0.0 <= r <= 1.0:
        raise UserError(
            f"recurrent_sign ratio {inhibitory_ratio!r} is outside [0, 1] "
            "(pass the fraction of inhibitory neurons, or a ±1 tensor)"
        )
    n_inh = int(round(r * n))
    sign = torch.ones(n)
    sign[torch.randperm(n, generator=generator)[:n_inh]] = -1.0
    return sign


def check_sign_vector(sign: object, n: int, name: str) -> Tensor:
    """Validate a user-given sign vector: a ±1 tensor of length ``n``.

    Args:
        sign: the value to check (tensor or sequence of numbers).
        n: expected length.
        name: argument name, for the error message.

    Returns:
        The sign vector as a float32 CPU tensor (a copy).

    Raises:
        UserError: wrong shape or entries other than ±1.
    """
    t = torch.as_tensor(sign).detach().to("cpu", torch.float32).clone()
    if t.shape != (n,):
        raise UserError(f"{name} has shape {tuple(t.shape)}, expected ({n},) (one ±1 per neuron)")
    bad = t[(t != 1.0) & (t != -1.0)]
    if bad.numel():
        raise UserError(f"{name} holds {bad[:3].tolist()}, only +1 and -1 are allowed")
    return t


def resolve_sign(value: object, n: int, generator: torch.Generator, name: str) -> Tensor:
    """A sign vector from a float ratio of inhibitory neurons or from a ±1 tensor."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return make_sign_vector(n, float(value), generator)
    return check_sign_vector(value, n, name)


def balance_scale(sign: Tensor) -> Tensor:
    """Per-row magnitude scale that balances a Dale matrix at init (see the module docstring).

    Args:
        sign: (N,) ±1 sign vector; ``f`` is its actual fraction of -1 entries, so that the
            balance is exact for this sign vector, not only in expectation over choices.

    Returns:
        (N,) tensor: ``sqrt(f / (1 - f))`` for excitatory rows, ``sqrt((1 - f) / f)`` for
        inhibitory ones; all ones when every neuron has the same sign (f = 0 or 1), where no
        balance is possible.
    """
    f = float((sign < 0).sum()) / max(sign.numel(), 1)
    if f <= 0.0 or f >= 1.0:
        return torch.ones_like(sign)
    excitatory, inhibitory = math.sqrt(f / (1.0 - f)), math.sqrt((1.0 - f) / f)
    return torch.where(sign < 0, inhibitory, excitatory).to(sign.dtype)


def signed_weights(w_raw: Tensor, sign: Tensor | None = None, mask: Tensor | None = None) -> Tensor:
    """Effective weights ``|W_raw| * sign[:, None] * mask`` (each part optional).

    Args:
        w_raw: (N_pre, N_post) raw weights.
        sign: (N_pre,) ±1 or None (no sign constraint: ``W_raw`` as is).
        mask: (N_pre, N_post) 0/1 or None.
    """
    w = w_raw if sign is None else w_raw.abs() * sign[:, None]
    return w if mask is None else w * mask
