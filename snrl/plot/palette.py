"""Deprecated location: the palette lives in :mod:`snrl.palette` (one module, below every
figure-making floor, so that analysis, training and render figures share it)."""

from snrl.palette import *  # noqa: F403
from snrl.palette import __all__  # noqa: F401
