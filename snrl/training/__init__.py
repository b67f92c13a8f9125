"""Training plumbing: checkpoints, metrics history, run directory, plots, progress."""

from snrl.training.atomic import (
    atomic_open,
    atomic_write_bytes,
    atomic_write_text,
    write_json_atomic,
)
from snrl.training.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from snrl.training.rundir import prepare_run_dir

__all__ = [
    "atomic_open",
    "atomic_write_bytes",
    "atomic_write_text",
    "load_checkpoint",
    "prepare_run_dir",
    "rng_state",
    "save_checkpoint",
    "set_rng_state",
    "write_json_atomic",
]
