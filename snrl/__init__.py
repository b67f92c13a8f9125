"""snrl: reinforcement learning with recurrent spiking neural networks."""

from snrl import callbacks
from snrl.agents import A2C, DQN, PPO, A2CConfig, Agent, DQNConfig, PPOConfig
from snrl.agents import load_algo as load
from snrl.agents.curriculum import Curriculum, Lesson
from snrl.errors import UserError
from snrl.networks.activity import Activity, LayerActivity
from snrl.networks.factory import build_backbone
from snrl.networks.spiking import SpikingBackbone
from snrl.render import TrajectoryRenderer, plot_episode
from snrl.trajectory import Trajectory

__version__ = "0.2.0"

__all__ = [
    "A2C",
    "DQN",
    "PPO",
    "A2CConfig",
    "Activity",
    "Agent",
    "Curriculum",
    "DQNConfig",
    "LayerActivity",
    "Lesson",
    "PPOConfig",
    "SpikingBackbone",
    "Trajectory",
    "TrajectoryRenderer",
    "UserError",
    "__version__",
    "build_backbone",
    "callbacks",
    "load",
    "plot_episode",
    "tune",
]


def tune(env: str, **kwargs):
    """A hyperparameter study on Optuna (the ``[tune]`` extra): ``snrl.tune("CartPole-v1",
    out="study", trials=20, steps=50_000)``. The arguments and the result are those of
    :func:`snrl.experiments.tune.tune` (docs/tune.md); imported when called, so that
    ``import snrl`` needs neither Optuna nor the experiments package."""
    from snrl.experiments.tune import tune as run_study

    return run_study(env, **kwargs)
