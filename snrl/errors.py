"""Errors a user can cause.

Library code raises ``ValueError`` (or a subclass) for bad input. :class:`UserError` is the
subclass whose message is already of the form ``"<what> (<how to fix>)"``; the CLI prints any
``ValueError``/``OSError`` raised while it runs as one line ``error: <message>`` and exits 2.
"""

from __future__ import annotations


class UserError(ValueError):
    """Bad input whose message says what is wrong and how to fix it."""
