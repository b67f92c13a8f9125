"""Training plumbing: checkpoints, metrics history, run directory, plots, progress."""

from snrl.training.atomic import (
    atomic_open,
    atomic_write_bytes,
    atomic_write_text,
    write_json_atomic,
)
from snrl.training.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from snrl.training.metrics import MetricsWriter, read_metrics
from snrl.training.plots import plot_learning_curve
from snrl.training.progress import Progress
from snrl.training.rundir import prepare_run_dir

__all__ = [
    "MetricsWriter",
    "Progress",
    "atomic_open",
    "atomic_write_bytes",
    "atomic_write_text",
    "load_checkpoint",
    "plot_learning_curve",
    "prepare_run_dir",
    "read_metrics",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
    "write_json_atomic",
]
