"""A CPU-side check that agents keep their tensors on ``cfg.device``.

On a machine without a GPU every tensor is on the CPU, so a tensor that an agent makes on
the host and mixes with its own (a bug that crashes on CUDA: "Expected all tensors to be on
the same device") goes unseen. :class:`DeviceDiscipline` gives each tensor a label while a
block runs:

- ``host``: made without naming a device (``torch.as_tensor(numpy_array)``, a factory
  without ``device=``, ``.cpu()``): on a GPU run it would be on the CPU;
- ``device``: made with ``device=...``, moved with ``.to(device)`` / ``.cuda()``, or
  derived from a ``device`` tensor (a module's parameters and buffers after ``.to``).

An operation that takes a ``device`` tensor and a ``host`` tensor of one or more dimensions
fails, as it would on CUDA, and so does ``.numpy()`` of a ``device`` tensor. What CUDA
allows across devices is allowed here too: 0-d host tensors (scalars), copies into a slot
(``__setitem__``, ``copy_``), and host index tensors in ``__getitem__``.
"""

from __future__ import annotations

import traceback
import weakref
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

HOST, DEVICE = "host", "device"
#: operations CUDA accepts with a host tensor beside device tensors
_CROSS_OK = {
    torch.Tensor.__setitem__,
    torch.Tensor.__getitem__,
    torch.Tensor.copy_,
    torch.Tensor.to,
    torch.Tensor.cpu,
    torch.Tensor.tolist,
    torch.Tensor.item,
}
#: operations that fail on a device tensor (CUDA has no numpy view): ``.cpu()`` first
_HOST_ONLY = {torch.Tensor.numpy, torch.Tensor.__array__}


class DeviceDiscipline(TorchFunctionMode):
    """Fail on an operation that mixes host and device tensors (see the module docstring).

    ``violations`` lists each one (the op and where it was called from); entering raises at
    the first one when ``strict`` (the default)."""

    def __init__(self, strict: bool = True) -> None:
        super().__init__()
        self.strict = strict
        self.violations: list[str] = []
        self._labels: dict[int, tuple[weakref.ref, str]] = {}
        self._origin: dict[int, str] = {}  # where a host tensor was made (for the message)

    # ---- labels ------------------------------------------------------------------------
    def label(self, t: torch.Tensor) -> str | None:
        entry = self._labels.get(id(t))
        if entry is None or entry[0]() is not t:
            return None
        return entry[1]

    def set_label(self, t: torch.Tensor, label: str) -> None:
        key = id(t)
        labels = self._labels

        def forget(_ref: Any, key: int = key) -> None:
            entry = labels.get(key)
            if entry is not None and entry[0]() is None:
                del labels[key]

        try:
            labels[key] = (weakref.ref(t, forget), label)
        except TypeError:  # not weak-referenceable
            pass

    def mark_module(self, module: torch.nn.Module) -> None:
        """Label a module's parameters and buffers ``device`` (built before the block)."""
        for t in [*module.parameters(), *module.buffers()]:
            self.set_label(t, DEVICE)

    # ---- the mode ----------------------------------------------------------------------
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if func is torch.Tensor.cpu and args and result is args[0]:
            # on a GPU ``.cpu()`` makes a new tensor; here it returns its input: give back a
            # new view, so the copy is host and the original keeps its label
            result = result.view_as(result)
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        labels = [(t, self.label(t)) for t in inputs]
        has_device = any(lab == DEVICE for _, lab in labels)
        host_arrays = [t for t, lab in labels if lab == HOST and t.dim() > 0]
        if func in _HOST_ONLY and labels and labels[0][1] == DEVICE:
            name = getattr(func, "__name__", func)
            where = "".join(traceback.format_stack(limit=8)[:-1])
            msg = f"{name} of a device tensor (call .cpu() first) at:\n{where}"
            self.violations.append(msg)
            if self.strict:
                raise AssertionError(msg)
        if has_device and host_arrays and func not in _CROSS_OK:
            where = "".join(traceback.format_stack(limit=8)[:-1])
            made = "".join(
                f"  host tensor {tuple(t.shape)} made at:\n{self._origin.get(id(t), '?')}"
                for t in host_arrays
            )
            name = getattr(func, "__name__", func)
            msg = f"{name} mixes device and host tensors at:\n{where}{made}"
            self.violations.append(msg)
            if self.strict:
                raise AssertionError(msg)
        out_label = self._result_label(func, args, kwargs, has_device, labels)
        if out_label is not None:
            origin = None
            for t in tree_flatten(result)[0]:
                if isinstance(t, torch.Tensor):
                    self.set_label(t, out_label)
                    if out_label == HOST:
                        origin = origin or "".join(traceback.format_stack(limit=6)[:-1])
                        self._origin[id(t)] = origin
        return result

    @staticmethod
    def _names_device(args: tuple, kwargs: dict) -> bool:
        if kwargs.get("device") is not None:
            return True
        return any(isinstance(a, (torch.device, str)) for a in args[1:])

    def _result_label(self, func, args, kwargs, has_device, labels) -> str | None:
        name = getattr(func, "__name__", "")
        if name == "cpu":
            return HOST
        if name in ("cuda", "to") and self._names_device(args, kwargs) or name == "cuda":
            return DEVICE
        if name == "to" or name.endswith("_like"):
            src = labels[0][1] if labels else None
            if kwargs.get("device") is not None and name.endswith("_like"):
                return DEVICE
            return src
        if kwargs.get("device") is not None:
            return DEVICE
        if has_device:
            return DEVICE
        if any(lab == HOST for _, lab in labels):
            return HOST
        if not labels:
            return HOST  # a factory (as_tensor of numpy, zeros, randperm ...) without device=
        return None
