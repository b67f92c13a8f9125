"""A2C: synchronous advantage actor-critic with n-step TD targets, recurrent (spiking or ANN)
policy and critic backbones.

Data flow, one update (one gradient step per window of ``n_steps``)::

    vector env --obs--> ActorCriticAgent.step (state carried across env steps and across
        windows, reset per finished env) --> RolloutBuffer (as PPO's)
        --> n-step returns: R_t = r_t + gamma r_{t+1} + ... + gamma^(k-1) r_{t+k-1}
            + gamma^k V(s_{t+k}), k the steps to the window's end or to the episode's end
            (termination: no bootstrap; truncation: V(final obs)); gae_lambda < 1 mixes them
            (GAE), the default 1 keeps them
        --> loss = -mean(A_t log pi(a_t|s_t)) + vf_coef 0.5 mean((R_t - V_t)^2)
                   - ent_coef mean(H_t) (+ the rate regularization, the loss_terms)
        --> one global grad-norm clip, one optimizer step.

The sequence of a window is rebuilt from the state stored at its first step (the weights do
not change inside a window, so it is the rollout's own forward): with ``learning_rule="bptt"``
that is truncated BPTT over the window, the hidden state carried across windows without a
graph. With ``learning_rule="eprop"`` the spiking layers learn online
(:class:`snrl.learning.OnlineEProp`): their eligibility traces and readout-filtered traces
are carried from window to window with the hidden state (restarted per env at episode
starts), the policy readout broadcasts the policy-gradient signal and the critic's readout the
value (TD) error, so the weights change while the episodes run (Bellec et al. 2020's
reward-based e-prop, the actor-critic of its Atari experiments). docs/agents.md and
docs/learning_rules.md.

The training loop is :meth:`snrl.agents.base.Algorithm.learn`; A2C supplies one iteration:
the collection it shares with PPO (:class:`~snrl.agents.ppo.ActorCriticAlgorithm`) and
:meth:`A2C._learn_from`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from snrl.agents.limits import check_finite
from snrl.agents.ppo import (
    LOSS_CAUSE,
    ActorCriticAlgorithm,
    ActorCriticConfig,
    explained_variance,
)
from snrl.buffers.rollout import Minibatch, RolloutBuffer, normalized_advantages

__all__ = ["A2C", "A2CConfig"]


@dataclass(frozen=True, kw_only=True)
class A2CConfig(ActorCriticConfig):
    """A2C hyperparameters (the fields shared with PPO are documented in
    :class:`~snrl.agents.ppo.ActorCriticConfig`); the defaults differ from PPO's where A2C's
    one gradient step per short window asks for it."""

    n_envs: int = 16
    """Parallel envs (each update's batch is n_envs x n_steps env steps)."""
    n_steps: int = 8
    """n of the n-step TD targets: env steps per env in each window, one gradient step per
    window (Mnih et al. 2016's A3C used 5)."""
    gae_lambda: float = 1.0
    """1: the plain n-step returns of the window; below 1, GAE's mix of them."""
    ent_coef: float = 0.01
    """Entropy bonus coefficient (Mnih et al. 2016: 0.01)."""
    norm_adv: bool = False
    """Normalize advantages over each window (off, as Stable-Baselines3's A2C)."""


class A2C(ActorCriticAlgorithm):
    """Synchronous advantage actor-critic (n-step TD targets) with recurrent backbones; its
    arguments are those of :class:`~snrl.agents.ppo.ActorCriticAlgorithm` (``config``: an
    :class:`A2CConfig`). ``learning_rule="eprop"`` trains the spiking layers online (traces
    carried across windows; a checkpoint does not hold them: a resumed run restarts its envs,
    so every episode and every trace starts over at zero, as in a fresh run)."""

    Config = A2CConfig
    algo_name = "a2c"
    online_eprop: ClassVar[bool] = True

    def _start_envs(self) -> None:
        super()._start_envs()
        reset = getattr(self.learning_rule, "reset_traces", None)
        if reset is not None:  # new envs: every episode, and so every trace, starts over
            reset()

    def window_loss(self, mb: Minibatch) -> tuple[torch.Tensor, dict[str, torch.Tensor], Any]:
        """The loss of one window (every env, with its graph): ``-mean(A log pi) + vf_coef x
        0.5 mean((R - V)^2) - ent_coef x mean(H)`` + the rate regularization + the
        ``loss_terms``. Returns ``(loss, parts, activity)``: ``parts`` the ``policy``,
        ``value`` and ``entropy`` terms; ``activity`` the policy's. Online e-prop: the carried
        traces of the envs whose episode starts at the window's first step restart first."""
        cfg = self.config
        restart = getattr(self.learning_rule, "restart_rows", None)
        if restart is not None:  # online e-prop: episodes that start with this window
            restart(mb.starts[0])
        with self.learning_rule.applied(self.agent):  # e-prop: spiking layers without a graph
            logp, entropy, values, activity, *supervised = self.agent.evaluate_sequence(
                mb.obs, mb.actions, mb.starts, mb.states, mb.logit_noise, targets=mb.targets
            )
        adv = mb.advantages
        if cfg.norm_adv and adv.numel() > 1:
            adv = normalized_advantages(adv, mb.groups)
        pg_loss = -(adv * logp).mean()
        v_loss = 0.5 * ((values - mb.returns) ** 2).mean()
        ent = entropy.mean()
        loss = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss + cfg.rate_term(activity)
        if self.loss_terms:
            loss = loss + self._extra_loss(activity, mb)
        parts = {"policy": pg_loss, "value": v_loss, "entropy": ent}
        if supervised:
            term = cfg.supervised_term(supervised[0], mb.targets)
            loss = loss + cfg.supervised_weight(self.env_step) * term
            parts["supervised"] = term
        return loss, parts, activity

    def _learn_from(self, rollout: RolloutBuffer) -> dict[str, Any]:
        """One gradient step on the window; its row entries: the learning rate, the losses,
        the gradient norm before clipping, explained variance and spike rates."""
        cfg = self.config
        lr = self.optimizer.param_groups[0]["lr"]
        env_step = self.env_step + cfg.batch_size  # the env step this update belongs to
        mb = rollout.minibatch(torch.arange(cfg.n_envs), 0, cfg.n_steps)
        loss, parts, activity = self.window_loss(mb)
        for name, key in (
            ("value loss", "value"),
            ("policy loss", "policy"),
            ("entropy", "entropy"),
        ):
            check_finite(parts[key], name, env_step=env_step, cause=LOSS_CAUSE)
        self.optimizer.zero_grad()
        self.learning_rule.backward(loss)  # BPTT: loss.backward(); e-prop: traces carried on
        grad_norm = self._clip_grad_norm(cfg.max_grad_norm)
        check_finite(grad_norm, "gradient norm", env_step=env_step, cause=LOSS_CAUSE)
        self._optimizer_step()
        self.env_step += cfg.batch_size
        out = {
            "lr": lr,
            "policy_loss": parts["policy"].item(),
            "value_loss": parts["value"].item(),
            "entropy": parts["entropy"].item(),
            "grad_norm": float(grad_norm),
            "explained_variance": explained_variance(rollout),
        }
        if "supervised" in parts:
            out["supervised_loss"] = parts["supervised"].item()
        for k, v in activity.spike_rates().items():
            out[f"spike_rate_{k}"] = float(v)
        return out
