"""Dale's law: sign vectors and sign-constrained (effective) weights.

A sign vector holds one ±1 entry per presynaptic neuron: +1 excitatory, -1 inhibitory. The
effective weight matrix of a layer is built from an unconstrained raw matrix by construction,

    W_eff = |W_raw| * sign[:, None] * mask,

so row i (the outgoing synapses of neuron i) carries the sign ``sign[i]`` whatever values
the raw matrix takes (after optimizer steps, weight decay or ``load_state_dict``).

Balanced init (:func:`dale_init`), after Song, Yang & Wang (2016, PLoS Comput Biol 12:
e1004792) and Rajan & Abbott (2006, Phys Rev Lett 97: 188104). With a fraction ``f`` of
inhibitory rows, drawing ``|W|`` alike for every row makes the mean synapse
``(1 - 2f) E|W|``, net excitatory for the biological f = 0.2, and the nonzero mean puts an
eigenvalue of order ``sqrt(N)`` outside the bulk. Three steps fix it:

1. rows: excitatory magnitudes times ``a``, inhibitory ones times ``b`` (:func:`balance_scale`),
   ``(1 - f) a = f b`` and ``(1 - f) a^2 + f b^2 = 1``, that is ``a = sqrt(f / (1 - f))``,
   ``b = sqrt((1 - f) / f)`` (f = 0.2: a = 1/2, b = 2): each neuron's *expected* input is 0;
2. columns: in each column (the inputs of one neuron) the excitatory entries are scaled by
   ``sqrt(I_j / E_j)`` and the inhibitory ones by ``sqrt(E_j / I_j)`` (``E_j``, ``I_j``: the
   summed magnitudes), so each neuron's input sums to exactly 0 when all presynaptic neurons
   fire alike. Rajan & Abbott show that this exact balance removes the outlier eigenvalues
   that a balance in expectation leaves (their number and size grow with N);
3. scale: the magnitudes are multiplied by one factor so that each neuron's input variance
   ``sum_i Var(W_ij)`` equals that of the unconstrained matrix ``sum_i E[W_raw_ij^2]`` (the
   magnitudes ``|W_raw|`` have a smaller variance than the signed ``W_raw``: for a uniform
   draw ``Var|w| = E[w^2] / 4``). Layers then rescale a recurrent matrix once more, to the
   spectral radius the same layer has without Dale (:func:`spectral_radius`).
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


def _balance_columns(m: Tensor, sign: Tensor) -> Tensor:
    """Scale each column's excitatory and inhibitory magnitudes so the column sums to 0."""
    inh = (sign < 0)[:, None]
    e = torch.where(inh, 0.0, m).sum(0)
    i = torch.where(inh, m, 0.0).sum(0)
    ok = (e > 0) & (i > 0)  # a column with only one kind of input cannot be balanced
    e_safe, i_safe = torch.where(ok, e, 1.0), torch.where(ok, i, 1.0)
    scale_e = torch.where(ok, (i_safe / e_safe).sqrt(), 1.0)
    scale_i = torch.where(ok, (e_safe / i_safe).sqrt(), 1.0)
    return m * torch.where(inh, scale_i[None, :], scale_e[None, :])


def dale_init(w_raw: Tensor, sign: Tensor, mask: Tensor | None = None) -> Tensor:
    """Balanced raw weights for a sign-constrained matrix (the module docstring's steps 1-3).

    Args:
        w_raw: (N_pre, N_post) weights drawn as for an unconstrained layer (zero mean).
        sign: (N_pre,) ±1 signs of the rows.
        mask: (N_pre, N_post) 0/1 mask of the synapses that exist, or None.

    Returns:
        (N_pre, N_post) nonnegative magnitudes, 0 where ``mask`` is 0:
        ``signed_weights(result, sign, mask)`` has
        column sums 0 (exactly, up to rounding) and, per column on average, the input
        variance of ``w_raw * mask``. When every row has the same sign (f = 0 or 1) no
        balance is possible: ``|w_raw|`` is returned as drawn.
    """
    f = float((sign < 0).sum()) / max(sign.numel(), 1)
    m = w_raw.abs()
    if f <= 0.0 or f >= 1.0:
        return m
    m = m * balance_scale(sign)[:, None]
    live = m if mask is None else m * mask
    live = _balance_columns(live, sign)
    ref = w_raw if mask is None else w_raw * mask
    # input variance of neuron j: sum_i of the variance of W_ij around its row's mean
    n_live = torch.ones_like(live) if mask is None else mask
    row_mean = live.sum(1, keepdim=True) / n_live.sum(1, keepdim=True).clamp_min(1)
    var = (((live - row_mean) * n_live) ** 2).sum()
    target = (ref**2).sum()
    c = float((target / var).sqrt()) if var > 0 else 1.0
    return live * c


def spectral_radius(w: Tensor) -> float:
    """Largest eigenvalue modulus of a square matrix (computed in float64 on the CPU).

    Costs O(N^3): about 5 ms at N = 128, 0.3 s at 512, 1 s at 1024.
    """
    if w.numel() == 0:
        return 0.0
    return float(torch.linalg.eigvals(w.detach().to("cpu", torch.float64)).abs().max())
