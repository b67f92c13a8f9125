"""snntorch networks as snrl backbones, and snrl backbones as snntorch networks.

:func:`from_snntorch` wraps a user's snntorch network into snrl's recurrent protocol
(:mod:`snrl.networks.protocol`): one hidden state per env, swapped into the snntorch neurons
for each step and read back after it, re-initialized per finished env, and the activity of
every neuron layer recorded for the renderer and the analyses. The neurons run their own
``forward``, so the wrapped network computes exactly what snntorch computes.

Two kinds of network are taken:

- an ``nn.Sequential`` of ``nn.Linear`` and ``snn.Leaky`` / ``snn.RLeaky`` / ``snn.Synaptic`` /
  ``snn.RSynaptic`` (``init_hidden=True``, snntorch's convention for stateful stacks, or
  ``False``: the wrapper sets the state either way). The first module is an ``nn.Linear``
  (it gives the input size); a final ``snn.Leaky(reset_mechanism="none")`` is a leaky-integrator
  readout whose membrane is the output;
- any other ``nn.Module`` with explicit state (its neurons built with ``init_hidden=False``)
  that follows this protocol::

      state = module.initial_state(batch_size)   # a tuple of (B, ...) tensors (zeros, usually)
      out, state = module(x, state)              # x: (B, F) one step; out: (B, O)

  Its neurons' spikes and membranes are recorded by forward hooks.

:func:`to_snntorch` goes the other way: a :class:`~snrl.networks.spiking.SpikingBackbone` of LIF
or SpyLIF layers becomes an ``nn.Sequential`` that snntorch runs to the same spikes (the
equations side by side in ``docs/interop.md``).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any, NamedTuple

import snntorch as snn
import torch
from torch import Tensor, nn

from snrl.config import NEURON_DEFAULTS
from snrl.errors import UserError
from snrl.functional.state import map_state, mask_state
from snrl.layers import LILayer, LIParameters
from snrl.networks.activity import Activity, LayerActivity
from snrl.networks.protocol import BackboneOutput, LayerInfo

__all__ = ["SnntorchBackbone", "from_snntorch", "module_backbone", "to_snntorch"]


class LeakyState(NamedTuple):
    """State of a wrapped ``snn.Leaky`` layer."""

    mem: Tensor
    """(B, N) membrane potential."""


class RLeakyState(NamedTuple):
    """State of a wrapped ``snn.RLeaky`` layer."""

    spk: Tensor
    """(B, N) spikes of the last step (the recurrent input)."""
    mem: Tensor
    """(B, N) membrane potential."""


class SynapticState(NamedTuple):
    """State of a wrapped ``snn.Synaptic`` layer."""

    syn: Tensor
    """(B, N) synaptic current."""
    mem: Tensor
    """(B, N) membrane potential."""


class RSynapticState(NamedTuple):
    """State of a wrapped ``snn.RSynaptic`` layer."""

    spk: Tensor
    """(B, N) spikes of the last step (the recurrent input)."""
    syn: Tensor
    """(B, N) synaptic current."""
    mem: Tensor
    """(B, N) membrane potential."""


torch.serialization.add_safe_globals([LeakyState, RLeakyState, SynapticState, RSynapticState])

#: the snntorch neurons taken, and the state each one carries. (Exact class match: a
#: subclass may change the state it keeps.)
NEURON_STATES: dict[type, type] = {
    snn.Leaky: LeakyState,
    snn.RLeaky: RLeakyState,
    snn.Synaptic: SynapticState,
    snn.RSynaptic: RSynapticState,
}
SUPPORTED = "nn.Linear, snn.Leaky, snn.RLeaky, snn.Synaptic, snn.RSynaptic"


def _describe(module: nn.Module) -> str:
    cls = type(module)
    prefix = "snn." if cls.__module__.startswith("snntorch") else f"{cls.__module__}."
    return prefix + cls.__name__


def _is_li(module: nn.Module) -> bool:
    """A ``snn.Leaky`` without reset: a leaky integrator (the readout of :func:`to_snntorch`)."""
    return type(module) is snn.Leaky and module.reset_mechanism == "none"


def _scalar(t: Tensor) -> float | None:
    """The value of a tensor whose entries are all equal, else None."""
    t = t.detach()
    return float(t.reshape(-1)[0]) if t.numel() and bool((t == t.reshape(-1)[0]).all()) else None


class _Layer(NamedTuple):
    """One neuron layer of the wrapped network, as the activity and layer_info report it."""

    name: str
    kind: str  # "spiking" or "readout"
    module: nn.Module
    size: int
    fan_in: int


class SnntorchBackbone(nn.Module):
    """A user's snntorch network behind snrl's recurrent protocol (see :func:`from_snntorch`).

    State: a tuple with one entry per neuron layer (``LeakyState``, ``RLeakyState``,
    ``SynapticState``, ``RSynapticState``) for an ``nn.Sequential``, or the module's own tuple
    for an explicit-state module; then the readout's state when ``output_size`` is given.

    Shape:
        ``forward(x, state)``: x (B, F) or (T, B, F) -> out (B, O) or (T, B, O); a sequence
        runs step by step (snntorch's neurons are one-step modules).
    """

    backbone = "snntorch"
    """The model's name in figures and trajectories (as ``SpikingBackbone.backbone``)."""

    def __init__(
        self,
        module: nn.Module,
        output_size: int | None = None,
        *,
        input_size: int | None = None,
        readout_tau_m: float = NEURON_DEFAULTS["readout_tau_m"],
        dt: float = NEURON_DEFAULTS["dt"],
        seed: int | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(module, nn.Module):
            raise UserError(
                f"from_snntorch needs an nn.Module, got {type(module).__name__} (pass your "
                "snntorch network)"
            )
        self.module = module
        self.sequential = isinstance(module, nn.Sequential)
        if self.sequential:
            self.input_size, width, self._layers = _sequential_layers(module)
        else:
            self.input_size, width, self._layers = _explicit_layers(module, input_size)
        self.readout = None
        if output_size is not None:
            self.readout = LILayer(
                width,
                int(output_size),
                params=LIParameters(dt=dt, tau_m=readout_tau_m),
                seed=seed,
                hh_init_seed=seed,
            )
        self.output_size = width if output_size is None else int(output_size)

        self._readout_args = {"readout_tau_m": readout_tau_m, "dt": dt}

    def with_readout(
        self,
        output_size: int,
        *,
        copy_module: bool = False,
        seed: int | None = None,
        gain: float = 1.0,
    ) -> SnntorchBackbone:
        """The same network with a new readout of ``output_size`` (an independent copy of
        the snntorch module when ``copy_module``: a critic beside a policy), its initial
        weights scaled by ``gain`` (PPO's policy: 0.1, a near-uniform first policy, as for
        its built-in backbones)."""
        module = copy.deepcopy(self.module) if copy_module else self.module
        net = SnntorchBackbone(
            module, output_size, input_size=self.input_size, seed=seed, **self._readout_args
        )
        with torch.no_grad():
            net.readout.weight_in.mul_(gain)
        return net

    # ------------------------------------------------------------------ state
    def _device(self) -> torch.device:
        p = next(self.module.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    def initial_state(
        self, batch_size: int, *, device: torch.device | str | None = None, **_: Any
    ) -> tuple:
        """Zeros: one state per neuron layer (or the module's own), then the readout's."""
        device = self._device() if device is None else torch.device(device)
        if self.sequential:
            states = [
                NEURON_STATES[type(layer.module)](
                    *(
                        torch.zeros(batch_size, layer.size, device=device)
                        for _ in NEURON_STATES[type(layer.module)]._fields
                    )
                )
                for layer in self._layers
            ]
            inner: Any = tuple(states)
        else:
            inner = _check_explicit_state(self.module.initial_state(batch_size), batch_size)
            inner = map_state(lambda t: t.to(device), inner)
        if self.readout is None:
            return (inner,)
        return (inner, self.readout.initial_state(batch_size, device=device))

    def reset_state(self, state: tuple, done: Tensor, **_: Any) -> tuple:
        """Re-initialize the rows where ``done`` (bool (B,)) is True."""
        self._check_state(state)
        fresh = self.initial_state(int(done.shape[0]), device=done.device)
        return mask_state(done, fresh, state)

    def _check_state(self, state: Any) -> None:
        n = 1 if self.readout is None else 2
        if not isinstance(state, tuple) or len(state) != n:
            raise UserError(
                f"state is a {type(state).__name__}, not this backbone's state (use "
                "initial_state(batch_size))"
            )

    # ------------------------------------------------------------------ running
    def run(self, x: Tensor, state: tuple) -> BackboneOutput:
        """One step (x: (B, F)) or a sequence (x: (T, B, F)), step by step.

        Returns:
            ``BackboneOutput(out, state, activity)``: ``spikes`` and ``v`` (the membrane;
            ``extra["i"]``, the synaptic current, for Synaptic layers) of every neuron layer,
            and ``v`` of the readout, each (B, N) or (T, B, N).
        """
        self._check_state(state)
        if x.dim() not in (2, 3) or x.shape[-1] != self.input_size:
            raise ValueError(
                f"input of shape {tuple(x.shape)} does not match input_size={self.input_size} "
                "(expected (B, F) or (T, B, F))"
            )
        inner = state[0]
        seq = x if x.dim() == 3 else x.unsqueeze(0)
        outs: list[Tensor] = []
        records: list[list[tuple[Tensor, Tensor, Tensor | None]]] = [[] for _ in self._layers]
        watch = contextlib.nullcontext({}) if self.sequential else self._watch()
        try:
            with watch as seen:  # explicit state: hooks on the neurons, once per call
                for t in range(seq.shape[0]):
                    if self.sequential:
                        out, inner, rec = self._sequential_step(seq[t], inner)
                    else:
                        out, inner, rec = self._explicit_step(seq[t], inner, seen)
                    outs.append(out)
                    for k, r in enumerate(rec):
                        records[k].append(r)
        finally:
            if self.sequential:
                _clear(self._layers)
        h = torch.stack(outs)
        acts = [_activity(layer, recs) for layer, recs in zip(self._layers, records)]
        new_state: tuple = (inner,)
        if self.readout is not None:
            res = self.readout.run(h, state[1])
            h = res.out
            new_state = (inner, res.state)
            acts.append(
                LayerActivity(
                    name="readout",
                    kind="readout",
                    size=self.readout.output_size,
                    v=res.v,
                )
            )
        if x.dim() == 2:
            h = h[0]
            acts = [_first(a) for a in acts]
        return BackboneOutput(h, new_state, Activity(acts))

    def _sequential_step(self, x: Tensor, state: tuple) -> tuple[Tensor, tuple, list]:
        """One step through the Sequential: each neuron's state set, its forward run, read."""
        h = x
        new, rec = [], []
        k = 0
        for m in self.module:
            if isinstance(m, nn.Linear):
                h = m(h)
                continue
            layer, s = self._layers[k], state[k]
            for field, value in zip(s._fields, s):
                setattr(m, field, value)
            res = m(h)
            spk = res[0] if isinstance(res, tuple) else res
            s_new = type(s)(*(getattr(m, f) for f in s._fields))
            new.append(s_new)
            syn = getattr(s_new, "syn", None)
            rec.append((spk, s_new.mem, syn))
            h = s_new.mem if layer.kind == "readout" else spk
            k += 1
        return h, tuple(new), rec

    @contextlib.contextmanager
    def _watch(self) -> Iterator[dict[int, tuple[Tensor, Tensor, Tensor | None]]]:
        """Forward hooks on the neuron layers while the block runs: each records its
        (spikes, membrane, synaptic current) of the step in the dict yielded."""
        seen: dict[int, tuple[Tensor, Tensor, Tensor | None]] = {}

        def hook(mod: nn.Module, _inp: Any, res: Any) -> None:
            spk = res[0] if isinstance(res, tuple) else res
            seen[id(mod)] = (spk, mod.mem, getattr(mod, "syn", None))

        handles = [layer.module.register_forward_hook(hook) for layer in self._layers]
        try:
            yield seen
        finally:
            for h in handles:
                h.remove()

    def _explicit_step(
        self, x: Tensor, state: Any, seen: dict[int, tuple[Tensor, Tensor, Tensor | None]]
    ) -> tuple[Tensor, Any, list]:
        seen.clear()  # what the hooks of :meth:`_watch` record in this step
        res = self.module(x, state)
        if not (isinstance(res, tuple) and len(res) == 2):
            raise UserError(
                f"{type(self.module).__name__}.forward(x, state) returned "
                f"{type(res).__name__}, not (out, state) (see snrl.networks.from_snntorch)"
            )
        out, new = res
        missing = [layer.name for layer in self._layers if id(layer.module) not in seen]
        if missing:
            raise UserError(
                f"{type(self.module).__name__}: the neuron layers {missing} did not run in "
                "this step (every neuron must run once per step)"
            )
        return out, new, [seen[id(layer.module)] for layer in self._layers]

    def forward(self, x: Tensor, state: tuple) -> tuple[Tensor, tuple]:
        """``(out, new_state)``: :meth:`run` without the activity."""
        res = self.run(x, state)
        return res.out, res.state

    def layer_info(self) -> list[LayerInfo]:
        """Static description of each neuron layer (and of the readout)."""
        infos = []
        layers = list(self._layers)
        for k, layer in enumerate(layers):
            rec = layer.size if type(layer.module) in (snn.RLeaky, snn.RSynaptic) else 0
            last = list(self.module)[-1] if self.sequential else None
            if k + 1 < len(layers):
                nxt = layers[k + 1].size
            elif isinstance(last, nn.Linear):  # a final nn.Linear after the last neurons
                nxt = last.out_features
            else:
                nxt = self.readout.output_size if self.readout is not None else 0
            thr = _scalar(layer.module.threshold)
            infos.append(
                LayerInfo(
                    name=layer.name,
                    kind=layer.kind,
                    size=layer.size,
                    fan_in=layer.fan_in,
                    fan_out=rec + nxt,
                    threshold=thr if layer.kind == "spiking" else None,
                    sign=None,
                )
            )
        if self.readout is not None:
            r = self.readout
            infos.append(
                LayerInfo("readout", "readout", r.output_size, r.input_size, 0, None, None)
            )
        return infos


def _first(act: LayerActivity) -> LayerActivity:
    """The activity of a one-step call: (1, B, N) arrays as (B, N)."""

    def one(a: Any) -> Any:
        return None if a is None else a[0]

    return LayerActivity(
        name=act.name,
        kind=act.kind,
        size=act.size,
        spikes=one(act.spikes),
        v=one(act.v),
        extra={k: one(v) for k, v in act.extra.items()},
        threshold=act.threshold,
        sign=act.sign,
    )


def _activity(layer: _Layer, recs: list[tuple[Tensor, Tensor, Tensor | None]]) -> LayerActivity:
    spikes = torch.stack([r[0] for r in recs])
    v = torch.stack([r[1] for r in recs])
    extra = {}
    if recs and recs[0][2] is not None:
        extra["i"] = torch.stack([r[2] for r in recs])
    if layer.kind == "readout":
        return LayerActivity(name=layer.name, kind="readout", size=layer.size, v=v)
    return LayerActivity(
        name=layer.name,
        kind="spiking",
        size=layer.size,
        spikes=spikes,
        v=v,
        extra=extra,
        threshold=_scalar(layer.module.threshold),
    )


def _clear(layers: list[_Layer]) -> None:
    """Leave no state (and no autograd graph) on the snntorch neurons after a call."""
    for layer in layers:
        for field in NEURON_STATES[type(layer.module)]._fields:
            setattr(layer.module, field, torch.zeros(0, device=getattr(layer.module, field).device))


def _refuse(module: nn.Module, where: str) -> UserError:
    return UserError(
        f"{_describe(module)} {where} is not supported by from_snntorch (supported: "
        f"{SUPPORTED}; a recurrent layer needs all_to_all=True with linear_features, or "
        "all_to_all=False)"
    )


def _check_neuron(m: nn.Module, where: str) -> None:
    if type(m) not in NEURON_STATES:
        raise _refuse(m, where)
    if type(m) in (snn.RLeaky, snn.RSynaptic) and m.all_to_all and not m.linear_features:
        raise _refuse(m, where)


def _sequential_layers(module: nn.Sequential) -> tuple[int, int, list[_Layer]]:
    mods = list(module.named_children())
    if not mods or not isinstance(mods[0][1], nn.Linear):
        first = _describe(mods[0][1]) if mods else "nothing"
        raise UserError(
            f"from_snntorch: the nn.Sequential starts with {first} (start it with an "
            "nn.Linear: it gives the input size)"
        )
    input_size = mods[0][1].in_features
    width = input_size
    layers: list[_Layer] = []
    fan_in = input_size
    for i, (name, m) in enumerate(mods):
        where = f"at index {i} of the nn.Sequential"
        if isinstance(m, nn.Linear):
            if m.in_features != width:
                raise UserError(
                    f"nn.Linear {where} takes {m.in_features} inputs but receives {width} "
                    "(fix the layer sizes)"
                )
            fan_in, width = width, m.out_features
            continue
        _check_neuron(m, where)
        readout = _is_li(m)
        if readout and i != len(mods) - 1:
            raise UserError(
                f"snn.Leaky(reset_mechanism='none') {where} is a readout and must come last "
                "(give hidden neurons a reset mechanism)"
            )
        label = type(m).__name__.lower()
        layers.append(
            _Layer(
                f"{label}{name}" if name.isdigit() else name,
                "readout" if readout else "spiking",
                m,
                width,
                fan_in,
            )
        )
        fan_in = width
    return input_size, width, layers


def _explicit_layers(module: nn.Module, input_size: int | None) -> tuple[int, int, list[_Layer]]:
    init = getattr(module, "initial_state", None)
    if not callable(init):
        raise UserError(
            f"{_describe(module)} is neither an nn.Sequential nor an explicit-state module "
            "(give it initial_state(batch_size) and forward(x, state) -> (out, state), or "
            "build an nn.Sequential with init_hidden=True neurons)"
        )
    neurons = []
    for name, m in module.named_modules():
        if isinstance(m, snn.SpikingNeuron):
            _check_neuron(m, f"({name!r} of {type(module).__name__})")
            if m.init_hidden:
                raise UserError(
                    f"{name!r} of {type(module).__name__} has init_hidden=True, so its state "
                    "would live on the module (build it with init_hidden=False and pass its "
                    "state through forward(x, state))"
                )
            neurons.append((name.replace(".", "_"), m))
    if input_size is None:
        first = next((m for m in module.modules() if isinstance(m, nn.Linear)), None)
        if first is None:
            raise UserError(
                f"cannot tell the input size of {type(module).__name__} (pass input_size=)"
            )
        input_size = first.in_features
    # one probe step, to learn each neuron layer's width and the output width
    sizes: dict[int, int] = {}

    def hook(mod: nn.Module, _inp: Any, res: Any) -> None:
        spk = res[0] if isinstance(res, tuple) else res
        sizes[id(mod)] = int(spk.shape[-1])

    handles = [m.register_forward_hook(hook) for _, m in neurons]
    p = next(module.parameters(), None)
    try:
        with torch.no_grad():
            state = _check_explicit_state(module.initial_state(1), 1)
            x = torch.zeros(1, input_size, device=None if p is None else p.device)
            res = module(x, state)
    except UserError:
        raise
    except Exception as e:
        raise UserError(
            f"{type(module).__name__} failed on one step of {input_size} inputs: "
            f"{type(e).__name__}: {e} (forward(x, state) must take x (B, {input_size}))"
        ) from e
    finally:
        for h in handles:
            h.remove()
    if not (isinstance(res, tuple) and len(res) == 2 and isinstance(res[0], Tensor)):
        raise UserError(
            f"{type(module).__name__}.forward(x, state) must return (out, state), got "
            f"{type(res).__name__}"
        )
    layers = []
    prev = input_size
    for name, m in neurons:
        if id(m) not in sizes:
            raise UserError(f"{name!r} of {type(module).__name__} did not run in one step")
        n = sizes[id(m)]
        layers.append(_Layer(name, "readout" if _is_li(m) else "spiking", m, n, prev))
        prev = n
    return input_size, int(res[0].shape[-1]), layers


def _check_explicit_state(state: Any, batch_size: int) -> tuple:
    bad = not isinstance(state, tuple) or not all(
        isinstance(t, Tensor) and t.dim() >= 1 and t.shape[0] == batch_size for t in state
    )
    if bad:
        raise UserError(
            "initial_state(batch_size) must return a tuple of tensors with the batch first, "
            f"(B, ...), got {type(state).__name__} for B={batch_size}"
        )
    return state


def from_snntorch(
    module: nn.Module, output_size: int | None = None, **options: Any
) -> SnntorchBackbone:
    """Wrap a snntorch network into snrl's recurrent protocol.

    Args:
        module: an ``nn.Sequential`` of ``nn.Linear`` and ``snn.Leaky`` / ``snn.RLeaky`` /
            ``snn.Synaptic`` / ``snn.RSynaptic`` layers, or an explicit-state module
            (``initial_state(batch_size)`` and ``forward(x, state) -> (out, state)``; see the
            module docstring). Used as given (not copied): training changes its weights.
        output_size: width of an snrl leaky-integrator readout (an
            :class:`~snrl.layers.LILayer`, named ``"readout"``) put after the network (logits,
            Q-values, a value); None: the network's own output is the output.
        **options: keyword-only, :class:`SnntorchBackbone`'s: ``input_size`` (observation
            features, for an explicit-state module without an ``nn.Linear``; default: the
            first ``nn.Linear``'s ``in_features``), ``readout_tau_m`` (membrane time constant
            of the readout, seconds), ``dt`` (time step of the readout, seconds), ``seed``
            (seed of the readout's weights; None: from the global torch RNG).

    Returns:
        A :class:`SnntorchBackbone`.

    Raises:
        UserError: a module that is not supported, named with its position.
    """
    return SnntorchBackbone(module, output_size, **options)


def module_backbone(
    overrides: dict[str, Any], policy: Any = None, critic: Any = None
) -> SnntorchBackbone | None:
    """``backbone=<an nn.Module>`` of ``snrl.PPO`` / ``snrl.DQN``: taken out of the keyword
    ``overrides`` and wrapped by :func:`from_snntorch` (without a readout: the algorithm adds
    the readouts it needs with :meth:`SnntorchBackbone.with_readout`). None when
    ``backbone`` is a name or not given."""
    module = overrides.get("backbone")
    if not isinstance(module, nn.Module):
        return None
    if policy is not None or critic is not None:
        raise UserError("backbone=<an nn.Module> and policy=/critic= both given (pass one of them)")
    del overrides["backbone"]
    return from_snntorch(module)


# ---------------------------------------------------------------------------- snrl -> snntorch
def _linear(w: Tensor, b: Tensor | None) -> nn.Linear:
    """An ``nn.Linear`` computing ``x @ w + b`` (``w`` is snrl's (in, out), row = presynaptic)."""
    lin = nn.Linear(w.shape[0], w.shape[1], bias=b is not None)
    with torch.no_grad():
        lin.weight.copy_(w.detach().t())
        if b is not None:
            lin.bias.copy_(b.detach())
    return lin.to(w.dtype)


def _snntorch_neuron(layer: nn.Module, kind: str, dtype: torch.dtype) -> nn.Module:
    p = layer.params
    rec = layer.weight_rec is not None
    n = layer.output_size
    if p.reset == "zero" and (rec or kind == "spylif"):
        raise UserError(
            f"to_snntorch: reset='zero' in a {'recurrent ' if rec else ''}{kind} layer has no "
            "snntorch equivalent (snntorch's RLeaky, Synaptic and RSynaptic zero the whole "
            "update, input included, on a spike); use reset='subtract'"
        )
    beta = layer.decay("tau_m").detach().clone()
    common = dict(
        threshold=float(p.threshold),
        spike_grad=layer.spike_grad,
        reset_mechanism=p.reset,
        init_hidden=True,
    )
    if kind == "lif":
        if rec:
            m = snn.RLeaky(beta=beta, all_to_all=True, linear_features=n, **common)
        else:
            m = snn.Leaky(beta=beta, **common)
    else:
        alpha = layer.decay("tau_syn").detach().clone()
        if rec:
            m = snn.RSynaptic(alpha=alpha, beta=beta, all_to_all=True, linear_features=n, **common)
        else:
            m = snn.Synaptic(alpha=alpha, beta=beta, **common)
    m = m.to(dtype)
    if rec:
        with torch.no_grad():
            m.recurrent.weight.copy_(layer.recurrent_weights.detach().t())
            m.recurrent.bias.zero_()
    return m


def to_snntorch(backbone: nn.Module) -> nn.Sequential:
    """An ``nn.Sequential`` that snntorch runs to the same spikes as ``backbone``.

    Each LIF layer becomes ``nn.Linear`` (its input weights, transposed to snntorch's
    (out, in), with its bias) then ``snn.RLeaky(all_to_all=True)`` (recurrent weights
    transposed, recurrent bias 0) or ``snn.Leaky`` without recurrence; SpyLIF becomes
    ``snn.RSynaptic`` / ``snn.Synaptic``. (``reset="zero"`` maps only for a LIF layer
    without recurrence: snntorch's recurrent and synaptic neurons zero the input too.)
    ``beta = exp(-dt / tau_m)`` per neuron (``alpha = exp(-dt / tau_syn)``), the same
    threshold, reset and surrogate. Dale signs and the no-autapse mask are folded into the
    weights (the effective weights are copied). The
    LI readout becomes ``nn.Linear`` + ``snn.Leaky(reset_mechanism="none", output=True)``:
    the Sequential then returns ``(spikes, membrane)`` and the membrane is the output.

    Args:
        backbone: a :class:`~snrl.networks.spiking.SpikingBackbone` of ``lif`` or ``spylif``
            layers, or a :class:`SnntorchBackbone` (its module, copied).

    Returns:
        A new ``nn.Sequential`` with ``init_hidden=True`` neurons (weights copied; the
        backbone is not changed).

    Raises:
        UserError: ALIF layers (snntorch has no adaptive-threshold neuron), a zero reset
            that snntorch computes differently (above), ``substeps`` > 1,
            a hidden-state init other than zeros, a recurrent readout, or another backbone.
    """
    from snrl.networks.spiking import SpikingBackbone

    if isinstance(backbone, SnntorchBackbone):
        if backbone.readout is not None:
            raise UserError(
                "to_snntorch: this wrapped network has an snrl readout (wrap it without "
                "output_size=, or convert the snntorch module itself)"
            )
        return copy.deepcopy(backbone.module)
    if type(backbone) is not SpikingBackbone:
        raise UserError(
            f"to_snntorch takes a SpikingBackbone, got {type(backbone).__name__} (an encoder, "
            "an ANN or a custom backbone has no snntorch equivalent here)"
        )
    if backbone.backbone not in ("lif", "spylif"):
        raise UserError(
            f"to_snntorch: {backbone.backbone} layers have no snntorch neuron (snntorch has no "
            "adaptive-threshold LIF); use backbone='lif' or 'spylif'"
        )
    if backbone.substeps != 1:
        raise UserError(
            f"to_snntorch: substeps={backbone.substeps} (snntorch runs one neuron step per "
            "input; build the backbone with substeps=1)"
        )
    mods: list[nn.Module] = []
    for name, layer in backbone.layers.items():
        if layer.hh_init != "zeros":
            raise UserError(
                f"to_snntorch: layer {name} has hh_init={layer.hh_init!r} (snntorch starts "
                "from zeros; use hh_init='zeros')"
            )
        dtype = layer.weight_in.dtype
        mods.append(_linear(layer.forward_weights, layer.bias))
        if name == "readout":
            if layer.weight_rec is not None:
                raise UserError("to_snntorch: a recurrent readout has no snntorch equivalent")
            li = snn.Leaky(
                beta=layer.decay("tau_m").detach().clone(),
                reset_mechanism="none",
                init_hidden=True,
                output=True,
            )
            mods.append(li.to(dtype))
        else:
            mods.append(_snntorch_neuron(layer, backbone.backbone, dtype))
    return nn.Sequential(*mods).to(backbone.layers[name].weight_in.device)
