"""The run log every algorithm's loop writes to: one metrics row per update goes to the
history, metrics.csv and the progress bar; the log keeps the best evaluation and the wall
time, says when best.pt and last.pt are due, and draws the learning curve at the end.

It knows no algorithm: the loop passes its counters in and writes the checkpoints itself.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any

from snrl.training.metrics import MetricsWriter
from snrl.training.plots import plot_learning_curve
from snrl.training.progress import Progress
from snrl.training.rundir import lock_run_dir


class RunLogger:
    """Receives one metrics row per update and keeps the run's bookkeeping.

    With a run directory, the log holds the directory's lock from its creation to
    :meth:`close` (:func:`snrl.training.rundir.lock_run_dir`): a second process that tries
    to write the same run meanwhile is refused.

    Args:
        total_steps: env steps of the run (the progress bar's total; last.pt is due there).
        run_dir: the run directory (metrics.csv, learning_curve.png) or None.
        env_step: env steps done before this call of ``learn`` (a resumed run's).
        n_updates: metrics rows written before.
        best_eval: the best periodic evaluation so far (-inf for none).
        wall_time: seconds of training before.
        checkpoint_interval: rows between two last.pt.
        title: the learning curve's title.
        progress: show a progress bar.
    """

    def __init__(
        self,
        total_steps: int,
        *,
        run_dir: Path | None,
        env_step: int,
        n_updates: int,
        best_eval: float,
        wall_time: float,
        checkpoint_interval: int,
        title: str,
        progress: bool = True,
    ):
        self.total = total_steps
        self.run_dir = run_dir
        self.best_eval = float(best_eval)
        self.wall_time = float(wall_time)
        self.checkpoint_interval = checkpoint_interval
        self.title = title
        self.history: dict[str, list] = {}
        self.last_row: dict[str, Any] = {}
        """The last row logged, as metrics.csv got it (``wall_time`` and the columns that
        every row has included)."""
        self.writer: MetricsWriter | None = None
        self._wall_offset = float(wall_time)
        self._resumed = n_updates > 0
        self._last_step = env_step
        self._lock = contextlib.ExitStack()
        if run_dir is not None:
            self._lock.enter_context(lock_run_dir(run_dir))
        self.progress = Progress(total_steps, initial=env_step, disable=not progress, title=title)

    def _metrics_path(self) -> Path | None:
        return None if self.run_dir is None else self.run_dir / "metrics.csv"

    def _open(self, row: dict[str, Any]) -> None:
        path = self._metrics_path()
        if path is None:
            return
        fields = ["env_step", "wall_time", "episode_return_mean", "eval_return_mean"]
        fields += [k for k in row if k not in fields]
        if path.exists() and self._resumed:
            self.writer = MetricsWriter.resume(path, fields, upto_env_step=self._last_step)
        else:
            self.writer = MetricsWriter(path, fields)

    def log(
        self,
        row: dict[str, Any],
        elapsed: float,
        *,
        env_step: int,
        n_updates: int,
        evaluated: bool,
    ) -> tuple[bool, bool]:
        """Record one row (``elapsed``: seconds since this ``learn`` started).

        Returns:
            ``(best_due, last_due)``: whether best.pt (a new best evaluation) and last.pt
            (every ``checkpoint_interval`` rows and at the end) should be written now.
        """
        row = dict(row)
        self.wall_time = row["wall_time"] = self._wall_offset + elapsed
        row.setdefault("eval_return_mean", math.nan)
        if self.writer is None:
            self._open(row)
        self.last_row = row
        for k, v in row.items():
            self.history.setdefault(k, []).append(v)
        if self.writer is not None:
            self.writer.append({k: v for k, v in row.items() if k in self.writer.fieldnames})
        self.progress.update(
            env_step - self._last_step,
            ret=row.get("episode_return_mean", math.nan),
            eval=row["eval_return_mean"],
        )
        self._last_step = env_step
        best_due = evaluated and row["eval_return_mean"] >= self.best_eval
        if best_due:
            self.best_eval = float(row["eval_return_mean"])
        last_due = n_updates % self.checkpoint_interval == 0 or env_step >= self.total
        return best_due, last_due

    def close(self) -> None:
        """Close the progress bar and metrics.csv, draw the learning curve, release the lock."""
        with self._lock:
            self.progress.close()
            if self.writer is not None:
                self.writer.close()
                plot_learning_curve(
                    self._metrics_path(), self.run_dir / "learning_curve.png", title=self.title
                )
