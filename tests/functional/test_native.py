"""The compiled LIF loop (snrl/functional/lif_kernel.c) against the torch loop it replaces:
forward spikes and membranes, and every gradient, for both resets, one layer and a group,
with and without recurrence, with episode starts inside the sequence; and the compiled
leaky-integrator loop, which must equal its torch loop bit for bit."""

from __future__ import annotations

import logging
import shutil

import pytest
import torch
from snntorch.surrogate import fast_sigmoid as snntorch_fast_sigmoid

from snrl.functional import _buffers, _native
from snrl.functional.lif_sequence import li_sequence, lif_sequence
from snrl.functional.neurons import LIFState
from snrl.functional.surrogate import Surrogate, default_spike_grad


def _inputs(group: bool, recurrent: bool, seed: int, b: int = 5, n: int = 24, steps=False):
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
    # one fresh membrane for every step (the kernel takes it once), or one per step
    fresh_v = (torch.rand(*(lead if steps else (n,)), generator=g) * 0.5).requires_grad_()
    return u, w, v0, z0, alpha, starts, fresh_v


def _run(
    native: bool, monkeypatch, group, recurrent, reset, seed, b=5, n=24, spike_fn=None, steps=False
):
    monkeypatch.setenv("SNRL_NATIVE", "1" if native else "0")
    u, w, v0, z0, alpha, starts, fresh_v = _inputs(group, recurrent, seed, b, n, steps)
    gen = torch.Generator().manual_seed(seed + 7)
    fz = torch.zeros(())  # steps "v": membranes per step, spikes the same zeros at every step
    if steps is True:
        fz = (torch.rand(fresh_v.shape, generator=gen) < 0.3).float()
    fresh = LIFState(fresh_v, fz)
    spike_fn = default_spike_grad() if spike_fn is None else spike_fn
    z, v = lif_sequence(
        u, w, LIFState(v0, z0), alpha, 1.0, reset, spike_fn, starts=starts, fresh=fresh
    )
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
# the fresh state: one for all steps, per step, or membranes per step and spikes not
@pytest.mark.parametrize("steps", [False, True, "v"])
def test_kernel_equals_the_torch_loop(monkeypatch, group, recurrent, reset, steps):
    _assert_kernel_equals_torch(
        monkeypatch, group, recurrent, reset, 3, 5, 24, atol=lambda r: 1e-4, steps=steps
    )


def _assert_kernel_equals_torch(
    monkeypatch, group, recurrent, reset, seed, b, n, atol, spike_fn=None, steps=False
):
    """Spikes exactly, membranes to 1e-5 and every gradient to rtol 1e-4 and ``atol(ref)``."""
    args = (monkeypatch, group, recurrent, reset, seed, b, n, spike_fn, steps)
    z_ref, v_ref, g_ref = _run(False, *args)
    z, v, g = _run(True, *args)
    assert 0.02 < z_ref.mean() < 0.9  # the inputs make the layer spike (and not always)
    torch.testing.assert_close(z, z_ref, rtol=0, atol=0)
    torch.testing.assert_close(v, v_ref, rtol=1e-5, atol=1e-5)
    for a, r in zip(g, g_ref, strict=True):
        assert a.abs().sum() > 0
        torch.testing.assert_close(a, r, rtol=1e-4, atol=atol(r))


@needs_kernel
@pytest.mark.parametrize(
    ("group", "b", "n", "kind", "chunk"),
    [
        (False, 5, 80, None, 1 << 18),  # N in tiles of 16 columns (24 above: scalar)
        (False, 60, 80, None, 1 << 18),  # rows in tiles of 8 and 4 single rows
        (False, 9, 256, None, 1 << 18),  # two whole tiles of 128 columns
        # a surrogate the kernel does not compute itself: the walk in chunks of 3 steps
        (False, 60, 128, "sigmoid", 3 * 60 * 128),
        (True, 7, 64, "sigmoid", 2 * 2 * 7 * 64 + 1),  # a group, chunks of 2 steps
    ],
)
@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_kernel_tiles_rows_and_chunks_equal_the_torch_loop(
    monkeypatch, group, b, n, kind, chunk, reset
):
    monkeypatch.setattr(_native, "_CHUNK_FLOATS", chunk)
    monkeypatch.setattr(_buffers, "MIN_BYTES", 1)  # every output from the pool of blocks
    calls = []
    derivative_fn = _native.derivative_fn
    monkeypatch.setattr(_native, "derivative_fn", lambda f: calls.append(f) or derivative_fn(f))
    spike_fn = None if kind is None else Surrogate(kind, 5.0)
    # sums over up to T x B = 720 rows in another order: float32 rounding grows with the size
    # of the terms (both paths are ~4e-4 from a float64 loop where dW reaches ~190)
    _assert_kernel_equals_torch(
        monkeypatch, group, True, reset, 5, b, n, lambda r: 1e-5 * float(r.abs().max()), spike_fn
    )
    assert len(calls) == (kind is not None)  # the kernel's own derivative, else torch's


@needs_kernel
@pytest.mark.parametrize(
    "spike_fn",
    [
        Surrogate("fast_sigmoid", 3.0),
        Surrogate("atan", 2.0),
        Surrogate("triangular", 0.5),
        Surrogate("straight_through"),
        snntorch_fast_sigmoid(slope=4.0),  # any callable: derivative by autograd, in torch
    ],
    ids=["fast_sigmoid", "atan", "triangular", "straight_through", "snntorch"],
)
@pytest.mark.parametrize("reset", ["subtract", "zero"])
def test_kernel_derivatives_of_every_surrogate_equal_the_torch_loop(monkeypatch, spike_fn, reset):
    _assert_kernel_equals_torch(
        monkeypatch, False, True, reset, 7, 9, 32, lambda r: 1e-5 * float(r.abs().max()), spike_fn
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


@needs_kernel
@pytest.mark.parametrize("kind", sorted(_native._KINDS))
def test_the_kernels_own_derivative_is_torchs_bit_for_bit(monkeypatch, kind):
    """The walk computing a Surrogate's derivative itself gives exactly what it gives when
    handed ``Surrogate.derivative``'s torch result (same roundings, no fused multiply-add)."""
    g = torch.Generator().manual_seed(11)
    t, b, n = 6, 5, 40
    vs = torch.randn(t, b, n, generator=g) * 2
    zs = (vs > 1).float()
    gz = torch.randn(t, b, n, generator=g)
    w_back_t = torch.randn(n, n, generator=g) * 0.2
    alpha = torch.full((n,), 0.9)
    spike_fn = Surrogate(kind) if kind == "straight_through" else Surrogate(kind, 3.7)
    walk = _native.Walk(gz, None, w_back_t, vs, zs, alpha, 1.0, "subtract", None)
    own = _native.lif_backward(spike_fn, walk)
    monkeypatch.setattr(_native, "_KINDS", {})  # now the derivative arrives from torch
    given = _native.lif_backward(spike_fn, walk)
    assert torch.equal(own[0], given[0]) and torch.equal(own[1], given[1])


def _li_run(native: bool, monkeypatch, n: int, fresh: str, seed: int = 4):
    monkeypatch.setenv("SNRL_NATIVE", "1" if native else "0")
    g = torch.Generator().manual_seed(seed)
    t, b = 12, 5
    u = torch.randn(t, b, n, generator=g).requires_grad_()
    v0 = torch.randn(b, n, generator=g).requires_grad_()
    alpha = (0.5 + 0.45 * torch.rand(n, generator=g)).requires_grad_()
    starts = torch.rand(t, b, generator=g) < 0.2
    starts[0, 1] = starts[5, 2] = True
    shape = {"zeros": None, "vector": (n,), "steps": (t, b, n)}[fresh]
    fv = None if shape is None else torch.randn(*shape, generator=g).requires_grad_()
    v = li_sequence(u, v0, alpha, starts=starts, fresh=fv)
    loss = (v * torch.randn(v.shape, generator=g)).sum()
    leaves = [x for x in (u, v0, alpha, fv) if x is not None]
    return v.detach(), torch.autograd.grad(loss, leaves)


@needs_kernel
@pytest.mark.parametrize("n", [3, 37])  # PPO's readouts (3 wide: scalar), and vectors + tail
@pytest.mark.parametrize("fresh", ["zeros", "vector", "steps"])
def test_li_kernel_equals_the_torch_loop_bit_for_bit(monkeypatch, n, fresh):
    """The readout's compiled loop and scan round as the torch loop does: the same membranes
    and gradients exactly (so a run's results do not depend on whether the kernel built)."""
    v_ref, g_ref = _li_run(False, monkeypatch, n, fresh)
    calls = []
    for name in ("li_forward", "li_backward"):
        real = getattr(_native, name)
        monkeypatch.setattr(_native, name, lambda *a, f=real: calls.append(f) or f(*a))
    v, grads = _li_run(True, monkeypatch, n, fresh)
    assert len(calls) == 2 and v.abs().sum() > 0
    assert torch.equal(v, v_ref)
    for a, r in zip(grads, g_ref, strict=True):
        assert a.abs().sum() > 0
        assert torch.equal(a, r)
    # float64, or the kernel switched off: not taken (the torch loop runs)
    u = torch.ones(2, 1, n)
    assert _native.li_forward(u.double(), u[0].double(), u[0, 0].double(), None, None) is None
    monkeypatch.setenv("SNRL_NATIVE", "0")
    assert _native.li_forward(u, u[0], u[0, 0], None, None) is None


def test_the_cache_key_follows_the_cpus_instruction_set_and_the_compiler():
    """A kernel built with -march=native is named by the CPU's flags, not its model name
    (generic on VMs): another instruction set or another compiler gets another build."""
    src = b"int f(void) { return 0; }"
    base = _native.cache_key(src, "fpu sse2 avx2", "cc 12.2")
    assert _native.cache_key(src, "fpu sse2 avx2", "cc 12.2") == base
    assert _native.cache_key(src, "fpu sse2 avx2 avx512f", "cc 12.2") != base
    assert _native.cache_key(src, "fpu sse2", "cc 12.2") != base
    assert _native.cache_key(src, "fpu sse2 avx2", "cc 13.1") != base
    assert _native.cache_key(src + b" ", "fpu sse2 avx2", "cc 12.2") != base
    # unknown flags (no /proc/cpuinfo): a generic build, under its own name
    assert "-march=native" not in _native._build_flags(None)
    assert "-march=native" in _native._build_flags("fpu sse2")
    assert _native.cache_key(src, None, "cc 12.2") != _native.cache_key(src, "", "cc 12.2")


def test_the_cpu_flags_come_from_the_flags_line(monkeypatch, tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel name\t: Common KVM processor\nflags\t\t: sse2 avx2 fpu\n"
        "\nprocessor\t: 1\nmodel name\t: Common KVM processor\nflags\t\t: sse2 avx2 fpu\n"
    )
    real = _native.Path
    monkeypatch.setattr(
        _native, "Path", lambda p: real(info) if str(p) == "/proc/cpuinfo" else real(p)
    )
    assert _native._cpu_flags() == "avx2 fpu sse2"
    info.unlink()
    assert _native._cpu_flags() is None


def _prototypes() -> dict[str, list[tuple[str, str]]]:
    """(name, C type) of each argument of the exported functions, read from lif_kernel.c."""
    import re
    from importlib import resources

    text = resources.files("snrl.functional").joinpath("lif_kernel.c").read_text()
    found = {}
    for m in re.finditer(r"^void (snrl_\w+)\(([^)]*)\)", text, re.M):
        args = []
        for part in m.group(2).split(","):
            words = part.replace("*", " * ").split()
            name = words[-1]
            ctype = "ptr" if "*" in words else words[-2]
            args.append((name, ctype))
        found[m.group(1)] = args
    return found


def test_the_signature_table_matches_the_c_prototypes():
    """One declaration per C function on the Python side, checked against the source: the
    same functions, argument names, order and types."""
    import ctypes

    kinds = {ctypes.c_int: "int", ctypes.c_long: "long", ctypes.c_float: "float"}
    kinds[ctypes.c_void_p] = "ptr"
    protos = _prototypes()
    assert set(protos) == set(_native.SIGNATURES)
    for name, (restype, params) in _native.SIGNATURES.items():
        assert restype is None
        assert [(arg, kinds[ctype]) for arg, ctype in params] == protos[name], name


@needs_kernel
def test_a_wrong_call_of_a_kernel_function_raises_instead_of_crashing():
    lib = _native.library()
    u = torch.zeros(2, 1, 3)
    good = dict(T=2, B=1, N=3, g=u, alpha=torch.ones(1, 3), starts=None, dv=torch.empty(2, 1, 3))
    lib.li_backward(**good)  # the right names: runs
    with pytest.raises(TypeError, match="missing dv"):
        lib.li_backward(**{k: v for k, v in good.items() if k != "dv"})
    with pytest.raises(TypeError, match="unexpected G"):
        lib.li_backward(**good, G=1)
    with pytest.raises(TypeError, match="positional"):
        lib.li_backward(2, 1, 3, u, good["alpha"], None, good["dv"])
    with pytest.raises(TypeError, match="g is a pointer"):
        lib.li_backward(**{**good, "g": 12345})


def test_the_fallback_is_a_warning_said_once(monkeypatch, tmp_path, caplog):
    monkeypatch.setattr(_native, "_STATE", {})
    monkeypatch.setenv("SNRL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-compiler"))
    with caplog.at_level(logging.WARNING, logger="snrl.functional._native"):
        for _ in range(3):
            assert _native.library() is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, caplog.text
    assert "torch loop" in warnings[0].getMessage()
    # switched off on purpose: no message at all
    monkeypatch.setattr(_native, "_STATE", {})
    monkeypatch.setenv("SNRL_NATIVE", "0")
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="snrl.functional._native"):
        assert _native.library() is None
    assert not caplog.records
