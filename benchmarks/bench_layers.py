"""Layer benchmark (issue 2): snrl's LIF layer against snntorch's RLeaky, on one CPU thread.

Two paths, measured in one run:

(a) rollout: one step at a time, batch 8, 4 inputs, 128 neurons, under ``torch.no_grad``:
    ``snrl.layers.LIFLayer`` vs snntorch ``RLeaky`` (``all_to_all=True``, subtract reset, same
    beta/threshold, fed by an ``nn.Linear``) vs a plain torch loop. Target: LIFLayer <= 1/3 of
    RLeaky's time per step.
(b) training: forward + backward over T=64, B=256, N=128 (4 input features projected by the
    layer's input weights / a Linear, all-to-all recurrence, subtract reset): LIFLayer (which
    calls ``snrl.functional.lif_sequence``) vs RLeaky. Targets: time <= 1/2 of RLeaky's, peak
    memory <= RLeaky's.

All variants use the same weights, beta = exp(-dt / tau_m), threshold and surrogate, a fast
sigmoid of slope 25: ``snrl.functional.Surrogate("fast_sigmoid", 25)`` (closed-form
derivative) for snrl, ``snntorch.surrogate.fast_sigmoid(slope=25)`` for RLeaky, and the
latter also in LIFLayer (its derivative then comes from autograd) as an extra training row;
their spikes and membranes are checked against each other before timing. LIFLayer is built
with ``use_rec_eye_mask=False`` so its dynamics equal RLeaky's (RLeaky has autapses);
RLeaky's recurrent Linear has a zero bias.

(c) issue 11: the PPO shape, forward + backward over T=32, B=8, N=128 with Dale's law on
    (``LIFLayer(force_dale_law=True)``, no autapses, as in PPO's backbones) vs RLeaky at the
    same shape (target <= 0.3x), and in (a) Dale-on LIFLayer rows, per step and inside
    ``cached_weights()`` as PPO's rollout runs it (target <= 0.2x). With Dale
    on the effective weights are signed, so these rows are timed only (no agreement check);
    (b)'s target is <= 0.4x.

Timing: ``--repeats`` rounds after a warm-up, the variants interleaved in a seeded random
order per round; the median of wall time (``time.perf_counter``) and of process CPU time
(``time.process_time``, robust to other processes on a shared machine) are reported.
Peak memory: torch.profiler with ``profile_memory=True`` records every CPU allocation and
free of one warmed-up forward + backward; replaying them in time order gives the peak of
live bytes the step allocated (inputs and weights excluded, identical for all variants).
``tracemalloc`` does not see torch's allocations, and process RSS (``ru_maxrss``, or
``VmHWM`` after ``clear_refs``) proved too noisy here: glibc keeps freed blocks, so it
moved by +-30 % between identical runs.

Usage::

    python benchmarks/bench_layers.py [--repeats 15] [--profile] [--rounds 5]

``--rounds N`` repeats the whole measurement N times in the one command and prints every
round's ratios (issue 11's targets hold "on every run").
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

import snntorch as snn
import torch
from snntorch import surrogate
from torch import Tensor, nn

from snrl.functional.lif_sequence import lif_sequence
from snrl.functional.surrogate import Surrogate
from snrl.layers import LIFLayer
from snrl.layers.base import cached_weights

DT, TAU_M, THRESHOLD = 1e-3, 20e-3, 1.0
ALPHA = math.exp(-DT / TAU_M)
F_IN, N = 4, 128
ROLL_B, ROLL_STEPS = 8, 200
TRAIN_T, TRAIN_B = 64, 256
SLOPE = 25


class _State(NamedTuple):
    v: Tensor
    z: Tensor


def _spike_fn() -> Callable[[Tensor], Tensor]:
    """snrl's description of the surrogate (closed-form derivative in the fused backward)."""
    return Surrogate("fast_sigmoid", SLOPE)


def _snntorch_spike_fn() -> Callable[[Tensor], Tensor]:
    """The same surrogate as snntorch's closure."""
    return surrogate.fast_sigmoid(slope=SLOPE)


class Weights(NamedTuple):
    """Shared weights: w_in (F, N), b (N,), w_rec (N, N), row i = presynaptic neuron i."""

    w_in: Tensor
    b: Tensor
    w_rec: Tensor


def make_weights(seed: int = 0) -> Weights:
    g = torch.Generator().manual_seed(seed)
    w_in = (torch.rand(F_IN, N, generator=g) * 2 - 1) * 1.5
    b = torch.rand(N, generator=g) * 0.2
    w_rec = (torch.rand(N, N, generator=g) * 2 - 1) / math.sqrt(N)
    return Weights(w_in, b, w_rec)


# --------------------------------------------------------------------------- variants
class SnrlLayer:
    """snrl.layers.LIFLayer."""

    name = "snrl LIFLayer"
    spike_fn = staticmethod(_spike_fn)

    def __init__(self, w: Weights) -> None:
        self.layer = LIFLayer(
            F_IN,
            N,
            use_recurrent_connection=True,
            use_rec_eye_mask=False,
            dt=DT,
            tau_m=TAU_M,
            threshold=THRESHOLD,
            reset="subtract",
            spike_grad=self.spike_fn(),
            seed=0,
        )
        with torch.no_grad():
            self.layer.weight_in.copy_(w.w_in)
            self.layer.bias.copy_(w.b)
            self.layer.weight_rec.copy_(w.w_rec)

    def parameters(self) -> list[Tensor]:
        return list(self.layer.parameters())

    def initial_state(self, b: int):
        return self.layer.initial_state(b)

    def step(self, x: Tensor, state):
        return self.layer(x, state)

    def sequence(self, x: Tensor, state) -> tuple[Tensor, Tensor]:
        res = self.layer.run(x, state)
        return res.out, res.v


class SnrlLayerDale(SnrlLayer):
    """LIFLayer with Dale's law (signed effective weights, no autapses), as PPO builds it."""

    name = "snrl LIFLayer, Dale"

    def __init__(self, w: Weights) -> None:
        self.layer = LIFLayer(
            F_IN,
            N,
            use_recurrent_connection=True,
            dt=DT,
            tau_m=TAU_M,
            threshold=THRESHOLD,
            reset="subtract",
            spike_grad=self.spike_fn(),
            force_dale_law=True,
            seed=0,
        )
        with torch.no_grad():
            self.layer.weight_in.copy_(w.w_in)
            self.layer.bias.copy_(w.b)
            self.layer.weight_rec.copy_(w.w_rec)


class SnrlLayerDaleCached(SnrlLayerDale):
    """The Dale layer inside ``cached_weights()``, as PPO's rollout runs it: the signed
    effective weights are computed once per rollout, not once per step."""

    name = "LIFLayer, Dale, cached"
    cached = True


class SnrlLayerSnntorchSurrogate(SnrlLayer):
    """LIFLayer given snntorch's surrogate closure: the fused backward's autograd fallback."""

    name = "LIFLayer, snntorch surr."
    spike_fn = staticmethod(_snntorch_spike_fn)


class Wrapped:
    """A minimal module around lif_sequence: Linear projection, then the fused sequence."""

    name = "Linear + lif_sequence"

    def __init__(self, w: Weights, fn=lif_sequence) -> None:
        self.w_in = w.w_in.clone().requires_grad_()
        self.b = w.b.clone().requires_grad_()
        self.w_rec = w.w_rec.clone().requires_grad_()
        self.alpha = torch.full((N,), ALPHA)
        self.spike_fn = _spike_fn()
        self.fn = fn

    def parameters(self) -> list[Tensor]:
        return [self.w_in, self.b, self.w_rec]

    def initial_state(self, b: int) -> _State:
        return _State(torch.zeros(b, N), torch.zeros(b, N))

    def step(self, x: Tensor, state: _State):
        z, v = self.sequence(x.unsqueeze(0), state)
        return z[0], _State(v[0], z[0])

    def sequence(self, x: Tensor, state: _State) -> tuple[Tensor, Tensor]:
        t, b, f = x.shape
        u = torch.addmm(self.b, x.reshape(t * b, f), self.w_in).reshape(t, b, N)
        return self.fn(u, self.w_rec, state, self.alpha, THRESHOLD, "subtract", self.spike_fn)


class AutogradLoop(Wrapped):
    name = "autograd loop"

    def __init__(self, w: Weights) -> None:
        super().__init__(w, fn=functools.partial(lif_sequence, backward="autograd"))


class RLeakyNet:
    """snntorch RLeaky (all-to-all, subtract reset) fed by an nn.Linear."""

    name = "snntorch RLeaky"

    def __init__(self, w: Weights) -> None:
        self.fc = nn.Linear(F_IN, N)
        self.lif = snn.RLeaky(
            beta=ALPHA,
            all_to_all=True,
            linear_features=N,
            threshold=THRESHOLD,
            reset_mechanism="subtract",
            spike_grad=_snntorch_spike_fn(),
        )
        with torch.no_grad():
            self.fc.weight.copy_(w.w_in.t())
            self.fc.bias.copy_(w.b)
            self.lif.recurrent.weight.copy_(w.w_rec.t())
            self.lif.recurrent.bias.zero_()

    def parameters(self) -> list[Tensor]:
        return list(self.fc.parameters()) + list(self.lif.parameters())

    def initial_state(self, b: int):
        return torch.zeros(b, N), torch.zeros(b, N)

    def step(self, x: Tensor, state):
        spk, mem = self.lif(self.fc(x), *state)
        return spk, (spk, mem)

    def sequence(self, x: Tensor, state) -> tuple[Tensor, Tensor]:
        # snntorch's tutorial loop: the Linear inside the time loop. (Projecting all steps
        # at once and indexing cur[t] is slower: each cur[t] backward zero-fills a (T, B, N)
        # gradient; see RLeakyProjectOnce.)
        spk, mem = state
        spks, mems = [], []
        for x_t in x:
            spk, mem = self.lif(self.fc(x_t), spk, mem)
            spks.append(spk)
            mems.append(mem)
        return torch.stack(spks), torch.stack(mems)


class RLeakyProjectOnce(RLeakyNet):
    """RLeaky with the Linear applied once to the whole sequence, then indexed per step."""

    name = "RLeaky, Linear once"

    def sequence(self, x: Tensor, state) -> tuple[Tensor, Tensor]:
        cur = self.fc(x)
        spk, mem = state
        spks, mems = [], []
        for t in range(x.shape[0]):
            spk, mem = self.lif(cur[t], spk, mem)
            spks.append(spk)
            mems.append(mem)
        return torch.stack(spks), torch.stack(mems)


class PlainLoop:
    """The rollout step written directly in torch (the floor for a Python step)."""

    name = "plain torch step"

    def __init__(self, w: Weights) -> None:
        self.w_in, self.b, self.w_rec = w.w_in.clone(), w.b.clone(), w.w_rec.clone()
        self.alpha = torch.full((N,), ALPHA)

    def initial_state(self, b: int) -> _State:
        return _State(torch.zeros(b, N), torch.zeros(b, N))

    def step(self, x: Tensor, state: _State):
        cur = torch.addmm(self.b, x, self.w_in).addmm_(state.z, self.w_rec)
        v = torch.addcmul(cur, self.alpha, state.v).sub_(state.z, alpha=THRESHOLD)
        z = (v > THRESHOLD).to(v.dtype)
        return z, _State(v, z)


def _training_variants() -> list[type]:
    return [
        SnrlLayer,
        SnrlLayerSnntorchSurrogate,
        Wrapped,
        AutogradLoop,
        RLeakyNet,
        RLeakyProjectOnce,
    ]


def _rollout_variants() -> list[type]:
    return [SnrlLayer, SnrlLayerDale, SnrlLayerDaleCached, RLeakyNet, PlainLoop]


PPO_T, PPO_B = 32, 8


# --------------------------------------------------------------------------- measurements
def _inputs(t: int, b: int, seed: int = 1) -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(t, b, F_IN, generator=g)
    target = torch.randn(t, b, N, generator=g)
    return x, target


class Timing(NamedTuple):
    """Median seconds per call: wall clock and this process's CPU time."""

    wall: float
    cpu: float


def _median_times(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, Timing]:
    """Median wall and CPU seconds per call of each function, timed round-robin.

    Interleaving the variants (in a seeded random order per round, so no variant always
    follows the same one) spreads background load on a shared machine over all of them
    alike; the CPU time (one torch thread) is barely affected by other processes at all.
    """
    for fn in fns.values():  # warm-up
        fn()
    wall: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    rng = random.Random(0)
    names = list(fns)
    for _ in range(repeats):
        rng.shuffle(names)
        for name in names:
            fn = fns[name]
            w0, c0 = time.perf_counter(), time.process_time()
            fn()
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    return {n: Timing(statistics.median(wall[n]), statistics.median(cpu[n])) for n in fns}


def check_agreement() -> str:
    """All training variants give the same spikes/membranes as RLeaky on a short sequence."""
    w = make_weights()
    x, _ = _inputs(16, 8)
    ref_z, ref_v = RLeakyNet(w).sequence(x, RLeakyNet(w).initial_state(8))
    for cls in _training_variants():
        net = cls(w)
        with torch.enable_grad():
            z, v = net.sequence(x, net.initial_state(8))
        if not torch.equal(z.detach(), ref_z.detach()):
            raise AssertionError(f"{cls.name}: spikes differ from RLeaky")
        torch.testing.assert_close(v.detach(), ref_v.detach(), rtol=1e-5, atol=1e-5)
    return f"spike rate {ref_z.mean().item():.3f}"


def _rollout(net, xs: list[Tensor]) -> None:
    block = cached_weights() if getattr(net, "cached", False) else contextlib.nullcontext()
    with block, torch.no_grad():
        state = net.initial_state(ROLL_B)
        for x_t in xs:
            _, state = net.step(x_t, state)


def bench_rollout(repeats: int) -> dict[str, Timing]:
    """Seconds per step, one step at a time, under no_grad."""
    w = make_weights()
    x, _ = _inputs(ROLL_STEPS, ROLL_B)
    xs = list(x.unbind(0))
    fns = {cls.name: functools.partial(_rollout, cls(w), xs) for cls in _rollout_variants()}
    times = _median_times(fns, repeats)
    return {n: Timing(t.wall / ROLL_STEPS, t.cpu / ROLL_STEPS) for n, t in times.items()}


def _train_once(net, x: Tensor, target: Tensor) -> None:
    for p in net.parameters():
        p.grad = None
    z, _ = net.sequence(x, net.initial_state(x.shape[1]))
    loss = (z * target).sum()
    loss.backward()


def bench_training(repeats: int, t: int = TRAIN_T, b: int = TRAIN_B, variants=None):
    """Seconds per forward + backward over the whole sequence."""
    w = make_weights()
    x, target = _inputs(t, b)
    variants = _training_variants() if variants is None else variants
    fns = {cls.name: functools.partial(_train_once, cls(w), x, target) for cls in variants}
    return _median_times(fns, repeats)


def _peak_live_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes of live torch CPU allocations made while ``fn`` runs.

    Replays torch.profiler's allocation events (``profile_memory=True``) in time order: every
    tensor the step allocates and frees, in the forward and the backward, counts; memory
    held before the call (weights, inputs) does not.
    """
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if type(node.extra_fields).__name__ == "_ExtraFields_Allocation":
            events.append((node.start_time_ns, node.extra_fields.alloc_size))
    live = peak = 0
    for _, size in sorted(events):
        live += size
        peak = max(peak, live)
    return peak


def bench_memory() -> dict[str, float]:
    """Peak live torch memory (MiB) of one warmed-up forward + backward per variant.

    The compiled kernel's large buffers come from a pool of memory maps
    (``snrl.functional._buffers``), which torch's profiler does not see; here they come from
    ``torch.empty`` instead (the same tensors, so the same peak). The pool's idle blocks
    between calls are memory on top of it: :func:`pool_idle_mib`.
    """
    from snrl.functional import _buffers

    w = make_weights()
    x, target = _inputs(TRAIN_T, TRAIN_B)
    out = {}
    old_min, _buffers.MIN_BYTES = _buffers.MIN_BYTES, 1 << 62
    try:
        for cls in _training_variants():
            step = functools.partial(_train_once, cls(w), x, target)
            step()  # warm-up
            try:
                out[cls.name] = _peak_live_bytes(step) / 2**20
            except (AttributeError, RuntimeError):  # profiler internals differ: not measured
                return {}
    finally:
        _buffers.MIN_BYTES = old_min
    return out


def pool_idle_mib() -> float:
    """MiB the kernel's buffer pool holds idle after one forward + backward of LIFLayer."""
    from snrl.functional import _buffers

    x, target = _inputs(TRAIN_T, TRAIN_B)
    _train_once(SnrlLayer(make_weights()), x, target)
    return _buffers.idle_bytes() / 2**20


def profile_rollout_step() -> str:
    """torch.profiler table of LIFLayer's single step (what each op costs)."""
    from torch.profiler import profile

    net = SnrlLayer(make_weights())
    x, _ = _inputs(ROLL_STEPS, ROLL_B)
    with torch.no_grad():
        state = net.initial_state(ROLL_B)
        for x_t in x[:20]:
            _, state = net.step(x_t, state)
        with profile() as prof:
            for x_t in x:
                _, state = net.step(x_t, state)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)


# --------------------------------------------------------------------------- report
def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def report(
    roll: dict[str, Timing],
    train: dict[str, Timing],
    mem: dict[str, float],
    ppo: dict[str, Timing] | None = None,
) -> str:
    ref = "snntorch RLeaky"
    nan = float("nan")
    lines = [
        f"(a) rollout, one step, B={ROLL_B}, F={F_IN}, N={N}, no_grad",
        f"{'variant':<24}{'wall us/step':>13}{'vs RLeaky':>10}{'cpu us/step':>13}{'vs RLeaky':>10}",
    ]
    for name, t in roll.items():
        lines.append(
            f"{name:<24}{t.wall * 1e6:>13.1f}{t.wall / roll[ref].wall:>9.2f}x"
            f"{t.cpu * 1e6:>13.1f}{t.cpu / roll[ref].cpu:>9.2f}x"
        )
    for main, bound in ((SnrlLayer.name, 1 / 3), (SnrlLayerDaleCached.name, 0.2)):
        r, rc = roll[main].wall / roll[ref].wall, roll[main].cpu / roll[ref].cpu
        lines.append(
            f"target {main} <= {bound:.2f}x RLeaky: wall {r:.2f}x {_verdict(r <= bound)}, "
            f"cpu {rc:.2f}x {_verdict(rc <= bound)}"
        )
    lines += [
        "",
        f"(b) training, forward + backward, T={TRAIN_T}, B={TRAIN_B}, F={F_IN}, N={N}",
        f"{'variant':<24}{'wall ms':>9}{'us/step':>9}{'vs RLeaky':>10}{'cpu ms':>8}"
        f"{'vs RLeaky':>10}{'peak MiB':>10}{'vs RLeaky':>10}",
    ]
    for name, t in train.items():
        m = mem.get(name, nan)
        lines.append(
            f"{name:<24}{t.wall * 1e3:>9.2f}{t.wall / TRAIN_T * 1e6:>9.1f}"
            f"{t.wall / train[ref].wall:>9.2f}x{t.cpu * 1e3:>8.2f}{t.cpu / train[ref].cpu:>9.2f}x"
            f"{m:>10.1f}{m / mem.get(ref, nan):>9.2f}x"
        )
    main = next(iter(train))
    r, rc = train[main].wall / train[ref].wall, train[main].cpu / train[ref].cpu
    lines.append(
        f"target {main} time <= 0.4x RLeaky (issue 11; issue 2: 0.5x): wall {r:.2f}x "
        f"{_verdict(r <= 0.4)}, cpu {rc:.2f}x {_verdict(rc <= 0.4)}"
    )
    if mem:
        rm = mem[main] / mem[ref]
        lines.append(f"target {main} peak memory <= RLeaky: {rm:.2f}x  {_verdict(rm <= 1.0)}")
        if "pool idle" in mem:
            lines.append(
                f"(the kernel's buffer pool holds {mem['pool idle']:.1f} MiB idle between calls, "
                "on top of the peak)"
            )
    else:
        lines.append("peak memory: not measured (torch.profiler allocation events unavailable)")
    if ppo:
        lines += [
            "",
            f"(c) PPO's shape, forward + backward, T={PPO_T}, B={PPO_B}, F={F_IN}, N={N}",
            f"{'variant':<24}{'wall ms':>9}{'vs RLeaky':>10}{'cpu ms':>8}{'vs RLeaky':>10}",
        ]
        for name, t in ppo.items():
            lines.append(
                f"{name:<24}{t.wall * 1e3:>9.2f}{t.wall / ppo[ref].wall:>9.2f}x"
                f"{t.cpu * 1e3:>8.2f}{t.cpu / ppo[ref].cpu:>9.2f}x"
            )
        main = SnrlLayerDale.name
        r, rc = ppo[main].wall / ppo[ref].wall, ppo[main].cpu / ppo[ref].cpu
        lines.append(
            f"target {main} <= 0.3x RLeaky: wall {r:.2f}x {_verdict(r <= 0.3)}, "
            f"cpu {rc:.2f}x {_verdict(rc <= 0.3)}"
        )
    return "\n".join(lines)


def bench_kernel_parts(repeats: int, batches: tuple[int, ...]) -> str:
    """The compiled kernel's three parts against the torch loops, per batch size (T=64,
    N=128, this benchmark's weights and inputs): the forward loop, the backward walk and dW.
    The kernel's walk computes the surrogate's derivative itself; the torch walk calls its
    closed form per chunk of steps."""
    from snrl.functional import _native
    from snrl.functional import lif_sequence as ls
    from snrl.functional.surrogate import derivative_fn

    if _native.library() is None:
        return f"kernel parts: no compiled kernel here ({_native._STATE.get('failed')})"
    w = make_weights()
    alpha = torch.full((N,), ALPHA)
    spike_fn = _spike_fn()
    derivative = derivative_fn(spike_fn)
    w_back = w.w_rec.clone()
    w_back.diagonal().sub_(THRESHOLD)
    w_back_t = w_back.t().contiguous()

    def torch_only(fn):  # SNRL_NATIVE=0 for the call: the torch loop runs
        def call():
            before = os.environ.get("SNRL_NATIVE")
            os.environ["SNRL_NATIVE"] = "0"
            try:
                return fn()
            finally:
                if before is None:
                    os.environ.pop("SNRL_NATIVE")
                else:
                    os.environ["SNRL_NATIVE"] = before

        return call

    lines = [
        f"kernel vs torch loop, T={TRAIN_T}, N={N} (ratios: kernel time / torch time)",
        f"{'B':>5}{'spikes':>8}{'forward':>9}{'walk':>7}{'dW':>7}",
    ]
    for b in batches:
        x, _ = _inputs(TRAIN_T, b)
        u = torch.addmm(w.b, x.reshape(-1, F_IN), w.w_in).reshape(TRAIN_T, b, N)
        v0 = z0 = torch.zeros(b, N)
        gz = torch.randn(TRAIN_T, b, N, generator=torch.Generator().manual_seed(2))

        def forward(u=u, v0=v0, z0=z0):
            return ls._forward_loop(u, w.w_rec, v0, z0, alpha, THRESHOLD, "subtract", None)

        zs, vs = forward()
        walk = _native.Walk(gz, None, w_back_t, vs, zs, alpha, THRESHOLD, "subtract", None)

        def walk_kernel(a=walk):
            return _native.lif_backward(spike_fn, a)

        def walk_torch(a=walk):
            return ls._backward_loop(a, derivative)

        dv = walk_torch()[0]

        def dw_torch(zs=zs, dv=dv, z0=z0):
            dw = ls._outer_sum(z0.unsqueeze(0), dv[:1])
            return dw.add_(ls._outer_sum(zs[:-1], dv[1:]))

        def dw_kernel(zs=zs, dv=dv, z0=z0):
            return _native.lif_weight_grad(z0, zs, None, None, dv)

        fns = {
            "fwd kernel": forward,
            "fwd torch": torch_only(forward),
            "walk kernel": walk_kernel,
            "walk torch": walk_torch,
            "dw kernel": dw_kernel,
            "dw torch": dw_torch,
        }
        t = _median_times(fns, repeats)
        ratio = {k: t[f"{k} kernel"].wall / t[f"{k} torch"].wall for k in ("fwd", "walk", "dw")}
        lines.append(
            f"{b:>5}{zs.mean().item():>8.3f}{ratio['fwd']:>8.2f}x{ratio['walk']:>6.2f}x"
            f"{ratio['dw']:>6.2f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="timed repeats (median)")
    parser.add_argument("--profile", action="store_true", help="profile LIFLayer's step")
    parser.add_argument("--rounds", type=int, default=1, help="whole measurements in a row")
    parser.add_argument(
        "--kernel-parts",
        action="store_true",
        help="only the compiled kernel's parts against the torch loops, B = 8 to 256",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, snntorch {snn.__version__}, 1 thread")
    if args.kernel_parts:
        print(bench_kernel_parts(args.repeats, (8, 16, 32, 48, 64, 96, 128, 256)))
        return 0
    print("agreement with RLeaky:", check_agreement())
    for k in range(args.rounds):
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"\n=== round {k + 1}/{args.rounds}, load {load}")
        roll = bench_rollout(args.repeats)
        train = bench_training(args.repeats)
        ppo = bench_training(
            args.repeats, PPO_T, PPO_B, [SnrlLayerDale, SnrlLayer, RLeakyNet, RLeakyProjectOnce]
        )
        mem = bench_memory() if k == 0 else {}
        if mem:
            mem["pool idle"] = pool_idle_mib()
        print(report(roll, train, mem, ppo))
    if args.profile:
        print(profile_rollout_step())
    return 0


if __name__ == "__main__":
    sys.exit(main())
