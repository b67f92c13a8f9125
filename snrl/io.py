"""The floor every snrl module may use for files: atomic writes, and JSON of bounded depth.

Atomic file writes: a temp file in the same directory, flush + fsync, then ``os.replace``.

A reader (or a crash) never sees a partially written file under the final name: it sees the
old file or the complete new one.

JSON (and TOML) values a user passes (``--env-kwargs``, ``--set key=...``, a config file, a
request body) nest at most :data:`MAX_DEPTH` levels: :func:`load_json` parses text,
:func:`check_depth` checks a value already parsed. Both work without recursion, so a value
nested 100 000 levels deep is refused in one clear line rather than a ``RecursionError`` of
the parser or of the code that walks the value later.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from snrl.errors import UserError

__all__ = [
    "MAX_DEPTH",
    "AtomicPath",
    "atomic_open",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_depth",
    "check_json_depth",
    "json_depth",
    "load_json",
    "write_json_atomic",
]

#: Most levels of objects/tables and arrays that a JSON or TOML value a user passes may nest
#: (``{"a": [1]}`` is 2 levels; snrl's own configs need 6).
MAX_DEPTH = 32


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


# a JSON string (its end quote optional, so that an unterminated one is still consumed in one
# step and the scan stays linear) or one bracket
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


def json_depth(text: str, limit: int | None = None) -> int:
    """How deeply the objects and arrays of JSON ``text`` nest (0 for a scalar), read from
    the text without parsing it (brackets inside strings do not count).

    Args:
        text: JSON text (not validated here: :func:`json.loads` does that).
        limit: Stop counting as soon as the depth exceeds this (the result is then
            ``limit + 1``).
    """
    depth = deepest = 0
    for m in _JSON_TOKEN.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if limit is not None and deepest > limit:
                    return deepest
        elif c in "]}":
            depth = max(depth - 1, 0)
    return deepest


def _too_deep(what: str, max_depth: int) -> UserError:
    return UserError(
        f"{what} nests more than {max_depth} levels of objects and arrays (pass a flatter value)"
    )


def load_json(
    text: str | bytes, *, what: str = "the JSON value", max_depth: int = MAX_DEPTH, **kwargs: Any
) -> Any:
    """``json.loads(text)`` for a value a user passes, refusing one nested deeper than
    ``max_depth`` before the parser (which recurses) sees it.

    Args:
        text: JSON text; bytes are decoded as UTF-8.
        what: How the message names the value (``"--env-kwargs"``).
        max_depth: Most levels of objects and arrays.
        **kwargs: Passed to :func:`json.loads` (e.g. ``parse_constant``).

    Raises:
        UserError: The value nests too deeply (a ``ValueError``, as is every other error).
        ValueError: Not JSON (``json.JSONDecodeError``) or not UTF-8 (``UnicodeDecodeError``).
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    check_json_depth(text, what=what, max_depth=max_depth)
    return json.loads(text, **kwargs)


def check_json_depth(
    text: str, *, what: str = "the JSON value", max_depth: int = MAX_DEPTH
) -> None:
    """Refuse JSON ``text`` whose objects and arrays nest deeper than ``max_depth`` levels
    (before anything parses it).

    Raises:
        UserError: Naming ``what`` and the limit.
    """
    if json_depth(text, max_depth) > max_depth:
        raise _too_deep(what, max_depth)


def check_depth(value: Any, *, what: str = "the value", max_depth: int = MAX_DEPTH) -> None:
    """Refuse a value (dicts, lists and tuples, as JSON or TOML parse them) nested deeper
    than ``max_depth`` levels. Iterative: any depth is checked without recursion.

    Raises:
        UserError: Naming ``what`` and the limit.
    """
    stack = [(value, 1)]
    seen: set[tuple[int, int]] = set()  # a container shared by two parents is walked once
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > max_depth:  # also where a container that holds itself ends
            raise _too_deep(what, max_depth)
        if (id(item), depth) in seen:
            continue
        seen.add((id(item), depth))
        stack.extend((child, depth + 1) for child in children)
