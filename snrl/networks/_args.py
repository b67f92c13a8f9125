"""Constructor arguments shared by the backbones: layer widths."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from snrl.errors import UserError


def layer_widths(hidden_size: Any, n_layers: int | None, owner: str) -> list[int]:
    """Widths of the hidden layers.

    Args:
        hidden_size: an int (the width of every layer) or a sequence of ints (one width per
            layer).
        n_layers: the number of layers; None means 1 for an int ``hidden_size`` and the
            sequence's length for a sequence (with which it must agree when given).
        owner: the constructor's name, for error messages.

    Raises:
        UserError: no width, a width or count below 1, or a count that disagrees.
    """
    if hidden_size is None:
        raise UserError(f"{owner} needs hidden_size (an int, or one int per layer)")
    if isinstance(hidden_size, bool) or not isinstance(hidden_size, (int, Sequence)):
        raise UserError(
            f"{owner} hidden_size={hidden_size!r} (give an int, or a list of ints per layer)"
        )
    if isinstance(hidden_size, int):
        n = 1 if n_layers is None else int(n_layers)
        if n < 1:
            raise UserError(f"{owner} n_layers={n_layers} (give at least 1 layer)")
        widths = [hidden_size] * n
    else:
        widths = [int(w) for w in hidden_size]
        if not widths:
            raise UserError(f"{owner} hidden_size is empty (give at least one layer width)")
        if n_layers is not None and int(n_layers) != len(widths):
            raise UserError(
                f"{owner} has n_layers={n_layers} but hidden_size lists {len(widths)} widths "
                "(give one width per layer, or an int with n_layers)"
            )
    if min(widths) < 1:
        raise UserError(f"{owner} hidden_size={hidden_size!r} (every width must be >= 1)")
    return widths
