"""Videos and figures of recorded episodes (:class:`snrl.Trajectory`): TrajectoryRenderer,
plot_episode."""

from snrl.render.renderer import TrajectoryRenderer
from snrl.render.summary import plot_episode

__all__ = ["TrajectoryRenderer", "plot_episode"]
