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


class UserError(ValueError):
    """Bad input whose message says what is wrong and how to fix it."""


class NonFiniteError(UserError):
    """Training produced a NaN/inf value; the message names the env step, the quantity and
    the likely cause."""


class EnvError(UserError):
    """The environment raised an exception; the message names the env and the step."""


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
