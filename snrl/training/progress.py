"""Training progress where the user looks: a tqdm bar on a terminal, tqdm.auto's widget in a
notebook, and one line every 10 s or 10 % on a log (stderr redirected to a file or pipe:
nohup, CI, a cluster job), so a log shows a run's pace while it runs, not only at its end.

A line reads ``PPO lif on CartPole-v1: env_step 2,560/5,000 (51 %), 312 steps/s, return 23.1,
eval 45``. The count never passes the total: an algorithm that overshoots it (PPO ends on a
whole update) shows the total.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from tqdm import tqdm

__all__ = ["LINE_EVERY_FRACTION", "LINE_EVERY_S", "Progress", "say"]

#: Log mode: a line when this many seconds passed since the last one ...
LINE_EVERY_S = 10.0
#: ... or when the run crossed another tenth of its total.
LINE_EVERY_FRACTION = 0.1


class Progress:
    """Progress over env steps.

    Args:
        total_steps: Env steps of the whole run.
        initial: Env steps already done (when resuming).
        disable: Nothing at all (``learn(progress=False)``, ``--quiet``).
        title: What runs, at the start of each log line.
        mode: ``"bar"`` (a terminal), ``"notebook"`` (tqdm.auto), ``"lines"`` (a log) or
            None: chosen from where stderr goes.
    """

    def __init__(
        self,
        total_steps: int,
        initial: int = 0,
        disable: bool = False,
        *,
        title: str = "training",
        mode: str | None = None,
    ) -> None:
        self.total_steps = int(total_steps)
        self.n = min(int(initial), self.total_steps)
        self.title = title
        self.mode = "off" if disable else (mode or _auto_mode())
        self._t0 = time.perf_counter()
        self._n0 = self.n
        self._last_line_t = self._t0
        self._last_line_tenth = self._tenth(self.n)
        self._shown: dict[str, Any] = {}
        self._bar: Any = None
        if self.mode in ("bar", "notebook"):
            bar_cls = tqdm
            if self.mode == "notebook":
                from tqdm.auto import tqdm as bar_cls  # the widget (text where it cannot)
            self._bar = bar_cls(
                total=self.total_steps,
                initial=self.n,
                unit="step",
                unit_scale=True,
                dynamic_ncols=True,
                leave=True,
            )

    @property
    def disabled(self) -> bool:
        """No bar is drawn (log lines or nothing)."""
        return self._bar is None

    @property
    def sps(self) -> float:
        """Env steps per second since this bar started (0 before any time passed)."""
        elapsed = time.perf_counter() - self._t0
        return (self.n - self._n0) / elapsed if elapsed > 0 else 0.0

    def _tenth(self, n: int) -> int:
        return int(n / max(self.total_steps, 1) / LINE_EVERY_FRACTION + 1e-9)

    def update(self, n_steps: int, **postfix: Any) -> None:
        """Advance by ``n_steps`` (the count stops at the total) and show ``postfix`` (e.g.
        ``ret=..., eval=...``) and steps/s.

        Float values are shown with 4 significant digits; ``None`` and NaN values keep the
        last value shown.
        """
        step = max(0, min(int(n_steps), self.total_steps - self.n))
        self.n += step
        for k, v in postfix.items():
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            self._shown[k] = f"{v:.4g}" if isinstance(v, float) else v
        if self._bar is not None:
            self._bar.set_postfix({**self._shown, "sps": f"{self.sps:.0f}"}, refresh=False)
            self._bar.update(step)
        elif self.mode == "lines":
            now, tenth = time.perf_counter(), self._tenth(self.n)
            due = now - self._last_line_t >= LINE_EVERY_S or tenth > self._last_line_tenth
            if due or self.n >= self.total_steps:
                self._line()
                self._last_line_t, self._last_line_tenth = now, tenth

    def _line(self) -> None:
        pct = 100 * self.n / max(self.total_steps, 1)
        parts = [
            f"env_step {self.n:,}/{self.total_steps:,} ({pct:.0f} %)",
            f"{self.sps:.0f} steps/s",
        ]
        parts += [f"{'return' if k == 'ret' else k} {v}" for k, v in self._shown.items()]
        try:
            _stderr().write(f"{self.title}: {', '.join(parts)}\n")
            _stderr().flush()
        except (OSError, ValueError):  # a closed or broken log must not stop training
            self.mode = "off"

    def close(self) -> None:
        """Close the bar (idempotent)."""
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def say(text: str) -> None:
    """Print ``text`` as a line on stdout, also while a bar is drawn: the bar is cleared,
    the line printed and the bar drawn again below it (``tqdm.write``)."""
    tqdm.write(text, file=sys.stdout)
    sys.stdout.flush()


def _stderr() -> TextIO:
    return sys.stderr


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (where stderr is no terminal, but a widget is
    seen)."""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return type(shell).__name__ == "ZMQInteractiveShell"


def _auto_mode() -> str:
    if _in_notebook():
        return "notebook"
    return "bar" if _stderr_is_tty() else "lines"
