"""Backbones behind one recurrent protocol, the activity structure they all report, and the
conversions to and from snntorch and NIR (docs/interop.md)."""

from snrl.networks.activity import Activity, LayerActivity
from snrl.networks.interop import SnntorchBackbone, from_snntorch, to_snntorch
from snrl.networks.nir_io import from_nir, to_nir

__all__ = [
    "Activity",
    "LayerActivity",
    "SnntorchBackbone",
    "from_nir",
    "from_snntorch",
    "to_nir",
    "to_snntorch",
]
