"""Building single and vectorized environments.

``make_env`` accepts any registered gymnasium id (``"CartPole-v1"``; a bare NeuroGym id such
as ``"GoNogo-v0"`` imports neurogym first, :mod:`snrl.envs.neurogym`), a gymnasium
``"module:EnvId"`` id (the module is imported first so it can register the id), or
``"module.path:ClassName"`` naming a user's own ``gymnasium.Env`` subclass, which is
instantiated with the keyword arguments. A module may also build vector envs itself: when
it lists ``EnvId`` in ``VECTOR_ENV_IDS``, :func:`make_vector_env` calls its
``make_vector_env`` and :func:`make_env` its ``make_env`` (``snrl.tasks:GoNogo-v0``: the
batched task engine, docs/tasks.md). Such a vector env may hand out torch tensors: when it has
a bool ``as_tensors`` and a torch ``device``, ``make_vector_env(..., tensors_on=device)``
sets ``as_tensors = True`` where ``device`` is the env's own, and its ``obs``, ``reward``,
``terminated`` and ``truncated`` are then tensors there (its infos stay numpy); the agents
ask for that on their device (:attr:`snrl.agents.base.Algorithm.env_tensors`).

Where an env is expected (``make_env``, ``make_vector_env``, ``snrl.PPO(env)``, ...), snrl also
takes Python objects (:func:`env_name` gives the name a config records for them):

* a ``gymnasium.Env`` instance: trained on as it is (one env: ``n_envs`` must be 1);
  :func:`make_env` (used by evaluation and rollouts, which need fresh envs) returns a
  ``copy.deepcopy`` of it, so the instance itself is never reset by an evaluation;
* a factory: a callable returning a ``gymnasium.Env`` (a class, ``functools.partial``, a
  lambda), called once per env with ``env_kwargs`` as keyword arguments;
* a gymnasium vector env (SAME_STEP autoreset), trained on as it is (``n_envs`` is its
  ``num_envs``); fresh envs come from its first ``env_fns``.

``make_vector_env`` returns a gymnasium 1.x vector env in ``SAME_STEP`` autoreset mode:

* ``obs, reward, terminated, truncated, infos = envs.step(actions)``; for a sub-env ``i``
  whose episode ended at this step (``terminated[i] or truncated[i]``), ``obs[i]`` is
  already the first observation of its next episode, and the true last observation of
  the finished episode is ``infos["final_obs"][i]``. ``infos["final_obs"]`` is a numpy
  *object* array of length ``n_envs`` (``None`` where no episode ended) and
  ``infos["_final_obs"]`` its bool mask (True exactly where ``terminated | truncated``).
  Both keys are absent when no sub-env finished at this step. Stack with
  ``np.stack(infos["final_obs"][mask])``.
* Likewise ``infos["final_info"]`` (a dict of batched arrays, with ``infos["_final_info"]``
  as its mask) holds the step info of the finished episodes. Every sub-env is wrapped in
  ``gymnasium.wrappers.RecordEpisodeStatistics``, so ``infos["final_info"]["episode"]``
  has ``"r"`` (return), ``"l"`` (length) and ``"t"`` arrays with the mask
  ``infos["final_info"]["_episode"]``; :func:`finished_episodes` extracts them.
* ``reward`` is float64 (n_envs,), ``terminated``/``truncated`` bool (n_envs,).
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import functools
import importlib
import inspect
import os
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from snrl.envs.neurogym import quiet_metadata, resolve_env_id, wrap_task
from snrl.envs.spaces import flatten_obs_env
from snrl.envs.wrappers import FiniteCheck, SeedOnFirstReset
from snrl.errors import UserError, describe, printable

__all__ = [
    "EnvFactory",
    "check_env_id_trusted",
    "check_env_kwargs",
    "env_factory",
    "env_name",
    "finished_episodes",
    "is_env_object",
    "make_env",
    "make_vector_env",
]


def _suggest(env_id: str) -> str:
    ids = list(gym.registry.keys())
    lowered = {i.lower(): i for i in ids}
    close = difflib.get_close_matches(env_id.lower(), list(lowered), n=3, cutoff=0.6)
    if close:
        return "did you mean " + " or ".join(repr(lowered[c]) for c in close) + "?"
    return "run `python -c 'import gymnasium; gymnasium.pprint_registry()'` to list the ids"


def _install_hint(error: Exception) -> str:
    """How to install what a ``DependencyNotInstalled`` error names."""
    text = str(error).lower()
    if "box2d" in text:
        return "install it with pip install 'snrl[box2d]'"
    if "mujoco" in text:
        return "install it with pip install 'gymnasium[mujoco]'"
    return "install the package named above with pip"


def _kwargs_text(kwargs: dict[str, Any]) -> str:
    """``{'map_name': '99x99'}`` as text for a message, at most 200 characters."""
    return printable(repr(kwargs), 200)


def _neurogym_entry(env_id: str) -> bool:
    """Whether a registered id is one of NeuroGym's tasks (by its entry point's module)."""
    entry = gym.registry[env_id].entry_point
    module = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    return str(module).split(".")[0] == "neurogym"


def _gym_make(env_id: str, render_mode: str | None, kwargs: dict[str, Any]) -> gym.Env:
    if env_id not in gym.registry:
        raise UserError(f"unknown env id {env_id!r} ({_suggest(env_id)})")
    if render_mode is not None:
        kwargs = {**kwargs, "render_mode": render_mode}
    try:
        quiet = quiet_metadata() if _neurogym_entry(env_id) else contextlib.nullcontext()
        with quiet:  # for NeuroGym's ids only
            return gym.make(env_id, **kwargs)
    except gym.error.DependencyNotInstalled as e:
        raise UserError(
            f"env {env_id} needs a package that is not installed: {e} ({_install_hint(e)})"
        ) from e
    except TypeError as e:
        raise UserError(
            f"env {env_id} does not accept the arguments {sorted(kwargs)}: {e} "
            "(check the env's keyword arguments)"
        ) from e
    except UserError:
        raise
    except Exception as e:
        if not kwargs:  # no arguments of the user's: a bug of the env, with its traceback
            raise
        raise UserError(
            f"env {env_id} failed with the arguments {_kwargs_text(kwargs)}: {describe(e)} "
            "(check the values of the env's keyword arguments)"
        ) from e


#: Modules of snrl itself that ``module:EnvId`` ids may name in a file (a run's config, a
#: checkpoint) without ``--trust-env-module``: importing them runs no code the file brought.
OWN_ENV_MODULES = frozenset({"snrl.tasks"})


def check_env_id_trusted(
    env_id: object, *, source: str, trusted: bool = False, what: str = "env"
) -> None:
    """Refuse an env id read from a file (a checkpoint, a run's config) that would import
    a module: only registered gymnasium ids are made from what a file says, because a run
    directory someone sent you can ship the module it names. ``trusted`` (the user asked
    for it: ``--trust-env-module``) lets ``module:Class`` through; snrl's own modules
    (:data:`OWN_ENV_MODULES`: ``snrl.tasks:GoNogo-v0``) always pass.

    The same rule guards every ``module:Name`` a file names: ``what="callback"`` checks a
    callback recorded by ``snrl train --callback`` (:mod:`snrl.callbacks`).

    Args:
        env_id: The env id (or ``module:Name``) the file holds.
        source: What the id was read from, for the message (``"checkpoint run/best.pt"``).
        trusted: The user trusts the file's module.
        what: What the name is: ``"env"`` or ``"callback"`` (the message's words and flag).

    Raises:
        UserError: A ``module:...`` id without ``trusted``, or an id that is not a string.
    """
    if not isinstance(env_id, str) or not env_id.strip():
        raise UserError(
            f"{source} names no {what} ({'env_id' if what == 'env' else what}={env_id!r}; it is "
            "corrupt or not an snrl file)"
        )
    if ":" not in env_id or trusted:
        return
    if what == "env" and env_id.startswith(("http://", "https://")):  # an env server
        from snrl.envs.remote import check_url_trusted

        return check_url_trusted(env_id, source=source)
    module = env_id.partition(":")[0]
    if what == "env" and module in OWN_ENV_MODULES:
        return  # snrl's own code, not the file's
    python = (
        "; in Python: load(..., trust_env_module=True) or load(..., env=...)"
        if what == "env"
        else ""
    )
    raise UserError(
        f"{source} names the {what} {env_id!r}, which would import the module {module!r}; snrl "
        "does not import code named by a file (if you trust that module, pass "
        f"--trust-env-module, or name the {what} yourself with --{what} {env_id}{python})"
    )


# ---- envs passed as Python objects (instances, factories, vector envs) ---------------------
#: How a config names an env that was passed as a Python object without a registered id.
UNNAMED_ENV = "<{what}>"


def is_env_object(env: object) -> bool:
    """Whether ``env`` is an env object (instance, factory, vector env) rather than an id."""
    return not isinstance(env, str) and env is not None


def _registered_id(env: object) -> str | None:
    spec = getattr(env, "spec", None)
    env_id = getattr(spec, "id", None)
    return env_id if isinstance(env_id, str) and env_id in gym.registry else None


def env_name(env: object) -> str:
    """The name a config records for ``env``: an id as given; for an object, its registered
    gymnasium id (``env.spec.id``) when it has one, else ``"<...>"`` describing it, which
    :func:`make_env` refuses (a file cannot rebuild a Python object: pass it again)."""
    if isinstance(env, str):
        return env
    if isinstance(env, (gym.Env, gym.vector.VectorEnv)):
        env_id = _registered_id(env)
        if env_id is not None:
            return env_id
        inner = env.unwrapped if isinstance(env, gym.Env) else env
        kind = "vector env" if isinstance(env, gym.vector.VectorEnv) else "instance"
        return UNNAMED_ENV.format(what=f"{type(inner).__name__} {kind}")
    name = getattr(env, "__qualname__", None) or type(env).__name__
    return UNNAMED_ENV.format(what=f"factory {name}".replace(":", "."))


class EnvFactory:
    """A zero-argument env factory with a name: what snrl passes where an env id goes when
    the user's env is an object (``str(factory)`` is :func:`env_name`)."""

    def __init__(
        self, make: Callable[..., gym.Env], name: str, source: Callable[..., Any] | None = None
    ) -> None:
        self.make = make
        self.name = name
        self.source = source  # the user's callable (None: copies of an instance)

    def __call__(self, **kwargs: Any) -> gym.Env:
        return self.make(**kwargs)

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


def _copy_instance(env: gym.Env, **kwargs: Any) -> gym.Env:
    if kwargs:
        raise UserError(
            f"env_kwargs {sorted(kwargs)} cannot be applied to an env instance (make the env "
            "with them, or pass a factory: lambda **kw: gymnasium.make(ID, **kw))"
        )
    try:
        return copy.deepcopy(env)
    except Exception as e:
        raise UserError(
            f"evaluation and rollouts need fresh envs, and the env instance {env_name(env)} "
            f"cannot be copied ({type(e).__name__}: {e}; pass a factory instead, e.g. "
            "env=lambda: gymnasium.make(ID))"
        ) from None


def env_factory(env: object) -> str | EnvFactory:
    """What builds fresh single envs of ``env``: an id as given; a factory for an object
    (an instance is deep-copied, a vector env's first ``env_fns`` is called).

    Raises:
        UserError: A vector env that does not say how its envs are made (no ``env_fns``)
            and has no registered id.
    """
    if isinstance(env, str):
        return env
    name = env_name(env)
    if isinstance(env, gym.vector.VectorEnv):
        fns = getattr(env, "env_fns", None)
        if fns:
            return EnvFactory(lambda **kw: _call_factory(fns[0], name, kw), name, fns[0])
        env_id = _registered_id(env)
        if env_id is not None:
            return env_id
        raise UserError(
            f"evaluation and rollouts need fresh single envs, and the vector env {name} does "
            "not say how it makes them (no env_fns; pass a SyncVectorEnv/AsyncVectorEnv, or a "
            "factory for the envs)"
        )
    if isinstance(env, gym.Env):
        return EnvFactory(functools.partial(_copy_instance, env), name)
    if callable(env):
        return EnvFactory(lambda **kw: _call_factory(env, name, kw), name, env)
    raise _not_an_env(env)


def _not_an_env(env: object) -> UserError:
    return UserError(
        f"env={env!r} is a {type(env).__name__} (pass a gymnasium id such as 'CartPole-v1', a "
        "gymnasium.Env instance, a factory returning one, or a gymnasium vector env)"
    )


def _call_factory(make: Callable[..., Any], name: str, kwargs: dict[str, Any]) -> gym.Env:
    try:
        env = make(**kwargs)
    except UserError:
        raise
    except Exception as e:
        raise UserError(
            f"the env factory {name} failed with arguments {sorted(kwargs)}: "
            f"{type(e).__name__}: {e} (fix the factory or env_kwargs)"
        ) from e
    if not isinstance(env, gym.Env):
        raise UserError(
            f"the env factory {name} returned a {type(env).__name__}, not a gymnasium.Env "
            "(return a single env, e.g. lambda: gymnasium.make(ID))"
        )
    return env


def _object_env(env: object, render_mode: str | None, kwargs: dict[str, Any]) -> gym.Env:
    """:func:`make_env` for an object: a copy of an instance, a factory's new env."""
    if isinstance(env, gym.vector.VectorEnv):
        fresh = env_factory(env)
        if isinstance(fresh, str):
            return make_env(fresh, render_mode=render_mode, **kwargs)
        return fresh(**kwargs)
    if isinstance(env, gym.Env):
        return _copy_instance(env, **kwargs)
    if not callable(env):
        raise _not_an_env(env)
    make = env.source if isinstance(env, EnvFactory) else env
    if render_mode is not None and make is not None and _takes_keyword(make, "render_mode"):
        kwargs = {**kwargs, "render_mode": render_mode}
    if isinstance(env, EnvFactory):
        return env(**kwargs)
    return _call_factory(env, env_name(env), kwargs)


def _takes_keyword(fn: Callable[..., Any], name: str) -> bool:
    """Whether ``fn`` accepts the keyword argument ``name`` (a factory and ``render_mode``)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def _unnamed_env_error(env_id: str) -> UserError:
    return UserError(
        f"env {env_id} was a Python object passed to snrl, which a file cannot rebuild (pass "
        "the env again: snrl.load(path, env=...), or name a registered id with --env ID)"
    )


def check_env_kwargs(kwargs: Any, where: str = "env_kwargs") -> None:
    """Refuse env options that snrl sets itself: ``render_mode`` (``"rgb_array"`` where it
    records frames, for ``snrl render`` and ``rollout(record=True)``; none while training
    and evaluating, where a window would only slow the run down).

    Args:
        kwargs: The env options (``env_kwargs``, a lesson's ``env_kwargs``).
        where: How the message names them.

    Raises:
        UserError: Naming the option and why.
    """
    if isinstance(kwargs, dict) and "render_mode" in kwargs:
        raise UserError(
            f"{where} sets render_mode={kwargs['render_mode']!r}, which snrl sets itself "
            "(rgb_array where it records frames: snrl render, rollout(record=True); none "
            "while training; drop render_mode)"
        )


def make_env(env_id: Any, *, render_mode: str | None = None, **kwargs: Any) -> gym.Env:
    """Create one environment (see :func:`_make_env`), its ``Dict`` or ``Tuple``
    observations flattened into one ``Box`` vector (:func:`snrl.envs.spaces.flatten_obs_env`:
    as Stable-Baselines3's ``MultiInputPolicy`` takes them, key by key)."""
    return flatten_obs_env(_make_env(env_id, render_mode=render_mode, **kwargs))


def _make_env(env_id: Any, *, render_mode: str | None = None, **kwargs: Any) -> gym.Env:
    """Create one environment.

    Args:
        env_id: A registered gymnasium id, ``"module:EnvId"``, ``"module.path:ClassName"``, or
            an env object (see the module docstring: an instance is copied, a factory called).
        render_mode: Passed to the env (``"rgb_array"`` for videos); omitted when None (and
            for env objects, which decide their own render mode).
        **kwargs: Keyword arguments for the env.

    Returns:
        The environment.

    Raises:
        UserError: Unknown id (with close matches), a module that cannot be imported, a
            missing or non-Env class, a constructor that fails, a missing dependency.
    """
    if render_mode == "rgb_array":
        # Off-screen rendering needs no display; without this, pygame's SDL prints
        # "error: XDG_RUNTIME_DIR is invalid" on headless machines.
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    if is_env_object(env_id):
        return _object_env(env_id, render_mode, kwargs)
    if isinstance(env_id, str) and env_id.startswith("<"):
        raise _unnamed_env_error(env_id)
    if not isinstance(env_id, str) or not env_id.strip():
        raise UserError(
            f"env id must be a non-empty string, got {env_id!r} (pass e.g. CartPole-v1)"
        )
    if env_id.startswith(("http://", "https://")):  # an env server (snrl.envs.remote)
        from snrl.envs.remote import RemoteEnv

        return RemoteEnv(env_id, **kwargs)
    if ":" not in env_id:
        resolve_env_id(env_id)  # a bare NeuroGym id: import neurogym so it registers its tasks
        return _gym_make(env_id, render_mode, kwargs)

    module, attr = _env_module(env_id)
    module_name = env_id.partition(":")[0]
    if attr in (getattr(module, "VECTOR_ENV_IDS", None) or ()):
        # a module of batched envs (snrl.tasks): its own single env of the id
        return module.make_env(attr, **kwargs)
    obj = getattr(module, attr, None)
    if obj is None:
        if attr in gym.registry:  # gymnasium's own "module:EnvId" form
            return _gym_make(attr, render_mode, kwargs)
        raise UserError(
            f"module {module_name!r} has no class {attr!r} and {attr!r} is not a registered "
            f"env id (use 'module.path:ClassName' with a gymnasium.Env subclass)"
        )
    if not (isinstance(obj, type) and issubclass(obj, gym.Env)):
        raise UserError(
            f"{env_id!r} is {type(obj).__name__} {obj!r}, not a gymnasium.Env subclass "
            "(use 'module.path:ClassName' naming a gymnasium.Env subclass)"
        )
    modes = (getattr(obj, "metadata", None) or {}).get("render_modes") or []
    if render_mode is not None and render_mode in modes:
        # a class that declares no such mode (gymnasium's metadata["render_modes"]) draws
        # nothing: it is made without render_mode, and the renderer draws the task instead
        kwargs = {**kwargs, "render_mode": render_mode}
    try:
        env = obj(**kwargs)
    except Exception as e:
        raise UserError(
            f"creating env {env_id!r} with arguments {sorted(kwargs)} failed: "
            f"{type(e).__name__}: {e} (fix the env class or its arguments)"
        ) from e
    return env


def _make_wrapped(
    env_id: Any,
    index: int,
    seed: int | None,
    render_mode: str | None,
    kwargs: dict[str, Any],
    max_episode_steps: int | None = None,
    fallback_episode_steps: int | None = None,
) -> gym.Env:
    if isinstance(env_id, gym.Env):  # the user's instance itself (n_envs == 1), not a copy
        env = env_id
    else:
        env = make_env(env_id, render_mode=render_mode, **kwargs)
    env = wrap_task(env, max_episode_steps, fallback=fallback_episode_steps)
    env = FiniteCheck(env, env_id=env_name(env_id), index=index)
    env = gym.wrappers.RecordEpisodeStatistics(env)
    return SeedOnFirstReset(env, seed=seed)


def make_vector_env(
    env_id: str,
    n_envs: int,
    *,
    seed: int | None,
    asynchronous: bool = False,
    render_mode: str | None = None,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    fallback_episode_steps: int | None = None,
    tensors_on: torch.device | str | None = None,
) -> gym.vector.VectorEnv:
    """Create ``n_envs`` copies of an env behind one gymnasium vector env (SAME_STEP autoreset).

    An env instance is used itself (``n_envs`` must be 1); a vector env is returned as it is
    (checked: SAME_STEP autoreset, ``n_envs`` envs), wrapped in gymnasium's vector
    ``RecordEpisodeStatistics`` so :func:`finished_episodes` sees its episodes.

    Each sub-env ``i`` is wrapped (inner to outer) in :class:`FiniteCheck`,
    ``RecordEpisodeStatistics`` and :class:`SeedOnFirstReset` with seed ``seed + i``: its
    first reset without an explicit seed uses ``seed + i`` and its action space is seeded
    with ``seed + i``, so ``envs.reset()`` and ``envs.reset(seed=seed)`` give the same start.
    See the module docstring for the exact ``step`` contract.

    Args:
        env_id: As for :func:`make_env`, or a vector env.
        n_envs: Number of sub-envs (>= 1).
        seed: Base seed; ``None`` for unseeded.
        asynchronous: Use ``AsyncVectorEnv`` (one process per sub-env) instead of
            ``SyncVectorEnv``.
        render_mode: Passed to every sub-env.
        env_kwargs: Keyword arguments for every sub-env.
        max_episode_steps: Step limit per episode (``None``: the env's own, else a NeuroGym
            task's default, else ``fallback_episode_steps``); see
            :func:`snrl.envs.neurogym.limit_episode_steps`. Trial tasks also get
            :class:`snrl.envs.trials.TrialInfo`.
        fallback_episode_steps: Step limit of an env that has none otherwise.
        tensors_on: A device: a batched env (``module:EnvId``) that can hand out torch tensors
            and runs on this device does (``as_tensors``; see the module docstring); any other
            env is made as without it. ``None``: numpy from every env.

    Returns:
        The vector env. The caller closes it.

    Raises:
        UserError: Bad ``n_envs``, any :func:`make_env` error.
    """
    if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
        raise UserError(f"n_envs must be an integer >= 1, got {n_envs!r} (pass e.g. --n-envs 8)")
    kwargs = dict(env_kwargs or {})
    check_env_kwargs(kwargs)
    if isinstance(env_id, gym.vector.VectorEnv):
        return _user_vector_env(env_id, n_envs, seed=seed, kwargs=kwargs)
    if isinstance(env_id, gym.Env) and n_envs != 1:
        raise UserError(
            f"n_envs={n_envs} but an env instance is one env, and snrl does not copy the env it "
            "trains on (pass n_envs=1, or a factory that makes each env, e.g. "
            "env=lambda: gymnasium.make(ID))"
        )
    if isinstance(env_id, gym.Env) and asynchronous:
        raise UserError(
            "asynchronous=true with an env instance would train on a copy in another process "
            "(pass a factory to run envs in processes, or asynchronous=false)"
        )
    if isinstance(env_id, gym.Env) and kwargs:
        raise UserError(
            f"env_kwargs {sorted(kwargs)} cannot be applied to an env instance (make the env "
            "with them, or pass a factory)"
        )
    batched = _batched_vector_env(env_id, n_envs, seed, render_mode, kwargs, max_episode_steps)
    if batched is not None:
        if tensors_on is not None:
            _hand_out_tensors(batched, torch.device(tensors_on))
        return batched
    if asynchronous:
        # Build one env in this process first, so that construction errors surface as
        # UserError here rather than from a worker process.
        make_env(env_id, **kwargs).close()
    fns = [
        functools.partial(
            _make_wrapped,
            env_id,
            i,
            None if seed is None else seed + i,
            render_mode,
            kwargs,
            max_episode_steps,
            fallback_episode_steps,
        )
        for i in range(n_envs)
    ]
    mode = gym.vector.AutoresetMode.SAME_STEP
    if asynchronous:
        envs: gym.vector.VectorEnv = gym.vector.AsyncVectorEnv(fns, autoreset_mode=mode)
    elif isinstance(env_id, str) and env_id.startswith(("http://", "https://")):
        # one request steps all sub-envs
        from snrl.envs.remote import RemoteVectorEnv

        envs = RemoteVectorEnv(fns, autoreset_mode=mode)
    else:
        envs = gym.vector.SyncVectorEnv(fns, autoreset_mode=mode)
    if seed is not None:
        envs.action_space.seed(seed)
    return envs


def _env_module(env_id: str) -> tuple[Any, str]:
    """The imported module and the name after the colon of a ``module:Name`` env id; an
    import that fails is a :class:`UserError` naming the module and the reason."""
    module_name, _, attr = env_id.partition(":")
    try:
        return importlib.import_module(module_name), attr
    except ImportError as e:
        raise UserError(
            f"cannot import module {module_name!r} of env {env_id!r}: {e} "
            "(check the module path and that it is importable, e.g. on PYTHONPATH)"
        ) from e
    except Exception as e:
        raise UserError(
            f"importing module {module_name!r} of env {env_id!r} failed: "
            f"{type(e).__name__}: {e} (fix the module)"
        ) from e


def _batched_vector_env(
    env_id: Any,
    n_envs: int,
    seed: int | None,
    render_mode: str | None,
    kwargs: dict[str, Any],
    max_episode_steps: int | None,
) -> gym.vector.VectorEnv | None:
    """The vector env of a ``module:EnvId`` whose module builds vector envs itself: it lists
    ``EnvId`` in ``VECTOR_ENV_IDS`` and defines ``make_vector_env(env_id, num_envs, *, seed,
    env_kwargs, max_episode_steps)`` returning a SAME_STEP vector env that records its
    episodes (``final_info["episode"]``) — :mod:`snrl.tasks`. ``None`` for any other env, or
    when frames are recorded (``render_mode``: single envs then)."""
    if not isinstance(env_id, str) or ":" not in env_id or render_mode is not None:
        return None
    if env_id.startswith(("http://", "https://")):
        return None
    module, attr = _env_module(env_id)
    if attr not in (getattr(module, "VECTOR_ENV_IDS", None) or ()):
        return None
    return module.make_vector_env(
        attr, n_envs, seed=seed, env_kwargs=kwargs, max_episode_steps=max_episode_steps
    )


def _hand_out_tensors(envs: gym.vector.VectorEnv, device: torch.device) -> None:
    """Switch a batched env that can hand out torch tensors (a bool ``as_tensors``, a torch
    ``device``) to tensors when it runs on ``device`` (snrl.tasks' engine: its step already
    computes there, so its outputs stay there: no numpy round trip)."""
    own = getattr(envs, "device", None)
    if not isinstance(getattr(envs, "as_tensors", None), bool) or not isinstance(own, torch.device):
        return
    if own.type == device.type and (own.index or 0) == (device.index or 0):
        envs.as_tensors = True


def _user_vector_env(
    envs: gym.vector.VectorEnv, n_envs: int, *, seed: int | None, kwargs: dict[str, Any]
) -> gym.vector.VectorEnv:
    """A user's vector env, checked, with episode statistics recorded."""
    name = env_name(envs)
    if kwargs:
        raise UserError(
            f"env_kwargs {sorted(kwargs)} cannot be applied to the vector env {name} (make "
            "its envs with them)"
        )
    if envs.num_envs != n_envs:
        raise UserError(
            f"n_envs={n_envs} but the vector env {name} has {envs.num_envs} envs (leave n_envs "
            "unset, or pass the same number)"
        )
    mode = envs.metadata.get("autoreset_mode")
    if mode != gym.vector.AutoresetMode.SAME_STEP:
        raise UserError(
            f"the vector env {name} resets finished envs in mode {getattr(mode, 'name', mode)}, "
            "snrl needs SAME_STEP (its final observations bootstrap truncated episodes; e.g. "
            "gymnasium.make_vec(ID, n, vectorization_mode='sync', vector_kwargs="
            "{'autoreset_mode': gymnasium.vector.AutoresetMode.SAME_STEP}))"
        )
    if seed is not None:
        envs.action_space.seed(seed)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def finished_episodes(infos: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns and lengths of the episodes that ended at this ``step`` of a vector env.

    Args:
        infos: The info dict returned by ``step`` of an env from :func:`make_vector_env`.

    Returns:
        ``(env_indices, returns, lengths)``: int64 (K,), float64 (K,), int64 (K,) for the
        K sub-envs whose episode ended at this step (K may be 0).
    """
    final = infos.get("final_info", {})
    if "_episode" not in final and "_episode" in infos:
        final = infos  # a user's vector env: gymnasium's vector RecordEpisodeStatistics
    mask = np.asarray(final.get("_episode", np.zeros(0, dtype=bool)), dtype=bool)
    if not mask.any():
        empty = np.zeros(0, dtype=np.int64)
        return empty, np.zeros(0, dtype=np.float64), empty
    episode = final["episode"]
    idx = np.flatnonzero(mask)
    returns = np.asarray(episode["r"], dtype=np.float64)[idx]
    lengths = np.asarray(episode["l"], dtype=np.int64)[idx]
    return idx.astype(np.int64), returns, lengths
