"""SpikingBackbone: stacked recurrent spiking layers with an optional leaky-integrator readout.

Layer k runs over the whole sequence before layer k+1 (exact, since layers only feed forward
between each other), so a sequence is one fused call per layer. With ``force_dale_law`` the
sign vector of each spiking layer is the ``forward_sign`` of the next layer (and of the
readout): a neuron's outgoing synapses share one sign everywhere. The first layer's
``forward_sign`` is None: observations are not neurons.

Neuron time and env time: with ``substeps = S`` every input step is held for ``S`` neuron
steps of ``dt`` seconds each, and the output is the one after the last of them. A sequence
(T, B, F) is repeated to (T S, B, F), run, and every S-th output kept; a one-step call
(B, F) runs S steps. Both give the same numbers, so rollouts (one step at a time) and
training (whole sequences) agree. The state passed in and out is at env-step granularity;
the activity keeps every neuron step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from snrl.config import NEURON_DEFAULTS
from snrl.errors import UserError
from snrl.functional.lif_sequence import lif_sequence
from snrl.functional.neurons import LIFState, LIState
from snrl.functional.state import map_state
from snrl.functional.surrogate import Surrogate
from snrl.layers import ALIFLayer, LIFLayer, LIFParameters, LILayer, LIParameters, SpyLIFLayer
from snrl.layers import li as li_module
from snrl.layers import lif as lif_module
from snrl.layers.base import LayerOutput, RecurrentLayer, _seed_from_global
from snrl.networks._args import layer_widths
from snrl.networks.activity import Activity, LayerActivity
from snrl.networks.protocol import BackboneOutput, LayerInfo

NEURONS: dict[str, type[RecurrentLayer]] = {
    "lif": LIFLayer,
    "alif": ALIFLayer,
    "spylif": SpyLIFLayer,
}


def _derive_seed(seed: int, index: int, stream: int) -> int:
    """An independent seed for layer ``index`` (stream 0: weights, 1: hidden-state init)."""
    return int(np.random.SeedSequence([seed, stream, index]).generate_state(1, np.uint64)[0] >> 2)


class SpikingBackbone(nn.Module):
    """Recurrent spiking layers ("lif0", "lif1", ...) and an LI readout ("readout").

    Args:
        input_size: observation features F.
        hidden_size: neurons per spiking layer: an int (every layer; ``n_layers`` of them)
            or a sequence of ints (one per layer).
        output_size: readout width (its membrane is the output), or None to output the last
            layer's spikes.
        n_layers: spiking layers (default: 1 for an int ``hidden_size``, else its length).
        backbone: the neuron model, ``"lif"``, ``"alif"`` or ``"spylif"`` (the agents'
            ``backbone=`` and the CLI's ``--backbone``).
        params: the neuron parameters of every spiking layer, an instance of the model's
            parameter class (:class:`~snrl.layers.LIFParameters`,
            :class:`~snrl.layers.ALIFParameters`, :class:`~snrl.layers.SpyLIFParameters`),
            passed unchanged to each layer; None: built from the neuron keywords.
        force_dale_law: hard Dale's law in every spiking layer, signs wired downstream.
        recurrent_sign: fraction of inhibitory neurons (float), or one entry per spiking layer
            (a float or a ±1 tensor each).
        readout_tau_m: membrane time constant of the readout, seconds.
        substeps: neuron steps per input step (int >= 1): each input is held for
            ``substeps`` steps of ``dt`` and the output after the last one is returned.
        use_recurrent_connection: recurrent weights in every spiking layer.
        use_rec_eye_mask: no autapses in the spiking layers.
        seed: base seed; every layer's ``seed`` (and ``hh_init_seed`` unless given) is derived
            from it. None: drawn from the global torch RNG.
        hh_init_seed: base seed from which each layer's ``hh_init_seed`` is derived (None:
            ``seed``).
        **neuron: the fields of the model's parameter class as keywords (``tau_m``, ``dt``,
            ``threshold``, ``hh_init`` ...), instead of ``params``. Its ``dt`` is also the
            readout's.

    Shape:
        ``forward(x, state)``: x (B, F) or (T, B, F) -> out (B, O) or (T, B, O). The
        activity of ``run`` is (B, N) / (T, B, N) with ``substeps = 1``, else
        (S, B, N) / (T S, B, N): one row per neuron step.
    """

    supports_starts = True
    """``run`` takes ``starts``/``fresh`` (episode resets inside one sequence call)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int | Sequence[int] | None = None,
        output_size: int | None = None,
        *,
        n_layers: int | None = None,
        backbone: str = "lif",
        params: LIFParameters | None = None,
        force_dale_law: bool = NEURON_DEFAULTS["force_dale_law"],
        recurrent_sign: float | Sequence[float | Tensor] = NEURON_DEFAULTS["recurrent_sign"],
        readout_tau_m: float | Tensor = NEURON_DEFAULTS["readout_tau_m"],
        substeps: int = 1,
        use_recurrent_connection: bool = True,
        use_rec_eye_mask: bool = True,
        seed: int | None = None,
        hh_init_seed: int | None = None,
        **neuron_keywords: Any,
    ) -> None:
        super().__init__()
        if backbone not in NEURONS:
            raise UserError(f"unknown backbone={backbone!r} (use one of {', '.join(NEURONS)})")
        sizes = layer_widths(hidden_size, n_layers, "SpikingBackbone")
        if isinstance(substeps, bool) or not isinstance(substeps, int) or substeps < 1:
            raise UserError(
                f"substeps={substeps!r} is not a positive integer (give the neuron steps per "
                "env step, >= 1)"
            )
        self.substeps = substeps
        if "forward_sign" in neuron_keywords:
            raise UserError("forward_sign is set by SpikingBackbone itself (do not pass it)")
        cls = NEURONS[backbone]
        params = cls.make_params(params, **neuron_keywords)
        if isinstance(recurrent_sign, (int, float)) and not isinstance(recurrent_sign, bool):
            signs: list[Any] = [float(recurrent_sign)] * len(sizes)
        else:
            signs = list(recurrent_sign)
            if len(signs) != len(sizes):
                raise UserError(
                    f"recurrent_sign has {len(signs)} entries for {len(sizes)} spiking layers "
                    "(give one per layer, or a float)"
                )
        self.seed = _seed_from_global() if seed is None else int(seed)
        hh_seed = self.seed if hh_init_seed is None else int(hh_init_seed)
        self.params = params
        self.input_size = input_size
        self.backbone = backbone
        self.force_dale_law = bool(force_dale_law)
        self.hidden_size = sizes
        self.n_layers = len(sizes)
        self.output_size = sizes[-1] if output_size is None else output_size

        layers: dict[str, RecurrentLayer] = {}
        n_in, fsign = input_size, None
        for k, n in enumerate(sizes):
            layer = cls(
                n_in,
                n,
                params=params,
                use_recurrent_connection=use_recurrent_connection,
                use_rec_eye_mask=use_rec_eye_mask,
                force_dale_law=self.force_dale_law,
                forward_sign=fsign,
                recurrent_sign=signs[k],
                seed=_derive_seed(self.seed, k, 0),
                hh_init_seed=_derive_seed(hh_seed, k, 1),
            )
            layers[f"{backbone}{k}"] = layer
            n_in, fsign = n, layer.recurrent_sign
        self.spiking_names = list(layers)
        if output_size is not None:
            layers["readout"] = LILayer(
                n_in,
                output_size,
                params=LIParameters(dt=params.dt, tau_m=readout_tau_m),
                forward_sign=fsign,
                seed=_derive_seed(self.seed, len(sizes), 0),
                hh_init_seed=_derive_seed(hh_seed, len(sizes), 1),
            )
        self.layers = nn.ModuleDict(layers)

    @property
    def readout(self) -> LILayer | None:
        """The LI readout layer, or None when ``output_size`` is None."""
        return self.layers["readout"] if "readout" in self.layers else None

    @property
    def spiking_layers(self) -> list[RecurrentLayer]:
        """The spiking layers, input side first."""
        return [self.layers[k] for k in self.spiking_names]

    # ------------------------------------------------------------------ state
    def _per_layer(self, value: Any, name: str) -> list[Any]:
        """Spread a per-layer argument (None, sequence or mapping by layer name)."""
        names = list(self.layers)
        if value is None:
            return [None] * len(names)
        if isinstance(value, Mapping):
            unknown = set(value) - set(names)
            if unknown:
                raise UserError(f"{name} names unknown layers {sorted(unknown)} (use {names})")
            return [value.get(k) for k in names]
        if isinstance(value, Tensor):
            if len(self.spiking_names) != 1:
                raise UserError(
                    f"{name} is one tensor but there are {len(self.spiking_names)} spiking "
                    "layers (pass a dict {layer name: tensor})"
                )
            value = [value]
        value = list(value)
        if len(value) > len(names):
            raise UserError(f"{name} has {len(value)} entries for layers {names}")
        return value + [None] * (len(names) - len(value))

    def initial_state(
        self,
        batch_size: int,
        *,
        h0: Any = None,
        inputs: Tensor | None = None,
        device: torch.device | str | None = None,
    ) -> tuple:
        """A tuple of layer states, one per layer in order.

        Args:
            batch_size: B.
            h0: for layers with ``hh_init="given"``: a dict ``{layer name: (N,) or (B, N)}``,
                a sequence in layer order, or one tensor when there is one spiking layer.
            inputs: (B, input_size) observation for ``hh_init="inputs"``: the first layer's
                membrane is set from it; deeper layers see the spikes of the layer below,
                which start at 0, so their membrane starts at 0.
            device: where to put the state (default: the backbone's device).
        """
        return self._fresh(batch_size, h0, inputs, device)

    def _fresh(self, batch_size: int, h0: Any, inputs: Tensor | None, device: Any) -> tuple:
        h0s = self._per_layer(h0, "h0")
        states = []
        for k, (layer, h) in enumerate(zip(self.layers.values(), h0s)):
            inp = None
            if layer.hh_init == "inputs":
                if k == 0 or inputs is None:
                    inp = inputs
                else:
                    inp = torch.zeros(batch_size, layer.input_size, device=inputs.device)
            states.append(layer.initial_state(batch_size, h0=h, inputs=inp, device=device))
        return tuple(states)

    def reset_state(
        self, state: tuple, done: Tensor, *, h0: Any = None, inputs: Tensor | None = None
    ) -> tuple:
        """Re-initialize the rows where ``done`` (bool (B,)) is True, in every layer."""
        self._check_state(state)
        h0s = self._per_layer(h0, "h0")
        out = []
        for k, (layer, s, h) in enumerate(zip(self.layers.values(), state, h0s)):
            inp = None
            if layer.hh_init == "inputs" and inputs is not None:
                inp = inputs if k == 0 else torch.zeros_like(s[0][:, : layer.input_size])
            out.append(layer.reset_state(s, done, h0=h, inputs=inp))
        return tuple(out)

    def _check_state(self, state: Any) -> None:
        if not isinstance(state, tuple) or len(state) != len(self.layers):
            n = len(state) if isinstance(state, tuple) else type(state).__name__
            raise UserError(
                f"state has {n} parts but the backbone has {len(self.layers)} layers "
                "(use initial_state(batch_size))"
            )

    # ------------------------------------------------------------------ running
    def run(
        self, x: Tensor, state: tuple, *, starts: Tensor | None = None, fresh: Any = None
    ) -> BackboneOutput:
        """Run one step (x: (B, F)) or a sequence (x: (T, B, F)).

        Args:
            x: the input.
            state: the state before the first step (one per layer).
            starts: optional bool (T, B) for a sequence: row b starts an episode at step t
                and every layer's state before that step is replaced (one call, no cuts;
                see :meth:`snrl.layers.base.RecurrentLayer.run`).
            fresh: the replacement states, one per layer, fields broadcastable to (T, B, N)
                (default: each layer's :meth:`~snrl.layers.base.RecurrentLayer.reset_values`).

        Returns:
            ``BackboneOutput(out, state, activity)``; ``activity`` holds ``spikes`` and ``v``
            of each spiking layer and ``v`` of the readout, each shaped like ``out`` with
            that layer's width when ``substeps`` is 1; else with one row per neuron step:
            (substeps, B, N) for a one-step call, (T * substeps, B, N) for a sequence.
        """
        self._check_state(state)
        k = self.substeps
        if fresh is not None and (not isinstance(fresh, tuple) or len(fresh) != len(state)):
            raise UserError(
                f"fresh must hold one state per layer ({len(state)}), got {type(fresh).__name__}"
            )
        if k == 1 or x.dim() not in (2, 3):  # (a wrong shape is reported by the layer)
            return self._run_layers(x, state, starts, fresh)
        one_step = x.dim() == 2
        held, starts, (fresh,) = _hold(x, starts, [fresh], k)
        res = self._run_layers(held, state, starts, fresh)  # activity: (T k, B, N)
        out = res.out[k - 1 :: k]  # the output after the last sub-step of each input step
        return BackboneOutput(out[0] if one_step else out, res.state, res.activity)

    def _run_layers(
        self, x: Tensor, state: tuple, starts: Tensor | None = None, fresh: Any = None
    ) -> BackboneOutput:
        acts = []
        new_states = []
        h = x
        fresh = [None] * len(state) if fresh is None else fresh
        for (name, layer), s, f in zip(self.layers.items(), state, fresh):
            res = layer.run(h, s) if starts is None else layer.run(h, s, starts=starts, fresh=f)
            new_states.append(res.state)
            acts.append(layer_activity(name, layer, res))
            h = res.out
        return BackboneOutput(h, tuple(new_states), Activity(acts))

    def forward(self, x: Tensor, state: tuple) -> tuple[Tensor, tuple]:
        """``(out, new_state)``: :meth:`run` without the activity."""
        res = self.run(x, state)
        return res.out, res.state

    def layer_info(self) -> list[LayerInfo]:
        """Static description of each layer (sizes, fan-in/out, threshold, Dale sign)."""
        layers = list(self.layers.items())
        infos = []
        for k, (name, layer) in enumerate(layers):
            n = layer.output_size
            rec = 0
            if layer.use_recurrent_connection:
                rec = n - 1 if layer.use_rec_eye_mask else n
            nxt = layers[k + 1][1].output_size if k + 1 < len(layers) else 0
            spiking = name != "readout"
            sign = layer.recurrent_sign
            infos.append(
                LayerInfo(
                    name=name,
                    kind="spiking" if spiking else "readout",
                    size=n,
                    fan_in=layer.input_size,
                    fan_out=rec + nxt,
                    threshold=layer.threshold if spiking else None,
                    sign=None if sign is None else sign.detach().clone(),
                )
            )
        return infos


def layer_activity(name: str, layer: RecurrentLayer, res: LayerOutput) -> LayerActivity:
    """The :class:`LayerActivity` of layer ``name`` of a backbone (``"readout"``: the LI
    readout, no spikes) from its :meth:`~snrl.layers.base.RecurrentLayer.run` output."""
    spiking = name != "readout"
    return LayerActivity(
        name=name,
        kind="spiking" if spiking else "readout",
        size=layer.output_size,
        spikes=res.out if spiking else None,
        v=res.v,
        extra=dict(res.traces),
        threshold=layer.threshold if spiking else None,
        sign=layer.recurrent_sign,
    )


def _hold(
    x: Tensor, starts: Tensor | None, fresh: list[Any], k: int
) -> tuple[Tensor, Tensor | None, list[Any]]:
    """Inputs held for ``k`` neuron steps each; a reset applies before the first neuron step
    of its env step; recorded (T, B, N) fresh states are repeated alike."""
    one_step = x.dim() == 2
    held = (x.unsqueeze(0) if one_step else x).repeat_interleave(k, dim=0)
    if starts is None or one_step:
        return held, starts, fresh
    starts = torch.as_tensor(starts, device=x.device).bool()
    held_starts = starts.new_zeros((starts.shape[0] * k, *starts.shape[1:]))
    held_starts[::k] = starts
    fresh = [
        None
        if f is None
        else map_state(lambda t: t.repeat_interleave(k, dim=0) if t.dim() == 3 else t, f)
        for f in fresh
    ]
    return held, held_starts, fresh


def _same_surrogate(a: Any, b: Any) -> bool:
    return a is b or (isinstance(a, Surrogate) and a == b)


def _groupable(nets: Sequence[nn.Module]) -> bool:
    """Whether ``nets`` can run side by side in :func:`run_together`: LIF backbones with the
    same layer sizes, recurrence, threshold, reset, surrogate, substeps, device and dtype."""
    first = nets[0]
    if len(nets) < 2 or lif_module._lif_sequence is None:
        return False
    if not all(type(n) is SpikingBackbone and n.backbone == "lif" for n in nets):
        return False
    if any(layer.noise_on() for n in nets for layer in n.spiking_layers):
        return False  # current noise is drawn by each layer's run
    if any(n.substeps != first.substeps or n.n_layers != first.n_layers for n in nets):
        return False
    for k in range(first.n_layers):
        a = first.spiking_layers[k]
        for n in nets[1:]:
            b = n.spiking_layers[k]
            if type(a) is not LIFLayer or type(b) is not LIFLayer:
                return False
            same = (
                a.input_size == b.input_size
                and a.output_size == b.output_size
                and a.threshold == b.threshold
                and a.reset == b.reset
                and (a.weight_rec is None) == (b.weight_rec is None)
                and _same_surrogate(a.spike_grad, b.spike_grad)
                and a.weight_in.dtype == b.weight_in.dtype
                and a.weight_in.device == b.weight_in.device
            )
            if not same:
                return False
    return True


def run_together(
    nets: Sequence[nn.Module],
    x: Tensor,
    states: Sequence[tuple],
    *,
    starts: Tensor | None = None,
    fresh: Sequence[Any] | None = None,
) -> list[BackboneOutput] | None:
    """Run several LIF backbones of the same shape on the same input, their layers side by
    side: the spiking layers by
    :func:`~snrl.functional.lif_sequence.lif_sequence` on (T, G, B, N) (one batched product and one
    set of elementwise ops per step for all of them), the leaky-integrator readouts as one
    (their widths concatenated). PPO's policy and critic run this way in the update. (One
    env step at a time, as in the rollout, the stacking costs more than it saves: measured
    1.6x slower, so one-step inputs are not grouped.)

    Args:
        nets: the backbones.
        x: (T, B, F) the input sequence they all see.
        states: one state per backbone.
        starts: optional bool (T, B) episode starts (see :meth:`SpikingBackbone.run`).
        fresh: optional, one entry per backbone: its ``fresh`` of :meth:`SpikingBackbone.run`.

    Returns:
        One :class:`BackboneOutput` per backbone, equal to its own :meth:`SpikingBackbone.run`
        up to the rounding of the batched product; None when they cannot run together (then
        run each one by itself): other neuron models, sizes or settings, or a one-step input.
    """
    if x.dim() != 3 or not _groupable(nets):
        return None
    fresh = [None] * len(nets) if fresh is None else list(fresh)
    for net, s, f in zip(nets, states, fresh):
        net._check_state(s)
        if f is not None and (not isinstance(f, tuple) or len(f) != len(s)):
            raise UserError(
                f"fresh must hold one state per layer ({len(s)}), got {type(f).__name__}"
            )
    k = nets[0].substeps
    if starts is not None:
        starts = torch.as_tensor(starts, device=x.device).bool()
        if not bool(starts.any()):
            starts = None
    held, starts, fresh = (x, starts, fresh) if k == 1 else _hold(x, starts, fresh, k)
    h = held
    new_states: list[list[Any]] = [[] for _ in nets]
    outs_per_layer: list[list[tuple[str, RecurrentLayer, LayerOutput]]] = [[] for _ in nets]
    outs: list[LayerOutput] = []
    for i in range(nets[0].n_layers):
        layers = [n.spiking_layers[i] for n in nets]
        h, outs = _run_lif_group(
            layers,
            h,
            [s[i] for s in states],
            starts,
            [None if f is None else f[i] for f in fresh],
        )
        for g, (net, res) in enumerate(zip(nets, outs)):
            new_states[g].append(res.state)
            outs_per_layer[g].append((net.spiking_names[i], layers[g], res))
    hs = [res.out for res in outs]
    readouts = [n.readout for n in nets]
    if any(r is not None for r in readouts):
        if _li_groupable(readouts):
            r_outs = _run_li_group(readouts, hs, [s[-1] for s in states], starts, fresh)
        else:
            r_outs = [
                r.run(h, s[-1])
                if starts is None
                else r.run(h, s[-1], starts=starts, fresh=None if f is None else f[-1])
                for r, h, s, f in zip(readouts, hs, states, fresh)
            ]
        for g, res in enumerate(r_outs):
            new_states[g].append(res.state)
            outs_per_layer[g].append(("readout", readouts[g], res))
            hs[g] = res.out
    results = []
    for g in range(len(nets)):
        acts = [layer_activity(name, layer, res) for name, layer, res in outs_per_layer[g]]
        out = hs[g] if k == 1 else hs[g][k - 1 :: k]
        results.append(BackboneOutput(out, tuple(new_states[g]), Activity(acts)))
    return results


def _li_groupable(readouts: list[Any]) -> bool:
    first = readouts[0]
    return (
        all(
            type(r) is LILayer
            and r.weight_rec is None
            and r.weight_in.dtype == first.weight_in.dtype
            and r.weight_in.device == first.weight_in.device
            for r in readouts
        )
        and li_module._li_sequence is not None
    )


def _run_li_group(
    readouts: list[LILayer],
    hs: list[Tensor],
    states: list[Any],
    starts: Tensor | None,
    fresh: list[Any],
) -> list[LayerOutput]:
    """Leaky-integrator readouts without recurrence (elementwise per neuron) as one layer of
    their widths concatenated."""
    states = [r.check_state(h, s) for r, h, s in zip(readouts, hs, states)]
    us = [r._project(h) for r, h in zip(readouts, hs)]
    u = torch.cat(us, dim=-1)
    alpha = torch.cat([r.decay("tau_m") for r in readouts])
    v0 = torch.cat([s.v for s in states], dim=-1)
    seq_fresh = None
    if starts is not None:
        default = all(f is None and r.hh_init == "zeros" for r, f in zip(readouts, fresh))
        if not default:
            seq_fresh = torch.cat(
                [
                    r.fresh_sequence(u_r, starts, None if f is None else f[-1]).v
                    for r, u_r, f in zip(readouts, us, fresh)
                ],
                dim=-1,
            )
    v = li_module._li_sequence(u, v0, alpha, starts=starts, fresh=seq_fresh)
    outs, lo = [], 0
    for r in readouts:
        part = v[..., lo : lo + r.output_size]
        lo += r.output_size
        outs.append(LayerOutput(part, LIState(part[-1]), part))
    return outs


def _run_lif_group(
    layers: list[LIFLayer],
    h: Tensor,
    states: list[Any],
    starts: Tensor | None,
    fresh: list[Any],
) -> tuple[Tensor, list[LayerOutput]]:
    """One spiking layer of each backbone, side by side (same sizes and settings), on ``h``:
    one (T, B, F) input for all of them or (T, G, B, F), one per layer. Returns the spikes
    (T, G, B, N) and each layer's output."""
    grouped = h.dim() == 4
    states = [
        layer.check_state(h[:, g] if grouped else h, s)
        for g, (layer, s) in enumerate(zip(layers, states))
    ]
    n_groups = len(layers)
    t, b, f = h.shape[0], h.shape[-2], h.shape[-1]
    w_in = torch.stack([layer.forward_weights for layer in layers])  # (G, F, N)
    bias = torch.stack([layer.bias for layer in layers])  # (G, N)
    if grouped:
        rows = h.transpose(0, 1).reshape(n_groups, t * b, f)
    else:
        rows = h.reshape(1, t * b, f).expand(n_groups, t * b, f)
    u = torch.baddbmm(bias.unsqueeze(1), rows, w_in).reshape(n_groups, t, b, -1).transpose(0, 1)
    first = layers[0]
    w = None
    if first.weight_rec is not None:
        w = torch.stack([layer._rec_weights() for layer in layers])
    alpha = torch.stack([layer.decay("tau_m") for layer in layers])
    state = LIFState(torch.stack([s.v for s in states]), torch.stack([s.z for s in states]))
    seq_fresh = None
    if starts is not None:
        default = all(f is None and layer.hh_init == "zeros" for layer, f in zip(layers, fresh))
        if not default:  # zeros is the kernel's own default
            per = [
                layer.fresh_sequence(u[:, g], starts, f)
                for g, (layer, f) in enumerate(zip(layers, fresh))
            ]
            seq_fresh = LIFState(
                torch.stack([p.v for p in per], dim=1), torch.stack([p.z for p in per], dim=1)
            )
    z, v = lif_sequence(
        u,
        w,
        state,
        alpha,
        first.threshold,
        first.reset,
        first._spike_fn(),
        starts=starts,
        fresh=seq_fresh,
    )
    outs = [LayerOutput(z[:, g], LIFState(v[-1, g], z[-1, g]), v[:, g]) for g in range(n_groups)]
    return z, outs
