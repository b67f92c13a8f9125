"""Batched trial-structured tasks: ``N`` envs of a NeuroGym task stepped by a few array ops
(numpy views of the tables on the CPU, torch on a GPU), behind gymnasium's ``VectorEnv`` API
(``SAME_STEP`` autoreset); the tables are built in torch.

Tasks are written once as a declarative trial spec (:mod:`snrl.tasks.spec`); the engine
(:mod:`snrl.tasks.engine`) steps them; :mod:`snrl.tasks.native` holds NeuroGym's tasks under
NeuroGym's ids. docs/tasks.md describes the spec, the tasks, where they deviate from NeuroGym
and the speed.

::

    envs = snrl.tasks.make_vector_env("PerceptualDecisionMaking-v0", 1024, seed=0)
    snrl train --env snrl.tasks:PerceptualDecisionMaking-v0      # PPO or DQN on the engine

Importing this module registers the ids with snrl's env maker: ``snrl.tasks:<id>`` makes the
batched vector env where snrl builds vector envs (training, evaluation), and NeuroGym's own env
of the same id where it needs one env (rendering a rollout; that needs neurogym). A bare id
(``--env PerceptualDecisionMaking-v0``) stays NeuroGym's, unchanged.

Several ids joined by commas (``snrl.tasks:PerceptualDecisionMaking-v0,GoNogo-v0``, what
``snrl train --tasks`` records) name one env of interleaved tasks with a rule input
(:mod:`snrl.tasks.multitask`, :func:`make_vector_env` with several ids).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from typing import Any

import gymnasium as gym

from snrl.envs.neurogym import INSTALL_LINE, quiet_metadata
from snrl.errors import UserError
from snrl.tasks.catalog import TASKS
from snrl.tasks.engine import TaskEnv, TaskVectorEnv, default_episode_steps
from snrl.tasks.multitask import (
    DEFAULT_LAYOUT,
    MultiTaskEnv,
    MultiTaskVectorEnv,
    multitask_env_id,
    names_several,
    parse_task_ids,
    resolve_schedule,
)
from snrl.tasks.spec import TaskSpec, build_trials

__all__ = [
    "TASKS",
    "VECTOR_ENV_IDS",
    "MultiTaskEnv",
    "MultiTaskVectorEnv",
    "TaskEnv",
    "TaskSpec",
    "TaskVectorEnv",
    "build_trials",
    "default_episode_steps",
    "make_env",
    "make_spec",
    "make_vector_env",
    "multitask_env_id",
    "parse_task_ids",
]


class _VectorIds(frozenset):
    """The task ids, any comma-joined list of ids and ``yang19`` (a multitask env: its ids
    are checked where it is made, so a wrong one gets :func:`parse_task_ids`'s message)."""

    def __contains__(self, env_id: object) -> bool:
        return frozenset.__contains__(self, env_id) or names_several(env_id)


#: The ids this module builds vector envs for (read by :func:`snrl.envs.make_vector_env`).
VECTOR_ENV_IDS = _VectorIds(TASKS)


def _check_id(env_id: Any) -> str:
    if not isinstance(env_id, str) or env_id not in TASKS:
        import difflib

        close = difflib.get_close_matches(str(env_id), list(TASKS), n=2, cutoff=0.6)
        hint = (
            "did you mean " + " or ".join(close) + "?" if close else "the ids: " + ", ".join(TASKS)
        )
        raise UserError(f"snrl.tasks has no task {env_id!r} ({hint})")
    return env_id


def make_spec(env_id: str, **kwargs: Any) -> TaskSpec:
    """The spec of task ``env_id`` with NeuroGym's keyword arguments (``dt``, ``timing``,
    ``rewards``, ``sigma`` ...).

    Raises:
        UserError: An unknown id or argument, a bad value.
    """
    factory = TASKS[_check_id(env_id)]
    allowed = factory.arguments
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise UserError(
            f"task {env_id} takes no argument {', '.join(unknown)} (its arguments: "
            f"{', '.join(allowed)}, and device)"
        )
    try:
        return factory(**kwargs)
    except UserError:
        raise
    except (TypeError, ValueError, IndexError, KeyError) as e:
        raise UserError(
            f"task {env_id} with arguments {sorted(kwargs)}: {type(e).__name__}: {e} "
            "(check the values)"
        ) from e


def make_vector_env(
    env_id: str | Sequence[str],
    num_envs: int,
    device: str = "cpu",
    seed: int | None = 0,
    *,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    as_tensors: bool = False,
) -> TaskVectorEnv | MultiTaskVectorEnv:
    """``num_envs`` envs of the batched task ``env_id`` as one gymnasium ``VectorEnv``; several
    ids give interleaved tasks with a one-hot rule input, env ``i`` running task ``i % K``
    (:class:`MultiTaskVectorEnv`; :mod:`snrl.tasks.multitask` gives the layout).

    Args:
        env_id: A NeuroGym id of :data:`TASKS` (``"PerceptualDecisionMaking-v0"``), or several:
            comma-separated text or a sequence (:func:`parse_task_ids`).
        num_envs: Number of envs (several tasks: at least one per task).
        device: Torch device of the tables and the step (``env_kwargs["device"]`` overrides).
        seed: Seed of the first reset (task ``k`` of several: ``seed + k``; ``None``: fresh
            entropy).
        env_kwargs: NeuroGym's keyword arguments of the task (given to every task); several
            tasks also take ``schedule`` and ``layout`` (:class:`MultiTaskVectorEnv`).
        max_episode_steps: Steps per episode (``None``: 20 trials of mean length, as snrl
            gives NeuroGym tasks; the longest of these over several tasks).
        as_tensors: Step returns torch tensors on ``device`` instead of numpy arrays.

    Returns:
        The vector env (SAME_STEP autoreset); the caller closes it.

    Raises:
        UserError: Unknown id or argument, a bad value, an unavailable device; several ids
            that repeat, are fewer than two, or run on different clocks.
    """
    kwargs = dict(env_kwargs or {})
    device = kwargs.pop("device", device)
    common = {
        "device": device,
        "seed": seed,
        "max_episode_steps": max_episode_steps,
        "as_tensors": as_tensors,
    }
    if isinstance(env_id, str) and not names_several(env_id):
        return TaskVectorEnv(make_spec(env_id, **kwargs), num_envs, **common)
    schedule, layout = kwargs.pop("schedule", None), kwargs.pop("layout", DEFAULT_LAYOUT)
    specs = [make_spec(i, **kwargs) for i in parse_task_ids(env_id)]
    return MultiTaskVectorEnv(specs, num_envs, schedule=schedule, layout=layout, **common)


def make_env(env_id: str, **kwargs: Any) -> gym.Env:
    """One env of task ``env_id``, where snrl needs a single env (rendering a rollout, reading
    the spaces): NeuroGym's own env of the same id, which the equivalence tests hold to be
    the same task (``tests/tasks``). Options only the engine has (``device``) are dropped.

    A comma-joined list of ids gives :class:`MultiTaskEnv`, and a task NeuroGym lacks
    (EvidenceAccumulation-v0) :class:`TaskEnv`, env 0 of the engine (no NeuroGym needed).
    PerceptualDecisionMaking's ``reaction_time=True`` is NeuroGym's task under its
    ``ReactionTime`` wrapper (what the engine's option equals).

    Raises:
        UserError: neurogym is not installed, or an unknown id.
    """
    if names_several(env_id):
        kwargs.pop("device", None)
        schedule = kwargs.pop("schedule", None)
        episode = kwargs.pop("max_episode_steps", None)
        layout = kwargs.pop("layout", DEFAULT_LAYOUT)
        specs = [make_spec(name, **kwargs) for name in parse_task_ids(env_id)]
        # one env runs the tasks in turn whatever the schedule; its name is checked all the same
        resolve_schedule(schedule, len(specs), len(specs))
        return MultiTaskEnv(specs, max_episode_steps=episode, layout=layout)
    _check_id(env_id)
    kwargs.pop("device", None)
    if not TASKS[env_id].neurogym:
        episode = kwargs.pop("max_episode_steps", None)
        return TaskEnv(make_spec(env_id, **kwargs), max_episode_steps=episode)
    if importlib.util.find_spec("neurogym") is None:
        raise UserError(
            f"snrl.tasks:{env_id} needs NeuroGym's env where one env is made (a rollout, a "
            f"render); install it: {INSTALL_LINE}"
        )
    importlib.import_module("neurogym")
    if kwargs.get("ties") == "second":  # NeuroGym's own tie rule
        kwargs.pop("ties")
    if "ties" in kwargs:
        raise UserError(
            f"ties={kwargs['ties']!r} exists only in the batched engine; one env of "
            f"{env_id} is NeuroGym's (drop ties, or use ties='second')"
        )
    wrapper = None
    if env_id == "PerceptualDecisionMaking-v0" and "reaction_time" in kwargs:
        make_spec(env_id, **kwargs)  # the engine's checks and messages
        if kwargs.pop("reaction_time"):  # NeuroGym's ReactionTime wrapper on the bare task
            from neurogym.wrappers import ReactionTime as wrapper
    with quiet_metadata():
        env = gym.make(env_id, **kwargs)
        return env if wrapper is None else wrapper(env.unwrapped)
