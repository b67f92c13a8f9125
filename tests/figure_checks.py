"""Checks shared by the tests of slide-sized figures (learning_curve.png, curves.png, snrl
plot's history): issue 39 item 6's size, fonts and step ticks."""

from __future__ import annotations

from typing import Any


def assert_step_ticks(ax: Any, expect: str) -> None:
    """The x ticks read like ``20k`` (``expect`` among them), never ``20000``."""
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert expect in labels and not any(s.isdigit() and len(s) > 3 for s in labels), labels


def assert_slide_figure(fig: Any, ax: Any, expect_tick: str) -> None:
    """1600 x 1000 px at 100 dpi; a title of 20 pt or more, axis labels of 18, ticks of 16."""
    fig.canvas.draw()
    assert fig.dpi == 100 and tuple(fig.get_size_inches()) == (16.0, 10.0)
    assert ax.title.get_fontsize() >= 20 and ax.xaxis.label.get_fontsize() >= 18
    assert min(t.get_fontsize() for t in ax.get_xticklabels()) >= 16
    assert_step_ticks(ax, expect_tick)
