"""Backbones behind one recurrent protocol, and the activity structure they all report."""

from snrl.networks.activity import Activity, LayerActivity

__all__ = ["Activity", "LayerActivity"]
