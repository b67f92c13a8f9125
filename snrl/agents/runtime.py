"""How an algorithm's calls run on this machine: the torch thread policy and the flushing of
subnormal floats, each set for the duration of a call and given back afterwards (a library
call never leaves global state changed)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

#: Torch threads one run may ask for (``threads``, ``--threads``).
MAX_THREADS = 1024
#: The thread policy (``threads=None``): networks up to this many neurons per hidden layer
#: run on one torch thread; wider ones on torch's own thread count. Measured with
#: benchmarks/bench_threads.py (docs/benchmarks.md#torch-threads-issue-14).
ONE_THREAD_MAX_HIDDEN = 512


def policy_threads(config: Any, width: int | None = None) -> int | None:
    """The torch thread count a run of ``config`` uses: its ``threads`` when set (0: leave
    torch's current setting as it is, returned as None), else the thread policy: one thread
    for networks whose widest layer (``width``, default ``config.hidden_size``) has at most
    :data:`ONE_THREAD_MAX_HIDDEN` neurons, torch's own setting (None) for wider ones."""
    threads = getattr(config, "threads", None)
    if threads is not None:
        return threads or None
    width = config.hidden_size if width is None else width
    return 1 if width <= ONE_THREAD_MAX_HIDDEN else None


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block on ``n`` torch threads (None: as they are) and give the caller's thread
    count back afterwards: a library call never leaves a changed ``torch.set_num_threads``
    behind."""
    before = torch.get_num_threads()
    if n is None or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def denormals_flushed() -> bool:
    """Whether float arithmetic on this thread flushes subnormal numbers to zero."""
    return bool((torch.full((1,), 1e-30) * 1e-10)[0] == 0)  # 1e-40 is subnormal


@contextlib.contextmanager
def flush_denormals(on: bool) -> Iterator[None]:
    """Run the block with subnormal floats flushed to zero (``torch.set_flush_denormal``)
    when ``on``, and turn it off again afterwards unless it was on before: a library call
    never leaves the setting changed. Where the CPU does not support it, nothing changes.

    Why: on some CPUs (Intel's) an operation on a subnormal number (below 1.2e-38 in float32)
    takes ~100x longer, and Adam's state for weights whose gradient stays near zero decays into
    that range. A ReLU MLP DQN spent a quarter of its time in Adam's kernel because of it
    (docs/benchmarks.md#subnormal-floats). Values that small change nothing in training.
    """
    if not on or denormals_flushed() or not torch.set_flush_denormal(True):
        yield
        return
    try:
        yield
    finally:
        torch.set_flush_denormal(False)
