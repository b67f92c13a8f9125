"""Deterministic evaluation and recorded rollouts, shared by every algorithm.

Both work with any :class:`snrl.agents.agent.Agent`: ``preprocess(raw_obs) -> x``,
``initial_state(B)``, ``reset_state(state, done)``, ``step(x, state, deterministic=...,
train=...)`` (a result with ``action``, ``state``, ``outputs`` and ``activity``, an
:class:`~snrl.networks.Activity`) and ``env_action(action)``. Both call ``step`` with
``train=False``: nothing for learning is needed, so an actor-critic agent skips its critic and
log-probabilities.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from snrl.envs import FiniteCheck, make_env, make_vector_env
from snrl.envs.neurogym import EVAL_MAX_EPISODE_STEPS, wrap_task
from snrl.envs.trials import (
    TrialTracker,
    accuracy_by_task,
    fixation_channel,
    is_trial_env,
    space_names,
    summarize_trials,
)
from snrl.errors import UserError
from snrl.networks.activity import Activity
from snrl.trajectory import Trajectory


@torch.no_grad()
def evaluate_agent(
    agent: Any,
    env_id: str,
    *,
    n_episodes: int = 20,
    seed: int = 123,
    deterministic: bool = True,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    hook: Any = None,
) -> dict[str, Any]:
    """Run ``n_episodes`` episodes (one per env of a vector env, seeds ``seed + i``).

    ``hook`` (optional) watches the episodes: ``hook.start(envs, tracker)`` after the reset
    and ``hook.step(envs, live)`` before each step (``live``: bool (n_episodes,), the
    episodes still running), e.g. to switch a perturbation on in one trial period
    (:func:`snrl.analysis.perturb.evaluate_perturbed`); a hook with an ``after_step``
    method also gets ``hook.after_step(res, live)`` after each step of the agent (``res``:
    its :class:`~snrl.agents.agent.StepResult`, with the activity; the task-variance
    recording of :mod:`snrl.analysis.taskvar` reads it).

    Every episode ends: ``max_episode_steps`` when given, else the env's own limit, else (for a
    NeuroGym task) :data:`~snrl.envs.neurogym.TRIALS_PER_EPISODE` trials, else
    :data:`~snrl.envs.neurogym.EVAL_MAX_EPISODE_STEPS` steps.

    Returns:
        ``{"mean_return", "std_return", "n_episodes", "returns", "mean_length",
        "spike_rates"}``; ``spike_rates`` maps each spiking layer of the actor to its spikes
        per neuron per network step over all live env steps (empty for ANN backbones). For a
        trial task also ``"n_trials"``, ``"accuracy"``, ``"accuracy_fixation_held"``,
        ``"fixation_breaks"``, ``"accuracy_by_condition"`` (see
        :func:`snrl.envs.trials.summarize_trials`) and ``"trials"`` (the trial log); on a
        multitask env (snrl.tasks.multitask) also ``"accuracy_by_task"`` ({task id: accuracy})
        and ``"accuracy_fixation_held_by_task"``.
    """
    if n_episodes < 1:
        raise ValueError(f"n_episodes must be >= 1, got {n_episodes}")
    envs = make_vector_env(
        env_id,
        n_episodes,
        seed=seed,
        env_kwargs=env_kwargs,
        max_episode_steps=max_episode_steps,
        fallback_episode_steps=EVAL_MAX_EPISODE_STEPS,
    )
    spikes: dict[str, float] = {}
    counts: dict[str, int] = {}
    tracker = TrialTracker(n_episodes)
    cue_channel = fixation_channel(envs)  # the trials' fixation_break reads it each step
    trials: list[dict[str, Any]] = []
    try:
        obs, reset_info = envs.reset(seed=seed)
        tracker.reset(reset_info)
        if hook is not None:
            hook.start(envs, tracker)
        state = agent.initial_state(n_episodes)
        returns = np.zeros(n_episodes)
        lengths = np.zeros(n_episodes, dtype=np.int64)
        finished = np.zeros(n_episodes, dtype=bool)
        while not finished.all():
            live = ~finished
            if hook is not None:
                hook.step(envs, live)
            res = agent.step(agent.preprocess(obs), state, deterministic=deterministic, train=False)
            if hook is not None and hasattr(hook, "after_step"):
                hook.after_step(res, live)
            action = agent.env_action(res.action)
            cue = None if cue_channel is None else np.asarray(obs)[:, cue_channel] > 0.5
            obs, reward, term, trunc, info = envs.step(action)
            trials += [t for t in tracker.step(action, info, cue=cue) if live[t["env"]]]
            for layer in res.activity.spiking():
                # (B, N), or (substeps, B, N): spikes per neuron per neuron step
                rows = layer.spikes[..., torch.as_tensor(live), :]
                spikes[layer.name] = spikes.get(layer.name, 0.0) + float(rows.sum())
                counts[layer.name] = counts.get(layer.name, 0) + rows.numel()
            returns[live] += reward[live]
            lengths[live] += 1
            done = np.logical_or(term, trunc)
            finished |= done
            state = agent.reset_state(res.state, done)
    finally:
        envs.close()
    out = {
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
        "n_episodes": int(n_episodes),
        "returns": [float(r) for r in returns],
        "mean_length": float(lengths.mean()),
        "spike_rates": {k: spikes[k] / counts[k] for k in spikes if counts[k] > 0},
    }
    if tracker.active:
        out.update(summarize_trials(trials))
        tasks = getattr(envs, "task_ids", ())
        if tasks:  # a multitask env: every task, in its order
            out["accuracy_by_task"] = accuracy_by_task(trials, tasks)
            out["accuracy_fixation_held_by_task"] = accuracy_by_task(trials, tasks, held=True)
        out["trials"] = trials
    return out


@torch.no_grad()
def record_trajectory(
    agent: Any,
    env_id: str,
    *,
    seed: int = 0,
    record: bool = True,
    deterministic: bool = True,
    max_steps: int | None = None,
    meta: dict[str, Any] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
) -> Trajectory:
    """Roll out one episode and record observations, actions, rewards, the policy's
    per-layer activity and outputs, and (``record=True``, when the env renders rgb_array)
    the frames: ``T + 1`` of them, the first right after reset.

    The episode ends as in :func:`evaluate_agent` (or after ``max_steps``). For a trial task
    (NeuroGym) the trajectory also holds ``task`` (per-step ``gt``, ``new_trial``,
    ``performance``), ``trials`` (the completed trials, steps indexing the trajectory) and
    ``dt`` (the task's time step in seconds), and ``meta`` gains NeuroGym's
    ``obs_names`` and ``action_names`` (:func:`snrl.envs.trials.space_names`)."""
    env = _make_recordable(env_id, record, env_kwargs or {})
    record = record and env.render_mode == "rgb_array"
    env = wrap_task(env, max_episode_steps, fallback=EVAL_MAX_EPISODE_STEPS)
    trial_env = is_trial_env(env)
    # NeuroGym's channel and action names label the renders (the caller's meta wins)
    meta = {**space_names(env), **(meta or {})}
    env = FiniteCheck(env, env_id=env_id)  # NaN observations stop a rollout as they stop eval
    tracker = TrialTracker(1)
    trials: list[dict[str, Any]] = []
    task: dict[str, list] = {"gt": [], "new_trial": [], "performance": []}
    try:
        obs, info = env.reset(seed=seed)
        tracker.reset(info)
        frames = []
        if record:
            try:
                frame = env.render()
            except NotImplementedError:  # an env that draws nothing: the renderer draws
                frame = None  # the task from the recorded arrays instead
            record = isinstance(frame, np.ndarray)
            if record:
                frames.append(frame)
        state = agent.initial_state(1)
        rows: dict[str, list] = {"obs": [], "act": [], "rew": [], "term": [], "trunc": []}
        activity: list[Activity] = []
        policy: dict[str, list] = {}
        t = 0
        while True:
            res = agent.step(
                agent.preprocess(np.asarray(obs)[None]),
                state,
                deterministic=deterministic,
                train=False,
            )
            action = agent.env_action(res.action)[0]
            rows["obs"].append(np.asarray(obs))
            rows["act"].append(np.asarray(action))
            # (1, N) per field, or (substeps, N): batch of one env, one row per neuron step
            activity.append(res.activity.to_numpy().map(lambda a: a.reshape(-1, a.shape[-1])))
            for k, v in res.outputs.items():
                policy.setdefault(k, []).append(v[0].cpu().numpy())
            obs, reward, term, trunc, info = env.step(action)
            trials += tracker.step(action, info)
            task["gt"].append(_float_or_nan(info.get("gt")))
            task["new_trial"].append(bool(info.get("new_trial", False)))
            task["performance"].append(_float_or_nan(info.get("performance")))
            rows["rew"].append(float(reward))
            rows["term"].append(bool(term))
            rows["trunc"].append(bool(trunc))
            if record:
                frames.append(env.render())
            state = res.state
            t += 1
            if term or trunc or (max_steps is not None and t >= max_steps):
                break
        dt = float(env.unwrapped.dt) / 1000.0 if trial_env else None
    finally:
        env.close()
    activity_steps = Activity.concat(activity)  # (T * substeps, N) per field
    n_rows = {arr.shape[0] for layer in activity_steps for arr in layer.fields.values()}
    substeps = n_rows.pop() // t if len(n_rows) == 1 and t else 1
    return Trajectory(
        observations=np.stack(rows["obs"]),
        actions=np.stack(rows["act"]),
        rewards=np.asarray(rows["rew"]),
        terminated=np.asarray(rows["term"]),
        truncated=np.asarray(rows["trunc"]),
        frames=np.stack(frames) if record else None,
        activity=activity_steps,
        policy={k: np.stack(v) for k, v in policy.items()},
        env=env_id,
        seed=seed,
        meta=meta,
        task={k: np.asarray(v) for k, v in task.items()} if trial_env else None,
        trials=trials if trial_env else None,
        dt=dt,
        substeps=max(1, substeps),
    )


def _float_or_nan(value: Any) -> Any:
    """A per-step value as float (an array for vector actions); NaN where absent."""
    if value is None:
        return np.nan
    arr = np.asarray(value, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else arr


def _make_recordable(env_id: str, record: bool, env_kwargs: dict[str, Any]) -> Any:
    """The env, rendering rgb_array frames when ``record`` and it can; an env that takes no
    ``render_mode`` (NeuroGym tasks: frameless, their trials are the record) is made
    without."""
    if not record:
        return make_env(env_id, **env_kwargs)
    try:
        return make_env(env_id, render_mode="rgb_array", **env_kwargs)
    except UserError as e:
        if "render_mode" not in str(e):
            raise
        return make_env(env_id, **env_kwargs)
