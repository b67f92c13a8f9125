"""Recorded episodes and their videos: Trajectory, TrajectoryRenderer, plot_episode."""

from snrl.render.trajectory import Trajectory, layer_dicts

__all__ = ["Trajectory", "layer_dicts"]
