"""The arithmetic of DQN, as pure torch functions.

Dueling aggregation (Wang et al. 2016), for a state value ``V(s)`` and advantages ``A(s, a)``:

    avg:   Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a')
    max:   Q(s, a) = V(s) + A(s, a) - max_a' A(s, a')
    naive: Q(s, a) = V(s) + A(s, a)

Target (van Hasselt et al. 2016 for the double estimator), with ``discount = gamma^m`` of an
m-step return ``R`` and ``done = 1`` only at termination:

    y = R + discount * (1 - done) * Q_target(s', argmax_a Q_online(s', a))     (double)
    y = R + discount * (1 - done) * max_a Q_target(s', a)                       (plain)

Polyak averaging of target parameters: ``theta_target <- (1 - tau) theta_target + tau theta``
(``tau = 1`` is a hard copy).

Every function takes any leading batch shape (``(B,)`` or time-first ``(T, B)``) with the
action dimension last.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from snrl.errors import UserError
from snrl.functional.grad import lazy_no_grad

DUELING_MODES = ("avg", "max", "naive")
LOSS_KINDS = ("huber", "mse")


def dueling_aggregate(value: Tensor, advantages: Tensor, mode: str = "avg") -> Tensor:
    """Combine a value stream and an advantage stream into Q-values.

    Args:
        value: (..., 1) state values.
        advantages: (..., A) advantages.
        mode: ``"avg"`` (subtract the mean advantage), ``"max"`` (subtract the max) or
            ``"naive"`` (plain sum; not identifiable, for ablations).

    Returns:
        (..., A) Q-values.
    """
    if value.shape[-1] != 1 or value.shape[:-1] != advantages.shape[:-1]:
        raise UserError(
            f"value has shape {tuple(value.shape)} but advantages {tuple(advantages.shape)} "
            "(value must be (..., 1) with the same leading shape)"
        )
    if mode == "avg":
        return value + advantages - advantages.mean(dim=-1, keepdim=True)
    if mode == "max":
        return value + advantages - advantages.max(dim=-1, keepdim=True).values
    if mode == "naive":
        return value + advantages
    raise UserError(f"unknown dueling mode {mode!r} (use one of {', '.join(DUELING_MODES)})")


@lazy_no_grad
def double_dqn_target(
    rewards: Tensor,
    discounts: Tensor | float,
    dones: Tensor,
    q_next_online: Tensor | None,
    q_next_target: Tensor,
    double: bool = True,
) -> Tensor:
    """TD target of (double) DQN, without gradient.

    Args:
        rewards: (...) n-step returns ``R``.
        discounts: (...) ``gamma^m`` per transition, or one float.
        dones: (...) 1 where the episode terminated (no bootstrap), else 0. A truncated
            episode has ``done = 0`` and ``s'`` its final observation.
        q_next_online: (..., A) online-network Q-values at ``s'`` (used only for the argmax
            when ``double``; may be None otherwise).
        q_next_target: (..., A) target-network Q-values at ``s'``.
        double: pick the action with the online network (double DQN) or take the target
            network's max (plain DQN).

    Returns:
        (...) targets ``y``, detached.
    """
    if double:
        if q_next_online is None:
            raise UserError("double DQN needs q_next_online (pass it, or double=False)")
        if q_next_online.shape != q_next_target.shape:
            raise UserError(
                f"q_next_online {tuple(q_next_online.shape)} and q_next_target "
                f"{tuple(q_next_target.shape)} differ (pass Q-values of the same batch)"
            )
        best = q_next_online.argmax(dim=-1, keepdim=True)
        q_next = q_next_target.gather(-1, best).squeeze(-1)
    else:
        q_next = q_next_target.max(dim=-1).values
    not_done = 1.0 - dones.to(q_next.dtype)
    return rewards.to(q_next.dtype) + discounts * not_done * q_next


def sequence_nstep_targets(
    rewards: Tensor,
    dones: Tensor,
    mask: Tensor,
    q_boot: Tensor,
    gamma: float,
    n: int,
) -> Tensor:
    """n-step TD targets inside replayed sequences (R2D2), without gradient.

    Each row's valid steps must be one contiguous piece of one episode, as
    :class:`~snrl.buffers.sequence.SequenceReplayBuffer` returns them. For a valid step ``t``
    of a row whose last valid step is ``e``, with ``m = min(n, e - t + 1)``:

        y_t = sum_{k<m} gamma^k r_{t+k} + gamma^m (1 - done_{t+m-1}) q_boot_{t+m-1}

    so the return is cut at the episode end (terminated: no bootstrap; truncated: bootstrap
    from the final observation) and at the end of the sequence (bootstrap from ``s_{e+1}``).

    Args:
        rewards: (T, B) rewards.
        dones: (T, B) 1 where the episode terminated on that step.
        mask: (T, B) 1 on valid steps, 0 on padding.
        q_boot: (T, B) bootstrap value of the state *after* step ``t``, e.g.
            ``Q_target(s_{t+1}, argmax_a Q_online(s_{t+1}, a))`` read at position ``t + 1``
            of a pass over the batch's ``seq_obs``.
        gamma: discount per step.
        n: steps of the return (>= 1).

    Returns:
        (T, B) targets, 0 on invalid steps.
    """
    if int(n) < 1:
        raise UserError(f"n must be >= 1, got {n} (use 1 for one-step TD)")
    shapes = {tuple(x.shape) for x in (rewards, dones, mask, q_boot)}
    if len(shapes) != 1 or rewards.dim() != 2:
        raise UserError(
            f"rewards, dones, mask and q_boot must share one (T, B) shape, got {sorted(shapes)} "
            "(pass time-first sequences)"
        )
    with torch.no_grad():
        dtype = q_boot.dtype
        t_len = rewards.shape[0]
        valid = mask.to(dtype)
        r = rewards.to(dtype) * valid
        y = torch.zeros_like(q_boot)
        count = torch.zeros_like(q_boot)  # m: steps of the return actually available
        for k in range(min(int(n), t_len)):
            m_k = torch.zeros_like(valid)
            m_k[: t_len - k] = valid[k:]
            r_k = torch.zeros_like(r)
            r_k[: t_len - k] = r[k:]
            y += gamma**k * r_k * m_k
            count += m_k
        steps = torch.arange(t_len, device=q_boot.device).unsqueeze(1)
        end = (steps + count.long() - 1).clamp(0, t_len - 1)
        boot = q_boot.gather(0, end)
        not_done = 1.0 - dones.to(dtype).gather(0, end)
        y += torch.pow(torch.full_like(count, float(gamma)), count) * not_done * boot
        return y * valid


def td_loss(
    q: Tensor,
    target: Tensor,
    kind: str = "huber",
    weights: Tensor | None = None,
    mask: Tensor | None = None,
) -> Tensor:
    """Mean TD loss of chosen-action Q-values against targets.

    Args:
        q: (...) Q-values of the taken actions.
        target: (...) targets (treated as constants).
        kind: ``"huber"`` (smooth L1 with delta 1) or ``"mse"`` (plain squared error).
        weights: (...) importance-sampling weights, or None.
        mask: (...) 1 for valid entries (e.g. steps of a padded sequence), or None; the
            mean is taken over the valid entries only.

    Returns:
        Scalar loss ``sum(w * m * l) / sum(m)``.
    """
    target = target.detach()
    if q.shape != target.shape:
        raise UserError(
            f"q has shape {tuple(q.shape)} but target {tuple(target.shape)} "
            "(gather the taken actions' Q-values first)"
        )
    if kind == "huber":
        loss = F.huber_loss(q, target, reduction="none", delta=1.0)
    elif kind == "mse":
        loss = F.mse_loss(q, target, reduction="none")
    else:
        raise UserError(f"unknown TD loss {kind!r} (use one of {', '.join(LOSS_KINDS)})")
    if weights is not None:
        loss = loss * weights.to(loss.dtype)
    if mask is None:
        return loss.mean()
    mask = mask.to(loss.dtype)
    return (loss * mask).sum() / mask.sum().clamp_min(1.0)


@lazy_no_grad
def td_loss_grad(
    q: Tensor, target: Tensor, kind: str = "huber", weights: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """:func:`td_loss` without a mask, and its gradient with respect to ``q`` in closed
    form: ``(loss, d loss / d q)``, neither with an autograd graph.

    Huber (delta 1): ``d l / d q = clamp(q - y, -1, 1)``; MSE: ``2 (q - y)``; each times the
    weight, over the number of entries (the mean)."""
    loss = td_loss(q, target, kind, weights=weights)
    d = q - target
    grad = d.clamp(-1.0, 1.0) if kind == "huber" else 2.0 * d
    if weights is not None:
        grad = grad * weights.to(grad.dtype)
    return loss, grad.div_(max(d.numel(), 1))


def polyak_update(
    target_params: nn.Module | Iterable[Tensor],
    online_params: nn.Module | Iterable[Tensor],
    tau: float,
) -> None:
    """Move target parameters towards online ones, in place.

    ``theta_target <- (1 - tau) theta_target + tau theta_online``; ``tau = 1`` copies exactly.
    Given two modules, their floating-point parameters are averaged and their buffers (sign
    vectors, masks, ...) are copied.

    Args:
        target_params: target module or its parameters.
        online_params: online module or its parameters, in the same order.
        tau: in (0, 1].
    """
    tau = float(tau)
    if not 0.0 < tau <= 1.0:
        raise UserError(f"tau must be in (0, 1], got {tau} (1 = hard update, 0.005 is usual)")
    buffers: list[tuple[Tensor, Tensor]] = []
    if isinstance(target_params, nn.Module) and isinstance(online_params, nn.Module):
        buffers = list(zip(target_params.buffers(), online_params.buffers(), strict=True))
    tgt = list(
        target_params.parameters() if isinstance(target_params, nn.Module) else target_params
    )
    onl = list(
        online_params.parameters() if isinstance(online_params, nn.Module) else online_params
    )
    if len(tgt) != len(onl):
        raise UserError(
            f"target has {len(tgt)} parameters, online {len(onl)} (pass copies of one network)"
        )
    with torch.no_grad():
        for t, o in zip(tgt, onl):
            if t.shape != o.shape:
                raise UserError(
                    f"parameter shapes differ: {tuple(t.shape)} vs {tuple(o.shape)} "
                    "(pass copies of one network)"
                )
            if tau == 1.0:
                t.copy_(o)
            else:
                t.mul_(1.0 - tau).add_(o, alpha=tau)
        for t, o in buffers:
            t.copy_(o)
