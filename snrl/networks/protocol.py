"""The recurrent protocol shared by every backbone, spiking or not.

```python
state = net.initial_state(batch_size)       # NamedTuple / tuple of them; () for an MLP
out, state = net(x, state)                  # x: (B, F) one step, or (T, B, F) a sequence
res = net.run(x, state)                     # BackboneOutput(out, state, activity)
state = net.reset_state(state, done)        # done: bool (B,): re-initialize those rows only
net.layer_info()                            # list[LayerInfo]: what ``activity`` holds
```

``forward`` is ``run`` without the activity. ``activity`` is an
:class:`~snrl.networks.activity.Activity`: one :class:`~snrl.networks.activity.LayerActivity`
per layer (by index or name), each array shaped like ``out`` but with that layer's width:
``(B, N)`` for a step, ``(T, B, N)`` for a sequence. Spiking layers report ``spikes`` and
``v``; a readout reports ``v``; ANN layers report ``extra["h"]``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from torch import Tensor

from snrl.networks.activity import Activity


class BackboneOutput(NamedTuple):
    """What :meth:`run` returns."""

    out: Tensor
    """(B, O) or (T, B, O): the backbone's output features."""
    state: Any
    """The state after the last step."""
    activity: Activity
    """Per-layer activity: arrays (B, N) or (T, B, N), see :mod:`snrl.networks.activity`."""


class LayerInfo(NamedTuple):
    """Static description of one layer, for renderers and energy counts."""

    name: str
    """The layer's name in ``activity`` (e.g. ``"lif0"``, ``"readout"``, ``"mlp0"``)."""
    kind: str
    """``"spiking"``, ``"readout"`` (non-spiking membrane) or ``"ann"``."""
    size: int
    """Number of neurons / units."""
    fan_in: int
    """Inputs per unit from the layer below (the observation for the first layer)."""
    fan_out: int
    """Synapses leaving each unit: recurrent (if any) plus the next layer's width."""
    threshold: float | None
    """Spike threshold (spiking layers), else ``None``."""
    sign: Tensor | None
    """(N,) ±1 Dale sign of each neuron's outgoing synapses, or ``None`` without Dale."""
