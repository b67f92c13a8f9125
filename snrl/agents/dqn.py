"""DQN with recurrent (spiking or ANN) Q-networks.

The Q-values are the readout of the backbone (for a spiking backbone: the membrane of its
leaky-integrator readout). With ``dueling`` the readout has ``A + 1`` units, a value ``V``
and advantages ``A``, combined by :func:`~snrl.agents.dqn_math.dueling_aggregate`.

Data flow, one env step and one gradient step::

    vector env --obs--> agent.preprocess --> QAgent.q_step (state carried across env steps,
        reset per finished env) --> exploration.select(Q, env_step) --> agent.env_action --> env
        --> replay (raw obs): single n-step transitions (feed-forward ``mlp``), or R2D2-style
            windows with the actor's state before their first step (``replay="sequence"``)
    every ``train_freq`` vector steps, after ``learning_starts``: ``gradient_steps`` times
        sample --> agent.preprocess --> Q(s, a) of the online net, bootstrap
        Q_target(s', argmax Q_online(s')) (double) or max Q_target(s') --> n-step target
        (termination: no bootstrap; truncation bootstraps from the final observation)
        --> Huber/MSE loss (importance-weighted with prioritized replay) --> grad-norm clip,
        Adam step --> new priorities
    every ``target_update_interval`` env steps: theta_target <- (1 - tau) theta_target
        + tau theta (tau = 1: a copy).

Sequence replay (Kapturowski et al. 2019): the learner starts from the stored state, runs the
first ``burn_in`` steps without gradient to refresh it, and trains on the remaining
``seq_len`` steps; padding steps are masked out and the state is re-initialized where an
episode starts. The online and the target network both run once over the window's
``seq_obs`` (T + 1 steps), so position ``t + 1`` gives the bootstrap of step ``t``.

Replay stores the raw observations (the env's shape and dtype) and the learner sends them
through the same :meth:`~snrl.agents.agent.Agent.preprocess` as the actor when it samples
them: one preprocessing path, and stored data never goes stale when the running
normalization statistics move (normalized-at-write observations would mix statistics of
different ages in one batch).

The training loop is :meth:`snrl.agents.base.Algorithm.learn` (log, evaluate, checkpoint,
callbacks); DQN supplies one iteration (:meth:`DQN._collect_rollout`: act, store, train,
update the target; :meth:`DQN._learn_from`: the row's entries).
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import Tensor, nn

from snrl.agents.agent import Agent
from snrl.agents.base import Algorithm
from snrl.agents.config import AgentConfig
from snrl.agents.dqn_math import (
    DUELING_MODES,
    LOSS_KINDS,
    double_dqn_target,
    dueling_aggregate,
    polyak_update,
    sequence_nstep_targets,
    td_loss,
    td_loss_grad,
)
from snrl.agents.exploration import EXPLORATIONS, make_exploration
from snrl.agents.limits import check, check_finite
from snrl.agents.optim import FlatAdam
from snrl.buffers import (
    NStepWriter,
    PrioritizedSampler,
    ReplayBuffer,
    SequenceWriter,
    UniformSampler,
)
from snrl.config import override
from snrl.envs import finished_episodes
from snrl.envs.spaces import ActionMap, ObsFlattener
from snrl.errors import UserError
from snrl.functional.grad import lazy_no_grad
from snrl.functional.state import State, detach_state, map_state, mask_state
from snrl.layers.base import RecurrentLayer
from snrl.networks.activity import Activity
from snrl.networks.ann import MLP
from snrl.networks.interop import module_backbone
from snrl.networks.sequence import run_with_resets
from snrl.training.rundir import prepare_run_dir

REPLAYS = ("auto", "transition", "sequence")


@dataclass(frozen=True, kw_only=True)
class DQNConfig(AgentConfig):
    """DQN hyperparameters; the defaults train a Dale LIF Q-network on CartPole-v1 (the
    fields shared with PPO are documented in :class:`snrl.agents.config.AgentConfig`)."""

    learning_rules: ClassVar[tuple[str, ...]] = ("bptt",)

    readout_tau_m: float | None = override(
        None,
        "None: as PPO's, but 3 ms without a clock: Q follows the current spikes (CartPole "
        "DQN was unstable with 10 ms)",
    )
    """Membrane time constant of the LI readout (the Q-values), seconds; None: the task-scale
    rule (:meth:`~snrl.agents.config.AgentConfig.resolve_time`), and without a clock 3 ms,
    shorter than PPO's 10 ms so that Q follows the current spikes."""
    clockless_tau: ClassVar[dict[str, float]] = {"tau_m": 10e-3, "readout_tau_m": 3e-3}
    n_envs: int = 4
    """Parallel envs used for collection."""
    dueling: str = "none"
    """Dueling head: none | avg | max | naive (the readout then has A + 1 units: V and A)."""
    double: bool = True
    """Double DQN: the online net picks the bootstrap action, the target net values it."""
    n_step: int = 3
    """Steps of the n-step return (1: one-step TD)."""
    gamma: float = 0.99
    """Discount per env step."""
    loss: str = "huber"
    """TD loss: huber | mse."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this in the TD targets, so the Q-values (the readout's
    membranes) are in these units: a spiking readout reaches Q of 100 (CartPole) only with
    large weights or rates. Greedy actions do not change; returns in metrics stay raw."""
    lr: float = 5e-4
    """Learning rate (its start value: see lr_schedule)."""
    max_grad_norm: float = 10.0
    """Global gradient-norm clip."""
    buffer_size: int = 100_000
    """Replay capacity in env steps (sequence replay keeps buffer_size // stride windows)."""
    replay: str = "auto"
    """transition | sequence | auto (sequence for recurrent backbones, transition for mlp)."""
    batch_size: int = 32
    """Items per gradient step: transitions, or windows with sequence replay."""
    seq_len: int = 20
    """Trained steps per replayed window (sequence replay)."""
    burn_in: int = 10
    """Steps before them that only refresh the stored state (sequence replay), <= seq_len."""
    seq_stride: int = 0
    """Steps between window starts of one env, in [1, seq_len] (0: seq_len)."""
    prioritized: bool = False
    """Prioritized replay (proportional; R2D2 max/mean mix for sequences)."""
    per_alpha: float = 0.6
    """Priority exponent."""
    per_beta0: float = 0.4
    """Initial importance-sampling exponent, annealed to 1 over the run."""
    per_eta: float = 0.9
    """Weight of the max TD error in a sequence's priority."""
    learning_starts: int = 1_000
    """Env steps stored before the first gradient step (counted again after a reload)."""
    train_freq: int = 4
    """Vector-env steps between training phases (each collects train_freq * n_envs steps)."""
    gradient_steps: int = 1
    """Gradient steps per training phase."""
    target_update_interval: int = 1_000
    """Env steps between target updates."""
    tau: float = 1.0
    """Target update rate: 1 copies the online net, < 1 is Polyak averaging."""
    exploration: str = "eps_greedy"
    """greedy | eps_greedy | gaussian_eps_greedy | pass_through (act on argmax Q only)."""
    eps_start: float = 1.0
    """Epsilon (or the mean of a Gaussian epsilon) at env step 0."""
    eps_end: float = 0.02
    """Epsilon (or its mean) from eps_decay_steps on; also used by evaluate(deterministic=
    False)."""
    eps_decay_steps: int = 10_000
    """Env steps of the epsilon schedule."""
    eps_schedule: str = "linear"
    """linear | exponential (eps_greedy)."""
    eps_std: float = 0.1
    """Standard deviation of a Gaussian epsilon (gaussian_eps_greedy)."""
    log_interval: int = 1_000
    """Env steps per metrics row (one "update" of the run logger)."""
    positive_ints: ClassVar[tuple[str, ...]] = (
        *AgentConfig.positive_ints,
        "n_step",
        "buffer_size",
        "batch_size",
        "seq_len",
        "train_freq",
        "gradient_steps",
        "target_update_interval",
        "eps_decay_steps",
        "log_interval",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check(
            self.dueling in ("none", *DUELING_MODES),
            f"dueling={self.dueling!r} (none | {' | '.join(DUELING_MODES)})",
        )
        check(self.loss in LOSS_KINDS, f"loss={self.loss!r} ({' | '.join(LOSS_KINDS)})")
        check(self.replay in REPLAYS, f"replay={self.replay!r} ({' | '.join(REPLAYS)})")
        check(
            self.exploration in EXPLORATIONS,
            f"exploration={self.exploration!r} ({' | '.join(EXPLORATIONS)})",
        )
        check(self.lr > 0, f"lr={self.lr} (must be > 0)")
        check(self.reward_scale > 0, f"reward_scale={self.reward_scale} (must be > 0)")
        check(0 < self.gamma <= 1, f"gamma={self.gamma} (must be in (0, 1])")
        check(0 < self.tau <= 1, f"tau={self.tau} (must be in (0, 1]; 1 is a hard copy)")
        check(self.max_grad_norm > 0, f"max_grad_norm={self.max_grad_norm} (must be > 0)")
        check(self.burn_in >= 0, f"burn_in={self.burn_in} (must be >= 0)")
        check(
            self.seq_len >= self.burn_in,
            f"sequence length seq_len={self.seq_len} is shorter than burn_in={self.burn_in} "
            "(raise seq_len or lower burn_in so that seq_len >= burn_in)",
        )
        check(
            0 <= self.seq_stride <= self.seq_len,
            f"seq_stride={self.seq_stride} (must be in [1, seq_len={self.seq_len}], or 0)",
        )
        check(
            self.replay != "transition" or self.backbone == "mlp",
            f"replay='transition' with backbone={self.backbone!r} (single transitions drop the "
            "recurrent state; use replay='sequence' or 'auto' for recurrent backbones)",
        )
        check(self.learning_starts >= 0, f"learning_starts={self.learning_starts} (>= 0)")
        if self.replay_kind == "transition":
            stored = self.learning_starts - (self.n_step - 1) * self.n_envs
            check(
                self.batch_size <= stored,
                f"batch_size={self.batch_size} is larger than the {max(stored, 0)} transitions "
                f"stored when learning starts (learning_starts={self.learning_starts}, "
                f"n_step={self.n_step}, n_envs={self.n_envs}; raise learning_starts or lower "
                "batch_size)",
            )
        for name in ("eps_start", "eps_end"):
            v = getattr(self, name)
            check(0 <= v <= 1, f"{name}={v} (must be in [0, 1])")
        check(
            self.eps_schedule in ("linear", "exponential"),
            f"eps_schedule={self.eps_schedule!r} (linear | exponential)",
        )
        check(self.eps_std > 0, f"eps_std={self.eps_std} (must be > 0)")
        check(self.per_alpha >= 0, f"per_alpha={self.per_alpha} (must be >= 0)")
        check(0 <= self.per_beta0 <= 1, f"per_beta0={self.per_beta0} (must be in [0, 1])")
        check(0 <= self.per_eta <= 1, f"per_eta={self.per_eta} (must be in [0, 1])")

    def memory_bytes(self, obs_size: int, head_size: int) -> dict[str, int]:
        """:meth:`AgentConfig.memory_bytes` plus the replay buffer at full capacity."""
        parts = super().memory_bytes(obs_size, head_size)
        if self.replay_kind == "transition":
            parts["replay"] = 4 * self.buffer_size * (2 * obs_size + 8)
        else:
            windows = max(1, self.buffer_size // self.stride)
            length = self.burn_in + self.seq_len + 1
            state = 3 * self.n_layers * self.hidden_size
            parts["replay"] = 4 * windows * (length * (obs_size + 6) + state)
        return parts

    @property
    def replay_kind(self) -> str:
        """``"transition"`` or ``"sequence"`` (``replay="auto"`` resolved by the backbone)."""
        if self.replay != "auto":
            return self.replay
        return "transition" if self.backbone == "mlp" else "sequence"

    @property
    def stride(self) -> int:
        """Steps between window starts of sequence replay."""
        return self.seq_stride or self.seq_len


_NO_ACTIVITY = Activity()


class QState(NamedTuple):
    """Recurrent state of a Q-agent's one backbone."""

    q_net: Any


class QStep(NamedTuple):
    """What :meth:`QAgent.step` returns."""

    action: Tensor
    q_values: Tensor
    state: QState
    activity: dict[str, Tensor]

    @property
    def outputs(self) -> dict[str, Tensor]:
        """The head's outputs recorded in trajectories."""
        return {"q_values": self.q_values}


class QAgent(Agent):
    """A Q-network head on the shared :class:`~snrl.agents.agent.Agent` base.

    Args:
        observation_space: Box (any shape; flattened) or Discrete (one-hot).
        action_space: Discrete (any ``start``; the Q-network's outputs are indices
            ``0..n-1`` and :meth:`env_action` adds ``start``).
        q_net: a recurrent-protocol module with output width ``n`` (or ``n + 1`` with
            ``dueling``: value first, then the advantages).
        dueling: ``"none"``, ``"avg"``, ``"max"`` or ``"naive"``.
        normalize_obs: keep running observation statistics and normalize with them.
        explore_eps: epsilon of :meth:`step` with ``deterministic=False``.
        seed: seed of the generator used by :meth:`step` with ``deterministic=False``.
    """

    state_type = QState
    actor_name = "q_net"
    # checkpoints of snrl <= 0.1 called the Q-network ``policy``
    legacy_keys = {**Agent.legacy_keys, "policy": "q_net"}

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        *,
        q_net: nn.Module,
        dueling: str = "none",
        normalize_obs: bool = True,
        explore_eps: float = 0.05,
        seed: int = 0,
    ):
        super().__init__(observation_space, action_space, normalize_obs=normalize_obs, seed=seed)
        self.n_actions = self.actions.size
        self.head_size = self.n_actions + (1 if dueling != "none" else 0)
        self.dueling = dueling
        self.q_net = q_net
        self.explore_eps = float(explore_eps)

    def q_values(self, out: Tensor) -> Tensor:
        """Q-values (..., A) from a readout (..., head_size)."""
        if self.dueling == "none":
            return out
        return dueling_aggregate(out[..., :1], out[..., 1:], self.dueling)

    @lazy_no_grad
    def q_step(self, x: Tensor, state: QState) -> tuple[Tensor, QState, Activity]:
        """One env step: ``(Q (B, A), next state, activity)`` for preprocessed ``x`` (B, F)."""
        return self._q_step(x, state, activity=True)

    def _q_step(
        self, x: Tensor, state: QState, *, activity: bool
    ) -> tuple[Tensor, QState, Activity]:
        """:meth:`q_step` for a caller already under ``no_grad``; ``activity=False`` runs the
        backbone's ``forward`` and returns an empty activity (an acting step that records
        nothing: an MLP's record costs a third of its one-row forward)."""
        if activity:
            res = self.q_net.run(x, state.q_net)
            return self.q_values(res.out), QState(res.state), res.activity
        out, new_state = self.q_net.forward(x, state.q_net)
        return self.q_values(out), QState(new_state), _NO_ACTIVITY

    @lazy_no_grad
    def step(
        self, x: Tensor, state: QState, *, deterministic: bool = False, train: bool = True
    ) -> QStep:
        """One env step for preprocessed observations ``x`` (B, F): the greedy action, or
        (``deterministic=False``) epsilon-greedy with ``explore_eps``. ``train`` is accepted
        for the agent protocol and ignored (the Q-values are the policy)."""
        q, new_state, activity = self.q_step(x, state)
        action = q.argmax(-1)
        if not deterministic and self.explore_eps > 0:
            b = action.shape[0]
            explore = torch.rand(b, generator=self.generator) < self.explore_eps
            rand = torch.randint(0, self.n_actions, (b,), generator=self.generator)
            action = torch.where(explore.to(action.device), rand.to(action.device), action)
        return QStep(action, q, new_state, activity)


def build_q_agent(cfg: DQNConfig, observation_space, action_space, *, q_net=None) -> QAgent:
    """The Q-agent a config describes (its spaces checked by the algorithm); ``q_net``
    replaces the built backbone."""
    head = ActionMap(action_space).size + (1 if cfg.dueling != "none" else 0)
    if q_net is None:
        q_net = cfg.build_backbone(ObsFlattener(observation_space).size, head, seed=cfg.seed)
    return QAgent(
        observation_space,
        action_space,
        q_net=q_net,
        dueling=cfg.dueling,
        normalize_obs=cfg.normalize_obs,
        explore_eps=cfg.eps_end,
        seed=cfg.seed + 17,
    )


class _Stats:
    """Running sums of per-gradient-step and per-env-step numbers for one metrics row."""

    def __init__(self) -> None:
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, key: str, value: float) -> None:
        self.sums[key] = self.sums.get(key, 0.0) + float(value)
        self.counts[key] = self.counts.get(key, 0) + 1

    def mean(self, key: str) -> float:
        n = self.counts.get(key, 0)
        return self.sums[key] / n if n else math.nan


_LOSS_CAUSE = (
    "TD targets too large for float32 (rewards near ±3.4e38 or a diverging Q-network); "
    "scale the rewards down (e.g. gymnasium.wrappers.TransformReward) or lower lr"
)


def _with_final_obs(next_obs: Any, done: Any, info: dict[str, Any]) -> Any:
    """The true next observations of a SAME_STEP vector step: ``next_obs`` with the final
    observation of every env whose episode ended (a copy; numpy, or a tensor on its device)."""
    if not isinstance(next_obs, Tensor):
        true_next = np.array(next_obs, copy=True)
        for i in np.flatnonzero(done):
            true_next[i] = info["final_obs"][i]
        return true_next
    true_next = next_obs.clone()
    if bool(done.any()):
        idx = done.nonzero()[:, 0]
        final = np.stack([info["final_obs"][i] for i in idx.tolist()])
        true_next[idx] = torch.as_tensor(final, device=true_next.device, dtype=true_next.dtype)
    return true_next


class DQN(Algorithm):
    """Deep Q-learning with recurrent (spiking or ANN) Q-networks.

    Args:
        env: gymnasium id or ``module:Class`` (overrides ``config.env``); needs a Discrete
            action space.
        config: a :class:`DQNConfig`; keyword ``overrides`` replace its fields.
        policy: optional recurrent-protocol module used as the Q-network, ``agent.q_net``
            (output width ``n_actions``, or ``n_actions + 1`` with ``dueling``).
        critic: must be None (DQN has no critic; the argument exists so that every snrl
            algorithm loads alike).
        run_dir: directory for metrics.csv, checkpoints and the learning curve (None: none).
            A new or empty directory; an earlier run there is refused unless ``overwrite``.
        overwrite: replace the run in ``run_dir`` (deletes only the files snrl wrote there).
    """

    Config = DQNConfig
    algo_name = "dqn"
    discrete_actions = True
    space_hint = "use --algo ppo / snrl.PPO for Box and MultiDiscrete actions"
    #: take an ``mlp`` Q-network's gradient by hand (:meth:`MLP.backward_into`, the same math
    #: as autograd, tested against it); False: autograd for every network (a comparison)
    manual_grad: bool = True

    def __init__(
        self,
        env: str | None = None,
        *,
        config: DQNConfig | None = None,
        policy: nn.Module | None = None,
        critic: nn.Module | None = None,
        run_dir: str | Path | None = None,
        overwrite: bool = False,
        **overrides: Any,
    ):
        check(critic is None, "DQN has no critic (pass the Q-network as policy=)")
        user = module_backbone(overrides, policy, critic)  # backbone=<an nn.Module>
        obs_space, act_space = self._setup(
            env, config, overrides, {"policy": policy, "backbone": user}
        )
        cfg = self.config
        if user is not None:  # a user's snntorch network with an snrl readout
            head = ActionMap(act_space).size + (1 if cfg.dueling != "none" else 0)
            policy = user.with_readout(head, seed=cfg.seed)
        self.custom_backbones = policy is not None
        with self._seeded(cfg.seed):
            self.agent = build_q_agent(cfg, obs_space, act_space, q_net=policy)
        self.agent.to(self.device)
        if policy is not None:
            self._check_output_width("policy", policy, self.agent.head_size)
        self.target_net = copy.deepcopy(self.agent.q_net).requires_grad_(False)
        for layer in self.target_net.modules():  # its current noise is its own (noise_std > 0)
            if isinstance(layer, RecurrentLayer):
                layer.noise_stream = 1
        self.optimizer = self._make_optimizer(self.agent.q_net.parameters(), eps=1e-8, fused=True)
        self.exploration = self._make_exploration()
        self.run_dir = None if run_dir is None else prepare_run_dir(run_dir, force=overwrite)
        self.env_step = 0
        self.n_updates = 0
        self.n_grad_steps = 0
        self._spiking_of: nn.Module | None = None  # see _record_spikes
        self._spiking = False
        self.best_eval = -math.inf
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.buffer: Any = None
        self._buffer_steps = 0  # env steps added to the current buffer
        self._envs = None

    def _make_exploration(self):
        cfg = self.config
        rng = np.random.default_rng(cfg.seed + 23)
        kwargs: dict[str, Any] = {}  # the schedule, for the kinds that have one
        if cfg.exploration == "eps_greedy":
            kwargs = dict(start=cfg.eps_start, end=cfg.eps_end, schedule=cfg.eps_schedule)
        elif cfg.exploration == "gaussian_eps_greedy":
            kwargs = dict(mean_start=cfg.eps_start, mean_end=cfg.eps_end, std=cfg.eps_std)
        if kwargs:
            kwargs["decay_steps"] = cfg.eps_decay_steps
        return make_exploration(cfg.exploration, seed=rng, **kwargs)

    # ---- replay --------------------------------------------------------------------------
    def _make_buffer(self) -> ReplayBuffer:
        """The replay this config describes: raw observations of the env's shape and dtype,
        n-step transitions (``mlp``) or windows with stored states, uniform or prioritized."""
        cfg = self.config
        space = self.agent.observation_space
        common: dict[str, Any] = dict(n_envs=cfg.n_envs, obs_dtype=space.dtype)
        if cfg.replay_kind == "transition":
            capacity = cfg.buffer_size
            writer: Any = NStepWriter(space.shape, n_step=cfg.n_step, gamma=cfg.gamma, **common)
        else:
            capacity = max(1, cfg.buffer_size // cfg.stride)
            writer = SequenceWriter(
                space.shape,
                seq_len=cfg.seq_len,
                burn_in=cfg.burn_in,
                stride=cfg.stride,
                state_example=self.agent.initial_state(1, device=self.device),
                obs_pad=getattr(space, "start", 0),  # a valid observation: Discrete(n, start)
                **common,
            )
        seed = cfg.seed + 31
        if cfg.prioritized:
            sampler: Any = PrioritizedSampler(
                alpha=cfg.per_alpha,
                beta0=cfg.per_beta0,
                beta_steps=cfg.total_steps,
                eta=cfg.per_eta,
                seed=seed,
            )
        else:
            sampler = UniformSampler(seed)
        return ReplayBuffer(capacity, writer, sampler)

    def save_replay_buffer(self, path: str | Path) -> None:
        """Write the replay buffer to an .npz file, atomically."""
        check(self.buffer is not None, "no replay buffer yet (call learn() first)")
        self.buffer.save(path)

    def load_replay_buffer(self, path: str | Path) -> None:
        """Replace the replay buffer by one written by :meth:`save_replay_buffer`.

        Raises:
            UserError: the file is missing, corrupt, or holds a buffer of other settings.
        """
        self.buffer = ReplayBuffer.load(path, like=self._make_buffer())
        self._buffer_steps = max(self._buffer_steps, self.config.learning_starts)

    # ---- acting --------------------------------------------------------------------------
    @property
    def _record_spikes(self) -> bool:
        """Whether the Q-network has spiking layers, whose rates an acting step records
        (checked again only when ``agent.q_net`` is another module)."""
        net = self.agent.q_net
        if self._spiking_of is not net:
            self._spiking = any(info.kind == "spiking" for info in net.layer_info())
            self._spiking_of = net
        return self._spiking

    def _start_envs(self) -> None:
        self._open_envs()
        if self.buffer is None:
            self.buffer = self._make_buffer()

    def _new_lesson(self) -> None:
        """At a curriculum promotion: flush the replay. Its writer holds unfinished n-step
        transitions / windows of the episodes the promotion cuts off, and the stored ones
        are of the easier lesson; learning waits ``learning_starts`` env steps of the new
        lesson, as after a resume."""
        self.buffer = None
        self._buffer_steps = 0

    @lazy_no_grad
    def _act_and_store(self, stats: _Stats) -> list[float]:
        """One vector-env step: act (explore), store the transition, carry/reset the state.

        Returns the returns of the episodes that ended on this step."""
        agent = self.agent
        obs = self._obs
        q, next_state, activity = agent._q_step(
            agent.preprocess(obs), self._state, activity=self._record_spikes
        )
        action = self.exploration.select(q, self.env_step)
        if self.config.exploration == "pass_through":
            action = q.argmax(-1).cpu().numpy()
        env_action = self._env_actions(action)  # exploration's actions are numpy
        stepped = self._step_envs(env_action, self.env_step + self.config.n_envs)
        next_obs, reward, _, term, trunc, done, info = stepped
        true_next = _with_final_obs(next_obs, done, info)
        # the replay's rings are numpy on the host: its add copies tensors there
        self.buffer.add(obs, action, reward, true_next, term, trunc, state=self._state)
        agent.update_obs_stats(obs)
        self._state = agent.reset_state(next_state, done)
        self._obs = next_obs
        self.env_step += self.config.n_envs
        self._buffer_steps += self.config.n_envs
        for layer in activity.spiking():
            stats.add(f"spike_rate_{layer.name}", layer.spikes.mean())
        return finished_episodes(info)[1].tolist()

    # ---- learning ------------------------------------------------------------------------
    def _unroll(
        self, net: nn.Module, obs: Tensor, state: State, starts: Tensor
    ) -> tuple[Tensor, Activity]:
        """Readout (T, B, O) of ``net`` over a window from its stored ``state``: the first
        ``burn_in`` steps without gradient, the state reset where an episode starts; and the
        activity of the steps after the burn-in."""
        bi = min(self.config.burn_in, obs.shape[0] - 1)
        fresh = [state] * obs.shape[0] if self.agent.random_reset else None
        outs = []
        if bi > 0:
            with torch.no_grad():
                burn = run_with_resets(net, obs[:bi], state, starts[:bi], fresh)
            outs.append(burn.out)
            state = detach_state(burn.state)
        # The state fed with step ``bi``: re-initialized where an episode starts there (the
        # stored state of such a window is the episode's initial state, also for random init).
        if bool(starts[bi].any()):
            if self.agent.random_reset:
                state = mask_state(starts[bi], fresh[0], state)
            else:
                state = net.reset_state(state, starts[bi])
        rest = run_with_resets(net, obs[bi:], state, starts[bi:], fresh)
        outs.append(rest.out)
        return torch.cat(outs, dim=0), rest.activity

    def sequence_q(self, batch: dict[str, Any], *, target: bool = False) -> Tensor:
        """Q-values (T + 1, B, A) over a sampled window's ``seq_obs``, from its stored state
        (online net with gradient after the burn-in, or the target net without)."""
        return self._sequence_q(batch, target=target)[0]

    def _sequence_q(self, batch: dict[str, Any], *, target: bool) -> tuple[Tensor, Activity]:
        """:meth:`sequence_q` and the activity after the burn-in."""
        obs = self.agent.preprocess(batch["seq_obs"], self.device)
        starts = torch.as_tensor(batch["seq_starts"], device=self.device)
        state = map_state(lambda t: t.to(self.device), batch["state"]).q_net
        net = self.target_net if target else self.agent.q_net
        with torch.set_grad_enabled(torch.is_grad_enabled() and not target):
            out, activity = self._unroll(net, obs, state, starts)
            return self.agent.q_values(out), activity

    def _sequence_loss(self, batch: dict[str, Any]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(loss, TD errors (T', B), mask (T', B), Q of the taken actions) of a window batch."""
        cfg, dev = self.config, self.device
        q_all, activity = self._sequence_q(batch, target=False)  # (T + 1, B, A)
        q_tgt = self.sequence_q(batch, target=True)
        with torch.no_grad():
            if cfg.double:
                best = q_all[1:].argmax(-1, keepdim=True)
                boot = q_tgt[1:].gather(-1, best).squeeze(-1)
            else:
                boot = q_tgt[1:].max(-1).values
            mask = torch.as_tensor(batch["mask"], device=dev)
            y = sequence_nstep_targets(
                torch.as_tensor(batch["rewards"], device=dev) * cfg.reward_scale,
                torch.as_tensor(batch["dones"], device=dev),
                mask,
                boot,
                cfg.gamma,
                cfg.n_step,
            )
        actions = torch.as_tensor(batch["actions"], device=dev).long()
        q = q_all[:-1].gather(-1, actions.unsqueeze(-1)).squeeze(-1)  # (T, B)
        bi = cfg.burn_in
        w = None
        if cfg.prioritized:
            w = torch.as_tensor(batch["weights"], device=dev).expand_as(q[bi:])
        loss = td_loss(q[bi:], y[bi:], cfg.loss, weights=w, mask=mask[bi:])
        loss = loss + cfg.rate_term(activity)
        if self.loss_terms:
            loss = loss + self._extra_loss(activity, batch)
        return loss, ((y - q)[bi:] * mask[bi:]).detach(), mask[bi:], q[bi:].detach()

    @lazy_no_grad
    def _transition_targets(self, batch: dict[str, Any], *, lean: bool) -> Tensor:
        """TD targets (B,) of a transition batch, without gradient; ``lean``: the networks
        are MLPs without dueling, run by :meth:`MLP.forward_saved` (no activity record)."""
        cfg, dev, agent = self.config, self.device, self.agent
        b = batch["obs"].shape[0]
        x_next = agent.preprocess(batch["next_obs"], dev)

        def q_of(net: nn.Module) -> Tensor:
            if lean:
                return net.forward_saved(x_next)[-1]
            return agent.q_values(net(x_next, net.initial_state(b, device=dev))[0])

        rewards = torch.as_tensor(batch["rewards"], device=dev)
        if cfg.reward_scale != 1.0:
            rewards = rewards * cfg.reward_scale
        q_next_t = q_of(self.target_net)
        q_next_o = q_of(agent.q_net) if cfg.double else None
        return double_dqn_target(
            rewards,
            torch.as_tensor(batch["discounts"], device=dev),
            torch.as_tensor(batch["dones"], device=dev),
            q_next_o,
            q_next_t,
            double=cfg.double,
        )

    def _transition_loss(self, batch: dict[str, Any]) -> tuple[Tensor, Tensor, None, Tensor]:
        """(loss, TD errors (B,), None, Q of the taken actions) of a transition batch."""
        cfg, dev, agent = self.config, self.device, self.agent
        b = batch["obs"].shape[0]
        x = agent.preprocess(batch["obs"], dev)
        net = agent.q_net
        state = net.initial_state(b, device=dev)
        if self.loss_terms:  # the activity they take
            res = net.run(x, state)
            q_all, activity = agent.q_values(res.out), res.activity
        else:
            q_all = agent.q_values(net(x, state)[0])
        y = self._transition_targets(batch, lean=False)
        actions = torch.as_tensor(batch["actions"], device=dev).long()
        q = q_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        w = torch.as_tensor(batch["weights"], device=dev) if cfg.prioritized else None
        loss = td_loss(q, y, cfg.loss, weights=w)
        if self.loss_terms:
            loss = loss + self._extra_loss(activity, batch)
        return loss, (y - q).detach(), None, q.detach()

    def _manual_grad(self) -> bool:
        """Whether a gradient step takes the MLP's gradient by hand (:meth:`MLP.backward_into`)
        instead of autograd: an ``mlp`` Q-network of bare linear layers (no pruning hooks or
        parametrizations) without dueling, on transitions, with snrl's Adam (``optimizer=
        "adam"``) and no ``loss_terms``."""
        return (
            self.manual_grad
            and not self.loss_terms
            and isinstance(self.optimizer, FlatAdam)
            and type(self.agent.q_net) is MLP
            and self.agent.q_net.plain()
            and self.agent.dueling == "none"
            and self.config.replay_kind == "transition"
        )

    def _transition_grad(self, batch: dict[str, Any]) -> tuple[Tensor, Tensor, None, Tensor]:
        """:meth:`_transition_loss` with its gradient added into the Q-network's ``.grad``
        by hand (the same math as its ``backward()``); the loss carries no graph."""
        cfg, dev, agent = self.config, self.device, self.agent
        x = agent.preprocess(batch["obs"], dev)
        net = agent.q_net
        saved = net.forward_saved(x)
        q_all = saved[-1]
        y = self._transition_targets(batch, lean=True)
        actions = torch.as_tensor(batch["actions"], device=dev).long().unsqueeze(-1)
        q = q_all.gather(-1, actions).squeeze(-1)
        w = torch.as_tensor(batch["weights"], device=dev) if cfg.prioritized else None
        loss, dq = td_loss_grad(q, y, cfg.loss, weights=w)
        # written over .grad when it covers every parameter of the optimizer (all trainable);
        # else zeroed first, so that a frozen parameter is stepped with a zero gradient
        whole = all(p.requires_grad for p in self.optimizer.params)
        if not whole:
            self.optimizer.zero_grad()
        grad_out = torch.zeros_like(q_all).scatter_(-1, actions, dq.unsqueeze(-1))
        net.backward_into(saved, grad_out, accumulate=not whole)
        return loss, y - q, None, q

    def _gradient_step(self, stats: _Stats) -> None:
        """Sample, compute the TD loss, step the optimizer, refresh priorities."""
        cfg = self.config
        if len(self.buffer) < cfg.batch_size:
            raise UserError(
                f"batch_size={cfg.batch_size} is larger than the {len(self.buffer)} "
                f"{'windows' if cfg.replay_kind == 'sequence' else 'transitions'} stored when "
                f"learning starts (raise learning_starts={cfg.learning_starts} or lower "
                "batch_size)"
            )
        batch = self.buffer.sample(cfg.batch_size, step=self.env_step)
        by_hand = self._manual_grad()
        if by_hand:  # the gradient is written into .grad with the loss
            with torch.no_grad():  # once: what it calls enters no_grad only if not in it
                loss, td, mask, q = self._transition_grad(batch)
        elif cfg.replay_kind == "sequence":
            loss, td, mask, q = self._sequence_loss(batch)
        else:
            loss, td, mask, q = self._transition_loss(batch)
        loss_value = loss.item()  # one read: checked as a float, kept for the metrics
        check_finite(loss_value, "TD loss", env_step=self.env_step, cause=_LOSS_CAUSE)
        if not by_hand:
            self.optimizer.zero_grad()
            loss.backward()
        grad_norm = float(self._clip_grad_norm(cfg.max_grad_norm))
        check_finite(grad_norm, "gradient norm", env_step=self.env_step, cause=_LOSS_CAUSE)
        self._optimizer_step()
        self.n_grad_steps += 1
        if cfg.prioritized:
            self.buffer.update_priorities(batch["indices"], td, mask)
        stats.add("loss", loss_value)
        q_mean = q.mean() if mask is None else (q * mask).sum() / mask.sum().clamp_min(1)
        stats.add("q_mean", q_mean.item())
        stats.add("grad_norm", grad_norm)

    # ---- one iteration of the loop (Algorithm.learn) ---------------------------------------
    def _collect_rollout(self, total: int) -> tuple[_Stats, list[float]]:
        """The env steps of one metrics row (up to the next multiple of ``log_interval``, at
        most ``total``). DQN learns while it collects: a training phase every ``train_freq``
        vector steps after ``learning_starts``, a target update every
        ``target_update_interval`` env steps."""
        cfg = self.config
        stats, returns = _Stats(), []
        row_end = min((self.env_step // cfg.log_interval + 1) * cfg.log_interval, total)
        while self.env_step < row_end:
            step_before = self.env_step
            returns += self._act_and_store(stats)
            vector_steps = self.env_step // cfg.n_envs
            if self._buffer_steps >= cfg.learning_starts and vector_steps % cfg.train_freq == 0:
                for _ in range(cfg.gradient_steps):
                    self._gradient_step(stats)
            if self.env_step // cfg.target_update_interval > (
                step_before // cfg.target_update_interval
            ):
                polyak_update(self.target_net, self.agent.q_net, cfg.tau)
        return stats, returns

    def _learn_from(self, rollout: _Stats) -> dict[str, Any]:
        """Nothing left to learn (the gradient steps ran while collecting); the row entries:
        mean loss, Q and gradient norm of the row's gradient steps, epsilon, the gradient
        steps so far and the spike rates of the acting steps."""
        stats = rollout
        spike_keys = [
            f"spike_rate_{info.name}"
            for info in self.agent.q_net.layer_info()
            if info.kind == "spiking"
        ]
        return {
            "loss": stats.mean("loss"),
            "q_mean": stats.mean("q_mean"),
            "grad_norm": stats.mean("grad_norm"),
            "epsilon": self.exploration.epsilon(self.env_step),
            "grad_steps": self.n_grad_steps,
            **{k: stats.mean(k) for k in spike_keys},
        }

    def extra_state(self) -> dict[str, Any]:
        """What a checkpoint holds beyond the shared fields: the target network, the
        exploration and acting generators, gradient-step and buffer counters."""
        return {
            "target_net": self.target_net.state_dict(),
            "exploration_rng": json.dumps(self.exploration.rng.bit_generator.state),
            "n_grad_steps": int(self.n_grad_steps),
        }

    def load_extra_state(self, extra: dict[str, Any]) -> None:
        """Restore :meth:`extra_state` (the replay buffer starts empty and refills
        ``learning_starts`` env steps before training resumes)."""
        if not extra:
            return
        try:
            self.target_net.load_state_dict(extra["target_net"])
            state = json.loads(extra["exploration_rng"])
            self.exploration.rng.bit_generator.state = state
            self.n_grad_steps = int(extra["n_grad_steps"])
        except (KeyError, RuntimeError, ValueError, TypeError) as e:
            raise UserError(
                f"checkpoint's DQN state does not fit this agent ({e}) (was it written by "
                "another snrl version or config?)"
            ) from None


__all__ = ["DQN", "DQNConfig", "QAgent", "QState", "QStep", "build_q_agent"]
