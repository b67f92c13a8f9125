"""Training plumbing: checkpoints, metrics history, run directory, plots, progress."""

from snrl.training.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from snrl.training.metrics import MetricsWriter, read_metrics
from snrl.training.plots import plot_learning_curve
from snrl.training.progress import Progress
from snrl.training.rundir import prepare_run_dir

__all__ = [
    "MetricsWriter",
    "Progress",
    "load_checkpoint",
    "plot_learning_curve",
    "prepare_run_dir",
    "read_metrics",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
]
