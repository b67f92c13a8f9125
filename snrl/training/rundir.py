"""The run directory: creation rules for ``--resume`` / ``--force``.

Layout (see DESIGN.md): ``config.json``, ``metrics.csv``, ``checkpoints/best.pt``,
``checkpoints/last.pt``, ``learning_curve.png``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from snrl.errors import UserError
from snrl.io import write_json_atomic

__all__ = ["prepare_run_dir", "write_json_atomic", "RUN_MARKERS"]

#: Entries whose presence marks a directory as an snrl run directory (``--force`` only
#: deletes directories that have at least one of them).
RUN_MARKERS = ("config.json", "metrics.csv", "checkpoints", "learning_curve.png")


def _check_writable(out: Path) -> None:
    try:
        fd, tmp = tempfile.mkstemp(prefix=".snrl-write-test.", dir=out)
    except OSError as e:
        raise UserError(
            f"run directory {out} is not writable ({e.strerror or e}; choose another --out)"
        ) from e
    os.close(fd)
    os.unlink(tmp)


def prepare_run_dir(out: str | os.PathLike, *, resume: bool, force: bool) -> Path:
    """Create (or reuse, or wipe) the run directory ``out`` and its ``checkpoints/``.

    Rules:
        * both ``resume`` and ``force`` -> UserError;
        * ``resume``: ``out/checkpoints/last.pt`` must exist; nothing is deleted;
        * ``force``: an existing non-empty ``out`` is emptied first, but only if it looks
          like a run directory (has one of :data:`RUN_MARKERS`), so a typo cannot wipe an
          unrelated folder;
        * neither: ``out`` must not exist or be empty.

    Args:
        out: The run directory.
        resume: Continue the run in ``out``.
        force: Overwrite the run in ``out``.

    Returns:
        ``out`` as a :class:`Path`.

    Raises:
        UserError: For the cases above, when ``out`` is a file, or is not writable.
    """
    if resume and force:
        raise UserError("--resume and --force are mutually exclusive (pass at most one)")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UserError(f"run directory {out} exists and is not a directory (choose another --out)")
    if resume:
        last = out / "checkpoints" / "last.pt"
        if not last.is_file():
            raise UserError(
                f"cannot resume: {last} does not exist (start a new run without --resume, "
                "or pass the directory of an earlier run)"
            )
        _check_writable(out)
        return out
    if out.is_dir():
        entries = list(out.iterdir())
        if entries and not force:
            raise UserError(
                f"run directory {out} exists (pass --resume to continue it or --force to overwrite)"
            )
        if entries:
            if not any((out / m).exists() for m in RUN_MARKERS):
                raise UserError(
                    f"run directory {out} is not empty and does not look like an snrl run "
                    f"(none of {', '.join(RUN_MARKERS)}); refusing to delete it with --force "
                    "(choose another --out)"
                )
            try:
                for entry in entries:
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry)
                    else:
                        entry.unlink()
            except OSError as e:
                raise UserError(
                    f"cannot clear run directory {out}: {e} (remove it by hand or choose "
                    "another --out)"
                ) from e
    try:
        (out / "checkpoints").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(
            f"cannot create run directory {out} ({e.strerror or e}; choose another --out)"
        ) from e
    _check_writable(out)
    return out
