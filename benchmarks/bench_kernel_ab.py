"""The compiled LIF kernel (``snrl/functional/lif_kernel.c``) of the working tree against the
same file at a git revision, in one process: for a change to the kernel that must keep its
numbers and its speed.

Both sources are built with snrl's own flags (``snrl.functional._native``: ``-O3
-march=native`` where the CPU's flags are known) into a temporary folder and loaded side by
side. First the outputs: forward (spikes, membranes), the backward walk (dv, dv_0) and dW of
both builds must be equal bit for bit, at widths N that take every path of the kernel (not a
multiple of 16, a multiple of 16 but not of the register tile, whole tiles) with and without
episode starts. Then the time: forward, walk and dW at T=64, spike rate ~0.2, per (B, N), each
timing ``--calls`` calls, the four variants (two builds x two parts) interleaved in a seeded
random order per round; the median over ``--repeats`` rounds of process CPU time
(``time.process_time``: robust to other processes on a shared machine), printed as the ratio
working tree / revision. ``--same`` builds the revision twice (plus a trailing newline, so
that the two libraries are distinct files): the A/A ratios show the noise of the machine.

Usage::

    python benchmarks/bench_kernel_ab.py [--base main] [--repeats 41] [--same]
"""

from __future__ import annotations

import argparse
import ctypes
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from snrl.functional import _native
from snrl.functional.surrogate import Surrogate

ROOT = Path(__file__).resolve().parent.parent
KERNEL = "snrl/functional/lif_kernel.c"
THRESHOLD = 1.0
SPIKE_FN = Surrogate("fast_sigmoid", 25)


def build(source: bytes, folder: Path, name: str) -> _native.Kernels:
    """``source`` built with snrl's flags and loaded."""
    target = folder / f"lif_kernel_{name}.so"
    flags = _native._build_flags(_native._cpu_flags())
    _native._build(source, target, _native._compiler(), flags)
    return _native.Kernels(ctypes.CDLL(str(target)))


def use(lib: _native.Kernels) -> None:
    """Make ``lib`` the kernel that ``snrl.functional._native``'s calls run."""
    _native._STATE.clear()
    _native._STATE["lib"] = lib


def inputs(t: int, b: int, n: int, seed: int, starts: bool) -> dict[str, torch.Tensor | None]:
    g = torch.Generator().manual_seed(seed)
    return {
        "u": torch.randn(t, b, n, generator=g) * 0.6,
        "w": torch.randn(n, n, generator=g) / n**0.5,
        "v0": torch.zeros(b, n),
        "z0": (torch.rand(b, n, generator=g) < 0.2).float(),
        "alpha": torch.full((n,), 0.95),
        "starts": (torch.rand(t, b, generator=g) < 0.05) if starts else None,
        "fresh": torch.zeros(t, b, n) if starts else None,
        "grad": torch.randn(t, b, n, generator=g),
    }


def parts(x: dict[str, torch.Tensor | None]) -> dict[str, Callable[[], tuple]]:
    """The kernel's three parts on inputs ``x``, each a call that returns its outputs; the
    walk and dW take the forward's outputs (computed here, with the kernel in use)."""
    st, fresh = x["starts"], x["fresh"]

    def forward():
        return _native.lif_forward(
            x["u"], x["w"], x["v0"], x["z0"], x["alpha"], THRESHOLD, "subtract", st, fresh, fresh
        )

    zs, vs = (a.clone() for a in forward())
    w_back_t = (x["w"] - THRESHOLD * torch.eye(x["w"].shape[0])).t().contiguous()
    walk = _native.Walk(x["grad"], None, w_back_t, vs, zs, x["alpha"], THRESHOLD, "subtract", st)
    return {
        "forward": forward,
        "walk": lambda: _native.lif_backward(SPIKE_FN, walk),
        "dW": lambda: (_native.lif_weight_grad(x["z0"], zs, st, fresh, x["grad"]),),
    }


def check_equal(libs: dict[str, _native.Kernels]) -> str:
    """Every part's outputs of both builds, bit for bit; raises AssertionError on a change."""
    widths = (7, 16, 48, 100, 128, 144, 256, 272)
    for n in widths:
        for starts in (False, True):
            x = inputs(20, 5, n, seed=n, starts=starts)
            got = {}
            for name, lib in libs.items():
                use(lib)
                got[name] = {k: [a.clone() for a in f()] for k, f in parts(x).items()}
            for part, outs in got["base"].items():
                same = all(torch.equal(a, b) for a, b in zip(outs, got["tree"][part]))
                assert same, f"{part} differs at N={n}, starts={starts}"
    return f"outputs equal bit for bit: forward, walk, dW at N = {widths}, with and without starts"


def timings(libs: dict[str, _native.Kernels], b: int, n: int, repeats: int, calls: int):
    """Median process CPU time of ``calls`` calls per (build, part), interleaved."""
    x = inputs(64, b, n, seed=1, starts=False)
    use(libs["tree"])
    fns = {(name, k): (lib, f) for name, lib in libs.items() for k, f in parts(x).items()}
    times: dict[tuple[str, str], list[float]] = {key: [] for key in fns}
    rng = random.Random(0)
    for lib, f in fns.values():  # warm-up
        use(lib)
        f()
    for _ in range(repeats):
        keys = list(fns)
        rng.shuffle(keys)
        for key in keys:
            lib, f = fns[key]
            use(lib)
            t0 = time.process_time()
            for _ in range(calls):
                f()
            times[key].append(time.process_time() - t0)
    return {key: statistics.median(v) for key, v in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="main", help="the git revision to compare with")
    parser.add_argument("--repeats", type=int, default=41, help="timed rounds (median)")
    parser.add_argument("--calls", type=int, default=5, help="calls per timing")
    parser.add_argument("--same", action="store_true", help="A/A: the revision against itself")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    base = subprocess.run(
        ["git", "show", f"{args.base}:{KERNEL}"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    tree = base + b"\n" if args.same else (ROOT / KERNEL).read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        libs = {"base": build(base, Path(tmp), "base"), "tree": build(tree, Path(tmp), "tree")}
        print(f"kernel: working tree vs {args.base}{' (A/A: itself)' if args.same else ''}")
        print(check_equal(libs))
        print(f"T=64, process CPU time, median of {args.repeats} x {args.calls} calls: tree / base")
        print(f"{'B':>5}{'N':>5}{'forward':>9}{'walk':>8}{'dW':>8}")
        for b, n in ((8, 128), (32, 128), (64, 128), (256, 128), (64, 256), (64, 144)):
            t = timings(libs, b, n, args.repeats, args.calls)
            r = [t[("tree", k)] / t[("base", k)] for k in ("forward", "walk", "dW")]
            print(f"{b:>5}{n:>5}" + "".join(f"{x:>8.3f}x" for x in r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
