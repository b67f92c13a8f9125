"""Pure tensor functions: neuron step functions, Dale signs, state helpers."""

from snrl.functional.state import (
    cat_states,
    detach_state,
    index_state,
    map_state,
    mask_state,
    state_leaves,
    state_to_cpu,
)

__all__ = [
    "cat_states",
    "detach_state",
    "index_state",
    "map_state",
    "mask_state",
    "state_leaves",
    "state_to_cpu",
]
