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
from snrl.envs.trials import TrialTracker, fixation_channel, summarize_trials  # noqa: E402
from tests.tasks.oracles import Oracle  # noqa: E402


def oracle_accuracy(envs, env_id: str, n_trials: int, seed: int = 0, oracle=None) -> float:
    return oracle_summary(envs, env_id, n_trials, seed, oracle)["accuracy"]


def oracle_summary(envs, env_id: str, n_trials: int, seed: int = 0, oracle=None) -> dict:
    """:func:`snrl.envs.trials.summarize_trials` of the oracle's first ``n_trials`` trials,
    and the trials (``"trials"``)."""
    n = envs.num_envs
    oracle = Oracle(env_id, n) if oracle is None else oracle
    tracker = TrialTracker(n)
    channel = fixation_channel(envs)  # None: NeuroGym's yang19 envs name no channels
    obs, info = envs.reset(seed=seed)
    tracker.reset(info)
    trials = []
    while len(trials) < n_trials:
        actions = oracle(obs)
        cue = None if channel is None else np.asarray(obs)[:, channel] > 0.5
        obs, _, terminated, truncated, info = envs.step(actions)
        trials += tracker.step(actions, info, cue=cue)
        new = np.asarray(info.get("new_trial", np.zeros(n, bool)), bool)
        if "_new_trial" in info:
            new &= np.asarray(info["_new_trial"], bool)
        oracle.forget(new | terminated | truncated)
    envs.close()
    return {**summarize_trials(trials), "trials": trials}


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
        ng = oracle_summary(make_vector_env(env_id, 32, seed=0), env_id, n_trials)
    ours = oracle_summary(tasks.make_vector_env(env_id, 32, seed=0), env_id, n_trials)
    assert abs(ours["accuracy"] - ng["accuracy"]) <= tol, (ours, ng)
    assert 0.5 < ours["accuracy"]  # the oracle does the task
    # it answers only in the response period: no trial counts as a fixation break, on
    # either engine (DualDelayMatchSample has no decision period: nothing to break)
    for s in (ng, ours):
        if env_id == "DualDelayMatchSample-v0":
            assert np.isnan(s["fixation_breaks"])
        else:
            assert s["fixation_breaks"] == 0.0, s["fixation_breaks"]
        assert s["accuracy_fixation_held"] == s["accuracy"]


class _Eager:
    """Responds (action 1) on every step: it leaves fixation in every trial."""

    def __call__(self, obs):
        return np.ones(len(obs), np.int64)

    def forget(self, mask):
        pass


@pytest.mark.parametrize("env_id", ["PerceptualDecisionMaking-v0", "yang19.dm1-v0"])
def test_an_agent_that_never_fixates_breaks_every_trial(env_id):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ng = oracle_summary(make_vector_env(env_id, 8, seed=0), env_id, 64, oracle=_Eager())
    ours = oracle_summary(tasks.make_vector_env(env_id, 8, seed=0), env_id, 64, oracle=_Eager())
    for s in (ng, ours):
        # every trial but the first of an episode, whose fixation step NeuroGym's reset took
        # (PerceptualDecisionMaking shows the cue in its 100 ms fixation period only)
        later = [t["fixation_break"] for t in s["trials"] if t["index"] > 0]
        assert later and all(later)
        # right on some trials, and by the held-fixation count at most on the first ones
        assert s["accuracy"] > 0
        assert s["accuracy_fixation_held"] <= 8 / len(s["trials"])
