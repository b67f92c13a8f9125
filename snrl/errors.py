"""Errors a user can cause.

Library code raises ``ValueError`` (or a subclass) for bad input. :class:`UserError` is the
subclass whose message is already of the form ``"<what> (<how to fix>)"``. The ``snrl``
command prints a ``ValueError`` (``UserError`` included) or an ``OSError`` raised while it
runs as one line ``error: <message>`` on stderr and exits 2; nothing else is caught, so a bug
still shows its traceback (docs/reliability.md, "Inputs").

Two subclasses name what went wrong during training, both keep ``checkpoints/last.pt`` as
the last good state because they are raised before anything non-finite is written:

* :class:`NonFiniteError`: a reward, loss, gradient or parameter became NaN/inf;
* :class:`EnvError`: the user's environment raised inside ``reset``/``step``.
"""

from __future__ import annotations

import errno
import functools
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


class UserError(ValueError):
    """Bad input whose message says what is wrong and how to fix it."""


class NonFiniteError(UserError):
    """Training produced a NaN/inf value; the message names the env step, the quantity and
    the likely cause."""


class EnvError(UserError):
    """The environment raised an exception; the message names the env and the step."""


def positive_number(name: str, value: Any, unit: str, example: str) -> float:
    """``value`` as a float when it is a finite number > 0; else a :class:`UserError` naming
    ``name=value`` and what to give: a positive number of ``unit``, e.g. ``example``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{name}={value!r} is not a number (give {unit}, e.g. {example})") from None
    if not (math.isfinite(number) and number > 0):
        raise UserError(f"{name}={value!r} (give a positive number of {unit}, e.g. {example})")
    return number


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, or its type's name when it has no message (for
    one-line error reports)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def describe(exc: BaseException) -> str:
    """``"<Type>: <first line>"``, or ``"<Type>"`` for an exception without a message."""
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {text.splitlines()[0]}" if text else name


#: How to fix an OSError, by errno (the path is named in the message).
_OS_HINTS = {
    errno.ENOSPC: "the disk is full; free some space or choose another path",
    errno.EDQUOT: "the disk quota is used up; free some space or choose another path",
    errno.EACCES: "check its permissions or choose another path",
    errno.EPERM: "check its permissions or choose another path",
    errno.EROFS: "the file system is read-only; choose another path",
    errno.ENOENT: "check that the path exists",
    errno.ENOTDIR: "a part of the path is a file, not a directory; choose another path",
    errno.EISDIR: "it is a directory; pass a file name",
    errno.EEXIST: "remove it or choose another path",
    errno.ENAMETOOLONG: "choose a shorter path",
    errno.ENOTEMPTY: "the directory is not empty; choose another path",
    errno.EMFILE: "too many open files; raise `ulimit -n` or lower n_envs",
    errno.ENOMEM: "out of memory; lower n_envs, hidden_size or buffer_size",
    errno.EPIPE: "a helper process (e.g. ffmpeg) stopped early; check free disk space",
}


def one_line(text: str) -> str:
    """``text`` with its lines joined, so a message is never cut at a newline."""
    return " ".join(text.split())


def printable(text: str, limit: int) -> str:
    """``text`` for a message: non-printable characters as ``?`` (what a peer or a file sent
    can hold terminal escapes), at most ``limit`` characters (``...`` where cut)."""
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def server_message(text: str) -> str:
    """An error text a server sent, as one line of printable words (its first 300
    characters)."""
    return " ".join("".join(c if c.isprintable() else " " for c in text[:300]).split())


def error_message(e: BaseException) -> str:
    """The one line ``snrl`` prints (after ``error: ``) for a user error ``e``.

    An ``OSError`` with an errno becomes ``"<reason>: <path> (<hint>)"``, e.g.
    ``"Permission denied: /data/run (check its permissions or choose another path)"``.
    """
    if isinstance(e, OSError) and e.errno is not None and e.strerror:
        paths = [str(p) for p in (e.filename, e.filename2) if p is not None]
        what = f"{e.strerror}: {' -> '.join(paths)}" if paths else e.strerror
        hint = _OS_HINTS.get(e.errno, f"errno {errno.errorcode.get(e.errno, e.errno)}")
        return f"{what} ({hint})"
    if isinstance(e, MemoryError):
        return "out of memory (lower n_envs, hidden_size, n_steps or buffer_size)"
    return one_line(str(e)) or type(e).__name__


# ---- calls written for another library (docs/migrating.md) ------------------------------------
#: Where a NeuroTorch, huskarl-style or Stable-Baselines3 user finds snrl's names.
MIGRATING = "docs/migrating.md"


class MigrationError(UserError, TypeError):
    """A call written for another library: snrl shares some of its names (``Trajectory``,
    ``ReplayBuffer``, ``Curriculum``, ``Agent``, ``PPO``, ``DQN``) with other meanings. The
    message says what the call means in snrl and points to docs/migrating.md. It is a
    ``TypeError`` (a wrong call) and a :class:`UserError` (``snrl`` prints it as one line)."""


def explain_foreign_calls(
    owner: str,
    keywords: Mapping[str, str],
    *,
    default: str | None = None,
    positional: Callable[[tuple[Any, ...]], str | None] | None = None,
) -> Callable[[F], F]:
    """Decorate a function (or ``__init__``) so that a call that does not fit its signature,
    as another library would write it, raises :class:`MigrationError` with snrl's way.

    The signature is checked before the call, so an error raised inside the function is
    never mistaken for a wrong call; a call that fits runs unchanged.

    Args:
        owner: the call as the user wrote it (``"snrl.Trajectory(...)"``).
        keywords: a keyword of the other library -> what to write in snrl instead.
        default: the hint for any other call that does not fit (None: the plain
            ``TypeError``).
        positional: given the positional arguments (``self`` excluded), the hint for
            them if no call of the function takes such arguments, else None (checked on
            every call, also one that fits the signature).
    """

    def decorate(func: F) -> F:
        signature = inspect.signature(func)
        method = next(iter(signature.parameters), None) == "self"

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            hint = positional(args[1:] if method else args) if positional is not None else None
            if hint:
                raise MigrationError(f"{owner}: {hint} (see {MIGRATING})")
            try:
                signature.bind(*args, **kwargs)
            except TypeError as e:
                hints = [keywords[k] for k in kwargs if k in keywords]
                if not hints and default is not None:
                    hints = [default]
                if hints:
                    raise MigrationError(
                        f"{owner}: {first_line(e)}; {'; '.join(hints)} (see {MIGRATING})"
                    ) from None
            return func(*args, **kwargs)  # a wrong call without a hint: Python's own error

        return wrapper  # type: ignore[return-value]

    return decorate
