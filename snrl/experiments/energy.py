"""Energy proxies per env step, from a backbone's :class:`~snrl.networks.protocol.LayerInfo`.

Counted for the policy network at inference (the critic is not needed to act), per env step,
with ``S`` network steps per env step (``substeps``), ``N_l`` units, ``F_l`` fan-in and
``O_l`` fan-out of layer ``l`` and ``r_l`` its mean spike rate (spikes per neuron per network
step, measured during the deterministic evaluation):

* Spiking backbones, synaptic operations (a spike delivered to one synapse is one
  accumulate): ``SOP = S * sum_l r_l N_l O_l`` over the spiking layers (``O_l`` = recurrent
  synapses plus the next layer's width, so the LI readout's input is counted).
  Their input current from the real-valued observation is dense:
  ``MAC = S * F_0 N_0`` (multiply-accumulates).
* ANN backbones, multiply-accumulates: ``MAC = F_0 N_0 + sum_l N_l O_l`` (each unit's input
  from below once, its outgoing weights once: for an MLP this is every ``nn.Linear`` weight);
  a GRU/LSTM layer multiplies its input and recurrent part by its gates (3 / 4):
  ``MAC = g N (F + N) + N (O - N)``.

Biases, nonlinearities and membrane updates are not counted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["count_ops", "count_parameters"]

_GATES = {"gru": 3, "lstm": 4}


def count_ops(
    layers: Sequence[Any], rates: Mapping[str, float] | None = None, *, substeps: int = 1
) -> dict[str, float]:
    """Synaptic operations and multiply-accumulates per env step (see the module docstring).

    Args:
        layers: ``LayerInfo`` tuples (or objects with ``name``, ``kind``, ``size``,
            ``fan_in``, ``fan_out``) of one backbone, input side first.
        rates: spiking layer name -> mean spikes per neuron per network step.
        substeps: network steps per env step (spiking backbones).

    Returns:
        ``{"sops_per_step", "macs_per_step"}`` (``sops_per_step`` is NaN for an ANN backbone
        and for a spiking layer without a rate).
    """
    rates = dict(rates or {})
    layers = list(layers)
    if not layers:
        return {"sops_per_step": float("nan"), "macs_per_step": 0.0}
    spiking = [lay for lay in layers if lay.kind == "spiking"]
    first = layers[0]
    if spiking:
        sops = 0.0
        for lay in spiking:
            r = rates.get(lay.name, float("nan"))
            sops += float(r) * lay.size * lay.fan_out
        return {
            "sops_per_step": substeps * sops,
            "macs_per_step": float(substeps * first.fan_in * first.size),
        }
    macs = 0.0
    for k, lay in enumerate(layers):
        gates = _GATES.get(lay.name.rstrip("0123456789"), 1)
        if gates > 1:
            macs += gates * lay.size * (lay.fan_in + lay.size) + lay.size * (lay.fan_out - lay.size)
        else:
            macs += (lay.fan_in * lay.size if k == 0 else 0) + lay.size * lay.fan_out
    return {"sops_per_step": float("nan"), "macs_per_step": float(macs)}


def count_parameters(module: Any) -> int:
    """Trainable parameters of a module."""
    return int(sum(p.numel() for p in module.parameters() if p.requires_grad))
