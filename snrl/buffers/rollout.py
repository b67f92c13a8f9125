"""Rollout storage for PPO: whole segments per env, with the recurrent state of every step.

Data flow: the collector writes one row per env step (``add``); the update reads whole
(T, b) sequences for a subset ``b`` of envs (``minibatch``), rebuilding the recurrent state from
the stored state at the start of each sequence (truncated BPTT), never shuffled single steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

from snrl.functional.state import map_state


def compute_gae(
    rewards: Tensor,
    values: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    dones: Tensor,
    gamma: float,
    lam: float,
) -> tuple[Tensor, Tensor]:
    """Generalized advantage estimation over a (T, B) segment.

    ``delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)`` where ``s'_t`` is the
    observation that followed step t: on truncation it is the true final observation (so the
    value bootstraps), on termination it is not used. The recursion
    ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}`` stops at every episode end.

    Args:
        rewards: (T, B).
        values: (T, B) V(s_t).
        next_values: (T, B) V(s'_t): V(final observation) where the episode ended,
            V(s_{t+1}) otherwise (the value of the observation after the last step for t=T-1).
        terminated: bool (T, B).
        dones: bool (T, B) terminated or truncated.
        gamma: discount.
        lam: GAE lambda.

    Returns:
        (advantages, returns), each (T, B); returns = advantages + values.
    """
    T = rewards.shape[0]
    not_term = 1.0 - terminated.float()
    not_done = 1.0 - dones.float()
    delta = rewards + gamma * not_term * next_values - values
    adv = torch.zeros_like(rewards)
    last = torch.zeros_like(rewards[0])
    for t in reversed(range(T)):
        last = delta[t] + gamma * lam * not_done[t] * last
        adv[t] = last
    return adv, adv + values


def normalized_advantages(adv: Tensor, groups: Tensor | None = None) -> Tensor:
    """``adv`` standardized (mean 0, std 1): over all its entries, or with ``groups`` (ints,
    the same shape: each step's task) within each group's entries, so that no group's scale
    sets the others' weight. A group of one entry gets 0 (its own mean)."""
    if groups is None:
        return (adv - adv.mean()) / (adv.std() + 1e-8)
    out = torch.zeros_like(adv)
    for g in torch.unique(groups).tolist():
        mask = groups == g
        a = adv[mask]
        if a.numel() > 1:
            out[mask] = (a - a.mean()) / (a.std() + 1e-8)
    return out


class Minibatch(NamedTuple):
    """Whole sequences (T, b) for a subset of envs."""

    obs: Tensor
    actions: Tensor
    log_probs: Tensor
    values: Tensor
    advantages: Tensor
    returns: Tensor
    starts: Tensor
    states: Sequence[Any]
    """The recurrent state before step t (T entries, batch b) for the first step and the steps
    where some row starts an episode; None elsewhere (never read). Selected when read: an
    update of a backbone whose resets are fixed reads only the first."""
    logit_noise: Tensor | None = None
    """(T, b, A): the exploration offsets added to the logits (Discrete ``use_sde``), or None."""
    groups: Tensor | None = None
    """(T, b) ints: the task of each step (``norm_adv_by_task``), or None."""
    targets: Tensor | None = None
    """(T, b) ints: the ground-truth action of each step, -1 where the env gave none
    (``supervised_coef``), or None."""


class RolloutBuffer:
    """Stores one segment of ``n_steps`` steps for ``n_envs`` envs.

    Args:
        n_steps: segment length T.
        n_envs: number of envs B.
        obs_size: flat observation features.
        action_shape: shape of one action (``()`` for Discrete).
        action_dtype: torch dtype of actions.
        device: where tensors live.
    """

    def __init__(
        self,
        *,
        n_steps: int,
        n_envs: int,
        obs_size: int,
        action_shape: tuple[int, ...],
        action_dtype: torch.dtype,
        device: torch.device | str = "cpu",
    ):
        T, B = n_steps, n_envs
        self.n_steps, self.n_envs = T, B
        z = lambda *shape, dtype=torch.float32: torch.zeros(*shape, dtype=dtype, device=device)  # noqa: E731
        self.obs = z(T, B, obs_size)
        self.actions = z(T, B, *action_shape, dtype=action_dtype)
        self.log_probs = z(T, B)
        self.values = z(T, B)
        self.next_values = z(T, B)
        self.rewards = z(T, B)
        self.terminated = z(T, B, dtype=torch.bool)
        self.dones = z(T, B, dtype=torch.bool)
        self.starts = z(T, B, dtype=torch.bool)
        self.states: list[Any] = [None] * T
        self.logit_noise: Tensor | None = None  # (T, B, A), made by the first add that has it
        self.groups: Tensor | None = None  # (T, B) task of each step, made by the first add with it
        self.targets: Tensor | None = None  # (T, B) ground-truth actions, -1: none (likewise)
        self.advantages = z(T, B)
        self.returns = z(T, B)
        self.t = 0

    def add(
        self, *, obs, state, start, action, log_prob, value, reward, terminated, done,
        logit_noise=None, group=None, target=None,
    ) -> None:  # fmt: skip
        """Store step ``t``: what the agent saw (obs, state, whether it starts an episode),
        what it did (with the offsets it added to its logits, if any), and what followed;
        ``group``: each env's task at this step, where advantages are normalized per task;
        ``target``: each env's ground-truth action (-1: none), for a supervised term."""
        t = self.t
        if target is not None:
            if self.targets is None:
                self.targets = torch.full_like(self.starts, -1, dtype=torch.long)
            self.targets[t] = target
        if group is not None:
            if self.groups is None:
                self.groups = torch.zeros_like(self.starts, dtype=torch.long)
            self.groups[t] = group
        if logit_noise is not None:
            if self.logit_noise is None:
                self.logit_noise = self.obs.new_zeros(self.n_steps, *logit_noise.shape)
            self.logit_noise[t] = logit_noise
        self.obs[t] = obs
        self.states[t] = state
        self.starts[t] = start
        self.actions[t] = action
        self.log_probs[t] = log_prob
        self.values[t] = value
        self.rewards[t] = reward
        self.terminated[t] = terminated
        self.dones[t] = done
        self.t += 1

    def finish(self, *, final_values: Tensor, last_value: Tensor, gamma: float, lam: float):
        """Compute advantages once the segment is full.

        Args:
            final_values: (T, B) V(final observation) where an episode ended at step t (any
                value elsewhere; only read where ``dones``).
            last_value: (B,) V(s_T), the observation after the segment.
        """
        if self.t != self.n_steps:
            raise RuntimeError(f"segment has {self.t} of {self.n_steps} steps")
        nxt = torch.cat([self.values[1:], last_value.unsqueeze(0)], dim=0)
        self.next_values = torch.where(self.dones, final_values, nxt)
        self.advantages, self.returns = compute_gae(
            self.rewards, self.values, self.next_values, self.terminated, self.dones, gamma, lam
        )

    def minibatch(self, env_idx: Tensor, t0: int = 0, t1: int | None = None) -> Minibatch:
        """Sequences of steps ``t0:t1`` for the envs ``env_idx``."""
        t1 = self.n_steps if t1 is None else t1
        sl = (slice(t0, t1), env_idx)
        starts = self.starts[sl]
        states = _SequenceStates(self.states[t0:t1], env_idx, starts.any(1).tolist())
        return Minibatch(
            self.obs[sl],
            self.actions[sl],
            self.log_probs[sl],
            self.values[sl],
            self.advantages[sl],
            self.returns[sl],
            starts,
            states,
            None if self.logit_noise is None else self.logit_noise[sl],
            None if self.groups is None else self.groups[sl],
            None if self.targets is None else self.targets[sl],
        )

    def reset(self) -> None:
        self.t = 0


class _SequenceStates(Sequence):
    """The states of a minibatch, rows selected on first read (see ``Minibatch.states``)."""

    def __init__(self, states: list[Any], env_idx: Tensor, marks: list[bool]):
        self._states, self._idx, self._marks = states, env_idx, marks
        self._cache: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self._states)

    def __getitem__(self, t):  # noqa: ANN001
        if isinstance(t, slice):
            return [self[i] for i in range(*t.indices(len(self)))]
        t = range(len(self))[t]  # negative indices, IndexError
        if t > 0 and not self._marks[t]:
            return None
        if t not in self._cache:
            self._cache[t] = map_state(lambda s: s[self._idx], self._states[t])
        return self._cache[t]
