"""Every batched task by id: NeuroGym's tasks (:mod:`snrl.tasks.native`) and its ``yang19``
collection (:mod:`snrl.tasks.yang19`, written on the former's helpers)."""

from __future__ import annotations

from snrl.tasks.native import TASKS as _NATIVE
from snrl.tasks.native import _Task
from snrl.tasks.yang19 import TASKS as _YANG19

__all__ = ["TASKS"]

#: The batched tasks by id, each called with NeuroGym's keyword arguments.
TASKS: dict[str, _Task] = {**_NATIVE, **_YANG19}
