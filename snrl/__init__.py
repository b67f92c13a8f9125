"""snrl: reinforcement learning with recurrent spiking neural networks."""

from snrl.agents import PPO, Agent, PPOConfig
from snrl.errors import UserError
from snrl.networks.factory import build_backbone
from snrl.render.trajectory import Trajectory

__version__ = "0.1.0"

__all__ = ["PPO", "Agent", "PPOConfig", "Trajectory", "UserError", "__version__", "build_backbone"]
