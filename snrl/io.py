"""The floor every snrl module may use for files: atomic writes.

Atomic file writes: a temp file in the same directory, flush + fsync, then ``os.replace``.

A reader (or a crash) never sees a partially written file under the final name: it sees the
old file or the complete new one.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "AtomicPath",
    "atomic_open",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "write_json_atomic",
]


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _default_mode() -> int:
    """The mode ``open()`` would give a new file: 0o666 minus the process umask."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temp file next to ``path``; on a clean exit it replaces ``path`` atomically.

    Parent directories are created. If the body raises, the temp file is removed and
    ``path`` is left untouched.

    Args:
        path: The final file.
        mode: ``"wb"`` or ``"w"`` (text, UTF-8).

    Yields:
        The open temp file.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open mode must be 'wb' or 'w', got {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _default_mode())  # mkstemp makes 0600; give the file open()'s mode
        with os.fdopen(fd, mode, **({"encoding": "utf-8"} if mode == "w" else {})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


class AtomicPath:
    """A temp file next to ``path`` that becomes ``path`` on :meth:`commit`.

    For writers that need a file *name* rather than an open file (an ffmpeg subprocess, an
    image library) or that stay open across calls. The temp file is created empty, named
    ``.<name>.<random>.tmp`` in the destination directory (the same pattern as
    :func:`atomic_open`), with the mode ``open()`` would give. Use it as a context manager
    (``with atomic_path(p) as tmp: write(tmp)``: committed on a clean exit, discarded if the
    body raises) or call :meth:`commit` / :meth:`discard` yourself.

    Raises:
        OSError: the directory cannot be created or written.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        name, parent = self.path.name, self.path.parent
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=parent)
        self.tmp = Path(tmp)
        try:
            os.fchmod(fd, _default_mode())
        finally:
            os.close(fd)

    def commit(self) -> None:
        """Flush the temp file to disk and move it to ``path`` (then sync the directory)."""
        try:
            fd = os.open(self.tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(self.tmp, self.path)
        except BaseException:
            self.discard()
            raise
        _fsync_dir(self.path.parent)

    def discard(self) -> None:
        """Remove the temp file (``path`` is left untouched)."""
        with contextlib.suppress(OSError):
            os.unlink(self.tmp)

    def __enter__(self) -> Path:
        return self.tmp

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.discard()


def atomic_path(path: str | os.PathLike) -> AtomicPath:
    """A temp path next to ``path`` that replaces it on success (see :class:`AtomicPath`)."""
    return AtomicPath(path)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (parents created)."""
    with atomic_open(path, "wb") as f:
        f.write(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (parents created)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON (with a trailing newline) to ``path`` atomically.

    Raises:
        TypeError: If ``obj`` is not JSON-serializable (nothing is written).
    """
    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")
