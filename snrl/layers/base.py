"""Shared shell of the recurrent layers: weights, Dale signs, masks, time constants, hh_init.

The neuron dynamics live in :mod:`snrl.functional.neurons`; a layer owns the parameters and
buffers, computes the input current ``I_t = x_t W_in + r_{t-1} W_rec + b`` and calls its
model's step function. Layers keep no state on themselves: it is always passed explicitly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import math
import operator
import threading
import weakref
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor, nn

from snrl.config import NEURON_DEFAULTS
from snrl.errors import UserError
from snrl.functional.dale import (
    check_sign_vector,
    dale_init,
    resolve_sign,
    signed_weights,
    spectral_radius,
)
from snrl.functional.state import mask_state
from snrl.functional.surrogate import SpikeFn
from snrl.layers.params import HH_INITS, LIFParameters, LIParameters

__all__ = ["HH_INITS", "LayerOutput", "RecurrentLayer", "SpikingLayer", "cached_weights"]


class LayerOutput(NamedTuple):
    """What a layer's ``run`` returns; ``out, state`` first, as the recurrent protocol."""

    out: Tensor
    """(B, N) or (T, B, N): spikes (spiking layers) or membrane (leaky integrator)."""
    state: Any
    """The state after the last step."""
    v: Tensor
    """(B, N) or (T, B, N): membrane potential after each step."""
    traces: Mapping[str, Tensor] = MappingProxyType({})
    """The model's other state variables after each step, by their state field name (ALIF:
    ``a``, the adaptation; SpyLIF: ``i``, the synaptic current), shaped like ``v``."""


_SCOPE = threading.local()  # .depth: nesting of cached_weights() blocks in this thread
_CACHED_LAYERS: weakref.WeakSet = weakref.WeakSet()
_version_of = operator.attrgetter("_version")


@contextlib.contextmanager
def cached_weights() -> Iterator[None]:
    """A block in which the layers compute their effective (signed, masked) weights once
    and reuse them while autograd is off, e.g. a rollout between two updates.

    Why a block and not a cache that lives on: an optimizer may write the parameters without
    bumping their version counters (torch's fused Adam does), so a long-lived cache could go
    stale unseen. Inside the block the parameters must not change except by ops that bump
    the version (``load_state_dict``, ``copy_``...), which the cache also checks; on leaving
    the outermost block every memo is dropped.
    """
    _SCOPE.depth = getattr(_SCOPE, "depth", 0) + 1
    try:
        yield
    finally:
        _SCOPE.depth -= 1
        if _SCOPE.depth == 0:
            for layer in list(_CACHED_LAYERS):
                layer._weight_memo.clear()
            _CACHED_LAYERS.clear()


def caching() -> bool:
    """Whether a :func:`cached_weights` block is open in this thread (and not in inference
    mode, whose tensors cannot be reused outside it)."""
    return getattr(_SCOPE, "depth", 0) > 0 and not torch.is_inference_mode_enabled()


def _seed_from_global() -> int:
    """A seed drawn from the global torch RNG (so ``torch.manual_seed`` makes runs repeat)."""
    return int(torch.randint(0, 2**62, (1,)).item())


class _FromParams:
    """A read-only layer attribute that reads the field of the same name of ``params`` (its
    docstring is the attribute's)."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, layer: Any, owner: type | None = None) -> Any:
        return self if layer is None else getattr(layer.params, self.name)

    def __set__(self, layer: Any, value: Any) -> None:
        raise AttributeError(f"{self.name} is read-only (give it in params)")


class TimeConstant(_FromParams):
    """A read-only (N,) time constant in seconds: ``exp`` of the layer's ``log_<name>``."""

    def __get__(self, layer: Any, owner: type | None = None) -> Any:
        return self if layer is None else getattr(layer, "log_" + self.name).exp()


class Drive(NamedTuple):
    """What drives a layer's dynamics in one call: ``u`` ((B, N) one step or (T, B, N)), the
    effective recurrent weights ``w_rec`` (or None), and where episodes start inside the
    sequence, ``starts`` (bool (T, B)) with the ``fresh`` states put there (fields (T, B, N))."""

    u: Tensor
    w_rec: Tensor | None
    starts: Tensor | None = None
    fresh: Any = None


class _ConstructorSignature:
    """``inspect.signature`` of a layer class: its constructor with the neuron keywords
    spelled out (the fields of its parameter object, with their defaults), as ``help()``
    and editors show it. On an instance it is None, so a layer's own call signature is
    found as usual."""

    def __get__(self, obj: Any, owner: type) -> inspect.Signature | None:
        return None if obj is not None else owner._constructor_signature()


def decay_of(log_tau: Tensor, dt: float) -> Tensor:
    """``exp(-dt / tau)`` of a time constant stored as ``log(tau)`` (seconds): the one
    formula every layer's decay (and an import that must match it exactly) uses."""
    return torch.exp(-dt * torch.exp(-log_tau))


class RecurrentLayer(nn.Module):
    """Base of :class:`LIFLayer`, :class:`ALIFLayer`, :class:`SpyLIFLayer`, :class:`LILayer`.

    A layer is built from its wiring (the arguments below) and one frozen parameter object
    of its model, ``params_type`` (:mod:`snrl.layers.params`): given as ``params=``, or as
    keywords, one per field of that object (``tau_m=..., threshold=...``), from which the
    layer builds it. The object is kept unchanged as ``layer.params``; the neuron
    attributes (``layer.tau_m``, ``layer.threshold`` ...) read it.

    Args:
        input_size: F, features per input step.
        output_size: N, number of neurons.
        params: the neuron parameters, an instance of exactly ``params_type`` (None: built
            from the neuron keywords, each field's default where not given).
        use_recurrent_connection: add ``r_{t-1} W_rec`` to the input current (default True;
            :class:`LILayer` False).
        use_rec_eye_mask: no autapses (zero diagonal of ``W_rec``, no gradient on it).
        force_dale_law: sign-constrain the recurrent weights by ``recurrent_sign``.
        forward_sign: None (free input weights) or a ±1 (input_size,) tensor: input row i has
            the sign ``forward_sign[i]``.
        recurrent_sign: fraction of inhibitory neurons (float) or a ±1 (N,) tensor (used only
            with ``force_dale_law``).
        hh_init_seed: seed of the layer's own generator for ``hh_init="random"`` (None: from
            the global torch RNG).
        seed: seed of the layer's generator for weight init and the choice of inhibitory
            neurons (None: drawn from the global torch RNG).
        **neuron: the fields of ``params_type`` as keywords (not together with ``params``).

    Subclasses set ``state_type``, ``params_type``, ``random_fields`` and implement
    ``_constants``, ``_step`` and ``_feedback``.
    """

    state_type: ClassVar[type]
    params_type: ClassVar[type[LIParameters]] = LIParameters
    """The model's parameter object (:mod:`snrl.layers.params`)."""
    recurrent_default: ClassVar[bool] = True
    """``use_recurrent_connection`` when not given."""
    random_fields: ClassVar[tuple[str, ...]] = ("v",)
    """Continuous state variables drawn from Normal(mu, std) by ``hh_init="random"``."""
    __signature__ = _ConstructorSignature()

    def __init__(
        self,
        input_size: int,
        output_size: int,
        *,
        params: LIParameters | None = None,
        use_recurrent_connection: bool | None = None,
        use_rec_eye_mask: bool = True,
        force_dale_law: bool = NEURON_DEFAULTS["force_dale_law"],
        forward_sign: Tensor | None = None,
        recurrent_sign: float | Tensor = NEURON_DEFAULTS["recurrent_sign"],
        hh_init_seed: int | None = None,
        seed: int | None = None,
        **neuron: Any,
    ) -> None:
        super().__init__()
        for name, n in (("input_size", input_size), ("output_size", output_size)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise UserError(f"{name}={n!r} is not a positive integer (give a size >= 1)")
        params = self.make_params(params, **neuron)
        if params.hh_init == "inputs" and input_size != output_size:
            raise UserError(
                f"hh_init='inputs' needs input_size == output_size, got {input_size} != "
                f"{output_size} (use another hh_init or equal sizes)"
            )
        if use_recurrent_connection is None:
            use_recurrent_connection = self.recurrent_default
        self.params = params
        self.input_size = input_size
        self.output_size = output_size
        self.use_recurrent_connection = bool(use_recurrent_connection)
        self.use_rec_eye_mask = bool(use_rec_eye_mask)
        self.force_dale_law = bool(force_dale_law)
        self.seed = _seed_from_global() if seed is None else int(seed)
        self.hh_init_seed = _seed_from_global() if hh_init_seed is None else int(hh_init_seed)
        # Which of the layer's current-noise streams it draws (0 by default): a copy that
        # must not repeat the original's noise (DQN's target network) takes another.
        self.noise_stream = 0

        gen = torch.Generator().manual_seed(self.seed)
        n = output_size
        # nn.Linear-like scale: raw W ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)); signed matrices are
        # then balanced (snrl.functional.dale.dale_init): each neuron's input sums to 0 and has
        # the unconstrained input variance, and a Dale recurrent matrix gets the spectral
        # radius the same layer has without Dale.
        k_in = 1.0 / math.sqrt(input_size)
        w_in = (torch.rand(input_size, n, generator=gen) * 2 - 1) * k_in
        w_rec = None
        if self.use_recurrent_connection:
            k_rec = 1.0 / math.sqrt(n)
            w_rec = (torch.rand(n, n, generator=gen) * 2 - 1) * k_rec
        rsign = resolve_sign(recurrent_sign, n, gen, "recurrent_sign") if force_dale_law else None
        fsign = None
        if forward_sign is not None:
            fsign = check_sign_vector(forward_sign, input_size, "forward_sign")
        if fsign is not None:
            w_in = dale_init(w_in, fsign)
        if w_rec is not None and rsign is not None:
            w_rec = self._balanced_recurrent(w_rec, rsign)
        self.weight_in = nn.Parameter(w_in)
        self.bias = nn.Parameter(torch.zeros(n))
        self.register_parameter("weight_rec", None if w_rec is None else nn.Parameter(w_rec))
        # Derived from the flags, never loaded: a persisted mask with negative entries would
        # flip every sign (old checkpoints that carry it are checked in _load_from_state_dict).
        self.register_buffer("rec_mask", self._derived_mask(), persistent=False)
        self.register_buffer("recurrent_sign", rsign)
        self.register_buffer("forward_sign", fsign)
        first, *others = params.time_constants
        self._add_tau(first, getattr(params, first))
        if params.hh_init == "learned":
            self.h0 = nn.Parameter(torch.full((n,), self.hh_init_mu))
        else:
            self.register_parameter("h0", None)
        for name in others:  # after h0: the order of parameters and buffers of old versions
            self._add_tau(name, getattr(params, name))
        self._hh_generator = torch.Generator().manual_seed(self.hh_init_seed)
        self._noise_generators: dict[torch.device, torch.Generator] = {}
        self._decay_memo: dict[str, tuple] = {}
        self._weight_memo: dict[str, tuple] = {}

    # ----------------------------------------------------------------- construction
    @classmethod
    def make_params(cls, params: LIParameters | None = None, **neuron: Any) -> LIParameters:
        """The layer's parameter object: ``params`` as given (checked to be exactly
        :attr:`params_type`), or built from the neuron keywords.

        Raises:
            TypeError: a keyword that is no field of :attr:`params_type`.
            UserError: ``params`` and keywords together, or ``params`` of another model.
        """
        ptype = cls.params_type
        if params is None:
            names = {f.name for f in dataclasses.fields(ptype)}
            unknown = sorted(set(neuron) - names)
            if unknown:
                raise TypeError(
                    f"{cls.__name__}() got an unexpected keyword argument {unknown[0]!r} "
                    f"(its neuron keywords: {', '.join(sorted(names))})"
                )
            return ptype(**neuron)
        if neuron:
            raise UserError(
                f"{cls.__name__} got params= and the neuron keywords {', '.join(sorted(neuron))}"
                " (pass one of them: e.g. dataclasses.replace(params, ...))"
            )
        if type(params) is not ptype:
            raise UserError(
                f"{cls.__name__} takes {ptype.__name__}, got params={type(params).__name__} "
                f"(build it with snrl.layers.{ptype.__name__}(...))"
            )
        return params

    @classmethod
    def _constructor_signature(cls) -> inspect.Signature:
        own = inspect.signature(cls.__init__)
        kept = [p for name, p in own.parameters.items() if name not in ("self", "neuron")]
        kept = [
            p.replace(default=cls.recurrent_default, annotation="bool")
            if p.name == "use_recurrent_connection"
            else p
            for p in kept
        ]
        neuron = [
            inspect.Parameter(
                f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type
            )
            for f in dataclasses.fields(cls.params_type)
        ]
        return own.replace(parameters=kept + neuron)

    # ----------------------------------------------------------------- neuron attributes
    @property
    def dt(self) -> float:
        """Integration step, seconds. Setting it replaces :attr:`params` by a copy with the
        new value (checked)."""
        return self.params.dt

    @dt.setter
    def dt(self, value: float) -> None:
        self.params = dataclasses.replace(self.params, dt=value)

    hh_init = _FromParams("The initial hidden state rule (``params.hh_init``).")
    hh_init_mu = _FromParams("Mean of the random initial membrane (``params.hh_init_mu``).")
    hh_init_std = _FromParams("Std of the random initial membrane (``params.hh_init_std``).")
    learn_tau = _FromParams("Whether the time constants are trained (``params.learn_tau``).")

    # ----------------------------------------------------------------- parameters
    def _balanced_recurrent(self, w_raw: Tensor, sign: Tensor) -> Tensor:
        """Raw Dale recurrent weights: :func:`dale_init`, then scaled to the spectral radius
        of ``w_raw`` masked, the matrix this layer would use without Dale."""
        mask = self._derived_mask()
        w = dale_init(w_raw, sign, mask)
        if not bool((sign < 0).any() & (sign > 0).any()):
            return w  # one sign only: no balance possible, left as drawn
        target = spectral_radius(w_raw if mask is None else w_raw * mask)
        now = spectral_radius(signed_weights(w, sign, mask))
        return w * (target / now) if now > 0 and target > 0 else w

    def _add_tau(self, name: str, value: float | Tensor) -> None:
        """Register ``log_<name>`` (N,), a Parameter if ``learn_tau`` else a buffer, from
        the checked value of the parameter object (a float, or a float32 CPU tensor)."""
        n = self.output_size
        if isinstance(value, Tensor):
            tau = value.expand(n).clone() if value.dim() == 0 else value.clone()
            if tau.shape != (n,):
                raise UserError(
                    f"{name} has shape {tuple(tau.shape)}, expected a float or ({n},) per neuron"
                )
        else:
            tau = torch.full((n,), float(value))
        log_tau = tau.log()
        if self.learn_tau:
            setattr(self, f"log_{name}", nn.Parameter(log_tau))
        else:
            self.register_buffer(f"log_{name}", log_tau)

    def decay(self, name: str) -> Tensor:
        """(N,) ``exp(-dt / tau)`` per step for the time constant ``name``, one of
        ``params.time_constants`` (``"tau_m"``; ALIF ``"tau_a"``; SpyLIF ``"tau_syn"``): the
        decay the step function uses (learning rules and exports read it here).

        A fixed (buffer) time constant's decay is memoized on the buffer's identity and
        version counter, which every in-place write (``load_state_dict``, ``copy_``) bumps.
        """
        log_tau = getattr(self, f"log_{name}")
        if log_tau.requires_grad:
            return decay_of(log_tau, self.dt)
        key = (log_tau.data_ptr(), log_tau._version, log_tau.device, log_tau.dtype, self.dt)
        hit = self._decay_memo.get(name)
        if hit is None or hit[0] != key:
            hit = (key, decay_of(log_tau, self.dt))
            self._decay_memo[name] = hit
        return hit[1]

    def __getstate__(self) -> dict:
        # A copy (deepcopy, pickle) starts without memos: they hold the original's tensors
        # and version numbers, which the copy's new tensors could match by chance.
        state = dict(super().__getstate__())
        state["_decay_memo"], state["_weight_memo"] = {}, {}
        state["_noise_generators"] = {}  # a copy's current noise starts again from its seed
        return state

    tau_m = TimeConstant("(N,) membrane time constant in seconds (always positive).")

    @property
    def forward_weights(self) -> Tensor:
        """(input_size, output_size) effective input weights (signed if ``forward_sign``)."""
        return self._effective("in", self.weight_in, self.forward_sign, None)

    def _rec_weights(self) -> Tensor | None:
        if self.weight_rec is None:
            return None
        return self._effective("rec", self.weight_rec, self.recurrent_sign, self.rec_mask)

    def _effective(self, name: str, w: Tensor, sign: Tensor | None, mask: Tensor | None) -> Tensor:
        """:func:`signed_weights` of ``w``; inside :func:`cached_weights` without autograd
        (rollouts) computed once and reused while ``w``, ``sign`` and ``mask`` are the same
        tensors at the same version and storage (``load_state_dict``, ``copy_`` and other
        in-place writes bump the version; ``.to()`` swaps the storage)."""
        if sign is None and mask is None:
            return w
        if not caching() or torch.is_grad_enabled() and w.requires_grad:
            return signed_weights(w, sign, mask)
        _CACHED_LAYERS.add(self)
        parts = (w, sign, mask)
        versions = [
            None if t is None else (t._version, t.data_ptr(), t.dtype, t.device) for t in parts
        ]
        hit = self._weight_memo.get(name)
        # the memo holds the tensors themselves, so identity cannot be a reused address
        if (
            hit is None
            or hit[1] != versions
            or hit[0][0] is not w
            or hit[0][1] is not sign
            or hit[0][2] is not mask
        ):
            with torch.no_grad():
                hit = (parts, versions, signed_weights(w, sign, mask))
            self._weight_memo[name] = hit
        return hit[2]

    def _frozen(self) -> tuple[Tensor, Tensor | None, tuple]:
        """(input weights, recurrent weights, :meth:`_constants`) for no-grad steps inside
        :func:`cached_weights`: computed once and reused while every parameter and buffer of
        the layer is the same tensor at the same version and storage, and ``dt`` the same
        (one check per step where the parts would make one each; the per-tensor reads run in
        ``map``, not in Python bytecode, since a rollout step is only ~20 us)."""
        own = (*self._parameters.values(), *self._buffers.values())
        # ids are safe: the memo holds the tensors, so no other tensor can reuse their ids
        ids = tuple(map(id, own))
        hit = self._weight_memo.get("step")
        if hit is not None and hit[0] == ids and hit[1] == self.dt:
            tensors = hit[2]
            if (
                tuple(map(_version_of, tensors)) == hit[3]
                and tuple(map(Tensor.data_ptr, tensors)) == hit[4]
            ):
                return hit[5]
        _CACHED_LAYERS.add(self)
        tensors = tuple(t for t in own if t is not None)
        versions = tuple(map(_version_of, tensors))
        ptrs = tuple(map(Tensor.data_ptr, tensors))
        parts = (self.forward_weights, self._rec_weights(), self._constants())
        self._weight_memo["step"] = (ids, self.dt, tensors, versions, ptrs, parts)
        return parts

    @property
    def recurrent_weights(self) -> Tensor:
        """(output_size, output_size) effective recurrent weights (zeros without recurrence).

        Row i holds the outgoing synapses of neuron i; with Dale's law its nonzero entries
        all have the sign ``recurrent_sign[i]``.
        """
        w = self._rec_weights()
        if w is None:
            n = self.output_size
            return torch.zeros(n, n, device=self.weight_in.device, dtype=self.weight_in.dtype)
        return w

    def _derived_mask(self) -> Tensor | None:
        """The recurrent mask the constructor flags imply: no autapses, or None."""
        if self.use_recurrent_connection and self.use_rec_eye_mask:
            return 1.0 - torch.eye(self.output_size)
        return None

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # noqa: ANN001
        for name, n in (("recurrent_sign", self.output_size), ("forward_sign", self.input_size)):
            if state_dict.get(prefix + name) is not None:
                check_sign_vector(state_dict[prefix + name], n, prefix + name)
        # Checkpoints written before the mask stopped being persisted carry it: accept it
        # only if it is the mask this layer derives from its flags (then drop it).
        loaded = state_dict.pop(prefix + "rec_mask", None)
        if loaded is not None:
            mask = self._derived_mask()
            loaded = torch.as_tensor(loaded).detach().cpu()
            if mask is None or loaded.shape != mask.shape or not torch.equal(loaded.float(), mask):
                raise UserError(
                    f"{prefix}rec_mask in the state dict does not match the mask implied by "
                    f"use_recurrent_connection={self.use_recurrent_connection}, "
                    f"use_rec_eye_mask={self.use_rec_eye_mask} (the mask is derived from these "
                    "flags; load a state dict saved by a layer built with the same flags)"
                )
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    # ----------------------------------------------------------------- state
    def _device_dtype(self) -> tuple[torch.device, torch.dtype]:
        return self.weight_in.device, self.weight_in.dtype

    def initial_state(
        self,
        batch_size: int,
        *,
        h0: Tensor | None = None,
        inputs: Tensor | None = None,
        device: torch.device | str | None = None,
    ) -> Any:
        """A fresh state for ``batch_size`` rows, by the layer's ``hh_init`` rule.

        Args:
            batch_size: B.
            h0: initial membrane (N,) or (B, N); required by (and only allowed with)
                ``hh_init="given"``.
            inputs: (B, input_size) input setting the membrane for ``hh_init="inputs"``
                (ignored by the other modes).
            device: where to put the state (default: the layer's device).

        Returns:
            The model's state NamedTuple, each field (B, N). Spikes start at 0.
        """
        b = int(batch_size)
        if b < 1:
            raise UserError(f"batch_size={batch_size!r} is not positive (give a batch size >= 1)")
        dev, dtype = self._device_dtype()
        dev = dev if device is None else torch.device(device)
        n = self.output_size
        if h0 is not None and self.hh_init != "given":
            raise UserError(f"h0 was given but hh_init={self.hh_init!r} (use hh_init='given')")
        fields = {f: torch.zeros(b, n, device=dev, dtype=dtype) for f in self.state_type._fields}
        mode = self.hh_init
        if mode == "random":
            for f in self.random_fields:
                r = torch.randn(b, n, generator=self._hh_generator)
                fields[f] = (r * self.hh_init_std + self.hh_init_mu).to(dev, dtype)
        elif mode == "inputs":
            if inputs is None:
                raise UserError("hh_init='inputs' needs initial_state(..., inputs=x) (x: (B, F))")
            if tuple(inputs.shape) != (b, self.input_size):
                raise UserError(
                    f"inputs has shape {tuple(inputs.shape)}, expected ({b}, {self.input_size})"
                    " (one input row per batch element)"
                )
            fields["v"] = inputs.to(dev, dtype)
        elif mode == "given":
            if h0 is None:
                raise UserError("hh_init='given' needs initial_state(..., h0=...) ((N,) or (B, N))")
            if tuple(h0.shape) not in ((n,), (b, n)):
                raise UserError(
                    f"h0 has shape {tuple(h0.shape)}, expected ({n},) or ({b}, {n})"
                    " (one membrane value per neuron, optionally per batch row)"
                )
            fields["v"] = fields["v"] + h0.to(dev, dtype)
        elif mode == "learned":
            fields["v"] = fields["v"] + self.h0.to(dev, dtype)
        return self.state_type(**fields)

    def reset_state(
        self,
        state: Any,
        done: Tensor,
        *,
        h0: Tensor | None = None,
        inputs: Tensor | None = None,
    ) -> Any:
        """Re-initialize the rows of ``state`` where ``done`` is True (others are kept).

        Args:
            state: the current state (B, N) per field.
            done: bool (B,).
            h0: as in :meth:`initial_state`.
            inputs: as in :meth:`initial_state` ((B, input_size); only done rows are used).
        """
        v = state[0]
        done = torch.as_tensor(done, device=v.device)
        if done.shape != (v.shape[0],):
            raise UserError(
                f"done has shape {tuple(done.shape)} but the state has batch {v.shape[0]} "
                f"(pass a bool ({v.shape[0]},) tensor)"
            )
        fresh = self.initial_state(v.shape[0], h0=h0, inputs=inputs, device=v.device)
        return mask_state(done.bool(), fresh, self.state_type(*state))

    def check_state(self, x: Tensor, state: Any) -> Any:
        """The ``state`` for input ``x`` ((B, F) or (T, B, F)) as the model's NamedTuple, its
        shapes checked (what :meth:`run` does first).

        Raises:
            UserError: an input without ``input_size`` features, a state of other fields or
                of another batch size.
        """
        shape = x.shape
        if type(state) is self.state_type and len(shape) in (2, 3) and shape[-1] == self.input_size:
            bn = (shape[-2], self.output_size)  # the usual case, in few Python ops (per step)
            for t in state:
                if t.shape != bn:
                    break
            else:
                return state
        if x.dim() not in (2, 3) or x.shape[-1] != self.input_size:
            raise UserError(
                f"input has shape {tuple(x.shape)}, expected (B, {self.input_size}) or "
                f"(T, B, {self.input_size})"
            )
        fields = self.state_type._fields
        if not isinstance(state, tuple) or len(state) != len(fields):
            raise UserError(
                f"state must be a {self.state_type.__name__}{fields}, got {type(state).__name__}"
                " (use initial_state(batch_size))"
            )
        b, n = x.shape[-2], self.output_size
        for f, t in zip(fields, state):
            if t.shape != (b, n):
                raise UserError(
                    f"state.{f} has shape {tuple(t.shape)} but the input {tuple(x.shape)} needs "
                    f"({b}, {n}) (make the state with initial_state({b}) or reset_state)"
                )
        return state if type(state) is self.state_type else self.state_type(*state)

    # ----------------------------------------------------------------- dynamics
    def _constants(self) -> tuple:
        """Per-call model constants, computed once per forward call: the decay per step of
        each of ``params.time_constants``, in that order."""
        return tuple(self.decay(name) for name in self.params.time_constants)

    def _step(self, current: Tensor, state: Any, consts: tuple, spike_fn: SpikeFn | None) -> tuple:
        raise NotImplementedError

    def _feedback(self, state: Any) -> Tensor:
        """The recurrent signal ``r_{t-1}`` multiplied by ``W_rec``."""
        return state.z

    def _project(self, x: Tensor) -> Tensor:
        """``x W_in + b`` for all time steps at once."""
        w = self.forward_weights
        if x.dim() == 2:
            return torch.addmm(self.bias, x, w)
        t, b, f = x.shape
        return torch.addmm(self.bias, x.reshape(t * b, f), w).reshape(t, b, -1)

    def _integrate(
        self, drive: Drive, state: Any, consts: tuple, spike_fn: SpikeFn | None
    ) -> LayerOutput:
        """Loop the step function over ``drive.u``; where ``starts[t]`` the state before step
        t is replaced by ``fresh``, in the same loop (autograd sees the replacement)."""
        u, w_rec, starts, fresh = drive
        seq = u.dim() == 3
        names = [f for f in state._fields if f not in ("v", "z")]  # the model's own variables
        outs, vs = [], []
        traces: dict[str, list[Tensor]] = {f: [] for f in names}
        marks = starts.any(1).tolist() if starts is not None else None
        for t, u_t in enumerate(u.unbind(0) if seq else (u,)):
            if marks is not None and marks[t]:
                state = mask_state(starts[t], self.state_type(*(f[t] for f in fresh)), state)
            cur = u_t if w_rec is None else torch.addmm(u_t, self._feedback(state), w_rec)
            out, state = self._step(cur, state, consts, spike_fn)
            outs.append(out)
            vs.append(state.v)
            for f in names:
                traces[f].append(getattr(state, f))
        if seq:
            stacked = {f: torch.stack(ts) for f, ts in traces.items()}
            return LayerOutput(torch.stack(outs), state, torch.stack(vs), stacked)
        return LayerOutput(outs[0], state, vs[0], {f: ts[0] for f, ts in traces.items()})

    def reset_values(self) -> Any:
        """The state a reset puts in a row, as the model's state of (N,) or scalar tensors
        (zeros, or the learned membrane): what :meth:`run`'s ``starts`` uses by default.

        Raises:
            UserError: for ``hh_init`` ``"random"``, ``"inputs"`` and ``"given"``, whose
                reset values are not fixed (pass ``fresh`` to :meth:`run`).
        """
        if self.hh_init not in ("zeros", "learned"):
            raise UserError(
                f"a reset with hh_init={self.hh_init!r} has no fixed value (pass the fresh "
                "states, e.g. those recorded in the rollout, as run(..., fresh=...))"
            )
        dev, dtype = self._device_dtype()
        zero = torch.zeros((), device=dev, dtype=dtype)
        fields = {f: zero for f in self.state_type._fields}
        if self.hh_init == "learned":
            fields["v"] = zero + self.h0
        return self.state_type(**fields)

    def fresh_sequence(self, u: Tensor, starts: Tensor | None, fresh: Any) -> Any:
        """The states that replace the rows at the episode ``starts`` (bool (T, B)) of a
        sequence ``u`` (T, B, ...): ``fresh`` (default :meth:`reset_values`) with every field
        expanded to ``u``'s shape, as :meth:`run` uses them; None without ``starts``."""
        if starts is None:
            return None
        if tuple(starts.shape) != tuple(u.shape[:2]) or u.dim() != 3:
            raise UserError(
                f"starts has shape {tuple(starts.shape)} for an input of shape {tuple(u.shape)}"
                " (pass a bool (T, B) tensor with a (T, B, F) sequence)"
            )
        fresh = self.reset_values() if fresh is None else fresh
        return self.state_type(*(f.to(u.dtype).expand(u.shape) for f in fresh))

    def _spike_fn(self) -> SpikeFn | None:
        return None

    def noise_on(self) -> bool:
        """Whether this layer adds current noise now: a spiking layer with
        ``params.noise_std > 0``, in training mode."""
        return self.training and getattr(self.params, "noise_std", 0.0) > 0

    def _noisy(self, u: Tensor) -> Tensor:
        """The input current ``u`` ((B, N) or (T, B, N): one row per neuron step) plus
        ``noise_std`` times standard Gaussian noise, independent per neuron and step, from the
        layer's own generator (seeded from the layer's ``seed`` and ``noise_stream``, one per
        device), when :meth:`noise_on`; else ``u`` itself."""
        if not self.noise_on():
            return u
        gen = self._noise_generators.get(u.device)
        if gen is None:  # the layer's seed mixed, so the stream is not its weights' stream
            mixed = self.seed * 0x9E3779B97F4A7C15 + 0x6E6F697365
            mixed += self.noise_stream * 0xBF58476D1CE4E5B9
            gen = torch.Generator(device=u.device).manual_seed(mixed % 2**63)
            self._noise_generators[u.device] = gen
        eps = torch.randn(u.shape, generator=gen, device=u.device, dtype=u.dtype)
        return torch.add(u, eps, alpha=self.params.noise_std)

    def run(
        self, x: Tensor, state: Any, *, starts: Tensor | None = None, fresh: Any = None
    ) -> LayerOutput:
        """Run one step (x: (B, F)) or a sequence (x: (T, B, F)).

        Args:
            x: the input.
            state: the state before the first step.
            starts: optional bool (T, B) for a sequence: row b starts a new episode at step
                t, so its state before step t is replaced (all in one call; the gradient of a
                replaced state goes to the fresh state, not to the step before).
            fresh: the replacement, a state of this layer's type whose fields broadcast to
                (T, B, N) (default :meth:`reset_values`: zeros or the learned membrane).

        Returns:
            ``LayerOutput(out, state, v)``: outputs after each step, shaped like the input's
            leading dims with N features, the state after the last step, and the membranes
            after each step (shaped like ``out``).
        """
        state = self.check_state(x, state)
        if starts is None and x.dim() == 2 and not torch.is_grad_enabled() and caching():
            w_in, w_rec, consts = self._frozen()  # a rollout step: one memo check
            u = self._noisy(torch.addmm(self.bias, x, w_in))
            return self._integrate(Drive(u, w_rec), state, consts, None)
        u = self._noisy(self._project(x))
        if starts is not None:
            starts = torch.as_tensor(starts, device=u.device).bool()
            fresh = self.fresh_sequence(u, starts, fresh)
            if not bool(starts.any()):
                starts = fresh = None
        drive = Drive(u, self._rec_weights(), starts, fresh)
        return self._integrate(drive, state, self._constants(), self._spike_fn())

    def forward(self, x: Tensor, state: Any) -> tuple[Tensor, Any]:
        """``(out, new_state)``: :meth:`run` without the membranes."""
        res = self.run(x, state)
        return res.out, res.state

    def extra_repr(self) -> str:
        return (
            f"{self.input_size}, {self.output_size}, recurrent={self.use_recurrent_connection}, "
            f"dale={self.force_dale_law}, hh_init={self.hh_init!r}"
        )


class SpikingLayer(RecurrentLayer):
    """Base of the spiking layers: threshold, reset and surrogate gradient (the fields of
    :class:`~snrl.layers.params.LIFParameters`)."""

    params_type: ClassVar[type[LIParameters]] = LIFParameters
    params: LIFParameters

    threshold = _FromParams("Spike threshold, membrane units (``params.threshold``).")
    reset = _FromParams('``"subtract"`` or ``"zero"`` (``params.reset``).')
    spike_grad = _FromParams(
        "The surrogate spike function used with autograd (``params.spike_grad``)."
    )

    def _spike_fn(self) -> SpikeFn | None:
        """The surrogate when autograd is on, else None (a plain ``v > threshold``)."""
        return self.params.spike_grad if torch.is_grad_enabled() else None
