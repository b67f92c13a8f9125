"""lazy_no_grad: torch.no_grad() entered only where gradient mode is on."""

from __future__ import annotations

import pytest
import torch

from snrl.functional.grad import lazy_no_grad


def test_lazy_no_grad_runs_without_gradient_and_restores_the_mode():
    w = torch.ones(3, requires_grad=True)
    seen = []

    @lazy_no_grad
    def f(x, *, scale=1.0):
        seen.append(torch.is_grad_enabled())
        return (w * x * scale).sum()

    out = f(torch.ones(3), scale=2.0)
    assert out.item() == 6.0 and not out.requires_grad
    assert torch.is_grad_enabled()  # restored
    with torch.no_grad():
        assert not f(torch.ones(3)).requires_grad
        assert not torch.is_grad_enabled()
    assert seen == [False, False]
    assert f.__name__ == "f"

    @lazy_no_grad
    def boom():
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        boom()
    assert torch.is_grad_enabled()  # restored after an exception too
