"""Imported once by the forkserver of the compare process pool (``set_forkserver_preload``):
the workers fork with snrl already imported, and the forkserver itself dies with the compare
process that started it (Linux ``PR_SET_PDEATHSIG``)."""

import contextlib
import signal
import sys

import snrl.experiments.execution  # noqa: F401

if sys.platform.startswith("linux"):
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
