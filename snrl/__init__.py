"""snrl: reinforcement learning with recurrent spiking neural networks."""

from snrl.agents import DQN, PPO, Agent, DQNConfig, PPOConfig
from snrl.errors import UserError
from snrl.networks.factory import build_backbone
from snrl.networks.spiking import SpikingBackbone
from snrl.render import Trajectory, TrajectoryRenderer, plot_episode

__version__ = "0.1.0"

__all__ = [
    "DQN",
    "PPO",
    "Agent",
    "DQNConfig",
    "PPOConfig",
    "SpikingBackbone",
    "Trajectory",
    "TrajectoryRenderer",
    "UserError",
    "__version__",
    "build_backbone",
    "plot_episode",
]
