"""One way to build a backbone by name."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from snrl.config import NEURON_DEFAULTS
from snrl.errors import UserError
from snrl.layers import LIFParameters
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
    params: LIFParameters | None = None,
    force_dale_law: bool = NEURON_DEFAULTS["force_dale_law"],
    recurrent_sign: float = NEURON_DEFAULTS["recurrent_sign"],
    encoder: str = "direct",
    population_k: int = 8,
    substeps: int = 1,
    readout_tau_m: float = NEURON_DEFAULTS["readout_tau_m"],
    activation: str = "tanh",
    seed: int | None = None,
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
        params: the neuron parameters of the spiking layers, built once and passed unchanged
            to each of them: a :class:`~snrl.layers.LIFParameters` for ``lif``,
            :class:`~snrl.layers.ALIFParameters` for ``alif``,
            :class:`~snrl.layers.SpyLIFParameters` for ``spylif`` (None: the defaults).
            ANN backbones have no neurons and refuse it.
        force_dale_law: hard Dale's law in the spiking layers (ignored for ANN backbones).
        recurrent_sign: fraction of inhibitory neurons with ``force_dale_law``.
        encoder: ``direct`` or ``population`` input encoding (spiking backbones).
        population_k: neurons per feature of the population encoder.
        substeps: neuron steps per env step (spiking backbones; ANN backbones have no
            neuron time and ignore it, as they ignore ``force_dale_law``).
        readout_tau_m: membrane time constant of the LI readout, seconds.
        activation: hidden nonlinearity of an ``mlp``: ``tanh`` or ``relu`` (the other
            backbones ignore it).
        seed: seeds the layers' own generators.
    """
    if name not in BACKBONES:
        raise UserError(f"unknown backbone {name!r} (choose one of {', '.join(BACKBONES)})")
    if activation not in ACTIVATIONS:
        raise UserError(
            f"unknown activation {activation!r} (choose one of {', '.join(ACTIVATIONS)})"
        )
    if encoder not in ENCODERS:
        raise UserError(f"unknown encoder {encoder!r} (choose one of {', '.join(ENCODERS)})")
    if params is not None and name in ANN:
        raise UserError(
            f"params={type(params).__name__}(...) is for the spiking backbones "
            f"({', '.join(SPIKING)}); backbone {name!r} has no neurons (drop params)"
        )
    if name in ("gru", "lstm"):
        if not isinstance(hidden_size, int):
            raise UserError(
                f"backbone {name!r} has one recurrent layer: hidden_size={hidden_size!r} "
                "(give one int)"
            )
        layer_widths(hidden_size, None, "build_backbone")  # validates the width
        cls = GRU if name == "gru" else LSTM
        return cls(input_size, hidden_size, output_size)
    if name == "mlp":  # the widths are checked once, by the backbone
        return MLP(input_size, hidden_size, output_size, n_layers=n_layers, activation=activation)
    enc: nn.Module = nn.Identity()
    n_in = input_size
    if encoder == "population":
        enc = PopulationEncoder(input_size, k=population_k)
        n_in = enc.output_size
    net = SpikingBackbone(
        n_in,
        hidden_size,
        output_size,
        n_layers=n_layers,
        backbone=name,
        params=params,
        force_dale_law=force_dale_law,
        recurrent_sign=recurrent_sign,
        readout_tau_m=readout_tau_m,
        substeps=substeps,
        seed=seed,
    )
    if encoder == "direct":
        return net
    return EncodedBackbone(enc, net)
