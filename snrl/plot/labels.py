"""Human-readable labels for figures: layers, backbones, compared groups, units of time.

Internal names (``lif0``, ``force_dale_law=True``) stay in files; figures say what they
mean::

    layer_label(traj.activity[0], 0)   # "Layer 1: LIF, 128 neurons (102 E / 26 I)"
    backbone_label("alif")             # "ALIF"
    group_label("lif force_dale_law=True hidden_size=64")   # "LIF, Dale, 64 neurons"
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["backbone_label", "ei_counts", "group_label", "layer_label", "rate_unit", "time_unit"]

BACKBONES = {
    "lif": "LIF",
    "alif": "ALIF",
    "spylif": "SpyLIF",
    "li": "LI",
    "mlp": "MLP",
    "gru": "GRU",
    "lstm": "LSTM",
    # a user's snntorch network (snrl.networks.from_snntorch): its neurons by class
    "snntorch": "snntorch",
    "leaky": "snntorch Leaky",
    "rleaky": "snntorch RLeaky",
    "synaptic": "snntorch Synaptic",
    "rsynaptic": "snntorch RSynaptic",
}


def backbone_label(name: str | None) -> str:
    """``"lif"`` -> ``"LIF"``; an unknown name is returned as given."""
    if not name:
        return ""
    return BACKBONES.get(str(name).lower(), str(name))


def _get(layer: Any, key: str) -> Any:
    if isinstance(layer, Mapping):
        return layer.get(key)
    return getattr(layer, key, None)


def ei_counts(sign: Any) -> tuple[int, int] | None:
    """``(n_excitatory, n_inhibitory)`` of a ±1 sign vector, or None without one."""
    if sign is None:
        return None
    s = np.asarray(sign.detach().cpu() if hasattr(sign, "detach") else sign).reshape(-1)
    return int(np.sum(s > 0)), int(np.sum(s < 0))


def _model(name: str, kind: str, backbone: str | None) -> str:
    """The neuron model / layer type of a layer, from its name (``lif0`` -> ``LIF``)."""
    if kind == "readout":
        return "LI readout"
    stem = re.sub(r"\d+$", "", name).lower()
    if stem in BACKBONES:
        return BACKBONES[stem]
    if backbone:
        return backbone_label(backbone)
    return "spiking" if kind == "spiking" else name


def layer_label(layer: Any, index: int | None = None, *, backbone: str | None = None) -> str:
    """A layer described for a figure: ``"Layer 1: LIF, 128 neurons (102 E / 26 I)"``.

    Args:
        layer: a :class:`~snrl.networks.LayerActivity`, a ``LayerInfo`` or a layer dict
            (``name``, ``kind``, ``size``, ``sign``).
        index: 0-based position of the layer in its network (``None``: no "Layer k:"
            prefix; a readout is called "Readout").
        backbone: the network's backbone name, used when the layer name says nothing.
    """
    name, kind = str(_get(layer, "name") or ""), str(_get(layer, "kind") or "")
    size = int(_get(layer, "size") or 0)
    model = _model(name, kind, backbone)
    units = "neuron" if kind in ("spiking", "readout") else "unit"
    text = f"{model}, {size} {units}{'' if size == 1 else 's'}"
    ei = ei_counts(_get(layer, "sign"))
    if ei is not None:
        text += f" ({ei[0]} E / {ei[1]} I)"
    if kind == "readout":
        return f"Readout: LI, {size} {units}{'' if size == 1 else 's'}"
    return text if index is None else f"Layer {index + 1}: {text}"


_VALUE_WORDS = {
    ("force_dale_law", "True"): "Dale",
    ("force_dale_law", "False"): "no Dale",
    ("learn_tau", "True"): "learned tau",
}
_KEY_WORDS = {
    "hidden_size": "{} neurons",
    "n_layers": "{} layers",
    "recurrent_sign": "{} inhibitory",
    "tau_m": "tau_m {} s",
    "hh_init": "init {}",
}


def group_label(label: str) -> str:
    """A compared group's internal name made readable.

    ``"lif force_dale_law=True hidden_size=64"`` -> ``"LIF, Dale, 64 neurons"``;
    unknown ``key=value`` parts are kept as they are.
    """
    parts = str(label).split()
    if not parts:
        return str(label)
    out = [backbone_label(parts[0]) if "=" not in parts[0] else parts[0]]
    for part in parts[1:]:
        key, eq, value = part.partition("=")
        if not eq:
            out.append(part)
        elif (key, value) in _VALUE_WORDS:
            out.append(_VALUE_WORDS[(key, value)])
        elif key in _KEY_WORDS:
            out.append(_KEY_WORDS[key].format(value))
        else:
            out.append(part)
    return ", ".join(out)


def time_unit(dt: float | None) -> tuple[float, str]:
    """``(scale, label)`` turning step indices into a time axis: seconds when ``dt`` (s per
    step) is known, else steps."""
    if dt is not None and np.isfinite(dt) and dt > 0:
        return float(dt), "time (s)"
    return 1.0, "step"


def rate_unit(dt: float | None) -> tuple[float, str]:
    """``(scale, label)`` turning spikes per step into a rate: Hz when ``dt`` is known."""
    if dt is not None and np.isfinite(dt) and dt > 0:
        return 1.0 / float(dt), "rate (Hz)"
    return 1.0, "rate (spikes / step)"
