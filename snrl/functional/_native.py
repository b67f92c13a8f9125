"""The compiled LIF sequence kernel of :func:`snrl.functional.lif_sequence`
(``lif_kernel.c``): the forward loop, the reverse walk of the backward pass and the weight
gradient; the same loop and walk for ALIF (:func:`snrl.functional.alif_sequence`); and the
leaky-integrator readout's loop and reverse scan
(:func:`snrl.functional.lif_sequence.li_sequence`).

Built on first use with the system C compiler (``cc``, or ``$CC``) into snrl's cache
directory (``$SNRL_CACHE_DIR``, else ``$XDG_CACHE_HOME/snrl``, else ``~/.cache/snrl``), under a
name that hashes the source, the compiler and its flags, the machine type and the CPU's
instruction-set flags (:func:`cache_key`), and loaded with :mod:`ctypes`; each C function is
called through :class:`KernelFunction`, by the names of its one declaration in
:data:`SIGNATURES`. Where the CPU's flags cannot be read (no ``/proc/cpuinfo``) the build is
generic (no ``-march=native``).

It is an accelerator, never a requirement: without a compiler, on a build error, for tensors
it does not take (not float32 on the CPU) or with ``SNRL_NATIVE=0`` in the environment, the
torch loop of :mod:`snrl.functional.lif_sequence` runs instead, which is also the reference
the kernel is tested against (``tests/functional/test_native.py``). A failed build is
reported once per process, as a logged warning.
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
from typing import Any, NamedTuple

import torch
from torch import Tensor

from snrl.functional import _buffers
from snrl.functional.surrogate import Surrogate, derivative_fn
from snrl.io import cache_dir

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


def _cpu_flags() -> str | None:
    """The instruction-set extensions of this CPU, or None where they cannot be read.

    Read from the ``flags`` line of ``/proc/cpuinfo`` (``Features`` on ARM Linux). They, not
    the model name (generic on many virtual machines), say which instructions a
    ``-march=native`` build may use.
    """
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            return " ".join(sorted(value.split()))
    return None


def _compiler() -> str | None:
    """The C compiler to build with: ``$CC``, else ``cc``, else ``gcc`` (None: none found)."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def _compiler_version(cc: str) -> str:
    """The first line of ``cc --version`` (empty if it does not run)."""
    try:
        res = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (res.stdout.strip().splitlines() or [""])[0]


def _build_flags(cpu_flags: str | None) -> tuple[str, ...]:
    """The compiler flags: tuned to this CPU (``-march=native``) only where its instruction
    set is known, so that the cache key can name it; a generic build elsewhere."""
    if cpu_flags is None:
        return tuple(f for f in _FLAGS if f != "-march=native")
    return _FLAGS


def cache_key(source: bytes, cpu_flags: str | None, compiler: str) -> str:
    """The name of a built kernel: a hash of the source, the compiler flags, the machine
    type, the CPU's instruction-set flags and the compiler's version. A cache shared between
    machines (a network home) then never hands a ``-march=native`` build to a CPU without
    its instructions: that would die of SIGILL, not fall back."""
    flags = hashlib.sha256((cpu_flags or "").encode()).hexdigest()
    parts = (_build_flags(cpu_flags), _WIDE, platform.machine(), flags, compiler)
    return hashlib.sha256(source + repr(parts).encode()).hexdigest()[:16]


def _build(source: bytes, target: Path, cc: str | None, flags: tuple[str, ...]) -> None:
    if not cc:
        raise OSError("no C compiler (cc) found")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        src = Path(tmp) / "lif_kernel.c"
        src.write_bytes(source)
        out = Path(tmp) / target.name
        for extra in (_WIDE, ()) if "-march=native" in flags else ((),):
            res = subprocess.run(
                [cc, *flags, *extra, str(src), "-o", str(out)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if res.returncode == 0:
                break
        else:
            raise OSError(f"{cc} failed: {res.stderr.strip()[:500]}")
        os.replace(out, target)  # atomic: a parallel build of the same file is harmless


_INT, _LONG, _FLOAT, _PTR = ctypes.c_int, ctypes.c_long, ctypes.c_float, ctypes.c_void_p
_DIMS = (("T", _INT), ("G", _INT), ("B", _INT), ("N", _INT))

#: The C functions of lif_kernel.c, each as (return type, ((argument name, C type), ...)) in
#: the order of its prototype: the one declaration of their signatures on this side
#: (``tests/functional/test_native.py`` checks it against the prototypes in the source).
#: A pointer argument takes a float32 / uint8 / int32 tensor or None (NULL).
SIGNATURES: dict[str, tuple[Any, tuple[tuple[str, Any], ...]]] = {
    "snrl_lif_forward": (
        None,
        (
            *_DIMS,
            *((name, _PTR) for name in ("u", "w", "v0", "z0", "alpha")),
            ("threshold", _FLOAT),
            ("subtract", _INT),
            *((name, _PTR) for name in ("starts", "fv", "fz")),
            ("fstep", _LONG),
            *((name, _PTR) for name in ("vs", "zs", "idx", "val")),
        ),
    ),
    "snrl_lif_backward": (
        None,
        (
            *_DIMS,
            ("s", _PTR),
            ("kind", _INT),
            ("p1", _FLOAT),
            ("p2", _FLOAT),
            *((name, _PTR) for name in ("gz", "gv", "wbt", "vs", "zs", "alpha")),
            ("threshold", _FLOAT),
            ("subtract", _INT),
            *((name, _PTR) for name in ("starts", "dv", "first", "scratch")),
            ("more", _INT),
        ),
    ),
    "snrl_lif_weight_grad": (
        None,
        (
            *_DIMS,
            *((name, _PTR) for name in ("z0", "zs", "starts", "fz")),
            ("fstep", _LONG),
            *((name, _PTR) for name in ("dv", "dw", "idx", "val")),
        ),
    ),
    "snrl_alif_forward": (
        None,
        (
            *_DIMS[:1],
            *_DIMS[2:],
            *((name, _PTR) for name in ("u", "w", "v0", "z0", "a0", "alpha", "rho")),
            ("threshold", _FLOAT),
            ("beta", _FLOAT),
            ("subtract", _INT),
            *((name, _PTR) for name in ("starts", "fv", "fz", "fa")),
            ("fstep", _LONG),
            *((name, _PTR) for name in ("vs", "zs", "as", "idx", "val")),
        ),
    ),
    "snrl_alif_backward": (
        None,
        (
            *_DIMS[:1],
            *_DIMS[2:],
            ("s", _PTR),
            ("kind", _INT),
            ("p1", _FLOAT),
            ("p2", _FLOAT),
            *((name, _PTR) for name in ("gz", "gv", "ga", "wbt", "vs", "zs", "as", "zp")),
            *((name, _PTR) for name in ("alpha", "rho")),
            ("threshold", _FLOAT),
            ("beta", _FLOAT),
            ("subtract", _INT),
            *((name, _PTR) for name in ("starts", "dv", "da", "first_v", "first_a", "scratch")),
        ),
    ),
    "snrl_li_forward": (
        None,
        (
            *_DIMS[:1],
            *_DIMS[2:],
            *((name, _PTR) for name in ("u", "v0", "alpha", "starts", "fv")),
            ("fstep", _LONG),
            ("vs", _PTR),
        ),
    ),
    "snrl_li_backward": (
        None,
        (*_DIMS[:1], *_DIMS[2:], *((name, _PTR) for name in ("g", "alpha", "starts", "dv"))),
    ),
}


class KernelFunction:
    """One C function of the kernel, called by keyword only: the names must be exactly those
    of its entry in :data:`SIGNATURES` (a missing, extra or misspelt one raises
    ``TypeError`` instead of handing the C code a wrong argument). Pointer arguments take a
    tensor (its ``data_ptr``) or None, held by the call's keywords until the call returns."""

    def __init__(self, lib: ctypes.CDLL, name: str) -> None:
        restype, params = SIGNATURES[name]
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = [ctype for _, ctype in params]
        self.name = name
        self._fn = fn
        self._names = tuple(arg for arg, _ in params)
        self._name_set = frozenset(self._names)  # checked on every call
        self._pointers = frozenset(arg for arg, ctype in params if ctype is _PTR)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs.keys() != self._name_set:
            missing = [n for n in self._names if n not in kwargs]
            extra = sorted(set(kwargs) - self._name_set)
            raise TypeError(
                f"{self.name} takes the keywords {', '.join(self._names)}"
                + (f"; {len(args)} positional given" if args else "")
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; unexpected {', '.join(extra)}" if extra else "")
            )
        values = []
        for name in self._names:
            value = kwargs[name]
            if name in self._pointers:
                if value is not None and not isinstance(value, Tensor):
                    raise TypeError(
                        f"{self.name}: {name} is a pointer (give a tensor or None), "
                        f"got {type(value).__name__}"
                    )
                value = None if value is None else value.data_ptr()
            values.append(value)
        return self._fn(*values)


class Kernels:
    """The loaded library's functions, by their names without the ``snrl_`` prefix."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self.lib = lib
        for name in SIGNATURES:
            setattr(self, name.removeprefix("snrl_"), KernelFunction(lib, name))

    lif_forward: KernelFunction
    lif_backward: KernelFunction
    lif_weight_grad: KernelFunction
    alif_forward: KernelFunction
    alif_backward: KernelFunction
    li_forward: KernelFunction
    li_backward: KernelFunction


def library() -> Kernels | None:
    """The kernel's functions, the library built if needed; None when it cannot be had.

    The first failure in a process is reported once, as a logged warning naming the reason
    (the torch loop then runs, slower); ``SNRL_NATIVE=0`` turns the kernel off silently.
    """
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
            cc = _compiler()
            cpu_flags = _cpu_flags()
            key = cache_key(source, cpu_flags, _compiler_version(cc) if cc else "")
            target = cache_dir() / f"lif_kernel_{key}.so"
            if not target.is_file():
                _build(source, target, cc, _build_flags(cpu_flags))
            _STATE["lib"] = Kernels(ctypes.CDLL(str(target)))
        except (OSError, subprocess.SubprocessError, AttributeError) as e:
            _STATE["failed"] = str(e)
            log.warning(
                "compiled LIF kernel unavailable (%s); using the torch loop, which is slower "
                "(set SNRL_NATIVE=0 to skip the kernel without this message)",
                e,
            )
            return None
    return _STATE["lib"]  # type: ignore[return-value]


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
    (fv, fz), fstep = _fresh((fv, fz), (t, g, b, n))
    idx, val = _spike_scratch(n)
    lib.lif_forward(
        **_sizes(u),
        u=_flat(u, (t, g, b, n)),
        w=_flat(w, (g, n, n)),
        v0=_flat(v0, (g, b, n)),
        z0=_flat(z0, (g, b, n)),
        alpha=_alpha(alpha, g, n),
        threshold=float(threshold),
        subtract=int(reset == "subtract"),
        starts=_starts(starts),
        fv=fv,
        fz=fz,
        fstep=fstep,
        vs=vs,
        zs=zs,
        idx=idx,
        val=val,
    )
    return zs, vs


class Walk(NamedTuple):
    """What the reverse walk of the LIF sequence's backward pass reads (the loop of
    ``_LIFSequence.backward``): the incoming gradients ``gz``, ``gv`` (or None), ``w_back_t``
    (the transposed ``W - threshold I`` for the subtract reset, ``W`` for zero, or None), the
    saved spikes ``zs`` and membranes ``vs``, the decay ``alpha``, the ``threshold``, the
    ``reset`` and the episode ``starts`` (bool (T, B) or None)."""

    gz: Tensor | None
    gv: Tensor | None
    w_back_t: Tensor | None
    vs: Tensor
    zs: Tensor
    alpha: Tensor
    threshold: float
    reset: str
    starts: Tensor | None


def lif_backward(spike_fn: Callable[[Tensor], Tensor], walk: Walk) -> tuple[Tensor, Tensor] | None:
    """``(dv, first)`` of the backward pass of :func:`snrl.functional.lif_sequence` (``dv``
    shaped like ``walk.vs``, ``first`` = dv_0 masked where step 0 starts an episode, shaped
    like one step), or None when the kernel does not apply.

    ``spike_fn`` is the layer's surrogate: the kernel computes the derivatives of the
    :class:`~snrl.functional.surrogate.Surrogate` kinds in :data:`_KINDS` itself, row by row,
    in one call for the whole sequence. For any other spike function the derivative comes from
    :func:`~snrl.functional.surrogate.derivative_fn`, and the walk runs in chunks of steps of
    about :data:`_CHUNK_FLOATS` floats, last chunk first, each with its own derivative: small
    temporaries that stay in cache, where one for the whole sequence would be two more
    allocations of its size (fresh pages cost more than the calls).
    """
    gz, gv, w_back_t, vs, zs, alpha, threshold, reset, starts = walk
    lib = _applies(vs, gz, gv, w_back_t, zs, alpha)
    if lib is None:
        return None
    t, g, b, n = _dims(vs)
    dv = _buffers.empty(tuple(vs.shape))
    first = torch.empty(vs.shape[1:], dtype=torch.float32)
    seqs = [_flat(x, (t, g, b, n)) for x in (gz, gv, vs, zs)]
    w_flat, a_flat = _flat(w_back_t, (g, n, n)), _alpha(alpha, g, n)
    st, scratch = _starts(starts), torch.empty(b + 1, n, dtype=torch.float32)
    kind = _kind(spike_fn)
    derivative = derivative_fn(spike_fn) if kind is None else None
    steps = max(1, t if kind is not None else _CHUNK_FLOATS // (g * b * n))
    code, p1, p2 = kind or (0, 0.0, 0.0)
    for t1 in range(t, 0, -steps):
        t0 = max(0, t1 - steps)
        gzc, gvc, vsc, zsc = (None if x is None else x[t0:t1] for x in seqs)
        s = None
        if derivative is not None:
            s = derivative(vsc - threshold).to(torch.float32).contiguous()
        lib.lif_backward(
            T=t1 - t0,
            G=g,
            B=b,
            N=n,
            s=s,
            kind=code,
            p1=p1,
            p2=p2,
            gz=gzc,
            gv=gvc,
            wbt=w_flat,
            vs=vsc,
            zs=zsc,
            alpha=a_flat,
            threshold=float(threshold),
            subtract=int(reset == "subtract"),
            starts=None if st is None else st[t0:],
            dv=dv[t0:],
            first=first if t0 == 0 else None,
            scratch=scratch,
            more=int(t1 < t),
        )
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
    idx, val = _spike_scratch(n)
    lib.lif_weight_grad(
        **_sizes(dv),
        z0=_flat(z0, (g, b, n)),
        zs=_flat(zs, (t, g, b, n)),
        starts=_starts(starts),
        fz=fz,
        fstep=fstep,
        dv=_flat(dv, (t, g, b, n)),
        dw=dw,
        idx=idx,
        val=val,
    )
    return dw


def alif_forward(
    u: Tensor,
    w: Tensor | None,
    state0: tuple[Tensor, Tensor, Tensor],
    decays: tuple[Tensor, Tensor],
    threshold: float,
    beta: float,
    reset: str,
    starts: Tensor | None,
    fresh: tuple[Tensor | None, Tensor | None, Tensor | None],
) -> tuple[Tensor, Tensor, Tensor] | None:
    """``(zs, vs, as)`` of the ALIF sequence (each (T, B, N), like ``u``), or None when the
    kernel does not apply. Arguments as in
    :func:`snrl.functional.alif_sequence._forward_loop`: the state at t = -1 ``(v0, z0, a0)``,
    ``decays = (alpha, rho)`` and the fresh ``(fv, fz, fa)`` expanded to ``u``'s shape."""
    lib = _applies(u, w, *state0, *decays, *fresh)
    if lib is None:
        return None
    t, _, b, n = _dims(u)
    vs, zs, as_ = (_buffers.empty(tuple(u.shape)) for _ in range(3))  # as lif_forward's
    (fv, fz, fa), fstep = _fresh(fresh, (t, 1, b, n))
    idx, val = _spike_scratch(n)
    v0, z0, a0 = (_flat(x, (b, n)) for x in state0)
    lib.alif_forward(
        T=t,
        B=b,
        N=n,
        u=_flat(u, (t, b, n)),
        w=_flat(w, (n, n)),
        v0=v0,
        z0=z0,
        a0=a0,
        alpha=_alpha(decays[0], 1, n),
        rho=_alpha(decays[1], 1, n),
        threshold=float(threshold),
        beta=float(beta),
        subtract=int(reset == "subtract"),
        starts=_starts(starts),
        fv=fv,
        fz=fz,
        fa=fa,
        fstep=fstep,
        vs=vs,
        zs=zs,
        **{"as": as_},
        idx=idx,
        val=val,
    )
    return zs, vs, as_


class ALIFWalk(NamedTuple):
    """What the reverse walk of the ALIF sequence's backward reads: the incoming gradients
    (``gz``, ``gv``, ``ga`` or None), ``w_back_t`` (as in :class:`Walk`), the saved ``vs``,
    ``zs``, ``as_`` and the spikes each step starts from ``zp`` (all (T, B, N)), the decays,
    ``threshold``, ``beta``, ``reset`` and the episode ``starts``."""

    grads: tuple[Tensor | None, Tensor | None, Tensor | None]
    w_back_t: Tensor | None
    saved: tuple[Tensor, Tensor, Tensor, Tensor]
    decays: tuple[Tensor, Tensor]
    threshold: float
    beta: float
    reset: str
    starts: Tensor | None


def alif_backward(
    spike_fn: Callable[[Tensor], Tensor], walk: ALIFWalk
) -> tuple[Tensor, Tensor, Tensor, Tensor] | None:
    """``(dv, da, dv_0, da_0)`` of the backward pass of
    :func:`snrl.functional.alif_sequence.alif_sequence` (the last two masked where step 0
    starts an episode), or None when the kernel does not apply. The kernel computes the
    derivatives of the :data:`_KINDS` surrogates itself; any other arrives computed for the
    whole sequence."""
    (gz, gv, ga), w_back_t, (vs, zs, as_, zp), (alpha, rho) = walk[:4]
    lib = _applies(vs, gz, gv, ga, w_back_t, zs, as_, zp, alpha, rho)
    if lib is None:
        return None
    t, _, b, n = _dims(vs)
    dv, da = _buffers.empty(tuple(vs.shape)), _buffers.empty(tuple(vs.shape))
    first_v, first_a = (torch.empty(b, n, dtype=torch.float32) for _ in range(2))
    kind = _kind(spike_fn)
    s = None
    if kind is None:
        thr = as_ * walk.beta + walk.threshold
        s = derivative_fn(spike_fn)(vs - thr).to(torch.float32).contiguous()
    code, p1, p2 = kind or (0, 0.0, 0.0)
    seq = (t, b, n)
    lib.alif_backward(
        T=t,
        B=b,
        N=n,
        s=s,
        kind=code,
        p1=p1,
        p2=p2,
        gz=_flat(gz, seq),
        gv=_flat(gv, seq),
        ga=_flat(ga, seq),
        wbt=_flat(w_back_t, (n, n)),
        vs=_flat(vs, seq),
        zs=_flat(zs, seq),
        **{"as": _flat(as_, seq)},
        zp=_flat(zp, seq),
        alpha=_alpha(alpha, 1, n),
        rho=_alpha(rho, 1, n),
        threshold=float(walk.threshold),
        beta=float(walk.beta),
        subtract=int(walk.reset == "subtract"),
        starts=_starts(walk.starts),
        dv=dv,
        da=da,
        first_v=first_v,
        first_a=first_a,
        scratch=torch.empty(b + 2, n, dtype=torch.float32),
    )
    return dv, da, first_v, first_a


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
    lib.li_forward(
        T=t,
        B=b,
        N=n,
        u=_flat(u, (t, b, n)),
        v0=_flat(v0, (b, n)),
        alpha=_alpha(alpha, 1, n),
        starts=_starts(starts),
        fv=fv,
        fstep=fstep,
        vs=vs,
    )
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
    lib.li_backward(
        T=t,
        B=b,
        N=n,
        g=_flat(g, (t, b, n)),
        alpha=_alpha(alpha, 1, n),
        starts=_starts(starts),
        dv=dv,
    )
    return dv


def _applies(seq: Tensor, *tensors: Tensor | None) -> Kernels | None:
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


def _sizes(x: Tensor) -> dict[str, int]:
    """:func:`_dims` as the kernel's keywords ``T``, ``G``, ``B``, ``N``."""
    return dict(zip("TGBN", _dims(x)))


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
