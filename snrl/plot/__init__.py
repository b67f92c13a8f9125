"""Figures of spiking activity, usable on any spike array, in one palette.

```python
from snrl.plot import activity_figure, raster, traces, rate_histogram, layer_label
from snrl.palette import E_COLOR, I_COLOR, group_styles
```

- :func:`raster`: E/I grouped (or sorted by rate), time in s when ``dt`` is known, neuron
  counts on the axes;
- :func:`traces`: membrane potentials with the threshold labelled;
- :func:`rate_histogram`: per-neuron rates (Hz when ``dt`` is known), E and I apart;
- :func:`activity_figure`: all of them for a network's :class:`~snrl.networks.Activity`;
- :mod:`snrl.palette`: the colours of every snrl figure and video (Okabe–Ito);
- :mod:`snrl.plot.labels`: human-readable layer and group labels.

Every function draws on a given matplotlib Axes or builds a
:class:`matplotlib.figure.Figure` on its own canvas: pyplot and the global backend are
never touched.
"""

from snrl.palette import E_COLOR, I_COLOR, group_styles
from snrl.plot._util import save_figure
from snrl.plot.figures import activity_figure
from snrl.plot.histograms import neuron_rates, rate_histogram
from snrl.plot.labels import group_label, layer_label
from snrl.plot.raster import raster, raster_order
from snrl.plot.traces import pick_units, traces

__all__ = [
    "E_COLOR",
    "I_COLOR",
    "activity_figure",
    "group_label",
    "group_styles",
    "layer_label",
    "neuron_rates",
    "pick_units",
    "raster",
    "raster_order",
    "rate_histogram",
    "save_figure",
    "traces",
]
