"""Curricula: lessons of increasing difficulty, and the progress of a run through them.

A :class:`Curriculum` is a list of :class:`Lesson` s. Each lesson names env options
(``env_kwargs``, merged over the run's own ``env_kwargs``, recursively for nested tables
such as NeuroGym's ``timing``) and a promotion criterion:

* ``metric`` + ``threshold`` (+ ``window``): promote when the mean of ``metric`` over the
  last ``window`` evaluations of this lesson is ``>= threshold``. ``metric`` is a
  metrics.csv column of the evaluations: ``eval_return_mean``, or ``eval_trial_accuracy``
  where the env reports trials;
* ``max_steps``: promote after this many env steps in the lesson;
* both: whichever comes first. The last lesson needs none (there is nothing after it).

Lessons are numbered from 0 (metrics.csv's ``lesson`` column, ``snrl eval --lesson``, the
error messages). A lesson changes the task, not the training options; a lesson's
``env_kwargs`` may not change the env's observation or action space.

What the algorithms do at a promotion (:meth:`snrl.agents.base.Algorithm._log_row`):
the vector env is closed and rebuilt with the next lesson's options (every episode
restarts, every recurrent state is re-initialized); the agent, the optimizer, the
observation normalizer (its running statistics keep accumulating over the new lesson),
the counters and metrics.csv continue; best.pt starts over (an evaluation on an easier
lesson is no rival for one on a harder lesson); last.pt is written. DQN flushes its replay
buffer (see :meth:`snrl.agents.dqn.DQN._new_lesson`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from snrl.config import unknown_key_error
from snrl.envs import make_env
from snrl.envs.make import check_env_kwargs
from snrl.errors import UserError, explain_foreign_calls, first_line
from snrl.io import load_json

__all__ = [
    "METRICS",
    "Curriculum",
    "CurriculumProgress",
    "Lesson",
    "check_lesson_spaces",
    "merge_env_kwargs",
]

#: The metrics a promotion may read: metrics.csv columns of the periodic evaluations.
METRICS = ("eval_return_mean", "eval_trial_accuracy")
#: Lessons of one curriculum, at most.
MAX_LESSONS = 1000


def _label(index: int | None, name: str) -> str:
    where = "curriculum lesson" if index is None else f"curriculum lesson {index}"
    return f"{where} ({name!r})" if name else where


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_lesson(where: str, values: Mapping[str, Any]) -> None:
    """Raise :class:`UserError` naming ``where`` and the field unless ``values`` (the
    fields of one lesson) make a lesson."""
    valid = [f.name for f in dataclasses.fields(Lesson)]
    for key in values:
        if key not in valid:
            raise unknown_key_error(key, valid, where, what="lesson key")

    def bad(field: str, how: str) -> UserError:
        return UserError(f"{where}: {field}={values[field]!r} ({how})")

    kw = values.get("env_kwargs", {})
    if not isinstance(kw, Mapping) or not all(isinstance(k, str) for k in kw):
        raise bad("env_kwargs", 'pass a table / dict with string keys, e.g. {"dt": 100}')
    check_env_kwargs(dict(kw), f"{where}: env_kwargs")
    if not isinstance(values.get("name", ""), str):
        raise bad("name", "pass a string")
    metric = values.get("metric")
    if metric is not None and metric not in METRICS:
        raise bad("metric", f"one of {', '.join(METRICS)}")
    threshold = values.get("threshold")
    if threshold is not None and (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float))
        or not math.isfinite(threshold)
    ):
        raise bad("threshold", "pass a finite number")
    if metric is not None and threshold is None:
        raise UserError(f"{where}: metric={metric!r} needs a threshold (add threshold = x)")
    if metric is None and threshold is not None:
        raise UserError(
            f"{where}: threshold={threshold!r} without a metric (add metric = "
            f"{METRICS[0]!r} or {METRICS[1]!r})"
        )
    window = values.get("window", 1)
    if not _is_int(window) or window < 1:
        raise bad("window", "the number of evaluations to average: an integer >= 1")
    max_steps = values.get("max_steps")
    if max_steps is not None and (not _is_int(max_steps) or max_steps < 1):
        raise bad("max_steps", "env steps in this lesson before promotion: an integer >= 1")


@dataclass(frozen=True, kw_only=True)
class Lesson:
    """One lesson of a :class:`Curriculum`: env options and a promotion criterion."""

    env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Env options of this lesson, merged over the run's ``env_kwargs`` (nested tables key
    by key)."""
    name: str = ""
    """A label for figures and messages (optional)."""
    metric: str | None = None
    """The evaluation column that promotes: eval_return_mean | eval_trial_accuracy."""
    threshold: float | None = None
    """Promote when the mean of ``metric`` over the last ``window`` evaluations is >= this."""
    window: int = 1
    """Evaluations of this lesson that the mean takes."""
    max_steps: int | None = None
    """Promote after this many env steps in the lesson (also without ``metric``)."""

    def __post_init__(self) -> None:
        _check_lesson(_label(None, self.name), self.to_dict())

    @property
    def has_criterion(self) -> bool:
        """Whether the lesson can end (a metric or a step budget)."""
        return self.metric is not None or self.max_steps is not None

    def to_dict(self) -> dict[str, Any]:
        """The lesson as plain JSON-able data (what ``config.json`` holds)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


class Curriculum:
    """Lessons of increasing difficulty, for ``snrl.PPO(..., curriculum=...)`` /
    ``snrl.DQN(...)`` and ``[[curriculum.lesson]]`` tables of a TOML config.

    Args:
        lessons: :class:`Lesson` s, or dicts of their fields, in order of difficulty.

    Raises:
        UserError: naming the lesson (its number and name) and the field that is wrong.

    Example::

        snrl.Curriculum([
            {"name": "short", "env_kwargs": {"timing": {"delay": 200}},
             "metric": "eval_return_mean", "threshold": 8, "window": 2},
            {"name": "long", "env_kwargs": {"timing": {"delay": 1000}}},
        ])
    """

    __slots__ = ("_lessons",)

    @explain_foreign_calls(
        "snrl.Curriculum(...)",
        {},
        default="snrl.Curriculum(lessons) takes only the lessons, as dicts or "
        "Lesson(env_kwargs=..., metric=..., threshold=...), each promoted by an evaluation "
        "metric (NeuroTorch's name=, description= and channels do not exist here)",
    )
    def __init__(self, lessons: Sequence[Lesson | Mapping[str, Any]]):
        if isinstance(lessons, (str, bytes, Mapping)) or not isinstance(lessons, Sequence):
            raise UserError(
                f"curriculum={lessons!r} is a {type(lessons).__name__} (pass a list of lessons, "
                "e.g. [{'env_kwargs': {...}, 'max_steps': 10000}, {'env_kwargs': {...}}])"
            )
        if not 1 <= len(lessons) <= MAX_LESSONS:
            raise UserError(
                f"curriculum has {len(lessons)} lessons (pass 1 to {MAX_LESSONS} lessons)"
            )
        built: list[Lesson] = []
        for i, item in enumerate(lessons):
            if isinstance(item, Lesson):
                _check_lesson(_label(i, item.name), item.to_dict())
                built.append(item)
                continue
            if not isinstance(item, Mapping):
                raise UserError(
                    f"curriculum lesson {i} is a {type(item).__name__} (pass a table / dict "
                    "of lesson keys: env_kwargs, name, metric, threshold, window, max_steps)"
                )
            name = item.get("name", "")
            _check_lesson(_label(i, name if isinstance(name, str) else ""), item)
            values = dict(item)
            values["env_kwargs"] = dict(values.get("env_kwargs", {}))
            if values.get("threshold") is not None:
                values["threshold"] = float(values["threshold"])
            built.append(Lesson(**values))
        for i, lesson in enumerate(built[:-1]):
            if not lesson.has_criterion:
                raise UserError(
                    f"{_label(i, lesson.name)}: no promotion criterion (set metric and "
                    "threshold, or max_steps; only the last lesson may have none)"
                )
        names = [lesson.name for lesson in built if lesson.name]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup is not None:
            raise UserError(f"curriculum: two lessons are named {dup!r} (give each its own name)")
        self._lessons = tuple(built)

    # ---- a sequence of lessons -----------------------------------------------------------
    @property
    def lessons(self) -> tuple[Lesson, ...]:
        return self._lessons

    def __len__(self) -> int:
        return len(self._lessons)

    def __getitem__(self, i: int) -> Lesson:
        return self._lessons[i]

    def __iter__(self):
        return iter(self._lessons)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Curriculum) and self._lessons == other._lessons

    def __repr__(self) -> str:
        return f"Curriculum({[lesson.to_dict() for lesson in self._lessons]!r})"

    @property
    def final(self) -> int:
        """The index of the last lesson."""
        return len(self._lessons) - 1

    def label(self, i: int) -> str:
        """``"lesson 2 ('long')"``: how messages and figures name lesson ``i``."""
        return _label(i, self._lessons[i].name).removeprefix("curriculum ")

    def index(self, lesson: int | str | None) -> int:
        """The number of ``lesson``: an index (from 0; negative counts from the end, as for
        a list), a lesson's name, a decimal string, or None for the final lesson.

        Raises:
            UserError: no such lesson.
        """
        if lesson is None:
            return self.final
        n = len(self._lessons)
        if isinstance(lesson, str):
            names = [x.name for x in self._lessons]
            if lesson in names:
                return names.index(lesson)
            try:
                lesson = int(lesson)
            except ValueError:
                listed = ", ".join(repr(x) for x in names if x) or "none"
                raise UserError(
                    f"no lesson named {lesson!r} (pass a lesson number 0..{n - 1} or a name: "
                    f"{listed})"
                ) from None
        if not _is_int(lesson) or not -n <= lesson < n:
            raise UserError(f"lesson={lesson!r} (pass a lesson number 0..{n - 1} or a name)")
        return lesson % n

    def env_kwargs(self, base: Mapping[str, Any], lesson: int) -> dict[str, Any]:
        """The env options of ``lesson``: its ``env_kwargs`` merged over ``base``."""
        return merge_env_kwargs(base, self._lessons[lesson].env_kwargs)

    # ---- as config data (snrl.config calls these: TOML, --set, config.json) ---------------
    @classmethod
    def from_config(cls, value: Any) -> Curriculum:
        """A curriculum from config data: a :class:`Curriculum`, a list of lesson tables,
        the TOML shape ``{"lesson": [...]}`` (``[[curriculum.lesson]]`` tables), or JSON
        text of either (``--set curriculum=...``)."""
        if isinstance(value, Curriculum):
            return value
        if isinstance(value, str):
            try:
                value = load_json(value, what="curriculum")
            except json.JSONDecodeError as e:
                raise UserError(
                    f"curriculum={value!r} is not JSON ({e.msg}; pass a list of lesson "
                    "objects, or use [[curriculum.lesson]] tables in a TOML config)"
                ) from None
        if isinstance(value, Mapping):
            extra = [k for k in value if k != "lesson"]
            if extra:
                raise unknown_key_error(extra[0], ["lesson"], "[curriculum]", what="key")
            value = value.get("lesson", [])
            if not isinstance(value, list):
                raise UserError(
                    "curriculum.lesson is not a list of tables (write each lesson as a "
                    "[[curriculum.lesson]] table)"
                )
        return cls(value)

    def to_config(self) -> list[dict[str, Any]]:
        """The lessons as JSON-able data (``config.json``; :meth:`from_config` reads it)."""
        return [lesson.to_dict() for lesson in self._lessons]


def merge_env_kwargs(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` written over it; where both hold a dict under one key, they
    are merged the same way (a lesson's ``timing = {delay = 1000}`` keeps the other
    periods of the run's ``timing``)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_env_kwargs(out[key], value)
        else:
            out[key] = value
    return out


@dataclass
class CurriculumProgress:
    """Where a run is in its curriculum (saved in checkpoints, so ``--resume`` continues
    the lesson and its step count and evaluations)."""

    lesson: int = 0
    """The current lesson."""
    lesson_start: int = 0
    """The env step at which the current lesson began."""
    recent: list[float] = dataclasses.field(default_factory=list)
    """The promotion metric of this lesson's latest evaluations (at most ``window``)."""
    promotions: list[int] = dataclasses.field(default_factory=list)
    """The env steps at which the run was promoted (one per lesson after the first)."""

    def observe(
        self, curriculum: Curriculum, env_step: int, values: Mapping[str, Any] | None
    ) -> bool:
        """Take one metrics row (``values``: its evaluation columns, None when the row has
        no evaluation) at ``env_step``; promote and return True when the current lesson's
        criterion is met.

        Raises:
            UserError: the lesson's metric is not among the evaluation's columns.
        """
        if self.lesson >= curriculum.final:
            return False
        lesson = curriculum[self.lesson]
        met = lesson.max_steps is not None and env_step - self.lesson_start >= lesson.max_steps
        if values is not None and lesson.metric is not None:
            if lesson.metric not in values:
                raise UserError(
                    f"{curriculum.label(self.lesson)} promotes on {lesson.metric}, which this "
                    f"run's evaluations do not report (they report {', '.join(sorted(values))}; "
                    "use metric = 'eval_return_mean')"
                )
            self.recent = [*self.recent, float(values[lesson.metric])][-lesson.window :]
            if len(self.recent) == lesson.window:
                mean = sum(self.recent) / lesson.window  # NaN (no trial ended) never promotes
                met = met or mean >= lesson.threshold
        if met:
            self.lesson += 1
            self.lesson_start = int(env_step)
            self.recent = []
            self.promotions = [*self.promotions, int(env_step)]
        return met

    def to_dict(self) -> dict[str, Any]:
        """Plain data for a checkpoint's ``extra`` state."""
        return {
            "lesson": int(self.lesson),
            "lesson_start": int(self.lesson_start),
            "recent": [float(v) for v in self.recent],
            "promotions": [int(s) for s in self.promotions],
        }

    @classmethod
    def from_dict(cls, d: Any, curriculum: Curriculum) -> CurriculumProgress:
        """Read :meth:`to_dict`'s data back (None: a checkpoint without it, lesson 0).

        Raises:
            UserError: data that does not fit ``curriculum``.
        """
        if d is None:
            return cls()
        try:
            out = cls(
                lesson=int(d["lesson"]),
                lesson_start=int(d["lesson_start"]),
                recent=[float(v) for v in d["recent"]],
                promotions=[int(s) for s in d["promotions"]],
            )
        except (KeyError, TypeError, ValueError) as e:
            raise UserError(
                f"the checkpoint's curriculum progress is unreadable ({e!r}; was it written by "
                "another snrl version?)"
            ) from None
        if not 0 <= out.lesson < len(curriculum):
            raise UserError(
                f"the checkpoint is at lesson {out.lesson} but the curriculum has "
                f"{len(curriculum)} lessons (load it with the curriculum it was trained with)"
            )
        return out


def check_lesson_spaces(config: Any, observation_space: Any, action_space: Any) -> None:
    """Build each lesson's env once and refuse a lesson whose options the env rejects or
    that changes its spaces (the agent is built for ``observation_space`` and
    ``action_space``, the spaces of the run's own ``env_kwargs``).

    Raises:
        UserError: naming the lesson and what is wrong.
    """
    cur: Curriculum = config.curriculum
    for i in range(len(cur)):
        kwargs = cur.env_kwargs(config.env_kwargs, i)
        try:
            env = make_env(config.env, **kwargs)
        except UserError as e:
            raise UserError(f"{_label(i, cur[i].name)}: {e}") from None
        except Exception as e:  # the env's own constructor refused an option
            raise UserError(
                f"{_label(i, cur[i].name)}: {config.env} refused env_kwargs={kwargs!r}: "
                f"{first_line(e)} (fix the lesson's env_kwargs)"
            ) from None
        try:
            for what, have, want in (
                ("observation", env.observation_space, observation_space),
                ("action", env.action_space, action_space),
            ):
                if have != want:
                    raise UserError(
                        f"{_label(i, cur[i].name)}: its env_kwargs change the {what} space "
                        f"from {want} to {have} (a lesson may change the task's difficulty, "
                        "not its spaces)"
                    )
        finally:
            env.close()
