"""Hooks into training: :class:`Callback` and the built-ins.

:meth:`snrl.agents.base.Algorithm.learn` runs one loop for every algorithm, one iteration
per metrics row, and calls the hooks of its ``callbacks`` in this order::

    on_training_start(algo)
    per iteration:  collect -> on_rollout_end(algo) -> update
                    -> [periodic evaluation -> on_eval_end(algo, result)]
                    -> the row is logged, checkpoints written -> on_checkpoint(algo, path)
                    -> on_update_end(algo, stats)          # stats: the row as metrics.csv has it
    on_training_end(algo)                                  # after metrics.csv is closed

A hook that returns ``False`` stops training after the current iteration: its row is logged,
``checkpoints/last.pt`` is written, and the run continues from there with ``learn`` on the
same object, ``snrl train --resume`` or ``Algorithm.load(..., run_dir=...)``. Any other
return value (None) goes on. DQN learns while it collects, so its ``on_rollout_end`` comes
after the row's env steps and gradient steps.

``snrl train --callback module:Name`` runs a callback from the command line (docs/agents.md,
"Callbacks"): the module is imported because you named it; a run records the names in
``callbacks.json`` and ``--resume`` imports them again only under the rule of env modules
(:func:`snrl.envs.make.check_env_id_trusted`): named again with ``--callback``, or with
``--trust-env-module``.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from snrl.agents.base import CALLBACK_HOOKS, callback_objects
from snrl.envs.make import check_env_id_trusted
from snrl.errors import UserError, first_line
from snrl.io import load_json, write_json_atomic
from snrl.training.rundir import ACTIVITY_DIR, CALLBACK_FILES, claim_files

__all__ = [
    "CALLBACK_HOOKS",
    "Callback",
    "CallbackList",
    "EveryNSteps",
    "RecordActivity",
    "StopOnReward",
    "load_callbacks",
]


class Callback:
    """Base of training callbacks: override the hooks you need (each does nothing here).

    Every hook gets the algorithm (``algo.env_step``, ``algo.n_updates``, ``algo.agent``,
    ``algo.optimizer``, ``algo.run_dir`` ...); returning ``False`` from any hook stops
    training cleanly after the current iteration.
    """

    def on_training_start(self, algo: Any) -> bool | None:
        """At the start of each ``learn`` call (envs open, before the first iteration)."""

    def on_rollout_end(self, algo: Any) -> bool | None:
        """After an iteration's env steps, before its update."""

    def on_update_end(self, algo: Any, stats: dict[str, Any]) -> bool | None:
        """After an iteration: ``stats`` is its metrics row as ``metrics.csv`` has it
        (``env_step``, ``wall_time``, ``episode_return_mean``, ``eval_return_mean`` (NaN
        when not evaluated), losses, spike rates ...)."""

    def on_eval_end(self, algo: Any, result: dict[str, Any]) -> bool | None:
        """After a periodic evaluation: ``result`` is :meth:`Algorithm.evaluate`'s dict
        (``mean_return``, ``returns``; ``accuracy`` on a trial task)."""

    def on_checkpoint(self, algo: Any, path: Path) -> bool | None:
        """After ``checkpoints/best.pt`` or ``checkpoints/last.pt`` was written."""

    def on_training_end(self, algo: Any) -> bool | None:
        """When ``learn`` returns normally (also after a stop); its return value is ignored."""


class CallbackList(Callback):
    """Several callbacks as one: each hook calls them all in order and returns False when
    any of them did."""

    def __init__(self, callbacks: Iterable[Any]) -> None:
        self.callbacks = callback_objects(list(callbacks))

    def _all(self, hook: str, *args: Any) -> bool:
        go = True
        for cb in self.callbacks:
            fn = getattr(cb, hook, None)
            if fn is not None and fn(*args) is False:
                go = False
        return go

    def on_training_start(self, algo: Any) -> bool:
        return self._all("on_training_start", algo)

    def on_rollout_end(self, algo: Any) -> bool:
        return self._all("on_rollout_end", algo)

    def on_update_end(self, algo: Any, stats: dict[str, Any]) -> bool:
        return self._all("on_update_end", algo, stats)

    def on_eval_end(self, algo: Any, result: dict[str, Any]) -> bool:
        return self._all("on_eval_end", algo, result)

    def on_checkpoint(self, algo: Any, path: Path) -> bool:
        return self._all("on_checkpoint", algo, path)

    def on_training_end(self, algo: Any) -> bool:
        return self._all("on_training_end", algo)


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{name}={value!r} (pass an integer >= 1)")
    return value


class EveryNSteps(Callback):
    """Call ``callback_or_fn`` after the first iteration at or past each multiple of ``n``
    env steps.

    Args:
        n: Env steps between calls.
        callback_or_fn: A function ``fn(algo, stats) -> bool | None`` (``stats``: the metrics
            row), or a :class:`Callback` whose ``on_update_end`` is called then (its other
            hooks are called every time).
    """

    def __init__(self, n: int, callback_or_fn: Callable[..., Any] | Callback) -> None:
        self.n = _positive_int("n", n)
        if hasattr(callback_or_fn, "on_update_end"):
            self.inner = callback_or_fn
            self.fn = callback_or_fn.on_update_end
        elif callable(callback_or_fn):
            self.inner, self.fn = None, callback_or_fn
        else:
            raise UserError(
                f"EveryNSteps got {callback_or_fn!r} (pass a function fn(algo, stats) or a "
                "Callback)"
            )
        self._last = 0

    def _forward(self, hook: str, *args: Any) -> bool | None:
        fn = getattr(self.inner, hook, None)
        return None if fn is None else fn(*args)

    def on_training_start(self, algo: Any) -> bool | None:
        self._last = algo.env_step
        return self._forward("on_training_start", algo)

    def on_rollout_end(self, algo: Any) -> bool | None:
        return self._forward("on_rollout_end", algo)

    def on_eval_end(self, algo: Any, result: dict[str, Any]) -> bool | None:
        return self._forward("on_eval_end", algo, result)

    def on_checkpoint(self, algo: Any, path: Path) -> bool | None:
        return self._forward("on_checkpoint", algo, path)

    def on_training_end(self, algo: Any) -> bool | None:
        return self._forward("on_training_end", algo)

    def on_update_end(self, algo: Any, stats: dict[str, Any]) -> bool | None:
        due = algo.env_step // self.n > self._last // self.n
        self._last = algo.env_step
        return self.fn(algo, stats) if due else None


class StopOnReward(Callback):
    """Stop training when a metrics column reaches ``threshold``.

    Args:
        threshold: The value at or above which training stops.
        metric: The metrics.csv column watched: ``"eval_return_mean"`` (the periodic
            deterministic evaluation, default), ``"eval_trial_accuracy"`` (its trial
            accuracy on a NeuroGym task, in [0, 1]), ``"episode_return_mean"`` (the
            training episodes), or any other column. A row without a value there (NaN: not
            evaluated) never stops.

    After a stop, :attr:`stopped_at` holds the row that reached it (None before).
    """

    def __init__(self, threshold: float, metric: str = "eval_return_mean") -> None:
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
            raise UserError(f"threshold={threshold!r} (pass a number)")
        if not isinstance(metric, str) or not metric:
            raise UserError(f"metric={metric!r} (pass a metrics.csv column name)")
        self.threshold = float(threshold)
        self.metric = metric
        self.stopped_at: dict[str, Any] | None = None

    def on_update_end(self, algo: Any, stats: dict[str, Any]) -> bool | None:
        if self.metric not in stats:
            raise UserError(
                f"StopOnReward(metric={self.metric!r}): this run's metrics rows have no such "
                f"column (choose one of {', '.join(sorted(stats))})"
            )
        value = stats[self.metric]
        if value is None or math.isnan(float(value)) or float(value) < self.threshold:
            return None
        self.stopped_at = dict(stats)
        return False


class RecordActivity(Callback):
    """Record ``episodes`` episodes (network activity, actions, rewards; no frames) after
    every ``every``-th update, into the run directory:
    ``activity/update_<n_updates:06d>_episode_<i>.npz``, each a :class:`snrl.Trajectory`
    (``snrl.Trajectory.load``), written atomically and listed in the run's manifest.

    Args:
        every: Updates (metrics rows) between recordings.
        episodes: Episodes per recording (episode ``i`` is seeded ``seed + i``).
        seed: Seed of the first episode.
        deterministic: The most likely actions (True) or samples.
        max_steps: Env steps per episode at most (None: the episode's own end).
    """

    def __init__(
        self,
        every: int,
        episodes: int = 1,
        *,
        seed: int = 0,
        deterministic: bool = True,
        max_steps: int | None = None,
    ) -> None:
        self.every = _positive_int("every", every)
        self.episodes = _positive_int("episodes", episodes)
        self.seed = seed
        self.deterministic = deterministic
        self.max_steps = max_steps
        self.written: list[Path] = []
        """The files written so far."""

    def on_training_start(self, algo: Any) -> None:
        if algo.run_dir is None:
            raise UserError(
                "RecordActivity writes into the run directory, but this algorithm has none "
                "(build it with run_dir=...)"
            )

    def on_update_end(self, algo: Any, stats: dict[str, Any]) -> None:
        n = algo.n_updates
        if n % self.every:
            return
        names = [f"{ACTIVITY_DIR}/update_{n:06d}_episode_{i}.npz" for i in range(self.episodes)]
        claim_files(algo.run_dir, [f"{ACTIVITY_DIR}/", *names])
        for i, name in enumerate(names):
            traj = algo.rollout(
                seed=self.seed + i,
                record=False,
                deterministic=self.deterministic,
                max_steps=self.max_steps,
            )
            self.written.append(traj.save(algo.run_dir / name))


# ---- callbacks named on the command line (snrl train --callback module:Name) --------------
def _import_callback(name: str) -> Any:
    """The callback ``module:Name`` names: a Callback class (made with no arguments), or an
    object with hooks."""
    module_name, sep, attr = name.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"--callback {name!r} (write it as module:Name, e.g. mycallbacks:Logger)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise UserError(
            f"cannot import module {module_name!r} of callback {name!r}: {e} (check the module "
            "path and that it is importable, e.g. on PYTHONPATH)"
        ) from e
    obj = getattr(module, attr, None)
    if isinstance(obj, type):
        try:
            obj = obj()
        except Exception as e:
            raise UserError(
                f"creating callback {name!r} failed: {type(e).__name__}: {first_line(e)} (its "
                "class must be made without arguments; or name an instance)"
            ) from e
    if obj is None or not any(callable(getattr(obj, h, None)) for h in CALLBACK_HOOKS):
        raise UserError(
            f"{name!r} is not a callback (name a snrl.callbacks.Callback subclass or instance "
            f"in module {module_name!r})"
        )
    return obj


def _recorded(run_dir: Path) -> list[str]:
    path = run_dir / CALLBACK_FILES[0]
    if not path.is_file():
        return []
    try:
        names = load_json(path.read_text(encoding="utf-8"), what=str(path))["callbacks"]
    except (OSError, ValueError, KeyError, TypeError):
        names = None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise UserError(f"{path} is corrupt (delete it, and name the callbacks with --callback)")
    return names


def load_callbacks(
    names: Iterable[str],
    *,
    run_dir: str | Path,
    resume: bool = False,
    trusted: bool = False,
) -> list[Any]:
    """The callbacks of ``snrl train``: those named with ``--callback`` (imported: you named
    them), and on ``resume`` those the run recorded in ``callbacks.json``, which are checked
    first by the rule of env modules (:func:`~snrl.envs.make.check_env_id_trusted`):
    imported only with ``trusted`` (``--trust-env-module``) or when named again. Nothing is
    imported before every check passed. When training starts, the names are recorded in
    the run's ``callbacks.json`` (by a last callback in the list returned).

    Raises:
        UserError: a recorded callback without trust, a name that is not ``module:Name``, a
            module that cannot be imported, an object that is not a callback.
    """
    run_dir = Path(run_dir)
    given = list(dict.fromkeys(names))
    recorded = _recorded(run_dir) if resume else []
    source = f"the run's {run_dir / CALLBACK_FILES[0]}"
    for name in recorded:
        if name not in given:
            check_env_id_trusted(name, source=source, trusted=trusted, what="callback")
    all_names = list(dict.fromkeys([*recorded, *given]))
    for name in all_names:
        if ":" not in name:
            raise UserError(f"--callback {name!r} (write it as module:Name)")
    callbacks = [_import_callback(n) for n in all_names]
    return [*callbacks, _RecordNames(all_names)] if all_names else []


class _RecordNames(Callback):
    """Writes the names of a run's command-line callbacks into its ``callbacks.json``."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def on_training_start(self, algo: Any) -> None:
        if algo.run_dir is None or _recorded(algo.run_dir) == self.names:
            return
        claim_files(algo.run_dir, CALLBACK_FILES)
        write_json_atomic(algo.run_dir / CALLBACK_FILES[0], {"callbacks": self.names})
