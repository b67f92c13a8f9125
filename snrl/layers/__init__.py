"""Recurrent spiking layers: nn.Module shells around the step functions of snrl.functional."""

from snrl.functional.neurons import ALIFState, LIFState, LIState, SpyLIFState
from snrl.layers.alif import ALIFLayer
from snrl.layers.base import HH_INITS, LayerOutput
from snrl.layers.li import LILayer
from snrl.layers.lif import LIFLayer
from snrl.layers.spylif import SpyLIFLayer

__all__ = [
    "HH_INITS",
    "ALIFLayer",
    "ALIFState",
    "LIFLayer",
    "LIFState",
    "LILayer",
    "LIState",
    "LayerOutput",
    "SpyLIFLayer",
    "SpyLIFState",
]
