"""One network, many tasks: interleaved trials of several batched tasks behind one gymnasium
``VectorEnv``, with a one-hot rule input (Yang et al., 2019, Nature Neuroscience 22:297).

The common layout of ``K`` tasks (:class:`MultiTaskVectorEnv`):

* **Observation** ``(C + K,)``: the task's own channels in the first ``C`` (``C``: the widest
  task's channel count; a narrower task's extra channels stay 0), then ``K`` rule channels, the
  one-hot of the task. NeuroGym's tasks all put fixation on channel 0, so channel 0 is the
  fixation cue of every task; the others mean different things per task, which the rule
  input tells apart (Yang et al. share one stimulus layout across their tasks; NeuroGym's
  tasks do not, and padding keeps each task's stream exactly as it is alone). With
  ``layout="separate"`` each task's channels other than fixation get columns of their own
  instead (``C = 1 + sum(C_k - 1)``): no input column means two things.
* **Actions** ``Discrete(A)``, ``A``: the largest action count; action 0 is fixation in every
  task. An action a task lacks is a response that is never right: it breaks fixation in a
  fixation period and is a wrong answer in the decision period (the task's own rule applied
  to a non-fixation action that matches no ground truth; ``TaskVectorEnv(n_actions=A)``).
  Masking the action would hide the rule from nothing: the agent must learn it from the
  rule input, as it learns every other rule.
* **Schedule** (``schedule``; by default from ``num_envs``, :func:`default_schedule`): where
  ``num_envs`` is a multiple of ``K``, *slots*: env ``i`` runs task ``i % K`` for the whole
  run. Fixed slots keep every task's stream the single-task
  engine's: task ``k``'s envs are ``TaskVectorEnv`` of that task alone, seeded ``seed + k``
  (tested), so a multitask run is ``K`` single-task streams read by one network, and a
  rollout holds every task in the same share. Otherwise (fewer envs than tasks, as 16 envs
  and the 20 tasks of ``yang19``, or a count that would share them unequally) *trials*: as
  Yang et al. train, every trial of every env is of a task drawn anew (uniformly, from a
  generator seeded ``seed``); task ``k``'s trials still come from its own engine (one env
  per slot, seeded ``seed + k``, stepped with fixation where another task runs), so each
  trial is the single-task engine's trial. A recurrent agent's state then runs on across the
  trials of different tasks of an env, as the paper's network does; the rule input says
  which task the current trial is. Either schedule can be named for any ``num_envs`` (slots
  need one env per task at least). An evaluation of a run uses the schedule the run trained
  with, whatever its episode count (:func:`trained_schedule`): a per-trial agent is not
  scored on fixed tasks, nor a slot agent on task switches it never saw.
* **Episodes**: every task's episode is the longest of the tasks' default episodes (20
  trials of mean length, :func:`~snrl.tasks.engine.default_episode_steps`), so all envs end
  their episodes at the same step, as the single-task engine does. (Drawn per trial, an
  episode's return is the env's, over its trials of every task.)
* **Infos**: as the single-task engine's, merged over the slots; each trial's
  ``trial_start["conditions"]`` has ``task`` (the task id), so the trial log and
  :func:`snrl.envs.trials.summarize_trials` give accuracy per task (``accuracy_by_task``).
  Conditions and periods a task lacks are masked (``_name``) in the slots of the others.

All tasks must share one clock (``dt``): the network's time constants follow the task's
step (:meth:`snrl.agents.config.AgentConfig.resolve_time`), and NeuroGym's tasks here run at
100 ms, except IntervalDiscrimination and ReadySetGo (80 ms).

The env id ``snrl.tasks:PerceptualDecisionMaking-v0,GoNogo-v0,...`` (what ``snrl train
--tasks`` records as ``env``) names the multitask env of those tasks.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector.utils import batch_space

from snrl.envs.trials import unbatch_info
from snrl.errors import UserError
from snrl.tasks.catalog import TASKS
from snrl.tasks.engine import BANK_FLOATS, TaskVectorEnv, VectorSlotEnv, default_episode_steps
from snrl.tasks.spec import TaskSpec
from snrl.tasks.yang19 import COLLECTION
from snrl.tasks.yang19 import TASKS as YANG19

__all__ = [
    "DEFAULT_LAYOUT",
    "LAYOUTS",
    "SCHEDULES",
    "MultiTaskEnv",
    "MultiTaskVectorEnv",
    "default_schedule",
    "is_multitask_env",
    "multitask_env_id",
    "parse_task_ids",
    "trained_schedule",
]

PREFIX = "snrl.tasks:"

#: Where the tasks' observation channels go: ``"shared"`` (every task's channels from column 0,
#: padded to the widest) or ``"separate"`` (fixation in column 0 for all, each task's other
#: channels in columns of their own).
LAYOUTS = ("shared", "separate")
#: The layout when none is named.
DEFAULT_LAYOUT = LAYOUTS[0]

#: How the envs of a multitask env share the tasks: ``"slots"`` (env ``i`` runs task
#: ``i % K`` for the whole run) or ``"trials"`` (every trial's task drawn anew).
SCHEDULES = ("slots", "trials")


def default_schedule(num_envs: int, n_tasks: int) -> str:
    """The schedule of ``num_envs`` envs of ``n_tasks`` tasks when none is named: ``"slots"``
    where ``num_envs`` is a multiple of ``n_tasks`` (every task in the same share), else
    ``"trials"``."""
    return "trials" if num_envs % n_tasks else "slots"


def resolve_schedule(schedule: Any, num_envs: int, k_total: int) -> str:
    """``schedule`` checked for ``num_envs`` envs of ``k_total`` tasks (``None``: the
    default)."""
    if schedule is None:
        return default_schedule(num_envs, k_total)
    if schedule not in SCHEDULES:
        raise UserError(f"schedule={schedule!r} is not one of {', '.join(SCHEDULES)}")
    if schedule == "slots" and num_envs < k_total:
        raise UserError(
            f"schedule='slots' runs each task in envs of its own: {num_envs} envs for "
            f"{k_total} tasks leave some without one (use {k_total}+ envs, or 'trials')"
        )
    return schedule


def task_columns(specs: Sequence[TaskSpec], layout: Any = DEFAULT_LAYOUT) -> list[np.ndarray]:
    """The observation columns of each task's channels under ``layout`` (:data:`LAYOUTS`):
    task ``k``'s channel ``j`` goes to column ``cols[k][j]``.

    Raises:
        UserError: An unknown layout.
    """
    if layout not in LAYOUTS:
        raise UserError(f"layout={layout!r} is not one of {', '.join(LAYOUTS)}")
    if layout == "shared":
        return [np.arange(s.n_obs) for s in specs]
    cols, start = [], 1
    for s in specs:  # fixation (channel 0 of every task here) shared, the rest its own
        cols.append(np.concatenate([[0], np.arange(start, start + s.n_obs - 1)]))
        start += s.n_obs - 1
    return cols


def names_several(env_id: object) -> bool:
    """Whether ``env_id`` (with or without ``snrl.tasks:``) names several tasks: a
    comma-joined list of ids, or a collection (``yang19``)."""
    name = env_id.removeprefix(PREFIX) if isinstance(env_id, str) else None
    return name is not None and ("," in name or name == COLLECTION)


def is_multitask_env(env_id: object) -> bool:
    """Whether a run's ``env`` is a multitask env of snrl.tasks (``snrl.tasks:A,B``)."""
    return isinstance(env_id, str) and env_id.startswith(PREFIX) and names_several(env_id)


def trained_schedule(
    env_id: Any, num_envs: int, n_episodes: int | None = None, env_kwargs: Any = None
) -> str | None:
    """The schedule a run on ``env_id`` with ``num_envs`` envs trains with (``None``: not a
    multitask env): the one ``env_kwargs`` names, else :func:`default_schedule`; with
    ``n_episodes``, the one its evaluation on that many envs uses: the same, except
    ``"trials"`` where slots would leave a task without an env (``n_episodes < K``).

    Raises:
        UserError: A named schedule the run's envs cannot take (before a run writes anything).
    """
    if not is_multitask_env(env_id):
        return None
    k_total = len(parse_task_ids(env_id))
    named = env_kwargs.get("schedule") if isinstance(env_kwargs, Mapping) else None
    schedule = resolve_schedule(named, num_envs, k_total)
    if n_episodes is not None and n_episodes < k_total:
        return "trials"
    return schedule


def parse_task_ids(tasks: str | Sequence[str]) -> tuple[str, ...]:
    """The task ids of ``--tasks``: comma-separated text or a sequence; each a NeuroGym id of
    :data:`snrl.tasks.TASKS`, with or without ``snrl.tasks:`` and ``-v0``, or ``yang19``
    (NeuroGym's collection: its 20 tasks, in the paper's order).

    Raises:
        UserError: An id that is not a task of snrl.tasks, a repeated one, fewer than two.
    """
    import difflib

    items = tasks.split(",") if isinstance(tasks, str) else list(tasks)
    items = [
        name
        for raw in items
        for name in (
            YANG19 if isinstance(raw, str) and raw.strip().removeprefix(PREFIX) == COLLECTION
            else [raw]
        )
    ]  # fmt: skip
    out: list[str] = []
    for raw in items:
        if not isinstance(raw, str):
            raise UserError(f"--tasks takes task ids, got {raw!r}")
        name = raw.strip().removeprefix(PREFIX)
        if name not in TASKS and name + "-v0" in TASKS:
            name += "-v0"
        if name not in TASKS:
            close = difflib.get_close_matches(name, list(TASKS), n=2, cutoff=0.6)
            hint = (
                "did you mean " + " or ".join(close) if close else "its tasks: " + ", ".join(TASKS)
            )
            raise UserError(
                f"--tasks: {raw.strip()!r} is not a task of snrl.tasks ({hint}; one network "
                "trains on the batched engine's tasks)"
            )
        if name in out:
            raise UserError(f"--tasks names {name} twice (name each task once)")
        out.append(name)
    if len(out) < 2:
        raise UserError(
            f"--tasks needs at least two tasks, got {len(out)} (for one task use --env "
            f"{PREFIX}{out[0] if out else 'PerceptualDecisionMaking-v0'})"
        )
    return tuple(out)


def multitask_env_id(tasks: str | Sequence[str]) -> str:
    """The env id of the multitask env of ``tasks``: ``snrl.tasks:A-v0,B-v0``.

    Raises:
        UserError: As :func:`parse_task_ids`.
    """
    return PREFIX + ",".join(parse_task_ids(tasks))


def _check_clock(specs: Sequence[TaskSpec]) -> float:
    clocks = {s.name: s.dt for s in specs}
    if len(set(clocks.values())) > 1:
        listed = ", ".join(f"{k} {v:g} ms" for k, v in clocks.items())
        raise UserError(
            f"the tasks run on different clocks ({listed}): one network has one neuron step, "
            'so all tasks need the same dt (pass env_kwargs {"dt": ...} to make them equal, '
            "or train the tasks of one clock together)"
        )
    return float(specs[0].dt)


def merge_infos(parts: Sequence[Mapping[str, Any]], n: int) -> dict[str, Any]:
    """The batched infos of ``n`` slots from the infos of ``K`` sub-envs (slot ``i``:
    sub-env ``i % K``'s env ``i // K``); keys some sub-envs lack get a ``_key`` mask."""
    slots = np.arange(n)
    return _gather_infos(parts, slots % len(parts), slots // len(parts))


def select_infos(parts: Sequence[Mapping[str, Any]], owner: np.ndarray) -> dict[str, Any]:
    """The batched infos of ``N`` envs, env ``i``'s entries from ``parts[owner[i]]`` (the
    infos of ``K`` sub-envs of ``N`` envs each); keys some sub-envs lack get a ``_key`` mask."""
    owner = np.asarray(owner)
    return _gather_infos(parts, owner, np.arange(len(owner)))


def _gather_infos(
    parts: Sequence[Mapping[str, Any]], owner: np.ndarray, row: np.ndarray
) -> dict[str, Any]:
    """Batched infos whose entry ``i`` is entry ``row[i]`` of ``parts[owner[i]]`` (nested
    dicts alike); a key some parts lack gets a ``_key`` mask."""
    n = len(owner)
    keys: list[str] = []
    for p in parts:
        keys += [key for key in p if not key.startswith("_") and key not in keys]
    out: dict[str, Any] = {}
    for key in keys:
        values = [p.get(key) for p in parts]
        if any(isinstance(v, Mapping) for v in values):
            nested = [v if isinstance(v, Mapping) else {} for v in values]
            out[key] = _gather_infos(nested, owner, row)
        else:
            present = [np.asarray(v) for v in values if v is not None]
            dtype = np.result_type(*present) if present else np.dtype(np.float64)
            shape = present[0].shape[1:] if present else ()
            arr = (
                np.empty((n, *shape), dtype=object)
                if dtype.kind == "O"
                else np.zeros((n, *shape), dtype)
            )
            for k, v in enumerate(values):
                if v is not None:
                    sel = owner == k
                    arr[sel] = np.asarray(v)[row[sel]]
            out[key] = arr
        masks = [p.get("_" + key) for p in parts]
        if any(m is not None for m in masks) or any(v is None for v in values):
            mask = np.zeros(n, dtype=bool)
            for k, (v, m) in enumerate(zip(values, masks)):
                sel = owner == k
                if v is not None:
                    mask[sel] = True if m is None else np.asarray(m, dtype=bool)[row[sel]]
            out["_" + key] = mask
    return out


class MultiTaskVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` envs of ``K`` batched tasks, env ``i`` running task ``i % K`` (or the
    task drawn per trial, the module docstring's schedule), with the common observation and
    action layout of the module docstring (SAME_STEP autoreset).

    Args:
        specs: The tasks (two or more, distinct, one clock).
        num_envs: Number of envs.
        device: Where the tasks' tables live and their steps run.
        seed: Seed of the first reset (task ``k``'s envs: ``seed + k``; ``None``: fresh).
        max_episode_steps: Steps per episode (``None``: the longest default of the tasks).
        as_tensors: Return torch tensors on ``device`` instead of numpy arrays.
        schedule: ``"slots"`` or ``"trials"`` (:data:`SCHEDULES`; ``None``:
            :func:`default_schedule`). Slots with ``num_envs`` not a multiple of ``K`` give
            the first ``num_envs % K`` tasks one env more.
        layout: ``"shared"`` or ``"separate"`` observation channels (:data:`LAYOUTS`).

    Raises:
        UserError: Fewer than two or repeated tasks, mixed clocks, ``num_envs < 1``, an
            unknown schedule or layout, slots with fewer envs than tasks.
    """

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(
        self,
        specs: Sequence[TaskSpec],
        num_envs: int,
        *,
        device: str | torch.device = "cpu",
        seed: int | None = None,
        max_episode_steps: int | None = None,
        as_tensors: bool = False,
        schedule: str | None = None,
        layout: str = DEFAULT_LAYOUT,
    ) -> None:
        specs = list(specs)
        names = [s.name for s in specs]
        if len(specs) < 2 or len(set(names)) != len(names):
            raise UserError(f"a multitask env needs two or more distinct tasks, got {names}")
        k_total = len(specs)
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise UserError(f"num_envs must be an integer >= 1, got {num_envs!r}")
        dt = _check_clock(specs)
        self.specs = specs
        self.task_ids: tuple[str, ...] = tuple(names)
        """The tasks, in rule-channel order."""
        self.num_envs = num_envs
        self.as_tensors = as_tensors
        self._cols = task_columns(specs, layout)
        self.layout = layout
        """Where the tasks' channels go (:data:`LAYOUTS`)."""
        self.n_task_obs = max(int(c.max()) + 1 for c in self._cols)
        self.n_actions = max(s.n_act for s in specs)
        self.max_episode_steps = (
            max(default_episode_steps(s) for s in specs)
            if max_episode_steps is None
            else int(max_episode_steps)
        )
        self.schedule = resolve_schedule(schedule, num_envs, k_total)
        """How the envs share the tasks (:data:`SCHEDULES`)."""
        self.per_trial = self.schedule == "trials"
        """The task is drawn per trial (else env ``i`` runs task ``i % K``)."""
        self._rng = np.random.default_rng(seed)
        self.task_index = np.arange(num_envs) % k_total
        """The task of each env now (an index into :attr:`task_ids`)."""
        self.subs = [
            TaskVectorEnv(
                spec,
                num_envs if self.per_trial else len(range(k, num_envs, k_total)),
                device=device,
                seed=None if seed is None else seed + k,
                max_episode_steps=self.max_episode_steps,
                n_actions=self.n_actions,
                as_tensors=True,
                # drawn per trial, K engines of N envs each: smaller pools and banks
                pool_size=max(4 * num_envs, 256) if self.per_trial else None,
                bank_floats=max(BANK_FLOATS // k_total, 1 << 20),
            )
            for k, spec in enumerate(specs)
        ]
        self._ep_return = np.zeros(num_envs)
        self._ep_start = 0.0
        self.device = self.subs[0].device
        self._cols_t = [torch.as_tensor(c, device=self.device) for c in self._cols]
        self._seeded = seed is not None
        self.metadata = {**self.metadata, "dt": dt / 1000.0, "tasks": self.task_ids}
        width = self.n_task_obs + k_total
        self.single_observation_space = gym.spaces.Box(
            -np.inf, np.inf, shape=(width,), dtype=np.float32
        )
        self.single_action_space = gym.spaces.Discrete(self.n_actions)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._task_names = [np.full(s.num_envs, name, dtype=object) for s, name in
                            zip(self.subs, names)]  # fmt: skip
        if seed is not None:
            self.action_space.seed(seed)

    @property
    def dt(self) -> float:
        """The tasks' step, ms (NeuroGym's unit)."""
        return float(self.specs[0].dt)

    @property
    def fixation_channel(self) -> int:
        """The observation channel of the fixation cue: 0 for every task (the layout)."""
        return 0

    def _layout(self, parts: Sequence[torch.Tensor]) -> torch.Tensor:
        """(N, C + K) float32: each task's observation, padded, then the rule one-hot."""
        k_total = len(parts)
        out = torch.zeros(
            self.num_envs, self.n_task_obs + k_total, dtype=torch.float32, device=self.device
        )
        for k, obs in enumerate(parts):
            rows = out[k::k_total]
            rows[:, self._cols_t[k]] = obs
            rows[:, self.n_task_obs + k] = 1.0
        return out

    def _finish(self, obs: torch.Tensor) -> Any:
        return obs if self.as_tensors else obs.cpu().numpy()

    def _tag(self, infos: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The task id into each trial's conditions."""
        for info, names in zip(infos, self._task_names):
            start = info.get("trial_start")
            if isinstance(start, Mapping):
                info["trial_start"] = {
                    **start,
                    "conditions": {**start["conditions"], "task": names},
                }
        return infos

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset every env; ``seed`` seeds task ``k``'s envs with ``seed + k``."""
        if isinstance(seed, (list, tuple)):
            seed = seed[0] if seed else None
        if self.per_trial:
            return self._reset_mixed(seed)
        results = [
            sub.reset(seed=None if seed is None else int(seed) + k)
            for k, sub in enumerate(self.subs)
        ]
        if seed is not None:
            self.action_space.seed(int(seed))
        obs = self._layout([o for o, _ in results])
        infos = merge_infos(self._tag([dict(i) for _, i in results]), self.num_envs)
        return self._finish(obs), infos

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """One step of every env (env ``i``'s action goes to task ``i % K``)."""
        if isinstance(actions, torch.Tensor):
            acts: Any = actions.reshape(-1)
        else:
            acts = np.asarray(actions).reshape(-1)
        if acts.shape[0] != self.num_envs:
            raise UserError(f"step() got {acts.shape[0]} actions for {self.num_envs} envs")
        if self.per_trial:
            return self._step_mixed(acts)
        k_total = len(self.subs)
        results = [sub.step(acts[k::k_total]) for k, sub in enumerate(self.subs)]
        obs = self._layout([r[0] for r in results])
        reward = torch.zeros(self.num_envs, dtype=torch.float64, device=self.device)
        truncated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        for k, r in enumerate(results):
            reward[k::k_total] = r[1]
            truncated[k::k_total] = r[3]
        parts = [dict(r[4]) for r in results]
        finals = [p.pop("final_obs", None) for p in parts]
        for p in parts:
            p.pop("_final_obs", None)
        infos = merge_infos(self._tag(parts), self.num_envs)
        if any(f is not None for f in finals):
            final_obs = np.empty(self.num_envs, dtype=object)
            mask = np.zeros(self.num_envs, dtype=bool)
            for k, f in enumerate(finals):
                if f is None:
                    continue
                done = np.asarray(results[k][4]["_final_obs"], dtype=bool)
                stacked = torch.as_tensor(np.stack([np.asarray(x) for x in f[done]]))
                padded = self._pad_one(k, stacked)
                slots = np.arange(k, self.num_envs, k_total)[done]
                for j, slot in enumerate(slots):
                    final_obs[slot] = padded[j]
                mask[slots] = True
            infos["final_obs"], infos["_final_obs"] = final_obs, mask
        terminated = torch.zeros_like(truncated)
        if self.as_tensors:
            return obs, reward, terminated, truncated, infos
        return (
            obs.cpu().numpy(),
            reward.cpu().numpy(),
            terminated.cpu().numpy(),
            truncated.cpu().numpy(),
            infos,
        )

    def _pad_one(self, k: int, obs: torch.Tensor) -> np.ndarray:
        """Task ``k``'s observations ``(m, C_k)`` in the common layout, numpy."""
        out = np.zeros((obs.shape[0], self.n_task_obs + len(self.subs)), dtype=np.float32)
        out[:, self._cols[k]] = obs.cpu().numpy()
        out[:, self.n_task_obs + k] = 1.0
        return out

    # ---- the task drawn per trial -----------------------------------------------------------
    def _mixed_obs(self, parts: Sequence[Any], owner: np.ndarray) -> torch.Tensor:
        """(N, C + K): env ``i``'s observation from task ``owner[i]``, and its rule one-hot."""
        k_total = len(parts)
        out = torch.zeros(
            self.num_envs, self.n_task_obs + k_total, dtype=torch.float32, device=self.device
        )
        for k, obs in enumerate(parts):
            rows = torch.as_tensor(np.flatnonzero(owner == k), device=self.device)
            out[rows[:, None], self._cols_t[k]] = torch.as_tensor(obs, device=self.device)[rows]
        rows = torch.arange(self.num_envs, device=self.device)
        out[rows, self.n_task_obs + torch.as_tensor(owner, device=self.device)] = 1.0
        return out

    def _reset_mixed(self, seed: int | None) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(int(seed))
            self.action_space.seed(int(seed))
        results = [
            sub.reset(seed=None if seed is None else int(seed) + k)
            for k, sub in enumerate(self.subs)
        ]
        self.task_index = self._rng.integers(len(self.subs), size=self.num_envs)
        self._ep_return[:] = 0.0
        self._ep_start = time.perf_counter()
        obs = self._mixed_obs([o for o, _ in results], self.task_index)
        infos = select_infos(self._tag([dict(i) for _, i in results]), self.task_index)
        return self._finish(obs), infos

    def _step_mixed(self, acts: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        """Every task's engine steps all envs (fixation where another task runs); an env
        whose trial ended (or episode) draws the task of its next trial, whose engine loads
        a fresh trial there unless it is the task that just ran (its engine loaded one)."""
        owner = self.task_index
        acts = acts.cpu().numpy() if isinstance(acts, torch.Tensor) else acts
        results = [sub.step(np.where(owner == k, acts, 0)) for k, sub in enumerate(self.subs)]
        rows = np.arange(self.num_envs)
        reward = np.stack([np.asarray(r[1].cpu()) for r in results])[owner, rows]
        truncated = np.asarray(results[0][3].cpu(), dtype=bool)
        parts = [dict(r[4]) for r in results]
        finals = [p.pop("final_obs", None) for p in parts]
        for p in parts:
            p.pop("_final_obs", None)
            p.pop("trial_start", None)
            p.pop("_trial_start", None)
        infos = select_infos(parts, owner)
        ended = truncated | np.asarray(infos["new_trial"], dtype=bool)
        self._ep_return += reward
        if truncated.any():
            infos = self._end_mixed(infos, finals, owner)
        nxt = owner.copy()
        nxt[ended] = self._rng.integers(len(self.subs), size=int(ended.sum()))
        obs = [r[0] for r in results]
        for k, sub in enumerate(self.subs):
            moved = np.flatnonzero(ended & (nxt == k) & (owner != k))
            if moved.size:
                sub._load(sub._x(torch.as_tensor(moved, device=sub.device)))
                sub._point()  # the moved envs' rows and blocks (every env's, if the bank
                # was compacted): read from their new cells before the observation
                obs[k] = sub._out(sub._obs())
        self.task_index = nxt
        if ended.any():
            starts = [sub._trial_start({}, ended) for sub in self.subs]
            infos.update(select_infos(self._tag(starts), nxt))
        out = self._mixed_obs(obs, nxt)
        reward_t = torch.as_tensor(reward, device=self.device)
        trunc_t = torch.as_tensor(truncated, device=self.device)
        if self.as_tensors:
            return out, reward_t, torch.zeros_like(trunc_t), trunc_t, infos
        return out.cpu().numpy(), reward, np.zeros_like(truncated), truncated, infos

    def _end_mixed(
        self, infos: dict[str, Any], finals: Sequence[Any], owner: np.ndarray
    ) -> dict[str, Any]:
        """Every env's episode ends at this step: its final observation (of the task that
        ran), and the episode's statistics over all its trials."""
        n = self.num_envs
        final_obs = np.empty(n, dtype=object)
        for i in range(n):
            k = int(owner[i])
            final_obs[i] = self._pad_one(k, torch.as_tensor(np.stack([finals[k][i]])))[0]
        done = np.ones(n, dtype=bool)
        episode = {
            "r": self._ep_return.copy(),
            "l": np.full(n, self.max_episode_steps, dtype=np.int64),
            "t": np.full(n, round(time.perf_counter() - self._ep_start, 6)),
        }
        final_info = {k: v for k, v in infos.items() if k not in ("final_info", "_final_info")}
        infos["final_info"] = {**final_info, "episode": episode, "_episode": done}
        infos["_final_info"] = done
        infos["final_obs"], infos["_final_obs"] = final_obs, done
        self._ep_return[:] = 0.0
        self._ep_start = time.perf_counter()
        return infos

    def close_extras(self, **kwargs: Any) -> None:  # noqa: D102
        for sub in self.subs:
            sub.close()


class MultiTaskEnv(VectorSlotEnv):
    """One env of the multitask layout, where snrl needs a single env (reading the spaces and
    the clock, recording a rollout): each episode runs the next task in turn (the first
    reset task 0, then 1, ...), with the same observation, actions, rule input and infos
    as an env of :class:`MultiTaskVectorEnv`.

    Args:
        specs: The tasks.
        max_episode_steps: As :class:`MultiTaskVectorEnv`.
        layout: As :class:`MultiTaskVectorEnv`.
    """

    def __init__(
        self,
        specs: Sequence[TaskSpec],
        max_episode_steps: int | None = None,
        layout: str = DEFAULT_LAYOUT,
    ) -> None:
        self._adopt(
            MultiTaskVectorEnv(
                specs, len(specs), seed=None, max_episode_steps=max_episode_steps, layout=layout
            )
        )
        self.task_ids = self._vec.task_ids
        self._episodes = 0
        self._slot = 0
        self._fixation = np.zeros(len(specs), dtype=np.int64)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """A new episode of the next task (``seed``: the tasks' seed, as the vector env's)."""
        super().reset(seed=seed)
        self._slot = self._episodes % len(self.task_ids)
        self._episodes += 1
        obs, infos = self._vec.reset(seed=seed)
        return obs[self._slot], unbatch_info(infos, self._slot)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One step of the episode's task (the other tasks' envs fixate, unseen)."""
        acts = self._fixation.copy()
        acts[self._slot] = int(action)
        obs, reward, _, truncated, infos = self._vec.step(acts)
        i = self._slot
        if truncated[i]:
            info = unbatch_info(infos["final_info"], i)
            return infos["final_obs"][i], float(reward[i]), False, True, info
        return obs[i], float(reward[i]), False, False, unbatch_info(infos, i)

    def close(self) -> None:  # noqa: D102
        self._vec.close()
