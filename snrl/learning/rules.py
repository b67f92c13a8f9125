"""The learning rules (BPTT, e-prop) and the e-prop gradient of one spiking layer."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from snrl.errors import UserError
from snrl.functional.eprop import (
    EligibilityState,
    accumulate,
    eligibility_step,
    filter_backward,
    initial_eligibility,
    reset_rows,
)
from snrl.functional.surrogate import derivative_fn
from snrl.layers import ALIFLayer, LIFLayer
from snrl.networks.activity import Activity
from snrl.networks.protocol import BackboneOutput
from snrl.networks.spiking import SpikingBackbone, layer_activity

LEARNING_RULES = ("bptt", "eprop")
"""The values of the ``learning_rule`` config key."""
FEEDBACKS = ("symmetric", "random")
"""The values of ``eprop_feedback``: the readout's own weights (``B = W_out^T``) or a fixed
random matrix (random e-prop)."""


def eprop_layer_gradients(
    layer: LIFLayer | ALIFLayer,
    x: Tensor,
    state: Any,
    signal: Tensor,
    *,
    starts: Tensor | None = None,
    fresh: Any = None,
    through_reset: bool = False,
) -> tuple[Tensor, Tensor | None, Tensor]:
    """e-prop gradients of a LIF or ALIF layer's effective weights, traces carried forward.

    The layer is re-run without a graph from ``state`` (exactly its forward, resets
    included); the eligibility traces are updated step by step and ``sum_t L_t e_t`` is
    accumulated, so memory does not grow with T. The gradients are of the *effective*
    weights (``layer.forward_weights`` / ``layer.recurrent_weights``); to reach the raw
    parameters through the Dale parametrization, see :func:`apply_layer_gradients`.

    Args:
        layer: the spiking layer.
        x: (T, B, F) its input sequence.
        state: its state before step 0.
        signal: (T, B, N) the learning signal ``L_t`` of each neuron at each step (with a
            leaky readout, already fed back through its later steps: :func:`filter_backward`).
        starts: optional bool (T, B) episode starts (as :meth:`RecurrentLayer.run`).
        fresh: the states that replace the rows at the starts (default the reset values).
        through_reset: count the reset's spike as the neuron's own state (``reset_factor``
            of :func:`~snrl.functional.eprop.eligibility_step`); False: the paper's rule.

    Returns:
        ``(grad_in (F, N), grad_rec (N, N) or None without recurrence, grad_bias (N,))``.
    """
    p = _rerun(layer, x, state, starts, fresh)
    n = layer.output_size
    # LIF, reset="subtract", one membrane decay: e_t = psi_t (x) zbar_t factorizes, so the
    # sum over t is one product of the presynaptic traces (T, B, I: the input's size) with
    # psi * L: 8x faster than the (B, I, N) traces (T 100, B 4, 128 neurons), same sums
    factored = (
        not p.adaptive
        and layer.reset == "subtract"
        and not through_reset
        and bool((p.alpha == p.alpha.reshape(-1)[0]).all())
    )
    with torch.no_grad():
        if factored:
            zbar = _factored_traces(x, p)
            grad = zbar.reshape(-1, p.n_pre).T @ (signal * p.psi).reshape(-1, n)
        else:
            grad, _ = _trace_loop(layer, x, p, None, e_signal=signal, through_reset=through_reset)
    return _split(grad, x.shape[2], n, p.recurrent)


class _Rerun(NamedTuple):
    """A layer's sequence re-run without a graph, and what its traces need."""

    res: Any
    starts: Tensor | None
    fresh_seq: Any
    adaptive: bool
    alpha: Tensor
    rho: Tensor | None
    beta: float
    thr: Any
    psi: Tensor
    recurrent: bool
    n_pre: int
    z0: Tensor
    v0: Tensor


def _rerun(layer: LIFLayer | ALIFLayer, x: Tensor, state: Any, starts: Any, fresh: Any) -> _Rerun:
    """Run ``layer`` on ``x`` from ``state`` without a graph (exactly its forward, resets
    included) and collect the decays, thresholds and pseudo-derivatives ``psi`` of the steps.
    ``n_pre`` counts the presynaptic inputs of the traces: inputs, neurons (with recurrence)
    and 1 for the bias; ``z0``/``v0`` are the (B, N) spikes and membranes before step 0."""
    if type(layer) not in (LIFLayer, ALIFLayer):
        raise UserError(f"e-prop supports LIF and ALIF layers, not {type(layer).__name__}")
    adaptive = type(layer) is ALIFLayer
    with torch.no_grad():
        if starts is not None:
            starts = torch.as_tensor(starts, device=x.device).bool()
        res = layer.run(x, state, starts=starts, fresh=fresh)
        batch, n = x.shape[1], layer.output_size
        beta = layer.beta if adaptive else 0.0
        thr = layer.threshold + beta * res.traces["a"] if adaptive else layer.threshold
        psi = derivative_fn(layer.spike_grad)((res.v - thr).clone())
        fresh_seq = None if starts is None else layer.fresh_sequence(res.v, starts, fresh)
        recurrent = layer.weight_rec is not None
        s0 = layer.check_state(x, state)
        return _Rerun(
            res=res,
            starts=starts,
            fresh_seq=fresh_seq,
            adaptive=adaptive,
            alpha=layer.decay("tau_m"),
            rho=layer.decay("tau_a") if adaptive else None,
            beta=beta,
            thr=thr,
            psi=psi,
            recurrent=recurrent,
            n_pre=x.shape[2] + (n if recurrent else 0) + 1,
            z0=s0.z.to(x.dtype).expand(batch, n),
            v0=s0.v.to(x.dtype).expand(batch, n),
        )


def _split(
    grad: Tensor, n_in: int, n: int, recurrent: bool
) -> tuple[Tensor, Tensor | None, Tensor]:
    """(I, N) gradient rows -> ``(grad_in, grad_rec or None, grad_bias)``."""
    return grad[:n_in], (grad[n_in : n_in + n] if recurrent else None), grad[-1]


def _steps(x: Tensor, p: _Rerun) -> Iterator[tuple[int, Tensor | None, Tensor, Tensor, Tensor]]:
    """Walk a re-run sequence step by step: ``(t, rows, pre_t, z_{t-1}, v_{t-1})`` with
    ``rows`` the bool (B,) episode starts at ``t`` (None when no row starts), ``pre_t`` (B, I)
    the presynaptic input (inputs, last spikes with recurrence, 1 for the bias) and the
    spikes and membranes before the step (the fresh states in the rows that start)."""
    ones = x.new_ones(x.shape[1], 1)
    z_prev, v_prev = p.z0, p.v0
    for t in range(x.shape[0]):
        rows = None
        if p.starts is not None and bool(p.starts[t].any()):
            rows = p.starts[t]
            z_prev = torch.where(rows[:, None], p.fresh_seq.z[t], z_prev)
            v_prev = torch.where(rows[:, None], p.fresh_seq.v[t], v_prev)
        pre = torch.cat([x[t], z_prev, ones] if p.recurrent else [x[t], ones], dim=1)
        yield t, rows, pre, z_prev, v_prev
        z_prev, v_prev = p.res.out[t], p.res.v[t]


def _factored_traces(x: Tensor, p: _Rerun) -> Tensor:
    """(T, B, I) the presynaptic traces ``zbar_t = alpha zbar_{t-1} + pre_t`` of a LIF layer
    with one membrane decay (restarted at episode starts): with reset="subtract" its
    eligibility trace is ``psi_t (x) zbar_t``."""
    decay = p.alpha.reshape(-1)[0]
    zbar = x.new_empty(x.shape[0], x.shape[1], p.n_pre)
    acc = x.new_zeros(x.shape[1], p.n_pre)
    for t, rows, pre, _, _ in _steps(x, p):
        if rows is not None:
            acc = acc * (~rows).to(x.dtype)[:, None]
        acc = torch.addcmul(pre, decay, acc)
        zbar[t] = acc
    return zbar


def _trace_loop(
    layer: LIFLayer | ALIFLayer,
    x: Tensor,
    p: _Rerun,
    eligibility: EligibilityState | None,
    *,
    e_signal: Tensor | None,
    fe_signal: Tensor | None = None,
    kappa: float | None = None,
    through_reset: bool = False,
) -> tuple[Tensor, EligibilityState]:
    """The eligibility traces carried over the steps of one re-run window (from
    ``eligibility``; None: all zero, with ``F_kappa(e)`` when ``fe_signal`` is given) and the
    (I, N) gradient ``sum_t fe_signal_t F_kappa(e)_t + sum_t e_signal_t e_t``; returns it
    with the traces after the window. ``through_reset``: see :func:`eprop_layer_gradients`."""
    el = eligibility
    if el is None:
        el = initial_eligibility(
            x.shape[1],
            p.n_pre,
            layer.output_size,
            adaptive=p.adaptive,
            filtered=fe_signal is not None,
            device=x.device,
            dtype=x.dtype,
        )
    grad = x.new_zeros(p.n_pre, layer.output_size)
    factor = None
    for t, rows, pre, z_prev, v_prev in _steps(x, p):
        if rows is not None:
            el = reset_rows(el, rows)
        if through_reset:
            if layer.reset == "zero":
                factor = p.alpha * v_prev
            else:
                factor = p.thr[t] if p.adaptive else torch.full_like(v_prev, p.thr)
        el = eligibility_step(
            el,
            pre,
            p.psi[t],
            p.alpha,
            rho=p.rho,
            beta=p.beta,
            z_prev=z_prev,
            reset=layer.reset,
            reset_factor=factor,
            kappa=kappa,
        )
        if fe_signal is not None:
            accumulate(grad, fe_signal[t], el.fe)
        if e_signal is not None:
            accumulate(grad, e_signal[t], el.e)
    return grad, el


def eprop_online_gradients(
    layer: LIFLayer | ALIFLayer,
    x: Tensor,
    state: Any,
    readout_signal: Tensor,
    eligibility: EligibilityState | None,
    *,
    kappa: float,
    local_signal: Tensor | None = None,
    starts: Tensor | None = None,
    fresh: Any = None,
) -> tuple[tuple[Tensor, Tensor | None, Tensor], EligibilityState]:
    """Online e-prop over one window of a longer run: the traces start from ``eligibility``
    (the end of the previous window; None: all zero) and the gradient is
    ``sum_t L_t F_kappa(e)_t (+ sum_t local_t e_t)`` over the window's steps, with
    ``F_kappa(e)`` the trace filtered forward with the readout's decay. Over consecutive
    windows of one sequence the gradients add up to :func:`eprop_layer_gradients` of the
    whole sequence with the readout's signal fed back through its later steps
    (:func:`filter_backward`); memory is (B, I, N) whatever the window or episode length.

    Args:
        layer: the spiking layer.
        x: (T, B, F) its input over the window.
        state: its state before the window's step 0.
        readout_signal: (T, B, N) the readout's error at each step of the window, fed back to
            the neurons through ``B`` (not through the readout's later steps: the filtered
            trace does that, forward in time).
        eligibility: the carried traces (with ``fe``), or None at the start of a run.
        kappa: the readout's decay (a scalar).
        local_signal: optional (T, B, N) a loss's direct dependence on each spike (e.g. the
            rate regularization), times the unfiltered trace.
        starts: optional bool (T, B) episode starts: those rows' traces restart at zero.
        fresh: the states that replace the rows at the starts (default the reset values).

    Returns:
        ``((grad_in, grad_rec or None, grad_bias), eligibility after the window)``.
    """
    p = _rerun(layer, x, state, starts, fresh)
    batch, n = x.shape[1], layer.output_size
    el = eligibility
    if el is not None and (el.fe is None or el.eps_v.shape != (batch, p.n_pre, n)):
        raise UserError(
            f"carried eligibility traces of shape {tuple(el.eps_v.shape)} do not fit this "
            f"window (batch {batch}, {p.n_pre} inputs, {n} neurons, filtered)"
        )
    with torch.no_grad():
        grad, el = _trace_loop(
            layer, x, p, el, e_signal=local_signal, fe_signal=readout_signal, kappa=kappa
        )
    return _split(grad, x.shape[2], n, p.recurrent), el


def apply_layer_gradients(
    layer: nn.Module, grad_in: Tensor, grad_rec: Tensor | None, grad_bias: Tensor
) -> None:
    """Add gradients of the effective weights to the layer's raw parameters' ``.grad``,
    through its signed-weight parametrization (``|W_raw| * sign * mask``): Dale's signs and
    the no-autapse mask hold by construction, whatever the optimizer does."""
    pairs = [(layer.forward_weights, grad_in), (layer.bias, grad_bias)]
    if grad_rec is not None:
        pairs.append((layer.recurrent_weights, grad_rec))
    pairs = [(w, g.to(w.dtype)) for w, g in pairs if w.requires_grad]
    if pairs:
        torch.autograd.backward([w for w, _ in pairs], [g for _, g in pairs])


class LearningRule:
    """How a loss's gradient reaches the weights. An algorithm computes its loss inside
    :meth:`applied` and calls :meth:`backward` in place of ``loss.backward()``."""

    name = ""

    def check(self, net: nn.Module, what: str) -> None:
        """Raise :class:`UserError` when this rule cannot train ``net`` (named ``what``)."""

    @contextlib.contextmanager
    def applied(self, agent: nn.Module) -> Iterator[None]:
        """The forward pass of ``agent``'s backbones, as this rule needs it."""
        yield

    def backward(self, loss: Tensor) -> None:
        """Fill the ``.grad`` of the parameters from ``loss``."""
        loss.backward()


class BPTT(LearningRule):
    """Backpropagation through time: autograd through every step (snrl's default)."""

    name = "bptt"


class EProp(LearningRule):
    """e-prop: the spiking layer learns from eligibility traces and a broadcast signal.

    Inside :meth:`applied`, each backbone of the agent runs its spiking layer without a
    graph and its leaky-integrator readout on the (detached) spikes, with a graph: the
    readout's and the heads' parameters get their exact gradients from ``loss.backward()``.
    :meth:`backward` then takes the error at each readout output, feeds it back through the
    readout's leak (``kappa``) and through ``B`` (``W_out^T`` for symmetric feedback, a fixed
    random matrix for random feedback) to get the learning signal ``L_t`` of every neuron, and
    adds ``sum_t L_t e_t`` (:func:`eprop_layer_gradients`) to the layer's gradients. A loss
    term on the spikes themselves (the rate regularization) reaches ``L_t`` too, locally.

    Args:
        feedback: ``"symmetric"`` or ``"random"``.
        seed: seeds the random feedback matrices (one per backbone, fixed for the run).
    """

    name = "eprop"

    def __init__(self, feedback: str = "symmetric", seed: int = 0) -> None:
        if feedback not in FEEDBACKS:
            raise UserError(f"eprop_feedback={feedback!r} (use one of {', '.join(FEEDBACKS)})")
        self.feedback = feedback
        self.seed = int(seed)
        self._random: dict[str, Tensor] = {}
        self._records: list[dict[str, Any]] = []

    def check(self, net: nn.Module, what: str) -> None:
        hint = "(use learning_rule=bptt, or a one-layer lif/alif backbone)"
        if not isinstance(net, SpikingBackbone):
            raise UserError(
                f"e-prop trains spiking backbones; the {what} is a {type(net).__name__} {hint}"
            )
        if net.backbone not in ("lif", "alif"):
            raise UserError(f"e-prop supports lif and alif backbones, not {net.backbone!r} {hint}")
        if net.n_layers != 1:
            raise UserError(
                f"e-prop takes its learning signal from the readout, so it trains one spiking "
                f"layer; the {what} has {net.n_layers} {hint}"
            )
        if net.readout is None or net.substeps != 1:
            raise UserError(f"e-prop needs an LI readout and substeps=1 for the {what} {hint}")
        layer = net.spiking_layers[0]
        if layer.learn_tau or layer.hh_init == "learned":
            raise UserError(
                f"e-prop does not train time constants or a learned initial state "
                f"(the {what} has learn_tau={layer.learn_tau}, hh_init={layer.hh_init!r})"
            )

    @contextlib.contextmanager
    def applied(self, agent: nn.Module) -> Iterator[None]:
        self._records = []
        names = list(agent.backbones)
        nets = {name: getattr(agent, name) for name in names}
        try:
            for name, net in nets.items():
                setattr(agent, name, _EPropRun(net, self, name))
            yield
        finally:
            for name, net in nets.items():
                setattr(agent, name, net)

    def feedback_matrix(self, name: str, net: SpikingBackbone) -> Tensor:
        """(N, K) the matrix that carries the readout's error back to the neurons: the
        effective readout weights (symmetric), or a fixed N(0, 1/N) matrix (random)."""
        w_out = net.readout.forward_weights.detach()
        if self.feedback == "symmetric":
            return w_out
        b = self._random.get(name)
        if b is None or b.shape != w_out.shape:
            gen = torch.Generator().manual_seed(self.seed * 1009 + sum(map(ord, name)))
            b = torch.randn(w_out.shape, generator=gen, dtype=torch.float64) / w_out.shape[0] ** 0.5
            self._random[name] = b
        return b.to(w_out.device, w_out.dtype)

    def backward(self, loss: Tensor) -> None:
        records, self._records = self._records, []
        loss.backward()
        for r in records:
            net: SpikingBackbone = r["net"]
            g_out = r["grad_out"]
            signal = r["z"].grad
            if g_out:
                readout = net.readout
                back = filter_backward(g_out[0], readout.decay("tau_m"), r["starts"])
                fb = back @ self.feedback_matrix(r["name"], net).T
                signal = fb if signal is None else signal + fb
            if signal is None:
                continue
            layer = net.spiking_layers[0]
            grads = eprop_layer_gradients(
                layer, r["x"], r["state"], signal, starts=r["starts"], fresh=r["fresh"]
            )
            apply_layer_gradients(layer, *grads)


class OnlineEProp(EProp):
    """e-prop run online across consecutive windows of one stream of experience (the
    actor-critic of Bellec et al. 2020's reward-based e-prop): each call of :meth:`backward`
    covers the window that follows the previous one, and the eligibility traces, with the
    readout-filtered traces ``F_kappa(e)``, are carried from window to window (restarted per
    row at episode starts, which :meth:`applied`'s sequences mark). The gradient of a window
    is ``sum_t L_t F_kappa(e)_t`` over its steps (:func:`eprop_online_gradients`): the weights
    change while episodes run, and memory does not grow with the episode's length.

    The caller must run each window exactly once, in order, with every row of the stream;
    :meth:`reset_traces` starts the traces over (new envs, every row at an episode start).
    """

    def __init__(self, feedback: str = "symmetric", seed: int = 0) -> None:
        super().__init__(feedback, seed)
        self.traces: dict[str, EligibilityState] = {}
        """The carried traces of each backbone's spiking layer, by backbone name."""

    def reset_traces(self) -> None:
        """Start every trace over at zero (the next window starts new episodes)."""
        self.traces = {}

    def restart_rows(self, rows: Tensor) -> None:
        """Start the carried traces over in the rows (bool (B,)) whose episode starts at the
        next window's first step. The window's sequence cannot say so itself: its state is
        already reset there, so its ``starts[0]`` is cleared before the backbone runs."""
        rows = torch.as_tensor(rows).bool()
        if bool(rows.any()):
            self.traces = {
                name: reset_rows(el, rows.to(el.eps_v.device)) for name, el in self.traces.items()
            }

    def backward(self, loss: Tensor) -> None:
        records, self._records = self._records, []
        loss.backward()
        for r in records:
            net: SpikingBackbone = r["net"]
            readout, layer = net.readout, net.spiking_layers[0]
            kappa = readout.decay("tau_m").reshape(-1)
            if not bool((kappa == kappa[0]).all()):
                raise UserError("online e-prop needs one readout time constant for all outputs")
            x = r["x"]
            if r["grad_out"]:
                signal = r["grad_out"][0] @ self.feedback_matrix(r["name"], net).T
            else:
                signal = x.new_zeros(*x.shape[:2], layer.output_size)
            grads, self.traces[r["name"]] = eprop_online_gradients(
                layer,
                x,
                r["state"],
                signal,
                self.traces.get(r["name"]),
                kappa=float(kappa[0]),
                local_signal=r["z"].grad,
                starts=r["starts"],
                fresh=r["fresh"],
            )
            apply_layer_gradients(layer, *grads)


class _EPropRun(nn.Module):
    """A backbone run the e-prop way (see :class:`EProp`): the spiking layer without a
    graph, the readout with one; records what :meth:`EProp.backward` needs."""

    supports_starts = True

    def __init__(self, net: SpikingBackbone, rule: EProp, name: str) -> None:
        super().__init__()
        self.net = net
        self.rule = rule
        self.name = name

    def run(
        self, x: Tensor, state: tuple, *, starts: Tensor | None = None, fresh: Any = None
    ) -> BackboneOutput:
        net = self.net
        if x.dim() != 3:
            raise UserError("an e-prop update runs whole sequences (T, B, F)")
        layer, readout = net.spiking_layers[0], net.readout
        f_layer, f_out = (None, None) if fresh is None else fresh
        if starts is not None:
            starts = torch.as_tensor(starts, device=x.device).bool()
        with torch.no_grad():
            hid = layer.run(x, state[0], starts=starts, fresh=f_layer)
        z = hid.out.detach().requires_grad_(True)
        out = readout.run(z.detach(), state[1], starts=starts, fresh=f_out)
        grad_out: list[Tensor] = []
        if out.out.requires_grad:
            out.out.register_hook(lambda g: grad_out.append(g))
        self.rule._records.append(
            {
                "net": net,
                "name": self.name,
                "x": x.detach(),
                "state": state[0],
                "starts": starts,
                "fresh": f_layer,
                "z": z,
                "grad_out": grad_out,
            }
        )
        name0 = net.spiking_names[0]
        activity = Activity(
            [
                layer_activity(name0, layer, hid._replace(out=z)),
                layer_activity("readout", readout, out),
            ]
        )
        return BackboneOutput(out.out, (hid.state, out.state), activity)

    def forward(self, x: Tensor, state: tuple) -> tuple[Tensor, tuple]:
        res = self.run(x, state)
        return res.out, res.state


def make_learning_rule(
    name: str,
    feedback: str = "symmetric",
    seed: int = 0,
    agent: nn.Module | None = None,
    *,
    online: bool = False,
) -> LearningRule:
    """The rule a config names (``learning_rule``, ``eprop_feedback``); with ``agent``, each
    of its backbones is checked (:meth:`LearningRule.check`). ``online``: e-prop with traces
    carried across calls (:class:`OnlineEProp`), for an algorithm that learns from
    consecutive windows of one stream.

    Raises:
        UserError: an unknown rule or feedback, or a backbone the rule cannot train.
    """
    if name == "bptt":
        rule: LearningRule = BPTT()
    elif name == "eprop":
        rule = (OnlineEProp if online else EProp)(feedback, seed)
    else:
        raise UserError(f"learning_rule={name!r} (use one of {', '.join(LEARNING_RULES)})")
    if agent is not None:
        for part in agent.backbones:
            rule.check(getattr(agent, part), part)
    return rule
