"""The floor every snrl module may use for files: atomic writes, snrl's own temp files, locks,
and JSON of bounded depth.

Atomic file writes: a temp file in the same directory, flush + fsync, then ``os.replace``.
A reader (or a crash) never sees a partially written file under the final name: it sees the
old file or the complete new one.

JSON (and TOML) values a user passes (``--env-kwargs``, ``--set key=...``, a config file, a
request body) nest at most :data:`MAX_DEPTH` levels: :func:`load_json` parses text,
:func:`check_depth` checks a value already parsed. Both work without recursion, so a value
nested 100 000 levels deep is refused in one clear line rather than a ``RecursionError`` of
the parser or of the code that walks the value later.

Temp files and what snrl deletes: a process killed mid-write leaves its temp file behind.
snrl removes such a file later only when it can prove that snrl made it, never because its
name looks like one of ours: every temp file is named ``.<name>.<nonce>-<tag>.tmp``, where
``nonce`` is 12 random hex digits and ``tag`` is an HMAC-SHA256 of the name up to the tag,
keyed by a secret of this user (:func:`temp_key`: 32 random bytes in snrl's cache directory,
made on first use). :func:`is_own_temp` checks the tag; a user's ``.backup.20240101.tmp``
never carries one (the chance that a name not made by snrl passes is 2**-80). Without a
usable cache directory the key is a new random one per process: the process's own temps are
still recognized, those of earlier processes are left in place (never deleted by guess).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import math
import os
import re
import secrets
import signal
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import IO, Any

import numpy as np

from snrl.errors import UserError

__all__ = [
    "deferred_signals",
    "MAX_DEPTH",
    "AtomicPath",
    "atomic_open",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_depth",
    "check_json_depth",
    "json_depth",
    "json_safe",
    "load_json",
    "make_dirs",
    "binding_mismatch",
    "cache_dir",
    "check_no_links",
    "dir_binding",
    "hold_lock",
    "is_own_temp",
    "make_temp",
    "remove_stale_temps",
    "temp_key",
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


# ---------------------------------------------------------------- snrl's own temp files
def cache_dir() -> Path:
    """snrl's cache directory: ``$SNRL_CACHE_DIR``, else ``$XDG_CACHE_HOME/snrl``, else
    ``~/.cache/snrl`` (not created here)."""
    if os.environ.get("SNRL_CACHE_DIR"):
        return Path(os.environ["SNRL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "snrl"


_KEY_FILE = "temp-key"
_KEY_BYTES = 32
#: Keys by key-file path, read or made once per process; a process key where none could be.
_KEYS: dict[str, bytes] = {}


def _read_key(path: Path) -> bytes | None:
    """The key in ``path``: a regular file of ours holding 64 hex digits; None if missing.

    Raises:
        OSError: the file exists but is not a usable key (a link, not ours, malformed).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        data = os.read(fd, 4 * _KEY_BYTES)
    finally:
        os.close(fd)
    text = data.decode("ascii", "replace").strip()
    if not (
        stat.S_ISREG(st.st_mode)
        and st.st_uid == os.getuid()
        and len(text) == 2 * _KEY_BYTES
        and re.fullmatch(r"[0-9a-f]+", text)
    ):
        raise OSError(errno.EINVAL, "not an snrl temp key", str(path))
    return bytes.fromhex(text)


def _make_key(path: Path) -> bytes:
    """Write a new key to ``path`` unless another process just did (then read theirs)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_bytes(_KEY_BYTES)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        try:
            os.write(fd, key.hex().encode("ascii") + b"\n")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # never replaces a key another process made meanwhile
        except FileExistsError:
            theirs = _read_key(path)
            if theirs is None:
                raise
            key = theirs
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return key


def temp_key() -> bytes:
    """This user's secret that tags snrl's temp files (see the module docstring).

    Read from ``cache_dir()/temp-key`` (made there, mode 0600, on first use). When that is
    impossible (no home, a read-only cache, a file there that is not a key of this user's),
    a random key for this process alone: temps of earlier processes are then never
    recognized, so never deleted.
    """
    path = cache_dir() / _KEY_FILE
    slot = str(path)
    if slot not in _KEYS:
        try:
            key = _read_key(path)
            if key is None:
                key = _make_key(path)
        except (OSError, RuntimeError):  # RuntimeError: Path.home() without a home
            key = secrets.token_bytes(_KEY_BYTES)
        _KEYS[slot] = key
    return _KEYS[slot]


_TEMP_NAME = re.compile(r"^(\..+\.[0-9a-f]{12}-)([0-9a-f]{20})\.tmp\Z", re.DOTALL)
_NAME_MAX = 255  # bytes of one path component (Linux, macOS)


def _tag(head: str) -> str:
    data = head.encode("utf-8", "surrogateescape")
    return hmac.new(temp_key(), data, hashlib.sha256).hexdigest()[:20]


def _temp_name(name: str) -> str:
    """``.<name>.<nonce>-<tag>.tmp``, ``name`` shortened to keep it a legal file name."""
    nonce = secrets.token_hex(6)
    base = name
    while len(f".{base}.{nonce}-{'0' * 20}.tmp".encode("utf-8", "surrogateescape")) > _NAME_MAX:
        base = base[:-1]
    head = f".{base}.{nonce}-"
    return f"{head}{_tag(head)}.tmp"


def is_own_temp(name: str) -> bool:
    """Whether the file name ``name`` is a temp file that snrl (this user, see
    :func:`temp_key`) made: its tag checks. A name that only looks like one is not."""
    m = _TEMP_NAME.match(name)
    return bool(m) and hmac.compare_digest(m.group(2), _tag(m.group(1)))


def make_temp(path: str | os.PathLike) -> tuple[int, Path]:
    """Create an empty temp file for ``path`` in its directory, named by :func:`is_own_temp`'s
    rule, with the mode ``open()`` would give (0o666 less the umask, applied by the kernel).

    Returns:
        ``(fd, temp path)``: the file is open for writing.

    Raises:
        OSError: the directory does not exist or is not writable.
    """
    path = Path(path)
    for _ in range(100):
        tmp = path.parent / _temp_name(path.name)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        except FileExistsError:
            continue
        return fd, tmp
    raise FileExistsError(errno.EEXIST, "no free temp file name", str(path.parent))


def remove_stale_temps(directory: str | os.PathLike, *, min_age_s: float = 0.0) -> list[Path]:
    """Delete the temp files a killed snrl process left in ``directory`` (not recursive).

    Only plain files whose names :func:`is_own_temp` proves to be snrl's are touched (not
    links, not directories, not a user's file that merely looks like a temp).

    Args:
        directory: The directory to clean (missing: nothing to do).
        min_age_s: Keep temps modified less than this many seconds ago (a concurrent writer
            may still own them).

    Returns:
        The removed paths.
    """
    d = Path(directory)
    removed: list[Path] = []
    try:
        entries = list(d.iterdir())
    except OSError:
        return removed
    now = time.time()
    for p in entries:
        if not is_own_temp(p.name) or p.is_symlink() or not p.is_file():
            continue
        try:
            if now - p.stat().st_mtime < min_age_s:
                continue
            p.unlink()
        except OSError:
            continue
        removed.append(p)
    return removed


#: The signals that stop a run (Ctrl-C, ``kill``, a closed terminal).
_STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP until the body is done, then deliver the first one.

    For writes done in C++ (``torch.save``): a ``KeyboardInterrupt`` raised inside one leaves
    its zip writer half-closed, and its cleanup raises a ``RuntimeError`` that hides the
    interrupt (a traceback instead of "interrupted by Ctrl-C", a temp file left). Held, the
    signal arrives right after the write, where the run unwinds as usual. Signals whose
    handler is ``SIG_IGN`` stay ignored; off the main thread this does nothing (Python runs
    handlers only there).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous: dict[int, Any] = {}
    try:
        for signum in _STOP_SIGNALS:
            handler = signal.getsignal(signum)
            if handler is not signal.SIG_IGN and handler is not None:
                previous[signum] = signal.signal(signum, lambda s, _f: received.append(s))
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:
        signal.raise_signal(received[0])


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
    fd, tmp = make_temp(path)
    try:
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
    by :func:`make_temp` in the destination directory (as :func:`atomic_open`'s), with the
    mode ``open()`` would give. Use it as a context manager
    (``with atomic_path(p) as tmp: write(tmp)``: committed on a clean exit, discarded if the
    body raises) or call :meth:`commit` / :meth:`discard` yourself.

    Raises:
        OSError: the directory cannot be created or written.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self.tmp = make_temp(self.path)
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


def make_dirs(path: str | os.PathLike, what: str, hint: str) -> None:
    """``mkdir -p path``; an OSError becomes one :class:`UserError` line naming ``what`` and
    the path, the reason and ``hint`` (how to fix it)."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create {what} {path} ({e.strerror or e}; {hint})") from e


def json_safe(obj: Any) -> Any:
    """``obj`` as strict JSON can hold it: non-finite floats as None, numpy scalars as
    Python numbers, tuples as lists (dicts and lists walked)."""
    if isinstance(obj, (np.floating, np.integer)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


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


# ---------------------------------------------------------------- output paths
def check_no_links(base: str | os.PathLike, rel: str | os.PathLike) -> Path:
    """``base / rel``, after checking that no component of ``rel`` is a symbolic link: not
    the last one, and not a directory on the way (``lnk/sub`` with ``lnk -> elsewhere``
    would write elsewhere). For paths snrl writes inside a directory it was given (a run
    directory, a comparison); ``base`` itself is the user's choice and may be a link.

    Raises:
        UserError: naming the first component that is a link.
    """
    path = Path(base)
    for part in PurePath(rel).parts:
        path = path / part
        if path.is_symlink():
            raise UserError(
                f"{path} is a symbolic link; snrl writes only into real directories inside "
                f"{base} (remove the link, or choose another --out)"
            )
    return path


# ---------------------------------------------------------------- markers bound to a directory
_BINDING_KEYS = ("dir", "device", "inode")


def dir_binding(directory: str | os.PathLike) -> dict[str, Any]:
    """What ties a marker file (a run's manifest, an analysis folder's marker) to the
    directory it lists files of: the directory's resolved path, device and inode."""
    st = os.stat(directory)
    return {"dir": str(Path(directory).resolve()), "device": st.st_dev, "inode": st.st_ino}


def binding_mismatch(directory: str | os.PathLike, record: Any) -> str | None:
    """Why the marker ``record`` (a dict) does not vouch for files in ``directory``, in
    words, or None when its binding (:func:`dir_binding`) is this directory's. A marker
    without a binding (snrl 0.1's, or not snrl's) never vouches: snrl cannot tell that it
    was written there rather than planted or copied."""
    recorded = {k: record.get(k) for k in _BINDING_KEYS} if isinstance(record, dict) else {}
    if not recorded or any(v is None for v in recorded.values()):
        return "it records no directory (written by snrl 0.1, or not by snrl)"
    if recorded != dir_binding(directory):
        return (
            f"it was written for another directory ({recorded['dir']}, device "
            f"{recorded['device']}, inode {recorded['inode']}): moved or copied there, or "
            "not written there by snrl"
        )
    return None


# ---------------------------------------------------------------- locks
_LOCK_FORMAT = "snrl-lock"
#: Locks this process holds: (device, inode) of the lock file -> [fd, depth, pid].
_HELD: dict[tuple[int, int], list[int]] = {}


def _holder(fd: int, *, wait: float = 0.5) -> str:
    """Who holds the lock in ``fd``'s file, in words, from the record its holder wrote. A
    holder writes its record just after it takes the lock, so a record not there yet is
    read again for up to ``wait`` seconds (two runs started together: the loser names the
    winner)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            data = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
            when = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(float(data["started"])))
            return f"pid {int(data['pid'])} on {data['host']}, since {when}"
        except (OSError, ValueError, KeyError, TypeError, OverflowError):
            if time.monotonic() >= deadline:
                return "a process that has not said who it is yet"
            time.sleep(0.02)


def _is_lock_record(data: bytes) -> bool:
    if not data.strip():
        return True  # made by a holder that was killed before it wrote its record
    try:
        rec = json.loads(data.decode("utf-8"))
    except ValueError:
        return False
    return isinstance(rec, dict) and rec.get("format") == _LOCK_FORMAT


def _open_lock_file(path: Path) -> int:
    """A descriptor of the lock file ``path``, created when missing, never through a link."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UserError(
                f"{path} is a symbolic link; snrl will not lock through it (remove it, or "
                "choose another directory)"
            ) from None
        raise


def _names_file(path: Path, key: tuple[int, int]) -> bool:
    """Whether ``path`` still names the file ``key`` (device, inode)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (st.st_dev, st.st_ino) == key


@contextlib.contextmanager
def hold_lock(path: str | os.PathLike, *, what: str, hint: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on the lock file ``path`` while the block runs.

    The file is snrl's: created when missing (never through a link), and while held it
    records the holder (pid, host, start time) so that a refused process can say who it is.
    It is left in place afterwards. Should a lock file be removed while another process has
    it open (a refused run removes the lock file it made), that process finds after locking
    that the path names another file, and locks that one instead: two processes never hold
    two different files as the same lock. The lock is re-entrant within one process (a
    nested ``hold_lock`` of the same file is a no-op) and is released when the process dies,
    however it dies.

    Args:
        path: The lock file.
        what: What the lock guards, for the message (e.g. ``"run directory runs/a"``).
        hint: How to fix a refusal (e.g. ``"wait for it to finish, or choose another --out"``).

    Raises:
        UserError: Another process holds the lock (the message names it), or ``path`` is a
            link or a file that snrl did not write.
    """
    import fcntl

    path = Path(path)
    for _ in range(100):
        fd = _open_lock_file(path)
        key = (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
        held = _HELD.get(key)
        if held is not None and held[2] == os.getpid():
            break
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                raise UserError(f"{what} is in use by {_holder(fd)} ({hint})") from None
            finally:
                os.close(fd)
        if _names_file(path, key):
            break
        # a refused run removed the lock file it made between our open and our lock: the
        # inode we hold is no one's lock any more; lock the file the path names now
        os.close(fd)
    else:
        raise UserError(f"{path} keeps being replaced; snrl cannot lock it (try again)")
    if held is not None and held[2] == os.getpid():
        os.close(fd)  # flock belongs to the first descriptor; closing this one keeps it
        held[1] += 1
        try:
            yield
        finally:
            held[1] -= 1
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or not _is_lock_record(os.pread(fd, 4096, 0)):
            raise UserError(
                f"{path} was not written by snrl and will not be overwritten (move it away, or "
                "choose another directory)"
            )
        record = {
            "format": _LOCK_FORMAT,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.time(),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode("utf-8"), 0)
        _HELD[key] = [fd, 1, os.getpid()]
        try:
            yield
        finally:
            del _HELD[key]
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)
