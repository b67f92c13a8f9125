"""Running any backbone over a sequence in which some rows start a new episode."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from snrl.functional.state import State, map_state, mask_state, state_leaves
from snrl.networks.activity import Activity
from snrl.networks.protocol import BackboneOutput
from snrl.networks.spiking import run_together


def run_with_resets(
    net: nn.Module,
    x: Tensor,
    state: State,
    starts: Tensor,
    fresh: list[State] | None = None,
) -> BackboneOutput:
    """Run ``net`` over ``x`` (T, B, F), re-initializing rows where an episode starts.

    A backbone whose ``run`` takes ``starts`` (``supports_starts``, e.g.
    :class:`~snrl.networks.spiking.SpikingBackbone`) runs the whole sequence in one call that
    replaces the state rows in place (the fused kernels handle the gradient exactly). Any
    other backbone is cut at the time steps where some row starts an episode, so a segment
    without episode ends runs as one call; both give the same outputs and gradients.

    Args:
        net: a backbone following the recurrent protocol.
        x: (T, B, F) inputs.
        state: the state before step 0 (already reset where ``starts[0]`` is True).
        starts: bool (T, B): row b starts a new episode at step t (its state is re-initialized
            before step t). ``starts[0]`` is ignored: ``state`` already holds that.
        fresh: optional list of T states whose rows replace the state where ``starts[t]``
            (the states recorded during the rollout, for backbones whose reset draws random
            numbers); without it ``net.reset_state`` is used.

    Returns:
        BackboneOutput with ``out`` (T, B, O), the final state and activity (T, B, N) per layer.
    """
    if not state_leaves(state):  # stateless (MLP): resets change nothing, run it whole
        return net.run(x, state)
    if _one_call(net, fresh is not None):
        starts = torch.as_tensor(starts, device=x.device).bool().clone()
        starts[0] = False
        seq_fresh = None if fresh is None else _stack_fresh(fresh, starts, state)
        return net.run(x, state, starts=starts, fresh=seq_fresh)
    T = x.shape[0]
    cut = [0] + [t for t in range(1, T) if bool(starts[t].any())] + [T]
    outs, acts = [], []
    for a, b in zip(cut[:-1], cut[1:]):
        if a > 0:
            if fresh is not None:
                state = mask_state(starts[a], fresh[a], state)
            else:
                state = net.reset_state(state, starts[a])
        res = net.run(x[a:b], state)
        state = res.state
        outs.append(res.out)
        acts.append(res.activity)
    return BackboneOutput(torch.cat(outs, dim=0), state, Activity.concat(acts))


def _one_call(net: nn.Module, has_fresh: bool) -> bool:
    """Whether ``net`` runs a sequence with resets in one call: it takes ``starts``, and its
    reset values are fixed (zeros or learned) unless the fresh states are given."""
    if not getattr(net, "supports_starts", False):
        return False
    return has_fresh or all(
        getattr(m, "hh_init", "zeros") in ("zeros", "learned") for m in net.modules()
    )


def _stack_fresh(fresh: list[State], starts: Tensor, state: State) -> State:
    """The recorded states of the steps with a start, stacked to (T, B, ...) per leaf (zeros
    at the other steps, where they are never read)."""
    filler = map_state(torch.zeros_like, state)
    marks = starts.any(1).tolist()
    rows = [f if m and f is not None else filler for f, m in zip(fresh, marks)]
    return map_state(lambda *ts: torch.stack(ts), *rows)


def run_many_with_resets(
    nets: list[nn.Module],
    x: Tensor,
    states: list[State],
    starts: Tensor,
    fresh: list[list[State] | None] | None = None,
) -> list[BackboneOutput]:
    """:func:`run_with_resets` for several backbones on the same input (PPO's policy and
    critic): side by side in one pass (:func:`snrl.networks.spiking.run_together`) when
    they are LIF backbones of the same shape, else one after the other."""
    fresh = [None] * len(nets) if fresh is None else fresh
    if all(_one_call(n, f is not None) for n, f in zip(nets, fresh)):
        st = torch.as_tensor(starts, device=x.device).bool().clone()
        st[0] = False
        seq_fresh = [None if f is None else _stack_fresh(f, st, s) for f, s in zip(fresh, states)]
        outs = run_together(nets, x, states, starts=st, fresh=seq_fresh)
        if outs is not None:
            return outs
    return [run_with_resets(n, x, s, starts, f) for n, s, f in zip(nets, states, fresh)]
