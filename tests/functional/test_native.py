"""The compiled LIF loop (snrl/functional/lif_kernel.c) against the torch loop it replaces:
forward spikes and membranes, and every gradient, for both resets, one layer and a group,
with and without recurrence, with episode starts inside the sequence."""

from __future__ import annotations

import logging
import shutil

import pytest
import torch

from snrl.functional import _native
from snrl.functional.lif_sequence import lif_sequence, lif_sequence_group
from snrl.functional.neurons import LIFState
from snrl.functional.surrogate import default_spike_grad


def _inputs(group: bool, recurrent: bool, seed: int, b: int = 5, n: int = 24):
    g = torch.Generator().manual_seed(seed)
    t, grp = 12, 2
    lead = (t, grp, b, n) if group else (t, b, n)
    u = (torch.randn(*lead, generator=g) * 0.7 + 0.3).requires_grad_()
    w = None
    if recurrent:
        shape = (grp, n, n) if group else (n, n)
        w = (torch.randn(*shape, generator=g) * 0.3).requires_grad_()
    st = lead[1:]
    v0 = (torch.rand(*st, generator=g) * 0.9).requires_grad_()
    z0 = (torch.rand(*st, generator=g) < 0.2).float().requires_grad_()
    alpha = 0.8 + 0.15 * torch.rand(*((grp, n) if group else (n,)), generator=g)
    alpha.requires_grad_()
    starts = torch.rand(t, b, generator=g) < 0.15
    starts[0, 0] = starts[4, 1] = True
    fresh_v = (torch.rand(n, generator=g) * 0.5).requires_grad_()
    return u, w, v0, z0, alpha, starts, fresh_v


def _run(native: bool, monkeypatch, group, recurrent, reset, seed, b=5, n=24):
    monkeypatch.setenv("SNRL_NATIVE", "1" if native else "0")
    u, w, v0, z0, alpha, starts, fresh_v = _inputs(group, recurrent, seed, b, n)
    fn = lif_sequence_group if group else lif_sequence
    fresh = LIFState(fresh_v, torch.zeros(()))
    spike_fn = default_spike_grad()
    z, v = fn(u, w, LIFState(v0, z0), alpha, 1.0, reset, spike_fn, starts=starts, fresh=fresh)
    g = torch.Generator().manual_seed(seed + 1)
    loss = (v * torch.randn(v.shape, generator=g)).sum() + (
        z * torch.randn(z.shape, generator=g)
    ).sum()
    leaves = [x for x in (u, w, v0, z0, alpha, fresh_v) if x is not None]
    return z.detach(), v.detach(), torch.autograd.grad(loss, leaves)


needs_kernel = pytest.mark.skipif(
    _native.library() is None, reason=f"no compiled kernel here: {_native._STATE.get('failed')}"
)


@needs_kernel
@pytest.mark.parametrize("group", [False, True])
@pytest.mark.parametrize("recurrent", [False, True])
@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_kernel_equals_the_torch_loop(monkeypatch, group, recurrent, reset):
    _assert_kernel_equals_torch(monkeypatch, group, recurrent, reset, 3, 5, 24, atol=lambda r: 1e-4)


def _assert_kernel_equals_torch(monkeypatch, group, recurrent, reset, seed, b, n, atol):
    """Spikes exactly, membranes to 1e-5 and every gradient to rtol 1e-4 and ``atol(ref)``."""
    z_ref, v_ref, g_ref = _run(False, monkeypatch, group, recurrent, reset, seed, b, n)
    z, v, g = _run(True, monkeypatch, group, recurrent, reset, seed, b, n)
    assert 0.02 < z_ref.mean() < 0.9  # the inputs make the layer spike (and not always)
    torch.testing.assert_close(z, z_ref, rtol=0, atol=0)
    torch.testing.assert_close(v, v_ref, rtol=1e-5, atol=1e-5)
    for a, r in zip(g, g_ref, strict=True):
        assert a.abs().sum() > 0
        torch.testing.assert_close(a, r, rtol=1e-4, atol=atol(r))


@needs_kernel
@pytest.mark.parametrize(
    ("group", "b", "n", "max_rows", "chunk"),
    [
        (False, 5, 80, 48, 1 << 18),  # N in tiles of 64 and 16 columns (24 above: scalar)
        (False, 60, 80, 48, 1 << 18),  # more rows than MAX_ROWS: torch's backward walk
        (False, 60, 128, 10**6, 3 * 60 * 128),  # the kernel's walk in chunks of 3 steps
        (True, 7, 64, 48, 2 * 2 * 7 * 64 + 1),  # a group, chunks of 2 steps
    ],
)
@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_kernel_tiles_rows_and_chunks_equal_the_torch_loop(
    monkeypatch, group, b, n, max_rows, chunk, reset
):
    monkeypatch.setattr(_native, "MAX_ROWS", max_rows)
    monkeypatch.setattr(_native, "_CHUNK_FLOATS", chunk)
    # sums over up to T x B = 720 rows in another order: float32 rounding grows with the size
    # of the terms (both paths are ~4e-4 from a float64 loop where dW reaches ~190)
    _assert_kernel_equals_torch(
        monkeypatch, group, True, reset, 5, b, n, atol=lambda r: 1e-5 * float(r.abs().max())
    )


@needs_kernel
def test_kernel_is_used_and_switched_off_by_the_environment(monkeypatch):
    u, w, v0, z0, alpha, _, _ = (
        x.detach() if x is not None else x for x in _inputs(False, True, 0)
    )
    assert _native.lif_forward(u, w, v0, z0, alpha, 1.0, "subtract", None, None, None) is not None
    # float64 is not for the kernel: the caller's torch loop runs
    assert (
        _native.lif_forward(
            u.double(),
            w.double(),
            v0.double(),
            z0.double(),
            alpha.double(),
            1.0,
            "subtract",
            None,
            None,
            None,
        )
        is None
    )
    monkeypatch.setenv("SNRL_NATIVE", "0")
    assert _native.library() is None
    assert _native.lif_forward(u, w, v0, z0, alpha, 1.0, "subtract", None, None, None) is None


def test_machines_with_a_compiler_get_the_kernel():
    """Where a C compiler is installed (CI is such a machine), the kernel must build: the
    speed figures in docs/benchmarks.md count on it."""
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler on this machine: the torch loop runs (tested above)")
    assert _native.library() is not None, _native._STATE.get("failed")


def test_no_compiler_falls_back_to_the_torch_loop(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(_native, "_STATE", {})
    monkeypatch.setenv("SNRL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    with caplog.at_level(logging.INFO, logger="snrl.functional._native"):
        assert _native.library() is None
    assert "unavailable" in caplog.text and "torch loop" in caplog.text
    u, w, v0, z0, alpha, starts, fresh_v = _inputs(False, True, 1)
    z, v = lif_sequence(
        u,
        w,
        LIFState(v0, z0),
        alpha,
        1.0,
        "subtract",
        default_spike_grad(),
        starts=starts,
        fresh=LIFState(fresh_v, None),
    )
    v.sum().backward()
    assert u.grad is not None and torch.isfinite(u.grad).all()
    assert not list((tmp_path / "cache").glob("*.so"))  # nothing half-built left behind


def test_a_build_lands_atomically_in_the_cache(monkeypatch, tmp_path):
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler on this machine")
    monkeypatch.setattr(_native, "_STATE", {})
    monkeypatch.setenv("SNRL_CACHE_DIR", str(tmp_path))
    assert _native.library() is not None
    built = list(tmp_path.iterdir())
    assert len(built) == 1 and built[0].name.startswith("lif_kernel_") and built[0].suffix == ".so"
