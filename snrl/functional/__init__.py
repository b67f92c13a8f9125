"""Pure tensor functions: neuron step functions, Dale signs, state helpers."""

from snrl.functional.dale import (
    balance_scale,
    check_sign_vector,
    dale_init,
    make_sign_vector,
    resolve_sign,
    signed_weights,
    spectral_radius,
)
from snrl.functional.neurons import (
    RESETS,
    ALIFState,
    LIFState,
    LIState,
    SpyLIFState,
    alif_step,
    li_step,
    lif_step,
    spylif_step,
)
from snrl.functional.state import (
    cat_states,
    detach_state,
    index_state,
    map_state,
    mask_state,
    state_leaves,
    state_to_cpu,
)
from snrl.functional.surrogate import SURROGATE_KINDS, Surrogate, default_spike_grad, heaviside

__all__ = [
    "cat_states",
    "detach_state",
    "index_state",
    "map_state",
    "mask_state",
    "state_leaves",
    "state_to_cpu",
    "RESETS",
    "SURROGATE_KINDS",
    "Surrogate",
    "balance_scale",
    "ALIFState",
    "LIFState",
    "LIState",
    "SpyLIFState",
    "alif_step",
    "check_sign_vector",
    "dale_init",
    "default_spike_grad",
    "heaviside",
    "li_step",
    "lif_step",
    "make_sign_vector",
    "resolve_sign",
    "signed_weights",
    "spectral_radius",
    "spylif_step",
]
