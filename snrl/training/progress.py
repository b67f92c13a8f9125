"""A thin tqdm progress bar for training: env steps, last episode return, steps per second."""

from __future__ import annotations

import sys
import time
from typing import Any

from tqdm import tqdm

__all__ = ["Progress"]


class Progress:
    """Progress over env steps.

    Disabled (prints nothing) when ``disable`` is True or stderr is not a terminal.

    Args:
        total_steps: Env steps of the whole run.
        initial: Env steps already done (when resuming).
        disable: Force the bar off.
    """

    def __init__(self, total_steps: int, initial: int = 0, disable: bool = False) -> None:
        self.disabled = bool(disable) or not _stderr_is_tty()
        self.total_steps = int(total_steps)
        self.n = int(initial)
        self._t0 = time.perf_counter()
        self._n0 = self.n
        self._bar = tqdm(
            total=self.total_steps,
            initial=self.n,
            unit="step",
            unit_scale=True,
            dynamic_ncols=True,
            disable=self.disabled,
            leave=True,
        )

    @property
    def sps(self) -> float:
        """Env steps per second since this bar started (0 before any time passed)."""
        elapsed = time.perf_counter() - self._t0
        return (self.n - self._n0) / elapsed if elapsed > 0 else 0.0

    def update(self, n_steps: int, **postfix: Any) -> None:
        """Advance by ``n_steps`` and show ``postfix`` (e.g. ``ret=..., loss=...``) and SPS.

        Float values are shown with 4 significant digits; ``None`` values are skipped.
        """
        self.n += int(n_steps)
        shown = {
            k: (f"{v:.4g}" if isinstance(v, float) else v)
            for k, v in postfix.items()
            if v is not None
        }
        shown["sps"] = f"{self.sps:.0f}"
        if not self.disabled:
            self._bar.set_postfix(shown, refresh=False)
        self._bar.update(int(n_steps))

    def close(self) -> None:
        """Close the bar (idempotent)."""
        self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False
