"""Backbones behind one recurrent protocol, the activity structure they all report, and the
conversions to and from snntorch."""

from snrl.networks.activity import Activity, LayerActivity
from snrl.networks.interop import SnntorchBackbone, from_snntorch, to_snntorch

__all__ = ["Activity", "LayerActivity", "SnntorchBackbone", "from_snntorch", "to_snntorch"]
