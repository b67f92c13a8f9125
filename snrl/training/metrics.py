"""The metrics history: ``metrics.csv``, one row per update, safe against crashes.

Each row is formatted in memory and appended with a single ``os.write`` of the complete
line (``O_APPEND``), then fsynced, so a crash leaves at most one torn last line, which
:meth:`MetricsWriter.resume` and :func:`read_metrics` drop.
"""

from __future__ import annotations

import csv
import io
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snrl.envs.trials import accuracy_by_task
from snrl.errors import UserError
from snrl.io import atomic_write_text

__all__ = ["MetricsWriter", "read_metrics", "trial_columns"]


def _format_line(values: Sequence[Any]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(values)
    return buf.getvalue()


def _format_value(value: Any) -> str:
    if value is None:
        return ""
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        value = value.item()
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _complete_rows(path: Path) -> tuple[list[str] | None, list[list[str]]]:
    """Header and the complete rows (ending in a newline, right field count) of a CSV file."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            f"metrics file {path} is not UTF-8 text (byte {e.start}: {e.reason}; pass a "
            "metrics.csv written by snrl)"
        ) from None
    cut = text.rfind("\n")
    text = text[: cut + 1]  # drop a torn last line (no trailing newline)
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return None, []
    header = rows[0]
    return header, [r for r in rows[1:] if len(r) == len(header)]


class MetricsWriter:
    """Appends rows to a metrics CSV with fixed columns.

    Creating a writer (re)writes ``path`` with just the header line (atomically, parents
    created). Use :meth:`resume` to continue an existing file.

    Args:
        path: The CSV file (``run_dir / "metrics.csv"``).
        fieldnames: The columns, in order; fixed for the life of the file.

    Raises:
        ValueError: Empty, duplicate or non-string fieldnames.
    """

    def __init__(self, path: str | os.PathLike, fieldnames: Sequence[str]) -> None:
        self.path = Path(path)
        self.fieldnames = self._check_fieldnames(fieldnames)
        atomic_write_text(self.path, _format_line(self.fieldnames))
        self._fd: int | None = None
        self._open()

    @staticmethod
    def _check_fieldnames(fieldnames: Sequence[str]) -> tuple[str, ...]:
        names = tuple(fieldnames)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"fieldnames must be non-empty strings, got {fieldnames!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"fieldnames must be unique, got {fieldnames!r}")
        return names

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    @classmethod
    def resume(
        cls, path: str | os.PathLike, fieldnames: Sequence[str], upto_env_step: float
    ) -> MetricsWriter:
        """Continue a metrics file after ``--resume`` from a checkpoint at ``upto_env_step``.

        The file is rewritten atomically keeping only the complete rows whose ``env_step``
        is <= ``upto_env_step`` (rows logged after the checkpoint, and a torn last line,
        are dropped, so re-running those updates does not duplicate rows). A missing file
        is created with just the header.

        Args:
            path: The CSV file.
            fieldnames: Must equal the file's header; must include ``"env_step"``.
            upto_env_step: The env step stored in the checkpoint being resumed.

        Raises:
            UserError: If the file's header differs from ``fieldnames``.
            ValueError: If ``fieldnames`` lacks ``"env_step"``.
        """
        names = cls._check_fieldnames(fieldnames)
        if "env_step" not in names:
            raise ValueError(f"fieldnames must include 'env_step' to resume, got {names!r}")
        path = Path(path)
        kept: list[list[str]] = []
        if path.exists():
            header, rows = _complete_rows(path)
            if header is not None and tuple(header) != names:
                raise UserError(
                    f"metrics file {path} has columns {header}, expected {list(names)} "
                    "(the run was written by a different configuration or snrl version; "
                    "start a new run with --force)"
                )
            col = names.index("env_step")
            for row in rows:
                try:
                    step = float(row[col])
                except ValueError:
                    continue
                if step <= upto_env_step:
                    kept.append(row)
        writer = cls.__new__(cls)
        writer.path = path
        writer.fieldnames = names
        atomic_write_text(path, "".join(_format_line(r) for r in [list(names), *kept]))
        writer._fd = None
        writer._open()
        return writer

    def write(self, row: Mapping[str, Any]) -> None:
        """Append one row (missing columns are left empty) and fsync it.

        Args:
            row: Column name -> number/string/None (numpy and 0-d torch scalars accepted).

        Raises:
            ValueError: If ``row`` has keys that are not columns, or the writer is closed.
        """
        unknown = [k for k in row if k not in self.fieldnames]
        if unknown:
            raise ValueError(
                f"metrics row has unknown columns {unknown} (columns: {list(self.fieldnames)})"
            )
        if self._fd is None:
            raise ValueError(f"metrics writer for {self.path} is closed")
        data = _format_line([_format_value(row.get(k)) for k in self.fieldnames]).encode()
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        os.fsync(self._fd)

    append = write  # alias: ``writer.append(row)`` is the same as ``writer.write(row)``

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass


def _to_float(cell: str) -> float:
    return math.nan if cell == "" else float(cell)


def read_metrics(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read a metrics CSV into columns.

    Numeric columns become float64 arrays (empty cells are NaN); a column with any other
    text becomes an array of str. A torn last line is ignored.

    Args:
        path: The CSV file.

    Returns:
        Column name -> (n_rows,) array, in file order.

    Raises:
        UserError: If the file does not exist or has no header.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"metrics file {path} does not exist (pass a run directory's metrics.csv)")
    header, rows = _complete_rows(path)
    if header is None:
        raise UserError(f"metrics file {path} is empty (it has no header line; re-run training)")
    out: dict[str, np.ndarray] = {}
    for j, name in enumerate(header):
        cells = [r[j] for r in rows]
        try:
            out[name] = np.array([_to_float(c) for c in cells], dtype=np.float64)
        except ValueError:
            out[name] = np.array(cells, dtype=str)
    return out


def trial_columns(
    trials: Sequence[Mapping[str, Any]], tasks: Sequence[str] = ()
) -> dict[str, float]:
    """The trial columns of a metrics row of a trial task (NeuroGym).

    Args:
        trials: The trials completed in the row's window (dicts with ``"correct"``, as
            :class:`snrl.envs.trials.TrialTracker` emits them).
        tasks: The task ids of a multitask env (snrl.tasks.multitask), whose trials say
            their task in ``conditions["task"]``; empty for one task.

    Returns:
        ``{"trials": number completed, "trial_accuracy": fraction correct (NaN without
        scored trials), "eval_trial_accuracy": NaN}``, and per task of ``tasks``
        ``trial_accuracy/<task>`` and ``eval_trial_accuracy/<task>`` (NaN); the loop fills
        the ``eval_`` columns in rows with a periodic evaluation.
    """
    scored = [bool(t["correct"]) for t in trials if t.get("correct") is not None]
    row = {
        "trials": len(trials),
        "trial_accuracy": float(np.mean(scored)) if scored else math.nan,
        "eval_trial_accuracy": math.nan,
    }
    if tasks:
        for task, acc in accuracy_by_task(trials, tasks).items():
            if task in tasks:
                row[f"trial_accuracy/{task}"] = acc
        row.update({f"eval_trial_accuracy/{task}": math.nan for task in tasks})
    return row
