"""One structure for what a network did: :class:`Activity`, a :class:`LayerActivity` per layer.

Every backbone's ``run`` returns it (``BackboneOutput.activity``); a recorded
:class:`snrl.Trajectory` holds its numpy version; the renderer, the experiments and the
algorithms' ``spike_rate_<layer name>`` metrics read it. Layers keep the backbone's order
(input side first) and are found by index or by name::

    act = net.run(x, state).activity
    act[0].spikes                      # the first layer's spikes
    act["readout"].v                   # the LI readout's membrane (= the output)
    [l.name for l in act.spiking()]    # ["lif0", "lif1"]
    act.spike_rates()                  # {"lif0": 0.12, "lif1": 0.08}
    act.to_numpy()                     # the same structure with numpy arrays

Shapes, time first: every array of a layer is ``(B, N)`` for one step or ``(T, B, N)`` for a
sequence, as the backbone's input was; in a :class:`snrl.Trajectory` (one env) ``(T, N)``.
``N`` is the layer's ``size``.

Which fields a layer has, by ``kind``:

- ``"spiking"``: ``spikes`` (0/1), ``v`` (membrane potential after each step) and the
  model's other state variables in ``extra``: ``"a"`` (ALIF adaptation), ``"i"`` (SpyLIF
  synaptic current);
- ``"readout"`` (non-spiking leaky integrator): ``v``;
- ``"ann"`` (MLP, GRU, LSTM): ``extra["h"]``, the hidden activation.

``extra`` holds model-specific traces under short names (``"h"`` for ANN layers, the state
field names of the neuron model for spiking layers). :meth:`Activity.flat` names every
array ``"<layer>.<field>"``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from snrl.errors import UserError

__all__ = ["KINDS", "Activity", "LayerActivity", "as_numpy"]

KINDS = ("spiking", "readout", "ann")
"""Layer kinds: spiking neurons, a non-spiking leaky-integrator readout, an ANN layer."""


def as_numpy(x: Any) -> Any:
    """An array-like (torch tensor on any device, list, numpy array) as a numpy array, without
    a copy where none is needed; None stays None. No torch import is needed for this."""
    if x is None:
        return None
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # a torch tensor
        return x.detach().cpu().numpy()
    return np.asarray(x)


def _concat(arrays: Sequence[Any]) -> Any:
    """Concatenate along axis 0, with torch for tensors and numpy otherwise."""
    first = arrays[0]
    if hasattr(first, "detach"):
        import torch

        return torch.cat(list(arrays), dim=0)
    return np.concatenate([np.asarray(a) for a in arrays], axis=0)


@dataclasses.dataclass(frozen=True, eq=False)
class LayerActivity:
    """One layer's activity and what a reader needs to draw or count it.

    Attributes:
        name: the layer's name in its backbone (``"lif0"``, ``"readout"``, ``"mlp0"``).
        kind: ``"spiking"``, ``"readout"`` or ``"ann"``.
        size: N, the number of neurons / units.
        spikes: spikes after each step, ``(B, N)`` / ``(T, B, N)`` (``(T, N)`` in a
            trajectory); spiking layers only, else None.
        v: membrane potential after each step (spiking and readout layers), else None.
        extra: model-specific traces of the same shape, by short name (``"h"``: ANN hidden
            activation).
        threshold: the spike threshold (spiking layers), else None.
        sign: (N,) ±1 Dale sign of each neuron's outgoing synapses, or None without Dale.
    """

    name: str
    kind: str
    size: int
    spikes: Any = None
    v: Any = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    threshold: float | None = None
    sign: Any = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or "." in self.name:
            raise UserError(f"layer name {self.name!r} (give a non-empty name without '.')")
        if self.kind not in KINDS:
            raise UserError(f"layer {self.name!r} has kind {self.kind!r} (use one of {KINDS})")
        for key in self.extra:
            if key in ("spikes", "v") or not key or "." in key:
                raise UserError(
                    f"layer {self.name!r} has an extra field {key!r} (use a short name other "
                    "than 'spikes' and 'v', without '.')"
                )

    @property
    def fields(self) -> dict[str, Any]:
        """Every array of the layer by field name: ``spikes``, ``v`` (when set), ``extra``."""
        out = {}
        if self.spikes is not None:
            out["spikes"] = self.spikes
        if self.v is not None:
            out["v"] = self.v
        out.update(self.extra)
        return out

    def get(self, field: str) -> Any:
        """The array of ``field`` (``"spikes"``, ``"v"`` or an ``extra`` name), or None."""
        return self.fields.get(field)

    def map(self, fn: Callable[[Any], Any]) -> LayerActivity:
        """The same layer with ``fn`` applied to every array (not to ``sign``)."""
        return dataclasses.replace(
            self,
            spikes=None if self.spikes is None else fn(self.spikes),
            v=None if self.v is None else fn(self.v),
            extra={k: fn(a) for k, a in self.extra.items()},
        )

    def to_numpy(self) -> LayerActivity:
        """A copy with numpy arrays (tensors are detached and moved to the CPU)."""
        out = self.map(as_numpy)
        sign = as_numpy(self.sign)
        return dataclasses.replace(out, sign=None if sign is None else sign.astype(np.int8))

    def info(self) -> dict[str, Any]:
        """The static description as plain JSON-able data (no arrays but a sign list)."""
        sign = as_numpy(self.sign)
        return {
            "name": self.name,
            "kind": self.kind,
            "size": int(self.size),
            "threshold": None if self.threshold is None else float(self.threshold),
            "sign": None if sign is None else [int(s) for s in sign.reshape(-1)],
        }


class Activity(Sequence[LayerActivity]):
    """The activity of a backbone's layers, in order (input side first).

    ``activity[i]`` and ``activity["name"]`` give a :class:`LayerActivity`; iteration goes
    over the layers; ``len`` counts them; ``"name" in activity`` tests a name.

    Args:
        layers: the layers' activities; names must be unique.
    """

    def __init__(self, layers: Iterable[LayerActivity] = ()) -> None:
        self._layers = tuple(layers)
        self._by_name = {layer.name: layer for layer in self._layers}
        if len(self._by_name) != len(self._layers):
            names = [layer.name for layer in self._layers]
            raise UserError(f"layer names repeat in {names} (give each layer its own name)")

    # ------------------------------------------------------------------ access
    def __getitem__(self, key: int | str) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            try:
                return self._by_name[key]
            except KeyError:
                raise KeyError(f"no layer {key!r} (layers: {self.names})") from None
        return self._layers[key]

    def __len__(self) -> int:
        return len(self._layers)

    def __iter__(self) -> Iterator[LayerActivity]:
        return iter(self._layers)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            return key in self._by_name
        return key in self._layers

    def __repr__(self) -> str:
        parts = [f"{a.name}({a.kind}, {a.size}: {', '.join(a.fields)})" for a in self]
        return f"Activity({'; '.join(parts)})"

    @property
    def names(self) -> list[str]:
        """The layer names, in order."""
        return [layer.name for layer in self._layers]

    def spiking(self) -> list[LayerActivity]:
        """The spiking layers, in order."""
        return [layer for layer in self._layers if layer.kind == "spiking"]

    def spike_rates(self) -> dict[str, float]:
        """Mean spikes per neuron per step of each spiking layer, by name (over all rows)."""
        rates = {}
        for layer in self.spiking():
            mean = layer.spikes.mean()
            rates[layer.name] = float(mean.item() if hasattr(mean, "item") else mean)
        return rates

    def rate_penalty(self, low: float, high: float) -> Tensor:
        """Mean over every neuron of every spiking layer of ``(r_j - clip(r_j, low, high))**2``,
        ``r_j`` the neuron's spikes per step over all time steps and rows: zero for rates in
        ``[low, high]``, differentiable where the spikes are (the surrogate gradient carries
        it). 0 when there is no spiking layer."""
        rates = []
        for layer in self.spiking():
            spikes = torch.as_tensor(layer.spikes)
            if not spikes.is_floating_point():
                spikes = spikes.float()
            rates.append(spikes.reshape(-1, layer.size).mean(0))
        if not rates:
            return torch.zeros(())
        r = torch.cat(rates)
        return ((r - r.clamp(low, high)) ** 2).mean()

    # ------------------------------------------------------------------ transforms
    def map(self, fn: Callable[[Any], Any]) -> Activity:
        """The same layers with ``fn`` applied to every array (e.g. ``lambda a: a[-1]``)."""
        return Activity(layer.map(fn) for layer in self._layers)

    def to_numpy(self) -> Activity:
        """The same structure with numpy arrays (tensors detached, moved to the CPU)."""
        return Activity(layer.to_numpy() for layer in self._layers)

    @staticmethod
    def concat(parts: Sequence[Activity]) -> Activity:
        """Join activities of consecutive pieces along the first (time) axis.

        Every part must have the same layers and fields (as successive ``run`` calls of one
        backbone give). Tensors are joined with torch, arrays with numpy.
        """
        if not parts:
            raise ValueError("Activity.concat needs at least one part")
        first = parts[0]
        for p in parts[1:]:
            if p.names != first.names:
                raise ValueError(f"cannot join activities of layers {first.names} and {p.names}")
        layers = []
        for i, layer in enumerate(first):
            pieces = [p[i] for p in parts]

            def join(field: str, _pieces: list[LayerActivity] = pieces) -> Any:
                arrays = [piece.get(field) for piece in _pieces]
                return None if arrays[0] is None else _concat(arrays)

            layers.append(
                dataclasses.replace(
                    layer,
                    spikes=join("spikes"),
                    v=join("v"),
                    extra={k: join(k) for k in layer.extra},
                )
            )
        return Activity(layers)

    # ------------------------------------------------------------------ flat names
    def flat(self) -> dict[str, Any]:
        """Every array under ``"<layer>.<field>"`` (``"lif0.spikes"``, ``"mlp0.h"``)."""
        return {f"{a.name}.{k}": arr for a in self._layers for k, arr in a.fields.items()}

    def info(self) -> list[dict[str, Any]]:
        """The static description of each layer (see :meth:`LayerActivity.info`)."""
        return [layer.info() for layer in self._layers]

    @classmethod
    def from_flat(
        cls, arrays: Mapping[str, Any], layers: Sequence[Mapping[str, Any]] | None = None
    ) -> Activity:
        """Rebuild from ``"<layer>.<field>"`` arrays (the format before this structure).

        Args:
            arrays: ``"<layer>.<field>" -> array``.
            layers: optional layer descriptions (dicts with ``name``, ``kind``, ``size``,
                ``threshold``, ``sign``), in order. Without one, a layer's kind is inferred
                from its fields (``spikes``: spiking, ``h``: ann, else readout), its size from
                its arrays' last axis, and it has no threshold or sign.

        Raises:
            UserError: a key has no ``"."``.
        """
        grouped: dict[str, dict[str, Any]] = {}
        for key, arr in arrays.items():
            name, dot, field = str(key).rpartition(".")
            if not dot or not name or not field:
                raise UserError(f"activity key {key!r} is not '<layer>.<field>' (e.g. 'lif0.v')")
            grouped.setdefault(name, {})[field] = arr
        described = {d["name"]: d for d in (layers or [])}
        order = [d["name"] for d in (layers or []) if d["name"] in grouped]
        order += [name for name in grouped if name not in described]
        out = []
        for name in order:
            f = dict(grouped[name])
            d = described.get(name)
            if d is None:
                kind = "spiking" if "spikes" in f else "ann" if "h" in f else "readout"
                size = int(np.shape(next(iter(f.values())))[-1])
                d = {"kind": kind, "size": size}
            out.append(
                LayerActivity(
                    name=name,
                    kind=d["kind"],
                    size=int(d["size"]),
                    spikes=f.pop("spikes", None),
                    v=f.pop("v", None),
                    extra=f,
                    threshold=d.get("threshold"),
                    sign=d.get("sign"),
                )
            )
        return cls(out)
