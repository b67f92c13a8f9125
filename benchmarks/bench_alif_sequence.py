"""The fused ALIF sequence (``snrl.functional.alif_sequence``, a hand-written backward of
``alif_step``) against autograd through the step loop, which ALIF layers ran before: the
biological time profile trains ALIF networks at ten neuron steps per task step, where the
loop made a 500k-step PPO run take 4-5x as long as a LIF one.

Baseline (named, measured in the same run): the same ``ALIFLayer`` / the same ``snrl train``
with ``snrl.layers.alif._alif_sequence = None``, which sends sequences through the layer's
autograd step loop.

(a) layer: forward + backward of a Dale 80/20 ``ALIFLayer`` (8 inputs, 128 neurons, dt 10 ms,
    tau_m 20 ms, tau_a 1.5 s, beta 20) at PPO's update shapes, T x B = 320 x 16 (32 env steps
    of 10 neuron steps, 16 envs: the biological profile) and 32 x 16 (the task profile).
    Spikes must be equal and the gradients close before timing; the median of process CPU
    time over ``--repeats`` rounds, the two paths interleaved in a seeded random order. And
    the rollout's call: one env step of 10 neuron steps without a graph.
(b) training: ``snrl train --algo ppo --env PerceptualDecisionMaking-v0 --backbone alif
    --hidden 128 --dale --n-envs 16 --steps STEPS --set time_profile=biological``, in this
    process, each path ``--train-rounds`` times alternating; wall and CPU time of each.

Prints the ratios loop / fused (> 1: the fused path is faster). One thread
(``torch.set_num_threads(1)``), as snrl runs small networks.

Usage::

    python benchmarks/bench_alif_sequence.py [--repeats 15] [--steps 8192] [--train-rounds 2]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

import snrl.layers.alif as alif_module
from snrl.cli import main as snrl_main
from snrl.layers import ALIFLayer

FUSED = alif_module.alif_sequence
SHAPES = ((320, 16, "biological: 32 env steps x 10 neuron steps"), (32, 16, "task profile"))


def _layer() -> ALIFLayer:
    return ALIFLayer(8, 128, force_dale_law=True, seed=0, dt=0.01, tau_m=0.02, tau_a=1.5, beta=20.0)


def _use(fused: bool) -> None:
    alif_module._alif_sequence = FUSED if fused else None


def _fwd_bwd(layer: ALIFLayer, x: torch.Tensor, target: torch.Tensor) -> list[torch.Tensor]:
    z, _ = layer(x, layer.initial_state(x.shape[1]))
    loss = (z * target).sum()
    return [z, *torch.autograd.grad(loss, [p for p in layer.parameters() if p.requires_grad])]


def check_agreement(layer: ALIFLayer, x: torch.Tensor, target: torch.Tensor) -> int:
    """Equal spikes and close gradients on both paths; returns the spike count."""
    _use(False)
    ref = _fwd_bwd(layer, x, target)
    _use(True)
    got = _fwd_bwd(layer, x, target)
    assert torch.equal(ref[0], got[0]), "the fused path's spikes differ from the step loop's"
    for a, b in zip(ref[1:], got[1:], strict=True):  # float32 rounding over T steps
        torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-4 * float(a.abs().max()))
    return int(ref[0].sum())


def _medians(repeats: int, seed: int, work, calls: int = 1) -> tuple[float, float]:
    """Median process CPU time of one ``work()`` with the step loop and with the fused path,
    the two interleaved in a seeded random order per round; ``(loop, fused)`` seconds."""
    times: dict[bool, list[float]] = {True: [], False: []}
    rng = random.Random(seed)
    for _ in range(repeats):
        order = [True, False]
        rng.shuffle(order)
        for fused in order:
            _use(fused)
            t0 = time.process_time()
            for _ in range(calls):
                work()
            times[fused].append((time.process_time() - t0) / calls)
    _use(True)
    return statistics.median(times[False]), statistics.median(times[True])


def layer_ratios(repeats: int) -> list[str]:
    rows = []
    for t, b, what in SHAPES:
        layer = _layer()
        g = torch.Generator().manual_seed(1)
        x = torch.rand(t, b, 8, generator=g) * 2.0
        target = torch.randn(t, b, 128, generator=g)
        spikes = check_agreement(layer, x, target)
        loop, fused = _medians(repeats, t, lambda: _fwd_bwd(layer, x, target))  # noqa: B023
        rows.append(
            f"| layer fwd+bwd T={t} B={b} ({what}; {spikes / x.shape[0] / b / 128:.3f} "
            f"spikes/neuron/step) | {loop * 1e3:.1f} ms | {fused * 1e3:.1f} ms | "
            f"**{loop / fused:.2f}x** |"
        )
    _use(True)
    return rows


def rollout_ratio(repeats: int, calls: int = 100) -> str:
    """One env step of the biological profile's rollout: 10 neuron steps, B=16, no graph."""
    layer = _layer()
    x = torch.rand(10, 16, 8, generator=torch.Generator().manual_seed(2)) * 2.0
    state = layer.initial_state(16)
    with torch.no_grad():
        _use(False)
        ref = layer(x, state)[0]
        _use(True)
        assert torch.equal(layer(x, state)[0], ref), "the no-graph sequence's spikes differ"
        loop, fused = _medians(repeats, 1, lambda: layer(x, state), calls)
    return (
        f"| layer rollout call, 10 neuron steps, B=16, no graph (one env step) | "
        f"{loop * 1e6:.0f} us | {fused * 1e6:.0f} us | **{loop / fused:.2f}x** |"
    )


def train_ratio(steps: int, rounds: int) -> str:
    times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for fused in (r % 2 == 0, r % 2 != 0):
                _use(fused)
                out = Path(tmp) / f"run-{r}-{int(fused)}"
                argv = [
                    "train", "--algo", "ppo", "--env", "PerceptualDecisionMaking-v0",
                    "--backbone", "alif", "--hidden", "128", "--dale", "--n-envs", "16",
                    "--steps", str(steps), "--seed", "1", "--set", "time_profile=biological",
                    "--quiet", "--out", str(out),
                ]  # fmt: skip
                w0, c0 = time.perf_counter(), time.process_time()
                rc = snrl_main(argv)
                times[fused].append((time.perf_counter() - w0, time.process_time() - c0))
                assert rc == 0, f"snrl train exited {rc}"
    _use(True)
    lw = statistics.median(w for w, _ in times[False])
    fw = statistics.median(w for w, _ in times[True])
    lc = statistics.median(c for _, c in times[False])
    fc = statistics.median(c for _, c in times[True])
    return (
        f"| snrl train ALIF biological, PerceptualDecisionMaking, {steps:,} steps, 16 envs "
        f"(wall; CPU) | {lw:.1f} s; {lc:.1f} s | {fw:.1f} s; {fc:.1f} s | "
        f"**{lw / fw:.2f}x; {lc / fc:.2f}x** |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--steps", type=int, default=8192)
    parser.add_argument("--train-rounds", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print("| what | step loop (autograd) | fused | loop / fused |")
    print("|---|---|---|---|")
    for row in layer_ratios(args.repeats):
        print(row, flush=True)
    print(rollout_ratio(args.repeats), flush=True)
    if args.train_rounds > 0:
        print(train_ratio(args.steps, args.train_rounds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
