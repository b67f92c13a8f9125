"""EvidenceAccumulation-v0 (Morcos & Harvey, 2016; Bellec et al., 2020): hand-written tables
of a trial, the draws, a counting oracle (all right), guessing (half right), a random policy
(13/27 right), and its single env (no NeuroGym)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import snrl.tasks as tasks
from snrl.envs.timing import env_time_step
from snrl.envs.trials import TrialTracker, summarize_trials
from snrl.errors import UserError
from snrl.tasks.spec import build_trials

ID = "EvidenceAccumulation-v0"


def test_one_trial_table_by_hand():
    """Cues L R R L R R L (4 right): at 50 ms per step each cue slot is one silent step and two
    cue steps (steps 0-20), then 21 delay steps and 3 decision steps, 45 in all."""
    cues = [0, 1, 1, 0, 1, 1, 0]
    fixed = {f"cue{k + 1}": c for k, c in enumerate(cues)}
    tr = build_trials(tasks.make_spec(ID), torch.Generator().manual_seed(0), 2, fixed=fixed)
    assert tr.length.tolist() == [45, 45]
    assert tr.values["n_right"].tolist() == [4.0, 4.0]
    assert tr.values["ground_truth"].tolist() == [1.0, 1.0]  # more right cues: right
    left = [0] * 45
    right = [0] * 45
    for k, c in enumerate(cues):
        for t in (3 * k + 1, 3 * k + 2):
            (right if c else left)[t] = 1
    fixation = [1] * 42 + [0] * 3
    want = np.array([fixation, left, right], dtype=np.float32).T
    np.testing.assert_array_equal(tr.obs[0].numpy(), want)
    np.testing.assert_array_equal(tr.gt[0].numpy(), [0] * 42 + [2] * 3)
    reward, ends = tr.outcome[0, ..., 0].numpy(), tr.outcome[0, ..., 1].numpy()
    np.testing.assert_allclose(reward[0], [0.0, -0.1, -0.1])  # breaking fixation: abort
    np.testing.assert_array_equal(ends[:42], 0.0)  # ... without ending the trial
    np.testing.assert_allclose(reward[42], [0.0, 0.0, 1.0])  # right is right
    np.testing.assert_array_equal(ends[42], [0.0, 1.0, 1.0])  # a response ends the trial
    np.testing.assert_array_equal(ends[44], [1.0, 1.0, 1.0])  # the last step ends it anyway


def test_timing_and_options_are_ms():
    spec = tasks.make_spec(ID, dt=25, timing={"delay": 500})
    tr = build_trials(spec, torch.Generator().manual_seed(0), 1)
    assert tr.length.item() == 7 * 6 + 20 + 6  # 150 ms cue slots, 500 ms delay, 150 ms decision
    with pytest.raises(UserError, match="p_cue"):
        tasks.make_spec(ID, p_cue=1.5)
    with pytest.raises(UserError, match="no period"):
        tasks.make_spec(ID, timing={"cue8": 100})


def test_draws_favour_a_side_with_p_cue():
    tr = build_trials(tasks.make_spec(ID), torch.Generator().manual_seed(1), 20_000)
    v = tr.values
    cues = torch.stack([v[f"cue{k}"] for k in range(1, 8)], dim=1)
    on_favoured = (cues == v["favoured"][:, None]).double().mean().item()
    assert on_favoured == pytest.approx(0.7, abs=0.01)  # 140,000 cues: SE 0.0012
    assert v["ground_truth"].mean().item() == pytest.approx(0.5, abs=0.015)
    assert torch.equal(v["n_right"], cues.sum(1))
    assert torch.equal(v["ground_truth"], (cues.sum(1) >= 4).double())
    # the favoured side wins P(Binomial(7, 0.7) >= 4) = 0.874 of trials
    wins = (v["ground_truth"] == v["favoured"]).double().mean().item()
    assert wins == pytest.approx(0.874, abs=0.01)


def _accuracy(policy, n_trials: int, seed: int, n_envs: int = 16, **kwargs) -> float:
    envs = tasks.make_vector_env(ID, n_envs, seed=seed, env_kwargs=kwargs)
    tracker = TrialTracker(n_envs)
    obs, info = envs.reset(seed=seed)
    tracker.reset(info)
    count = np.zeros((n_envs, 2))
    trials: list[dict] = []
    while len(trials) < n_trials:
        actions = policy(obs, count)
        obs_next, _, terminated, truncated, info = envs.step(actions)
        trials += tracker.step(actions, info)
        new = np.asarray(info["new_trial"], bool) | terminated | truncated
        count[new] = 0.0
        obs = obs_next
    envs.close()
    return summarize_trials(trials)["accuracy"]


def _counting_oracle(obs, count):
    """Count the cue steps of each side; when the fixation input goes off, choose the side
    with more."""
    count += obs[:, 1:3] > 0.5
    go = obs[:, 0] < 0.5
    return np.where(go, 1 + np.argmax(count, axis=1), 0)


def test_counting_oracle_is_always_right():
    assert _accuracy(_counting_oracle, 500, seed=0) == 1.0


def test_counting_oracle_with_noise_still_counts():
    """sigma 1 at 50 ms: noise of std 0.14 per step, far from the 0.5 the oracle cuts at."""
    assert _accuracy(_counting_oracle, 300, seed=2, sigma=1.0) == 1.0


def test_guessing_is_right_half_the_time():
    rng = np.random.default_rng(0)

    def guess(obs, count):
        return np.where(obs[:, 0] < 0.5, rng.integers(1, 3, len(obs)), 0)

    acc = _accuracy(guess, 2000, seed=1)
    assert acc == pytest.approx(0.5, abs=0.035)  # 3 standard errors of 2,000 trials


def test_random_actions_score_13_of_27():
    """Uniform actions: the first of the 3 decision steps answers with probability 2/3 (right
    half of that), else the next: (1/3)(1 + 1/3 + 1/9) = 13/27 = 0.481."""
    rng = np.random.default_rng(1)
    acc = _accuracy(lambda obs, count: rng.integers(0, 3, len(obs)), 2000, seed=3)
    assert acc == pytest.approx(13 / 27, abs=0.035)


def test_single_env_without_neurogym():
    env = tasks.make_env(ID)
    assert isinstance(env, tasks.TaskEnv)
    assert env_time_step(env) == pytest.approx(0.05)  # the agents read the 50 ms clock
    obs, info = env.reset(seed=0)
    assert obs.shape == (3,) and "trial_start" in info
    cond = info["trial_start"]["conditions"]
    n_right = sum(int(cond[f"cue{k}"]) for k in range(1, 8))
    assert int(cond["n_right"]) == n_right
    assert int(cond["ground_truth"]) == int(n_right >= 4)
    env.close()
