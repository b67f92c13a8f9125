"""The compiled LIF sequence kernel of :func:`snrl.functional.lif_sequence`
(``lif_kernel.c``): the forward loop, the reverse walk of the backward pass and the weight
gradient; and the leaky-integrator readout's loop and reverse scan
(:func:`snrl.functional.lif_sequence.li_sequence`).

Built on first use with the system C compiler (``cc``, or ``$CC``) into snrl's cache
directory (``$SNRL_CACHE_DIR``, else ``$XDG_CACHE_HOME/snrl``, else ``~/.cache/snrl``), under a
name that hashes the source, the flags and the machine, and loaded with :mod:`ctypes`. It is
an accelerator, never a requirement: without a compiler, on a build error, for tensors it does
not take (not float32 on the CPU) or with ``SNRL_NATIVE=0`` in the environment, the torch loop
of :mod:`snrl.functional.lif_sequence` runs instead, which is also the reference the kernel is
tested against (``tests/functional/test_native.py``).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import math
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from importlib import resources
from pathlib import Path

import torch
from torch import Tensor

from snrl.functional import _buffers
from snrl.functional.surrogate import Surrogate, derivative_fn

log = logging.getLogger(__name__)

_FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-shared", "-fPIC")
#: tried first: x86 compilers keep to 256-bit vectors unless told (AVX-512 machines gain 20 %
#: in the backward); other compilers or machines refuse it, and the build runs without
_WIDE = ("-mprefer-vector-width=512",)
#: The surrogates whose derivative the kernel's backward walk computes itself (their codes in
#: ``surrogate_row``, lif_kernel.c); for the other kinds (and any callable) it arrives computed.
_KINDS = {"fast_sigmoid": 1, "atan": 2, "triangular": 3, "straight_through": 4}
#: Floats per chunk of the backward walk's surrogate derivatives (1 MB).
_CHUNK_FLOATS = 1 << 18
_LOCK = threading.Lock()
_STATE: dict[str, object] = {}  # "lib": the loaded library, or "failed": why not


def enabled() -> bool:
    """Whether the compiled kernel may be used (``SNRL_NATIVE=0`` turns it off)."""
    return os.environ.get("SNRL_NATIVE", "1") != "0"


def cache_dir() -> Path:
    """Where compiled kernels are kept."""
    if os.environ.get("SNRL_CACHE_DIR"):
        return Path(os.environ["SNRL_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "snrl"


def _cpu_id() -> str:
    """The CPU model, so that a cache shared between machines never loads a kernel built
    with another machine's instructions (``-march=native``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "flags")):
                return line
    except OSError:
        pass
    return platform.processor()


def _build(source: bytes, target: Path) -> None:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise OSError("no C compiler (cc) found")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src = Path(tmp) / "lif_kernel.c"
        src.write_bytes(source)
        out = Path(tmp) / target.name
        for extra in (_WIDE, ()):
            res = subprocess.run(
                [cc, *_FLAGS, *extra, str(src), "-o", str(out)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if res.returncode == 0:
                break
        else:
            raise OSError(f"{cc} failed: {res.stderr.strip()[:500]}")
        os.replace(out, target)  # atomic: a parallel build of the same file is harmless


def library() -> ctypes.CDLL | None:
    """The loaded kernel library, built if needed; None when it cannot be had (the reason
    is logged once at INFO)."""
    if not enabled():
        return None
    lib = _STATE.get("lib")
    if lib is not None or "failed" in _STATE:
        return lib  # type: ignore[return-value]
    with _LOCK:
        if "lib" in _STATE or "failed" in _STATE:
            return _STATE.get("lib")  # type: ignore[return-value]
        try:
            source = resources.files("snrl.functional").joinpath("lif_kernel.c").read_bytes()
            key = hashlib.sha256(
                source + repr((_FLAGS, _WIDE, platform.machine(), _cpu_id())).encode()
            ).hexdigest()[:16]
            target = cache_dir() / f"lif_kernel_{key}.so"
            if not target.is_file():
                _build(source, target)
            lib = ctypes.CDLL(str(target))
            ints, ptrs, flt = [ctypes.c_int] * 4, ctypes.c_void_p, ctypes.c_float
            long = ctypes.c_long
            fwd, bwd = lib.snrl_lif_forward, lib.snrl_lif_backward
            dw, li_fwd, li_bwd = lib.snrl_lif_weight_grad, lib.snrl_li_forward, lib.snrl_li_backward
            fwd.restype = bwd.restype = dw.restype = li_fwd.restype = li_bwd.restype = None
            fwd.argtypes = [*ints, *[ptrs] * 5, flt, ctypes.c_int, *[ptrs] * 3, long]
            fwd.argtypes += [ptrs] * 4
            bwd.argtypes = [*ints, ptrs, ctypes.c_int, flt, flt, *[ptrs] * 6, flt, ctypes.c_int]
            bwd.argtypes += [*[ptrs] * 4, ctypes.c_int]
            dw.argtypes = [*ints, *[ptrs] * 4, long, *[ptrs] * 4]
            li_fwd.argtypes = [*ints[:3], *[ptrs] * 5, long, ptrs]
            li_bwd.argtypes = [*ints[:3], *[ptrs] * 4]
            _STATE["lib"] = lib
        except (OSError, subprocess.SubprocessError) as e:
            _STATE["failed"] = str(e)
            log.info("compiled LIF kernel unavailable (%s); using the torch loop", e)
            return None
    return _STATE["lib"]  # type: ignore[return-value]


def _ptr(x: Tensor | None) -> int | None:
    return None if x is None else x.data_ptr()


def lif_forward(
    u: Tensor,
    w: Tensor | None,
    v0: Tensor,
    z0: Tensor,
    alpha: Tensor,
    threshold: float,
    reset: str,
    starts: Tensor | None,
    fv: Tensor | None,
    fz: Tensor | None,
) -> tuple[Tensor, Tensor] | None:
    """``(zs, vs)`` of the LIF sequence (shapes of ``u``: (T, B, N), or (T, G, B, N) for a
    group), or None when the kernel does not apply (then the caller runs the torch loop).

    Arguments as in :func:`snrl.functional.lif_sequence._forward_loop` (``alpha``
    broadcastable to (G, 1, N), ``fv``/``fz`` expanded to ``u``'s shape); nothing needs a
    gradient here (the forward of the autograd function, or a no-grad call).
    """
    lib = _applies(u, w, v0, z0, alpha, fv, fz)
    if lib is None:
        return None
    t, g, b, n = _dims(u)
    vs = _buffers.empty(tuple(u.shape))  # large ones reused, not faulted in again
    zs = _buffers.empty(tuple(u.shape))
    # every tensor handed over is held in this list until the call returns (a temporary
    # would be freed as soon as its address was taken)
    keep = [
        _flat(u, (t, g, b, n)),
        _flat(w, (g, n, n)),
        _flat(v0, (g, b, n)),
        _flat(z0, (g, b, n)),
        _alpha(alpha, g, n),
    ]
    (fv, fz), fstep = _fresh((fv, fz), (t, g, b, n))
    resets = [_starts(starts), fv, fz]
    tail = [vs, zs, *_spike_scratch(n)]
    flag = int(reset == "subtract")
    head = (t, g, b, n, *map(_ptr, keep), float(threshold), flag)
    lib.snrl_lif_forward(*head, *map(_ptr, resets), fstep, *map(_ptr, tail))
    return zs, vs


def lif_backward(
    spike_fn: Callable[[Tensor], Tensor],
    gz: Tensor | None,
    gv: Tensor | None,
    w_back_t: Tensor | None,
    vs: Tensor,
    zs: Tensor,
    alpha: Tensor,
    threshold: float,
    reset: str,
    starts: Tensor | None,
) -> tuple[Tensor, Tensor] | None:
    """``(dv, first)`` of the backward pass of :func:`snrl.functional.lif_sequence` (the loop
    of ``_LIFSequence.backward``: ``dv`` shaped like ``vs``, ``first`` = dv_0 masked where
    step 0 starts an episode, shaped like one step), or None when the kernel does not apply.

    ``spike_fn`` is the layer's surrogate: the kernel computes the derivatives of the
    :class:`~snrl.functional.surrogate.Surrogate` kinds in :data:`_KINDS` itself, row by row,
    in one call for the whole sequence. For any other spike function the derivative comes from
    :func:`~snrl.functional.surrogate.derivative_fn`, and the walk runs in chunks of steps of
    about :data:`_CHUNK_FLOATS` floats, last chunk first, each with its own derivative: small
    temporaries that stay in cache, where one for the whole sequence would be two more
    allocations of its size (fresh pages cost more than the calls). ``w_back_t`` is the
    transposed ``W - threshold I`` (subtract) or ``W`` (zero), or None.
    """
    lib = _applies(vs, gz, gv, w_back_t, zs, alpha)
    if lib is None:
        return None
    t, g, b, n = _dims(vs)
    dv = _buffers.empty(tuple(vs.shape))
    first = torch.empty(vs.shape[1:], dtype=torch.float32)
    seqs = [_flat(x, (t, g, b, n)) for x in (gz, gv, vs, zs)]
    w_flat, a_flat = _flat(w_back_t, (g, n, n)), _alpha(alpha, g, n)
    st, scratch = _starts(starts), torch.empty(b + 1, n, dtype=torch.float32)
    flag = int(reset == "subtract")
    kind = _kind(spike_fn)
    derivative = derivative_fn(spike_fn) if kind is None else None
    steps = max(1, t if kind is not None else _CHUNK_FLOATS // (g * b * n))
    code, p1, p2 = kind or (0, 0.0, 0.0)
    for t1 in range(t, 0, -steps):
        t0 = max(0, t1 - steps)
        # held until the call returns, as in lif_forward
        gzc, gvc, vsc, zsc = (None if x is None else x[t0:t1] for x in seqs)
        s = None
        if derivative is not None:
            s = derivative(vsc - threshold).to(torch.float32).contiguous()
        head = (t1 - t0, g, b, n, _ptr(s), code, p1, p2)
        keep = [gzc, gvc, w_flat, vsc, zsc, a_flat]
        tail = [None if st is None else st[t0:], dv[t0:], first if t0 == 0 else None, scratch]
        mid = (float(threshold), flag)
        lib.snrl_lif_backward(*head, *map(_ptr, keep), *mid, *map(_ptr, tail), t1 < t)
    if t == 0:
        first.zero_()
    return dv, first


def _kind(spike_fn: Callable[[Tensor], Tensor]) -> tuple[int, float, float] | None:
    """The kernel's code and parameters of a surrogate whose derivative it computes itself
    (``surrogate_row`` in lif_kernel.c), or None."""
    if not isinstance(spike_fn, Surrogate) or spike_fn.kind not in _KINDS:
        return None
    k = float(spike_fn.slope or 0.0)
    if spike_fn.kind == "atan":
        return _KINDS["atan"], math.pi / 2 * k, k / 2
    return _KINDS[spike_fn.kind], k, 0.0


def lif_weight_grad(
    z0: Tensor, zs: Tensor, starts: Tensor | None, fz: Tensor | None, dv: Tensor
) -> Tensor | None:
    """``sum_t z_{t-1}^T dv_t`` ((N, N), or (G, N, N) for a group), the spikes each step starts
    from taken as in the forward pass (``fz`` where ``starts``), or None when the kernel does
    not apply."""
    lib = _applies(dv, z0, zs, fz)
    if lib is None:
        return None
    t, g, b, n = _dims(dv)
    dw = torch.empty((g, n, n) if dv.dim() == 4 else (n, n), dtype=torch.float32)
    (fz,), fstep = _fresh((None if starts is None else fz,), (t, g, b, n))
    keep = [_flat(z0, (g, b, n)), _flat(zs, (t, g, b, n)), _starts(starts), fz]
    tail = [_flat(dv, (t, g, b, n)), dw, *_spike_scratch(n)]
    lib.snrl_lif_weight_grad(t, g, b, n, *map(_ptr, keep), fstep, *map(_ptr, tail))
    return dw


def li_forward(
    u: Tensor, v0: Tensor, alpha: Tensor, starts: Tensor | None, fv: Tensor | None
) -> Tensor | None:
    """The membranes (T, B, N) of the leaky integrator ``v_t = u_t + alpha v_{t-1}`` (the loop
    of :func:`snrl.functional.lif_sequence._li_loop`, bit for bit), or None when the kernel
    does not apply. ``fv``: the fresh membranes expanded to ``u``'s shape, where ``starts``."""
    lib = _applies(u, v0, alpha, fv)
    if lib is None or u.dim() != 3:
        return None
    t, _, b, n = _dims(u)
    vs = torch.empty(tuple(u.shape), dtype=torch.float32)
    (fv,), fstep = _fresh((fv,), (t, 1, b, n))
    keep = [_flat(u, (t, b, n)), _flat(v0, (b, n)), _alpha(alpha, 1, n), _starts(starts), fv]
    lib.snrl_li_forward(t, b, n, *map(_ptr, keep), fstep, vs.data_ptr())
    return vs


def li_backward(g: Tensor, alpha: Tensor, starts: Tensor | None) -> Tensor | None:
    """``dv`` (T, B, N) of the leaky integrator's reverse scan (``_LISequence.backward``'s
    loop, bit for bit) for the gradient ``g`` of the membranes, or None when the kernel does
    not apply."""
    lib = _applies(g, alpha)
    if lib is None or g.dim() != 3:
        return None
    t, _, b, n = _dims(g)
    dv = torch.empty(tuple(g.shape), dtype=torch.float32)
    keep = [_flat(g, (t, b, n)), _alpha(alpha, 1, n), _starts(starts), dv]
    lib.snrl_li_backward(t, b, n, *map(_ptr, keep))
    return dv


def _applies(seq: Tensor, *tensors: Tensor | None) -> ctypes.CDLL | None:
    """The library, if every tensor is float32 on the CPU and the library can be had."""
    tensors = (seq, *tensors)
    if any(x is not None and (x.dtype != torch.float32 or x.device.type != "cpu") for x in tensors):
        return None
    return library()


def _spike_scratch(n: int) -> list[Tensor]:
    """The kernel's room for one row's spike list: N indices and N values, and one vector
    (16) more that its vector path writes past the last spike."""
    return [torch.empty(n + 16, dtype=torch.int32), torch.empty(n + 16, dtype=torch.float32)]


def _dims(x: Tensor) -> tuple[int, int, int, int]:
    """(T, G, B, N) of a (T, B, N) sequence (G = 1) or a (T, G, B, N) group."""
    t, b, n = x.shape[0], x.shape[-2], x.shape[-1]
    return t, (x.shape[1] if x.dim() == 4 else 1), b, n


def _flat(x: Tensor | None, shape: tuple[int, ...]) -> Tensor | None:
    return None if x is None else x.detach().reshape(shape).contiguous()


def _alpha(alpha: Tensor, g: int, n: int) -> Tensor:
    """A decay given as a scalar, (1,), (N,) or (G, 1, N) tensor, as a (G, N) one."""
    a = alpha.detach()
    a = a.reshape(-1, 1, a.shape[-1]) if a.dim() else a
    return torch.broadcast_to(a, (g, 1, n)).reshape(g, n).contiguous()


def _fresh(
    fields: tuple[Tensor | None, ...], shape: tuple[int, int, int, int]
) -> tuple[list[Tensor | None], int]:
    """Fresh-state sequences (each broadcast to ``shape``, (T, G, B, N)) as the kernel takes
    them, with their floats per step: one (G, B, N) block each when every one is the same at
    each step (expanded tensors, e.g. the default zeros: no copy of T steps), else
    (T, G, B, N) each."""
    t, g, b, n = shape
    fs = [None if f is None else f.detach().reshape(shape) for f in fields]
    if t > 0 and all(f is None or f.stride(0) == 0 for f in fs):
        return [None if f is None else f[0].contiguous() for f in fs], 0
    return [None if f is None else f.contiguous() for f in fs], g * b * n


def _starts(starts: Tensor | None) -> Tensor | None:
    return None if starts is None else starts.to(torch.uint8).contiguous()
