"""A Dale-constrained spiking network: spike raster (E/I coloured) and membrane traces.

Builds a two-layer LIF :class:`snrl.networks.spiking.SpikingBackbone` with hard Dale's law,
drives it with a slowly varying 4-channel input for 300 steps (dt = 1 ms), and saves a figure.

    python examples/dale_network.py --out dale_network.png
"""

from __future__ import annotations

import argparse

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from snrl.io import atomic_path  # noqa: E402
from snrl.networks import Activity  # noqa: E402
from snrl.networks.spiking import SpikingBackbone  # noqa: E402


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


def plot(net: SpikingBackbone, activity: Activity, out: str) -> None:
    """Raster of every spiking layer (E blue, I red) and a few membrane traces, saved to out."""
    names = [layer.name for layer in activity.spiking()]
    fig, axes = plt.subplots(len(names) + 1, 1, figsize=(9, 2.4 * (len(names) + 1)), sharex=True)
    for ax, name in zip(axes, names):
        spikes = activity[name].spikes[:, 0]  # (T, N), first batch row
        sign = activity[name].sign
        for is_exc, colour, label in ((True, "tab:blue", "E"), (False, "tab:red", "I")):
            cols = (sign > 0) if is_exc else (sign < 0)
            t, n = (spikes * cols).nonzero(as_tuple=True)
            ax.scatter(t.numpy(), n.numpy(), s=2, c=colour, label=label, marker="|")
        ax.set_ylabel(f"{name} neuron")
        ax.legend(loc="upper right", markerscale=4, fontsize=8)
    ax = axes[-1]
    first = activity[names[0]]
    v = first.v[:, 0]
    counts = first.spikes[:, 0].sum(0)
    busy = [int(j) for j in counts.argsort(descending=True) if counts[j] < 0.5 * len(v)]
    for j in busy[:3]:
        ax.plot(v[:, j].numpy(), lw=0.8, label=f"{names[0]} v[{j}]")
    ax.plot(activity["readout"].v[:, 0, 0].numpy(), lw=1.2, c="k", label="readout v[0]")
    ax.axhline(first.threshold, ls="--", c="grey", lw=0.6)
    ax.set_xlabel("step (1 ms)")
    ax.set_ylabel("membrane")
    ax.legend(loc="upper right", fontsize=7, ncol=4)
    fig.tight_layout()
    try:
        with atomic_path(out) as tmp:  # a reader never sees a half-written PNG
            fig.savefig(tmp, format="png", dpi=110)
    finally:
        plt.close(fig)


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
    plot(net, res.activity, args.out)
    rates = res.activity.spike_rates()
    print(f"wrote {args.out}; spikes per neuron per step: {rates}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
