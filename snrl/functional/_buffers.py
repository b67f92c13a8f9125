"""Large float32 buffers for the compiled LIF kernel's sequences, reused instead of faulted in
again on every call.

Why: a training call at T=64, B=256, N=128 writes three (T, B, N) buffers of 8 MB (spikes,
membranes, the walk's gradient). glibc hands blocks of that size back to the system when they
are freed, so the next call of the same shape touches fresh pages: 2,048 page faults per
buffer, 0.8-2 us each on the VMs measured: 40 % of the layer's forward + backward. Changing
glibc's thresholds would fix it for the whole process and keep every freed block; this pool
keeps only its own blocks, and only up to :data:`MAX_IDLE_BYTES`.

Safe reuse: a block is an anonymous memory map. The tensor is ``torch.frombuffer`` over a
``memoryview`` of it, and torch holds that memoryview until the tensor's storage is freed,
that is until no tensor and no view of it is left. A ``weakref.finalize`` on the memoryview
then returns the block to the pool. So a block is handed out again only after torch itself
would have freed the memory.

The tensors are ordinary CPU float32 tensors, except that their storage cannot be resized
(``resize_`` to a larger size raises), as for any tensor made by ``torch.frombuffer``.
"""

from __future__ import annotations

import math
import mmap
import threading
import weakref

import torch
from torch import Tensor

#: Buffers smaller than this come from ``torch.empty`` (glibc keeps and reuses small blocks).
MIN_BYTES = 1 << 20
#: Idle blocks kept for reuse, in bytes in all; the oldest are dropped (unmapped) beyond it.
MAX_IDLE_BYTES = 64 << 20

_LOCK = threading.Lock()
_IDLE: list[tuple[int, mmap.mmap]] = []  # (bytes, block), oldest first


def empty(shape: tuple[int, ...]) -> Tensor:
    """An uninitialized float32 CPU tensor of ``shape``, from the pool when it is large."""
    nbytes = math.prod(shape) * 4
    if nbytes < MIN_BYTES:
        return torch.empty(shape, dtype=torch.float32)
    block = _take(nbytes) or mmap.mmap(-1, nbytes)
    view = memoryview(block)
    out = torch.frombuffer(view, dtype=torch.float32).view(shape)
    weakref.finalize(view, _give_back, nbytes, block).atexit = False
    return out


def idle_bytes() -> int:
    """Bytes held in idle blocks."""
    with _LOCK:
        return sum(n for n, _ in _IDLE)


def _take(nbytes: int) -> mmap.mmap | None:
    with _LOCK:
        for i in range(len(_IDLE) - 1, -1, -1):  # the most recently returned first
            if _IDLE[i][0] == nbytes:
                return _IDLE.pop(i)[1]
    return None


def _give_back(nbytes: int, block: mmap.mmap) -> None:
    with _LOCK:
        _IDLE.append((nbytes, block))
        total = sum(n for n, _ in _IDLE)
        while _IDLE and total > MAX_IDLE_BYTES:
            total -= _IDLE.pop(0)[0]  # unmapped once the object is gone
