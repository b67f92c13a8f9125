"""Recurrent spiking layers: nn.Module shells around the step functions of snrl.functional."""

from snrl.functional.neurons import ALIFState, LIFState, LIState, SpyLIFState
from snrl.layers.alif import ALIFLayer
from snrl.layers.base import LayerOutput
from snrl.layers.li import LILayer
from snrl.layers.lif import LIFLayer
from snrl.layers.params import (
    HH_INITS,
    ALIFParameters,
    LIFParameters,
    LIParameters,
    SpyLIFParameters,
)
from snrl.layers.spylif import SpyLIFLayer

__all__ = [
    "HH_INITS",
    "ALIFLayer",
    "ALIFParameters",
    "ALIFState",
    "LIFLayer",
    "LIFParameters",
    "LIFState",
    "LILayer",
    "LIParameters",
    "LIState",
    "LayerOutput",
    "SpyLIFLayer",
    "SpyLIFParameters",
    "SpyLIFState",
]
