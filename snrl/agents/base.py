"""What every snrl algorithm (PPO, DQN) shares: config resolution and seeding, the space
check, evaluation, recorded rollouts, checkpoints and closing its envs.

A subclass sets ``Config`` (its frozen config dataclass) and ``algo_name``, builds
``self.agent`` (a :class:`snrl.agents.agent.Agent`) and keeps
``self._envs`` (its training vector env, or None).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from snrl.agents.curriculum import Curriculum, CurriculumProgress, check_lesson_spaces
from snrl.agents.evaluation import evaluate_agent, record_trajectory
from snrl.config import (
    NEURON_DEFAULTS,
    RENAMED_KEYS,
    check_values,
    config_from_dict,
    config_to_dict,
    override,
    unknown_key_error,
)
from snrl.envs import check_spaces, make_env, make_vector_env
from snrl.envs.make import check_env_id_trusted, env_factory, env_name, is_env_object
from snrl.envs.spaces import ObsFlattener
from snrl.envs.timing import env_time_step
from snrl.envs.trials import TrialTracker
from snrl.errors import NonFiniteError, UserError, first_line
from snrl.layers.base import cached_weights
from snrl.networks.ann import ACTIVATIONS
from snrl.networks.factory import BACKBONES, ENCODERS, SPIKING, build_backbone
from snrl.training.checkpoint import (
    corrupt_checkpoint,
    read_algo_checkpoint,
    rng_state,
    save_checkpoint,
)
from snrl.training.rundir import continue_run_dir
from snrl.training.runlog import RunLogger
from snrl.trajectory import Trajectory
from snrl.zoo import tuned_overrides

log = logging.getLogger("snrl")


def check(cond: bool, msg: str) -> None:
    """Raise :class:`UserError` with ``msg`` unless ``cond`` (config validation)."""
    if not cond:
        raise UserError(msg)


# ---- limits: what one run may ask for (docs/reliability.md, "Inputs") ------------------------
#: Seeds are integers in [0, MAX_SEED] (numpy's legacy seeding takes < 2**32; derived seeds
#: such as ``seed + 10_000`` must stay valid).
MAX_SEED = 2**31 - 1
#: Envs built at once: ``n_envs``, ``eval_episodes`` and ``evaluate(n_episodes=...)`` (one
#: env per episode).
MAX_ENVS = 4096
#: Envs of an ``asynchronous`` vector env (one process each).
MAX_ASYNC_ENVS = 256
#: Env steps of one run (at 10^5 steps/s, about four months).
MAX_TOTAL_STEPS = 10**12
#: Neuron steps per env step of a spiking backbone (``substeps``).
MAX_SUBSTEPS = 1000
MAX_SIM_STEPS = MAX_SUBSTEPS  # the old name
#: Share of this machine's physical memory that the estimated buffers and networks may take.
MEMORY_FRACTION = 0.8


def check_int(name: str, value: Any, lo: int, hi: int, hint: str = "") -> int:
    """``value`` as an int in ``[lo, hi]``, else :class:`UserError` naming ``name``.

    Used for arguments of the algorithms' methods (``evaluate(n_episodes=...)``), which a
    config does not check. ``hint`` ends the message (e.g. why there is an upper bound).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise UserError(
            f"{name}={value!r} is a {type(value).__name__} (pass an integer in [{lo}, {hi}])"
        )
    if not lo <= value <= hi:
        raise UserError(f"{name}={value} is out of range (pass an integer in [{lo}, {hi}]{hint})")
    return int(value)


#: Torch threads one run may ask for (``threads``, ``--threads``).
MAX_THREADS = 1024
#: The thread policy (``threads=None``): networks up to this many neurons per hidden layer
#: run on one torch thread; wider ones on torch's own thread count. Measured with
#: benchmarks/bench_threads.py (docs/benchmarks.md, "Torch threads").
ONE_THREAD_MAX_HIDDEN = 512


def policy_threads(config: Any, width: int | None = None) -> int | None:
    """The torch thread count a run of ``config`` uses: its ``threads`` when set (0: leave
    torch's current setting as it is, returned as None), else the thread policy: one thread
    for networks whose widest layer (``width``, default ``config.hidden_size``) has at most
    :data:`ONE_THREAD_MAX_HIDDEN` neurons, torch's own setting (None) for wider ones."""
    threads = getattr(config, "threads", None)
    if threads is not None:
        return threads or None
    width = config.hidden_size if width is None else width
    return 1 if width <= ONE_THREAD_MAX_HIDDEN else None


@contextlib.contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block on ``n`` torch threads (None: as they are) and give the caller's thread
    count back afterwards: a library call never leaves a changed ``torch.set_num_threads``
    behind."""
    before = torch.get_num_threads()
    if n is None or n == before:
        yield
        return
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def denormals_flushed() -> bool:
    """Whether float arithmetic on this thread flushes subnormal numbers to zero."""
    return bool((torch.full((1,), 1e-30) * 1e-10)[0] == 0)  # 1e-40 is subnormal


@contextlib.contextmanager
def flush_denormals(on: bool) -> Iterator[None]:
    """Run the block with subnormal floats flushed to zero (``torch.set_flush_denormal``)
    when ``on``, and turn it off again afterwards unless it was on before: a library call
    never leaves the setting changed. Where the CPU does not support it, nothing changes.

    Why: on some CPUs (Intel's) an operation on a subnormal number (below 1.2e-38 in float32)
    takes ~100x longer, and Adam's state for weights whose gradient stays near zero decays into
    that range. A ReLU MLP DQN spent a quarter of its time in Adam's kernel because of it
    (docs/benchmarks.md, issue 11). Values that small change nothing in training.
    """
    if not on or denormals_flushed() or not torch.set_flush_denormal(True):
        yield
        return
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


# ---- small budgets for smoke runs (docs/cli.md, "Small budgets") ---------------------------
#: Environment variables that cap what one call may run: ``SNRL_MAX_STEPS`` caps
#: ``learn(total_steps)`` and the length of a ``rollout``; ``SNRL_MAX_EPISODES`` caps
#: ``evaluate(n_episodes)``. The docs' code blocks run under them in the tests.
CAP_VARS = ("SNRL_MAX_STEPS", "SNRL_MAX_EPISODES")
_noticed: set[str] = set()  # the notices already printed by this process (one line each)


def env_cap(var: str) -> int | None:
    """The cap set by the environment variable ``var`` (None when unset or empty)."""
    text = os.environ.get(var, "").strip()
    if not text:
        return None
    try:
        cap = int(text.replace("_", ""))
    except ValueError:
        cap = 0
    if cap < 1:
        raise UserError(f"{var}={text!r} (set it to an integer >= 1, or unset it)")
    return cap


def capped(value: int, var: str, what: str) -> int:
    """``value``, or the cap of ``var`` when it is smaller; then a one-line notice on stderr
    (once per process and message)."""
    cap = env_cap(var)
    if cap is None or value <= cap:
        return value
    notice(f"snrl: {what} {value} capped at {cap} by {var}")
    return cap


def notice(line: str) -> None:
    """Print ``line`` on stderr, once per process."""
    if line not in _noticed:
        _noticed.add(line)
        print(line, file=sys.stderr, flush=True)


def memory_limit() -> int:
    """Bytes a run may plan to allocate: ``MEMORY_FRACTION`` of the physical memory (16 GiB
    where the platform does not say)."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        total = 16 * 2**30
    return int(total * MEMORY_FRACTION)


def _gib(n: float) -> str:
    g = n / 2**30
    return f"{g:.3g} GiB" if g < 1000 else f"{g:,.0f} GiB"


def check_finite(value: Any, quantity: str, *, env_step: int, cause: str) -> None:
    """Stop training with :class:`NonFiniteError` unless ``value`` (a float, array or
    tensor) is finite everywhere.

    Called before anything computed from ``value`` is stored or checkpointed, so
    ``checkpoints/last.pt`` keeps the last good state.

    Args:
        value: What to check.
        quantity: Its name in the message ("policy loss", "reward").
        env_step: The env step of the run where it happened.
        cause: The likely cause and its fix, named in the message.
    """
    # the short ways (the env's rewards are checked every step)
    if isinstance(value, float) and math.isfinite(value):
        return
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        if value.dtype.kind != "f" or np.isfinite(value).all():
            return
    t = torch.as_tensor(value)
    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
        bad = t[~torch.isfinite(t)].flatten()[0].item()
        raise NonFiniteError(
            f"training stopped at env step {env_step}: the {quantity} is {bad} "
            f"(likely cause: {cause}; checkpoints/last.pt keeps the last good state)"
        )


def check_parameters(module: nn.Module, *, env_step: int) -> None:
    """:func:`check_finite` for every parameter of ``module``, naming the first bad one."""
    for name, p in module.named_parameters():
        check_finite(
            p.detach(),
            f"parameter {name}",
            env_step=env_step,
            cause="a diverging update; lower lr or max_grad_norm, or scale the rewards down",
        )


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
    as without Dale), so 0.2 learns CartPole (docs/benchmarks.md)."""
    tau_m: float = override(
        10e-3, "CartPole PPO: 20 ms reached best 196 at 100k steps (seed 0), 10 ms 500"
    )
    """Membrane time constant of spiking layers, seconds."""
    readout_tau_m: float = override(10e-3, "the readout follows the 10 ms hidden layer")
    """Membrane time constant of the LI readout, seconds."""
    dt: float | None = override(
        None, "None: the task's step / substeps when the env declares one (NeuroGym), else 0.001"
    )
    """Neuron time step, seconds; None: from the task (docs/architecture.md, "Time"). The
    resolved value replaces None in ``algo.config`` and config.json."""
    hh_init: str = NEURON_DEFAULTS["hh_init"]
    """Initial hidden state of spiking layers: zeros | random | learned."""
    encoder: str = "direct"
    """Input encoding of spiking backbones: direct | population."""
    activation: str = "tanh"
    """Hidden nonlinearity of an mlp backbone: tanh (as SB3's PPO) | relu (as SB3's DQN);
    the other backbones ignore it."""
    substeps: int = 1
    """Neuron steps per env step (spiking backbones; ANN backbones ignore it): each
    observation is held for ``substeps`` steps of ``dt``. Old name: ``sim_steps``."""
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
    curriculum: Curriculum | None = None
    """Lessons of increasing difficulty (snrl.Curriculum; [[curriculum.lesson]] tables in
    TOML): env options merged over env_kwargs and a promotion criterion each
    (docs/curriculum.md)."""
    tuned: bool = True
    """Apply snrl's tuned settings for this algorithm, env and backbone (snrl/zoo/*.toml,
    docs/agents.md) under the values you give; false: the built-in defaults."""
    tuned_from: str = ""
    """Written by snrl: the tuned entry applied and its keys (empty: none)."""

    #: integer fields that must be >= 1 (subclasses extend it)
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
        check(self.backbone in BACKBONES, f"backbone={self.backbone!r} (one of {BACKBONES})")
        check(self.encoder in ENCODERS, f"encoder={self.encoder!r} (one of {ENCODERS})")
        check(
            self.activation in ACTIVATIONS,
            f"activation={self.activation!r} (one of {tuple(ACTIVATIONS)})",
        )
        check(
            0 <= self.seed <= MAX_SEED, f"seed={self.seed} (must be an integer in [0, {MAX_SEED}])"
        )
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
            self.tau_m > 0 and self.readout_tau_m > 0 and (self.dt is None or self.dt > 0),
            "tau_m, readout_tau_m and dt must be > 0 seconds (dt may be None: from the task)",
        )
        check(
            self.hh_init in ("zeros", "random", "learned"),
            f"hh_init={self.hh_init!r} (zeros | random | learned for agents)",
        )
        check(self.eval_interval >= 0, f"eval_interval={self.eval_interval} (must be >= 0)")
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
        check(
            self.threads is None or 0 <= self.threads <= MAX_THREADS,
            f"threads={self.threads} (an integer in [1, {MAX_THREADS}], 0 for torch's own "
            "setting, or none for the policy)",
        )

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
        return {"networks": 2 * 16 * params}  # two backbones x (param, grad, 2 moments) fp32

    def check_memory(self, obs_size: int, head_size: int) -> None:
        """Refuse a config whose :meth:`memory_bytes` exceed :func:`memory_limit`, before
        anything is allocated."""
        parts = self.memory_bytes(obs_size, head_size)
        total, limit = sum(parts.values()), memory_limit()
        if total > limit:
            detail = ", ".join(f"{k} {_gib(v)}" for k, v in parts.items())
            raise UserError(
                f"this config needs about {_gib(total)} of memory ({detail}; observations of "
                f"{obs_size} values) but this machine allows {_gib(limit)} (lower "
                "hidden_size, n_layers, n_envs, n_steps or buffer_size)"
            )

    @property
    def sim_steps(self) -> int:
        """Deprecated name of :attr:`substeps`."""
        warnings.warn("config.sim_steps is deprecated: use config.substeps", DeprecationWarning, 2)
        return self.substeps

    @property
    def neuron_dt(self) -> float:
        """The neuron time step in seconds: ``dt``, or 1 ms while ``dt`` is unresolved."""
        return NEURON_DEFAULTS["dt"] if self.dt is None else float(self.dt)

    def resolve_dt(self, task_dt: float | None) -> AgentConfig:
        """This config with ``dt`` set: unchanged if given, else ``task_dt / substeps`` when
        the task declares its step (seconds), else 1 ms."""
        if self.dt is not None:
            return self
        dt = NEURON_DEFAULTS["dt"] if task_dt is None else task_dt / self.substeps
        return dataclasses.replace(self, dt=dt)

    @property
    def env_id(self) -> str:
        """Deprecated name of :attr:`env`."""
        warnings.warn("config.env_id is deprecated: use config.env", DeprecationWarning, 2)
        return self.env

    def build_backbone(self, input_size: int, output_size: int, *, seed: int) -> nn.Module:
        """The backbone these fields describe (:func:`snrl.build_backbone`); a spiking one
        gets its neuron parameters as one object (``snrl.layers.LIFParameters`` ...), built
        here from ``tau_m``, ``dt`` and ``hh_init``."""
        from snrl.networks.spiking import NEURONS

        params = None
        if self.backbone in SPIKING:
            params = NEURONS[self.backbone].params_type(
                tau_m=self.tau_m, dt=self.neuron_dt, hh_init=self.hh_init
            )
        return build_backbone(
            self.backbone,
            input_size,
            output_size,
            hidden_size=self.hidden_size,
            n_layers=self.n_layers,
            params=params,
            force_dale_law=self.force_dale_law,
            recurrent_sign=self.recurrent_sign,
            encoder=self.encoder,
            substeps=self.substeps,
            readout_tau_m=self.readout_tau_m,
            activation=self.activation,
            seed=seed,
        )


class Algorithm:
    """Base of :class:`snrl.PPO` and :class:`snrl.DQN`."""

    Config: ClassVar[type]
    algo_name: ClassVar[str]
    #: the algorithm needs a Discrete action space (checked once, by ``_setup``)
    discrete_actions: ClassVar[bool] = False
    #: how to fix an action space the algorithm cannot use (for the error message)
    space_hint: ClassVar[str] = ""
    agent: nn.Module
    config: Any
    _envs: Any = None
    #: the env object the algorithm was given (instance, factory, vector env), or None for an id
    _env_source: Any = None
    progress: CurriculumProgress | None = None
    """Where the run is in its curriculum (None: it has none)."""
    wall_time: float = 0.0
    """Seconds of training so far (over every ``learn`` call and resume)."""

    @staticmethod
    @contextlib.contextmanager
    def _seeded(seed: int) -> Iterator[None]:
        """Build networks from ``seed`` without touching the caller's global torch RNG: the
        initializers that draw from it (``nn.Linear``, ``orthogonal_``) run inside a fork of
        it, seeded, and the caller's state is back afterwards."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield

    @classmethod
    def check_spaces(cls, observation_space: gym.Space, action_space: gym.Space) -> None:
        """Raise :class:`UserError` unless this algorithm trains on these single-env spaces."""
        check_spaces(
            observation_space,
            action_space,
            discrete_actions=cls.discrete_actions,
            who=cls.algo_name.upper(),
            hint=cls.space_hint,
        )

    def _setup(
        self,
        env: Any,
        config: Any,
        overrides: dict[str, Any],
        modules: dict[str, Any] | None = None,
    ) -> tuple[gym.Space, gym.Space]:
        """Check the constructor's arguments, resolve the config (``env`` and keyword
        overrides replace its fields), check the device and the memory the run will need,
        and return the env's checked spaces. ``modules`` are the custom backbones passed
        (``{"policy": ...}``). The global RNGs are left alone (see :meth:`_seeded`).

        ``env`` may be an object (see :mod:`snrl.envs.make`): the config then records its
        name (:func:`~snrl.envs.make.env_name`), and an instance sets ``n_envs=1``, a vector
        env its ``num_envs``, unless ``n_envs`` is passed as a keyword."""
        name = self.algo_name.upper()
        if config is not None and not isinstance(config, self.Config):
            raise UserError(
                f"config= is a {type(config).__name__}, snrl.{name} needs a "
                f"{self.Config.__name__} (pass snrl.{self.Config.__name__}(...) or keywords)"
            )
        for key, module in (modules or {}).items():
            _check_protocol(key, module)
        cfg = config or self.Config()
        for old, new in RENAMED_KEYS.items():
            if old in overrides:
                warnings.warn(
                    f"snrl.{name}({old}=...) is deprecated: use {new}=...",
                    DeprecationWarning,
                    stacklevel=3,
                )
                overrides.setdefault(new, overrides.pop(old))
        if is_env_object(env):
            self._env_source = env
            forced = _env_count(env)
            if forced is not None:
                if "n_envs" in overrides and overrides["n_envs"] != forced:
                    raise UserError(
                        f"n_envs={overrides['n_envs']} but {_env_count_why(env, forced)} (leave "
                        "n_envs unset, or pass a factory that makes each env, e.g. "
                        "env=lambda: gymnasium.make(ID))"
                    )
                overrides["n_envs"] = forced
            env = env_name(env)
        if env is not None:
            overrides["env"] = env
        if isinstance(overrides.get("curriculum"), (list, tuple)):  # lessons as dicts
            overrides["curriculum"] = Curriculum(overrides["curriculum"])
        if config is None and not any(m is not None for m in (modules or {}).values()):
            # snrl/zoo: the tuned settings of this env and backbone under the keywords given
            # (a config object, a saved run or a custom backbone: used as given)
            overrides, entry = tuned_overrides(self.Config, self.algo_name, overrides)
            if entry is not None:
                log.info("snrl.%s: tuned settings %s", name, overrides["tuned_from"])
        valid = [f.name for f in dataclasses.fields(self.Config) if f.init]
        for key in overrides:
            if key not in valid:
                raise unknown_key_error(key, valid, f"snrl.{name}(...)", what=f"{name} option")
        self.config = cfg = dataclasses.replace(cfg, **overrides)  # __post_init__ validates
        self.device = _available_device(cfg.device)
        source = self._env_source
        if isinstance(source, gym.vector.VectorEnv):
            spaces = (source.single_observation_space, source.single_action_space)
        elif isinstance(source, gym.Env):
            spaces = (source.observation_space, source.action_space)
        else:
            spaces = None
        probe = _Spaces(*spaces) if spaces else make_env(self._env(), **cfg.env_kwargs)
        try:
            self.config = cfg = cfg.resolve_dt(env_time_step(probe))  # docs: "Time"
            self.check_spaces(probe.observation_space, probe.action_space)
            obs_size = ObsFlattener(probe.observation_space).size
            act = probe.action_space
            head = int(np.sum(getattr(act, "nvec", 0))) or int(getattr(act, "n", 0))
            cfg.check_memory(obs_size, head or int(np.prod(act.shape or (1,))))
            self.progress = None
            if cfg.curriculum is not None:
                check_lesson_spaces(cfg, probe.observation_space, probe.action_space)
                self.progress = CurriculumProgress()
            return probe.observation_space, probe.action_space
        finally:
            probe.close()

    def _check_output_width(self, key: str, module: nn.Module, expected: int) -> None:
        """Run a custom backbone once on a zero observation and refuse it unless its output
        width is ``expected``."""
        obs_size = self.agent.obs_size
        try:
            with torch.no_grad():
                out = module.run(
                    torch.zeros(1, obs_size, device=self.device),
                    module.initial_state(1, device=self.device),
                ).out
        except Exception as e:  # the user's module: say which one failed and on what input
            raise UserError(
                f"{key}= failed on one observation of {obs_size} values: "
                f"{type(e).__name__}: {e} (its input size must be {obs_size})"
            ) from e
        if out.shape[-1] != expected:
            raise UserError(
                f"{key}= has output width {out.shape[-1]}, expected {expected} for this env "
                f"and algorithm (build it with output_size={expected})"
            )

    def _env(self) -> Any:
        """What training envs are made from: the env object given, else the config's id."""
        return self.config.env if self._env_source is None else self._env_source

    def _fresh_env(self) -> Any:
        """What evaluation and rollouts make their own envs from (an id, or a factory)."""
        return self.config.env if self._env_source is None else env_factory(self._env_source)

    @contextlib.contextmanager
    def _runtime(self) -> Iterator[None]:
        """The torch thread count of this algorithm's runs (:func:`policy_threads` of its
        widest layer, custom backbones included) and its denormal flushing
        (:func:`flush_denormals`), for the duration of a ``with`` block."""
        agent = self.agent
        widths = [
            info.size for name in agent.backbones for info in getattr(agent, name).layer_info()
        ]
        threads = policy_threads(self.config, max(widths, default=None))
        with torch_threads(threads), flush_denormals(self.config.flush_denormals):
            yield

    # ---- the public surface ----------------------------------------------------------------
    def learn(self, total_steps: int | None = None, *, progress: bool = True) -> dict[str, list]:
        """Train until ``total_steps`` env steps (default ``config.total_steps``).

        Returns the metrics history (column -> list). With a run directory, also appends each
        row to ``metrics.csv``, writes ``checkpoints/last.pt`` every ``checkpoint_interval``
        rows, ``checkpoints/best.pt`` whenever a periodic deterministic evaluation is at
        least as good as the best so far, and ``learning_curve.png`` at the end.

        Runs on the torch thread count of ``config.threads``, with subnormal floats flushed
        to zero unless ``config.flush_denormals`` is False (both restored afterwards); the
        environment variable ``SNRL_MAX_STEPS`` caps ``total_steps``. ``progress``: a bar on
        a terminal (tqdm.auto's widget in a notebook), one line every 10 s or 10 % when
        stderr is a file or pipe; False for silence.
        """
        total = check_int(
            "total_steps",
            total_steps if total_steps is not None else self.config.total_steps,
            1,
            MAX_TOTAL_STEPS,
        )
        total = capped(total, "SNRL_MAX_STEPS", "total_steps")
        with self._runtime():
            if self._envs is None:
                self._start_envs()
            return self._learn(total, progress=bool(progress))

    def _learn(self, total: int, *, progress: bool) -> dict[str, list]:
        raise NotImplementedError

    def _start_envs(self) -> None:
        raise NotImplementedError

    def _open_envs(self) -> None:
        """The training envs of the current lesson (the run's env without a curriculum),
        reset with a seed that moves with the update count (a resumed run does not replay
        its first episodes), a fresh trial tracker, and every row's recurrent state at its
        start. The algorithms' ``_start_envs`` call it and add their own parts."""
        cfg = self.config
        seed = cfg.seed + 1000 * self.n_updates
        self._envs = make_vector_env(
            self._env(),
            cfg.n_envs,
            seed=seed,
            asynchronous=cfg.asynchronous,
            env_kwargs=self.lesson_env_kwargs(self.lesson),  # the current lesson's, if any
            max_episode_steps=cfg.max_episode_steps,
        )
        self._obs, info = self._envs.reset(seed=seed)
        self._trials = TrialTracker(cfg.n_envs)  # trial tasks: the trials since the last row
        self._trials.reset(info)
        self._trial_log: list[dict] = []
        self._state = self.agent.initial_state(cfg.n_envs, device=self.device)
        self._recent: list[float] = []

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = True,
    ) -> tuple[np.ndarray, Any]:
        """The action for an observation, as Stable-Baselines3's ``model.predict``.

        Args:
            observation: One observation (the env's observation shape) or a batch of them
                (``(n, *shape)``), numpy or anything ``np.asarray`` takes.
            state: The recurrent state returned by the previous call (None: the initial
                state). Pass it back every step: spiking and recurrent networks carry their
                state across env steps.
            episode_start: Bool per row (``(n,)``, or one bool for a single observation):
                True re-initializes that row's state first (the step after a reset).
            deterministic: The most likely action (True) or a sample (PPO) / epsilon-greedy
                with ``eps_end`` (DQN).

        Returns:
            ``(action, state)``: the action in the env's format (one action for a single
            observation, ``(n, ...)`` for a batch) and the state to pass next time.
        """
        agent = self.agent
        space = agent.observation_space
        obs = np.asarray(observation)
        shape = tuple(space.shape or ())
        single = obs.shape == shape
        if not single and obs.shape[1:] != shape:
            raise UserError(
                f"observation of shape {obs.shape} does not fit the observation space "
                f"{shape} (pass one observation of shape {shape} or a batch (n, *{shape}))"
            )
        batch = obs[None] if single else obs
        n = batch.shape[0]
        if state is None:
            state = agent.initial_state(n, device=self.device)
        if episode_start is not None:
            starts = np.asarray(episode_start, dtype=bool).reshape(-1)
            if starts.shape != (n,):
                raise UserError(
                    f"episode_start has {starts.size} values for {n} observation(s) (pass one "
                    "bool per observation)"
                )
            state = agent.reset_state(state, starts)
        with torch.no_grad():
            res = agent.step(agent.preprocess(batch), state, deterministic=bool(deterministic))
        action = agent.env_action(res.action)
        return (action[0] if single else action), res.state

    # ---- curriculum ----------------------------------------------------------------------
    @property
    def lesson(self) -> int | None:
        """The current lesson of the curriculum (None: the run has no curriculum)."""
        return None if self.progress is None else self.progress.lesson

    def lesson_env_kwargs(self, lesson: int | str | None = None) -> dict[str, Any]:
        """The env options of ``lesson`` (a number, a name, or None for the final one): its
        ``env_kwargs`` over the config's; the config's own without a curriculum."""
        cur = self.config.curriculum
        if cur is None:
            check(lesson is None, f"lesson={lesson!r} but this run has no curriculum (drop it)")
            return self.config.env_kwargs
        return cur.env_kwargs(self.config.env_kwargs, cur.index(lesson))

    def _new_lesson(self) -> None:
        """What a subclass drops at a promotion, before the envs are rebuilt."""

    def _promote(self, logger: RunLogger) -> None:
        """After the row that promoted: rebuild the envs on the new lesson (episodes and
        recurrent states restart; agent, optimizer, normalizer and counters stay), start
        best.pt over, and write last.pt (docs/curriculum.md)."""
        self.best_eval = logger.best_eval = -math.inf
        self.close()
        self._new_lesson()
        if self.env_step < logger.total:
            self._start_envs()
        if self.run_dir is not None:
            self.save(self.run_dir / "checkpoints" / "last.pt")

    def evaluate(
        self,
        n_episodes: int = 20,
        seed: int = 123,
        deterministic: bool = True,
        lesson: int | str | None = None,
    ) -> dict:
        """Evaluation on ``n_episodes`` envs (env ``i`` seeded ``seed + i``), deterministic
        actions by default: ``{"mean_return", "std_return", "n_episodes", "returns",
        "mean_length"}``; on a trial task (NeuroGym) also ``"n_trials"``, ``"accuracy"``,
        ``"accuracy_by_condition"`` and ``"trials"`` (docs/neuro.md). With a curriculum, on
        ``lesson`` (a number or name; None: the final lesson), and the result names it
        (``"lesson"``). ``SNRL_MAX_EPISODES`` caps ``n_episodes``."""
        n_episodes = check_int(
            "n_episodes", n_episodes, 1, MAX_ENVS, "; one env per episode is built at once"
        )
        n_episodes = capped(n_episodes, "SNRL_MAX_EPISODES", "n_episodes")
        seed = check_int("seed", seed, 0, MAX_SEED)
        check(
            isinstance(deterministic, bool),
            f"deterministic={deterministic!r} (pass True or False)",
        )
        self.agent.eval()
        try:
            # no parameter changes while evaluating: signed weights once, not once per step
            with self._runtime(), cached_weights():
                res = evaluate_agent(
                    self.agent,
                    self._fresh_env(),
                    n_episodes=n_episodes,
                    seed=seed,
                    deterministic=deterministic,
                    env_kwargs=self.lesson_env_kwargs(lesson),
                    max_episode_steps=self.config.max_episode_steps,
                )
            if self.progress is not None:
                res["lesson"] = self.config.curriculum.index(lesson)
            return res
        finally:
            self.agent.train()

    def rollout(
        self,
        seed: int = 0,
        record: bool = True,
        deterministic: bool = True,
        max_steps: int | None = None,
    ) -> Trajectory:
        """One episode as a :class:`snrl.Trajectory`: frames when ``record`` and the env
        renders rgb_array; per-layer activity and the policy's outputs (action probabilities,
        Gaussian mean/std, or Q-values) always. ``SNRL_MAX_STEPS`` caps its length."""
        seed = check_int("seed", seed, 0, MAX_SEED)
        if max_steps is not None:
            max_steps = check_int("max_steps", max_steps, 1, MAX_TOTAL_STEPS)
        cap = env_cap("SNRL_MAX_STEPS")
        if cap is not None and (max_steps is None or max_steps > cap):
            notice(f"snrl: rollouts capped at {cap} steps by SNRL_MAX_STEPS")
            max_steps = cap
        model = getattr(self.agent.actor, "backbone", None)  # a custom one's own, if it says
        meta = {
            "algo": self.algo_name,
            "backbone": model if isinstance(model, str) else self.config.backbone,
            "force_dale_law": self.config.force_dale_law,
        }
        with self._runtime(), cached_weights():
            return record_trajectory(
                self.agent,
                self._fresh_env(),
                seed=seed,
                record=record,
                deterministic=deterministic,
                max_steps=max_steps,
                meta=meta,
                env_kwargs=self.lesson_env_kwargs(),  # the final lesson of a curriculum
                max_episode_steps=self.config.max_episode_steps,
            )

    def save(self, path: str | Path) -> None:
        """Write a checkpoint atomically (config, agent, optimizer, counters, generator
        states and the algorithm's ``extra_state``)."""
        save_checkpoint(
            Path(path),
            {
                "algo": self.algo_name,
                "config": config_to_dict(self.config),
                "custom_backbones": bool(self.custom_backbones),
                "agent": self.agent.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "counters": {
                    "env_step": int(self.env_step),
                    "n_updates": int(self.n_updates),
                    "best_eval": float(self.best_eval),
                    "wall_time": float(self.wall_time),
                },
                "rng": rng_state(),  # read by snrl 0.1; snrl never draws from the global RNGs
                "generator": self.generator.get_state(),
                "agent_generator": self.agent.generator.get_state(),
                "extra": self.extra_state()
                | ({} if self.progress is None else {"curriculum": self.progress.to_dict()}),
            },
        )

    def extra_state(self) -> dict[str, Any]:
        """What a subclass adds to its checkpoints (tensors, numbers, strings, dicts)."""
        return {}

    def load_extra_state(self, extra: dict[str, Any]) -> None:
        """Restore :meth:`extra_state` (an empty dict: a checkpoint without it)."""

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        policy: nn.Module | None = None,
        critic: nn.Module | None = None,
        run_dir: str | Path | None = None,
        env: Any = None,
        trust_env_module: bool = False,
        device: str | None = None,
    ):
        """Restore an algorithm saved by :meth:`save`; pass ``policy``/``critic`` modules of
        the same architecture when it was built with custom backbones. ``run_dir``: continue
        training into this run directory (its own, or a new one). A ``module:Class`` env
        named by the file is imported only with ``trust_env_module=True`` or when ``env``
        names the env (it replaces the saved ``env``; an env object is taken as by the
        constructor, and is needed for a run trained on an object without a registered id).
        ``device``: where the loaded agent runs (``"cpu"``, ``"cuda"``, ``"cuda:N"``); None:
        the device it was trained on when this machine has it, else the CPU (with a one-line
        notice), so a checkpoint written on a GPU evaluates on a CPU-only machine.

        The file is checked against its schema before any of it is used."""
        d = read_algo_checkpoint(path)
        if d["algo"] != cls.algo_name:
            raise UserError(
                f"{path} holds a {d['algo']!r} checkpoint, not {cls.algo_name!r} "
                f"(load it with snrl.{d['algo'].upper()}.load)"
            )
        if d["custom_backbones"] and policy is None and critic is None:
            raise UserError(
                f"{path} was trained with custom backbones (pass policy=/critic= modules to load)"
            )
        saved = dict(d["config"])
        if env is not None:
            saved.pop("env_id", None)  # the key of snrl 0.1 run files
            saved["env"] = env_name(env)
        else:
            check_env_id_trusted(
                saved.get("env", saved.get("env_id")),
                source=f"checkpoint {path}",
                trusted=trust_env_module,
            )
        saved["device"] = _load_device(saved.get("device", "cpu"), device, path)
        try:
            cfg = config_from_dict(cls.Config, saved)
        except ValueError as e:
            raise corrupt_checkpoint(path, f"its config: {first_line(e)}") from None
        obj = env if is_env_object(env) else None
        algo = cls(obj, config=cfg, policy=policy, critic=critic, run_dir=None)
        try:
            algo.agent.load_state_dict(d["agent"])
            algo.optimizer.load_state_dict(d["optimizer"])
        except Exception as e:  # shapes, keys, optimizer state of another layout
            raise UserError(
                f"checkpoint {path} does not fit this agent: {first_line(e)} (was it written "
                "by another snrl version or config?)"
            ) from None
        c = d["counters"]
        algo.env_step, algo.n_updates = c["env_step"], c["n_updates"]
        algo.best_eval, algo.wall_time = float(c["best_eval"]), float(c["wall_time"])
        algo.generator.set_state(d["generator"])
        if "agent_generator" in d:  # absent from snrl 0.1 checkpoints (torch's RNG then)
            algo.agent.generator.set_state(d["agent_generator"])
        try:
            algo.load_extra_state(d.get("extra", {}))
        except UserError:
            raise
        except Exception as e:
            raise corrupt_checkpoint(path, f"its {cls.algo_name} state: {first_line(e)}") from None
        if algo.progress is not None:
            extra = d.get("extra", {})
            algo.progress = CurriculumProgress.from_dict(extra.get("curriculum"), cfg.curriculum)
        if run_dir is not None:
            algo.run_dir = continue_run_dir(run_dir)
        return algo

    # ---- the run log ---------------------------------------------------------------------
    def _run_logger(self, total_steps: int, progress: bool) -> RunLogger:
        """The run log of one ``learn`` call, from this algorithm's counters."""
        return RunLogger(
            total_steps,
            run_dir=self.run_dir,
            env_step=self.env_step,
            n_updates=self.n_updates,
            best_eval=self.best_eval,
            wall_time=self.wall_time,
            checkpoint_interval=self.config.checkpoint_interval,
            title=f"{self.algo_name.upper()} {self.config.backbone} on {self.config.env}",
            progress=progress,
        )

    def _log_row(
        self, logger: RunLogger, row: dict[str, Any], elapsed: float, *, evaluated: bool
    ) -> None:
        """Send one metrics row to the run log; keep its best evaluation and wall time, and
        write best.pt / last.pt when they are due. With a curriculum, the row gets the
        ``lesson`` it was trained in, and a promotion follows it (:meth:`_promote`)."""
        promoted = False
        if self.progress is not None:
            row["lesson"] = self.progress.lesson
            evals = {k: v for k, v in row.items() if k.startswith("eval_")} if evaluated else None
            promoted = self.progress.observe(self.config.curriculum, self.env_step, evals)
        best_due, last_due = logger.log(
            row, elapsed, env_step=self.env_step, n_updates=self.n_updates, evaluated=evaluated
        )
        self.best_eval, self.wall_time = logger.best_eval, logger.wall_time
        if self.run_dir is not None:
            if best_due:
                self.save(self.run_dir / "checkpoints" / "best.pt")
            if last_due:
                self.save(self.run_dir / "checkpoints" / "last.pt")
        if promoted:
            self._promote(logger)

    def close(self) -> None:
        """Close the training envs (evaluate/rollout still work)."""
        if self._envs is not None:
            self._envs.close()
            self._envs = None


class _Spaces:
    """The spaces of an env object, standing in for a probe env (nothing to close)."""

    def __init__(self, observation_space: gym.Space, action_space: gym.Space) -> None:
        self.observation_space = observation_space
        self.action_space = action_space

    def close(self) -> None:
        pass


def _env_count(env: Any) -> int | None:
    """The ``n_envs`` an env object implies: 1 for an instance, ``num_envs`` for a vector
    env, None for a factory (it makes as many as asked)."""
    if isinstance(env, gym.vector.VectorEnv):
        return int(env.num_envs)
    if isinstance(env, gym.Env):
        return 1
    return None


def _env_count_why(env: Any, count: int) -> str:
    if isinstance(env, gym.vector.VectorEnv):
        return f"the vector env {env_name(env)} has {count} envs"
    return f"an env instance is one env ({env_name(env)}; snrl trains on it, not on copies)"


def _check_protocol(key: str, module: Any) -> None:
    """Refuse a custom backbone that is not an ``nn.Module`` with the recurrent protocol."""
    if module is None:
        return
    missing = [
        m
        for m in ("initial_state", "reset_state", "run", "layer_info")
        if not callable(getattr(module, m, None))
    ]
    if not isinstance(module, nn.Module) or missing:
        what = type(module).__name__ if isinstance(module, nn.Module) else repr(module)
        raise UserError(
            f"{key}={what} is not a recurrent backbone (pass an nn.Module with initial_state, "
            "reset_state, run and layer_info, e.g. snrl.build_backbone('lif', ...), or "
            "choose a built one with backbone='lif')"
        )


def _load_device(saved: Any, asked: str | None, path: str | Path) -> str:
    """The device a loaded checkpoint runs on: ``asked`` when given (checked when the
    algorithm is built), else the ``saved`` one when this machine has it, else ``"cpu"``
    with a one-line notice."""
    if asked is not None:
        return str(asked)
    try:
        _available_device(str(saved))
    except (UserError, RuntimeError, ValueError):
        notice(
            f"snrl: {path} was trained on device={saved!r}, which this machine does not have;"
            " it runs on cpu (pass device= to choose)"
        )
        return "cpu"
    return str(saved)


def _available_device(name: str) -> torch.device:
    """``torch.device(name)`` if this machine has it, else :class:`UserError`."""
    dev = torch.device(name)
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise UserError(
                f"device={name!r} but this torch build has no CUDA device "
                f"(torch {torch.__version__}; use device=cpu)"
            )
        if dev.index is not None and dev.index >= n:
            raise UserError(f"device={name!r} but there are {n} CUDA device(s) (use cuda:0)")
        return dev
    if dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise UserError(f"device={name!r} but MPS is not available here (use device=cpu)")
        return dev
    raise UserError(f"device={name!r} is not supported (use cpu, cuda, cuda:N or mps)")
