"""Deterministic evaluation and recorded rollouts, shared by every algorithm.

Both work with any :class:`snrl.agents.agent.Agent`: ``preprocess(raw_obs) -> x``,
``initial_state(B)``, ``reset_state(state, done)``, ``step(x, state, deterministic=...)``
(a result with ``action``, ``state``, ``outputs`` and ``activity``, an
:class:`~snrl.networks.Activity`) and ``env_action(action)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from snrl.envs import FiniteCheck, make_env, make_vector_env
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
) -> dict[str, Any]:
    """Run ``n_episodes`` episodes (one per env of a vector env, seeds ``seed + i``).

    Returns:
        ``{"mean_return", "std_return", "n_episodes", "returns", "mean_length",
        "spike_rates"}``; ``spike_rates`` maps each spiking layer of the actor to its spikes
        per neuron per network step over all live env steps (empty for ANN backbones).
    """
    if n_episodes < 1:
        raise ValueError(f"n_episodes must be >= 1, got {n_episodes}")
    envs = make_vector_env(env_id, n_episodes, seed=seed, env_kwargs=env_kwargs)
    spikes: dict[str, float] = {}
    counts: dict[str, int] = {}
    try:
        obs, _ = envs.reset(seed=seed)
        state = agent.initial_state(n_episodes)
        returns = np.zeros(n_episodes)
        lengths = np.zeros(n_episodes, dtype=np.int64)
        finished = np.zeros(n_episodes, dtype=bool)
        while not finished.all():
            res = agent.step(agent.preprocess(obs), state, deterministic=deterministic)
            obs, reward, term, trunc, _ = envs.step(agent.env_action(res.action))
            live = ~finished
            for layer in res.activity.spiking():
                # (B, N), or (substeps, B, N): spikes per neuron per neuron step
                rows = layer.spikes[..., torch.as_tensor(live), :]
                spikes[layer.name] = spikes.get(layer.name, 0.0) + float(rows.sum())
                counts[layer.name] = counts.get(layer.name, 0) + rows.numel()
            returns[live] += reward[live]
            lengths[live] += 1
            done = np.logical_or(term, trunc)
            finished |= done
            state = agent.reset_state(res.state, torch.as_tensor(done))
    finally:
        envs.close()
    return {
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
        "n_episodes": int(n_episodes),
        "returns": [float(r) for r in returns],
        "mean_length": float(lengths.mean()),
        "spike_rates": {k: spikes[k] / counts[k] for k in spikes if counts[k] > 0},
    }


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
) -> Trajectory:
    """Roll out one episode and record observations, actions, rewards, the policy's
    per-layer activity and outputs, and (``record=True``, when the env renders rgb_array)
    the frames: ``T + 1`` of them, the first right after reset."""
    env = make_env(env_id, render_mode="rgb_array" if record else None, **(env_kwargs or {}))
    env = FiniteCheck(env, env_id=env_id)  # NaN observations stop a rollout as they stop eval
    try:
        obs, _ = env.reset(seed=seed)
        frames = []
        if record:
            frame = env.render()
            record = isinstance(frame, np.ndarray)
            if record:
                frames.append(frame)
        state = agent.initial_state(1)
        rows: dict[str, list] = {"obs": [], "act": [], "rew": [], "term": [], "trunc": []}
        activity: list[Activity] = []
        policy: dict[str, list] = {}
        t = 0
        while True:
            res = agent.step(agent.preprocess(obs[None]), state, deterministic=deterministic)
            action = agent.env_action(res.action)[0]
            rows["obs"].append(np.asarray(obs))
            rows["act"].append(np.asarray(action))
            # (1, N) per field, or (substeps, N): batch of one env, one row per neuron step
            activity.append(res.activity.to_numpy().map(lambda a: a.reshape(-1, a.shape[-1])))
            for k, v in res.outputs.items():
                policy.setdefault(k, []).append(v[0].cpu().numpy())
            obs, reward, term, trunc, _ = env.step(action)
            rows["rew"].append(float(reward))
            rows["term"].append(bool(term))
            rows["trunc"].append(bool(trunc))
            if record:
                frames.append(env.render())
            state = res.state
            t += 1
            if term or trunc or (max_steps is not None and t >= max_steps):
                break
    finally:
        env.close()
    return Trajectory(
        observations=np.stack(rows["obs"]),
        actions=np.stack(rows["act"]),
        rewards=np.asarray(rows["rew"]),
        terminated=np.asarray(rows["term"]),
        truncated=np.asarray(rows["trunc"]),
        frames=np.stack(frames) if record else None,
        activity=Activity.concat(activity),  # (T, N) per field
        policy={k: np.stack(v) for k, v in policy.items()},
        env=env_id,
        seed=seed,
        meta=meta or {},
    )
