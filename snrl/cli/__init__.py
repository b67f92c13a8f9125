"""The ``snrl`` command: demo, train, eval, render, analyze, serve-env, dashboard.

Errors a user can cause end with exit code 2 and one line ``error: <what> (<how to fix>)`` on
stderr, without a traceback: :func:`main` is the one place that turns them into that line
(a ``ValueError``, which :class:`~snrl.errors.UserError` is, an ``OSError``, given the path
and a hint by its errno, and ``MemoryError``). Anything else is a bug and keeps its
traceback; ``SNRL_DEBUG=1`` shows the traceback of a user error too.

The package: :mod:`snrl.cli.parser` (the flags), :mod:`snrl.cli.commands` (what each
sub-command does), and here the entry point with its signal handling.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

from snrl.cli.parser import build_parser
from snrl.errors import error_message
from snrl.training.checkpoint import load_checkpoint
from snrl.training.rundir import MANIFEST, is_run_dir

__all__ = ["build_parser", "main"]


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the process was, so it unwinds like Ctrl-C (temp
    files removed, metrics closed)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_interrupted(signum: int, frame: Any) -> None:
    raise Interrupted(signum)


def _install_signal_handlers() -> dict[int, Any]:
    """SIGTERM/SIGHUP -> :class:`Interrupted`; returns the handlers to restore."""
    previous: dict[int, Any] = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is None:
            continue
        try:
            previous[signum] = signal.signal(signum, _raise_interrupted)
        except (ValueError, OSError):  # not the main thread
            pass
    return previous


def _where_the_run_is(out: Path, command: str) -> str:
    """What an interrupted training left in ``out``, and what to do next."""
    last = out / "checkpoints" / "last.pt"
    try:
        step = int(load_checkpoint(last)["counters"]["env_step"])
    except (ValueError, OSError, KeyError, TypeError):
        step = None
    if step is not None:
        if command == "demo":
            return (
                f"the run in {out} is consistent up to env step {step} (its last checkpoint); "
                f"`snrl demo --out {out}` starts it again"
            )
        return (
            f"the run in {out} is consistent and resumable from env step {step} (continue it "
            f"with `snrl train --out {out} --resume`)"
        )
    if not is_run_dir(out):
        return "nothing was written"
    again = f"snrl demo --out {out}" if command == "demo" else f"snrl train ... --out {out} --force"
    return (
        f"no checkpoint was written yet, so there is nothing to resume (start again: `{again}` "
        f"replaces the partial run, deleting only the files listed in {out / MANIFEST})"
    )


def _interrupt_message(args: argparse.Namespace, signum: int) -> str:
    how = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    if args.command in ("train", "demo"):
        note = _where_the_run_is(Path(args.out), args.command)
    elif args.command == "render":
        note = f"{args.out} was not written"
    elif args.command == "eval":
        note = "nothing was written"
    else:
        note = "run the same command again"
    return f"error: interrupted by {how} ({note})"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    previous = _install_signal_handlers()
    try:
        return args.func(args)
    except (ValueError, OSError, MemoryError) as e:
        if os.environ.get("SNRL_DEBUG"):
            raise
        print(f"error: {error_message(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        print(_interrupt_message(args, signum), file=sys.stderr)
        return 128 + int(signum)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
