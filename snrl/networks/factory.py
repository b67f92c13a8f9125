"""One way to build a backbone by name."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from snrl.config import NEURON_DEFAULTS
from snrl.errors import UserError
from snrl.networks._args import layer_widths
from snrl.networks.ann import ACTIVATIONS, GRU, LSTM, MLP
from snrl.networks.encoders import EncodedBackbone, PopulationEncoder
from snrl.networks.spiking import NEURONS, SpikingBackbone

SPIKING = tuple(NEURONS)
ANN = ("mlp", "gru", "lstm")
BACKBONES = SPIKING + ANN
ENCODERS = ("direct", "population")


def build_backbone(
    name: str,
    input_size: int,
    output_size: int | None,
    *,
    hidden_size: int | Sequence[int] = 128,
    n_layers: int | None = None,
    force_dale_law: bool = NEURON_DEFAULTS["force_dale_law"],
    encoder: str = "direct",
    population_k: int = 8,
    substeps: int = 1,
    readout_tau_m: float = NEURON_DEFAULTS["readout_tau_m"],
    activation: str = "tanh",
    seed: int | None = None,
    layer_kwargs: dict[str, Any] | None = None,
) -> nn.Module:
    """Build a backbone that follows the recurrent protocol.

    Args:
        name: one of ``lif, alif, spylif`` (SpikingBackbone with an LI readout) or
            ``mlp, gru, lstm``.
        input_size: flat observation features.
        output_size: readout width (logits, Q-values, or 1 for a critic).
        hidden_size: neurons / units per hidden layer: an int, or one int per layer
            (spiking and mlp).
        n_layers: hidden layers (spiking and mlp; default 1 for an int ``hidden_size``, else
            its length); gru/lstm have one recurrent layer and ignore it.
        force_dale_law: hard Dale's law in the spiking layers (ignored for ANN backbones).
        encoder: ``direct`` or ``population`` input encoding (spiking backbones).
        population_k: neurons per feature of the population encoder.
        substeps: neuron steps per env step (spiking backbones; ANN backbones have no
            neuron time and ignore it, as they ignore ``force_dale_law``).
        readout_tau_m: membrane time constant of the LI readout, seconds.
        activation: hidden nonlinearity of an ``mlp``: ``tanh`` or ``relu`` (the other
            backbones ignore it).
        seed: seeds the layers' own generators.
        layer_kwargs: extra keyword arguments for every spiking layer (tau_m, dt, hh_init, ...).
    """
    if name not in BACKBONES:
        raise UserError(f"unknown backbone {name!r} (choose one of {', '.join(BACKBONES)})")
    if activation not in ACTIVATIONS:
        raise UserError(
            f"unknown activation {activation!r} (choose one of {', '.join(ACTIVATIONS)})"
        )
    if encoder not in ENCODERS:
        raise UserError(f"unknown encoder {encoder!r} (choose one of {', '.join(ENCODERS)})")
    if name in ("gru", "lstm"):
        if not isinstance(hidden_size, int):
            raise UserError(
                f"backbone {name!r} has one recurrent layer: hidden_size={hidden_size!r} "
                "(give one int)"
            )
        layer_widths(hidden_size, None, "build_backbone")  # validates the width
        cls = GRU if name == "gru" else LSTM
        return cls(input_size, hidden_size, output_size)
    widths = layer_widths(hidden_size, n_layers, "build_backbone")
    if name == "mlp":
        return MLP(input_size, widths, output_size, activation=activation)
    enc: nn.Module = nn.Identity()
    n_in = input_size
    if encoder == "population":
        enc = PopulationEncoder(input_size, k=population_k)
        n_in = enc.output_size
    net = SpikingBackbone(
        n_in,
        widths,
        output_size,
        backbone=name,
        force_dale_law=force_dale_law,
        readout_tau_m=readout_tau_m,
        substeps=substeps,
        seed=seed,
        **(layer_kwargs or {}),
    )
    if encoder == "direct":
        return net
    return EncodedBackbone(enc, net)
