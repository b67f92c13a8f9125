"""NeuroGym tasks (Molano-Mazon et al., 2022, "NeuroGym: An open resource for developing and
sharing neuroscience tasks") by their bare ids, and the episode step limits of tasks that
never end.

``import neurogym`` registers its tasks with gymnasium (``PerceptualDecisionMaking-v0`` ...).
:func:`resolve_env_id` does that import when a bare id is not yet registered but is one of
NeuroGym's, so ``snrl train --env GoNogo-v0`` works like ``--env neurogym:GoNogo-v0``; without
neurogym installed it says how to install it.

NeuroGym tasks are streams of trials without an end. Every env snrl builds for training,
evaluation or a rollout has a step limit (:func:`limit_episode_steps`): the config's
``max_episode_steps`` when set, else the env's registered limit, else for a trial task
:data:`TRIALS_PER_EPISODE` trials of its mean length (:func:`default_episode_steps`), else
(evaluation and rollouts only) :data:`EVAL_MAX_EPISODE_STEPS`. The cut is a gymnasium
``TimeLimit`` truncation, which PPO bootstraps from the value of the final observation.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import math
import warnings
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np

from snrl.envs.trials import TrialInfo, is_trial_env
from snrl.errors import UserError

__all__ = [
    "EVAL_MAX_EPISODE_STEPS",
    "INSTALL_LINE",
    "NEUROGYM_TASKS",
    "TRIALS_PER_EPISODE",
    "default_episode_steps",
    "episode_step_limit",
    "limit_episode_steps",
    "quiet_metadata",
    "resolve_env_id",
    "wrap_task",
]


@contextlib.contextmanager
def quiet_metadata() -> Iterator[None]:
    """Make NeuroGym envs inside without gymnasium's warning (in raw ANSI colour codes) that
    their metadata has no ``render_modes``: snrl draws NeuroGym tasks itself (snrl.render),
    so it says nothing a user can act on."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=r".*metadata doesn't include `render_modes`", category=UserWarning
        )
        yield


#: How to install the NeuroGym extra (neurogym 2.3.1 pins gymnasium 0.29 and numpy 2.2, which
#: snrl does not use; its runtime deps come with the extra, the package itself without deps).
INSTALL_LINE = "pip install -e '.[neuro]' && pip install --no-deps neurogym==2.3.1"

#: Trials per episode of a trial task without a step limit of its own.
TRIALS_PER_EPISODE = 20
#: Step limit of evaluation and rollout episodes of an env that has none at all.
EVAL_MAX_EPISODE_STEPS = 10_000

#: The task names of neurogym 2.3.1 (``<name>-v0``), to recognize a bare NeuroGym id when
#: neurogym is not installed (and to avoid importing it for every other id).
NEUROGYM_TASKS = (
    "AnnubesEnv",
    "AntiReach",
    "Bandit",
    "ContextDecisionMaking",
    "DawTwoStep",
    "DelayComparison",
    "DelayMatchCategory",
    "DelayMatchSample",
    "DelayMatchSampleDistractor1D",
    "DelayPairedAssociation",
    "DualDelayMatchSample",
    "EconomicDecisionMaking",
    "GoNogo",
    "HierarchicalReasoning",
    "IntervalDiscrimination",
    "MotorTiming",
    "MultiSensoryIntegration",
    "Null",
    "OneTwoThreeGo",
    "PerceptualDecisionMaking",
    "PerceptualDecisionMakingDelayResponse",
    "PostDecisionWager",
    "ProbabilisticReasoning",
    "PulseDecisionMaking",
    "Reaching1D",
    "Reaching1DWithSelfDistraction",
    "ReachingDelayResponse",
    "ReadySetGo",
    "SpatialSuppressMotion",
    "ToneDetection",
)


def _is_neurogym_id(env_id: str) -> bool:
    name, _, version = env_id.rpartition("-v")
    if not name or not version.isdigit():
        return False
    if name in NEUROGYM_TASKS:
        return True
    # the collections: "yang19.go-v0", "perceptualdecisionmaking.<task>-v0"
    return name.startswith(("yang19.", "perceptualdecisionmaking."))


def resolve_env_id(env_id: str) -> None:
    """Register NeuroGym's tasks when ``env_id`` is a bare NeuroGym id not yet in gymnasium's
    registry (imports neurogym).

    Raises:
        UserError: ``env_id`` is a NeuroGym id and neurogym is not installed (with the install
            line), or importing it fails.
    """
    if env_id in gym.registry or not _is_neurogym_id(env_id):
        return
    if importlib.util.find_spec("neurogym") is None:
        raise UserError(
            f"env {env_id} is a NeuroGym task but neurogym is not installed (install it: "
            f"{INSTALL_LINE})"
        )
    try:
        importlib.import_module("neurogym")
    except Exception as e:
        raise UserError(
            f"importing neurogym for env {env_id} failed: {type(e).__name__}: {e} (reinstall "
            f"it: {INSTALL_LINE})"
        ) from e


def episode_step_limit(env: gym.Env) -> int | None:
    """The step limit of a gymnasium ``TimeLimit`` in ``env``'s wrapper chain (``None``)."""
    e: Any = env
    while isinstance(e, gym.Wrapper):
        if isinstance(e, gym.wrappers.TimeLimit):
            return int(e._max_episode_steps)
        e = e.env
    return None


def default_episode_steps(env: gym.Env, trials: int = TRIALS_PER_EPISODE) -> int | None:
    """Steps of ``trials`` trials of mean length, for a NeuroGym trial task (``None`` for any
    other env). The mean is NeuroGym's ``trial_length_stats`` over 100 trials drawn by a copy
    of the task seeded 0 (exact for fixed timings), so the limit does not depend on the env's
    state."""
    u = env.unwrapped
    stats = getattr(u, "trial_length_stats", None)
    if not callable(stats):
        return None
    try:
        probe = copy.deepcopy(u)
        probe.rng = np.random.RandomState(0)
        for timing in getattr(probe, "timing", {}).values():
            if hasattr(timing, "seed"):
                timing.seed(0)
        mean = float(probe.trial_length_stats(num_trials=100)["mean"])
    except Exception:  # a task whose trials cannot be drawn this way: no default from trials
        return None
    if not math.isfinite(mean) or mean <= 0:
        return None
    return max(1, math.ceil(trials * mean))


def limit_episode_steps(
    env: gym.Env, max_episode_steps: int | None = None, *, fallback: int | None = None
) -> gym.Env:
    """``env`` with a step limit per episode (a ``TimeLimit`` truncation).

    Args:
        env: The env.
        max_episode_steps: The limit to use (replaces an outermost ``TimeLimit``; a deeper
            one, which gymnasium does not put there, can only be shortened). ``None``: the
            env's own limit, else :func:`default_episode_steps` for a trial task, else
            ``fallback``.
        fallback: The limit of an env that has none otherwise (``None``: unlimited).

    Returns:
        The env, wrapped when a limit was added or changed.
    """
    own = episode_step_limit(env)
    if max_episode_steps is not None:
        if own == max_episode_steps:
            return env
        if isinstance(env, gym.wrappers.TimeLimit):
            env = env.env
        return gym.wrappers.TimeLimit(env, max_episode_steps=int(max_episode_steps))
    if own is not None:
        return env
    limit = default_episode_steps(env)
    if limit is None:
        limit = fallback
    if limit is None:
        return env
    return gym.wrappers.TimeLimit(env, max_episode_steps=int(limit))


def wrap_task(
    env: gym.Env, max_episode_steps: int | None = None, *, fallback: int | None = None
) -> gym.Env:
    """The wrappers snrl puts on every env it trains or evaluates on: the step limit
    (:func:`limit_episode_steps`), then, for a trial task, :class:`~snrl.envs.trials.TrialInfo`.
    """
    env = limit_episode_steps(env, max_episode_steps, fallback=fallback)
    return TrialInfo(env) if is_trial_env(env) else env
