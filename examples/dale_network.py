"""A Dale-constrained spiking network: spike rasters (E/I coloured), membrane traces, rates.

Builds a two-layer LIF :class:`snrl.networks.spiking.SpikingBackbone` with hard Dale's law,
drives it with a slowly varying 4-channel input for 300 steps (dt = 1 ms), and saves the
figure of :func:`snrl.plot.activity_figure`: one raster per layer (excitatory neurons in the
palette's vermillion, inhibitory in blue, grouped, with their counts), the membrane
potential of three neurons against the labelled threshold, and per-neuron rates in Hz.

    python examples/dale_network.py --out dale_network.png
"""

from __future__ import annotations

import argparse

import torch

from snrl.networks.spiking import SpikingBackbone
from snrl.plot import activity_figure

DT = 1e-3  # seconds per step (the layers' default dt)


def make_input(steps: int, batch: int, features: int, generator: torch.Generator) -> torch.Tensor:
    """(T, B, F) smooth random drive: sines with random phases plus a little noise."""
    t = torch.arange(steps, dtype=torch.float32)[:, None, None]
    phase = torch.rand(1, batch, features, generator=generator) * 6.283
    freq = 0.01 + 0.03 * torch.rand(1, batch, features, generator=generator)
    noise = 0.2 * torch.randn(steps, batch, features, generator=generator)
    return 1 + torch.sin(t * freq * 6.283 + phase) + noise


def build(seed: int, inhibitory: float = 0.2) -> SpikingBackbone:
    """The network of the example: 4 inputs -> LIF 80 -> LIF 40 -> LI readout 2.

    20 % of the neurons are inhibitory (the biological ratio, the default); the layers scale
    the inhibitory weights so that each neuron's expected recurrent input is zero at init
    (see docs/layers.md, "E/I balance at init").
    """
    return SpikingBackbone(
        4, [80, 40], 2, backbone="lif", force_dale_law=True, recurrent_sign=inhibitory, seed=seed
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="dale_network.png", help="output PNG path")
    parser.add_argument("--steps", type=int, default=300, help="network steps to simulate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--inhibitory", type=float, default=0.2, help="fraction of inhibitory neurons"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    net = build(args.seed, args.inhibitory)
    x = make_input(args.steps, 1, 4, torch.Generator().manual_seed(args.seed))
    with torch.no_grad():
        res = net.run(x, net.initial_state(1))
    activity_figure(
        res.activity,
        dt=DT,
        title=f"Dale network, {args.steps} steps of {DT * 1e3:g} ms",
        path=args.out,
    )
    rates = res.activity.spike_rates()
    hz = {k: round(v / DT, 1) for k, v in rates.items()}
    print(f"wrote {args.out}; spikes per neuron per step: {rates}; mean rates (Hz): {hz}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
