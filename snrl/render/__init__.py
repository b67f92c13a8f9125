"""Recorded episodes and their videos: Trajectory, TrajectoryRenderer, plot_episode."""

from snrl.render.renderer import TrajectoryRenderer
from snrl.render.summary import plot_episode
from snrl.trajectory import Trajectory, layer_dicts  # the floor module; re-exported here

__all__ = ["Trajectory", "TrajectoryRenderer", "layer_dicts", "plot_episode"]
