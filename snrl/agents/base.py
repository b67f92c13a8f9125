"""What every snrl algorithm (PPO, DQN) shares: the one training loop (:meth:`Algorithm.learn`,
with its callbacks), config resolution and seeding, the space check, the optimizer and its
learning-rate schedule, evaluation, recorded rollouts, checkpoints and closing its envs.

A subclass sets ``Config`` (its frozen config dataclass, an
:class:`~snrl.agents.config.AgentConfig`) and ``algo_name``, builds ``self.agent`` (a
:class:`snrl.agents.agent.Agent`) and ``self.optimizer`` (:meth:`Algorithm._make_optimizer`),
and supplies one iteration of the loop: ``_collect_rollout`` and ``_learn_from``. The input
limits live in :mod:`snrl.agents.limits`, the thread and denormal policy in
:mod:`snrl.agents.runtime`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from snrl.agents.curriculum import Curriculum, CurriculumProgress, check_lesson_spaces
from snrl.agents.evaluation import evaluate_agent, record_trajectory
from snrl.agents.limits import (
    MAX_ENVS,
    MAX_SEED,
    MAX_TOTAL_STEPS,
    capped,
    check,
    check_finite,
    check_int,
    check_parameters,
    env_cap,
    notice,
)
from snrl.agents.optim import (
    CUSTOM,
    FlatAdam,
    build_optimizer,
    lr_multiplier,
)
from snrl.agents.runtime import flush_denormals, policy_threads, torch_threads
from snrl.config import (
    Layer,
    config_from_dict,
    config_to_dict,
)
from snrl.envs import check_spaces, make_env, make_vector_env
from snrl.envs.make import check_env_id_trusted, env_factory, env_name, is_env_object
from snrl.envs.spaces import ObsFlattener
from snrl.envs.timing import env_time_step
from snrl.envs.trials import TrialTracker
from snrl.errors import UserError, explain_foreign_calls, first_line
from snrl.layers.base import cached_weights
from snrl.networks.factory import SPIKING
from snrl.tasks.multitask import is_multitask_env, multitask_env_id, trained_schedule
from snrl.training.checkpoint import (
    corrupt_checkpoint,
    read_algo_checkpoint,
    rng_state,
    save_checkpoint,
)
from snrl.training.metrics import trial_columns
from snrl.training.rundir import continue_run_dir
from snrl.training.runlog import RunLogger
from snrl.trajectory import Trajectory
from snrl.zoo import configure

log = logging.getLogger("snrl")


#: The periodic evaluations during training seed env ``i`` with ``config.seed +
#: EVAL_SEED_OFFSET + i``: episodes of their own, apart from the training envs' seeds.
EVAL_SEED_OFFSET = 10_000

#: ``learn()`` keywords of Stable-Baselines3 and what snrl does instead (docs/migrating.md).
_FOREIGN_LEARN_KEYWORDS = {
    "total_timesteps": "Stable-Baselines3's learn(total_timesteps=N) is learn(total_steps=N)",
    "log_interval": "snrl writes one metrics row per update (metrics.csv of run_dir=)",
    "tb_log_name": "metrics go to metrics.csv of the run directory (run_dir= of the algorithm)",
    "reset_num_timesteps": "learn() continues from algo.env_step; a new run is a new algorithm",
    "progress_bar": "learn(progress=True/False)",
}


def _foreign_algo_arguments(args: tuple[Any, ...]) -> str | None:
    """What snrl.PPO/DQN make of positional arguments written for another library."""
    if len(args) >= 2 and isinstance(args[0], str) and args[0].endswith("Policy"):
        return (
            f"Stable-Baselines3's PPO({args[0]!r}, env) is snrl.PPO(env, backbone=...): the env "
            "comes first, the network is backbone=/hidden_size= or policy=/critic= modules"
        )
    if any(isinstance(a, nn.Module) for a in args):
        return (
            "a network is not a positional argument: the env is the one positional argument "
            "and your network a keyword, snrl.DQN(env, policy=q_network) (not a huskarl-style "
            "DQN(model, ...) or DQN(env, model))"
        )
    return None


def _check_task_groups(cfg: Any, source: Any) -> None:
    """Refuse ``norm_adv_by_task`` for an env whose steps have no task (one task)."""
    if not getattr(cfg, "norm_adv_by_task", False):
        return
    if is_multitask_env(cfg.env) or getattr(source, "task_index", None) is not None:
        return
    raise UserError(
        f"norm_adv_by_task=true normalizes advantages within each task, but env {cfg.env} "
        "runs one task (train on several with --tasks A,B or env='snrl.tasks:A,B'; or set "
        "norm_adv_by_task=false)"
    )


def _check_ground_truth(cfg: Any, probe: Any) -> None:
    """Refuse ``supervised_coef`` before anything is written for an env snrl made that is no
    trial task (no task clock: its steps give no ground-truth action; an env object the user
    passed is checked at its first step), and for any env without Discrete actions."""
    if not getattr(cfg, "supervised_coef", 0):
        return
    if not isinstance(probe, _Spaces) and env_time_step(probe) is None:
        raise UserError(
            f"supervised_coef={cfg.supervised_coef} trains the policy toward the ground-truth "
            f"action of a trial task (NeuroGym, snrl.tasks); {cfg.env} is none (set "
            "supervised_coef=0)"
        )
    if not isinstance(probe.action_space, gym.spaces.Discrete):
        raise UserError(
            f"supervised_coef={cfg.supervised_coef} trains the policy toward a task's "
            f"ground-truth action, which needs Discrete actions ({cfg.env} has "
            f"{type(probe.action_space).__name__} ones; set supervised_coef=0)"
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
    env_tensors: bool | None = None
    """Whether a training env that can hand out torch tensors on the agent's device
    (``snrl.tasks`` with its ``device`` the algorithm's) does: observations, rewards and
    terminations then stay tensors from the env to the rollout buffer and the network, and
    PPO's actions go back as tensors, with no numpy round trip (docs/tasks.md, "On the
    agent's device"). ``None`` (the default): where that device is not the CPU (a GPU, where
    the engine steps on tensors; on the CPU it steps on numpy, so tensors save no copy there
    and measured no faster: docs/tasks.md); True: on the CPU too; False: numpy from every
    env. Every other env gives numpy. A seeded run computes the same numbers either way
    (tested). Set it on an algorithm (or a subclass) before ``learn``."""
    #: the training env hands out tensors (set where the envs are opened)
    _tensor_env: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Each algorithm's constructor explains a call written for another library
        (Stable-Baselines3's ``PPO("MlpPolicy", env)``, a huskarl-style ``DQN(env, model)``):
        docs/migrating.md."""
        super().__init_subclass__(**kwargs)
        # an algorithm (a class naming its algo_name) explains calls to its constructor, its
        # own or the one it inherits from a shared base (PPO and A2C: ActorCriticAlgorithm)
        if "algo_name" in cls.__dict__:
            owner = f"snrl.{cls.algo_name.upper()}(...)"
            explain = explain_foreign_calls(owner, {}, positional=_foreign_algo_arguments)
            init = cls.__dict__.get("__init__", cls.__init__)
            cls.__init__ = explain(init)  # type: ignore[method-assign]

    #: the callbacks of the running ``learn`` (none outside it)
    _callbacks: tuple | list = ()
    #: ``n_updates`` when last.pt was last written by this object (-1: not yet)
    _last_saved: int = -1
    #: a callback asked the running ``learn`` to stop after the current iteration
    _stopping: bool = False
    loss_terms: list[Any]
    """Functions ``fn(activity, batch) -> scalar tensor`` added to the loss (PPO: to the
    policy and value loss, with the policy's activity; DQN: to the TD loss, with the
    Q-network's)."""

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
        if is_multitask_env(env):
            # the id `snrl train --tasks` records (full ids), so the tuned entry and config.json
            # are the CLI's for the same tasks
            env = multitask_env_id(env)
        if env is not None:
            overrides["env"] = env
        self._take_callables(overrides)
        if isinstance(overrides.get("curriculum"), (list, tuple)):  # lessons as dicts
            overrides["curriculum"] = Curriculum(overrides["curriculum"])
        # the one config path (snrl.zoo.configure, as `snrl train`): the tuned settings of this
        # env and backbone under the keywords; a config object, a saved run or a custom
        # backbone is used as given
        layers = [Layer.of(f"snrl.{name}(...)", overrides, typed=True, what=f"{name} option")]
        if config is not None:
            given = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if f.init}
            layers.insert(0, Layer.of("config=", given, typed=True))
        custom = any(m is not None for m in (modules or {}).values())
        cfg, entry, skipped = configure(
            self.Config, self.algo_name, layers, tuned=config is None and not custom
        )
        if entry is not None:
            log.info("snrl.%s: tuned settings %s", name, cfg.tuned_from)
        if skipped:
            msg = f"tuned settings {entry.source}: not applied {'; '.join(skipped)}"
            warnings.warn(msg, stacklevel=3)
        self.config = cfg
        self._check_callables()
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
            self.config = cfg = cfg.resolve_time(env_time_step(probe))  # docs: "Time"
            trained_schedule(cfg.env, cfg.n_envs, env_kwargs=cfg.env_kwargs)  # checked now
            _check_task_groups(cfg, source)
            _check_ground_truth(cfg, probe)
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

    def _take_callables(self, overrides: dict[str, Any]) -> None:
        """Move the Python-only arguments out of ``overrides``: a callable ``optimizer`` or
        ``lr_schedule`` (the config records ``"custom"``) and the ``loss_terms`` functions
        (the config records their names)."""
        self._custom: dict[str, Any] = {}
        for key in ("optimizer", "lr_schedule"):
            if callable(overrides.get(key)):
                self._custom[key] = overrides[key]
                overrides[key] = CUSTOM
        terms = overrides.pop("loss_terms", None)
        if terms is None:
            self.loss_terms: list[Any] = []
            return
        terms = list(terms) if isinstance(terms, (list, tuple)) else [terms]
        for fn in terms:
            check(
                callable(fn),
                f"loss_terms has {fn!r} (pass functions fn(activity, batch) -> scalar tensor; "
                "loss terms are Python-only, config files cannot name them)",
            )
        self.loss_terms = terms
        overrides["loss_terms"] = tuple(_callable_name(fn) for fn in terms)

    def _check_callables(self) -> None:
        """Refuse a config that records a Python-only callable that was not passed."""
        cfg, name = self.config, self.algo_name.upper()
        for key in ("optimizer", "lr_schedule"):
            check(
                getattr(cfg, key) != CUSTOM or key in self._custom,
                f"{key}='custom' stands for a function passed in Python, which files do not "
                f"hold (pass it again: snrl.{name}(..., {key}=fn) or snrl.{name}.load(path, "
                f"{key}=fn))",
            )
        check(
            not cfg.loss_terms or bool(self.loss_terms),
            f"this run was trained with loss_terms {list(cfg.loss_terms)}, functions that "
            f"files do not hold (pass them again: snrl.{name}.load(path, loss_terms=[...]))",
        )

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
    @explain_foreign_calls("learn(...)", _FOREIGN_LEARN_KEYWORDS)
    def learn(
        self,
        total_steps: int | None = None,
        *,
        callbacks: Any = None,
        progress: bool = True,
    ) -> dict[str, list]:
        """Train until ``total_steps`` env steps (default ``config.total_steps``).

        One loop for every algorithm, one iteration per metrics row: collect, update (each
        algorithm's own), then the shared schedule: the row, a periodic evaluation, the
        checkpoints, the curriculum and the callbacks (docs/agents.md, "Callbacks").

        Returns the metrics history (column -> list). With a run directory, also appends each
        row to ``metrics.csv``, writes ``checkpoints/last.pt`` every ``checkpoint_interval``
        rows, ``checkpoints/best.pt`` whenever a periodic deterministic evaluation is at
        least as good as the best so far, and ``learning_curve.png`` at the end.

        Runs on the torch thread count of ``config.threads``, with subnormal floats flushed
        to zero unless ``config.flush_denormals`` is False (both restored afterwards); the
        environment variable ``SNRL_MAX_STEPS`` caps ``total_steps``.

        Args:
            total_steps: Env steps to train to (counted over the whole run, resumes included).
            callbacks: A :class:`snrl.callbacks.Callback`, or a list of them. A hook that
                returns ``False`` stops training after the current iteration: its row is
                logged, ``checkpoints/last.pt`` written, and a later ``learn`` (or
                ``--resume``) continues from there.
            progress: A bar on a terminal (tqdm.auto's widget in a notebook), one line every
                10 s or 10 % when stderr is a file or pipe; False for silence.
        """
        total = check_int(
            "total_steps",
            total_steps if total_steps is not None else self.config.total_steps,
            1,
            MAX_TOTAL_STEPS,
        )
        total = capped(total, "SNRL_MAX_STEPS", "total_steps")
        hooks = callback_objects(callbacks)
        with self._runtime():
            if self._envs is None:
                self._start_envs()
            return self._train(total, hooks, progress=bool(progress))

    def _train(self, total: int, callbacks: list[Any], *, progress: bool) -> dict[str, list]:
        """The loop of :meth:`learn`: one iteration (one metrics row) at a time until
        ``total`` env steps or a callback says stop."""
        logger = self._run_logger(total, progress)
        self._callbacks = callbacks
        clock = _EvalClock(self.config.eval_interval, self.env_step)
        t_start = time.perf_counter()
        self._stopping = False
        try:
            self._notify("on_training_start", self)
            while not self._stopping and self.env_step < total:
                self._set_lr(total)
                rollout, returns = self._collect_rollout(total)
                self._notify("on_rollout_end", self)
                entries = self._learn_from(rollout)
                check_parameters(self.agent, env_step=self.env_step)
                self.n_updates += 1
                row = self._metrics_row(returns, entries)
                evaluated = clock.due(self.env_step, total)
                if evaluated:
                    self._evaluate_into(row)
                self._log_row(logger, row, time.perf_counter() - t_start, evaluated=evaluated)
                self._notify("on_update_end", self, logger.last_row)
                if self._stopping and self._last_saved != self.n_updates and self.run_dir:
                    self._checkpoint("last")  # stopped by a callback: resumable from here
        finally:
            logger.close()
        try:
            self._notify("on_training_end", self)
        finally:
            self._callbacks = ()
        return logger.history

    # ---- what each algorithm supplies -------------------------------------------------------
    def _collect_rollout(self, total: int) -> tuple[Any, list[float]]:
        """Collect one iteration's experience (never past ``total`` env steps): what
        :meth:`_learn_from` takes, and the returns of the episodes that ended meanwhile."""
        raise NotImplementedError

    def _learn_from(self, rollout: Any) -> dict[str, Any]:
        """Learn from what :meth:`_collect_rollout` gave, with ``env_step`` counting the env
        steps of the iteration when it returns; returns the algorithm's own entries of the
        metrics row (after ``env_step``, ``episode_return_mean`` and ``episodes``)."""
        raise NotImplementedError

    # ---- optimizer, learning rate and loss terms (docs/agents.md) ----------------------------
    def _make_optimizer(
        self, params: Iterator[nn.Parameter], *, eps: float, fused: bool
    ) -> torch.optim.Optimizer:
        """The optimizer of ``config.optimizer`` (or the callable passed) over the trainable
        ``params``; ``eps`` and ``fused`` are those of ``"adam"`` (:class:`FlatAdam`)."""
        cfg = self.config
        self._trained = [p for p in params if p.requires_grad]
        make = self._custom.get("optimizer")
        if make is None:
            opt = build_optimizer(
                cfg.optimizer,
                self._trained,
                lr=cfg.lr,
                weight_decay=cfg.weight_decay,
                kwargs=cfg.optimizer_kwargs,
                eps=eps,
                fused=fused,
            )
        else:
            opt = make(self._trained)
            check(
                isinstance(opt, torch.optim.Optimizer),
                f"optimizer={make!r} returned {type(opt).__name__} (a callable optimizer must "
                "return a torch.optim.Optimizer over the parameters it is given)",
            )
        self._base_lrs = [g["lr"] for g in opt.param_groups]
        return opt

    def _set_lr(self, total: int) -> None:
        """Set the learning rate of the iteration about to start: each parameter group's
        initial lr times ``lr_schedule``'s multiplier at progress ``env_step / total``."""
        schedule = self._custom.get("lr_schedule", self.config.lr_schedule)
        if schedule == "constant":
            return
        m = lr_multiplier(schedule, self.env_step / total)
        for g, base in zip(self.optimizer.param_groups, self._base_lrs):
            g["lr"] = base * m

    def _clip_grad_norm(self, max_norm: float) -> torch.Tensor:
        """Scale the gradients to a global 2-norm of at most ``max_norm``; the norm before."""
        if isinstance(self.optimizer, FlatAdam):
            return self.optimizer.clip_grad_norm_(max_norm)
        return nn.utils.clip_grad_norm_(self._trained, max_norm)

    def _optimizer_step(self) -> None:
        """One step of the optimizer (:meth:`FlatAdam.update` skips torch's wrapper)."""
        if isinstance(self.optimizer, FlatAdam):
            self.optimizer.update()
        else:
            self.optimizer.step()

    def _extra_loss(self, activity: Any, batch: Any) -> torch.Tensor:
        """The sum of the ``loss_terms`` on this minibatch (each checked to be a scalar
        tensor)."""
        total = None
        for fn in self.loss_terms:
            value = fn(activity, batch)
            if not isinstance(value, torch.Tensor) or value.numel() != 1:
                raise UserError(
                    f"loss term {_callable_name(fn)} returned {type(value).__name__} "
                    f"{getattr(value, 'shape', '')} (a loss term must return a scalar tensor)"
                )
            total = value.reshape(()) if total is None else total + value.reshape(())
        return total

    # ---- the shared schedule ----------------------------------------------------------------
    def _notify(self, hook: str, *args: Any) -> None:
        """Call ``hook`` of every callback of the running ``learn``; when any of them returns
        False, training stops after the current iteration (every callback is called all the
        same)."""
        for cb in self._callbacks:
            fn = getattr(cb, hook, None)
            if fn is not None and fn(*args) is False:
                self._stopping = True

    def _metrics_row(self, returns: list[float], entries: dict[str, Any]) -> dict[str, Any]:
        """The metrics row of the iteration just done: counters, the mean return of the last
        100 episodes, the algorithm's ``entries`` and, on a trial task, the trial columns."""
        self._recent = (self._recent + returns)[-100:]
        row = {
            "env_step": self.env_step,
            "episode_return_mean": float(np.mean(self._recent)) if self._recent else math.nan,
            "episodes": len(returns),
            **entries,
        }
        if self._trials.active:
            tasks = getattr(self._envs, "task_ids", ())  # a multitask env: per-task columns
            row.update(trial_columns(self._trial_log, tasks))
        self._trial_log = []
        return row

    def _evaluate_into(self, row: dict[str, Any]) -> None:
        """The periodic evaluation: its columns into ``row``, then ``on_eval_end``."""
        cfg = self.config
        res = self.evaluate(
            n_episodes=cfg.eval_episodes, seed=cfg.seed + EVAL_SEED_OFFSET, lesson=self.lesson
        )
        row["eval_return_mean"] = res["mean_return"]
        if "accuracy" in res:
            row["eval_trial_accuracy"] = res["accuracy"]
        for task, acc in res.get("accuracy_by_task", {}).items():
            row[f"eval_trial_accuracy/{task}"] = acc
        self._notify("on_eval_end", self, res)

    def _checkpoint(self, name: str) -> None:
        """Write ``checkpoints/<name>.pt`` of the run directory and tell the callbacks."""
        path = self.run_dir / "checkpoints" / f"{name}.pt"
        self.save(path)
        if name == "last":
            self._last_saved = self.n_updates
        self._notify("on_checkpoint", self, path)

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
            tensors_on=self.device if self._want_tensors() else None,
        )
        self._obs, info = self._envs.reset(seed=seed)
        self._tensor_env = isinstance(self._obs, torch.Tensor)
        self._trials = TrialTracker(cfg.n_envs)  # trial tasks: the trials since the last row
        self._trials.reset(info)
        self._trial_log: list[dict] = []
        self._state = self.agent.initial_state(cfg.n_envs, device=self.device)
        self._recent: list[float] = []

    def _step_envs(self, env_action: Any, env_step: int) -> tuple:
        """One step of the vector env on ``env_action``: ``(next_obs, reward, reward32,
        terminated, truncated, done, info)``, the rewards as the env gave them and as float32
        (checked finite; ``env_step`` is the count after this step, for the message), ``done``
        = terminated or truncated; the trials it ended go to the trial log."""
        next_obs, reward, term, trunc, info = self._envs.step(env_action)
        # the trial log keeps each env's actions on the host (tensor actions: one copy)
        acted = env_action.cpu().numpy() if isinstance(env_action, torch.Tensor) else env_action
        self._trial_log += self._trials.step(acted, info)
        if isinstance(reward, torch.Tensor):  # an env on the agent's device (env_tensors)
            reward32, done = reward.to(torch.float32), term | trunc
        else:
            with np.errstate(over="ignore"):  # the overflow is what is checked
                reward32 = np.asarray(reward, dtype=np.float32)
            done = np.logical_or(term, trunc)
        check_finite(
            reward32,
            "reward (as float32)",
            env_step=env_step,
            cause=f"env {self.config.env} returned a reward beyond ±3.4e38; scale the rewards "
            "down, e.g. with gymnasium.wrappers.TransformReward",
        )
        return next_obs, reward, reward32, term, trunc, done, info

    def _want_tensors(self) -> bool:
        """Ask the training env for tensors (:attr:`env_tensors`; None: off the CPU)."""
        if self.env_tensors is None:
            return torch.device(self.device).type != "cpu"
        return bool(self.env_tensors)

    def _env_actions(self, action: Any) -> Any:
        """The agent's actions as the training env takes them: tensors where they are when the
        env hands out tensors (:attr:`env_tensors`), else numpy (:meth:`Agent.env_action`)."""
        if self._tensor_env and isinstance(action, torch.Tensor):
            return self.agent.env_action_tensor(action)
        return self.agent.env_action(action)

    def _on_device(self, *rows: Any) -> list[torch.Tensor]:
        """(B,) rows of one env step (rewards, flags) as float32 tensors on the agent's device:
        tensors moved (no copy where they are), numpy rows stacked into one host -> device copy."""
        if all(isinstance(r, torch.Tensor) for r in rows):
            return [r.to(self.device, torch.float32) for r in rows]
        host = np.empty((len(rows), len(rows[0])), dtype=np.float32)
        for i, r in enumerate(rows):
            host[i] = r.cpu().numpy() if isinstance(r, torch.Tensor) else r
        return list(torch.as_tensor(host, device=self.device).unbind(0))

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

    def eval_env_kwargs(self, n_episodes: int, lesson: int | str | None = None) -> dict[str, Any]:
        """The env options of an evaluation on ``n_episodes`` envs: ``lesson``'s
        (:meth:`lesson_env_kwargs`); on several tasks also the schedule the run's envs
        trained with (:func:`snrl.tasks.multitask.trained_schedule`), so the episodes share
        the tasks as training did, whatever their count."""
        kwargs = self.lesson_env_kwargs(lesson)
        schedule = trained_schedule(self.config.env, self.config.n_envs, n_episodes, kwargs)
        return kwargs if schedule is None else {**kwargs, "schedule": schedule}

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
            self._checkpoint("last")

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
        ``"accuracy_by_condition"`` and ``"trials"`` (docs/neuro.md). Several tasks
        (``snrl.tasks``): the episodes share them by the schedule the run trained with
        (:func:`snrl.tasks.multitask.trained_schedule`), and ``"accuracy_by_task"``. With a
        curriculum, on ``lesson`` (a number or name; None: the final lesson), and the result
        names it (``"lesson"``). ``SNRL_MAX_EPISODES`` caps ``n_episodes``."""
        n_episodes = check_int(
            "n_episodes", n_episodes, 1, MAX_ENVS, "; one env per episode is built at once"
        )
        n_episodes = capped(n_episodes, "SNRL_MAX_EPISODES", "n_episodes")
        seed = check_int("seed", seed, 0, MAX_SEED)
        check(
            isinstance(deterministic, bool),
            f"deterministic={deterministic!r} (pass True or False)",
        )
        env_kwargs = self.eval_env_kwargs(n_episodes, lesson)
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
                    env_kwargs=env_kwargs,
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
                "config": config_to_dict(
                    dataclasses.replace(
                        self.config, loss_terms=tuple(map(_callable_name, self.loss_terms))
                    )
                ),
                "custom_backbones": bool(self.custom_backbones),
                "agent": self.agent.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "counters": self._counters(),
                "rng": rng_state(),  # read by snrl 0.1; snrl never draws from the global RNGs
                "generator": self.generator.get_state(),
                "agent_generator": self.agent.generator.get_state(),
                "extra": self.extra_state()
                | ({} if self.progress is None else {"curriculum": self.progress.to_dict()}),
            },
        )

    def _counters(self) -> dict[str, Any]:
        """The run's counters, as a checkpoint stores them and the run log starts from."""
        return {
            "env_step": int(self.env_step),
            "n_updates": int(self.n_updates),
            "best_eval": float(self.best_eval),
            "wall_time": float(self.wall_time),
        }

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
        optimizer: Any = None,
        lr_schedule: Any = None,
        loss_terms: Any = None,
        device: str | None = None,
    ):
        """Restore an algorithm saved by :meth:`save`; pass ``policy``/``critic`` modules of
        the same architecture when it was built with custom backbones, and the callable
        ``optimizer``, ``lr_schedule`` and ``loss_terms`` it was trained with (files do not
        hold functions). ``run_dir``: continue
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
        python_only = {
            k: v
            for k, v in (
                ("optimizer", optimizer),
                ("lr_schedule", lr_schedule),
                ("loss_terms", loss_terms),
            )
            if v is not None
        }
        algo = cls(obj, config=cfg, policy=policy, critic=critic, run_dir=None, **python_only)
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
            **self._counters(),
            checkpoint_interval=self.config.checkpoint_interval,
            title=run_title(self.algo_name, self.config),
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
                self._checkpoint("best")
            if last_due:
                self._checkpoint("last")
        if promoted:
            self._promote(logger)

    def close(self) -> None:
        """Close the training envs (evaluate/rollout still work)."""
        if self._envs is not None:
            self._envs.close()
            self._envs = None


#: The hooks of a callback (:class:`snrl.callbacks.Callback`), in the order a run calls them.
CALLBACK_HOOKS = (
    "on_training_start",
    "on_rollout_end",
    "on_eval_end",
    "on_checkpoint",
    "on_update_end",
    "on_training_end",
)


def callback_objects(callbacks: Any) -> list[Any]:
    """``learn(callbacks=...)`` as a list: None, one callback, or a list/tuple of them. A
    callback is any object with at least one of :data:`CALLBACK_HOOKS` (the algorithms call
    them by name, so this floor does not import :mod:`snrl.callbacks`)."""
    if callbacks is None:
        return []
    items = list(callbacks) if isinstance(callbacks, (list, tuple)) else [callbacks]
    for cb in items:
        if not any(callable(getattr(cb, h, None)) for h in CALLBACK_HOOKS):
            raise UserError(
                f"callbacks= got {cb!r}, which has none of the hooks {', '.join(CALLBACK_HOOKS)} "
                "(pass snrl.callbacks.Callback objects, e.g. snrl.callbacks.StopOnReward(475))"
            )
    return items


class _EvalClock:
    """When the periodic evaluations of one ``learn`` call are due: after the first row at
    or past each multiple of ``interval`` env steps (0: none), and after the last row."""

    def __init__(self, interval: int, env_step: int) -> None:
        self.interval = interval
        self.next = (env_step // interval + 1) * interval if interval else None

    def due(self, env_step: int, total: int) -> bool:
        """Whether the row at ``env_step`` is evaluated (and the clock moved past it)."""
        if not (self.next is not None and env_step >= self.next or env_step >= total):
            return False
        if self.next is not None:
            while self.next <= env_step:
                self.next += self.interval
        return True


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


def _callable_name(fn: Any) -> str:
    """How a config records a function passed in Python: ``module.qualname``."""
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"{module}.{name}" if module else name


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


def run_title(algo_name: str, cfg: Any) -> str:
    """A run described for its figures: ``"PPO · LIF · Dale 80/20 · 128 neurons · seed 0 ·
    CartPole-v1"`` (an ANN backbone says "units" and no Dale; a shared trunk adds "shared
    trunk" after the width)."""
    backbone = str(cfg.backbone)
    spiking = backbone.lower() in SPIKING
    parts = [algo_name.upper(), backbone.upper()]
    if spiking:
        if cfg.force_dale_law:
            inh = round(100 * float(cfg.recurrent_sign))
            parts.append(f"Dale {100 - inh}/{inh}")
        else:
            parts.append("no Dale")
    parts.append(f"{cfg.hidden_size} {'neurons' if spiking else 'units'}")
    if getattr(cfg, "shared_trunk", False):  # one network for policy and value
        parts.append("shared trunk")
    parts.append(f"seed {cfg.seed}")
    return " · ".join(parts) + f" · {cfg.env}"
