"""Trials of trial-structured tasks (NeuroGym): what each finished trial was and what the
agent did.

A NeuroGym task never ends by itself: an episode is a stream of trials. Its step ``info``
has ``new_trial`` (True at the last step of a trial), ``gt`` (the ground-truth action of the
step) and, on ``new_trial`` steps, ``performance``. Two pieces turn that stream into a trial
log:

* :class:`TrialInfo`, a wrapper applied to every env whose ``unwrapped`` is a NeuroGym
  ``TrialEnv`` (see :func:`is_trial_env`), adds the facts the stream lacks: at reset and on
  every ``new_trial`` step ``info["trial_start"]`` describes the trial that starts with the
  *next* step (``{"conditions", "t0", "dt", "fixation"}``), and on every ``new_trial`` step
  ``info["trial_periods"]`` holds the period boundaries of the trial that just ended.
* :class:`TrialTracker`, a pure class, consumes those infos (of one env, or the batched infos
  of a gymnasium vector env in SAME_STEP autoreset mode) with the actions taken, and returns
  the completed trials as plain dicts (:data:`TRIAL_KEYS`). Training metrics, evaluation and
  recorded rollouts all use it.

Times are in seconds, measured within the trial (NeuroGym's ``env.unwrapped.t``, ms, / 1000).
The step that acts at trial time ``t`` is in period ``p`` when ``start <= t < end`` (NeuroGym's
``in_period``). NeuroGym's ``reset`` takes one step itself (with a random action), so the first
trial of an episode starts for the agent at ``t0 = dt``, later ones at ``t0 = 0``.

A trial's record:

``choice``
    the first non-fixation action taken in the ``decision`` period (the ``production`` period
    of an interval-production task such as ReadySetGo, which has no ``decision`` period); when
    there is none, the last action of the trial (the fixation action when the agent never
    responded).
``gt``
    the ground-truth action of the step of the choice (of the last step without one).
``correct``
    ``choice == gt`` when the trial has a ``decision`` period and a ground truth; otherwise
    the env's ``performance > 0``. (NeuroGym 2.3.1 reports ``performance`` 0 for a GoNogo
    no-go trial that the agent rightly withheld: ``TrialEnv.step`` zeroes ``performance`` after
    ``_new_trial`` set it; ``correct`` does not inherit that.)
``fixation_break``
    whether the agent left fixation while told to hold it: a non-fixation action before the
    ``decision`` (``production``) period at a step whose observation shows the fixation cue
    (NeuroGym's channel ``fixation``; the caller passes it to :meth:`TrialTracker.step` as
    ``cue``). NeuroGym's tasks (and :mod:`snrl.tasks`) pay such a response ``abort`` and let
    the trial go on, so ``correct`` ignores it; Yang et al. (2019) count a trial only if the
    network fixated as long as the cue was on, which :func:`summarize_trials` reports as
    ``accuracy_fixation_held``. ``None`` without the cue, a fixation action or a response
    period (DualDelayMatchSample answers in its test periods with the cue on).
``reaction_time``
    for tasks that allow a response during the stimulus (the ``decision`` period starts before
    the ``stimulus`` period ends, e.g. NeuroGym's ``ReactionTime`` wrapper): seconds from the
    stimulus onset to the choice; ``None`` for fixed-timing tasks or without a choice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

__all__ = [
    "TRIAL_KEYS",
    "TrialInfo",
    "TrialTracker",
    "accuracy_by_condition",
    "accuracy_by_task",
    "fixation_channel",
    "ground_truth",
    "is_trial_env",
    "space_names",
    "summarize_trials",
    "unbatch_info",
]

#: The keys of every trial record the tracker emits.
TRIAL_KEYS = (
    "env",
    "index",
    "start_step",
    "end_step",
    "n_steps",
    "t0",
    "choice",
    "gt",
    "correct",
    "fixation_break",
    "performance",
    "decision_time",
    "reaction_time",
    "conditions",
    "periods",
)

_MAX_CONDITION_SIZE = 8  # array conditions larger than this are dropped from the log


def is_trial_env(env: gym.Env) -> bool:
    """Whether ``env`` (or the env it wraps) is a NeuroGym ``TrialEnv``-like task: it has a
    time step ``dt``, period boundaries ``start_t``/``end_t``, a ``trial`` dict and
    ``new_trial``. Duck-typed, so neurogym need not be imported."""
    u = env.unwrapped
    return all(hasattr(u, a) for a in ("dt", "start_t", "end_t", "trial", "t")) and callable(
        getattr(u, "new_trial", None)
    )


def _plain(value: Any) -> Any:
    """A JSON-able copy of a condition value (numpy scalars and small arrays to Python);
    ``None`` marks a value to drop (large arrays, objects)."""
    if isinstance(value, np.generic):  # before float: np.float64 is a float
        return value.item()
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.ndarray):
        return value.tolist() if value.size <= _MAX_CONDITION_SIZE else None
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return items if len(items) <= _MAX_CONDITION_SIZE and None not in items else None
    return None


def clean_conditions(trial: Mapping[str, Any] | None) -> dict[str, Any]:
    """A trial's conditions without bulky arrays or objects, as JSON-able values."""
    out: dict[str, Any] = {}
    for k, v in (trial or {}).items():
        p = _plain(v)
        if p is not None:
            out[str(k)] = p
    return out


def _index_names(mapping: Any, n: int) -> list[str] | None:
    """Per-index names from a NeuroGym name mapping (``{"fixation": 0, "stimulus": [1, 2]}``
    gives ``["fixation", "stimulus 1", "stimulus 2"]``); None unless it names each of the
    ``n`` indices exactly once."""
    if not isinstance(mapping, Mapping) or n <= 0:
        return None
    out: list[str | None] = [None] * n
    for name, where in mapping.items():
        idx = list(where) if isinstance(where, (list, tuple, range, np.ndarray)) else [where]
        for j, i in enumerate(idx):
            if not isinstance(i, (int, np.integer)) or isinstance(i, bool) or not 0 <= i < n:
                return None
            if out[int(i)] is not None:
                return None
            out[int(i)] = str(name) if len(idx) == 1 else f"{name} {j + 1}"
    return None if any(x is None for x in out) else [str(x) for x in out]


def space_names(env: gym.Env) -> dict[str, list[str]]:
    """NeuroGym's names of the observation channels and actions of ``env``, as
    ``{"obs_names": [...], "action_names": [...]}`` (each present only when the env names
    every channel / action: ``ob_dict`` / ``act_dict`` of older NeuroGym, else the spaces'
    ``name`` mappings of NeuroGym 2); empty for other envs."""
    u = getattr(env, "unwrapped", env)
    out: dict[str, list[str]] = {}
    for key, attr, space in (("obs_names", "ob_dict", u.observation_space),
                             ("action_names", "act_dict", u.action_space)):  # fmt: skip
        mapping = getattr(u, attr, None)
        if not isinstance(mapping, Mapping):
            mapping = getattr(space, "name", None)
        if key == "obs_names":
            shape = getattr(space, "shape", None) or ()
            n = int(np.prod(shape)) if len(shape) == 1 else 0
        else:
            n = int(getattr(space, "n", 0) or 0)
        names = _index_names(mapping, n)
        if names is not None:
            out[key] = names
    return out


def fixation_channel(env: Any) -> int | None:
    """The observation channel of a trial task's (vector) env that shows the fixation cue:
    the batched tasks' ``fixation_channel`` (:mod:`snrl.tasks`), else NeuroGym's channel named
    ``fixation`` (its tasks' channel 0); None when the env names none. The cue is on where
    the env's own (not normalized) observation is above 0.5 on it."""
    channel = getattr(env, "fixation_channel", None)
    if channel is None:
        subs = getattr(env, "envs", None)  # gymnasium's SyncVectorEnv: its first env's names
        names = space_names(subs[0] if subs else env).get("obs_names") or []
        channel = names.index("fixation") if "fixation" in names else None
    return channel


def _fixation_action(env: gym.Env) -> int | None:
    names = getattr(env.unwrapped.action_space, "name", None)
    if isinstance(names, Mapping) and isinstance(names.get("fixation"), (int, np.integer)):
        return int(names["fixation"])
    return None


class TrialInfo(gym.Wrapper):
    """Add ``trial_start`` (at reset and on ``new_trial`` steps: the trial starting with the
    next step) and ``trial_periods`` (on ``new_trial`` steps: the ended trial's period
    boundaries, s) to the infos of a NeuroGym task. See the module docstring.

    Args:
        env: A task for which :func:`is_trial_env` holds.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        u = env.unwrapped
        self._dt = float(u.dt) / 1000.0
        self._fixation = _fixation_action(env)
        self._periods: dict[str, list[float]] = {}

    def _snapshot_periods(self) -> dict[str, list[float]]:
        u = self.env.unwrapped
        return {
            str(k): [float(u.start_t[k]) / 1000.0, float(u.end_t[k]) / 1000.0]
            for k in u.start_t
            if k in u.end_t
        }

    def _start(self) -> dict[str, Any]:
        u = self.env.unwrapped
        return {
            "conditions": clean_conditions(u.trial),
            "t0": float(u.t) / 1000.0,
            "dt": self._dt,
            "fixation": -1 if self._fixation is None else self._fixation,
        }

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        """Reset; a ``seed`` also seeds the task's own generator (NeuroGym draws its trials
        from ``env.unwrapped.rng``, which gymnasium's ``reset(seed=...)`` does not touch)."""
        seed = kwargs.get("seed")
        task_seed = getattr(self.env.unwrapped, "seed", None)
        if seed is not None and callable(task_seed):
            task_seed(seed)
        obs, info = self.env.reset(**kwargs)
        return obs, {**info, "trial_start": self._start()}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:  # noqa: D102
        # The periods of the running trial, read before the step (a wrapper such as
        # NeuroGym's ReactionTime moves them at the trial's first step; after the last step
        # the env already holds the next trial's).
        periods = self._snapshot_periods()
        obs, reward, terminated, truncated, info = self.env.step(action)
        if info.get("new_trial"):
            info = {**info, "trial_periods": periods, "trial_start": self._start()}
        return obs, reward, terminated, truncated, info


def unbatch_info(infos: Mapping[str, Any], i: int) -> dict[str, Any]:
    """The info of sub-env ``i`` from the batched infos of a gymnasium vector env (keys with a
    ``_key`` mask that is False for ``i`` are left out; nested dicts are unbatched too)."""
    out: dict[str, Any] = {}
    for k, v in infos.items():
        if k.startswith("_"):
            continue
        mask = infos.get("_" + k)
        if mask is not None and not bool(np.asarray(mask)[i]):
            continue
        if isinstance(v, Mapping):
            out[k] = unbatch_info(v, i)
        else:
            try:
                out[k] = v[i]
            except (TypeError, IndexError, KeyError):
                continue
    return out


def ground_truth(infos: Mapping[str, Any], n_envs: int) -> np.ndarray | None:
    """Each env's ground-truth action at the step these batched ``infos`` followed (the
    ``gt`` a trial task gives, masked by ``_gt`` where some envs lack it; for an env whose
    episode ended there, the ``gt`` of its ``final_info``): ``(n_envs,)`` int64, -1 where an
    env gave none or one that is not a whole number; None when no env gave one."""
    out = _gt_row(infos, n_envs)
    ended = np.asarray(infos.get("_final_info", np.zeros(n_envs, bool)), dtype=bool)
    if ended.any():
        final = _gt_row(infos["final_info"], n_envs)
        if final is not None:
            out = np.where(ended, final, -1 if out is None else out)
        elif out is not None:
            out = np.where(ended, -1, out)
    return out


def _gt_row(infos: Mapping[str, Any], n_envs: int) -> np.ndarray | None:
    """:func:`ground_truth` of the step's own infos, without its ``final_info``."""
    gt = infos.get("gt")
    if gt is None:
        return None
    try:
        values = np.asarray(gt, dtype=np.float64).reshape(n_envs)
    except (TypeError, ValueError):  # a gt per env that is not one number (an array, None)
        return np.full(n_envs, -1, dtype=np.int64)
    mask = np.asarray(infos.get("_gt", np.ones(n_envs, bool)), dtype=bool)
    whole = mask & np.isfinite(values) & (values == np.round(values))
    return np.where(whole, values, -1).astype(np.int64)


def _scalar(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


class _Running:
    """The trial one env is in: its start and the actions so far."""

    def __init__(self, start: Mapping[str, Any], step: int, index: int) -> None:
        self.conditions = clean_conditions(start.get("conditions"))  # numpy from vector infos
        self.t0 = float(start.get("t0", 0.0))
        self.dt = float(start.get("dt", 0.0))
        fix = start.get("fixation", -1)
        self.fixation = None if fix is None or int(fix) < 0 else int(fix)
        self.start_step = step
        self.index = index
        self.actions: list[Any] = []
        self.gts: list[Any] = []
        self.cues: list[bool] | None = []  # None once a step came without its cue


class TrialTracker:
    """Completed trials from per-step infos and actions of ``n_envs`` envs.

    Feed it the infos of a reset (:meth:`reset`) and of every step (:meth:`step`). With a
    vector env (SAME_STEP autoreset) pass the batched infos as they are: a sub-env whose
    episode ended at a step is read from ``infos["final_info"]`` and starts again from the
    reset info. A trial cut by the end of an episode is not reported. Envs that are not trial
    tasks give no ``trial_start``, and the tracker reports nothing (:attr:`active` stays
    False).

    Args:
        n_envs: Number of envs whose infos come batched (1: plain per-env info dicts).
    """

    def __init__(self, n_envs: int = 1) -> None:
        self.n_envs = int(n_envs)
        self._running: list[_Running | None] = [None] * self.n_envs
        self._steps = [0] * self.n_envs  # steps of the current episode, per env
        self._count = [0] * self.n_envs  # trials started in the current episode, per env
        self.active = False
        """Whether any env has reported a trial (the env is a trial task)."""

    def _split(self, infos: Any) -> list[dict[str, Any]]:
        if self.n_envs == 1 and isinstance(infos, Mapping) and "_final_info" not in infos:
            if not any(k.startswith("_") for k in infos):
                return [dict(infos)]
        if isinstance(infos, Mapping):
            return [unbatch_info(infos, i) for i in range(self.n_envs)]
        return [dict(x or {}) for x in infos]

    def _begin(self, i: int, info: Mapping[str, Any]) -> None:
        start = info.get("trial_start")
        if isinstance(start, Mapping):
            self._running[i] = _Running(start, self._steps[i], self._count[i])
            self._count[i] += 1
            self.active = True
        else:
            self._running[i] = None

    def reset(self, infos: Any, env_index: int | None = None) -> None:
        """Start episodes from reset infos: all envs (batched infos, or one env's info when
        ``n_envs == 1``), or only ``env_index`` (then ``infos`` is that env's own info)."""
        if env_index is not None:
            targets = [(env_index, dict(infos))]
        else:
            targets = list(enumerate(self._split(infos)))
        for i, info in targets:
            self._steps[i] = 0
            self._count[i] = 0
            self._begin(i, info)

    def step(
        self,
        actions: Any,
        infos: Any,
        *,
        terminated: Any = None,
        truncated: Any = None,
        cue: Any = None,
    ) -> list[dict[str, Any]]:
        """Record one step of every env.

        Args:
            actions: The actions taken, (n_envs, ...) (a scalar or one action for one env).
            infos: The step infos: batched (a vector env's) or a list of per-env dicts.
            terminated: With per-env infos only: bool per env; an ended episode's next info
                (passed to :meth:`reset`) starts it again. Batched infos say it themselves
                (``_final_info``).
            truncated: As ``terminated``.
            cue: Bool per env (or one for one env): whether the fixation cue was on in the
                observation the action was taken on (:func:`fixation_channel`); given at every
                step, trials report ``fixation_break``.

        Returns:
            The trials completed at this step (dicts with :data:`TRIAL_KEYS`).
        """
        if (
            not self.active  # no env runs a trial, and none starts one at this step:
            and terminated is None
            and truncated is None
            and isinstance(infos, Mapping)
            and "_final_info" not in infos
            and "new_trial" not in infos
        ):
            for i in range(self.n_envs):  # the short way of every step of a non-trial env
                self._steps[i] += 1
            return []
        acts = np.asarray(actions)
        if self.n_envs == 1 and (acts.ndim == 0 or acts.shape[0] != 1):
            acts = acts[None]
        done_mask = np.zeros(self.n_envs, dtype=bool)
        finals: list[dict[str, Any]] | None = None
        if isinstance(infos, Mapping) and "_final_info" in infos:
            done_mask = np.asarray(infos["_final_info"], dtype=bool)
            finals = [
                unbatch_info(infos["final_info"], i) if done_mask[i] else {}
                for i in range(self.n_envs)
            ]
        else:
            for flags in (terminated, truncated):
                if flags is not None:
                    done_mask |= np.asarray(flags, dtype=bool).reshape(self.n_envs)
        batched = isinstance(infos, Mapping) and (
            self.n_envs > 1 or any(k.startswith("_") for k in infos)
        )
        now = _LazyInfos(infos, self.n_envs) if batched else self._split(infos)
        act_list = acts.tolist() if acts.ndim == 1 else [_scalar(a) for a in acts]
        cue = None if cue is None else np.asarray(cue, dtype=bool).reshape(self.n_envs)
        completed: list[dict[str, Any]] = []
        for i in range(self.n_envs):
            if finals is not None and done_mask[i]:
                step_info = finals[i]
            elif batched:
                step_info = now.light(i)  # gt and new_trial; all of it on a new_trial step
            else:
                step_info = now[i]
            trial = self._record(i, act_list[i], step_info, None if cue is None else cue[i])
            if trial is not None:
                completed.append(trial)
            self._steps[i] += 1
            if finals is not None and done_mask[i]:
                self._steps[i] = 0
                self._count[i] = 0
                self._begin(i, now[i])
            elif not done_mask[i] and step_info.get("new_trial"):
                self._begin(i, step_info)
            elif done_mask[i]:
                self._running[i] = None  # the caller resets this env next
        return completed

    def _record(
        self, i: int, action: Any, info: Mapping[str, Any], cue: bool | None
    ) -> dict[str, Any] | None:
        run = self._running[i]
        if run is None:
            return None
        run.actions.append(action)
        if cue is None:
            run.cues = None
        elif run.cues is not None:
            run.cues.append(bool(cue))
        run.gts.append(_scalar(info["gt"]) if "gt" in info else None)
        if not info.get("new_trial"):
            return None
        periods = {
            str(k): [float(v[0]), float(v[1])]
            for k, v in dict(info.get("trial_periods") or {}).items()
        }
        return self._finish(i, run, periods, info.get("performance"))

    def _finish(
        self, i: int, run: _Running, periods: dict[str, list[float]], performance: Any
    ) -> dict[str, Any]:
        n = len(run.actions)
        times = [round(run.t0 + k * run.dt, 9) for k in range(n)]
        decision = periods.get("decision")
        # interval production (ReadySetGo) responds in "production": its go is the choice
        respond = decision if decision is not None else periods.get("production")
        k_choice = None
        broke = None
        if respond is not None and run.fixation is not None:
            eps = 1e-9
            if run.cues is not None:
                broke = any(
                    c and t < respond[0] - eps and _differs(a, run.fixation)
                    for t, a, c in zip(times, run.actions, run.cues)
                )
            for k, (t, a) in enumerate(zip(times, run.actions)):
                in_decision = respond[0] - eps <= t < respond[1] - eps
                if in_decision and _differs(a, run.fixation):
                    k_choice = k
                    break
        k_gt = n - 1 if k_choice is None else k_choice
        choice = run.actions[k_gt]
        gt = run.gts[k_gt]
        perf = None if performance is None else float(_scalar(performance))
        if decision is not None and gt is not None:
            correct = bool(np.array_equal(np.asarray(choice), np.asarray(gt)))
        else:
            correct = None if perf is None else perf > 0
        decision_time = None if k_choice is None else times[k_choice]
        reaction_time = None
        stimulus = periods.get("stimulus")
        if decision_time is not None and stimulus is not None and respond[0] < stimulus[1]:
            reaction_time = round(decision_time - stimulus[0], 9)
        return {
            "env": i,
            "index": run.index,
            "start_step": run.start_step,
            "end_step": run.start_step + n - 1,
            "n_steps": n,
            "t0": run.t0,
            "choice": _scalar(choice),
            "gt": gt,
            "correct": correct,
            "fixation_break": broke,
            "performance": perf,
            "decision_time": decision_time,
            "reaction_time": reaction_time,
            "conditions": run.conditions,
            "periods": periods,
        }


class _LazyInfos:
    """Per-env views of batched infos, unbatched only where needed: most steps need just
    ``gt`` and ``new_trial`` (unbatching every key of every env each step costs as much as
    a quarter of a NeuroGym env step)."""

    def __init__(self, infos: Mapping[str, Any], n_envs: int) -> None:
        self.infos = infos
        new = infos.get("new_trial")
        self.new = np.zeros(n_envs, bool) if new is None else np.asarray(new, dtype=bool)
        if "_new_trial" in infos:
            self.new = self.new & np.asarray(infos["_new_trial"], dtype=bool)
        gt = infos.get("gt")
        self.gt = gt.tolist() if isinstance(gt, np.ndarray) and gt.ndim == 1 else gt
        mask = infos.get("_gt")
        self.gt_mask = np.ones(n_envs, bool) if mask is None else np.asarray(mask, dtype=bool)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return unbatch_info(self.infos, i)

    def light(self, i: int) -> dict[str, Any]:
        if self.new[i]:
            return self[i]
        if self.gt is None or not self.gt_mask[i]:
            return {}
        return {"gt": self.gt[i]}


def _differs(action: Any, fixation: int) -> bool:
    a = np.asarray(action)
    return a.ndim == 0 and int(a) != fixation


# ---- summaries -------------------------------------------------------------------------------
def summarize_trials(trials: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``{"n_trials", "accuracy", "accuracy_fixation_held", "fixation_breaks",
    "accuracy_by_condition"}`` of a trial log, and ``"accuracy_by_task"`` and
    ``"accuracy_fixation_held_by_task"`` when its trials come from several tasks.

    ``accuracy`` is the fraction of trials with ``correct`` True (NaN without trials);
    ``accuracy_fixation_held`` counts a trial only if it is also without a
    ``fixation_break`` (Yang et al., 2019's criterion; a trial without a response period
    counts as ``correct`` says); ``fixation_breaks`` is the fraction of the trials with a
    response period in which the agent left fixation before it (NaN without such trials);
    ``accuracy_by_condition`` maps each scalar condition (``"coh"``, ``"ground_truth"`` ...)
    to ``{value (as text): {"n": trials, "accuracy": fraction}}``, values sorted. Trials of a
    multitask env (snrl.tasks.multitask) have the condition ``task``; ``accuracy_by_task``
    maps each task id to its accuracy (:func:`accuracy_by_task`).
    """
    scored = [t for t in trials if t.get("correct") is not None]
    breaks = [bool(t["fixation_break"]) for t in trials if t.get("fixation_break") is not None]
    out = {
        "n_trials": len(trials),
        "accuracy": _fraction([bool(t["correct"]) for t in scored]),
        "accuracy_fixation_held": _fraction([_held(t) for t in scored]),
        "fixation_breaks": _fraction(breaks),
        "accuracy_by_condition": accuracy_by_condition(scored),
    }
    if any("task" in (t.get("conditions") or {}) for t in trials):
        out["accuracy_by_task"] = accuracy_by_task(trials)
        out["accuracy_fixation_held_by_task"] = accuracy_by_task(trials, held=True)
    return out


def _fraction(flags: Sequence[bool]) -> float:
    return float(np.mean(flags)) if flags else math.nan


def _held(trial: Mapping[str, Any]) -> bool:
    """A scored trial correct with fixation held until its response period."""
    return bool(trial["correct"]) and not trial.get("fixation_break")


def accuracy_by_task(
    trials: Sequence[Mapping[str, Any]], tasks: Sequence[str] = (), *, held: bool = False
) -> dict[str, float]:
    """{task id: fraction of its scored trials correct} of a multitask trial log (NaN for a
    task of ``tasks`` without scored trials); tasks in ``tasks`` order, then first seen.
    ``held``: count a trial only if fixation was also held (``accuracy_fixation_held``)."""
    groups: dict[str, list[bool]] = {str(k): [] for k in tasks}
    for t in trials:
        task = (t.get("conditions") or {}).get("task")
        if task is None:
            continue
        scores = groups.setdefault(str(task), [])
        if t.get("correct") is not None:
            scores.append(_held(t) if held else bool(t["correct"]))
    return {k: _fraction(v) for k, v in groups.items()}


def accuracy_by_condition(
    trials: Sequence[Mapping[str, Any]],
) -> dict[str, dict[str, dict[str, float]]]:
    """Per scalar condition, per value: ``{"n", "accuracy"}`` over the scored trials."""
    groups: dict[str, dict[Any, list[bool]]] = {}
    for t in trials:
        if t.get("correct") is None:
            continue
        for k, v in (t.get("conditions") or {}).items():
            if isinstance(v, (bool, int, float, str)):
                groups.setdefault(k, {}).setdefault(v, []).append(bool(t["correct"]))
    out: dict[str, dict[str, dict[str, float]]] = {}
    for k, by_value in groups.items():
        try:
            values = sorted(by_value)
        except TypeError:
            values = list(by_value)
        out[k] = {
            _key(v): {"n": len(by_value[v]), "accuracy": float(np.mean(by_value[v]))}
            for v in values
        }
    return out


def _key(value: Any) -> str:
    """A condition value as a JSON object key: ``"6.4"``, ``"0.0"``, ``"1"``, ``"True"``."""
    if isinstance(value, float):
        return repr(float(value))
    return str(value)
