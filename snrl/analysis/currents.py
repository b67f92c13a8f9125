"""Excitatory and inhibitory input currents of a spiking layer (E/I balance).

A layer's input current at step t is (snrl.functional.neurons)::

    I_t = x_t W_in + z_{t-1} W_rec + b

with ``x`` the layer's input (the observation for the first layer, the spikes of the layer
below at the same step for deeper layers) and ``z`` the layer's own spikes. The synaptic part
splits by the sign of the effective weight::

    exc_t = z_{t-1} max(W_rec, 0) + s_t max(W_ff, 0)      (s: spikes of the layer below)
    inh_t = z_{t-1} min(W_rec, 0) + s_t min(W_ff, 0)      (<= 0)
    ext_t = x_t W_in + b   (first layer: observations are not neurons, so not E or I)

With Dale's law every row of ``W_rec`` (and of ``W_ff`` for deeper layers) has one sign, so
this is exactly "E presynaptic rows vs I presynaptic rows"; without Dale it splits by the
sign of each synapse. ``exc + inh + ext`` is the layer's whole input current ``I_t``. The
spikes before the first step are 0 (every ``hh_init`` starts spikes at 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snrl.errors import UserError

__all__ = ["LayerWeights", "layer_weights", "synaptic_currents"]


def synaptic_currents(
    spikes: Any,
    w_rec: Any,
    *,
    pre_spikes: Any = None,
    w_ff: Any = None,
    ext: Any = None,
    bias: Any = None,
) -> dict[str, np.ndarray]:
    """Excitatory, inhibitory and external input currents of each neuron at each step.

    Args:
        spikes: (T, N) the layer's own spikes.
        w_rec: (N, N) effective recurrent weights, row = presynaptic neuron.
        pre_spikes: (T, M) spikes of the layer below (deeper layers), with ``w_ff``.
        w_ff: (M, N) effective feed-forward weights from the layer below.
        ext: (T, N) external current ``x_t W_in + b`` (first layer), or None.
        bias: (N,) bias, added to ``ext`` when ``ext`` is None (deeper layers).

    Returns:
        ``{"exc": (T, N), "inh": (T, N), "ext": (T, N)}`` in membrane units per step.
    """
    z = np.asarray(spikes, dtype=np.float64)
    w = np.asarray(w_rec, dtype=np.float64)
    t, n = z.shape
    if w.shape != (n, n):
        raise UserError(f"w_rec has shape {w.shape} for {n} neurons (give ({n}, {n}))")
    prev = np.zeros_like(z)
    prev[1:] = z[:-1]
    exc = prev @ np.maximum(w, 0.0)
    inh = prev @ np.minimum(w, 0.0)
    if pre_spikes is not None:
        s = np.asarray(pre_spikes, dtype=np.float64)
        wf = np.asarray(w_ff, dtype=np.float64)
        if s.shape[0] != t or wf.shape != (s.shape[1], n):
            raise UserError(
                f"pre_spikes {s.shape} and w_ff {wf.shape} do not fit {t} steps of {n} neurons"
            )
        exc += s @ np.maximum(wf, 0.0)
        inh += s @ np.minimum(wf, 0.0)
    if ext is not None:
        x = np.asarray(ext, dtype=np.float64)
        if x.shape != (t, n):
            raise UserError(f"ext has shape {x.shape} (give ({t}, {n}))")
    else:
        b = np.zeros(n) if bias is None else np.asarray(bias, dtype=np.float64)
        x = np.broadcast_to(b, (t, n)).copy()
    return {"exc": exc, "inh": inh, "ext": x}


class LayerWeights:
    """Numpy copies of one layer's effective weights: ``w_in`` (F, N), ``w_rec`` (N, N),
    ``bias`` (N,), ``dt`` (seconds), and its spike ``threshold`` (membrane units; None when
    unknown)."""

    def __init__(
        self,
        w_in: np.ndarray,
        w_rec: np.ndarray,
        bias: np.ndarray,
        dt: float,
        threshold: float | None = None,
    ):
        self.w_in, self.w_rec, self.bias, self.dt = w_in, w_rec, bias, dt
        self.threshold = threshold


def layer_weights(backbone: Any) -> dict[str, LayerWeights]:
    """The effective weights of each spiking layer of a :class:`SpikingBackbone`, by name
    (empty for a backbone without spiking layers)."""
    names = getattr(backbone, "spiking_names", None) or []
    out = {}
    for name in names:
        layer = backbone.layers[name]
        out[name] = LayerWeights(
            layer.forward_weights.detach().cpu().double().numpy(),
            layer.recurrent_weights.detach().cpu().double().numpy(),
            layer.bias.detach().cpu().double().numpy(),
            float(layer.dt),
            _threshold(layer),
        )
    return out


def _threshold(layer: Any) -> float | None:
    """The layer's spike threshold as a float, when it is one number (None for a readout)."""
    t = getattr(layer, "threshold", None)
    if t is None:
        return None
    try:
        return float(t)
    except (TypeError, ValueError):
        return None
