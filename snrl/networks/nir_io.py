r"""NIR (the Neuromorphic Intermediate Representation) out of and into snrl.

:func:`to_nir` writes a :class:`~snrl.networks.spiking.SpikingBackbone` as a ``nir.NIRGraph``
with ``nir`` alone; :func:`from_nir` builds the backbone back from such a graph (one written
by snrl, or by another tool with the same nodes). Install the extra: ``pip install snrl[nir]``.

From the discrete update to NIR's ODEs
--------------------------------------

snrl integrates its neurons in discrete steps of ``dt`` seconds (equations in
:mod:`snrl.functional.neurons`), e.g. ``v_t = alpha v_{t-1} + I_t`` with
``alpha = exp(-dt / tau_m)``. NIR states each neuron as a continuous ODE, e.g. the LI and LIF
membrane ``tau dv/dt = (v_leak - v) + r I``. Simulators that read NIR (snntorch, Norse, ...)
integrate it with forward Euler at a step ``dt``::

    v_t = (1 - dt / tau) v_{t-1} + (dt r / tau) I_t + (dt / tau) v_leak

which is snrl's update exactly when ``tau = dt / (1 - alpha)``, ``r = tau / dt`` and
``v_leak = 0``. So these are the parameters written, and ``dt`` is stored in the graph's
metadata (``graph.metadata["dt"]``, seconds): run the graph at that step. (``tau`` is then
``dt / (1 - exp(-dt / tau_m))``, about ``tau_m + dt / 2``: the time constant of the Euler
ODE, not snrl's ``tau_m``.) The synaptic current of SpyLIF (``i_t = alpha_syn i_{t-1} + I_t``)
maps the same way onto CubaLIF's ``tau_syn dI/dt = -I + w_in S`` with
``tau_syn = dt / (1 - alpha_syn)`` and ``w_in = tau_syn / dt``. :func:`parameter_table`
prints the mapping (docs/interop.md holds its output).

Resets. NIR's LIF and CubaLIF reset the membrane to ``v_reset`` at the spike; snrl's
``reset="zero"`` zeroes it before the next step, which gives the same spikes: such a layer is
written as ``LIF`` / ``CubaLIF`` with ``v_reset = 0``. snrl's ``reset="subtract"`` (the
default) subtracts ``threshold z_{t-1}`` in the next step; NIR has no subtractive reset, so
such a layer is written as its parts, which NIR has: an ``LI`` (``CubaLI``) membrane, a
``Threshold`` node for the spikes, and the reset as a self-connection of weight
``-threshold`` on the diagonal of the recurrent ``Linear`` (a cycle in the edge list, one
step of delay, as all recurrence). ALIF has no NIR primitive (NIR has no adaptive threshold):
it is refused.

Graph layout, for layers ``lif0, lif1, ...`` and the readout::

    input -> lif0_in (Affine) -> lif0 (LIF, or LI -> lif0_spikes (Threshold))
          -> lif0_rec (Linear) -> lif0                        (the recurrent cycle)
          -> lif1_in (Affine) -> ... -> readout_in (Affine) -> readout (LI) -> output

Weights: NIR's ``Affine``/``Linear`` compute ``W x + b`` with ``W`` (out, in); snrl's
``forward_weights`` are (in, out) (row = presynaptic neuron), so they are written transposed,
with the Dale signs and the no-autapse mask folded in (the effective weights).
"""

from __future__ import annotations

import io
import types
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from snrl.config import loads_toml
from snrl.errors import UserError
from snrl.io import atomic_write_bytes
from snrl.layers.base import decay_of

__all__ = ["from_nir", "parameter_table", "to_nir", "write_nir"]


def _mapping() -> tuple[tuple[str, str, str, str], ...]:
    """The rows of ``nir_mapping.toml`` (package data), one tuple per row."""
    path = resources.files("snrl.networks").joinpath("nir_mapping.toml")
    return tuple(tuple(row) for row in loads_toml(path.read_text(encoding="utf-8"))["rows"])


#: snrl parameter -> NIR parameter, as :func:`to_nir` writes them (forward-Euler map): the
#: rows ``(part, snrl, NIR, value)`` of ``nir_mapping.toml``, one per line there;
#: :func:`parameter_table` prints them.
MAPPING = _mapping()


#: The NIR neuron node of each snrl neuron model and reset, read both ways: :func:`to_nir`
#: writes a layer as the node of its model and reset, :func:`from_nir` reads model and reset
#: from the node. Node -> (snrl backbone, reset, the field of the membrane's time constant).
#: The Cuba nodes hold SpyLIF's synapse too (``tau_syn``, ``w_in``); a "subtract" layer's
#: LI node feeds a ``Threshold`` node (module docstring); the LI readout is an ``LI`` node.
NEURON_NODES = {
    "LIF": ("lif", "zero", "tau"),
    "LI": ("lif", "subtract", "tau"),
    "CubaLIF": ("spylif", "zero", "tau_mem"),
    "CubaLI": ("spylif", "subtract", "tau_mem"),
}


def _neuron_kind(node: Any, nir: Any) -> tuple[str, str, str] | None:
    """:data:`NEURON_NODES`' entry of a NIR neuron node; None for another node."""
    for name, kind in NEURON_NODES.items():
        if isinstance(node, getattr(nir, name)):
            return kind
    return None


def _neuron_node(
    nir: Any,
    backbone: str,
    reset: str,
    tau: np.ndarray,
    dt: float,
    *,
    threshold: float | None = None,
    tau_syn: np.ndarray | None = None,
) -> Any:
    """The NIR node (:data:`NEURON_NODES`) of ``backbone``'s neurons with ``reset``: the
    membrane's Euler time constant ``tau`` with ``r = tau / dt`` and rest 0; with a zero
    reset, the ``threshold`` and ``v_reset = 0``; SpyLIF's synapse ``tau_syn`` with
    ``w_in = tau_syn / dt``."""
    name = next(k for k, v in NEURON_NODES.items() if v[:2] == (backbone, reset))
    zeros = np.zeros(len(tau))
    kw = {NEURON_NODES[name][2]: tau, "r": tau / dt, "v_leak": zeros}
    if reset == "zero":
        kw.update(v_threshold=np.full(len(tau), threshold), v_reset=zeros)
    if backbone == "spylif":
        kw.update(tau_syn=tau_syn, w_in=tau_syn / dt)
    return getattr(nir, name)(**kw)


def parameter_table() -> str:
    """The snrl -> NIR parameter mapping as a Markdown table (docs/interop.md)."""
    rows = [
        "| part | snrl | NIR | value |",
        "|---|---|---|---|",
        *(f"| {a} | `{b}` | `{c}` | `{d}` |" for a, b, c, d in MAPPING),
    ]
    return "\n".join(rows) + "\n"


def _nir() -> Any:
    try:
        import nir
    except ImportError as e:  # an optional extra
        raise UserError("NIR needs the nir package (pip install 'snrl[nir]')") from e
    return nir


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().copy()


def _euler(alpha: torch.Tensor, dt: float) -> np.ndarray:
    """``dt / (1 - alpha)`` in float64 (the NIR time constant of a decay ``alpha``)."""
    a = alpha.detach().cpu().double().numpy()
    return dt / (1.0 - a)


def to_nir(backbone: nn.Module, *, unit_r: bool = False) -> Any:
    """The backbone as a ``nir.NIRGraph`` (module docstring: layout and parameter mapping).

    Args:
        backbone: a :class:`~snrl.networks.spiking.SpikingBackbone` of ``lif`` or ``spylif``
            layers, ``substeps=1``, starting from rest (``hh_init="zeros"``), with the direct
            encoder (its first layer's ``Affine`` node takes the input as it is).
        unit_r: write ``r = 1`` (and CubaLIF's ``w_in = 1``), the input scale ``tau / dt``
            moved into the weights and biases that feed each neuron instead: the same ODE,
            for simulators that do not apply ``r`` (Norse's LIF import;
            docs/interop.md "NIR in other simulators").

    Returns:
        The graph, its ``metadata`` holding ``dt`` (seconds), ``source`` and, per layer,
        the reset rule (``"<layer>.reset"``).

    Raises:
        UserError: ALIF (no NIR primitive), ``substeps`` > 1, another initial state, the
            population encoder (a Gaussian: no NIR node), or a backbone that is not a
            SpikingBackbone; without the ``nir`` package.
    """
    from snrl.networks.spiking import SpikingBackbone

    nir = _nir()
    backbone = _unwrap_encoder(backbone)
    if type(backbone) is not SpikingBackbone:
        raise UserError(
            f"to_nir takes a SpikingBackbone, got {type(backbone).__name__} (an ANN or a "
            "wrapped snntorch network has no NIR export here)"
        )
    if backbone.backbone == "alif":
        raise UserError(
            "to_nir: ALIF has no NIR primitive (NIR has no adaptive threshold, and writing it "
            "as LIF would change the spikes); train with backbone='lif' or 'spylif'"
        )
    if backbone.substeps != 1:
        raise UserError(
            f"to_nir: substeps={backbone.substeps} (NIR runs one step per input; build the "
            "backbone with substeps=1)"
        )
    dt = float(backbone.params.dt)
    nodes: dict[str, Any] = {"input": nir.Input(input_type=np.array([backbone.input_size]))}
    edges: list[tuple[str, str]] = []
    meta: dict[str, Any] = {"dt": dt, "source": "snrl"}
    prev = "input"
    for name, layer in backbone.layers.items():
        if layer.hh_init != "zeros":
            raise UserError(
                f"to_nir: layer {name} has hh_init={layer.hh_init!r} (a NIR graph starts at "
                "rest; use hh_init='zeros')"
            )
        n = layer.output_size
        nodes[f"{name}_in"] = nir.Affine(
            weight=_np(layer.forward_weights.t()), bias=_np(layer.bias)
        )
        edges += [(prev, f"{name}_in"), (f"{name}_in", name)]
        tau = _euler(layer.decay("tau_m"), dt)
        if name == "readout":
            if layer.weight_rec is not None:
                raise UserError("to_nir: a recurrent readout has no NIR export here")
            nodes[name] = _neuron_node(nir, "lif", "subtract", tau, dt)  # an LI membrane
            prev = name
            continue
        thr = float(layer.threshold)
        spylif = backbone.backbone == "spylif"
        tau_syn = _euler(layer.decay("tau_syn"), dt) if spylif else None
        subtract = layer.reset == "subtract"
        meta[f"{name}.reset"] = layer.reset
        nodes[name] = _neuron_node(
            nir, backbone.backbone, layer.reset, tau, dt, threshold=thr, tau_syn=tau_syn
        )
        spikes = name
        if subtract:
            spikes = f"{name}_spikes"
            nodes[spikes] = nir.Threshold(threshold=np.full(n, thr))
            edges.append((name, spikes))
        if layer.weight_rec is not None or subtract:
            w = layer.recurrent_weights.detach().t().clone()
            if subtract:
                w -= thr * torch.eye(n, dtype=w.dtype, device=w.device)
            nodes[f"{name}_rec"] = nir.Linear(weight=_np(w))
            edges += [(spikes, f"{name}_rec"), (f"{name}_rec", name)]
        prev = spikes
    nodes["output"] = nir.Output(output_type=np.array([backbone.output_size]))
    edges.append((prev, "output"))
    if unit_r:
        _move_scale_to_weights(nodes, edges, nir)
    return nir.NIRGraph(nodes=nodes, edges=edges, metadata=meta)


def _move_scale_to_weights(nodes: dict[str, Any], edges: list[tuple[str, str]], nir: Any) -> None:
    """Rewrite ``nodes`` with ``r = 1`` (and ``w_in = 1``): each neuron's input scale
    ``r`` (times ``w_in``) multiplies the rows of the ``Affine``/``Linear`` nodes feeding it
    (the opposite of :func:`_fold_scale`)."""
    for name, node in list(nodes.items()):
        if _neuron_kind(node, nir) is None:
            continue
        kw = {k: v for k, v in node.to_dict().items() if k not in ("type", "metadata")}
        scale = np.asarray(kw["r"], dtype=np.float64)
        kw["r"] = np.ones_like(kw["r"])
        if "w_in" in kw:
            scale = scale * np.asarray(kw["w_in"], dtype=np.float64)
            kw["w_in"] = np.ones_like(kw["w_in"])
        nodes[name] = type(node)(**kw)
        for a, b in edges:
            proj = nodes[a]
            if b != name or not isinstance(proj, (nir.Affine, nir.Linear)):
                continue
            w = (np.asarray(proj.weight, dtype=np.float64) * scale[:, None]).astype(
                proj.weight.dtype
            )
            if isinstance(proj, nir.Affine):
                bias = (np.asarray(proj.bias, dtype=np.float64) * scale).astype(proj.bias.dtype)
                nodes[a] = nir.Affine(weight=w, bias=bias)
            else:
                nodes[a] = nir.Linear(weight=w)


def _unwrap_encoder(net: nn.Module) -> nn.Module:
    """The backbone behind an input encoder that NIR can hold.

    The direct encoder feeds the observation to the first layer as it is: that layer's
    ``Affine`` node is the encoding (``build_backbone`` returns the bare backbone, and an
    ``EncodedBackbone`` around ``nn.Identity`` is unwrapped here). The population encoder is
    an affine map (each feature copied ``k`` times, minus the centres, over ``sigma``) followed
    by a Gaussian ``exp(-y^2 / 2)``, and NIR has no node for that nonlinearity: refused."""
    from snrl.networks.encoders import EncodedBackbone, PopulationEncoder

    if not isinstance(net, EncodedBackbone):
        return net
    if isinstance(net.encoder, nn.Identity):
        return net.backbone
    if isinstance(net.encoder, PopulationEncoder):
        raise UserError(
            "to_nir: the population encoder is an affine map followed by a Gaussian tuning "
            "curve exp(-y^2 / 2), and NIR has no node for that nonlinearity (its nodes are "
            "linear maps, pooling, delays and neurons); train with encoder='direct', whose "
            "encoding is the first layer's Affine node"
        )
    raise UserError(
        f"to_nir: the input encoder {type(net.encoder).__name__} has no NIR export (only the "
        "direct encoder, the first layer's Affine node, has)"
    )


def write_nir(graph: Any, path: str | Path) -> Path:
    """Write ``graph`` to ``path`` (``.nir``, NIR's HDF5 file) atomically: the file appears
    whole or not at all; an existing file is refused (snrl overwrites no file it may not
    have written).

    Raises:
        UserError: another extension, an existing file, an unwritable place.
    """
    nir = _nir()
    path = Path(path)
    if path.suffix.lower() != ".nir":
        raise UserError(f"{path} has an unknown extension (a NIR graph is written to FILE.nir)")
    if path.exists():
        raise UserError(f"{path} exists (snrl does not overwrite it: remove it or choose another)")
    buf = io.BytesIO()
    nir.write(buf, graph)
    try:
        atomic_write_bytes(path, buf.getvalue())
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror} (choose a writable place)") from e
    return path


# ---------------------------------------------------------------------------- NIR -> snrl
def _alpha(tau: Any, dt: float, what: str) -> np.ndarray:
    tau = np.asarray(tau, dtype=np.float64).reshape(-1)
    if not (np.all(np.isfinite(tau)) and np.all(tau > dt)):
        raise UserError(f"from_nir: {what} must be finite and > dt={dt} s, got {tau.min()}")
    return 1.0 - dt / tau


def _fold_scale(entry: dict[str, Any], dt: float, nir: Any) -> None:
    """Fold the neurons' input scale into the weights that feed them. NIR's Euler step takes
    a layer's input ``I`` with the factor ``r dt / tau`` (CubaLIF: ``w_in dt / tau_syn`` into
    the synapse, then ``r dt / tau_mem`` into the membrane), snrl's with 1: the incoming
    weights, bias and recurrent weights of neuron ``j`` are multiplied by its factor, the same
    ODE. snrl's own graphs have factor 1 (``r = tau / dt``): nothing changes."""
    node = entry["node"]
    backbone, _, tau = _neuron_kind(node, nir)
    scale: Any = 1.0
    if backbone == "spylif":
        scale = np.asarray(node.w_in, dtype=np.float64) * dt / np.asarray(node.tau_syn)
    scale = scale * np.asarray(node.r, dtype=np.float64) * dt / np.asarray(getattr(node, tau))
    n = entry["w_in"].shape[1]
    scale = np.broadcast_to(scale.reshape(-1), (n,))
    if not np.all(np.isfinite(scale)):
        raise UserError(f"from_nir: the input scale (r, w_in) of {entry['name']!r} is not finite")
    scale = np.where(np.abs(scale - 1.0) <= 1e-9, 1.0, scale)  # rounding of tau / dt * dt / tau
    entry["w_in"] = entry["w_in"] * scale
    entry["bias"] = entry["bias"] * scale
    if entry.get("w_rec") is not None:
        entry["w_rec"] = entry["w_rec"] * scale


def _set_decay(layer: nn.Module, name: str, alpha: np.ndarray) -> None:
    """Set ``log_<name>`` so that the layer's decay ``exp(-dt exp(-log_tau))`` is ``alpha``
    exactly in the layer's dtype: the rounded log is tried with its neighbours (a few units
    in the last place up and down) until every neuron matches."""
    buf = getattr(layer, f"log_{name}")
    target = torch.as_tensor(alpha, dtype=torch.float64).to(buf.dtype).reshape(buf.shape)
    tau = -layer.dt / np.log(target.double().numpy())
    log = torch.as_tensor(np.log(tau), dtype=torch.float64).to(buf.dtype)

    def decay(c: torch.Tensor) -> torch.Tensor:
        return decay_of(c, layer.dt)

    best, found = log, decay(log) == target
    up, down = log, log
    for _ in range(6):
        up = torch.nextafter(up, torch.full_like(up, np.inf))
        down = torch.nextafter(down, torch.full_like(down, -np.inf))
        for cand in (up, down):
            hit = (decay(cand) == target) & ~found
            best, found = torch.where(hit, cand, best), found | hit
    with torch.no_grad():
        buf.copy_(best)  # bumps its version: the layer's memoized decay is recomputed


def _single(values: list[str], what: str) -> str:
    if len(values) != 1:
        raise UserError(f"from_nir: {what} (a chain of layers is expected, got {values})")
    return values[0]


def from_nir(graph: Any, *, dt: float | None = None) -> nn.Module:
    """A :class:`~snrl.networks.spiking.SpikingBackbone` from a NIR graph.

    The graph is a chain ``input -> Affine/Linear -> neurons [-> recurrent Linear/Affine
    back to the neurons] -> Affine/Linear -> ... -> [Affine -> LI readout] -> output``, with
    the neurons of every spiking layer one of: ``LIF`` (zero reset), ``CubaLIF`` (SpyLIF,
    zero reset), ``LI``/``CubaLI`` followed by ``Threshold`` (subtract reset: the recurrent
    weights' diagonal holds ``-threshold``; see the module docstring). One neuron model, one
    threshold and one reset for all spiking layers (as a SpikingBackbone has). An input scale
    other than snrl's (``r`` other than ``tau / dt``, e.g. ``r = 1``; CubaLIF's ``w_in``) is
    folded into the weights that feed the neurons: the same ODE.

    Args:
        graph: a ``nir.NIRGraph`` (e.g. from ``nir.read(path)``).
        dt: the neuron step, seconds (default: ``graph.metadata["dt"]``).

    Returns:
        The backbone, without Dale's law (the graph's weights carry the signs), its decays
        exactly those of the graph's time constants at ``dt``.

    Raises:
        UserError: a node or a layout that snrl cannot run, named.
    """

    nir = _nir()
    if not isinstance(graph, nir.NIRGraph):
        raise UserError(f"from_nir takes a nir.NIRGraph, got {type(graph).__name__}")
    if dt is None:
        dt = graph.metadata.get("dt") if isinstance(graph.metadata, dict) else None
        if dt is None:
            raise UserError("from_nir: the graph has no metadata['dt'] (pass dt= in seconds)")
    dt = float(np.asarray(dt))
    layers, readout = _nir_chain(_flat(graph, nir), nir)
    for entry in [*layers, *([readout] if readout else [])]:
        _fold_scale(entry, dt, nir)
    thr, reset, model = _one_model(layers, nir)
    return _nir_backbone(layers, readout, thr, reset, model, dt, nir)


def _flat(graph: Any, nir: Any, prefix: str = "") -> Any:
    """``graph`` with every sub-graph node (NIR lets a graph be a node, e.g. a recurrent
    layer ``Input -> LIF <-> Linear -> Output``) replaced by its nodes, named
    ``outer.inner``, the edges into and out of it joined through its Input and Output; the
    graph given is left as it is."""
    nodes: dict[str, Any] = {}
    edges: list[tuple[str, str]] = []
    ends: dict[str, tuple[list[str], list[str]]] = {}  # sub-graph -> (entries, exits)
    for name, node in graph.nodes.items():
        if not isinstance(node, nir.NIRGraph):
            nodes[prefix + name] = node
            continue
        sub = _flat(node, nir, f"{prefix}{name}.")
        inner_in = {k for k, v in sub.nodes.items() if isinstance(v, nir.Input)}
        inner_out = {k for k, v in sub.nodes.items() if isinstance(v, nir.Output)}
        entries = [b for a, b in sub.edges if a in inner_in]
        exits = [a for a, b in sub.edges if b in inner_out]
        ends[prefix + name] = (entries, exits)
        nodes.update({k: v for k, v in sub.nodes.items() if k not in inner_in | inner_out})
        edges += [(a, b) for a, b in sub.edges if a not in inner_in and b not in inner_out]
    for a, b in graph.edges:
        srcs = ends[prefix + a][1] if prefix + a in ends else [prefix + a]
        dsts = ends[prefix + b][0] if prefix + b in ends else [prefix + b]
        edges += [(x, y) for x in srcs for y in dsts]
    return types.SimpleNamespace(nodes=nodes, edges=edges)


def _nir_chain(graph: Any, nir: Any) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Walk ``graph`` from its Input: each spiking layer (projection, neurons, recurrence)
    as a dict, and the LI readout's (None: the graph has none)."""
    succ: dict[str, list[str]] = {k: [] for k in graph.nodes}
    for a, b in graph.edges:
        succ[a].append(b)
    nodes = graph.nodes
    inputs = [k for k, v in nodes.items() if isinstance(v, nir.Input)]
    cur = _succ_of(succ, _single(inputs, "the graph needs exactly one Input node"))
    layers: list[dict[str, Any]] = []
    readout: dict[str, Any] | None = None
    while not isinstance(nodes[cur], nir.Output):
        proj = nodes[cur]
        if not isinstance(proj, (nir.Affine, nir.Linear)):
            raise UserError(
                f"from_nir: node {cur!r} is a {type(proj).__name__} where an Affine or Linear "
                "projection is expected (supported: Affine, Linear, LIF, CubaLIF, LI, CubaLI, "
                "Threshold)"
            )
        w = np.asarray(proj.weight, dtype=np.float64)
        b = np.asarray(getattr(proj, "bias", np.zeros(w.shape[0])), dtype=np.float64)
        name = _succ_of(succ, cur)
        neuron = nodes[name]
        entry: dict[str, Any] = {"name": name, "w_in": w.T, "bias": b, "node": neuron}
        kind = _neuron_kind(neuron, nir)
        if kind is None:
            raise UserError(
                f"from_nir: node {name!r} is a {type(neuron).__name__}, which snrl cannot run "
                "(supported neurons: LIF, CubaLIF, LI/CubaLI + Threshold)"
            )
        if kind[1] == "zero":
            if np.any(np.asarray(neuron.v_reset) != 0) or np.any(np.asarray(neuron.v_leak) != 0):
                raise UserError(f"from_nir: {name!r} has v_reset or v_leak != 0 (snrl rests at 0)")
            entry.update(reset="zero", thr=neuron.v_threshold, spikes=name)
        else:
            thr_nodes = [s for s in succ[name] if isinstance(nodes[s], nir.Threshold)]
            if not thr_nodes:  # a readout
                if readout is not None or not isinstance(nodes[_succ_of(succ, name)], nir.Output):
                    raise UserError(f"from_nir: the LI readout {name!r} must come last")
                readout = entry
                cur = _succ_of(succ, name)
                break
            spikes = _single(thr_nodes, f"{name!r} feeds several Threshold nodes")
            entry.update(reset="subtract", thr=nodes[spikes].threshold, spikes=spikes)
        rec, nxt = None, []
        for s in succ[entry["spikes"]]:
            node = nodes[s]
            if isinstance(node, (nir.Linear, nir.Affine)) and succ[s] == [name]:
                rec = np.asarray(node.weight, dtype=np.float64).T
                if isinstance(node, nir.Affine):  # a constant input each step: the bias's
                    entry["bias"] = entry["bias"] + np.asarray(node.bias, dtype=np.float64)
            else:
                nxt.append(s)
        entry["w_rec"] = rec
        layers.append(entry)
        cur = _single(nxt, f"{entry['spikes']!r} must feed exactly one next node")
    if not layers:
        raise UserError("from_nir: the graph has no spiking layer")
    return layers, readout


def _one_model(layers: list[dict[str, Any]], nir: Any) -> tuple[float, str, str]:
    """The one threshold, reset and neuron model (the backbone's name) of every spiking
    layer (a SpikingBackbone has one of each); the subtract reset moved from the
    recurrence's diagonal."""
    kinds = {_neuron_kind(e["node"], nir)[0] for e in layers}
    resets = {e["reset"] for e in layers}
    thrs = np.concatenate([np.asarray(e["thr"], dtype=np.float64).reshape(-1) for e in layers])
    if len(kinds) > 1 or len(resets) > 1 or not np.all(thrs == thrs[0]):
        raise UserError(
            "from_nir: snrl's backbone has one neuron model, one reset and one threshold for "
            "all spiking layers (this graph mixes them)"
        )
    thr = float(thrs[0])
    reset = resets.pop()
    for e in layers:
        if reset == "subtract":  # the reset is on the diagonal of the recurrence
            n = e["w_in"].shape[1]
            w = np.zeros((n, n)) if e["w_rec"] is None else e["w_rec"].copy()
            d = np.diag_indices(n)
            w[d] += thr
            # a diagonal within rounding of -threshold (an input scale folded in: float32
            # products) is the reset alone, not an autapse of weight ~1e-8
            w[d] = np.where(np.abs(w[d]) <= 1e-6 * abs(thr), 0.0, w[d])
            e["w_rec"] = w
    return thr, reset, kinds.pop()


def _nir_backbone(
    layers: list[dict[str, Any]],
    readout: dict[str, Any] | None,
    thr: float,
    reset: str,
    model: str,
    dt: float,
    nir: Any,
) -> nn.Module:
    """The backbone of the walked chain, its weights and decays those of the graph."""
    from snrl.networks.spiking import SpikingBackbone

    has_rec = [e["w_rec"] is not None and np.any(e["w_rec"] != 0) for e in layers]
    eye_free = all(e["w_rec"] is None or np.all(np.diag(e["w_rec"]) == 0) for e in layers)
    backbone = SpikingBackbone(
        layers[0]["w_in"].shape[0],
        [e["w_in"].shape[1] for e in layers],
        None if readout is None else readout["w_in"].shape[1],
        backbone=model,
        force_dale_law=False,
        use_recurrent_connection=any(has_rec),
        use_rec_eye_mask=eye_free,
        reset=reset,
        threshold=thr,
        dt=dt,
        seed=0,
    )
    with torch.no_grad():
        for e, layer in zip([*layers, *([readout] if readout else [])], backbone.layers.values()):
            node = e["node"]
            dtype = layer.weight_in.dtype
            layer.weight_in.copy_(torch.as_tensor(e["w_in"], dtype=dtype))
            layer.bias.copy_(torch.as_tensor(e["bias"], dtype=dtype))
            if layer.weight_rec is not None:
                w = e.get("w_rec")
                layer.weight_rec.copy_(
                    torch.zeros_like(layer.weight_rec) if w is None else torch.as_tensor(w)
                )
            kind, _, tau = _neuron_kind(node, nir)
            if kind == "spylif":
                _set_decay(layer, "tau_syn", _alpha(node.tau_syn, dt, "tau_syn"))
            _set_decay(layer, "tau_m", _alpha(getattr(node, tau), dt, tau))
    return backbone


def _succ_of(succ: dict[str, list[str]], name: str) -> str:
    return _single(succ[name], f"{name!r} must feed exactly one node")
