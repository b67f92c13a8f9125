"""Fixed and slow points of a network's dynamics (Sussillo & Barak 2013), with their stability.

For a discrete-time map ``h_{t+1} = F(h_t)`` with the input frozen, a fixed point solves
``F(h) = h``; a slow point makes the speed ``q(h) = ||F(h) - h||^2 / 2`` small. The search
minimizes ``q`` from many initial states (typically states the network visited) with
L-BFGS (torch autograd, float64); each point's stability comes from the eigenvalues of the
Jacobian ``dF/dh`` there: stable when every ``|lambda| < 1`` (a discrete-time map).

A spiking network has no smooth map: its state jumps with every spike. The approximation
offered here (:func:`lif_rate_map`) is a LIF layer whose spikes are replaced by their
expected value under a sigmoid escape noise, ``r = sigmoid((v - threshold) / beta)``:
``v' = alpha v + x W_in + b + r W_rec - threshold r`` (``reset="subtract"``), with the
input ``x`` frozen. As ``beta -> 0`` it approaches the deterministic LIF; its fixed points
are those of the mean-field (rate) dynamics, not states the spiking net sits in exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from snrl.errors import UserError

__all__ = ["find_fixed_points", "lif_rate_map"]


def find_fixed_points(
    step: Callable[[torch.Tensor], torch.Tensor],
    initial: Any,
    *,
    max_iter: int = 200,
    tol: float = 1e-10,
) -> dict[str, np.ndarray]:
    """Minimize the speed ``q`` of ``step`` from each initial state (module docstring).

    Args:
        step: ``F``, mapping a (K, N) batch of states to the next states (rows independent).
        initial: (K, N) initial states.
        max_iter: L-BFGS iterations.
        tol: gradient tolerance of L-BFGS.

    Returns:
        ``{"points": (K, N), "speed": (K,) q at each point, "eigenvalues": (K, N) complex,
        sorted by decreasing modulus, "stable": (K,) bool (all |lambda| < 1)}``.
    """
    h0 = torch.as_tensor(np.asarray(initial, dtype=np.float64))
    if h0.ndim != 2 or not h0.shape[0]:
        raise UserError(f"initial states must be (K >= 1, N), got shape {tuple(h0.shape)}")
    h = h0.clone().requires_grad_(True)
    opt = torch.optim.LBFGS(
        [h],
        max_iter=int(max_iter),
        tolerance_grad=tol,
        tolerance_change=1e-16,
        line_search_fn="strong_wolfe",
    )

    def closure() -> torch.Tensor:
        opt.zero_grad()
        q = 0.5 * ((step(h) - h) ** 2).sum()
        q.backward()
        return q

    opt.step(closure)
    h = h.detach()
    with torch.no_grad():
        speed = 0.5 * ((step(h) - h) ** 2).sum(1)
    eig = []
    for row in h:
        jac = torch.autograd.functional.jacobian(lambda v: step(v[None])[0], row)
        ev = np.linalg.eigvals(jac.numpy())
        eig.append(ev[np.argsort(-np.abs(ev), kind="stable")])
    eig_arr = np.stack(eig)
    return {
        "points": h.numpy(),
        "speed": speed.numpy(),
        "eigenvalues": eig_arr,
        "stable": np.abs(eig_arr).max(axis=1) < 1.0,
    }


def lif_rate_map(
    layer: Any, x: Any, *, beta: float = 0.1
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The smoothed-rate map of a LIF layer's membrane with the input ``x`` frozen (module
    docstring): ``v -> alpha v + x W_in + b + r W_rec - threshold r``,
    ``r = sigmoid((v - threshold) / beta)``.

    Args:
        layer: a :class:`snrl.layers.LIFLayer` (its effective weights are used).
        x: (F,) the frozen input (e.g. the preprocessed observation of the stimulus period).
        beta: escape-noise width in membrane units (> 0).
    """
    from snrl.layers import LIFLayer

    if beta <= 0:
        raise UserError(f"beta={beta} (give a width > 0)")
    if type(layer) is not LIFLayer or layer.params.reset != "subtract":
        raise UserError(
            f"lif_rate_map needs a LIFLayer with reset='subtract', got {type(layer).__name__}"
        )
    with torch.no_grad():
        w_in = layer.forward_weights.detach().double().cpu()
        w_rec = layer.recurrent_weights.detach().double().cpu()
        bias = layer.bias.detach().double().cpu()
        alpha = torch.as_tensor(layer.decay("tau_m")).detach().double().cpu()
    threshold = float(layer.params.threshold)
    drive = torch.as_tensor(np.asarray(x, dtype=np.float64)) @ w_in + bias

    def step(v: torch.Tensor) -> torch.Tensor:
        r = torch.sigmoid((v - threshold) / beta)
        return alpha * v + drive + r @ w_rec - threshold * r

    return step
