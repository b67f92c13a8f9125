"""Adam over one flat buffer of parameters (DQN's and PPO's optimizer).

A gradient step on a small network spends about as much time on per-tensor bookkeeping as on
its products: zeroing each gradient, a global-norm clip that takes each tensor's norm, and an
Adam step that walks each tensor (on DQN's 2x256 MLP about a quarter of the step).
:class:`FlatAdam` moves the trainable parameters into one contiguous buffer, each parameter a
view of its slice, and their gradients into another; zeroing and the clip are then one kernel
each over the whole buffer, and so is the Adam step: torch's fused kernel called directly
(:meth:`FlatAdam.update`), without ``torch.optim.Adam.step``'s per-call bookkeeping, which
costs several times the arithmetic on such a network (docs/benchmarks.md#speed-issue-11).

The parameters stay leaves of their modules (forward, backward, ``state_dict``,
``load_state_dict`` and ``copy_`` work unchanged). Autograd adds each new gradient into the
view in place. Anything that rebinds a parameter's storage or gradient (``p.data = ...``,
``p.grad = None``, ``module.to(...)``) is noticed before the next step and the views are
rebuilt from the current values.

With ``fused=False`` (PPO) the arithmetic is exactly ``torch.optim.Adam``'s on the CPU (its
single-tensor path: the same elementwise ops, so one flat tensor rounds as the per-tensor loop
does) and the clip is exactly ``nn.utils.clip_grad_norm_``'s (each gradient's norm, then the
norm of those, a float32 coefficient clamped at 1): runs step bit for bit as with those two,
and only the per-call bookkeeping goes (~1 ms of a ~5 ms PPO minibatch step on CartPole).
``fused=True`` (DQN) takes torch's fused kernel and one norm over the flat buffer, which round
differently (to ~1e-8).

Two differences from ``torch.optim.Adam`` with ``zero_grad(set_to_none=True)``:

- a parameter that got no gradient in a step is stepped with a zero gradient (its moments
  decay and its momentum moves it), as with ``set_to_none=False``;
- the state dict holds one flat entry; a per-tensor state dict (older checkpoints) is
  flattened on load.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim.adam import adam

from snrl.errors import UserError
from snrl.functional.grad import lazy_no_grad

_MOMENTS = ("exp_avg", "exp_avg_sq")


def _adam_step(
    p: Tensor, g: Tensor, m: Tensor, v: Tensor, step: Tensor, *, fused: bool, **hyper: float
) -> None:
    """One Adam step of ``p`` in place (moments ``m``, ``v``; ``step`` a float tensor, counted
    up): torch's fused kernel, or torch's public functional ``adam`` (single-tensor)."""
    args = ([p], [g], [m], [v], [], [step])
    if fused:
        step += 1  # the kernel reads the step; torch's own wrapper counts it up
        torch._fused_adam_(*args, amsgrad=False, maximize=False, **hyper)
    else:
        adam(*args, foreach=False, fused=False, amsgrad=False, maximize=False, **hyper)


@functools.cache
def _fused_kernel_works() -> bool:
    """Whether ``torch._fused_adam_`` (torch's private fused kernel, ~30 us on a 2x256 MLP
    against ~100 us for the public functional Adam) exists here and steps a small tensor as
    the public functional Adam does; :class:`FlatAdam` falls back to the latter if not."""
    hyper = dict(lr=0.1, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8)
    try:
        g = torch.linspace(-1.0, 1.0, 37)
        outs = []
        for fused in (True, False):
            state = (torch.linspace(0.5, -0.5, 37), torch.zeros(37), torch.zeros(37))
            step = torch.tensor(0.0)
            for _ in range(3):
                _adam_step(state[0], g, *state[1:], step, fused=fused, **hyper)
            outs.append((*state, step))
        return all(torch.allclose(a, b, atol=1e-6) for a, b in zip(*outs))
    except Exception:  # absent, renamed, or a new signature: the public path
        return False


class FlatAdam(torch.optim.Adam):
    """Adam on one flat copy of ``params`` (the trainable ones).

    Args:
        params: the parameters to train (those with ``requires_grad``; one device and dtype,
            where they stay: build the optimizer after moving the module).
        lr: learning rate.
        eps: Adam's epsilon.
        fused: torch's fused Adam kernel (where the probe finds it works) and one norm of the
            flat gradient for the clip; False: ``torch.optim.Adam``'s and
            ``nn.utils.clip_grad_norm_``'s own arithmetic, bit for bit.
        betas: Adam's moment decay rates.
        weight_decay: L2 weight decay added to the gradient (``torch.optim.Adam``'s).
    """

    def __init__(
        self,
        params: Iterable[Tensor],
        lr: float,
        eps: float = 1e-8,
        *,
        fused: bool = True,
        betas: tuple[float, float] = (0.9, 0.999),
        weight_decay: float = 0.0,
    ) -> None:
        self.fused = bool(fused)
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise UserError("FlatAdam got no trainable parameters")
        first = self.params[0]
        if any(p.device != first.device or p.dtype != first.dtype for p in self.params):
            raise UserError(
                "FlatAdam needs every parameter on one device with one dtype (got "
                f"{sorted({f'{p.device}/{p.dtype}' for p in self.params})})"
            )
        n = sum(p.numel() for p in self.params)
        self.flat = nn.Parameter(torch.zeros(n, dtype=first.dtype, device=first.device))
        self.flat.grad = torch.zeros_like(self.flat)
        self._bind()
        super().__init__(
            [self.flat], lr=lr, eps=eps, betas=betas, weight_decay=weight_decay, foreach=False
        )

    # ---- the views ---------------------------------------------------------------------
    def _slices(self):
        o = 0
        for p in self.params:
            k = p.numel()
            yield p, o, k
            o += k

    def _bind(self) -> None:
        """Copy every parameter's value and gradient into the flat buffers and make the
        parameter and its ``.grad`` views of them."""
        data, grad = self.flat.data, self.flat.grad
        with torch.no_grad():
            for p, o, k in self._slices():
                data[o : o + k].copy_(p.detach().reshape(-1))
                if p.grad is None:
                    grad[o : o + k].zero_()
                else:
                    grad[o : o + k].copy_(p.grad.reshape(-1))
                p.data = data[o : o + k].view_as(p)
                p.grad = grad[o : o + k].view_as(p)
        # where each parameter and gradient must start (checked before every use)
        self._addresses = [(p.data_ptr(), p.grad.data_ptr()) for p in self.params]

    def _ensure_bound(self) -> None:
        """Rebuild the views if a parameter or its gradient was rebound since the last step
        (``p.grad = None``, ``p.data = ...``, a device move): the step would otherwise read
        stale gradients and write values no module sees."""
        for p, (d, g) in zip(self.params, self._addresses):
            if p.data_ptr() != d or p.grad is None or p.grad.data_ptr() != g:
                self._bind()
                return

    # ---- the optimizer -----------------------------------------------------------------
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Zero the flat gradient (the views stay bound; ``set_to_none`` is ignored)."""
        self._ensure_bound()
        self.flat.grad.zero_()

    def clip_grad_norm_(self, max_norm: float) -> Tensor:
        """Scale the gradients so that their global 2-norm is at most ``max_norm`` (as
        ``torch.nn.utils.clip_grad_norm_``: by ``min(1, max_norm / (norm + 1e-6))``);
        returns the norm before clipping."""
        self._ensure_bound()
        if not self.fused:  # clip_grad_norm_'s own sums and float32 coefficient
            norms = [torch.linalg.vector_norm(p.grad) for p in self.params]
            norm = torch.linalg.vector_norm(torch.stack(norms))
            self.flat.grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
            return norm
        norm = torch.linalg.vector_norm(self.flat.grad)
        coef = float(max_norm) / (float(norm) + 1e-6)  # one read of the norm, no tensor ops
        if coef < 1.0:
            self.flat.grad.mul_(coef)
        return norm

    def step(self, closure: Any = None) -> Any:
        """One Adam step (:meth:`update`, after ``closure`` if one is given)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self.update()
        return loss

    @lazy_no_grad
    def update(self) -> None:
        """:meth:`step` without ``torch.optim``'s per-call wrapper (profiler record, step
        hooks: ~40 us a call, more than the arithmetic here); DQN's gradient step calls this.

        Torch's fused Adam kernel where ``fused`` and the probe found it works, else torch's
        public functional Adam (single-tensor): the same math, rounded differently."""
        self._ensure_bound()
        group = self.param_groups[0]
        p = self.flat
        state = self.state[p]
        if not state:
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        beta1, beta2 = group["betas"]
        _adam_step(
            p,
            p.grad,
            state["exp_avg"],
            state["exp_avg_sq"],
            state["step"],
            fused=self.fused and p.device.type == "cpu" and _fused_kernel_works(),
            lr=float(group["lr"]),
            beta1=beta1,
            beta2=beta2,
            weight_decay=group["weight_decay"],
            eps=group["eps"],
        )

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a flat state dict, or a per-tensor one of ``torch.optim.Adam`` over the same
        parameters (checkpoints written before FlatAdam), flattened in parameter order."""
        groups = state_dict.get("param_groups", [])
        ids = [i for g in groups for i in g.get("params", [])]
        if len(ids) == len(self.params) and len(self.params) > 1:
            state_dict = self._flattened(state_dict, ids)
        super().load_state_dict(state_dict)

    def _flattened(self, state_dict: dict[str, Any], ids: list[Any]) -> dict[str, Any]:
        per = state_dict.get("state", {})
        flat_state: dict[str, Any] = {}
        steps = [per[i]["step"] for i in ids if i in per and "step" in per[i]]
        if steps:
            flat_state["step"] = torch.as_tensor(steps[0]).clone()
            for key in _MOMENTS:
                parts = []
                for i, (_, _, k) in zip(ids, self._slices()):
                    t = per.get(i, {}).get(key)
                    if t is not None and t.numel() != k:
                        raise ValueError(
                            f"optimizer state {key} of parameter {i} has {t.numel()} values, "
                            f"the parameter {k}"
                        )
                    parts.append(torch.zeros(k) if t is None else t.reshape(-1).float())
                flat_state[key] = torch.cat(parts).to(self.flat.dtype)
        group = {k: v for k, v in state_dict["param_groups"][0].items() if k != "params"}
        state = {0: flat_state} if flat_state else {}
        return {"state": state, "param_groups": [{**group, "params": [0]}]}


# ---- the optimizers and learning-rate schedules a config names ------------------------------
#: ``optimizer`` names: snrl's flat Adam (above) and three of torch's optimizers.
OPTIMIZERS = ("adam", "adamw", "sgd", "rmsprop")
#: ``lr_schedule`` names: the multiplier of ``lr`` at run progress ``p`` in [0, 1].
LR_SCHEDULES = ("constant", "linear", "cosine")
#: What a config records for an optimizer or schedule passed in Python as a callable.
CUSTOM = "custom"
#: ``optimizer_kwargs`` that ``"adam"`` (:class:`FlatAdam`) takes.
FLAT_ADAM_KWARGS = ("eps", "betas")
_TORCH_OPTIMIZERS = {
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
    "rmsprop": torch.optim.RMSprop,
}


def build_optimizer(
    name: str,
    params: list[Tensor],
    *,
    lr: float,
    weight_decay: float = 0.0,
    kwargs: dict[str, Any] | None = None,
    eps: float = 1e-8,
    fused: bool = True,
) -> torch.optim.Optimizer:
    """The optimizer ``name`` (one of :data:`OPTIMIZERS`) over ``params``.

    Args:
        name: ``"adam"`` (:class:`FlatAdam`: ``eps`` and ``fused`` as given unless ``kwargs``
            sets ``eps``), ``"adamw"``, ``"sgd"`` or ``"rmsprop"`` (torch's).
        params: The trainable parameters.
        lr: Learning rate.
        weight_decay: Weight decay (L2 added to the gradient; decoupled for ``adamw``).
        kwargs: More keyword arguments of the optimizer (``"adam"``: ``eps``, ``betas``).
        eps: Adam's epsilon when ``kwargs`` does not set it.
        fused: :class:`FlatAdam`'s ``fused``.

    Raises:
        UserError: an unknown name, or ``kwargs`` the optimizer does not take.
    """
    kwargs = dict(kwargs or {})
    if name == "adam":
        bad = sorted(set(kwargs) - set(FLAT_ADAM_KWARGS))
        if bad:
            raise UserError(
                f"optimizer_kwargs {bad} are not taken by optimizer='adam' (it takes "
                f"{', '.join(FLAT_ADAM_KWARGS)}; for others choose adamw, sgd or rmsprop)"
            )
        return FlatAdam(
            params,
            lr,
            eps=kwargs.get("eps", eps),
            fused=fused,
            betas=tuple(kwargs.get("betas", (0.9, 0.999))),
            weight_decay=weight_decay,
        )
    if name not in _TORCH_OPTIMIZERS:
        raise UserError(f"optimizer={name!r} (one of {', '.join(OPTIMIZERS)})")
    cls = _TORCH_OPTIMIZERS[name]
    try:
        return cls(params, lr=lr, weight_decay=weight_decay, **kwargs)
    except (TypeError, ValueError) as e:
        raise UserError(
            f"optimizer_kwargs {kwargs} do not fit torch.optim.{cls.__name__}: {e} (see its "
            "keyword arguments)"
        ) from None


def lr_multiplier(schedule: Any, progress: float) -> float:
    """The multiplier of the base learning rate at ``progress`` (env steps done / total, in
    [0, 1]): ``"constant"`` 1, ``"linear"`` ``1 - p``, ``"cosine"`` ``(1 + cos(pi p)) / 2``,
    or ``schedule(p)`` for a callable (a finite number >= 0, else :class:`UserError`)."""
    if schedule == "constant":
        return 1.0
    if schedule == "linear":
        return 1.0 - progress
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    if not callable(schedule):
        raise UserError(f"lr_schedule={schedule!r} (one of {', '.join(LR_SCHEDULES)})")
    value = schedule(progress)
    try:
        m = float(value)
    except (TypeError, ValueError):
        m = math.nan
    if not math.isfinite(m) or m < 0:
        raise UserError(
            f"lr_schedule({progress}) returned {value!r} (a callable lr_schedule must return a "
            "finite multiplier >= 0 of lr)"
        )
    return m
