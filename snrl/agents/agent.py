"""Agents: gymnasium spaces -> preprocessing -> recurrent backbones -> heads -> env actions.

:class:`Agent` is the one base. It owns what every algorithm shares:

    raw obs --preprocess (flatten, normalize)--> x --backbones (state carried)--> readouts
        --head (the subclass)--> agent action --env_action (ActionMap)--> env action

and each algorithm's agent adds only its head: :class:`ActorCriticAgent` (PPO) a policy
distribution and a critic value, :class:`snrl.agents.dqn.QAgent` Q-values.

The policy's readout *is* the distribution's parameter vector (logits for Discrete and
MultiDiscrete, the mean for Box, whose log-std is a learned state-independent vector). For a
spiking backbone the readout is the membrane of its leaky-integrator layer. The critic's
readout is one value. Policy and critic are separate backbones with separate states
(:class:`ActorCriticAgent`), or one backbone whose readout has both, the policy's outputs and
the value, with one state (:class:`SharedActorCriticAgent`, ``shared_trunk``).
"""

from __future__ import annotations

from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn
from torch.distributions import Categorical, Normal

from snrl.envs.spaces import ActionMap, ObsFlattener
from snrl.errors import UserError, explain_foreign_calls
from snrl.functional.state import State
from snrl.networks.activity import Activity
from snrl.networks.sequence import run_many_with_resets, run_with_resets


class AgentState(NamedTuple):
    """Recurrent state of an actor-critic agent's two backbones."""

    policy: Any
    critic: Any


class TrunkState(NamedTuple):
    """Recurrent state of a shared-trunk actor-critic agent's one backbone."""

    trunk: Any


class StepResult(NamedTuple):
    """What :meth:`ActorCriticAgent.step` returns."""

    action: Tensor
    log_prob: Tensor | None
    value: Tensor | None
    state: AgentState | TrunkState
    outputs: dict[str, Tensor]
    activity: dict[str, Tensor]


class ObsNormalizer(nn.Module):
    """Running mean/std of observations (parallel-variance update, Chan et al. 1979).

    Its buffers are part of the agent's ``state_dict``, so a saved agent normalizes exactly as
    it did in training. ``update`` is called by the algorithm on fresh rollout data only.
    """

    def __init__(self, size: int, *, enabled: bool = True, clip: float = 10.0, eps: float = 1e-8):
        super().__init__()
        self.enabled = enabled
        self.clip = clip
        self.eps = eps
        self.register_buffer("mean", torch.zeros(size, dtype=torch.float64))
        self.register_buffer("var", torch.ones(size, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: Tensor) -> None:
        """Fold a batch (..., F) of raw observations into the running moments."""
        if not self.enabled:
            return
        # on the statistics' device (one copy of the whole batch when the agent is on a GPU)
        x = x.reshape(-1, x.shape[-1]).to(self.mean.device, torch.float64)
        n = x.shape[0]
        b_mean, b_var = x.mean(0), x.var(0, unbiased=False)
        delta = b_mean - self.mean
        tot = self.count + n
        m2 = self.var * self.count + b_var * n + delta**2 * self.count * n / tot
        self.mean += delta * n / tot
        self.var.copy_(m2 / tot)
        self.count.copy_(tot)

    def forward(self, x: Tensor) -> Tensor:
        if not self.enabled:
            return x
        mean, std = self.mean.to(x.dtype), torch.sqrt(self.var + self.eps).to(x.dtype)
        return torch.clamp((x - mean) / std, -self.clip, self.clip)


class ReturnScaler:
    """Reward scaling by the running std of the discounted return, for training only (as
    Stable-Baselines3's ``VecNormalize(norm_reward=True)`` and gymnasium's ``NormalizeReward``
    do): per env ``G_t = gamma G_{t-1} + r_t``, restarted after an episode ends; the reward
    used for learning is ``clip(r_t / sqrt(Var[G] + eps), -clip, clip)``, its moments from
    all envs' ``G`` so far (:class:`ObsNormalizer`'s update). Reported returns stay raw.
    """

    def __init__(self, n_envs: int, gamma: float, *, clip: float = 10.0, eps: float = 1e-8):
        self.gamma, self.clip, self.eps = float(gamma), float(clip), float(eps)
        self.moments = ObsNormalizer(1)
        self.ret = torch.zeros(int(n_envs), dtype=torch.float64)
        """The running discounted return per env (on the rewards' device)."""

    def __call__(self, reward: Any, done: Any) -> Any:
        """The scaled rewards (float64) of one vector step (``done``: the episodes that ended
        at it): numpy for numpy rewards, a tensor on their device for a tensor (a batched
        env's); the return moments stay on the CPU."""
        tensor = isinstance(reward, Tensor)
        r = reward.to(torch.float64) if tensor else torch.from_numpy(np.asarray(reward, np.float64))
        d = done if isinstance(done, Tensor) else torch.from_numpy(np.asarray(done, dtype=bool))
        self.ret = self.ret.to(r.device) * self.gamma + r
        self.moments.update(self.ret[:, None])
        std = float(torch.sqrt(self.moments.var[0] + self.eps))
        self.ret[d.to(r.device)] = 0.0
        out = torch.clamp(r / std, -self.clip, self.clip)
        return out if tensor else out.numpy()

    def state_dict(self) -> dict[str, Tensor]:
        """The return moments (the per-env running returns restart at 0 on resume)."""
        return {k: v.clone() for k, v in self.moments.state_dict().items()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.moments.load_state_dict(state)


class Agent(nn.Module):
    """What every agent shares: spaces, preprocessing, backbone state, env actions.

    A subclass registers its backbones as submodules named in ``backbones`` (the fields of
    its ``state_type`` named tuple), names the one that chooses actions in ``actor_name`` (its
    activity is what trajectories record) and adds its head and ``step``.

    Args:
        observation_space: Box (any shape; flattened) or Discrete (one-hot).
        action_space: Discrete, MultiDiscrete (1-D) or Box (any shape; flattened).
        normalize_obs: keep running observation statistics and normalize with them.
        seed: seed of the agent's own generator, which draws its stochastic actions (the
            global torch RNG is never used while acting).
    """

    state_type: ClassVar[type]
    actor_name: ClassVar[str]
    #: state_dict keys of older snrl versions -> today's keys (prefix renames); None drops
    legacy_keys: ClassVar[dict[str, str | None]] = {"act_low": None, "act_high": None}

    @explain_foreign_calls(
        "snrl.Agent(...)",
        {},
        default="snrl.Agent(observation_space, action_space) maps spaces to network heads, it "
        "does not train (NeuroTorch's Agent(env=..., policy=...) does): train with "
        "snrl.PPO(env, policy=module) or snrl.DQN(env, policy=module)",
    )
    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        *,
        normalize_obs: bool = True,
        seed: int = 0,
    ):
        super().__init__()
        self.generator = torch.Generator().manual_seed(int(seed))
        self.observation_space = observation_space
        self.action_space = action_space
        self.flattener = ObsFlattener(observation_space)
        self.obs_size = self.flattener.size
        self.actions = ActionMap(action_space)
        self.kind = self.actions.kind
        self.obs_norm = ObsNormalizer(self.obs_size, enabled=normalize_obs)
        self._register_load_state_dict_pre_hook(self._rename_legacy_keys)

    def _rename_legacy_keys(self, state_dict, prefix, *_args) -> None:
        for key in list(state_dict):
            if not key.startswith(prefix):
                continue
            name = key[len(prefix) :]
            for old, new in self.legacy_keys.items():
                if name == old or name.startswith(old + "."):
                    value = state_dict.pop(key)
                    if new is not None:
                        state_dict[prefix + new + name[len(old) :]] = value
                    break

    # ---- state ---------------------------------------------------------------------------
    @property
    def backbones(self) -> tuple[str, ...]:
        """Names of the backbone submodules, in the order of the state's fields."""
        return tuple(self.state_type._fields)

    @property
    def actor(self) -> nn.Module:
        """The backbone that chooses the actions (its activity is recorded)."""
        return getattr(self, self.actor_name)

    def initial_state(self, batch_size: int, device: torch.device | str | None = None):
        """The initial state of every backbone, as a ``state_type`` named tuple."""
        return self.state_type(
            *(getattr(self, n).initial_state(batch_size, device=device) for n in self.backbones)
        )

    def reset_state(self, state, done: Tensor | np.ndarray):
        """Re-initialize the rows of every backbone's state where ``done`` ((B,) bool, a
        tensor or a numpy array: converted, onto the agent's device, only when a row is
        done)."""
        if not bool(done.any()):
            return state
        done = torch.as_tensor(done, device=self.obs_norm.mean.device)
        return self.state_type(
            *(getattr(self, n).reset_state(s, done) for n, s in zip(self.backbones, state))
        )

    @property
    def random_reset(self) -> bool:
        """True when a reset draws random numbers (``hh_init="random"``): sequence updates
        then replay the states recorded in the rollout instead of calling ``reset_state``."""
        return any(getattr(m, "hh_init", None) == "random" for m in self.modules())

    # ---- observations and actions --------------------------------------------------------
    def preprocess(self, obs: Any, device: torch.device | str | None = None) -> Tensor:
        """The one path from raw observations (*batch, *space.shape) to the backbones' input
        (*batch, F): flattened (one-hot for Discrete) and normalized with the running
        statistics (on ``device``, by default the agent's)."""
        dev = self.obs_norm.mean.device if device is None else device
        x = torch.as_tensor(self.flattener(obs), device=dev)
        return self.obs_norm(x) if self.obs_norm.enabled else x

    def update_obs_stats(self, obs: Any) -> None:
        """Fold raw observations (*batch, *space.shape) into the normalization statistics."""
        if self.obs_norm.enabled:  # else nothing to fold (and no copy to make)
            dev = self.obs_norm.mean.device
            self.obs_norm.update(torch.as_tensor(self.flattener(obs), device=dev))

    def env_action(self, action: Tensor | np.ndarray) -> np.ndarray:
        """Agent actions (B, ...) -> env actions: ``start`` added to discrete indices, Box
        vectors clipped to the bounds and reshaped to the space's shape (see
        :class:`snrl.envs.spaces.ActionMap`)."""
        if isinstance(action, Tensor):
            action = action.detach().cpu().numpy()
        return self.actions.to_env(action)

    def env_action_tensor(self, action: Tensor) -> Tensor:
        """:meth:`env_action` kept a tensor on the actions' device, for a batched env that
        takes tensors there (``snrl.tasks`` on the agent's device)."""
        return self.actions.to_env_tensor(action.detach())


class ActorCriticAgent(Agent):
    """Policy and critic backbones with the heads the spaces call for (PPO).

    Args:
        observation_space: Box (any shape; flattened) or Discrete (one-hot).
        action_space: Discrete, MultiDiscrete or Box.
        policy: a recurrent-protocol module whose output width is the head size
            (``n`` logits, ``sum(nvec)`` logits, or the flattened action size for Box).
        critic: a recurrent-protocol module with output width 1.
        normalize_obs: keep running observation statistics and normalize with them.
        log_std_init: initial log standard deviation of a Box policy (with ``use_sde``, of
            every entry of the exploration matrices' scale).
        use_sde: generalized state-dependent exploration (Raffin et al. 2022) for a Box
            policy: the action noise is ``z(s) @ theta``, ``z`` the policy's last hidden
            layer (``tanh(v / threshold)`` of a spiking layer, the activation of an ANN one;
            no gradient) and ``theta`` (F, A) a matrix per env drawn from N(0,
            exp(log_std)**2), held until :meth:`reset_sde_noise`. The log-probabilities are those of
            N(mean, sqrt(z**2 @ exp(log_std)**2 + 1e-6)), the noise's law over ``theta``.
            For a Discrete policy the same noise ``z(s) @ theta`` is added to the logits when
            sampling (a random, state-dependent policy per env, coherent in time), with a
            fixed scale ``exp(log_std_init)``; the offsets are returned in
            ``outputs["logit_noise"]`` and the log-probabilities are those of the perturbed
            logits, so an update given the same offsets reproduces them exactly.
    """

    state_type = AgentState
    actor_name = "policy"
    #: the backbone (and field of the state) the value is computed from
    value_name: ClassVar[str] = "critic"
    #: one backbone serves policy and value (:class:`SharedActorCriticAgent`)
    shared_trunk: ClassVar[bool] = False

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        *,
        policy: nn.Module,
        critic: nn.Module,
        normalize_obs: bool = True,
        log_std_init: float = 0.0,
        use_sde: bool = False,
        seed: int = 0,
    ):
        super().__init__(observation_space, action_space, normalize_obs=normalize_obs, seed=seed)
        self.head_size = self.actions.size
        self.policy = policy
        self.critic = critic
        self._init_heads(policy, log_std_init, use_sde)

    def _init_heads(self, policy: nn.Module, log_std_init: float, use_sde: bool) -> None:
        """The heads' own parameters: a Box policy's log-std (with ``use_sde``, the scale of
        the exploration matrices over the features of ``policy``'s last hidden layer)."""
        self.use_sde = bool(use_sde)
        self.sde_noise: Tensor | None = None
        if self.use_sde:
            shape: tuple[int, ...] = (_sde_feature_size(policy, self.kind), self.head_size)
        else:
            shape = (self.head_size,)
        if self.kind == "box":
            self.log_std = nn.Parameter(torch.full(shape, float(log_std_init)))
        elif self.use_sde:  # Discrete: the logit noise's scale is fixed (saved with the agent)
            self.register_buffer("log_std", torch.full(shape, float(log_std_init)))
        self.nvec = self.actions.nvec

    def value_state(self, state: Any) -> Any:
        """The part of the agent's ``state`` that :meth:`value` takes (the critic's, or the
        shared trunk's)."""
        return getattr(state, self.value_name)

    # ---- distributions -----------------------------------------------------------------------
    def distribution(self, out: Tensor, features: Tensor | None = None):
        """The action distribution for readout ``out`` (..., head_size); with ``use_sde``
        also the policy's features ``z`` (..., F) (see :meth:`sde_features`; for a Discrete
        policy, the logits given here are those without the exploration offsets)."""
        if self.kind == "discrete":
            return Categorical(logits=out)
        return self._distribution(out, features)

    def _distribution(self, out: Tensor, features: Tensor | None = None):
        """What the heads compute with: for Discrete the logits themselves (the log-probs,
        sample and entropy are a few tensor ops, see :func:`_categorical_log_prob_entropy`;
        a ``torch.distributions`` object costs more than the network step on the rollout
        path), else :meth:`distribution`."""
        if self.kind == "discrete":
            return out
        if self.kind == "multidiscrete":
            return [Categorical(logits=p) for p in torch.split(out, self.nvec, dim=-1)]
        if self.use_sde:
            if features is None:
                raise ValueError("use_sde: the policy's features are needed for its std")
            var = (features**2) @ (self.log_std.exp() ** 2)
            return Normal(out, torch.sqrt(var + SDE_EPS))
        return Normal(out, self.log_std.exp().expand_as(out))

    # ---- state-dependent exploration (use_sde) ---------------------------------------------
    def sde_features(self, activity: Activity, out: Tensor) -> Tensor:
        """``z``, the features the exploration noise is a function of: the last hidden layer
        of the policy (``tanh(v / threshold)`` of a spiking layer's membranes, which range
        over tens of thresholds; the activation of an ANN layer) after the env step's last
        neuron step, (..., F) as ``out`` (..., A); detached (the noise does not train the
        features, as SB3's default ``learn_features=False``)."""
        layer = [a for a in activity if a.kind != "readout"][-1]
        if layer.kind == "spiking":  # membranes range over tens of thresholds: squash them
            z = torch.tanh(layer.v / float(layer.threshold))
        else:
            z = layer.extra["h"]
        if z.dim() > out.dim():  # one env step of several neuron steps: (substeps, B, F)
            z = z[-1]
        elif z.dim() == 3 and z.shape[0] != out.shape[0]:  # (T * substeps, B, F)
            z = z.reshape(out.shape[0], -1, *z.shape[1:])[:, -1]
        return z.detach()

    @torch.no_grad()
    def reset_sde_noise(self, batch_size: int) -> None:
        """Draw a new exploration matrix per env, (batch_size, F, A), from N(0,
        exp(log_std)**2) with the agent's generator (PPO: once per rollout, or every
        ``sde_sample_freq`` env steps)."""
        std = self.log_std.exp()
        eps = torch.randn((batch_size, *std.shape), generator=self.generator)
        self.sde_noise = eps.to(std.device) * std

    def _log_prob_entropy(self, dist, action: Tensor) -> tuple[Tensor, Tensor]:
        if self.kind == "discrete":
            return _categorical_log_prob_entropy(dist, action)
        if self.kind == "multidiscrete":
            lp = sum(d.log_prob(action[..., i]) for i, d in enumerate(dist))
            ent = sum(d.entropy() for d in dist)
            return lp, ent
        return dist.log_prob(action).sum(-1), dist.entropy().sum(-1)

    def _sample(self, dist, deterministic: bool, features: Tensor | None = None) -> Tensor:
        """The mode, or a draw from the agent's own generator (with ``use_sde``, the held
        exploration matrix applied to ``features``)."""

        def categorical(d) -> Tensor:
            if deterministic:
                return d.probs.argmax(-1)
            p = d.probs.reshape(-1, d.probs.shape[-1]).cpu()
            idx = torch.multinomial(p, 1, generator=self.generator)
            return idx.reshape(d.probs.shape[:-1]).to(d.probs.device)

        if self.kind == "discrete":
            # NaN logits raise ValueError, as torch's Categorical does (callers name the
            # cause): multinomial refuses NaN probabilities itself, argmax is checked.
            if deterministic:
                if bool(torch.isnan(dist).any()):
                    raise ValueError("the policy's logits are NaN")
                return dist.argmax(-1)
            p = torch.softmax(dist, -1)  # the same probabilities Categorical samples from
            try:
                idx = torch.multinomial(
                    p.reshape(-1, p.shape[-1]).cpu(), 1, generator=self.generator
                )
            except RuntimeError as e:
                raise ValueError(f"the policy's logits are not finite ({e})") from e
            return idx.reshape(p.shape[:-1]).to(p.device)
        if self.kind == "multidiscrete":
            return torch.stack([categorical(d) for d in dist], dim=-1)
        if deterministic:
            return dist.mean
        if self.use_sde:
            return dist.mean + self._sde_noise(features)
        noise = torch.randn(dist.mean.shape, generator=self.generator, dtype=dist.mean.dtype)
        return dist.mean + dist.stddev * noise.to(dist.mean.device)

    def _sde_noise(self, z: Tensor) -> Tensor:
        """``z @ theta`` per env for features ``z`` (B, F), with a fresh matrix per env when
        none is held for this batch size (evaluation, ``predict``)."""
        if self.sde_noise is None or self.sde_noise.shape[0] != z.shape[0]:
            self.reset_sde_noise(z.shape[0])
        return torch.bmm(z.unsqueeze(1), self.sde_noise).squeeze(1)

    def head_outputs(self, out: Tensor, dist: Any = None) -> dict[str, Tensor]:
        """Policy outputs for trajectories: ``probs`` or ``mean``/``std``."""
        if self.kind == "box":
            std = dist.stddev if self.use_sde else self.log_std.exp().expand_as(out)
            return {"mean": out, "std": std}
        if self.kind == "discrete":
            return {"probs": torch.softmax(out, -1)}
        parts = torch.split(out, self.nvec, dim=-1)
        return {"probs": torch.cat([torch.softmax(p, -1) for p in parts], -1)}

    # ---- acting and learning -----------------------------------------------------------
    @torch.no_grad()
    def step(
        self, x: Tensor, state: AgentState, *, deterministic: bool = False, train: bool = True
    ) -> StepResult:
        """One env step for a batch of normalized observations ``x`` (B, F).

        ``train=False`` (evaluation) computes only what acting needs: no critic pass and no
        log-probability (``value`` and ``log_prob`` are None), and the critic's state is
        passed through unchanged."""
        pol_out, activity, val, new_state = self._run_step(x, state, train)
        z = self.sde_features(activity, pol_out) if self.use_sde else None
        logit_noise = None
        if z is not None and self.kind == "discrete" and not deterministic:
            logit_noise = self._sde_noise(z)
        out = pol_out if logit_noise is None else pol_out + logit_noise
        dist = self._distribution(out, z)
        action = self._sample(dist, deterministic, z)
        if not train:
            log_prob = None
        elif self.kind == "discrete":  # (no entropy on the rollout path)
            logp = dist - dist.logsumexp(-1, keepdim=True)
            log_prob = logp.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        else:
            log_prob, _ = self._log_prob_entropy(dist, action)
        outputs = self.head_outputs(out, dist)
        if logit_noise is not None:
            outputs["logit_noise"] = logit_noise
        return StepResult(action, log_prob, val, new_state, outputs, activity)

    def _run_step(
        self, x: Tensor, state: AgentState, train: bool
    ) -> tuple[Tensor, Activity, Tensor | None, AgentState]:
        """The backbones on one step: the policy's readout and activity, the value (B,)
        (None without ``train``: the critic is skipped, its state passed through) and the
        next state."""
        pol = self.policy.run(x, state.policy)
        if train:
            val, critic_state = self.critic(x, state.critic)
            val = val[..., 0]
        else:
            val, critic_state = None, state.critic
        return pol.out, pol.activity, val, AgentState(pol.state, critic_state)

    @torch.no_grad()
    def value(self, x: Tensor, critic_state: State) -> Tensor:
        """V(x) (B,) for normalized observations, from the given critic state (the part of
        the agent's state :meth:`value_state` names)."""
        return self.critic(x, critic_state)[0][..., 0]

    def evaluate_sequence(
        self,
        obs: Tensor,
        actions: Tensor,
        starts: Tensor,
        states: list[AgentState],
        logit_noise: Tensor | None = None,
        *,
        targets: Tensor | None = None,
    ) -> tuple[Any, ...]:
        """Log-probs, entropies and values of a whole (T, b) sequence, with gradients.

        The state is rebuilt from ``states[0]`` (the state recorded before the first step) and
        re-initialized where an episode starts inside the sequence, exactly as in the rollout.
        ``logit_noise`` (T, b, A): the exploration offsets the rollout added to the logits
        (Discrete ``use_sde``), added again. ``targets`` (T, b) ints, Discrete actions only:
        the ground-truth action of each step (-1: none).

        Returns:
            (log_probs, entropy, values), each (T, b), and the policy's activity; with
            ``targets``, a fifth item: the policy's cross-entropy against them per step,
            ``-log pi(target)`` (T, b), 0 where a step has none.
        """
        pol_out, values, activity = self._run_sequence(obs, starts, states)
        z = self.sde_features(activity, pol_out) if self.use_sde else None
        out = pol_out if logit_noise is None else pol_out + logit_noise
        dist = self._distribution(out, z)
        log_prob, entropy = self._log_prob_entropy(dist, actions)
        if targets is None:
            return log_prob, entropy, values, activity
        return log_prob, entropy, values, activity, _target_nll(out, targets)

    def _run_sequence(
        self, obs: Tensor, starts: Tensor, states: list[AgentState]
    ) -> tuple[Tensor, Tensor, Activity]:
        """The backbones over a (T, b) sequence with resets: the policy's readout (T, b, A),
        the values (T, b) and the policy's activity."""
        fresh_p = fresh_c = None
        if self.random_reset:
            fresh_p = [None if s is None else s.policy for s in states]
            fresh_c = [None if s is None else s.critic for s in states]
        pol, val = run_many_with_resets(
            [self.policy, self.critic],
            obs,
            [states[0].policy, states[0].critic],
            starts,
            [fresh_p, fresh_c],
        )
        return pol.out, val.out[..., 0], pol.activity


class SharedActorCriticAgent(ActorCriticAgent):
    """One backbone for policy and value: a shared trunk (``shared_trunk``; PPO).

    The trunk is one recurrent backbone (for a spiking one: one E/I assignment, one hidden
    state per env) whose readout has ``head_size + 1`` outputs: two leaky-integrator readouts
    side by side, the policy's (the first ``head_size``: logits or mean) and the value's (the
    last). LI readout units do not interact, so they are exactly two readouts on the same
    spikes; both losses reach the trunk.

    Args:
        observation_space, action_space, normalize_obs, log_std_init, use_sde, seed: as
            :class:`ActorCriticAgent`.
        trunk: a recurrent-protocol module with output width ``head_size + 1``.
    """

    state_type = TrunkState
    actor_name = "trunk"
    value_name = "trunk"
    shared_trunk = True

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        *,
        trunk: nn.Module,
        normalize_obs: bool = True,
        log_std_init: float = 0.0,
        use_sde: bool = False,
        seed: int = 0,
    ):
        Agent.__init__(
            self, observation_space, action_space, normalize_obs=normalize_obs, seed=seed
        )
        self.head_size = self.actions.size
        self.trunk = trunk
        self._init_heads(trunk, log_std_init, use_sde)

    def _run_step(
        self, x: Tensor, state: TrunkState, train: bool
    ) -> tuple[Tensor, Activity, Tensor | None, TrunkState]:
        res = self.trunk.run(x, state.trunk)
        val = res.out[..., self.head_size] if train else None
        return res.out[..., : self.head_size], res.activity, val, TrunkState(res.state)

    @torch.no_grad()
    def value(self, x: Tensor, trunk_state: State) -> Tensor:
        """V(x) (B,) for normalized observations, from the given trunk state."""
        return self.trunk(x, trunk_state)[0][..., self.head_size]

    def _run_sequence(
        self, obs: Tensor, starts: Tensor, states: list[TrunkState]
    ) -> tuple[Tensor, Tensor, Activity]:
        fresh = None
        if self.random_reset:
            fresh = [None if s is None else s.trunk for s in states]
        res = run_with_resets(self.trunk, obs, states[0].trunk, starts, fresh)
        return res.out[..., : self.head_size], res.out[..., self.head_size], res.activity


SDE_EPS = 1e-6
"""Added to the state-dependent variance (SB3's gSDE epsilon)."""


def _sde_feature_size(policy: nn.Module, kind: str) -> int:
    """F, the width of the policy's last hidden layer (what ``use_sde`` multiplies)."""
    if kind not in ("box", "discrete"):
        raise UserError(
            f"use_sde needs a Box or Discrete action space, not a {kind} one (state-dependent "
            "exploration perturbs continuous actions or one set of logits; set use_sde=false)"
        )
    infos = getattr(policy, "layer_info", None)
    hidden = [i for i in infos() if i.kind != "readout"] if callable(infos) else []
    if not hidden:
        raise UserError(
            "use_sde needs a backbone whose layer_info() names its hidden layers (the built-in "
            f"ones do; {type(policy).__name__} does not)"
        )
    return int(hidden[-1].size)


def _target_nll(logits: Tensor, targets: Tensor) -> Tensor:
    """``-log softmax(logits)[target]`` per entry (torch's cross-entropy), 0 where the target
    is -1 (none)."""
    flat = nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-1, reduction="none"
    )
    return flat.reshape(targets.shape)


def _categorical_log_prob_entropy(logits: Tensor, action: Tensor) -> tuple[Tensor, Tensor]:
    """``Categorical(logits=logits)``'s ``log_prob(action)`` and ``entropy()`` (same formulas:
    normalized logits ``l - logsumexp(l)``, entropy ``-sum p l`` with ``l`` clamped to the
    dtype's smallest float), without building the distribution."""
    logp = logits - logits.logsumexp(-1, keepdim=True)
    lp = logp.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
    clamped = logp.clamp(min=torch.finfo(logp.dtype).min)
    entropy = -(clamped * logp.exp()).sum(-1)
    return lp, entropy
