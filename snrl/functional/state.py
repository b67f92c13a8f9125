"""Helpers over recurrent states.

A state is a tensor, a (named) tuple of states, or ``()``. Every tensor in a state has the
batch as its first dimension. These helpers map over that structure and keep (named) tuple
types, so layers, backbones, buffers and algorithms handle any backbone's state alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

State = Any


def map_state(fn: Callable[..., Tensor], state: State, *others: State) -> State:
    """Apply ``fn`` leaf-wise over one or more states of the same structure."""
    if isinstance(state, Tensor):
        return fn(state, *others)
    if isinstance(state, tuple):
        parts = [map_state(fn, s, *(o[i] for o in others)) for i, s in enumerate(state)]
        return type(state)(*parts) if hasattr(state, "_fields") else tuple(parts)
    if state is None:
        return None
    raise TypeError(f"not a recurrent state: {type(state).__name__}")


def state_leaves(state: State) -> list[Tensor]:
    """All tensors of a state, depth first."""
    if isinstance(state, Tensor):
        return [state]
    if isinstance(state, tuple):
        return [leaf for s in state for leaf in state_leaves(s)]
    return []


def detach_state(state: State) -> State:
    """Cut the graph behind a state (truncated BPTT)."""
    return map_state(lambda t: t.detach(), state)


def index_state(state: State, index: Tensor | slice) -> State:
    """Select batch rows of every tensor in a state."""
    return map_state(lambda t: t[index], state)


def cat_states(states: list[State]) -> State:
    """Concatenate states along the batch dimension."""
    return map_state(lambda *ts: torch.cat(ts, dim=0), states[0], *states[1:])


def mask_state(done: Tensor, fresh: State, state: State) -> State:
    """Rows where ``done`` is True take ``fresh``, the others keep ``state``.

    Args:
        done: bool (B,).
        fresh: a state of batch B (or broadcastable rows) to put in the done rows.
        state: the current state of batch B.
    """

    def pick(f: Tensor, s: Tensor) -> Tensor:
        m = done.reshape((-1,) + (1,) * (s.dim() - 1))
        return torch.where(m, f.to(s.dtype), s)

    return map_state(pick, fresh, state)


def state_to_cpu(state: State) -> State:
    """A copy of the state on the CPU (for storing in buffers and checkpoints)."""
    return map_state(lambda t: t.detach().cpu().clone(), state)
