"""Sub-commands of ``snrl`` that belong to experiments (``compare``, ``plot``)."""

from __future__ import annotations

import argparse


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Register the experiment sub-commands on the ``snrl`` parser."""
