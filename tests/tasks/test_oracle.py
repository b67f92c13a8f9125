"""The same scripted policy, reading only observations, scores the same trial accuracy on
snrl.tasks and on NeuroGym's env (snrl's vector env of it), trials scored by snrl's
TrialTracker on both."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("neurogym")
import snrl.tasks as tasks  # noqa: E402
from snrl.envs import make_vector_env  # noqa: E402
from snrl.envs.trials import TrialTracker, summarize_trials  # noqa: E402
from tests.tasks.oracles import Oracle  # noqa: E402


def oracle_accuracy(envs, env_id: str, n_trials: int, seed: int = 0, oracle=None) -> float:
    n = envs.num_envs
    oracle = Oracle(env_id, n) if oracle is None else oracle
    tracker = TrialTracker(n)
    obs, info = envs.reset(seed=seed)
    tracker.reset(info)
    trials = []
    while len(trials) < n_trials:
        actions = oracle(obs)
        obs, _, terminated, truncated, info = envs.step(actions)
        trials += tracker.step(actions, info)
        new = np.asarray(info.get("new_trial", np.zeros(n, bool)), bool)
        if "_new_trial" in info:
            new &= np.asarray(info["_new_trial"], bool)
        oracle.forget(new | terminated | truncated)
    envs.close()
    return summarize_trials(trials)["accuracy"]


#: (task, trials, tolerance): the tolerance is about 3 standard errors of the difference
TASKS = [
    ("PerceptualDecisionMaking-v0", 3000, 0.03),
    ("GoNogo-v0", 600, 0.01),
    ("DelayMatchSample-v0", 600, 0.01),
    ("ContextDecisionMaking-v0", 3000, 0.03),
    ("DelayComparison-v0", 3000, 0.03),
    ("IntervalDiscrimination-v0", 600, 0.01),
    ("ReadySetGo-v0", 600, 0.01),
    ("DualDelayMatchSample-v0", 600, 0.01),
]


@pytest.mark.parametrize(("env_id", "n_trials", "tol"), TASKS)
def test_oracle_accuracy_matches_neurogym(env_id, n_trials, tol):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ng = oracle_accuracy(make_vector_env(env_id, 32, seed=0), env_id, n_trials)
    ours = oracle_accuracy(tasks.make_vector_env(env_id, 32, seed=0), env_id, n_trials)
    assert abs(ours - ng) <= tol, (ours, ng)
    assert 0.5 < ours  # the oracle does the task
