"""The config fields every algorithm shares (:class:`AgentConfig`): env, backbone, optimizer,
run bookkeeping; PPO's and DQN's configs extend it."""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import torch
from torch import nn

from snrl.agents.curriculum import Curriculum
from snrl.agents.limits import (
    MAX_ASYNC_ENVS,
    MAX_ENVS,
    MAX_SEED,
    MAX_SUBSTEPS,
    MAX_TOTAL_STEPS,
    check,
    gib,
    memory_limit,
)
from snrl.agents.optim import CUSTOM, LR_SCHEDULES, OPTIMIZERS
from snrl.agents.runtime import MAX_THREADS
from snrl.config import NEURON_DEFAULTS, check_values, override
from snrl.envs.make import check_env_kwargs
from snrl.errors import UserError
from snrl.networks.ann import ACTIVATIONS
from snrl.networks.factory import BACKBONES, ENCODERS, SPIKING, build_backbone
from snrl.training.checkpoint import check_persistable

__all__ = ["AgentConfig"]


#: Where a task has a clock, unset time constants span this many task steps
#: (:meth:`AgentConfig.resolve_time`, ``time_profile="task"``).
TASK_SCALE_STEPS = 10

#: ``time_profile="biological"`` on a task with a clock (:meth:`AgentConfig.resolve_time`):
#: the longest neuron step (s), the membrane time constant of the spiking layers (s), the
#: ALIF adaptation time constant (s) and adaptation strength that unset values take. The
#: readout's membrane is one task step (not a constant: it depends on the task's ``dt``).
#: ``beta`` 20 rather than 1.8: ``a`` counts spikes per 10 ms step, so at 10 Hz 1.8 raises a
#: threshold by 18 % and 20 triples it (docs/benchmarks.md, "Time profiles": DelayMatchSample
#: learned on 0 of 4 runs with 1.8, 3 of 6 at 100k and 3 of 3 at 500k with 20).
BIOLOGICAL: dict[str, float] = {"max_dt": 10e-3, "tau_m": 20e-3, "tau_a": 1.5, "beta": 20.0}

#: The values of ``time_profile``.
TIME_PROFILES = ("task", "biological")


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """The fields every algorithm's config shares: env, backbone, run bookkeeping."""

    env: str = "CartPole-v1"
    """Gymnasium id, or ``module:Class`` for a user's env (an env object given to the
    constructor is recorded by its registered id, else as ``<...>``)."""
    env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword arguments for the env (e.g. NeuroGym's ``dt``, ``timing``); ``--env-kwargs``
    takes them as JSON."""
    max_episode_steps: int | None = None
    """Env steps after which an episode is truncated (a TimeLimit truncation, bootstrapped);
    none: the env's own limit, else 20 trials for a NeuroGym task (docs/neuro.md), else none
    in training and 10000 in evaluation."""
    backbone: str = "lif"
    """lif | alif | spylif | mlp | gru | lstm."""
    hidden_size: int = 128
    """Neurons / units per hidden layer (of each backbone)."""
    n_layers: int = 1
    """Hidden layers per backbone."""
    force_dale_law: bool = override(
        True, "agents train Dale networks unless told otherwise (--no-dale)"
    )
    """Hard Dale's law in spiking backbones."""
    recurrent_sign: float = NEURON_DEFAULTS["recurrent_sign"]
    """Fraction of inhibitory neurons with Dale's law (the biological 80/20). The layers
    balance it at init (each neuron's recurrent input sums to zero; the same spectral radius
    as without Dale), so 0.2 learns CartPole (docs/benchmarks.md#dale-init-at-8020-issue-12)."""
    tau_m: float | tuple[float, float] | None = override(
        None,
        "None: 10 task steps where the task has a clock (1 s at NeuroGym's 100 ms, DelayMatch"
        "Sample 0.60 -> 0.98), else 10 ms (CartPole PPO: 20 ms best 196 at 100k steps, 10 ms 500)",
    )
    """Membrane time constant of spiking layers, seconds; ``(low, high)``: one per neuron,
    spread log-uniformly over the range (:func:`spread_time`); None: :meth:`resolve_time`'s
    rule (the resolved value replaces None in ``algo.config`` and config.json)."""
    readout_tau_m: float | None = override(
        None, "None: as tau_m (10 task steps, or 10 ms: the readout follows the hidden layer)"
    )
    """Membrane time constant of the LI readout, seconds; None: :meth:`resolve_time`'s rule."""
    dt: float | None = override(
        None, "None: the task's step / substeps when the env declares one (NeuroGym), else 0.001"
    )
    """Neuron time step, seconds; None: from the task (docs/architecture.md, "Time"). The
    resolved value replaces None in ``algo.config`` and config.json."""
    tau_a: float | tuple[float, float] | None = override(
        None, "None: the time profile's (200 ms; 1.5 s with time_profile=biological on a task)"
    )
    """Adaptation time constant of ALIF layers, seconds (the other backbones ignore it);
    ``(low, high)``: one per neuron, spread log-uniformly over the range (LSNN's adaptive
    neurons span hundreds of ms to seconds; :func:`spread_time`); None: :meth:`resolve_time`'s
    rule."""
    beta: float | None = override(
        None, "None: the time profile's (1.8; 20 with time_profile=biological on a task)"
    )
    """Adaptation strength of ALIF layers (>= 0; the other backbones ignore it): the
    threshold rises by ``beta`` times the neuron's low-passed spikes per neuron step
    (``snrl.layers.ALIFParameters``); None: :meth:`resolve_time`'s rule."""
    time_profile: Literal["task", "biological"] = "task"
    """How unset neuron time is derived from a task's clock (docs/neuro.md, "Time"): task
    (one neuron step per task step unless ``substeps`` says otherwise, membranes of 10 task
    steps: rate units) | biological (neuron steps of at most 10 ms, 20 ms membranes, a
    readout of one task step, ALIF adaptation of 1.5 s with beta 20; needs a task with a
    clock)."""
    hh_init: str = NEURON_DEFAULTS["hh_init"]
    """Initial hidden state of spiking layers: zeros | random | learned."""
    noise_std: float = NEURON_DEFAULTS["noise_std"]
    """Gaussian current noise of every spiking neuron at every neuron step, membrane units
    (>= 0; 0: off): trial-to-trial variability while training (rollouts and updates);
    evaluations are noiseless (docs/neuro.md). ANN backbones ignore it."""
    encoder: str = "direct"
    """Input encoding of spiking backbones: direct | population."""
    activation: str = "tanh"
    """Hidden nonlinearity of an mlp backbone: tanh (as SB3's PPO) | relu (as SB3's DQN);
    the other backbones ignore it."""
    substeps: int = 1
    """Neuron steps per env step (spiking backbones; ANN backbones ignore it): each
    observation is held for ``substeps`` steps of ``dt``."""
    rate_reg: float = 0.0
    """Firing-rate regularization: adds ``rate_reg`` times the mean over the acting network's
    spiking neurons of ``(r_j - clip(r_j, *rate_range))**2`` to the loss, ``r_j`` the
    neuron's spikes per step over the minibatch: no pull inside the range (0: off; ANN
    backbones ignore it)."""
    rate_range: tuple[float, float] = (0.02, 0.2)
    """Spikes per neuron per network step that the rate regularization leaves alone."""
    n_envs: int = 8
    """Parallel envs."""
    asynchronous: bool = False
    """AsyncVectorEnv (processes) instead of SyncVectorEnv."""
    normalize_obs: bool = True
    """Running observation mean/std normalization (saved with the agent)."""
    eval_interval: int = 5_000
    """Env steps between deterministic evaluations that select best.pt (0: only at the end)."""
    eval_episodes: int = 10
    """Episodes per periodic evaluation."""
    checkpoint_interval: int = 10
    """Metrics rows (updates) between writes of last.pt."""
    total_steps: int = 100_000
    """Env steps of a run (used by the CLI and for annealing schedules)."""
    seed: int = 0
    """Seeds the network initialization, the envs, the agent's and the layers' own generators
    (and replay/exploration); the global RNGs of torch and numpy are never touched."""
    device: str = "cpu"
    """Torch device."""
    threads: int | None = None
    """Torch threads while learn/evaluate/rollout run (restored afterwards); none: the
    policy (1 up to 512 neurons per layer, measured); 0: leave torch's setting alone."""
    flush_denormals: bool = True
    """Flush subnormal floats (below 1.2e-38) to zero while learn/evaluate/rollout run
    (restored afterwards): some CPUs take ~100x longer on them, and Adam's state decays into
    that range for weights whose gradient stays near zero. False: leave them."""
    optimizer: str = "adam"
    """adam (snrl's flat Adam: torch.optim.Adam's arithmetic, faster) | adamw | sgd |
    rmsprop; in Python also a callable ``params -> torch.optim.Optimizer``, recorded as
    "custom" (docs/agents.md, "Optimizers")."""
    optimizer_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """More keyword arguments of the optimizer, e.g. ``{"momentum": 0.9}`` for sgd (adam
    takes eps and betas)."""
    weight_decay: float = 0.0
    """Weight decay of the optimizer (L2 added to the gradient; decoupled for adamw)."""
    lr_schedule: str = "constant"
    """The learning rate over the run: lr times a multiplier of the progress p (env steps
    done / total_steps), set before each iteration: constant (1) | linear (1 - p) | cosine
    ((1 + cos(pi p)) / 2); in Python also a callable ``p -> multiplier``, recorded as
    "custom"."""
    loss_terms: tuple[str, ...] = ()
    """Written by snrl: the names of the ``loss_terms`` functions passed in Python (each
    ``fn(activity, batch) -> scalar tensor`` added to the loss); loading such a run needs
    them passed again."""
    curriculum: Curriculum | None = None
    """Lessons of increasing difficulty (snrl.Curriculum; [[curriculum.lesson]] tables in
    TOML): env options merged over env_kwargs and a promotion criterion each
    (docs/curriculum.md)."""
    learning_rule: Literal["bptt", "eprop"] = "bptt"
    """How the spiking layer learns: bptt (backpropagation through time, autograd) | eprop
    (e-prop, Bellec et al. 2020: eligibility traces times the learning signal the policy and
    value readouts broadcast; one-layer lif/alif backbones, PPO and A2C; docs/learning_rules.md)."""
    shared_trunk: bool = False
    """One spiking network for policy and value (actor-critic algorithms): one recurrent
    backbone (one E/I assignment, one hidden state per env) feeding two leaky-integrator
    readouts, the policy's and the value's, trained by both losses; false: two separate
    networks, each with its own E/I assignment and state (``--shared-trunk``; docs/agents.md,
    "Shared trunk"). DQN has no critic and refuses it."""
    eprop_feedback: Literal["symmetric", "random"] = "symmetric"
    """The matrix that carries a readout's error back to the neurons under e-prop: symmetric
    (the readout's own weights, ``B = W_out^T``) | random (a fixed random matrix, random
    e-prop). Ignored with learning_rule=bptt."""
    tuned: bool = True
    """Apply snrl's tuned settings for this algorithm, env and backbone (snrl/zoo/*.toml,
    docs/agents.md) under the values you give; false: the built-in defaults."""
    tuned_from: str = ""
    """Written by snrl: the tuned entry applied and its keys, or "none: ..." naming the
    table the file lacks (empty: tuned off)."""

    #: the algorithm has a critic (a value network), so ``shared_trunk`` applies
    has_critic: ClassVar[bool] = False
    #: integer fields that must be >= 1 (subclasses extend it)
    clockless_tau: ClassVar[dict[str, float]] = {"tau_m": 10e-3, "readout_tau_m": 10e-3}
    """``tau_m`` / ``readout_tau_m`` (seconds) left unset on a task without a clock."""
    positive_ints: ClassVar[tuple[str, ...]] = (
        "hidden_size",
        "n_layers",
        "n_envs",
        "substeps",
        "eval_episodes",
        "checkpoint_interval",
        "total_steps",
    )

    def __post_init__(self) -> None:
        check_values(self)  # types, finite numbers: every field of every algorithm's config
        self._check_learning_rule()
        algo = type(self).__name__.removesuffix("Config")
        check(
            not self.shared_trunk or self.has_critic,
            f"shared_trunk=true but {algo} has no critic to share a network with (its one "
            "network is the Q-network; use shared_trunk with an actor-critic algorithm such as "
            "PPO, or drop --shared-trunk)",
        )
        check(self.backbone in BACKBONES, f"backbone={self.backbone!r} (one of {BACKBONES})")
        check(self.encoder in ENCODERS, f"encoder={self.encoder!r} (one of {ENCODERS})")
        check(
            self.activation in ACTIVATIONS,
            f"activation={self.activation!r} (one of {tuple(ACTIVATIONS)})",
        )
        check(
            0 <= self.seed <= MAX_SEED, f"seed={self.seed} (must be an integer in [0, {MAX_SEED}])"
        )
        check_persistable(self)  # a remote env's token never goes to config.json / checkpoints
        for name in ("n_envs", "eval_episodes"):
            v = getattr(self, name)
            check(
                v <= MAX_ENVS,
                f"{name}={v} is more envs than snrl builds at once (must be <= {MAX_ENVS})",
            )
        check(
            not self.asynchronous or self.n_envs <= MAX_ASYNC_ENVS,
            f"n_envs={self.n_envs} with asynchronous=true starts one process per env "
            f"(must be <= {MAX_ASYNC_ENVS}, or set asynchronous=false)",
        )
        check(
            self.total_steps <= MAX_TOTAL_STEPS,
            f"total_steps={self.total_steps} (must be <= {MAX_TOTAL_STEPS:.0e})",
        )
        check(
            not isinstance(self.substeps, int) or self.substeps <= MAX_SUBSTEPS,
            f"substeps={self.substeps} (neuron steps per env step, must be <= {MAX_SUBSTEPS})",
        )
        check(
            0 <= self.recurrent_sign <= 1,
            f"recurrent_sign={self.recurrent_sign} (the inhibitory fraction, in [0, 1])",
        )
        try:
            torch.device(self.device)
        except (RuntimeError, ValueError):
            raise UserError(f"device={self.device!r} (use cpu, cuda, cuda:N or mps)") from None
        for name in self.positive_ints:
            v = getattr(self, name)
            check(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                f"{name}={v!r} (must be an integer >= 1)",
            )
        check(
            all(v is None or v > 0 for v in (self.readout_tau_m, self.dt)),
            "readout_tau_m and dt must be > 0 seconds (or None: from the task)",
        )
        for name in ("tau_m", "tau_a"):
            v = getattr(self, name)
            lo, hi = v if isinstance(v, tuple) else (v, v)
            check(
                v is None or 0 < lo <= hi,
                f"{name}={v!r} (seconds > 0, a (low, high) range with 0 < low <= high, or None: "
                "from the task)",
            )
        check(self.noise_std >= 0, f"noise_std={self.noise_std} (a current std, must be >= 0)")
        check(
            self.beta is None or self.beta >= 0,
            f"beta={self.beta} (an adaptation strength, must be >= 0)",
        )
        check(
            self.hh_init in ("zeros", "random", "learned"),
            f"hh_init={self.hh_init!r} (zeros | random | learned for agents)",
        )
        check(self.eval_interval >= 0, f"eval_interval={self.eval_interval} (must be >= 0)")
        check(
            self.optimizer in (*OPTIMIZERS, CUSTOM),
            f"optimizer={self.optimizer!r} (one of {', '.join(OPTIMIZERS)}; in Python also a "
            "function params -> torch.optim.Optimizer)",
        )
        check(
            self.lr_schedule in (*LR_SCHEDULES, CUSTOM),
            f"lr_schedule={self.lr_schedule!r} (one of {', '.join(LR_SCHEDULES)}; in Python "
            "also a function of the progress in [0, 1])",
        )
        check(self.weight_decay >= 0, f"weight_decay={self.weight_decay} (must be >= 0)")
        check(self.rate_reg >= 0, f"rate_reg={self.rate_reg} (must be >= 0)")
        lo, hi = self.rate_range
        check(
            0 <= lo <= hi <= 1,
            f"rate_range={self.rate_range} (must be (low, high) with 0 <= low <= high <= 1"
            " spikes per step)",
        )
        check(
            self.max_episode_steps is None or self.max_episode_steps >= 1,
            f"max_episode_steps={self.max_episode_steps} (must be an integer >= 1, or none)",
        )
        check_env_kwargs(self.env_kwargs)
        check(
            self.threads is None or 0 <= self.threads <= MAX_THREADS,
            f"threads={self.threads} (an integer in [1, {MAX_THREADS}], 0 for torch's own "
            "setting, or none for the policy)",
        )

    #: the learning rules this algorithm implements (docs/learning_rules.md)
    learning_rules: ClassVar[tuple[str, ...]] = ("bptt", "eprop")

    def _check_learning_rule(self) -> None:
        """e-prop: an algorithm that implements it and a backbone it supports."""
        rule = self.learning_rule
        if rule == "bptt":
            return
        algo = type(self).__name__.removesuffix("Config")
        check(
            rule in self.learning_rules,
            f"learning_rule={rule!r} is not implemented for {algo} (use "
            f"{' | '.join(self.learning_rules)}; e-prop trains PPO and A2C agents)",
        )
        why = None
        if self.backbone not in ("lif", "alif"):
            why = f"backbone={self.backbone!r} (e-prop supports lif and alif)"
        elif self.n_layers != 1:
            why = f"n_layers={self.n_layers} (e-prop trains one spiking layer under its readout)"
        elif self.substeps != 1:
            why = f"substeps={self.substeps} (e-prop takes one neuron step per env step)"
        elif self.hh_init == "learned":
            why = "hh_init='learned' (e-prop does not train the initial state)"
        check(why is None, f"learning_rule=eprop with {why}; use learning_rule=bptt")

    def rate_term(self, activity: Any) -> Any:
        """``rate_reg`` times the firing-rate penalty of ``activity`` (an
        :class:`~snrl.networks.Activity`), 0 when off: the loss term PPO adds for its policy
        and DQN for its online Q-network."""
        if self.rate_reg <= 0:
            return 0.0
        return self.rate_reg * activity.rate_penalty(*self.rate_range)

    def memory_bytes(self, obs_size: int, head_size: int) -> dict[str, int]:
        """Rough bytes of what a run of this config allocates, by part (the subclasses add
        their buffers): parameters, gradients and Adam moments of the backbones."""
        h, n = self.hidden_size, self.n_layers
        gates = 4 if self.backbone in ("gru", "lstm") else 1
        params = gates * (obs_size * h + (2 * n - 1) * h * h + n * h) + h * head_size
        nets = 1 if self.shared_trunk else 2  # backbones x (param, grad, 2 moments) fp32
        return {"networks": nets * 16 * params}

    def check_memory(self, obs_size: int, head_size: int) -> None:
        """Refuse a config whose :meth:`memory_bytes` exceed :func:`memory_limit`, before
        anything is allocated."""
        parts = self.memory_bytes(obs_size, head_size)
        total, limit = sum(parts.values()), memory_limit()
        if total > limit:
            detail = ", ".join(f"{k} {gib(v)}" for k, v in parts.items())
            raise UserError(
                f"this config needs about {gib(total)} of memory ({detail}; observations of "
                f"{obs_size} values) but this machine allows {gib(limit)} (lower "
                "hidden_size, n_layers, n_envs, n_steps or buffer_size)"
            )

    @property
    def neuron_dt(self) -> float:
        """The neuron time step in seconds: ``dt``, or 1 ms while ``dt`` is unresolved."""
        return NEURON_DEFAULTS["dt"] if self.dt is None else float(self.dt)

    def resolve_time(self, task_dt: float | None) -> AgentConfig:
        """This config with its clock and time constants set (docs/neuro.md, "Time").

        The one rule for a task's time scale; values you set stay, ``time_profile`` fills
        the others. ``dt``: as given, else ``task_dt / substeps`` when the task declares its
        step (seconds), else 1 ms. Without a clock ``tau_m`` / ``readout_tau_m`` take the
        clockless defaults (:attr:`clockless_tau`), ``tau_a`` 200 ms and ``beta`` 1.8. With a
        clock:

        * ``"task"``: ``tau_m`` / ``readout_tau_m`` span :data:`TASK_SCALE_STEPS` task steps
          (a membrane keeps ``exp(-1/10) = 0.905`` of itself per task step, the retention
          the delay tasks need; 1 s at NeuroGym's 100 ms step: rate units, not cortical
          membranes); ``tau_a`` 200 ms, ``beta`` 1.8. A spiking run whose membranes are
          shorter than one task step forgets within a step: it warns once.
        * ``"biological"`` (:data:`BIOLOGICAL`): spiking backbones step at most 10 ms
          (``substeps`` raised to ``ceil(task_dt / 10 ms)``, or to ``ceil(task_dt / dt)``
          with a ``dt`` you set; a larger ``substeps`` stays), ``tau_m`` 20 ms, the
          readout's membrane one task step (it averages the spikes of the last task step,
          so an action is read from ~10 neuron steps, not from the last one), ``tau_a``
          1.5 s and ``beta`` 20 (ALIF: the adaptation carries the memory, Bellec et al.
          2018; :data:`BIOLOGICAL` says why 20). A task without a clock is an error: there
          is no task step to derive the time from.

        Raises:
            UserError: ``time_profile="biological"`` without a clock, or with e-prop.
        """
        biological = self.time_profile == "biological" and self.backbone in SPIKING
        given = {"tau_m": self.tau_m, "readout_tau_m": self.readout_tau_m}
        given.update(tau_a=self.tau_a, beta=self.beta)
        substeps, fill = self.substeps, dict(self.clockless_tau)
        fill.update(tau_a=NEURON_DEFAULTS["tau_a"], beta=NEURON_DEFAULTS["beta"])
        if biological:
            _check_biological(self, task_dt)
            step = BIOLOGICAL["max_dt"] if self.dt is None else self.dt
            substeps = max(substeps, math.ceil(round(task_dt / step, 6)))
            fill = {"tau_m": BIOLOGICAL["tau_m"], "readout_tau_m": task_dt}
            fill.update(tau_a=BIOLOGICAL["tau_a"], beta=BIOLOGICAL["beta"])
        elif task_dt is not None:
            scale = TASK_SCALE_STEPS * task_dt
            fill.update(tau_m=scale, readout_tau_m=scale)  # tau_a, beta: the defaults
        taus = {k: fill[k] if v is None else v for k, v in given.items()}
        dt = self.dt
        if dt is None:
            dt = NEURON_DEFAULTS["dt"] if task_dt is None else task_dt / substeps
        resolved = dataclasses.replace(self, dt=dt, substeps=substeps, **taus)
        if task_dt is not None and self.backbone in SPIKING and not biological:
            membranes = {k: _shortest(taus[k]) for k in ("tau_m", "readout_tau_m")}
            short = {k: v for k, v in membranes.items() if v < task_dt}
            if short:
                warnings.warn(
                    f"{', '.join(f'{k}={v:g} s' for k, v in short.items())} is shorter than "
                    f"the task's step ({task_dt:g} s): a membrane keeps "
                    f"{math.exp(-task_dt / min(short.values())):.2g} of itself per step, so "
                    "the network forgets within one step (leave tau_m / readout_tau_m unset "
                    f"for {TASK_SCALE_STEPS} task steps, set time_profile=biological for ms "
                    'neuron steps, or see docs/neuro.md, "Time")',
                    UserWarning,
                    stacklevel=3,
                )
        return resolved

    def build_backbone(self, input_size: int, output_size: int, *, seed: int) -> nn.Module:
        """The backbone these fields describe (:func:`snrl.build_backbone`); a spiking one
        gets its neuron parameters as one object (``snrl.layers.LIFParameters`` ...), built
        here from ``tau_m``, ``dt``, ``hh_init``, ``noise_std`` (and ``tau_a``, ``beta`` for
        ALIF)."""
        from snrl.networks.spiking import NEURONS

        if self.tau_m is None or self.readout_tau_m is None or self.beta is None:
            # no task to take a clock from: the clockless rule (resolve_time(None))
            return self.resolve_time(None).build_backbone(input_size, output_size, seed=seed)
        params = None
        if self.backbone in SPIKING:
            adaptation: dict[str, float | torch.Tensor] = {}
            if self.backbone == "alif":
                adaptation["beta"] = self.beta
                if self.tau_a is not None:
                    # its own order: not the membranes'
                    adaptation["tau_a"] = spread_time(self.tau_a, self.hidden_size, seed=seed + 1)
            params = NEURONS[self.backbone].params_type(
                tau_m=spread_time(self.tau_m, self.hidden_size, seed=seed),
                dt=self.neuron_dt,
                hh_init=self.hh_init,
                noise_std=self.noise_std,
                **adaptation,
            )
        # the fields build_backbone takes under their own names
        same = ("hidden_size", "n_layers", "force_dale_law", "recurrent_sign", "encoder")
        same += ("substeps", "readout_tau_m", "activation")
        options = {name: getattr(self, name) for name in same}
        return build_backbone(
            self.backbone, input_size, output_size, params=params, seed=seed, **options
        )


def _shortest(tau: float | tuple[float, float]) -> float:
    """The shortest of a time constant: itself, or the low end of a range."""
    return tau[0] if isinstance(tau, tuple) else tau


def spread_time(tau: float | tuple[float, float], n: int, *, seed: int) -> float | torch.Tensor:
    """A config's time constant as a layer takes it: a float stays; ``(low, high)`` becomes
    an ``(n,)`` tensor of the range's log-uniform quantiles ``low (high / low) ** ((i + 1/2)
    / n)`` in an order drawn from ``seed`` (excitatory and inhibitory neurons each get the
    spread; a checkpoint's config rebuilds it)."""
    if not isinstance(tau, tuple):
        return tau
    low, high = (float(x) for x in tau)
    quantiles = (torch.arange(n, dtype=torch.float64) + 0.5) / n
    values = low * (high / low) ** quantiles
    order = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))
    return values[order].to(torch.float32)


def _check_biological(cfg: AgentConfig, task_dt: float | None) -> None:
    """``time_profile="biological"`` needs a task step to derive ms neuron steps from, and
    more than one neuron step per env step, which e-prop does not take."""
    if task_dt is None:
        raise UserError(
            f"time_profile='biological' needs a task with a clock (a NeuroGym task's dt); "
            f"{cfg.env} declares no step length (use time_profile=task: without a clock "
            "neurons already step at 1 ms with 10 ms membranes, or set dt / tau_m yourself)"
        )
    if cfg.learning_rule == "eprop":
        raise UserError(
            "time_profile='biological' steps the neurons several times per env step, which "
            "e-prop does not take (use learning_rule=bptt, or time_profile=task)"
        )
