"""What every snrl algorithm (PPO, DQN) shares: config resolution and seeding, the space
check, evaluation, recorded rollouts, checkpoints and closing its envs.

A subclass sets ``Config`` (its frozen config dataclass) and ``algo_name``, builds
``self.agent`` (a :class:`snrl.agents.agent.Agent`) and keeps
``self._envs`` (its training vector env, or None).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from snrl.agents.evaluation import evaluate_agent, record_trajectory
from snrl.envs import check_spaces, make_env
from snrl.errors import UserError
from snrl.networks.factory import BACKBONES, SPIKING, build_backbone
from snrl.training.loop import load_algo_checkpoint, save_algo_checkpoint
from snrl.trajectory import Trajectory


def check(cond: bool, msg: str) -> None:
    """Raise :class:`UserError` with ``msg`` unless ``cond`` (config validation)."""
    if not cond:
        raise UserError(msg)


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """The fields every algorithm's config shares: env, backbone, run bookkeeping."""

    env_id: str = "CartPole-v1"
    """Gymnasium id, or ``module:Class`` for a user's env."""
    backbone: str = "lif"
    """lif | alif | spylif | mlp | gru | lstm."""
    hidden_size: int = 128
    """Neurons / units per hidden layer (of each backbone)."""
    n_layers: int = 1
    """Hidden layers per backbone."""
    force_dale_law: bool = True
    """Hard Dale's law in spiking backbones."""
    recurrent_sign: float = 0.5
    """Fraction of inhibitory neurons with Dale's law. 0.5 keeps the recurrent drive balanced
    at init (equal weight magnitudes for E and I): with 0.2 the net excitation saturates the
    layer (spike rates 0.67-0.78 on CartPole) and PPO learned 2-3x slower."""
    tau_m: float = 10e-3
    """Membrane time constant of spiking layers, seconds."""
    readout_tau_m: float = 10e-3
    """Membrane time constant of the LI readout, seconds."""
    dt: float = 1e-3
    """Simulation step, seconds."""
    hh_init: str = "zeros"
    """Initial hidden state of spiking layers: zeros | random | learned."""
    encoder: str = "direct"
    """Input encoding of spiking backbones: direct | population."""
    sim_steps: int = 1
    """Network steps per env step (spiking backbones)."""
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
    """Seeds torch, numpy, the envs, the layers' generators (and replay/exploration)."""
    device: str = "cpu"
    """Torch device."""

    #: integer fields that must be >= 1 (subclasses extend it)
    positive_ints: ClassVar[tuple[str, ...]] = (
        "hidden_size",
        "n_layers",
        "n_envs",
        "sim_steps",
        "eval_episodes",
        "checkpoint_interval",
        "total_steps",
    )

    def __post_init__(self) -> None:
        check(self.backbone in BACKBONES, f"backbone={self.backbone!r} (one of {BACKBONES})")
        for name in self.positive_ints:
            v = getattr(self, name)
            check(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                f"{name}={v!r} (must be an integer >= 1)",
            )
        check(
            self.tau_m > 0 and self.readout_tau_m > 0 and self.dt > 0,
            "tau_m, readout_tau_m and dt must be > 0 seconds",
        )
        check(
            self.hh_init in ("zeros", "random", "learned"),
            f"hh_init={self.hh_init!r} (zeros | random | learned for agents)",
        )
        check(self.eval_interval >= 0, f"eval_interval={self.eval_interval} (must be >= 0)")

    def build_backbone(self, input_size: int, output_size: int, *, seed: int) -> nn.Module:
        """The backbone these fields describe (:func:`snrl.build_backbone`)."""
        layer_kwargs = None
        if self.backbone in SPIKING:
            layer_kwargs = dict(
                tau_m=self.tau_m,
                dt=self.dt,
                hh_init=self.hh_init,
                recurrent_sign=self.recurrent_sign,
            )
        return build_backbone(
            self.backbone,
            input_size,
            output_size,
            hidden_size=self.hidden_size,
            n_layers=self.n_layers,
            force_dale_law=self.force_dale_law,
            encoder=self.encoder,
            sim_steps=self.sim_steps,
            readout_tau_m=self.readout_tau_m,
            seed=seed,
            layer_kwargs=layer_kwargs,
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

    def _setup(
        self, env: str | None, config: Any, overrides: dict[str, Any]
    ) -> tuple[gym.Space, gym.Space]:
        """Resolve the config (``env`` and keyword overrides replace its fields), seed the
        global RNGs (an algorithm is an entry point), and return the env's checked spaces."""
        cfg = config or self.Config()
        if env is not None:
            overrides["env_id"] = env
        unknown = set(overrides) - {f.name for f in dataclasses.fields(self.Config)}
        if unknown:
            name = self.algo_name.upper()
            raise UserError(
                f"unknown {name} option(s) {sorted(unknown)} (see snrl.{self.Config.__name__})"
            )
        self.config = cfg = dataclasses.replace(cfg, **overrides)
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed)
        self.device = torch.device(cfg.device)
        probe = make_env(cfg.env_id)
        try:
            check_spaces(
                probe.observation_space,
                probe.action_space,
                discrete_actions=self.discrete_actions,
                who=self.algo_name.upper(),
                hint=self.space_hint,
            )
            return probe.observation_space, probe.action_space
        finally:
            probe.close()

    def evaluate(self, n_episodes: int = 20, seed: int = 123, deterministic: bool = True) -> dict:
        """Evaluation on ``n_episodes`` envs (env ``i`` seeded ``seed + i``), deterministic
        actions by default: ``{"mean_return", "std_return", "n_episodes", "returns",
        "mean_length"}``."""
        self.agent.eval()
        try:
            return evaluate_agent(
                self.agent,
                self.config.env_id,
                n_episodes=n_episodes,
                seed=seed,
                deterministic=deterministic,
            )
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
        Gaussian mean/std, or Q-values) always."""
        meta = {
            "algo": self.algo_name,
            "backbone": self.config.backbone,
            "force_dale_law": self.config.force_dale_law,
        }
        return record_trajectory(
            self.agent,
            self.config.env_id,
            seed=seed,
            record=record,
            deterministic=deterministic,
            max_steps=max_steps,
            meta=meta,
        )

    def save(self, path: str | Path) -> None:
        """Write a checkpoint atomically (config, agent, optimizer, counters, RNG states and
        the algorithm's ``extra_state``)."""
        save_algo_checkpoint(self, path)

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        policy: nn.Module | None = None,
        critic: nn.Module | None = None,
        run_dir: str | Path | None = None,
        env: str | None = None,
        trust_env_module: bool = False,
    ):
        """Restore an algorithm saved by :meth:`save`; pass ``policy``/``critic`` modules of
        the same architecture when it was built with custom backbones. ``run_dir``: continue
        training into this run directory (its own, or a new one). A ``module:Class`` env
        named by the file is imported only with ``trust_env_module=True`` or when ``env``
        names the env (it replaces the saved ``env_id``)."""
        return load_algo_checkpoint(
            cls,
            path,
            policy=policy,
            critic=critic,
            run_dir=run_dir,
            env=env,
            trust_env_module=trust_env_module,
        )

    def close(self) -> None:
        """Close the training envs (evaluate/rollout still work)."""
        if self._envs is not None:
            self._envs.close()
            self._envs = None
