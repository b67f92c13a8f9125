"""The pool of large buffers behind the compiled LIF kernel (snrl/functional/_buffers.py): a
block is handed out again only once torch has freed every tensor and view on it, and the idle
blocks stay within their bound."""

from __future__ import annotations

import gc

import pytest
import torch

from snrl.functional import _buffers

SHAPE = (4, 256, 256)  # 1 MiB of float32: the smallest pooled size


@pytest.fixture(autouse=True)
def _empty_pool(monkeypatch):
    monkeypatch.setattr(_buffers, "_IDLE", [])


def test_a_block_is_reused_only_after_every_view_of_it_is_gone():
    a = _buffers.empty(SHAPE)
    a.fill_(7.0)
    view = a[1:3]  # a view outlives the tensor it came from
    ptr = a.data_ptr()
    del a
    gc.collect()
    assert _buffers.idle_bytes() == 0
    b = _buffers.empty(SHAPE)  # must not be the block the view still reads
    b.fill_(-1.0)
    assert b.data_ptr() != ptr
    assert bool((view == 7.0).all())
    del view
    gc.collect()
    assert _buffers.idle_bytes() == 4 * 256 * 256 * 4
    c = _buffers.empty(SHAPE)
    assert c.data_ptr() == ptr  # now the same memory, without new pages
    assert _buffers.idle_bytes() == 0
    del b, c


def test_small_buffers_are_plain_torch_tensors():
    x = _buffers.empty((3, 5))
    assert x.dtype == torch.float32 and tuple(x.shape) == (3, 5)
    x.resize_(100)  # a torch.empty tensor: its storage grows
    del x
    assert _buffers.idle_bytes() == 0


def test_idle_blocks_stay_within_the_bound(monkeypatch):
    size = 4 * 256 * 256 * 4
    monkeypatch.setattr(_buffers, "MAX_IDLE_BYTES", 2 * size)
    tensors = [_buffers.empty(SHAPE) for _ in range(4)]
    first = tensors[0].data_ptr()
    while tensors:  # returned in the order made: the first is the oldest idle block
        tensors.pop(0)
    gc.collect()
    assert _buffers.idle_bytes() == 2 * size  # the two oldest returned were dropped
    assert _buffers.empty(SHAPE).data_ptr() != first  # the newest idle block is taken


def test_pooled_tensors_carry_autograd_like_any_other():
    x = _buffers.empty(SHAPE).copy_(torch.linspace(-1, 1, 4 * 256 * 256).reshape(SHAPE))
    x.requires_grad_()
    (x * x).sum().backward()
    torch.testing.assert_close(x.grad, 2 * x.detach())
