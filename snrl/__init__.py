"""snrl: reinforcement learning with recurrent spiking neural networks."""

from snrl.errors import UserError

__version__ = "0.1.0"

__all__ = ["UserError", "__version__"]
