"""Adam over one flat buffer of parameters (DQN's optimizer).

A DQN gradient step on a small network spends as much time on per-tensor bookkeeping as on
its products: zeroing six gradients, a global-norm clip that takes each tensor's norm, and
an Adam step that walks six tensors (a 2x256 MLP: ~350 us of a ~1.3 ms step, measured in
docs/benchmarks.md). :class:`FlatAdam` moves the trainable parameters into one contiguous
buffer, each parameter a view of its slice, and their gradients into another; zeroing, the
clip and the Adam step are then one kernel each over the whole buffer.

The parameters stay leaves of their modules (forward, backward, ``state_dict``,
``load_state_dict`` and ``copy_`` work unchanged). Autograd adds each new gradient into the
view in place. Anything that rebinds a parameter's storage or gradient (``p.data = ...``,
``p.grad = None``, ``module.to(...)``) is noticed before the next step and the views are
rebuilt from the current values.

Two differences from ``torch.optim.Adam`` with ``zero_grad(set_to_none=True)``:

- a parameter that got no gradient in a step is stepped with a zero gradient (its moments
  decay and its momentum moves it), as with ``set_to_none=False``;
- the state dict holds one flat entry; a per-tensor state dict (older checkpoints) is
  flattened on load.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from snrl.errors import UserError

_MOMENTS = ("exp_avg", "exp_avg_sq")


class FlatAdam(torch.optim.Adam):
    """Adam on one flat copy of ``params`` (the trainable ones), fused where torch has the
    kernel for the device.

    Args:
        params: the parameters to train (those with ``requires_grad``; one device and dtype,
            where they stay: build the optimizer after moving the module).
        lr: learning rate.
        eps: Adam's epsilon.
    """

    def __init__(self, params: Iterable[Tensor], lr: float, eps: float = 1e-8) -> None:
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
        try:
            super().__init__([self.flat], lr=lr, eps=eps, fused=True)
        except (RuntimeError, ValueError):  # no fused kernel for this device or dtype
            super().__init__([self.flat], lr=lr, eps=eps, foreach=False)

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
        norm = torch.linalg.vector_norm(self.flat.grad)
        coef = float(max_norm) / (float(norm) + 1e-6)  # one read of the norm, no tensor ops
        if coef < 1.0:
            self.flat.grad.mul_(coef)
        return norm

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        self._ensure_bound()
        return super().step(closure)

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
