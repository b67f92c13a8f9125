"""PPO with recurrent (spiking or ANN) policy and critic backbones.

Data flow, one update::

    vector env --obs--> agent.preprocess --> ActorCriticAgent.step (state carried across env
        steps, reset per finished env)
        --> RolloutBuffer (normalized obs, the state before every step, episode starts,
            actions, old log-probs, values, rewards, terminated/done, V(final obs))
        --> GAE (truncation bootstraps from V(final obs), termination does not)
        --> minibatches of whole env sequences (optionally chunked), state rebuilt from the
            stored state at the sequence start (truncated BPTT)
        --> clipped surrogate + value loss (optionally clipped) - entropy bonus
        --> one global grad-norm clip, optimizer step (Adam); LR schedule (linear); optional
            target-KL stop.

The training loop is :meth:`snrl.agents.base.Algorithm.learn` (collect, update, log,
evaluate, checkpoint, callbacks); PPO supplies one iteration: :meth:`PPO._collect_rollout`
and :meth:`PPO._learn_from`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from snrl.agents.agent import ActorCriticAgent, ReturnScaler, SharedActorCriticAgent
from snrl.agents.base import Algorithm
from snrl.agents.config import AgentConfig
from snrl.agents.limits import check, check_finite, check_parameters
from snrl.buffers.rollout import RolloutBuffer, normalized_advantages
from snrl.envs import ActionMap, ObsFlattener, finished_episodes
from snrl.envs.trials import ground_truth
from snrl.errors import NonFiniteError, UserError
from snrl.functional.state import index_state
from snrl.layers.base import cached_weights
from snrl.learning import make_learning_rule
from snrl.networks.interop import module_backbone
from snrl.training.rundir import prepare_run_dir


@dataclass(frozen=True, kw_only=True)
class ActorCriticConfig(AgentConfig):
    """The fields of the on-policy actor-critic algorithms (PPO, A2C); the defaults are PPO's
    (the fields shared with DQN are documented in :class:`snrl.agents.config.AgentConfig`)."""

    n_steps: int = 32
    """Segment length per env and update."""
    lr: float = 1e-3
    """Learning rate (its start value: see lr_schedule)."""
    gamma: float = 0.98
    """Discount."""
    gae_lambda: float = 0.8
    """GAE lambda."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    vf_coef: float = 0.5
    """Value loss coefficient."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clip."""
    norm_adv: bool = True
    """Normalize advantages per minibatch."""
    norm_adv_by_task: bool = False
    """With several tasks in one env (``--tasks``, the task of each step read from the env's
    ``task_index``): normalize the advantages within each task's steps of a minibatch rather
    than over all of them (needs ``norm_adv``), so each task's policy gradient has one scale
    whatever its reward variance, as multi-task RL normalizes per task (Hessel et al. 2019,
    without PopArt's value rescaling). Refused for an env with one task."""
    normalize_reward: bool = False
    """Scale the rewards used for learning by the running std of the discounted return
    (clipped to +-10), as rl-baselines3-zoo's ``normalize: true`` does; returns in metrics and
    evaluations stay raw. For long episodes of constant penalties (Acrobot, MountainCar) and
    for large rewards (LunarLander's +-100, where the critic's gradient otherwise dominates the
    one global clip)."""
    log_std_init: float = 0.0
    """Initial log-std of Gaussian (Box) policies (with use_sde: of each entry of the
    exploration matrix's scale; for Discrete actions with use_sde, that scale, fixed)."""
    rate_reg: float = 4.0
    """Firing-rate regularization: adds ``rate_reg`` times the mean over the policy's spiking
    neurons of ``(r_j - clip(r_j, *rate_range))**2`` to the loss, ``r_j`` the neuron's spikes
    per step over the minibatch: no pull inside the range (0: off; ANN backbones ignore it).
    Without it trained CartPole policies drift above 0.3 spikes per step
    (docs/benchmarks.md#ppos-defaults)."""
    supervised_coef: float = 0.0
    """A supervised term beside the rewards: adds ``supervised_coef`` times the policy's
    cross-entropy against the task's ground-truth action (the ``gt`` of a trial task's step
    info: NeuroGym and snrl.tasks) at every step that has one (0: off; Discrete actions).
    The teacher signal with which Song et al. 2016 and Yang et al. 2019 train their networks,
    held for the whole run or, with supervised_steps, a warm start."""
    supervised_balance: bool = True
    """With supervised_coef: average the cross-entropy within the steps of each ground-truth
    action and then over the actions, so each weighs the same (true), or over all steps
    (false: fixation, most of a trial, weighs most)."""
    supervised_steps: int = 0
    """With supervised_coef: the env step at which the term's weight, falling linearly from
    supervised_coef, reaches 0; the rewards alone train the policy after it (0: the weight
    stays supervised_coef for the whole run)."""

    has_critic: ClassVar[bool] = True
    positive_ints: ClassVar[tuple[str, ...]] = (*AgentConfig.positive_ints, "n_steps")

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.lr > 0, f"lr={self.lr} (must be > 0)")
        check(0 < self.gamma <= 1, f"gamma={self.gamma} (must be in (0, 1])")
        check(0 <= self.gae_lambda <= 1, f"gae_lambda={self.gae_lambda} (must be in [0, 1])")
        check(self.max_grad_norm > 0, f"max_grad_norm={self.max_grad_norm} (must be > 0)")
        check(self.ent_coef >= 0, f"ent_coef={self.ent_coef} (must be >= 0)")
        check(self.vf_coef >= 0, f"vf_coef={self.vf_coef} (must be >= 0)")
        check(self.supervised_coef >= 0, f"supervised_coef={self.supervised_coef} (must be >= 0)")
        check(
            self.supervised_steps >= 0,
            f"supervised_steps={self.supervised_steps} (must be >= 0; 0: no decay)",
        )
        check(
            self.norm_adv or not self.norm_adv_by_task,
            "norm_adv_by_task=true normalizes within each task, but norm_adv=false turns the "
            "normalization off (set norm_adv=true too)",
        )
        check(
            -20 <= self.log_std_init <= 5,
            f"log_std_init={self.log_std_init} (must be in [-20, 5]: a std of 2e-9 to 148)",
        )

    def memory_bytes(self, obs_size: int, head_size: int) -> dict[str, int]:
        """:meth:`AgentConfig.memory_bytes` plus the rollout of one update: observations
        (normalized and raw), the backbones' states (two, or one shared trunk) and the
        autograd graph over them."""
        parts = super().memory_bytes(obs_size, head_size)
        states = 6 if self.shared_trunk else 12  # one backbone's state, or two
        per_step = 2 * obs_size + states * self.n_layers * self.hidden_size + 12
        parts["rollout"] = 4 * self.n_envs * self.n_steps * per_step
        return parts

    def supervised_weight(self, env_step: int) -> float:
        """The supervised term's weight at ``env_step``: ``supervised_coef``, falling linearly
        to 0 at ``supervised_steps`` (when that is set)."""
        if not self.supervised_steps:
            return self.supervised_coef
        return self.supervised_coef * max(0.0, 1.0 - env_step / self.supervised_steps)

    def supervised_term(self, nll: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The supervised term's cross-entropy from the per-step ``nll`` (T, b) and
        ``targets`` (-1: none): balanced over the target actions (``supervised_balance``) or
        the mean over the steps with a target (a scalar; 0, with the graph, when none has)."""
        has = targets >= 0
        if not bool(has.any()):
            return nll.sum()  # every entry is 0
        if not self.supervised_balance:
            return nll[has].mean()
        index, values = targets[has], nll[has]
        counts = torch.bincount(index)
        sums = values.new_zeros(len(counts)).index_add(0, index, values)
        present = counts > 0
        return (sums[present] / counts[present]).mean()

    @property
    def batch_size(self) -> int:
        """Env steps per update."""
        return self.n_envs * self.n_steps


def keep_field_order(cls: type, order: tuple[str, ...]) -> type:
    """Put the dataclass fields named in ``order`` in that order (after the others), so
    that ``config_to_dict`` (config.json, checkpoints) lists a config's keys as it did before
    some of them moved to a shared base class. Construction is keyword-only, so nothing
    else depends on the order."""
    fields = cls.__dataclass_fields__
    missing = set(order) - set(fields)
    if missing:
        raise TypeError(f"{cls.__name__} has no fields {sorted(missing)}")
    head = {k: f for k, f in fields.items() if k not in order}
    cls.__dataclass_fields__ = head | {k: fields[k] for k in order}
    return cls


@dataclass(frozen=True, kw_only=True)
class PPOConfig(ActorCriticConfig):
    """PPO hyperparameters; the defaults solve CartPole-v1 with a Dale LIF backbone (the
    fields shared with A2C are documented in :class:`ActorCriticConfig`, those shared with DQN
    in :class:`snrl.agents.config.AgentConfig`)."""

    n_envs: int = 16
    """Parallel envs. 16 rather than 8: on CartPole with a Dale LIF, more last models reach 500
    and a run takes less wall time (a batch of 16 costs a spiking network barely more than 8;
    docs/benchmarks.md#ppos-defaults)."""
    n_epochs: int = 10
    """Passes over the segment per update. 10 rather than rl-zoo's 20 for CartPole: 20 reaches
    475 sooner, but left a verification seed's last model far below it and takes longer
    (docs/benchmarks.md#ppos-defaults)."""
    n_minibatches: int = 1
    """Minibatches per epoch; each takes n_envs / n_minibatches whole env sequences."""
    chunk_len: int = 0
    """Cut sequences into chunks of this many steps for BPTT (0: whole segment)."""
    lr_schedule: str = "linear"
    """The learning rate over the run: linear (annealed to 0, as rl-zoo's PPO) | constant |
    cosine; in Python also a callable of the progress in [0, 1] (see AgentConfig)."""
    clip_coef: float = 0.2
    """Surrogate clipping range."""
    clip_vloss: bool = False
    """Clip the value update around the old values (same range as clip_coef)."""
    target_kl: float | None = 0.02
    """Stop an update's epochs early when the approximate KL exceeds this (none: never).
    On CartPole it kept the last checkpoint at 500 on 4 of 4 seeds where 1 of 5 collapsed
    to 415 without it."""
    use_sde: bool = False
    """Generalized state-dependent exploration (Box actions; SB3's ``use_sde``): the action
    noise is a random linear function of the policy's last hidden layer (``tanh(v /
    threshold)`` of a spiking layer's membranes), held fixed between draws, so that
    exploration is coherent over time and a function of the state (rl-zoo uses it for
    Pendulum and MountainCarContinuous). With Discrete actions (snrl's extension) the noise
    is added to the logits while collecting: each env acts by a random state-dependent policy
    between draws; the offsets are stored with the rollout and added again in the update."""
    sde_sample_freq: int = -1
    """With use_sde: env steps between new exploration matrices (-1: one per rollout)."""

    positive_ints: ClassVar[tuple[str, ...]] = (*ActorCriticConfig.positive_ints, "n_epochs")

    def __post_init__(self) -> None:
        super().__post_init__()
        check(
            1 <= self.n_minibatches <= self.n_envs and self.n_envs % self.n_minibatches == 0,
            f"n_minibatches={self.n_minibatches} (must divide n_envs={self.n_envs})",
        )
        check(0 <= self.chunk_len, f"chunk_len={self.chunk_len} (must be >= 0)")
        check(self.clip_coef > 0, f"clip_coef={self.clip_coef} (must be > 0)")
        check(
            self.target_kl is None or self.target_kl > 0,
            f"target_kl={self.target_kl} (must be > 0 or none)",
        )
        check(
            self.sde_sample_freq == -1 or self.sde_sample_freq >= 1,
            f"sde_sample_freq={self.sde_sample_freq} (must be -1 (once per rollout) or >= 1)",
        )


# config.json and checkpoints list PPO's keys as before ActorCriticConfig existed
keep_field_order(
    PPOConfig,
    (
        "n_steps",
        "n_epochs",
        "n_minibatches",
        "chunk_len",
        "lr",
        "gamma",
        "gae_lambda",
        "clip_coef",
        "clip_vloss",
        "ent_coef",
        "vf_coef",
        "max_grad_norm",
        "target_kl",
        "norm_adv",
        "norm_adv_by_task",
        "normalize_reward",
        "log_std_init",
        "use_sde",
        "sde_sample_freq",
    ),
)


def build_agent(
    cfg: Any, observation_space, action_space, *, policy=None, critic=None
) -> ActorCriticAgent:
    """The agent a config describes; ``policy``/``critic`` replace the built backbones. With
    ``cfg.shared_trunk``: one backbone built by name whose readout has the policy's outputs
    and the value (:class:`SharedActorCriticAgent`)."""
    obs_size = ObsFlattener(observation_space).size
    if getattr(cfg, "shared_trunk", False):
        if policy is not None or critic is not None:
            raise UserError(
                "shared_trunk=true builds one network for policy and value by name; policy=/"
                "critic= modules are two separate networks (pass backbone='lif' ..., or set "
                "shared_trunk=false)"
            )
        head = ActionMap(action_space).size
        trunk = cfg.build_backbone(obs_size, head + 1, seed=cfg.seed)
        _init_shared_readout(trunk, head)
        return SharedActorCriticAgent(
            observation_space,
            action_space,
            trunk=trunk,
            normalize_obs=cfg.normalize_obs,
            log_std_init=getattr(cfg, "log_std_init", 0.0),
            use_sde=getattr(cfg, "use_sde", False),
            seed=cfg.seed + 31,
        )
    if policy is None:
        policy = cfg.build_backbone(obs_size, ActionMap(action_space).size, seed=cfg.seed)
        _init_readout(policy, gain=0.01)
    if critic is None:
        critic = cfg.build_backbone(obs_size, 1, seed=cfg.seed + 7919)
        _init_readout(critic, gain=1.0)
    return ActorCriticAgent(
        observation_space,
        action_space,
        policy=policy,
        critic=critic,
        normalize_obs=cfg.normalize_obs,
        log_std_init=getattr(cfg, "log_std_init", 0.0),
        use_sde=getattr(cfg, "use_sde", False),
        seed=cfg.seed + 31,
    )


def _init_readout(net: nn.Module, gain: float) -> None:
    """Orthogonal init of ANN linear layers (hidden gain sqrt(2), readout ``gain``, zero
    biases), as in the PPO implementation details of Huang et al. (2022). Spiking layers keep
    their own init; their readout weights are scaled so that the initial policy is near
    uniform (``gain`` < 1) like the ANN one."""
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    for i, m in enumerate(linears):
        nn.init.orthogonal_(m.weight, gain=gain if i == len(linears) - 1 else math.sqrt(2))
        nn.init.zeros_(m.bias)
    for m in net.modules():
        if isinstance(m, nn.GRU | nn.LSTM):
            for name, p in m.named_parameters():
                if "weight" in name:
                    nn.init.orthogonal_(p)
                else:
                    nn.init.zeros_(p)
    readout = _readout_of(net)
    if readout is not None and gain < 1:
        with torch.no_grad():
            for name, p in readout.named_parameters():
                if "weight" in name:
                    p.mul_(gain * 10)


def _readout_of(net: nn.Module) -> nn.Module | None:
    """The LI readout of a spiking backbone (or of the one inside an encoder), else None."""
    return getattr(net, "readout", None) or getattr(getattr(net, "backbone", None), "readout", None)


def _init_shared_readout(net: nn.Module, head: int) -> None:
    """:func:`_init_readout` for a shared trunk: the value's readout as a critic's (gain 1),
    the policy's ``head`` outputs scaled as a policy's (gain 0.01 for an ANN's orthogonal
    rows; 0.1 of the spiking readout's weights), so both start as they do in two networks."""
    _init_readout(net, gain=1.0)
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    readout = _readout_of(net)
    with torch.no_grad():
        if readout is not None:  # spiking: weights (N, head + 1), row = presynaptic neuron
            for name, p in readout.named_parameters():
                if "weight" in name:
                    p[:, :head].mul_(0.01 * 10)
        else:  # ANN (mlp, gru, lstm): the head is the last nn.Linear, weight (head + 1, H)
            linears[-1].weight[:head].mul_(0.01)


def explained_variance(buf: RolloutBuffer) -> float:
    """``1 - Var(returns - values) / Var(returns)`` over a segment (0 when the returns are
    constant): how much of the return the critic's values explained."""
    with torch.no_grad():
        y, v = buf.returns.flatten(), buf.values.flatten()
        var_y = y.var()
        return float(1 - (y - v).var() / var_y) if var_y > 0 else 0.0


LOSS_CAUSE = (
    "returns or advantages too large for float32, or a diverging update; scale the rewards "
    "down (e.g. gymnasium.wrappers.TransformReward) or lower lr"
)
_OBS_CAUSE = (
    "observations so large that the network overflows; scale them down or keep normalize_obs=true"
)


class ActorCriticAlgorithm(Algorithm):
    """What PPO and A2C share: the agent (policy and critic backbones), the learning rule,
    the optimizer, and the collection of one segment of ``n_steps`` per env into a
    :class:`RolloutBuffer` (recurrent state carried across env steps and reset per finished
    env; GAE with ``gamma`` and ``gae_lambda``). A subclass supplies the update.

    Args:
        env: gymnasium id or ``module:Class`` (overrides ``config.env``).
        config: the subclass's config; keyword ``overrides`` replace its fields.
        policy: optional recurrent-protocol module used as the policy backbone.
        critic: optional recurrent-protocol module used as the critic backbone.
        run_dir: directory for metrics.csv, checkpoints and the learning curve (None: none).
            A new or empty directory; an earlier run there is refused unless ``overwrite``.
        overwrite: replace the run in ``run_dir`` (deletes only the files snrl wrote there).
    """

    #: e-prop's traces carried from one update's segment to the next (A2C), or recomputed
    #: for every minibatch (PPO)
    online_eprop: ClassVar[bool] = False

    def __init__(
        self,
        env: str | None = None,
        *,
        config: ActorCriticConfig | None = None,
        policy: nn.Module | None = None,
        critic: nn.Module | None = None,
        run_dir: str | Path | None = None,
        overwrite: bool = False,
        **overrides: Any,
    ):
        user = module_backbone(overrides, policy, critic)  # backbone=<an nn.Module>
        obs_space, act_space = self._setup(
            env, config, overrides, {"policy": policy, "critic": critic, "backbone": user}
        )
        cfg = self.config
        if cfg.shared_trunk and user is not None:
            raise UserError(
                "shared_trunk=true builds one network for policy and value by name; a "
                "backbone= module becomes two separate networks (pass backbone='lif' ..., or "
                "set shared_trunk=false)"
            )
        if user is not None:  # a user's snntorch network: one copy each, snrl readouts
            policy = user.with_readout(ActionMap(act_space).size, seed=cfg.seed, gain=0.1)
            critic = user.with_readout(1, copy_module=True, seed=cfg.seed + 7919)
        self.custom_backbones = policy is not None or critic is not None
        with self._seeded(cfg.seed):
            self.agent = build_agent(cfg, obs_space, act_space, policy=policy, critic=critic)
        self.agent.to(self.device)
        self.learning_rule = make_learning_rule(  # BPTT or e-prop (docs/learning_rules.md)
            cfg.learning_rule,
            cfg.eprop_feedback,
            seed=cfg.seed,
            agent=self.agent,
            online=self.online_eprop,
        )
        if policy is not None:
            self._check_output_width("policy", policy, self.agent.head_size)
        if critic is not None:
            self._check_output_width("critic", critic, 1)
        self.optimizer = self._make_optimizer(self.agent.parameters(), eps=1e-5, fused=False)
        self.run_dir = None if run_dir is None else prepare_run_dir(run_dir, force=overwrite)
        self.env_step = 0
        self.n_updates = 0
        self.best_eval = -math.inf
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self._envs = None
        self.reward_scaler = ReturnScaler(cfg.n_envs, cfg.gamma) if cfg.normalize_reward else None

    # ---- collection ----------------------------------------------------------------------
    def _start_envs(self) -> None:
        self._open_envs()
        self._start = torch.ones(self.config.n_envs, dtype=torch.bool, device=self.device)

    def _task_group(self) -> torch.Tensor | None:
        """Each env's task at the coming step (``norm_adv_by_task``), else None."""
        if not self.config.norm_adv_by_task:
            return None
        return torch.as_tensor(self._envs.task_index, device=self.device)

    @torch.no_grad()
    def _collect(self) -> tuple[RolloutBuffer, list[float]]:
        cfg, agent = self.config, self.agent
        T, B = cfg.n_steps, cfg.n_envs
        buf = RolloutBuffer(
            n_steps=T,
            n_envs=B,
            obs_size=agent.obs_size,
            action_shape=agent.actions.shape,
            action_dtype=torch.long if agent.actions.discrete else torch.float32,
            device=self.device,
        )
        final_values = torch.zeros(T, B, device=self.device)
        raw = []
        episode_returns: list[float] = []
        with cached_weights():  # the parameters do not change during a rollout
            for t in range(T):
                self._collect_step(t, buf, raw, final_values, episode_returns)
        last_value = agent.value(agent.preprocess(self._obs), agent.value_state(self._state))
        buf.finish(
            final_values=final_values, last_value=last_value, gamma=cfg.gamma, lam=cfg.gae_lambda
        )
        agent.update_obs_stats(torch.stack(raw) if self._tensor_env else np.stack(raw))
        return buf, episode_returns

    def _collect_step(
        self,
        t: int,
        buf: RolloutBuffer,
        raw: list,
        final_values: torch.Tensor,
        episode_returns: list[float],
    ) -> None:
        """One env step of :meth:`_collect` for every env."""
        cfg, agent = self.config, self.agent
        B = cfg.n_envs
        raw.append(self._obs)
        x = agent.preprocess(self._obs)
        group = self._task_group()  # before the step: a trial that ends may change it
        if agent.use_sde and (t == 0 if cfg.sde_sample_freq < 0 else t % cfg.sde_sample_freq == 0):
            agent.reset_sde_noise(B)
        try:
            res = agent.step(x, self._state)
        except ValueError as e:  # torch's distribution refuses non-finite logits
            raise self._explain(e, x, self._state, self.env_step + t * B) from e
        env_action = self._env_actions(res.action)
        stepped = self._step_envs(env_action, self.env_step + (t + 1) * B)
        next_obs, reward, reward32, term, trunc, done, info = stepped
        if self.reward_scaler is not None:  # learning sees scaled rewards (returns stay raw)
            reward32 = self.reward_scaler(reward, done)
        # numpy from the env: one host -> device copy per vector step (on a GPU); tensors
        # from an env on the agent's device stay there
        reward_t, term_t, done_t = self._on_device(reward32, term, done)
        term_t, done_t = term_t.bool(), done_t.bool()
        if bool(trunc.any()):
            idx = torch.as_tensor(trunc).nonzero()[:, 0].cpu()
            final = np.stack([info["final_obs"][i] for i in idx.tolist()])
            critic_rows = index_state(agent.value_state(res.state), idx)
            final_values[t, idx] = agent.value(agent.preprocess(final), critic_rows)
        buf.add(
            obs=x,
            state=self._state,
            start=self._start,
            action=res.action,
            log_prob=res.log_prob,
            value=res.value,
            reward=reward_t,
            terminated=term_t,
            done=done_t,
            logit_noise=res.outputs.get("logit_noise"),
            group=group,
            target=self._targets(info) if cfg.supervised_coef else None,
        )
        episode_returns.extend(finished_episodes(info)[1].tolist())
        self._state = agent.reset_state(res.state, done_t)
        self._start = done_t
        self._obs = next_obs

    def _targets(self, info: dict[str, Any]) -> torch.Tensor:
        """Each env's ground-truth action index at the step just taken (-1: none), for the
        supervised term."""
        gt = ground_truth(info, self.config.n_envs)
        if gt is None:
            raise UserError(
                f"supervised_coef={self.config.supervised_coef} needs a task whose steps give "
                f"a ground-truth action (info['gt']: NeuroGym and snrl.tasks trial tasks); "
                f"{self.config.env} gives none (set supervised_coef=0)"
            )
        actions = self.agent.actions
        index = np.where(gt >= 0, gt - int(actions.space.start), -1)
        if (index >= actions.size).any() or (index < -1).any():
            raise UserError(
                f"{self.config.env} gave a ground-truth action {int(gt[index != -1].max())} "
                f"outside its action space {actions.space} (supervised_coef needs gt to be "
                "one of the actions; set supervised_coef=0)"
            )
        return torch.as_tensor(index, device=self.device)

    def _explain(self, error: ValueError, x: torch.Tensor, state: Any, env_step: int) -> Exception:
        """A :class:`NonFiniteError` naming what made ``agent.step`` fail on ``x`` (the
        observation, a parameter, or the policy's logits), or ``error`` itself when all of
        them are finite (then it is not a NaN problem)."""
        try:
            check_finite(x, "normalized observation", env_step=env_step, cause=_OBS_CAUSE)
            check_parameters(self.agent, env_step=env_step)
            agent = self.agent
            out = agent.actor.run(x, getattr(state, agent.actor_name)).out[..., : agent.head_size]
            check_finite(out, "policy output (logits or mean)", env_step=env_step, cause=_OBS_CAUSE)
        except NonFiniteError as e:
            return e
        return error

    def _collect_rollout(self, total: int) -> tuple[RolloutBuffer, list[float]]:
        """One segment of ``n_steps`` per env (an update's batch)."""
        return self._collect()

    def extra_state(self) -> dict[str, Any]:
        """The reward scaler's return moments (``normalize_reward``)."""
        if self.reward_scaler is None:
            return {}
        return {"reward_scaler": self.reward_scaler.state_dict()}

    def load_extra_state(self, extra: dict[str, Any]) -> None:
        """Restore :meth:`extra_state`."""
        if self.reward_scaler is not None and "reward_scaler" in extra:
            self.reward_scaler.load_state_dict(extra["reward_scaler"])


class PPO(ActorCriticAlgorithm):
    """Proximal policy optimization with recurrent backbones (arguments: those of
    :class:`ActorCriticAlgorithm`, with a :class:`PPOConfig`)."""

    Config = PPOConfig
    algo_name = "ppo"

    # ---- update --------------------------------------------------------------------------
    def minibatch_loss(self, mb: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor], Any]:
        """The loss PPO descends on one minibatch of whole sequences (with its graph):
        clipped surrogate + ``vf_coef`` x value loss - ``ent_coef`` x entropy + the rate
        regularization + the ``loss_terms``. Returns ``(loss, parts, activity)``: ``parts``
        the ``policy``, ``value`` and ``entropy`` terms and the probability ``ratio`` and
        ``log_ratio``; ``activity`` the policy's."""
        cfg = self.config
        with self.learning_rule.applied(self.agent):  # e-prop: spiking layers without a graph
            logp, entropy, values, activity, *supervised = self.agent.evaluate_sequence(
                mb.obs, mb.actions, mb.starts, mb.states, mb.logit_noise, targets=mb.targets
            )
        log_ratio = logp - mb.log_probs
        ratio = log_ratio.exp()
        adv = mb.advantages
        if cfg.norm_adv and adv.numel() > 1:
            adv = normalized_advantages(adv, mb.groups)
        pg_loss = torch.max(
            -adv * ratio, -adv * ratio.clamp(1 - cfg.clip_coef, 1 + cfg.clip_coef)
        ).mean()
        if cfg.clip_vloss:
            v_clip = mb.values + (values - mb.values).clamp(-cfg.clip_coef, cfg.clip_coef)
            v_loss = 0.5 * torch.max((values - mb.returns) ** 2, (v_clip - mb.returns) ** 2).mean()
        else:
            v_loss = 0.5 * ((values - mb.returns) ** 2).mean()
        ent = entropy.mean()
        loss = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss
        loss = loss + cfg.rate_term(activity)
        if self.loss_terms:
            loss = loss + self._extra_loss(activity, mb)
        parts = {
            "policy": pg_loss,
            "value": v_loss,
            "entropy": ent,
            "ratio": ratio,
            "log_ratio": log_ratio,
        }
        if supervised:
            term = cfg.supervised_term(supervised[0], mb.targets)
            loss = loss + cfg.supervised_weight(self.env_step) * term
            parts["supervised"] = term
        return loss, parts, activity

    def _update(self, buf: RolloutBuffer) -> dict[str, float]:
        cfg = self.config
        B, T = cfg.n_envs, cfg.n_steps
        per_mb = B // cfg.n_minibatches
        L = cfg.chunk_len or T
        chunks = [(t0, min(t0 + L, T)) for t0 in range(0, T, L)]
        env_step = self.env_step + cfg.batch_size  # the env step this update belongs to
        stats: dict[str, list[float]] = {}
        rates: dict[str, list[float]] = {}
        for _epoch in range(cfg.n_epochs):
            perm = torch.randperm(B, generator=self.generator)
            for m in range(cfg.n_minibatches):
                idx = perm[m * per_mb : (m + 1) * per_mb]
                for t0, t1 in chunks:
                    mb = buf.minibatch(idx, t0, t1)
                    loss, parts, activity = self.minibatch_loss(mb)
                    pg_loss, v_loss, ent = parts["policy"], parts["value"], parts["entropy"]
                    ratio, log_ratio = parts["ratio"], parts["log_ratio"]
                    for name, value in (
                        ("value loss", v_loss),
                        ("policy loss", pg_loss),
                        ("entropy", ent),
                    ):
                        check_finite(value, name, env_step=env_step, cause=LOSS_CAUSE)
                    self.optimizer.zero_grad()
                    self.learning_rule.backward(loss)  # BPTT: loss.backward()
                    grad_norm = self._clip_grad_norm(cfg.max_grad_norm)
                    check_finite(grad_norm, "gradient norm", env_step=env_step, cause=LOSS_CAUSE)
                    self._optimizer_step()
                    with torch.no_grad():
                        approx_kl = ((ratio - 1) - log_ratio).mean().item()
                        clipfrac = ((ratio - 1).abs() > cfg.clip_coef).float().mean().item()
                    if "supervised" in parts:
                        stats.setdefault("supervised_loss", []).append(parts["supervised"].item())
                    for k, v in (
                        ("policy_loss", pg_loss.item()),
                        ("value_loss", v_loss.item()),
                        ("entropy", ent.item()),
                        ("approx_kl", approx_kl),
                        ("clip_fraction", clipfrac),
                    ):
                        stats.setdefault(k, []).append(v)
                    for name, rate in activity.spike_rates().items():
                        rates.setdefault(name, []).append(rate)
            if cfg.target_kl is not None and stats["approx_kl"][-1] > cfg.target_kl:
                break
        out = {k: float(np.mean(v)) for k, v in stats.items()}
        out["approx_kl"] = stats["approx_kl"][-1]
        out["explained_variance"] = explained_variance(buf)
        for k, v in rates.items():
            out[f"spike_rate_{k}"] = float(np.mean(v))
        return out

    # ---- one iteration of the loop (Algorithm.learn) ---------------------------------------
    def _learn_from(self, rollout: RolloutBuffer) -> dict[str, Any]:
        """The PPO update on one segment; its row entries: the learning rate and the
        update's losses, KL, clip fraction, explained variance and spike rates."""
        lr = self.optimizer.param_groups[0]["lr"]
        stats = self._update(rollout)
        self.env_step += self.config.batch_size
        return {"lr": lr, **stats}
